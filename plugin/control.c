/* control.c: requests on $CONTROL/chat/v1 ({"commands":[...]}) and the
 * responses published to the one client concerned. */
#include "plugin.h"
#include "reply.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COMMANDS CHAT_PROTO_COMMANDS_MAX
#define CORR_MAX 256u /* bytes of a command's correlationData */
#define MAX_REQUEST CHAT_PROTO_REQUEST_MAX
#define MAX_WORK 20000u /* store records one request may visit */

/* One command being answered. */
struct req {
    struct chat_plugin *pl;
    struct mosquitto *client;
    const char *member;
    const char *device;
    sbuf *out;
    const char *cmd;
    const char *group; /* validated, or NULL */
    const char *corr;  /* the command's correlationData, echoed in its entry, or NULL */
    size_t work;       /* store records visited by the request so far */
    size_t cap;        /* bytes the whole answer may take (chat_answer_cap) */
};

static void entry_start(struct req *r);

static void fail(struct req *r, const char *why)
{
    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: %s from %s refused: %s%s%s", r->cmd,
                         r->device, why, r->group ? " in group " : "", r->group ? r->group : "");
    entry_start(r);
    sbuf_puts(r->out, ",\"error\":");
    sbuf_json_str(r->out, why);
    sbuf_add(r->out, "}", 1);
}

/* Reads an optional integer field in [lo, 2^53-1]. Returns false (and
 * answers) when present but not such an integer. */
static bool int_field(struct req *r, const cJSON *c, const char *name, uint64_t lo, bool *present,
                      uint64_t *out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, name);
    *present = f != NULL;
    if (!f) {
        return true;
    }
    if (!cJSON_IsNumber(f) || !chat_proto_json_int(f->valuedouble, lo, out)) {
        static char why[96];
        snprintf(why, sizeof(why), "%s must be an integer from %llu to 2^53-1", name,
                 (unsigned long long)lo);
        fail(r, why);
        return false;
    }
    return true;
}

/* Sets r->group from the command's "group" field. */
static bool group_field(struct req *r, const cJSON *c, char *buf)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "group");
    if (!g) {
        fail(r, "group is missing");
        return false;
    }
    if (!cJSON_IsString(g)) {
        fail(r, "group must be a string");
        return false;
    }
    const char *why = chat_proto_group_error(g->valuestring, strlen(g->valuestring));
    if (why) {
        fail(r, why);
        return false;
    }
    strcpy(buf, g->valuestring);
    r->group = buf;
    return true;
}

static bool storage_ok(struct req *r, chat_err rc)
{
    if (rc != CHAT_OK) {
        chat_log_store_error(r->pl, rc, "%s from %s%s%s", r->cmd, r->device,
                             r->group ? " in group " : "", r->group ? r->group : "");
        fail(r, "storage error");
        return false;
    }
    return true;
}

static void entry_start(struct req *r)
{
    sbuf_puts(r->out, "{\"command\":");
    sbuf_json_str(r->out, r->cmd);
    if (r->group) {
        sbuf_puts(r->out, ",\"group\":");
        sbuf_json_str(r->out, r->group);
    }
    if (r->corr) {
        sbuf_puts(r->out, ",\"correlationData\":");
        sbuf_json_str(r->out, r->corr);
    }
}

/* join/leave name the caller, or with "member" someone else (admins only,
 * and only admins in closed groups). */
static bool target_member(struct req *r, const cJSON *c, const char **member)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c, "member");
    const char *user = mosquitto_client_username(r->client);
    bool admin = chat_config_is_admin(&r->pl->cfg, user);

    *member = r->member;
    if (m) {
        if (!cJSON_IsString(m) || !m->valuestring[0] ||
            strlen(m->valuestring) > CHAT_STORE_MAX_NAME ||
            !chat_proto_utf8_valid(m->valuestring, strlen(m->valuestring))) {
            fail(r, "member must be a non-empty string of at most 1024 bytes");
            return false;
        }
        *member = m->valuestring;
    }
    if (strcmp(*member, r->member) != 0 && !admin) {
        fail(r, "only an admin may add or remove another member");
        return false;
    }
    if (!r->pl->cfg.open_groups && !admin) {
        fail(r, "only an admin may change membership of closed groups");
        return false;
    }
    return true;
}

