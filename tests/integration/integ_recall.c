/* integ_recall: recall and edit (protocol v1.2) against a real broker, one
 * case per run (the argument), each on a broker of its own (on PostgreSQL
 * in the pg stage):
 *   online    the other members subscribed: each gets M live, in id order
 *             after N, and history and fetch show N's new version
 *   offline   a member away during the changes catches up later: N's new
 *             version at N, then M
 *   catching  a member in the middle of its catch-up (a window of one
 *             page) when the changes come: what it holds, with the changes
 *             applied, is what the store holds
 *   trimmed   a message retention removed cannot be edited or recalled
 *             (no such message)
 *   cid       a recalled message's cid stays taken: a retry is answered
 *             with the tombstone, never stored again
 *   rights    with a password_file (verified names): the sender, not
 *             another member, nor a non-member; an admin may recall (not
 *             edit) anyone's message without being a member; a change
 *             cannot be changed, a tombstone not recalled or edited again
 *   window    recall_seconds and edit_seconds: too late for the sender
 *             (the plugin's clock moved ahead), never for an admin's
 *             recall; 0 turns recall off
 *   kill9     the broker killed with SIGKILL while it changes messages
 *             (recalls of edited messages among them), again and again:
 *             every change paired with its carrier, and no recalled
 *             message's edit holding its text
 *   export    a recall takes the recalled texts out of every stored copy,
 *             the messages that carried its edits included (fetch,
 *             history, catch-up, export, after a restart); mqchat-store
 *             export and import carry tombstones (with their cid, still
 *             taken), recalled edits and edited versions; an import whose
 *             changes do not pair up is refused
 *   bound     at most CHAT_PROTO_EDITS_MAX edits of one message, all of
 *             them rewritten by its recall
 *   onerequest  edits of a message and its recall in one request: every
 *             subscriber gets each id live, in order, the edits as
 *             recalled edits (their text taken back before they went
 *             out), with the broker's ticks and without them
 *             (per_listener_settings true on 2.0.11)
 */
#include "harness.h"
#include "integ_ops.h"
/* Both name their wait; integ_sec.h's (5 s) is the one used here. */
#undef WAIT_MS
#include "integ_sec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GROUP "room1"
#define TOPIC "chat/" GROUP

/* ------------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

static harness_client *member(ts_broker *b, const char *id, const char *user)
{
    harness_client_opts o = {.client_id = id, .username = user};
    return harness_client_connect_opts(b, &o);
}

/* Sends one command (a JSON object text) and returns its entry, as a
 * detached copy the caller frees with cJSON_Delete. */
static cJSON *command(harness_client *c, const char *cmd)
{
    char req[4096];
    snprintf(req, sizeof(req), "{\"commands\":[%s]}", cmd);
    cJSON *resp = harness_request(c, req, WAIT_MS);
    cJSON *e = cJSON_Duplicate(harness_response_only(resp), true);
    cJSON_Delete(resp);
    ASSERT(e != NULL);
    return e;
}

/* A recall of id by c: returns M; fails unless the answer is
 * {"command":"recall","group":GROUP,"recalled":id,"by":M}. */
static int64_t recall_ok(harness_client *c, int64_t id)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "{\"command\":\"recall\",\"group\":\"" GROUP "\",\"id\":%lld}",
             (long long)id);
    cJSON *e = command(c, cmd);
    harness_expect_ok(e, "recall", GROUP);
    ASSERTF(harness_json_int(e, "recalled") == id, "recalled %lld, asked %lld",
            (long long)harness_json_int(e, "recalled"), (long long)id);
    int64_t m = harness_json_int(e, "by");
    ASSERTF(m > id, "recall of %lld by %lld", (long long)id, (long long)m);
    cJSON_Delete(e);
    return m;
}

/* An edit of id to body (a JSON string's contents) by c: returns M. */
static int64_t edit_ok(harness_client *c, int64_t id, const char *body)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "{\"command\":\"edit\",\"group\":\"" GROUP "\",\"id\":%lld,\"body\":\"%s\"}",
             (long long)id, body);
    cJSON *e = command(c, cmd);
    harness_expect_ok(e, "edit", GROUP);
    ASSERT(harness_json_int(e, "edited") == id);
    int64_t m = harness_json_int(e, "by");
    ASSERT(m > id);
    cJSON_Delete(e);
    return m;
}

/* A recall (or edit) of id by c that must be refused with why. */
static void change_refused(harness_client *c, bool recall, int64_t id, const char *why)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "{\"command\":\"%s\",\"group\":\"" GROUP "\",\"id\":%lld%s}",
             recall ? "recall" : "edit", (long long)id, recall ? "" : ",\"body\":\"x\"");
    cJSON *e = command(c, cmd);
    harness_expect_error(e, recall ? "recall" : "edit", GROUP, NULL, why);
    cJSON_Delete(e);
}

static bool on_group_topic(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, TOPIC) == 0;
}

/* The next envelope c receives live on TOPIC, parsed. */
static cJSON *live(harness_client *c)
{
    harness_msg *m = harness_client_receive_if(c, on_group_topic, NULL, WAIT_MS);
    ASSERTF(m != NULL, "%s received no message on " TOPIC, harness_client_id(c));
    cJSON *env = harness_json_object(m);
    harness_msg_free(m);
    return env;
}

/* Publishes body (a whole payload) at QoS 1 and returns the id c then
 * receives for it live (c is subscribed). */
static int64_t send_msg(harness_client *c, const char *payload)
{
    harness_client_publish(c, TOPIC, payload, 1);
    cJSON *env = live(c);
    int64_t id = harness_json_int(env, "id");
    cJSON_Delete(env);
    return id;
}

/* Whether env is N's tombstone exactly: id, group, from, ts and
 * "recalled": true, nothing else. */
static void expect_tombstone(const cJSON *env, int64_t id, const char *from)
{
    int fields = 0;
    for (const cJSON *it = env->child; it; it = it->next) {
        fields++;
    }
    ASSERTF(harness_json_int(env, "id") == id, "tombstone of %lld has id %lld", (long long)id,
            (long long)harness_json_int(env, "id"));
    ASSERT(strcmp(harness_json_str(env, "group"), GROUP) == 0);
    ASSERT(strcmp(harness_json_str(env, "from"), from) == 0);
    ASSERT(harness_json_int(env, "ts") > 0);
    ASSERT(harness_json_bool(env, "recalled"));
    char *text = cJSON_PrintUnformatted(env);
    ASSERTF(fields == 5, "a tombstone holds id, group, from, ts, recalled alone: %s", text);
    free(text);
}

