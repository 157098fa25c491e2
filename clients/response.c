/* response.c: answers, pages and error entries on the response topic (see
 * response.h). */
#include "response.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "proto.h"

/* Error entries that answer no request (no correlationData): refused
 * publishes, subscribes and acks, replay errors, and requests the plugin
 * refused whole (too many requests). */
static void unsolicited(const chat_responses *rs, const char *command, const cJSON *entry)
{
    const cJSON *grp = cJSON_GetObjectItemCaseSensitive(entry, "group");
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(entry, "cid");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(entry, "error");
    const char *group = cJSON_IsString(grp) ? grp->valuestring : NULL;
    const char *reason = cJSON_IsString(err) ? err->valuestring : "refused";
    struct chat_group *g;
    chat_client_event ev;

    memset(&ev, 0, sizeof ev);
    ev.group = group;
    ev.reason = reason;
    if (strcmp(command, "publish") == 0) {
        ev.type = CHAT_CLIENT_EV_SEND_REFUSED;
        ev.cid = cJSON_IsString(cid) ? cid->valuestring : NULL;
        /* MQTT 5 counted it at its PUBACK already. */
        if (rs->paho->cfg.version < 5)
            chat_outbox_count_refused(rs->outbox);
        chat_notify_event(rs->notify, &ev);
    } else if (strcmp(command, "subscribe") == 0) {
        /* Reported when the probe after the refused SUBACK is answered. */
        if (group != NULL && (g = chat_groups_find(rs->groups, group)) != NULL) {
            free(g->refusal);
            g->refusal = strdup(reason);
        } else {
            chat_notify_error(rs->notify, group, "subscription refused: %s", reason);
        }
    } else {
        chat_notify_error(rs->notify, group, "%s refused: %s", command, reason);
    }
}

/* Reports the refusal of group's subscription, with the plugin's reason if
 * it came (it comes before the probe's answer). */
static void listen_refused(const chat_responses *rs, const char *group)
{
    struct chat_group *g = group != NULL ? chat_groups_find(rs->groups, group) : NULL;
    chat_client_event ev;

    if (g == NULL)
        return;
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_LISTEN_REFUSED;
    ev.group = g->name;
    ev.reason = g->refusal ? g->refusal : "the broker refused the subscription";
    chat_notify_event(rs->notify, &ev);
    free(g->refusal);
    g->refusal = NULL;
}

/* One group of the internal sync's answer (to r): a baseline, a reset, a
 * lost ack or a cursor past what was shown. */
static void sync_group(const chat_responses *rs, const struct chat_request *r, struct chat_group *g,
                       uint64_t head, uint64_t acked, bool renewed)
{
    chat_delivery *d = rs->delivery;
    uint64_t then = chat_request_shown_when_sent(r, g);

    if (!g->seq.known) {
        uint64_t base = acked;
        if (g->min_first > 0 && g->min_first - 1 < base)
            base = g->min_first - 1;
        chat_seq_set_base(&g->seq, base);
        if (base > g->recorded)
            g->recorded = base; /* the device's cursor is there already */
        g->progress_ms = chat_now_ms();
        chat_group_raise_head(g, head);
        chat_delivery_ready(d, g);
        if (g->min_first > 0)
            chat_delivery_ack(d, g); /* held replay pages wait for it */
    } else if (renewed || head < then) {
        /* Ids it had stored are gone: its store was replaced. */
        if (renewed)
            chat_notify_error(rs->notify, g->name,
                              "the server's store started a new incarnation (it lost its last "
                              "writes or was replaced); following it from its cursor %" PRIu64,
                              acked);
        else
            chat_notify_error(rs->notify, g->name,
                              "the server's head %" PRIu64 " is below the last id shown %" PRIu64
                              ": its history was replaced; following it from its cursor %" PRIu64,
                              head, then, acked);
        chat_group_rebase(rs->groups, g, acked);
        chat_delivery_record(d, g, acked);
        g->head = head;
    } else if (acked < g->seq.shown) {
        chat_delivery_ack(d, g); /* an ack was lost with the connection */
    } else if (acked > g->seq.shown && !g->fetching) {
        /* The cursor passed what was shown (delivery.h, state-before-ack): no
         * replay will come for those ids, so fetch them now. */
        chat_group_raise_head(g, head);
        chat_requests_gap_fetch(rs->requests, g);
    }
    chat_group_raise_head(g, head);
    chat_delivery_ready(d, g);
    chat_delivery_catchup(d, g);
}

