/* control.c: requests on $CONTROL/chat/v1 ({"commands":[...]}) and the
 * responses published to the one client concerned: a request's checks and
 * bounds, and the dispatch of its commands to control_member.c,
 * control_change.c, control_sync.c, admin.c and push.h (see control.h). */
#include "control.h"
#include "push.h"
#include "reply.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COMMANDS CHAT_PROTO_COMMANDS_MAX
#define CORR_MAX 256u /* bytes of a command's correlationData */
#define MAX_REQUEST CHAT_PROTO_REQUEST_MAX
#define MAX_WORK 20000u /* store records one request may visit */
/* With PostgreSQL a record costs a round trip or more on the broker's
 * thread, not a lookup in memory: one request of 20,000 held every client
 * of the broker for about 10 s (integ_sec_unbounded_answers, pg stage).
 * 5,000 still serves the largest legitimate requests of the suite (an
 * admin listing, a request of many pages). */
#define MAX_WORK_SHARED 5000u

static void dispatch(struct chat_control_req *r, const cJSON *c)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "command");
    const cJSON *corr = cJSON_GetObjectItemCaseSensitive(c, "correlationData");
    r->cmd = "unknown";
    r->group = NULL;
    r->corr = NULL;
    if (!cJSON_IsObject(c)) {
        chat_control_fail(r, "each command must be a JSON object");
        return;
    }
    /* Where the contract is silent (as dynamic-security does): a command may
     * name itself, and its entry says the name back, so that a client
     * matches answers the same way over MQTT 3.1.1 and 5. */
    if (corr && (!cJSON_IsString(corr) || strlen(corr->valuestring) > CORR_MAX)) {
        r->cmd = cJSON_IsString(name) ? name->valuestring : "unknown";
        chat_control_fail(r, "correlationData must be a string of at most 256 bytes");
        return;
    }
    r->corr = corr ? corr->valuestring : NULL;
    if (!cJSON_IsString(name)) {
        chat_control_fail(r, name ? "command must be a string" : "command is missing");
        return;
    }
    r->cmd = name->valuestring;
    /* Bounds on one request: the store records it visits on the broker's
     * thread here, the bytes of its answer in the commands that write much
     * (sync and the pages). */
    if (r->work >= r->work_max) {
        chat_control_fail(
            r, "request too large: it asks for too much work at once; send fewer commands "
               "per request");
        return;
    }
    r->work++;
    if (!strcmp(r->cmd, "join")) {
        chat_control_join(r, c);
    } else if (!strcmp(r->cmd, "leave")) {
        chat_control_leave(r, c);
    } else if (!strcmp(r->cmd, "ack")) {
        chat_control_ack(r, c);
    } else if (!strcmp(r->cmd, "sync")) {
        chat_control_sync(r, c);
    } else if (!strcmp(r->cmd, "fetch")) {
        chat_control_page(r, c, true);
    } else if (!strcmp(r->cmd, "history")) {
        chat_control_page(r, c, false);
    } else if (!strcmp(r->cmd, "read")) {
        chat_control_read(r, c);
    } else if (!strcmp(r->cmd, "recall") || !strcmp(r->cmd, "edit")) {
        chat_control_change(r, c, r->cmd[0] == 'r');
    } else if (!strcmp(r->cmd, "receipts") || !strcmp(r->cmd, "presence")) {
        chat_control_list(r, c, r->cmd[0] == 'r');
    } else if (!strcmp(r->cmd, "push")) {
        struct chat_push_req pr = {r->pl,   r->client, r->member, r->device,
                                   r->corr, r->out,    &r->hold};
        chat_push_command(&pr, c);
    } else if (chat_admin_is_command(r->cmd)) {
        struct chat_admin_req ar = {r->pl,  r->client, r->device,   r->cmd, r->corr,
                                    r->out, &r->work,  r->work_max, r->cap};
        chat_admin_run(&ar, c);
    } else {
        chat_control_fail(r, "unknown command");
    }
}