/* Whether env is the message carrying a change of n by from: "recall": n
 * (no other field of its own), or "edit": n with body. */
static void expect_carrier(const cJSON *env, int64_t id, bool recall, int64_t n, const char *from,
                           const char *body)
{
    ASSERTF(harness_json_int(env, "id") == id, "expected message %lld, got %lld", (long long)id,
            (long long)harness_json_int(env, "id"));
    ASSERT(strcmp(harness_json_str(env, "from"), from) == 0);
    ASSERT(harness_json_int(env, recall ? "recall" : "edit") == n);
    if (recall) {
        ASSERT(cJSON_GetObjectItemCaseSensitive(env, "body") == NULL);
    } else {
        ASSERT(strcmp(harness_json_str(env, "body"), body) == 0);
    }
}

/* The group's messages, oldest first, as fetch pages give them from 0
 * (a detached array the caller frees). */
static cJSON *store_view(harness_client *c)
{
    cJSON *all = cJSON_CreateArray();
    int64_t after = 0;
    bool more = true;
    for (int i = 0; i < 1000 && more; i++) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd),
                 "{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":%lld,\"limit\":100}",
                 (long long)after);
        cJSON *e = command(c, cmd);
        harness_expect_ok(e, "fetch", GROUP);
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
        const cJSON *it = NULL;
        cJSON_ArrayForEach(it, msgs)
        {
            ASSERTF(harness_json_int(it, "id") == after + 1, "fetch: id %lld after %lld",
                    (long long)harness_json_int(it, "id"), (long long)after);
            after++;
            cJSON_AddItemToArray(all, cJSON_Duplicate(it, true));
        }
        more = harness_json_bool(e, "more");
        cJSON_Delete(e);
    }
    return all;
}

/* The entry of history from the head, newest first (detached). */
static cJSON *history(harness_client *c)
{
    cJSON *e = command(c, "{\"command\":\"history\",\"group\":\"" GROUP "\",\"limit\":100}");
    harness_expect_ok(e, "history", GROUP);
    return e;
}

/* A client's view: envelopes by id, as a client keeps them, with each
 * change applied to the message it names as the client library does. */
#define VIEW_MAX 512
struct view {
    cJSON *msg[VIEW_MAX];
    int64_t hi; /* highest id held with none missing below */
};

static void view_free(struct view *v)
{
    for (int i = 0; i < VIEW_MAX; i++) {
        cJSON_Delete(v->msg[i]);
    }
}

/* Applies the change env carries to the message it names, if held: a
 * recall leaves id, group, from, ts and "recalled"; an edit replaces the
 * fields but those and the cid with the carrier's, and "edited" is its ts,
 * unless the held version is newer or recalled. */
static void view_apply(struct view *v, const cJSON *env)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(env, "recall");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(env, "edit");
    int64_t n = (int64_t)(r ? r->valuedouble : e ? e->valuedouble : 0);
    if (n <= 0 || n >= VIEW_MAX || !v->msg[n]) {
        return;
    }
    cJSON *old = v->msg[n];
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(old, "recalled"))) {
        return;
    }
    /* an edit's carrier that a recall of n rewrote applies as that recall */
    if (e && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(env, "recalled"))) {
        r = e;
        e = NULL;
    }
    const cJSON *edited = cJSON_GetObjectItemCaseSensitive(old, "edited");
    int64_t ts = harness_json_int(env, "ts");
    if (e && edited && edited->valuedouble > (double)ts) {
        return; /* the held version is a later edit's */
    }
    const cJSON *listed = NULL;
    cJSON_ArrayForEach(listed, cJSON_GetObjectItemCaseSensitive(old, "edits"))
    {
        if (e && listed->valuedouble >= (double)harness_json_int(env, "id")) {
            return; /* the held version is this edit's, or a later one's */
        }
    }
    cJSON *nw = cJSON_CreateObject();
    static const char *const keep[] = {"id", "group", "from", "ts", "cid"};
    for (size_t k = 0; k < (r ? 4u : 5u); k++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(old, keep[k]);
        if (f) {
            cJSON_AddItemToObject(nw, keep[k], cJSON_Duplicate(f, true));
        }
    }
    if (r) {
        cJSON_AddTrueToObject(nw, "recalled");
    } else {
        for (const cJSON *f = env->child; f; f = f->next) {
            if (strcmp(f->string, "id") && strcmp(f->string, "group") &&
                strcmp(f->string, "from") && strcmp(f->string, "ts") && strcmp(f->string, "edit")) {
                cJSON_AddItemToObject(nw, f->string, cJSON_Duplicate(f, true));
            }
        }
        cJSON_AddNumberToObject(nw, "edited", (double)ts);
        const cJSON *was = cJSON_GetObjectItemCaseSensitive(old, "edits");
        cJSON *list = was ? cJSON_Duplicate(was, true) : cJSON_CreateArray();
        cJSON_AddItemToArray(list, cJSON_CreateNumber(harness_json_int(env, "id")));
        cJSON_AddItemToObject(nw, "edits", list);
    }
    cJSON_Delete(old);
    v->msg[n] = nw;
}

/* Takes one envelope (live or from a page) into the view: held once, in
 * id order; a change applied when its message comes in order. */
static void view_take(struct view *v, const cJSON *env)
{
    int64_t id = harness_json_int(env, "id");
    ASSERTF(id > 0 && id < VIEW_MAX, "id %lld", (long long)id);
    if (v->msg[id]) {
        return;
    }
    v->msg[id] = cJSON_Duplicate(env, true);
    while (v->hi + 1 < VIEW_MAX && v->msg[v->hi + 1]) {
        v->hi++;
        view_apply(v, v->msg[v->hi]);
    }
}

/* The view must equal the store's messages, each read as JSON. */
static void view_expect_store(const struct view *v, harness_client *c)
{
    cJSON *all = store_view(c);
    int n = cJSON_GetArraySize(all);
    ASSERTF(v->hi == n, "the view holds 1..%lld, the store 1..%d", (long long)v->hi, n);
    for (int i = 0; i < n; i++) {
        const cJSON *s = cJSON_GetArrayItem(all, i);
        if (!cJSON_Compare(v->msg[i + 1], s, true)) {
            char *a = cJSON_PrintUnformatted(v->msg[i + 1]), *b = cJSON_PrintUnformatted(s);
            FAILF("message %d: the client holds %s, the store %s", i + 1, a, b);
        }
    }
    cJSON_Delete(all);
}

