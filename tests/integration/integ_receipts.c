/* integ_receipts.c: helpers of the read receipt and presence tests
 * (integ_receipts.h). */
#include "integ_receipts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

harness_client *rcp_connect(ts_broker *b, const char *id, const char *user, bool pushes)
{
    harness_client_opts o = {.client_id = id, .username = user, .pushes = pushes};
    return harness_client_connect_opts(b, &o);
}

/* Whether m is the answer to the command sent with correlationData arg. */
static bool is_answer_to(const harness_msg *m, void *arg)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"correlationData\":\"%s\"", (const char *)arg);
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && strstr(m->payload, needle) != NULL;
}

/* Sends one command (a JSON object text without its closing brace) with a
 * fresh correlationData and returns its entry's response, which the caller
 * frees; pushes arriving meanwhile stay queued. */
cJSON *rcp_ask(harness_client *c, const char *cmd)
{
    static int seq;
    char corr[32], req[2048];
    snprintf(corr, sizeof corr, "q%d", ++seq);
    snprintf(req, sizeof req, "{\"commands\":[%s,\"correlationData\":\"%s\"}]}", cmd, corr);
    harness_client_publish(c, HARNESS_CONTROL_TOPIC, req, 1);
    harness_msg *m = harness_client_receive_if(c, is_answer_to, corr, WAIT_MS);
    if (m == NULL)
        FAILF("%s: no answer to %s", harness_client_id(c), req);
    cJSON *root = harness_json_object(m);
    harness_msg_free(m);
    return root;
}

/* Publishes n messages to the group from c. */
void rcp_send_n(harness_client *c, int n)
{
    for (int i = 0; i < n; i++)
        harness_client_publish(c, "chat/" GROUP, "{\"body\":\"hi\"}", 1);
}

/* A read on the topic, at QoS 1 (applied when this returns). */
void rcp_read_topic(harness_client *c, int64_t id)
{
    char payload[32];
    snprintf(payload, sizeof payload, "%lld", (long long)id);
    harness_client_publish(c, "chat/" GROUP "/read", payload, 1);
}

/* The read command; checks the answer's marker and cursor. */
void rcp_read_command(harness_client *c, int64_t id, int64_t want_read, int64_t want_acked)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":%lld",
             (long long)id);
    cJSON *resp = rcp_ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "read", GROUP);
    ASSERTF(harness_json_int(e, "read") == want_read && harness_json_int(e, "acked") == want_acked,
            "%s read %lld: read %lld acked %lld, want %lld %lld", harness_client_id(c),
            (long long)id, (long long)harness_json_int(e, "read"),
            (long long)harness_json_int(e, "acked"), (long long)want_read, (long long)want_acked);
    cJSON_Delete(resp);
}

/* The device's cursor in the group, as sync reports it. */
int64_t rcp_cursor_of(harness_client *c)
{
    int64_t acked = -1;
    cJSON *resp = rcp_ask(c, "{\"command\":\"sync\",\"replay\":false");
    ASSERTF(harness_sync_find(harness_response_only(resp), GROUP, NULL, &acked, NULL),
            "%s: sync does not list " GROUP, harness_client_id(c));
    cJSON_Delete(resp);
    return acked;
}

/* receipts as "name:id name:id ..." (in the answer's order), its member
 * count and more; extra is appended to the command (e.g. ,"limit":1). */
static void receipts(harness_client *c, const char *extra, char *out, size_t cap, int64_t *members,
                     bool *more)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"%s", extra);
    cJSON *resp = rcp_ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    const cJSON *r;
    harness_expect_ok(e, "receipts", GROUP);
    out[0] = '\0';
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(e, "reads"))
    {
        ASSERTF(cJSON_IsNumber(r), "receipts: %s is not a number", r->string);
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s:%lld", n ? " " : "", r->string, (long long)r->valuedouble);
    }
    *members = harness_json_int(e, "members");
    *more = harness_json_bool(e, "more");
    cJSON_Delete(resp);
}

void rcp_expect_receipts(harness_client *c, const char *extra, const char *want,
                         int64_t want_members, bool want_more)
{
    char got[1024];
    int64_t members = -1;
    bool more = !want_more;
    receipts(c, extra, got, sizeof got, &members, &more);
    ASSERTF(strcmp(got, want) == 0 && members == want_members && more == want_more,
            "receipts%s: \"%s\" members %lld more %d; want \"%s\" %lld %d", extra, got,
            (long long)members, more, want, (long long)want_members, want_more);
}