static void cmd_join(struct req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    const char *member = NULL;
    uint64_t joined = 0, head = 0;
    if (!group_field(r, c, group) || !target_member(r, c, &member)) {
        return;
    }
    /* Behind the broker's own access control, a request on $CONTROL says
     * nothing of the right to the group's topics; a publish or an ack there
     * does (see on_subscribe in chat.c). */
    if (r->pl->cfg.acl_mode != CHAT_ACL_ALLOW &&
        !chat_config_is_admin(&r->pl->cfg, mosquitto_client_username(r->client))) {
        fail(r, "with the broker's own access control, join by publishing or acking on the "
                "group, or ask an admin");
        return;
    }
    if (!storage_ok(r, chat_store_member_add(r->pl->store, group, member, &joined)) ||
        !storage_ok(r, chat_store_head(r->pl->store, group, &head))) {
        return;
    }
    entry_start(r);
    sbuf_puts(r->out, ",\"member\":");
    sbuf_json_str(r->out, member);
    sbuf_puts(r->out, ",\"head\":");
    sbuf_u64(r->out, head);
    sbuf_add(r->out, "}", 1);
}

static void cmd_leave(struct req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    const char *member = NULL;
    if (!group_field(r, c, group) || !target_member(r, c, &member)) {
        return;
    }
    if (!storage_ok(r, chat_store_member_remove(r->pl->store, group, member))) {
        return;
    }
    chat_replay_stop_member(r->pl, member, group);
    chat_presence_left(r->pl, member, group);
    entry_start(r);
    sbuf_puts(r->out, ",\"member\":");
    sbuf_json_str(r->out, member);
    sbuf_add(r->out, "}", 1);
}

static void cmd_ack(struct req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t id = 0, now = 0;
    bool present = false;
    const char *why = NULL;
    if (!group_field(r, c, group) || !int_field(r, c, "id", 0, &present, &id)) {
        return;
    }
    if (!present) {
        fail(r, "id is missing");
        return;
    }
    if (chat_apply_ack(r->pl, r->client, group, id, false, &now, &why) != MOSQ_ERR_SUCCESS) {
        fail(r, why);
        return;
    }
    entry_start(r);
    sbuf_puts(r->out, ",\"acked\":");
    sbuf_u64(r->out, now);
    sbuf_add(r->out, "}", 1);
}

/* read: as ack, and the member's read marker with it (receipts.c). */
static void cmd_read(struct req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t id = 0, read = 0, acked = 0;
    bool present = false;
    const char *why = NULL;
    if (!group_field(r, c, group) || !int_field(r, c, "id", 0, &present, &id)) {
        return;
    }
    if (!present) {
        fail(r, "id is missing");
        return;
    }
    if (chat_read_apply(r->pl, r->client, group, id, false, &read, &acked, &why) !=
        MOSQ_ERR_SUCCESS) {
        fail(r, why);
        return;
    }
    entry_start(r);
    sbuf_puts(r->out, ",\"read\":");
    sbuf_u64(r->out, read);
    sbuf_puts(r->out, ",\"acked\":");
    sbuf_u64(r->out, acked);
    sbuf_add(r->out, "}", 1);
}

/* receipts and presence: a list of the group's members in name order,
 * paged with after and limit (receipts.c, presence.c write it). */
static void cmd_list(struct req *r, const cJSON *c, bool receipts)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t limit = CHAT_PROTO_LIST_MAX;
    bool has_limit = false;
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(c, "after");
    if (!group_field(r, c, group) || !int_field(r, c, "limit", 1, &has_limit, &limit)) {
        return;
    }
    if (after && (!cJSON_IsString(after) || strlen(after->valuestring) > CHAT_STORE_MAX_NAME)) {
        fail(r, "after must be a member name");
        return;
    }
    if (limit > CHAT_PROTO_LIST_MAX) {
        limit = CHAT_PROTO_LIST_MAX;
    }
    r->work += (size_t)limit;
    size_t mark = r->out->len;
    entry_start(r);
    const char *a = after ? after->valuestring : NULL;
    const char *why =
        receipts ? chat_receipts_answer(r->pl, r->client, group, a, (size_t)limit, r->out, r->cap)
                 : chat_presence_answer(r->pl, r->client, group, a, (size_t)limit, r->out, r->cap);
    if (why) {
        r->out->len = mark;
        fail(r, why);
        return;
    }
    sbuf_add(r->out, "}", 1);
}

struct sync_walk {
    struct req *r;
    bool replay;
    bool first;
    bool more;                          /* stopped early: the answer says "more" */
    char last[CHAT_STORE_MAX_NAME + 1]; /* the last group listed */
    const char *after;                  /* list groups after this one, or NULL */
    chat_err rc;
};

/* Where the device's delivery in group stands, as chat_store_cursor_start
 * would start it, without writing a cursor: a client that only counts its
 * unread messages (sync without replay, from a new client id each time)
 * must not leave a key per group behind. */