/* ------------------------------------------------------------------------
 * Cases
 * --------------------------------------------------------------------- */

static void case_online(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client *bob = member(b, "bob-phone", "bob");
    harness_client *carol = member(b, "carol-phone", "carol");
    harness_client *rs[] = {bob, carol, alice};
    for (int i = 0; i < 3; i++) {
        harness_client_subscribe(rs[i], TOPIC, 1);
    }
    int64_t n1 = send_msg(alice, "{\"cid\":\"a-1\",\"body\":\"wrong group\"}");
    int64_t n2 = send_msg(alice, "{\"body\":\"see you at 9\",\"pic\":[1,2]}");
    int64_t m1 = recall_ok(alice, n1);
    int64_t m2 = edit_ok(alice, n2, "see you at 10");
    ASSERT(n1 == 1 && n2 == 2 && m1 == 3 && m2 == 4);
    /* Each member gets every id once, in order: N before M. */
    for (int i = 0; i < 3; i++) {
        for (int64_t id = 1; id <= 4; id++) {
            if (rs[i] == alice && id <= 2) {
                continue; /* taken by send_msg */
            }
            cJSON *env = live(rs[i]);
            ASSERTF(harness_json_int(env, "id") == id, "%s got %lld, expected %lld",
                    harness_client_id(rs[i]), (long long)harness_json_int(env, "id"),
                    (long long)id);
            if (id == 3) {
                expect_carrier(env, 3, true, 1, "alice", NULL);
            } else if (id == 4) {
                expect_carrier(env, 4, false, 2, "alice", "see you at 10");
                ASSERT(cJSON_GetObjectItemCaseSensitive(env, "pic") == NULL);
            }
            cJSON_Delete(env);
        }
    }
    /* History shows the current versions; the old text is nowhere. */
    cJSON *h = history(bob);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(h, "messages");
    ASSERT(cJSON_GetArraySize(msgs) == 4);
    char *text = cJSON_PrintUnformatted(h);
    ASSERTF(strstr(text, "wrong group") == NULL && strstr(text, "a-1") == NULL &&
                strstr(text, "at 9") == NULL,
            "history still shows what was recalled or edited: %s", text);
    free(text);
    expect_tombstone(cJSON_GetArrayItem(msgs, 3), 1, "alice");
    const cJSON *v2 = cJSON_GetArrayItem(msgs, 2);
    ASSERT(strcmp(harness_json_str(v2, "body"), "see you at 10") == 0);
    ASSERT(harness_json_int(v2, "edited") == harness_json_int(cJSON_GetArrayItem(msgs, 0), "ts"));
    cJSON_Delete(h);
    /* The changes count like any message: unread and read markers are ids. */
    cJSON *s = command(carol, "{\"command\":\"sync\",\"replay\":false}");
    int64_t head = 0;
    ASSERT(harness_sync_find(s, GROUP, &head, NULL, NULL) && head == 4);
    cJSON_Delete(s);
    for (int i = 0; i < 3; i++) {
        harness_client_disconnect(rs[i]);
    }
    ts_broker_destroy(b);
}

/* Collects a catch-up's envelopes into a view. */
static void collect(void *arg, const char *group, const cJSON *env)
{
    (void)group;
    view_take(arg, env);
}