/* The internal sync's answer (to r): the incarnation, then each listened
 * group. */
static void apply_sync(const chat_responses *rs, const struct chat_request *r, const cJSON *entry)
{
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(entry, "groups");
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(entry, "incarnation");
    const cJSON *e;
    bool renewed = false;

    if (!cJSON_IsArray(groups)) {
        chat_notify_error(rs->notify, NULL, "sync answer without groups");
        return;
    }
    if (cJSON_IsString(inc))
        renewed = chat_delivery_incarnation(rs->delivery, inc->valuestring);
    cJSON_ArrayForEach(e, groups)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "group");
        uint64_t head = 0, acked = 0;
        struct chat_group *g;

        if (!cJSON_IsString(name) ||
            (g = chat_groups_find(rs->groups, name->valuestring)) == NULL || !g->listening)
            continue;
        if (!chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "head"), 0, &head) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "acked"), 0, &acked)) {
            chat_notify_error(rs->notify, g->name, "sync entry without head or acked");
            continue;
        }
        sync_group(rs, r, g, head, acked, renewed);
    }
}

/* A gap fetch's answer (entry, whose messages are taken) for g. */
static void apply_gap(const chat_responses *rs, struct chat_group *g, const cJSON *entry,
                      const struct chat_span *msgs, const char *why)
{
    uint64_t before = g->seq.shown;
    bool more;

    g->fetching = false;
    g->progress_ms = chat_now_ms();
    if (why != NULL) {
        chat_notify_error(rs->notify, g->name, "fetch refused: %s", why);
        return;
    }
    if (!g->listening || !g->seq.known)
        return;
    more = chat_delivery_page(rs->delivery, g, entry, msgs, false);
    /* No replay brings these: keep pulling while it helps. */
    if (chat_group_behind(g) && (more || g->seq.shown > before) && !g->fetching)
        chat_requests_gap_fetch(rs->requests, g);
}

/* A caller's answer: the call gets a copy of entry; fetched messages of a
 * listened group also go the usual way. */
static void answer_call(const chat_responses *rs, const struct chat_request *r,
                        struct chat_group *g, const cJSON *entry, const struct chat_span *msgs,
                        const char *why)
{
    if (why != NULL) {
        chat_queue_finish(rs->queue, r->call, CHAT_CLIENT_ERR_REFUSED, why);
        return;
    }
    if ((r->call->entry = cJSON_Duplicate(entry, 1)) == NULL) {
        chat_queue_finish(rs->queue, r->call, CHAT_CLIENT_ERR_NOMEM, NULL);
        return;
    }
    if (strcmp(r->command, "fetch") == 0 && g != NULL && g->listening && g->seq.known)
        (void)chat_delivery_page(rs->delivery, g, entry, msgs, false);
    chat_queue_finish(rs->queue, r->call, CHAT_CLIENT_OK, NULL);
}

/* Finishes request r (taken) with entry, its answer (its messages in msgs,
 * see chat_delivery_page). */