int chat_on_control(struct chat_plugin *pl, struct mosquitto_evt_control *ev)
{
    const char *device = mosquitto_client_id(ev->client);
    char member_buf[CHAT_MEMBER_BUF];
    const char *why = chat_member(pl, ev->client, member_buf);
    const char *member = why ? NULL : member_buf;
    sbuf out = {0};
    cJSON *root = NULL;
    char *reply_topic = NULL;
    char *text = NULL;
    void *corr = NULL;
    uint16_t corr_len = 0;
    bool held = false;
    struct chat_control_req r = {.pl = pl,
                                 .client = ev->client,
                                 .member = member,
                                 .device = device,
                                 .out = &out,
                                 .cmd = "request",
                                 .work_max =
                                     chat_store_shared(pl->store) ? MAX_WORK_SHARED : MAX_WORK,
                                 .cap = chat_answer_cap(&pl->cfg)};

    if (!device) {
        return MOSQ_ERR_SUCCESS;
    }
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
        chat_control_fail(&r,
                          "too many requests: answers to one client are limited to about 2 MiB per "
                          "second; wait and retry");
        goto done;
    }
    if (!member) {
        r.member = "";
        chat_control_fail(&r, why);
        goto done;
    }
    if (ev->payloadlen > MAX_REQUEST) {
        chat_control_fail(&r, "request is larger than 1048576 bytes");
        goto done;
    }
    if (ev->payloadlen == 0 || !chat_proto_utf8_valid(ev->payload, ev->payloadlen)) {
        chat_control_fail(&r, "request must be a UTF-8 JSON object");
        goto done;
    }
    /* U+0000 is a control character like U+0001, which every name and
     * field check refuses where it matters; cJSON would instead cut the
     * string short at it. Nothing may follow the object but blanks: "{...}
     * and more" is not a request whose tail we quietly ignore. */
    text = malloc(ev->payloadlen + 1);
    if (!text) {
        chat_control_fail(&r, "out of memory");
        goto done;
    }
    memcpy(text, ev->payload, ev->payloadlen);
    text[ev->payloadlen] = '\0';
    r.nuls = chat_nul_escapes(text, ev->payloadlen, "0001") > 0;
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts(text, ev->payloadlen, &end, false);
    const char *stop = text + ev->payloadlen;
    while (root && end < stop && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) {
        end++;
    }
    if (!root || end != stop) {
        chat_control_fail(&r, "malformed JSON");
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        chat_control_fail(&r, "request must be a JSON object");
        goto done;
    }
    const cJSON *cmds = cJSON_GetObjectItemCaseSensitive(root, "commands");
    if (!cJSON_IsArray(cmds)) {
        chat_control_fail(&r, cmds ? "commands must be an array" : "commands is missing");
        goto done;
    }
    int n = cJSON_GetArraySize(cmds);
    if (n > MAX_COMMANDS) {
        chat_control_fail(&r, "too many commands in one request (at most 1000)");
        goto done;
    }
    if (n == 0) {
        /* "Nothing more is owed to you now": while the device waits for its
         * catch-up's turn, only that turn can make it true, so the answer
         * waits for it (never a way past replay_budget). */
        const char *refused =
            chat_replay_hold_empty(pl, ev->client, reply_topic, corr, corr_len, &held);
        if (refused) {
            chat_control_fail(&r, refused);
        }
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
    if (held) {
        sbuf_free(&out); /* replay.c answers, with a copy of topic and corr */
    } else if (r.hold) {
        /* a UnifiedPush endpoint is being checked: the answer goes out
         * from the tick, with its entry in place */
        chat_push_hold(pl, device, reply_topic, corr, corr_len, &out);
    } else {
        chat_reply_send(pl, device, reply_topic, corr, corr_len, &out);
    }
    free(reply_topic);
    free(corr);
    free(text);
    cJSON_Delete(root);
    /* A bad request is answered, never a reason to disconnect the client. */
    return MOSQ_ERR_SUCCESS;
}