static void case_offline(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client *bob = member(b, "bob-phone", "bob");
    harness_client_subscribe(alice, TOPIC, 1);
    harness_client_subscribe(bob, TOPIC, 1); /* joins: his cursor starts at 0 */
    harness_client_disconnect(bob);
    for (int i = 1; i <= 3; i++) {
        char p[64];
        snprintf(p, sizeof(p), "{\"cid\":\"a-%d\",\"body\":\"text %d\"}", i, i);
        ASSERT(send_msg(alice, p) == i);
    }
    ASSERT(recall_ok(alice, 2) == 4);
    ASSERT(edit_ok(alice, 3, "text three") == 5);
    /* bob comes back: his catch-up brings 1..5, N's new version at N. */
    bob = member(b, "bob-phone", "bob");
    harness_client_subscribe(bob, TOPIC, 1);
    struct view v = {0};
    harness_catchup cu = {.group = GROUP, .from = 1, .to = 5, .qos = 0};
    harness_catch_up(bob, &cu, 1, 100, WAIT_MS, collect, &v);
    expect_tombstone(v.msg[2], 2, "alice");
    ASSERT(strcmp(harness_json_str(v.msg[3], "body"), "text three") == 0);
    ASSERT(strcmp(harness_json_str(v.msg[3], "cid"), "a-3") == 0);
    expect_carrier(v.msg[4], 4, true, 2, "alice", NULL);
    expect_carrier(v.msg[5], 5, false, 3, "alice", "text three");
    view_expect_store(&v, bob);
    view_free(&v);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

static bool on_response_topic(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 || strcmp(m->topic, TOPIC) == 0;
}

static void case_catching(void)
{
    ts_broker *b = ts_broker_start(
        (const char *const[]){"page_size 5", "replay_window 1", "page_qos 1", NULL});
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client *bob = member(b, "bob-phone", "bob");
    harness_client_subscribe(alice, TOPIC, 1);
    harness_client_subscribe(bob, TOPIC, 1);
    harness_client_disconnect(bob);
    for (int i = 1; i <= 30; i++) {
        char p[64];
        snprintf(p, sizeof(p), "{\"body\":\"m%d\"}", i);
        ASSERT(send_msg(alice, p) == i);
    }
    /* bob reconnects: the first page comes, and with a window of one page
     * nothing more until he acks it. */
    bob = member(b, "bob-phone", "bob");
    harness_client_subscribe(bob, TOPIC, 1);
    struct view v = {0};
    harness_msg *m = harness_client_receive(bob, WAIT_MS);
    harness_page p;
    ASSERT(m != NULL && harness_page_parse(m, &p) && p.first == 1 && p.last == 5);
    const cJSON *it = NULL;
    cJSON_ArrayForEach(it, p.messages)
    {
        view_take(&v, it);
    }
    harness_page_free(&p);
    harness_msg_free(m);
    /* Now the changes: one of a message bob holds, one of a message still
     * to come in his catch-up. */
    int64_t r = recall_ok(alice, 3);
    int64_t e = edit_ok(alice, 12, "m12, fixed");
    ASSERT(r == 31 && e == 32);
    harness_ack(bob, GROUP, 5, 0);
    /* bob goes on: pages and live messages, in whatever order they come,
     * acking each page's last. */
    for (int i = 0; i < 200 && v.hi < 32; i++) {
        m = harness_client_receive_if(bob, on_response_topic, NULL, WAIT_MS);
        ASSERTF(m != NULL, "bob's catch-up stalled at %lld", (long long)v.hi);
        if (strcmp(m->topic, TOPIC) == 0) {
            cJSON *env = harness_json_object(m);
            view_take(&v, env);
            cJSON_Delete(env);
        } else if (harness_page_parse(m, &p)) {
            cJSON_ArrayForEach(it, p.messages)
            {
                view_take(&v, it);
            }
            harness_ack(bob, GROUP, p.last, 0);
            harness_page_free(&p);
        }
        harness_msg_free(m);
    }
    ASSERTF(v.hi == 32, "bob holds 1..%lld", (long long)v.hi);
    expect_tombstone(v.msg[3], 3, "alice");
    ASSERT(strcmp(harness_json_str(v.msg[12], "body"), "m12, fixed") == 0);
    view_expect_store(&v, bob);
    view_free(&v);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

static void case_trimmed(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"retention_count 2", NULL});
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client_subscribe(alice, TOPIC, 1);
    for (int i = 1; i <= 4; i++) {
        ASSERT(send_msg(alice, "{\"body\":\"x\"}") == i);
    }
    /* 1 and 2 are gone with retention; 9 never was. */
    change_refused(alice, false, 1, CHAT_PROTO_ERR_NO_MESSAGE);
    change_refused(alice, true, 2, CHAT_PROTO_ERR_NO_MESSAGE);
    change_refused(alice, false, 9, CHAT_PROTO_ERR_NO_MESSAGE);
    /* The kept one can; its change is a message that retention counts. */
    ASSERT(edit_ok(alice, 4, "y") == 5);
    change_refused(alice, false, 3, CHAT_PROTO_ERR_NO_MESSAGE);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

static void case_cid(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client *bob = member(b, "bob-phone", "bob");
    harness_client_subscribe(bob, TOPIC, 1);
    harness_client_publish(alice, TOPIC, "{\"cid\":\"a-1\",\"body\":\"oops\"}", 1);
    ASSERT(recall_ok(alice, 1) == 2);
    for (int64_t id = 1; id <= 2; id++) {
        cJSON *env = live(bob);
        ASSERT(harness_json_int(env, "id") == id);
        cJSON_Delete(env);
    }
    /* The retry (as an outbox would send it after a lost ack), and one
     * with another body: the cid is still taken, so each is answered to
     * alice as a duplicate of id 1, nothing is stored, and bob, who had id
     * 1 live, gets nothing again (a retry is delivered once); his history
     * holds the tombstone. */
    harness_client_publish(alice, TOPIC, "{\"cid\":\"a-1\",\"body\":\"oops\"}", 1);
    harness_expect_duplicate(alice, "room1", "a-1", 1, WAIT_MS);
    harness_client_publish(alice, TOPIC, "{\"cid\":\"a-1\",\"body\":\"back again\"}", 1);
    harness_expect_duplicate(alice, "room1", "a-1", 1, WAIT_MS);
    cJSON *h = history(bob);
    ASSERT(harness_json_int(h, "head") == 2);
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(h, "messages");
    expect_tombstone(cJSON_GetArrayItem(msgs, 1), 1, "alice");
    cJSON_Delete(h);
    harness_client_publish(alice, TOPIC, "{\"cid\":\"a-2\",\"body\":\"next\"}", 1);
    cJSON *env = live(bob);
    ASSERT(harness_json_int(env, "id") == 3);
    cJSON_Delete(env);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* A broker whose names the broker verifies: users in a password_file,
 * root an admin. */
static ts_broker *verified_broker(const char *const *opts)
{
    ts_broker_conf conf = {.lines = (const char *const[]){"password_file @DIR@/passwd", NULL},
                           .plugin_opts = opts,
                           .no_anonymous = true};
    ts_broker *b = ts_broker_create(&conf);
    sec_make_passwd(b, (const char *const[]){"alice", "apw", "bob", "bpw", "carol", "cpw", "root",
                                             "rpw", NULL});
    ts_broker_launch(b);
    return b;
}

static void case_rights(void)
{
    ts_broker *b = verified_broker((const char *const[]){"admins root", NULL});
    harness_client *alice = sec_connect_user(b, "alice-phone", "alice", "apw");
    harness_client *bob = sec_connect_user(b, "bob-phone", "bob", "bpw");
    harness_client *carol = sec_connect_user(b, "carol-phone", "carol", "cpw");
    harness_client *root = sec_connect_user(b, "root-desk", "root", "rpw");
    harness_client_subscribe(alice, TOPIC, 1);
    harness_client_subscribe(bob, TOPIC, 1);
    ASSERT(send_msg(alice, "{\"body\":\"one\"}") == 1);
    ASSERT(send_msg(alice, "{\"body\":\"two\"}") == 2);
    /* Another member may not; a non-member learns nothing of the group. */
    change_refused(bob, true, 1, CHAT_PROTO_ERR_RECALL_SENDER);
    change_refused(bob, false, 1, CHAT_PROTO_ERR_EDIT_SENDER);
    change_refused(carol, true, 1, "not a member of the group");
    change_refused(carol, false, 1, "not a member of the group");
    /* An admin recalls anyone's message, member or not; edits none. */
    int64_t m = recall_ok(root, 1);
    ASSERT(m == 3);
    cJSON *env = NULL;
    for (int i = 0; i < 3; i++) {
        cJSON_Delete(env);
        env = live(bob);
    }
    expect_carrier(env, 3, true, 1, "root", NULL);
    cJSON_Delete(env);
    ASSERT(ts_broker_log_count(b, "root recalled message 1 of " GROUP " (sent by alice)") == 1);
    change_refused(root, false, 2, "not a member of the group");
    harness_client_subscribe(root, TOPIC, 1); /* joins */
    change_refused(root, false, 2, CHAT_PROTO_ERR_EDIT_SENDER);
    /* Nothing is changed twice, and a change is final. */
    change_refused(alice, true, 1, CHAT_PROTO_ERR_RECALLED);
    change_refused(alice, false, 1, CHAT_PROTO_ERR_RECALLED);
    change_refused(root, true, 3, CHAT_PROTO_ERR_CHANGE_FINAL);
    ASSERT(edit_ok(alice, 2, "deux") == 4);
    change_refused(alice, false, 4, CHAT_PROTO_ERR_CHANGE_FINAL);
    change_refused(alice, true, 4, CHAT_PROTO_ERR_CHANGE_FINAL);
    ASSERT(edit_ok(alice, 2, "two, again") == 5);
    /* Requests that are not changes at all. */
    cJSON *e = command(alice, "{\"command\":\"edit\",\"group\":\"" GROUP "\",\"id\":2}");
    harness_expect_error(e, "edit", GROUP, NULL, "body is missing");
    cJSON_Delete(e);
    e = command(alice, "{\"command\":\"recall\",\"group\":\"" GROUP "\"}");
    harness_expect_error(e, "recall", GROUP, NULL, "id is missing");
    cJSON_Delete(e);
    e = command(alice, "{\"command\":\"recall\",\"group\":\"a/b\",\"id\":1}");
    ASSERT(cJSON_GetObjectItemCaseSensitive(e, "error") != NULL);
    cJSON_Delete(e);
    harness_client *cs[] = {alice, bob, carol, root};
    for (int i = 0; i < 4; i++) {
        harness_client_disconnect(cs[i]);
    }
    ts_broker_destroy(b);
}

static void case_window(void)
{
    ts_broker *b = verified_broker((const char *const[]){"admins root", NULL});
    harness_client *alice = sec_connect_user(b, "alice-phone", "alice", "apw");
    harness_client_subscribe(alice, TOPIC, 1);
    ASSERT(send_msg(alice, "{\"body\":\"one\"}") == 1);
    ASSERT(send_msg(alice, "{\"body\":\"two\"}") == 2);
    harness_client_disconnect(alice);
    /* 1000 s later: past recall_seconds (120) and edit_seconds (900). */
    ts_broker_stop(b);
    ts_broker_shift_clock(b, 1000);
    ts_broker_restart(b);
    alice = sec_connect_user(b, "alice-phone", "alice", "apw");
    harness_client *root = sec_connect_user(b, "root-desk", "root", "rpw");
    change_refused(alice, true, 1, CHAT_PROTO_ERR_RECALL_LATE);
    change_refused(alice, false, 2, CHAT_PROTO_ERR_EDIT_LATE);
    ASSERT(recall_ok(root, 1) == 3);
    harness_client_disconnect(alice);
    harness_client_disconnect(root);
    /* Wider windows: in time again; 0: recall is off for senders. */
    ts_broker_stop(b);
    ts_broker_set_opts(
        b, (const char *const[]){"admins root", "recall_seconds 0", "edit_seconds 2000", NULL});
    ts_broker_restart(b);
    alice = sec_connect_user(b, "alice-phone", "alice", "apw");
    harness_client_subscribe(alice, TOPIC, 1);
    int64_t n = send_msg(alice, "{\"body\":\"fresh\"}");
    change_refused(alice, true, n, CHAT_PROTO_ERR_RECALL_LATE);
    ASSERT(edit_ok(alice, 2, "two, in time") == n + 1);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* Pairs every change with its carrier over the whole store: fails unless
 * each recalled message has exactly one recall naming it and no edit of it
 * holding text (its edits' carriers are recalled edits: recall-complete),
 * each edited one at least one edit with text and no recall, and each
 * message naming one finds it changed that way. Returns the changes. */
static int check_pairs(harness_client *c)
{
    cJSON *all = store_view(c);
    int n = cJSON_GetArraySize(all), changes = 0;
    int *recalls = calloc((size_t)n + 2, sizeof(int));
    int *edits = calloc((size_t)n + 2, sizeof(int));
    ASSERT(recalls != NULL && edits != NULL);
    for (int i = 0; i < n; i++) {
        const cJSON *env = cJSON_GetArrayItem(all, i);
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(env, "recall");
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(env, "edit");
        if (!r && !e) {
            continue;
        }
        int t = (int)(r ? r->valuedouble : e->valuedouble);
        ASSERT(t >= 1 && t <= i);
        const cJSON *target = cJSON_GetArrayItem(all, t - 1);
        bool recalled = harness_json_bool(target, "recalled");
        bool edited = cJSON_GetObjectItemCaseSensitive(target, "edited") != NULL;
        if (r) {
            ASSERTF(recalls[t] == 0, "message %d is recalled by %d and by %d", t, recalls[t],
                    i + 1);
            recalls[t] = i + 1;
            ASSERTF(recalled, "message %d recalls %d, which is not recalled", i + 1, t);
        } else if (harness_json_bool(env, "recalled")) {
            ASSERTF(recalled, "message %d is a recalled edit of %d, which is not recalled", i + 1,
                    t);
        } else {
            edits[t]++;
            ASSERTF(edited && !recalled, "message %d edits %d, which %s", i + 1, t,
                    recalled ? "is recalled: its text survives the recall"
                             : "holds its first version");
        }
        changes++;
    }
    for (int i = 0; i < n; i++) {
        const cJSON *env = cJSON_GetArrayItem(all, i);
        bool recalled =
            harness_json_bool(env, "recalled") && !cJSON_GetObjectItemCaseSensitive(env, "edit");
        bool edited = cJSON_GetObjectItemCaseSensitive(env, "edited") != NULL;
        ASSERTF(recalled == (recalls[i + 1] != 0), "message %d is %s", i + 1,
                recalled ? "recalled but no message carries it" : "named by a recall");
        ASSERTF(edited == (edits[i + 1] != 0), "message %d is %s", i + 1,
                edited ? "edited but no message carries it" : "named by an edit");
    }
    free(recalls);
    free(edits);
    cJSON_Delete(all);
    return changes;
}

#define KILL_ROUNDS 6
#define KILL_BATCH 40

static void case_kill9(void)
{
    ts_broker *b = ts_broker_start(NULL);
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    int changes = 0, seen = 0;
    for (int round = 0; round < KILL_ROUNDS; round++) {
        harness_client *alice = member(b, "alice-phone", "alice");
        harness_client_subscribe(alice, TOPIC, 1);
        int64_t first = 0;
        for (int i = 0; i < KILL_BATCH; i++) {
            int64_t id = send_msg(alice, "{\"body\":\"v1\"}");
            first = first ? first : id;
        }
        /* One request per change: the broker reads one packet of a client
         * per pass of its loop, so the changes go on while the first ones'
         * messages reach alice, and the kill, after the k-th of those,
         * comes in the middle of them. */
        for (int i = 0; i < KILL_BATCH; i++) {
            char req[256];
            snprintf(req, sizeof(req),
                     i % 2 ? "{\"commands\":[{\"command\":\"edit\",\"group\":\"" GROUP
                             "\",\"id\":%lld,\"body\":\"v2\"}]}"
                           : "{\"commands\":[{\"command\":\"recall\",\"group\":\"" GROUP
                             "\",\"id\":%lld}]}",
                     (long long)(first + i));
            harness_client_publish_async(alice, HARNESS_CONTROL_TOPIC, req, 0, NULL);
            /* every other edited message recalled after its edit: the
             * recall rewrites the edit's carrier in its write */
            if (i % 4 == 1) {
                snprintf(req, sizeof(req),
                         "{\"commands\":[{\"command\":\"recall\",\"group\":\"" GROUP
                         "\",\"id\":%lld}]}",
                         (long long)(first + i));
                harness_client_publish_async(alice, HARNESS_CONTROL_TOPIC, req, 0, NULL);
            }
        }
        int k = 1 + (int)(rand_r(&seed) % (KILL_BATCH / 2));
        for (int i = 0; i < k; i++) {
            cJSON_Delete(live(alice));
        }
        ts_broker_kill(b);
        harness_client_destroy(alice);
        ts_broker_restart(b);
        harness_client *check = member(b, "checker", "alice");
        changes = check_pairs(check);
        /* What alice saw was stored before it was sent. */
        seen += k;
        ASSERTF(changes >= seen, "round %d: %d changes stored, %d seen", round, changes, seen);
        harness_client_disconnect(check);
    }
    ts_log("%d changes in the store after %d kills", changes, KILL_ROUNDS);
    ts_broker_destroy(b);
}

/* Copies the file in to out with the first occurrence of from replaced by
 * to (which must be there). */
static void rewrite(const char *in, const char *out, const char *from, const char *to)
{
    char *text = ts_read_file(in, NULL);
    char *at = strstr(text, from);
    ASSERTF(at != NULL, "%s is not in the export", from);
    size_t len = strlen(text) - strlen(from) + strlen(to);
    char *res = malloc(len + 1);
    ASSERT(res != NULL);
    snprintf(res, len + 1, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    ts_write_file(out, res, len);
    free(res);
    free(text);
}

/* Fails when text (a view of the group: an answer, pages, an export)
 * holds any of the texts recalled in case_export. */
static void expect_no_recalled_text(const char *where, const char *text)
{
    static const char *const gone[] = {"\"v1 of 1\"", "\"v1 of 2\"", "\"v1 of 3\"", "\"v2 of 3\"",
                                       "\"v3 of 3\"", "a-1",         "a-3"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++) {
        /* a tombstone's export line names its cid: the only one allowed */
        const char *at = strstr(text, gone[i]);
        if (at && gone[i][0] == 'a' && at >= text + 7 && !strncmp(at - 7, "\"cid\":\"", 7) &&
            strstr(where, "export")) {
            continue;
        }
        ASSERTF(at == NULL, "%s still holds %s: %s", where, gone[i], text);
    }
}

/* Message 8 as a recall of 3 leaves it: the carrier of 3's edits, its
 * text gone (recall-complete). */
static void expect_recalled_edit(const cJSON *env, int64_t id, int64_t n)
{
    int fields = 0;
    for (const cJSON *it = env->child; it; it = it->next) {
        fields++;
    }
    char *text = cJSON_PrintUnformatted(env);
    ASSERTF(harness_json_int(env, "id") == id && harness_json_int(env, "edit") == n &&
                harness_json_bool(env, "recalled") && fields == 6 &&
                strcmp(harness_json_str(env, "from"), "alice") == 0 &&
                strcmp(harness_json_str(env, "group"), GROUP) == 0 &&
                harness_json_int(env, "ts") > 0,
            "message %lld is not the recalled edit of %lld: %s", (long long)id, (long long)n, text);
    free(text);
}

/* What fetch from 0, history and a catch-up of user give now: none of the
 * recalled texts, 8 and 10 recalled edits of 3, 2 with its edits listed. */
static void expect_views(ts_broker *b, const char *when, const char *user)
{
    char where[128], device[64];
    snprintf(device, sizeof device, "%s-phone", user);
    harness_client *bob = member(b, device, user);
    harness_client_subscribe(bob, TOPIC, 1);
    cJSON *all = store_view(bob);
    ASSERT(cJSON_GetArraySize(all) == 11);
    char *text = cJSON_PrintUnformatted(all);
    snprintf(where, sizeof where, "fetch (%s)", when);
    expect_no_recalled_text(where, text);
    free(text);
    expect_tombstone(cJSON_GetArrayItem(all, 0), 1, "alice");
    expect_tombstone(cJSON_GetArrayItem(all, 2), 3, "alice");
    expect_recalled_edit(cJSON_GetArrayItem(all, 7), 8, 3);
    expect_recalled_edit(cJSON_GetArrayItem(all, 9), 10, 3);
    const cJSON *v2 = cJSON_GetArrayItem(all, 1);
    const cJSON *edits = cJSON_GetObjectItemCaseSensitive(v2, "edits");
    ASSERT(cJSON_GetArraySize(edits) == 2 && cJSON_GetArrayItem(edits, 0)->valuedouble == 6 &&
           cJSON_GetArrayItem(edits, 1)->valuedouble == 7);
    ASSERT(strcmp(harness_json_str(v2, "body"), "v3 of 2") == 0);
    /* the edits of 2, which nothing recalled, keep their texts */
    ASSERT(strcmp(harness_json_str(cJSON_GetArrayItem(all, 5), "body"), "v2 of 2") == 0);
    cJSON_Delete(all);
    cJSON *h = history(bob);
    text = cJSON_PrintUnformatted(h);
    snprintf(where, sizeof where, "history (%s)", when);
    expect_no_recalled_text(where, text);
    free(text);
    cJSON_Delete(h);
    /* bob's catch-up from where he joined (0): pages of the store, and
     * what a client makes of them is what the store holds */
    struct view v = {0};
    harness_catchup cu = {.group = GROUP, .from = 1, .to = 11, .qos = 0};
    harness_catch_up(bob, &cu, 1, 100, WAIT_MS, collect, &v);
    for (int64_t id = 1; id <= 11; id++) {
        text = cJSON_PrintUnformatted(v.msg[id]);
        snprintf(where, sizeof where, "catch-up (%s)", when);
        expect_no_recalled_text(where, text);
        free(text);
    }
    expect_tombstone(v.msg[3], 3, "alice");
    view_expect_store(&v, bob);
    view_free(&v);
    harness_client_disconnect(bob);
}

static void case_export(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client_subscribe(alice, TOPIC, 1);
    /* bob and carol join (their cursors at 0) and are away for all that
     * follows: each catches up once (below) */
    for (int i = 0; i < 2; i++) {
        harness_client *c = member(b, i ? "carol-phone" : "bob-phone", i ? "carol" : "bob");
        harness_client_subscribe(c, TOPIC, 1);
        harness_client_disconnect(c);
    }
    for (int i = 1; i <= 4; i++) {
        char p[64];
        snprintf(p, sizeof(p), "{\"cid\":\"a-%d\",\"body\":\"v1 of %d\"}", i, i);
        ASSERT(send_msg(alice, p) == i);
    }
    ASSERT(recall_ok(alice, 1) == 5);
    ASSERT(edit_ok(alice, 2, "v2 of 2") == 6);
    ASSERT(edit_ok(alice, 2, "v3 of 2") == 7);
    ASSERT(edit_ok(alice, 3, "v2 of 3") == 8);
    /* the carriers 8 and 10 go live (those copies are out of reach) */
    for (int64_t id = 5; id <= 8; id++) {
        cJSON_Delete(live(alice));
    }
    /* 9 is alice's own, between the edits of 3 */
    ASSERT(send_msg(alice, "{\"body\":\"v1 of 4b\"}") == 9);
    ASSERT(edit_ok(alice, 3, "v3 of 3") == 10);
    cJSON_Delete(live(alice));
    ASSERT(recall_ok(alice, 3) == 11);
    cJSON_Delete(live(alice));
    /* Edits after a recall are refused: 3 is recalled, 8 a recall's. */
    change_refused(alice, false, 3, CHAT_PROTO_ERR_RECALLED);
    change_refused(alice, false, 8, CHAT_PROTO_ERR_RECALLED);
    change_refused(alice, true, 8, CHAT_PROTO_ERR_RECALLED);
    harness_client_disconnect(alice);
    expect_views(b, "live broker", "bob");
    /* Nothing of them comes back from what the broker keeps in memory, or
     * from the store read afresh after a restart. */
    ts_broker_stop(b);
    ts_broker_restart(b);
    expect_views(b, "after a restart", "carol");
    ts_broker_stop(b);

    char in[512], copy[512], out[512], bad[512], err[512];
    snprintf(in, sizeof in, "%s/room1.jsonl", ts_broker_dir(b));
    snprintf(copy, sizeof copy, "%s/copy", ts_broker_dir(b));
    snprintf(out, sizeof out, "%s/room1-copy.jsonl", ts_broker_dir(b));
    snprintf(bad, sizeof bad, "%s/bad.jsonl", ts_broker_dir(b));
    snprintf(err, sizeof err, "%s/import.err", ts_broker_dir(b));
    ASSERT(ops_broker_store_tool(b, "export", GROUP, NULL, in) == 0);
    char *a = ts_read_file(in, NULL);
    /* Message 4 keeps its first version; 1 and 3 were recalled, so their
     * texts are gone, those 3's edits carried (8, 10) too, and 2's first
     * version with its rewrite. */
    ASSERTF(strstr(a, "\"v1 of 4\"") != NULL, "%s", a);
    expect_no_recalled_text("the export", a);
    ASSERTF(strstr(a, "{\"type\":\"message\",\"id\":8,\"envelope\":{\"id\":8,") != NULL &&
                strstr(a, "\"edit\":3,\"recalled\":true}}\n{\"type\":\"message\",\"id\":9,"),
            "the export has no recalled edit at 8: %s", a);
    ASSERTF(strstr(a, "{\"type\":\"message\",\"id\":1,\"cid\":\"a-1\",\"envelope\":{\"id\":1,") &&
                strstr(a, "{\"type\":\"message\",\"id\":3,\"cid\":\"a-3\",\"envelope\":"),
            "a tombstone's line carries its cid: %s", a);
    free(a);
    /* import, export again: the same lines, the tombstones' cids kept. */
    ASSERT(ops_store_tool("import", copy, NULL, in, NULL) == 0);
    ASSERT(ops_store_tool("export", copy, GROUP, NULL, out) == 0);
    a = ts_read_file(in, NULL);
    char *c = ts_read_file(out, NULL);
    ASSERT(strcmp(strchr(a, '\n'), strchr(c, '\n')) == 0);
    free(a);
    free(c);
    ASSERT(ops_store_tool("check", copy, NULL, NULL, NULL) == 0);

    /* Changes that do not pair up are refused, and nothing is written. */
    static const struct {
        const char *from, *to, *why;
    } forged[] = {
        /* the recall of 1 made a plain message: 1 recalled by nobody */
        {"\"recall\":1}", "\"body\":\"x\"}", "is recalled, but no later message carries"},
        /* a recall of 4, which holds its first version */
        {"\"recall\":1}", "\"recall\":4}", "holds its first version"},
        /* a tombstone that still holds a body */
        {"\"recalled\":true}", "\"recalled\":true,\"body\":\"v1 of 1\"}", "alone"},
        /* a recall of a later message */
        {"\"recall\":1}", "\"recall\":7}", "names an earlier message id"},
        /* a recalled edit of a message that is not recalled */
        {"\"edit\":3,\"recalled\":true}", "\"edit\":4,\"recalled\":true}",
         "is not recalled, but a message that carried its edit is"},
        /* a recalled edit that still holds text */
        {"\"edit\":3,\"recalled\":true}", "\"edit\":3,\"recalled\":true,\"body\":\"x\"}",
         "a recalled edit holds"},
        /* an edited message's list naming an earlier message */
        {"\"edits\":[6,7]", "\"edits\":[1,7]", "names the later messages"},
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        char dest[600];
        snprintf(dest, sizeof dest, "%s/forged%zu", ts_broker_dir(b), i);
        rewrite(in, bad, forged[i].from, forged[i].to);
        ASSERTF(ops_store_tool_err("import", dest, NULL, bad, NULL, err) == 1,
                "forgery %zu imported", i);
        char *e = ts_read_file(err, NULL);
        ASSERTF(strstr(e, forged[i].why) != NULL, "forgery %zu: %s", i, e);
        free(e);
        ASSERT(ops_store_tool("export", dest, GROUP, NULL, NULL) == 1); /* no group */
    }
    ts_broker_destroy(b);
}

/* At most CHAT_PROTO_EDITS_MAX edits of one message (the bound of a
 * recall's write): the next is refused; the recall rewrites them all, and
 * another message's edits stay as they are. */
static void case_bound(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client_subscribe(alice, TOPIC, 1);
    ASSERT(send_msg(alice, "{\"body\":\"first\"}") == 1);
    ASSERT(send_msg(alice, "{\"body\":\"keep\"}") == 2);
    ASSERT(edit_ok(alice, 2, "kept edit") == 3);
    cJSON_Delete(live(alice));
    for (unsigned k = 0; k < CHAT_PROTO_EDITS_MAX; k++) {
        char body[32];
        snprintf(body, sizeof body, "hidden %u", k);
        ASSERT(edit_ok(alice, 1, body) == 4 + (int64_t)k);
        cJSON_Delete(live(alice));
    }
    change_refused(alice, false, 1, CHAT_PROTO_ERR_EDITS_MAX);
    int64_t m = recall_ok(alice, 1);
    ASSERT(m == 4 + (int64_t)CHAT_PROTO_EDITS_MAX);
    cJSON *all = store_view(alice);
    ASSERT(cJSON_GetArraySize(all) == (int)m);
    char *text = cJSON_PrintUnformatted(all);
    ASSERTF(strstr(text, "hidden") == NULL && strstr(text, "first") == NULL,
            "a recalled text survives: %s", text);
    ASSERTF(strstr(text, "kept edit") != NULL, "another message's edit was rewritten: %s", text);
    free(text);
    for (int64_t id = 4; id < m; id++) {
        expect_recalled_edit(cJSON_GetArrayItem(all, (int)id - 1), id, 1);
    }
    cJSON_Delete(all);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* One request [edit 1, edit 1, recall 1] on broker b: the answers name
 * 2, 3 and 4, and alice, bob and carol (subscribed) each get 2 and 3 live
 * as recalled edits of 1 (their edits' texts recalled before the broker
 * sent them), then 4, the recall: no gap in the live ids, and no text of
 * 1's anywhere. */
static void one_request(ts_broker *b)
{
    harness_client *alice = member(b, "alice-phone", "alice");
    harness_client *bob = member(b, "bob-phone", "bob");
    harness_client *carol = member(b, "carol-phone", "carol");
    harness_client *rs[] = {bob, carol, alice};
    for (int i = 0; i < 3; i++) {
        harness_client_subscribe(rs[i], TOPIC, 1);
    }
    ASSERT(send_msg(alice, "{\"cid\":\"a-1\",\"body\":\"v1 of 1\"}") == 1);
    for (int i = 0; i < 2; i++) {
        cJSON *env = live(rs[i]);
        ASSERT(harness_json_int(env, "id") == 1);
        cJSON_Delete(env);
    }
    cJSON *resp = harness_request(
        alice,
        "{\"commands\":["
        "{\"command\":\"edit\",\"group\":\"" GROUP "\",\"id\":1,\"body\":\"v2 of 1\"},"
        "{\"command\":\"edit\",\"group\":\"" GROUP "\",\"id\":1,\"body\":\"v3 of 1\"},"
        "{\"command\":\"recall\",\"group\":\"" GROUP "\",\"id\":1}]}",
        WAIT_MS);
    ASSERT(harness_response_count(resp) == 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *e = harness_response_entry(resp, i);
        harness_expect_ok(e, i < 2 ? "edit" : "recall", GROUP);
        ASSERT(harness_json_int(e, i < 2 ? "edited" : "recalled") == 1);
        ASSERT(harness_json_int(e, "by") == 2 + i);
    }
    cJSON_Delete(resp);
    for (int i = 0; i < 3; i++) {
        for (int64_t id = 2; id <= 4; id++) {
            cJSON *env = live(rs[i]);
            char *text = cJSON_PrintUnformatted(env);
            ASSERTF(harness_json_int(env, "id") == id, "%s got %s live, expected message %lld",
                    harness_client_id(rs[i]), text, (long long)id);
            ASSERTF(strstr(text, " of 1") == NULL, "%s got a recalled text live: %s",
                    harness_client_id(rs[i]), text);
            free(text);
            if (id < 4) {
                expect_recalled_edit(env, id, 1);
            } else {
                expect_carrier(env, 4, true, 1, "alice", NULL);
            }
            cJSON_Delete(env);
        }
        harness_expect_quiet(rs[i], "nothing live after the recall");
    }
    for (int i = 0; i < 3; i++) {
        harness_client_disconnect(rs[i]);
    }
}

/* The plugin publishes a change's message to be sent at the start of the
 * broker's next pass, and a recall in the same pass rewrites the edits it
 * carried before they go out: with the broker's ticks, and without (the
 * plugin then tells passes apart by client events). */
static void case_onerequest(void)
{
    ts_broker *b = ts_broker_start(NULL);
    one_request(b);
    ts_broker_destroy(b);
    ts_broker_conf conf = {.top = (const char *const[]){"per_listener_settings true", NULL}};
    b = ts_broker_create(&conf);
    sec_suppress_config_leaks(b); /* 2.0.11: the plugin line inside the listener */
    ts_broker_launch(b);
    one_request(b);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"online", case_online},
    {"offline", case_offline},
    {"catching", case_catching},
    {"trimmed", case_trimmed},
    {"cid", case_cid},
    {"rights", case_rights},
    {"window", case_window},
    {"kill9", case_kill9},
    {"export", case_export},
    {"bound", case_bound},
    {"onerequest", case_onerequest},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_recall_", cases, sizeof cases / sizeof cases[0]);
}