static void complete(const chat_responses *rs, struct chat_request *r, const cJSON *entry,
                     const struct chat_span *msgs)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(entry, "error");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
    const char *why = cJSON_IsString(err) ? err->valuestring : NULL;
    struct chat_group *g = r->group ? chat_groups_find(rs->groups, r->group) : NULL;

    if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, r->command) != 0) {
        /* The plugin says back what it was sent: this is not our answer. */
        if (r->call != NULL)
            chat_queue_finish(rs->queue, r->call, CHAT_CLIENT_ERR_PROTOCOL,
                              "the answer to a command names another command");
        else
            chat_notify_error(rs->notify, r->group,
                              "ignored an answer to %s that names another command", r->command);
        if (r->kind == REQ_GAP && g != NULL)
            g->fetching = false;
    } else if (r->kind == REQ_SYNC && why != NULL) {
        chat_notify_error(rs->notify, NULL, "sync refused: %s", why);
    } else if (r->kind == REQ_SYNC) {
        apply_sync(rs, r, entry);
    } else if (r->kind == REQ_GAP && g != NULL) {
        apply_gap(rs, g, entry, msgs, why);
    } else if (r->kind == REQ_PROBE) {
        listen_refused(rs, r->group);
    } else if (r->kind == REQ_BARRIER && r->call != NULL) {
        /* Any answer will do, an error too: it came after the error entries
         * of every message sent before it. */
        r->call->refused = chat_outbox_take_refused(rs->outbox);
        chat_queue_finish(rs->queue, r->call, CHAT_CLIENT_OK, NULL);
    } else if (r->kind == REQ_USER && r->call != NULL) {
        answer_call(rs, r, g, entry, msgs, why);
    }
    chat_request_free(r);
}

/* One entry of a response: an answer (by its correlationData), a replay
 * page, or an error about something else. Its messages are in msgs (see
 * chat_delivery_page). */
static void handle_entry(const chat_responses *rs, const struct event *ev, const cJSON *entry,
                         const struct chat_span *msgs)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
    const cJSON *corr = cJSON_GetObjectItemCaseSensitive(entry, "correlationData");
    const char *command = cJSON_IsString(cmd) ? cmd->valuestring : "request";
    struct chat_request *r;

    if (cJSON_IsString(corr)) {
        /* An answer from a connection that ended answers nothing any more;
         * nor one whose request is gone (its caller gave up, it expired). */
        if (ev->epoch != chat_paho_epoch(rs->paho) || !chat_paho_up(rs->paho) ||
            (r = chat_requests_find(rs->requests, corr->valuestring)) == NULL)
            return;
        chat_requests_unlink(rs->requests, r);
        complete(rs, r, entry, msgs);
    } else if (cJSON_GetObjectItemCaseSensitive(entry, "error") != NULL) {
        unsolicited(rs, command, entry);
    } else if (strcmp(command, "replay") == 0) {
        const cJSON *grp = cJSON_GetObjectItemCaseSensitive(entry, "group");
        struct chat_group *g =
            cJSON_IsString(grp) ? chat_groups_find(rs->groups, grp->valuestring) : NULL;
        if (g != NULL && g->listening)
            (void)chat_delivery_page(rs->delivery, g, entry, msgs, true);
    } else if (strcmp(command, "reads") == 0 || strcmp(command, "presence") == 0) {
        chat_receipts_push(rs->receipts, entry);
    }
    /* Anything else answers nothing we asked. */
}

void chat_response_handle(const chat_responses *rs, const struct event *ev)
{
    static const struct chat_span none = {NULL, 0, NULL, 0};
    struct chat_span *spans = NULL;
    size_t n = 0, i = 0;
    cJSON *root = NULL, *responses, *entry;

    /* Most payloads are cut (the messages read from their bytes); others
     * parsed whole, as cJSON reads them. */
    if (!chat_response_cut(ev->payload, ev->len, &root, &spans, &n))
        root = cJSON_ParseWithLength(ev->payload, ev->len);
    responses = cJSON_GetObjectItemCaseSensitive(root, "responses");
    if (!cJSON_IsArray(responses))
        chat_notify_error(rs->notify, NULL,
                          "ignored a response that is not {\"responses\":[...]}: %.200s",
                          ev->payload);
    else
        cJSON_ArrayForEach(entry, responses)
        {
            handle_entry(rs, ev, entry, i < n ? &spans[i] : &none);
            i++;
        }
    cJSON_Delete(root);
    chat_spans_free(spans, n);
}

void chat_response_expired(const chat_responses *rs, struct chat_request *r)
{
    struct chat_group *g;

    if (r->kind == REQ_SYNC)
        chat_requests_sync(rs->requests);
    else if (r->kind == REQ_GAP && (g = chat_groups_find(rs->groups, r->group)) != NULL)
        g->fetching = false;
    else if (r->kind == REQ_PROBE)
        listen_refused(rs, r->group);
    chat_request_free(r);
}