static chat_err cursor_peek(struct req *r, const char *group, uint64_t joined, uint64_t *acked)
{
    bool found = false;
    uint64_t best = 0;
    chat_err rc = chat_store_cursor_get(r->pl->store, group, r->member, r->device, acked, &found);
    if (rc != CHAT_OK || found) {
        return rc;
    }
    *acked = joined;
    rc = chat_store_cursor_max(r->pl->store, group, r->member, &best, &found);
    if (rc == CHAT_OK && found && best > *acked) {
        *acked = best;
    }
    return rc;
}

static int sync_group(void *ctx, const char *group, uint64_t joined)
{
    struct sync_walk *w = ctx;
    struct req *r = w->r;
    uint64_t head = 0, acked = 0;
    const char *why = NULL;

    if (w->after && strcmp(group, w->after) <= 0) {
        return 0;
    }
    /* Bounded in work and in bytes: the rest comes with "after". */
    if (r->work >= MAX_WORK || r->out->len + 512 + strlen(group) * 6 > r->cap) {
        w->more = true;
        return 1;
    }
    r->work++;
    /* A member whom the broker would not let read the group learns
     * nothing of it here either (write-only access). */
    if (!chat_may_read(r->pl, r->client, group, &why)) {
        return 0;
    }
    /* Only a catch-up that starts writes the device's cursor; an existing
     * one is marked used (device expiry), at most once a day. */
    w->rc = chat_store_cursor_touch(r->pl->store, group, r->member, r->device, chat_now_ms());
    if (w->rc == CHAT_OK) {
        w->rc = cursor_peek(r, group, joined, &acked);
    }
    if (w->rc == CHAT_OK) {
        w->rc = chat_store_head(r->pl->store, group, &head);
    }
    if (w->rc != CHAT_OK) {
        return 1;
    }
    sbuf_puts(r->out, w->first ? "{\"group\":" : ",{\"group\":");
    w->first = false;
    sbuf_json_str(r->out, group);
    sbuf_puts(r->out, ",\"head\":");
    sbuf_u64(r->out, head);
    sbuf_puts(r->out, ",\"acked\":");
    sbuf_u64(r->out, acked);
    sbuf_puts(r->out, ",\"unread\":");
    sbuf_u64(r->out, head > acked ? head - acked : 0);
    sbuf_add(r->out, "}", 1);
    snprintf(w->last, sizeof(w->last), "%s", group);
    if (w->replay && head > acked) {
        chat_replay_start(r->pl, r->client, group);
    }
    return 0;
}

static void cmd_sync(struct req *r, const cJSON *c)
{
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(c, "replay");
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(c, "after");
    struct sync_walk w = {.r = r, .first = true, .rc = CHAT_OK};
    if (rep && !cJSON_IsBool(rep)) {
        fail(r, "replay must be true or false");
        return;
    }
    if (after && !cJSON_IsString(after)) {
        fail(r, "after must be a group name");
        return;
    }
    w.after = after ? after->valuestring : NULL;
    /* PROTOCOL.md: sync starts the catch-up of every group with unread
     * messages; "replay": false asks for the counts alone (lazy clients). */
    w.replay = r->pl->cfg.replay && (!rep || cJSON_IsTrue(rep));
    if (!r->pl->cfg.open_groups) {
        const char *user = mosquitto_client_username(r->client);
        if (!(user && user[0])) {
            fail(r, "closed groups admit only clients with a username");
            return;
        }
    }
    size_t mark = r->out->len;
    entry_start(r);
    /* Ids name messages within one incarnation of the store (see
     * chat_store_incarnation): a client that holds ids of another must
     * start over from its cursor. */
    sbuf_puts(r->out, ",\"incarnation\":");
    sbuf_json_str(r->out, chat_store_incarnation(r->pl->store));
    sbuf_puts(r->out, ",\"groups\":[");
    chat_err rc = chat_store_member_groups(r->pl->store, r->member, sync_group, &w);
    if (w.rc != CHAT_OK || rc != CHAT_OK) {
        r->out->len = mark; /* drop the half-written entry */
        storage_ok(r, w.rc != CHAT_OK ? w.rc : rc);
        return;
    }
    sbuf_puts(r->out, "]");
    if (w.more) {
        /* Where the contract is silent: a member of more groups than one
         * answer holds gets them in runs, like history. */
        sbuf_puts(r->out, ",\"more\":true,\"after\":");
        sbuf_json_str(r->out, w.last);
    }
    sbuf_puts(r->out, "}");
}