/* The presence command: online names joined with spaces, and the count. */
void rcp_expect_online(harness_client *c, const char *want, int64_t want_members)
{
    char got[1024] = "";
    const cJSON *n;
    cJSON *resp = rcp_ask(c, "{\"command\":\"presence\",\"group\":\"" GROUP "\"");
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "presence", GROUP);
    cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(e, "online"))
    {
        size_t len = strlen(got);
        snprintf(got + len, sizeof got - len, "%s%s", len ? " " : "", cJSON_GetStringValue(n));
    }
    int64_t members = harness_json_int(e, "members");
    ASSERTF(strcmp(got, want) == 0 && members == want_members,
            "presence: online \"%s\" of %lld; want \"%s\" of %lld", got, (long long)members, want,
            (long long)want_members);
    cJSON_Delete(resp);
}

/* The only entry of a refused command: error why, and no other field but
 * command, group and correlationData (nothing learnt). */
void rcp_expect_refused(harness_client *c, const char *cmd, const char *command, const char *why)
{
    cJSON *resp = rcp_ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    const cJSON *f;
    ASSERTF(strcmp(harness_json_str(e, "command"), command) == 0 &&
                strcmp(harness_json_str(e, "error"), why) == 0,
            "%s: expected the error \"%s\"", command, why);
    cJSON_ArrayForEach(f, e)
    {
        ASSERTF(!strcmp(f->string, "command") || !strcmp(f->string, "group") ||
                    !strcmp(f->string, "correlationData") || !strcmp(f->string, "error"),
                "%s: a refusal that says more: field %s", command, f->string);
    }
    cJSON_Delete(resp);
}

bool rcp_is_push(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && harness_is_push(m->payload, m->len);
}

static int seen_slot(struct rcp_seen *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0)
            return i;
    ASSERT(s->n < MEMBERS_MAX);
    snprintf(s->name[s->n], sizeof s->name[0], "%s", name);
    s->read[s->n] = -1;
    s->online[s->n] = -1;
    return s->n++;
}

/* Folds one push into s, checking its shape: every entry names GROUP, a
 * reads entry holds numbers that never go back, a presence entry names
 * nobody twice. */
static void fold(struct rcp_seen *s, const harness_msg *m)
{
    cJSON *root = harness_json_object(m);
    const cJSON *e, *x;
    s->pushes++;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "responses"))
    {
        const char *cmd = harness_json_str(e, "command");
        ASSERTF(strcmp(harness_json_str(e, "group"), GROUP) == 0, "a push about another group");
        if (strcmp(cmd, "reads") == 0) {
            s->reads_entries++;
            cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(e, "reads"))
            {
                int i = seen_slot(s, x->string);
                ASSERTF(cJSON_IsNumber(x) && x->valuedouble >= (double)s->read[i],
                        "a pushed marker of %s that is not a number or went back", x->string);
                s->read[i] = (int64_t)x->valuedouble;
            }
            continue;
        }
        const cJSON *on = cJSON_GetObjectItemCaseSensitive(e, "online");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "offline");
        ASSERTF(cJSON_IsArray(on) && cJSON_IsArray(off), "a presence push without both lists");
        cJSON_ArrayForEach(x, on) s->online[seen_slot(s, cJSON_GetStringValue(x))] = 1;
        cJSON_ArrayForEach(x, off) s->online[seen_slot(s, cJSON_GetStringValue(x))] = 0;
    }
    cJSON_Delete(root);
}

/* Folds pushes into s until member's pushed state is online (1, 0), or its
 * pushed marker is read (online < 0), within wait_ms. */
void rcp_wait_push_ms(harness_client *c, struct rcp_seen *s, const char *member, int online,
                      int64_t read, int wait_ms)
{
    int64_t until = ts_now_ms() + wait_ms;
    for (;;) {
        int i = seen_slot(s, member);
        if ((online >= 0 && s->online[i] == online) || (online < 0 && s->read[i] == read))
            return;
        int64_t left = until - ts_now_ms();
        harness_msg *m =
            left > 0 ? harness_client_receive_if(c, rcp_is_push, NULL, (int)left) : NULL;
        if (m == NULL)
            FAILF("%s: no push said %s is %s", harness_client_id(c), member,
                  online == 1   ? "online"
                  : online == 0 ? "offline"
                                : "read up to the id expected");
        fold(s, m);
        harness_msg_free(m);
    }
}

void rcp_wait_push(harness_client *c, struct rcp_seen *s, const char *member, int online,
                   int64_t read)
{
    rcp_wait_push_ms(c, s, member, online, read, WAIT_MS);
}

/* Fails if a push comes within ms. */
void rcp_expect_no_push(harness_client *c, int ms, const char *what)
{
    harness_msg *m = harness_client_receive_if(c, rcp_is_push, NULL, ms);
    if (m != NULL)
        FAILF("%s: unexpected push (%s): %s", harness_client_id(c), what, m->payload);
}