/* fetch (forward from a cursor) and history (backward from the end). */
static void cmd_page(struct req *r, const cJSON *c, bool forward)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t from = 0, limit = 0, head = 0, first = 1;
    bool has_from = false, has_limit = false;
    const char *why = NULL;
    chat_page *page = NULL;

    if (!group_field(r, c, group) ||
        !int_field(r, c, forward ? "after" : "before", forward ? 0 : 1, &has_from, &from) ||
        !int_field(r, c, "limit", 1, &has_limit, &limit)) {
        return;
    }
    if (r->out->len + r->pl->cfg.page_bytes + 6 * r->pl->cfg.max_payload + 4096 > r->cap) {
        fail(r, "response too large: send fewer fetch or history commands per request");
        return;
    }
    if (!chat_admit(r->pl, r->client, group, false, &why) ||
        !chat_may_read(r->pl, r->client, group, &why)) {
        fail(r, why);
        return;
    }
    if (!storage_ok(r, chat_store_head(r->pl->store, group, &head)) ||
        !storage_ok(r, chat_store_first(r->pl->store, group, &first))) {
        return;
    }
    if (!has_from && forward) {
        bool found = false;
        if (!storage_ok(r, chat_store_cursor_start(r->pl->store, group, r->member, r->device, &from,
                                                   &found))) {
            return;
        }
    } else if (!has_from) {
        from = head + 1;
    }
    if (!has_limit || limit > r->pl->cfg.page_size) {
        limit = r->pl->cfg.page_size;
    }
    r->work += (size_t)limit;
    chat_err rc = forward ? chat_store_read_forward(r->pl->store, group, from, (size_t)limit,
                                                    r->pl->cfg.page_bytes, &page)
                          : chat_store_read_backward(r->pl->store, group, from, (size_t)limit,
                                                     r->pl->cfg.page_bytes, &page);
    if (!storage_ok(r, rc)) {
        return;
    }
    if (forward) {
        bool truncated = from + 1 < first;
        chat_page_entry(r->out, "fetch", group, r->corr, page, head, page->more, truncated, true,
                        chat_store_incarnation(r->pl->store));
    } else {
        bool truncated = !page->more && first > 1;
        chat_page_entry(r->out, "history", group, r->corr, page, head, page->more, truncated, false,
                        chat_store_incarnation(r->pl->store));
    }
    chat_page_destroy(page);
}

static void dispatch(struct req *r, const cJSON *c)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "command");
    const cJSON *corr = cJSON_GetObjectItemCaseSensitive(c, "correlationData");
    r->cmd = "unknown";
    r->group = NULL;
    r->corr = NULL;
    if (!cJSON_IsObject(c)) {
        fail(r, "each command must be a JSON object");
        return;
    }
    /* Where the contract is silent (as dynamic-security does): a command may
     * name itself, and its entry says the name back, so that a client
     * matches answers the same way over MQTT 3.1.1 and 5. */
    if (corr && (!cJSON_IsString(corr) || strlen(corr->valuestring) > CORR_MAX)) {
        r->cmd = cJSON_IsString(name) ? name->valuestring : "unknown";
        fail(r, "correlationData must be a string of at most 256 bytes");
        return;
    }
    r->corr = corr ? corr->valuestring : NULL;
    if (!cJSON_IsString(name)) {
        fail(r, name ? "command must be a string" : "command is missing");
        return;
    }
    r->cmd = name->valuestring;
    /* Bounds on one request: the store records it visits on the broker's
     * thread here, the bytes of its answer in the commands that write much
     * (sync and the pages). */
    if (r->work >= MAX_WORK) {
        fail(r, "request too large: it asks for too much work at once; send fewer commands "
                "per request");
        return;
    }
    r->work++;
    if (!strcmp(r->cmd, "join")) {
        cmd_join(r, c);
    } else if (!strcmp(r->cmd, "leave")) {
        cmd_leave(r, c);
    } else if (!strcmp(r->cmd, "ack")) {
        cmd_ack(r, c);
    } else if (!strcmp(r->cmd, "sync")) {
        cmd_sync(r, c);
    } else if (!strcmp(r->cmd, "fetch")) {
        cmd_page(r, c, true);
    } else if (!strcmp(r->cmd, "history")) {
        cmd_page(r, c, false);
    } else if (!strcmp(r->cmd, "read")) {
        cmd_read(r, c);
    } else if (!strcmp(r->cmd, "receipts") || !strcmp(r->cmd, "presence")) {
        cmd_list(r, c, r->cmd[0] == 'r');
    } else if (chat_admin_is_command(r->cmd)) {
        struct chat_admin_req ar = {r->pl,  r->client, r->device, r->cmd, r->corr,
                                    r->out, &r->work,  MAX_WORK,  r->cap};
        chat_admin_run(&ar, c);
    } else {
        fail(r, "unknown command");
    }
}

int chat_on_control(struct chat_plugin *pl, struct mosquitto_evt_control *ev)
{
    const char *device = mosquitto_client_id(ev->client);
    char member_buf[CHAT_MEMBER_BUF];
    const char *why = NULL;
    const char *member = chat_member(pl, ev->client, member_buf, &why);
    sbuf out = {0};
    cJSON *root = NULL;
    char *reply_topic = NULL;
    char *text = NULL;
    void *corr = NULL;
    uint16_t corr_len = 0;
    struct req r = {.pl = pl,
                    .client = ev->client,
                    .member = member,
                    .device = device,
                    .out = &out,
                    .cmd = "request",
                    .cap = chat_answer_cap(&pl->cfg)};

    if (!device) {
        return MOSQ_ERR_SUCCESS;
    }
    chat_chores_without_ticks(pl);
    enum chat_budget budget = chat_budget_check(pl, device);
    if (budget == CHAT_BUDGET_DROP) {
        return MOSQ_ERR_SUCCESS; /* counted and logged by chat_budget_check */
    }
    /* MQTT 5 request/response: answer on the Response Topic the client
     * chose, with its Correlation Data; still to that client alone. */
    mosquitto_property_read_string(ev->properties, MQTT_PROP_RESPONSE_TOPIC, &reply_topic, false);
    if (reply_topic && mosquitto_pub_topic_check(reply_topic) != MOSQ_ERR_SUCCESS) {
        free(reply_topic);
        reply_topic = NULL;
    }
    mosquitto_property_read_binary(ev->properties, MQTT_PROP_CORRELATION_DATA, &corr, &corr_len,
                                   false);
    sbuf_puts(&out, "{\"responses\":[");
    if (budget == CHAT_BUDGET_SLOW_DOWN) {
        fail(&r, "too many requests: answers to one client are limited to about 2 MiB per "
                 "second; wait and retry");
        goto done;
    }
    if (!member) {
        r.member = "";
        fail(&r, why);
        goto done;
    }
    if (ev->payloadlen > MAX_REQUEST) {
        fail(&r, "request is larger than 1048576 bytes");
        goto done;
    }
    if (ev->payloadlen == 0 || !chat_proto_utf8_valid(ev->payload, ev->payloadlen)) {
        fail(&r, "request must be a UTF-8 JSON object");
        goto done;
    }
    /* U+0000 is a control character like U+0001, which every name and
     * field check refuses where it matters; cJSON would instead cut the
     * string short at it. Nothing may follow the object but blanks: "{...}
     * and more" is not a request whose tail we quietly ignore. */
    text = malloc(ev->payloadlen + 1);
    if (!text) {
        fail(&r, "out of memory");
        goto done;
    }
    memcpy(text, ev->payload, ev->payloadlen);
    text[ev->payloadlen] = '\0';
    chat_nul_escapes(text, ev->payloadlen, "0001");
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(text, ev->payloadlen, &end, false);
    const char *stop = text + ev->payloadlen;
    while (root && end < stop && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) {
        end++;
    }
    if (!root || end != stop) {
        fail(&r, "malformed JSON");
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        fail(&r, "request must be a JSON object");
        goto done;
    }
    const cJSON *cmds = cJSON_GetObjectItemCaseSensitive(root, "commands");
    if (!cJSON_IsArray(cmds)) {
        fail(&r, cmds ? "commands must be an array" : "commands is missing");
        goto done;
    }
    int n = cJSON_GetArraySize(cmds);
    if (n > MAX_COMMANDS) {
        fail(&r, "too many commands in one request (at most 1000)");
        goto done;
    }
    int i = 0;
    for (const cJSON *c = cmds->child; c; c = c->next, i++) {
        if (i) {
            sbuf_add(&out, ",", 1);
        }
        dispatch(&r, c);
    }

done:
    sbuf_puts(&out, "]}");
    /* Parsing costs the broker's thread as much as answering: the request's
     * bytes draw on the budget too. */
    chat_budget_spend(pl, device, out.len + ev->payloadlen + corr_len);
    chat_reply_send(pl, device, reply_topic, corr, corr_len, &out);
    free(reply_topic);
    free(corr);
    free(text);
    cJSON_Delete(root);
    /* A bad request is answered, never a reason to disconnect the client. */
    return MOSQ_ERR_SUCCESS;
}
