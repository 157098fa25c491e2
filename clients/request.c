/* request.c: requests matched to their answers by correlationData (see
 * request.h). */
#include "request.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "proto.h"

void chat_requests_init(chat_requests *rq, const struct chat_requests_cfg *cfg)
{
    memset(rq, 0, sizeof *rq);
    rq->cfg = *cfg;
}

void chat_requests_unlink(chat_requests *rq, struct chat_request *r)
{
    struct chat_request **pp = &rq->head, *prev = NULL;

    while (*pp != NULL && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    assert(*pp == r);
    *pp = r->next;
    if (rq->tail == r)
        rq->tail = prev;
    r->next = NULL;
}

void chat_request_free(struct chat_request *r)
{
    if (r == NULL)
        return;
    free(r->snap_group);
    free(r->snap_shown);
    free(r->group);
    free(r->cmd);
    free(r);
}

static void drop(chat_requests *rq, struct chat_request *r)
{
    chat_requests_unlink(rq, r);
    chat_request_free(r);
}

struct chat_request *chat_requests_find(const chat_requests *rq, const char *corr)
{
    for (struct chat_request *r = rq->head; r != NULL; r = r->next)
        if (r->sent && strcmp(r->corr, corr) == 0)
            return r;
    return NULL;
}

/* Publishes r now if connected, with a correlationData never used before:
 * an answer to an earlier sending answers nothing any more. */
static void send_request(chat_requests *rq, struct chat_request *r)
{
    char *payload;
    int rc;

    if (!chat_paho_up(rq->cfg.paho))
        return;
    snprintf(r->corr, sizeof r->corr, "%s-r%" PRIu64, rq->cfg.corr_prefix, ++rq->seq);
    if ((payload = chat_request_text(r->cmd, r->corr)) == NULL) {
        chat_notify_error(rq->cfg.notify, r->group, "out of memory sending a %s request",
                          r->command);
        return;
    }
    rc = chat_paho_publish(rq->cfg.paho, CHAT_PROTO_CONTROL_TOPIC, payload, strlen(payload), 1,
                           NULL);
    free(payload);
    if (rc == MQTTASYNC_DISCONNECTED)
        return; /* sent after the connect */
    if (rc != MQTTASYNC_SUCCESS) {
        chat_notify_error(rq->cfg.notify, r->group, "cannot send a %s request: %s", r->command,
                          MQTTAsync_strerror(rc));
        return;
    }
    r->sent = true;
    r->sent_ms = chat_now_ms();
}

struct chat_request *chat_requests_new(chat_requests *rq, enum req_kind kind, const char *command,
                                       const char *group, const char *cmd, struct call *call)
{
    struct chat_request *r = calloc(1, sizeof *r);

    if (r == NULL)
        return NULL;
    r->kind = kind;
    /* A copy (chat_client_request's names live in the call), cut to fit:
     * the API allows 40 bytes. */
    size_t n = strlen(command);
    n = n < sizeof r->command_buf ? n : sizeof r->command_buf - 1;
    memcpy(r->command_buf, command, n);
    r->command_buf[n] = '\0';
    r->command = r->command_buf;
    r->call = call;
    if ((group != NULL && (r->group = strdup(group)) == NULL) || (r->cmd = strdup(cmd)) == NULL) {
        chat_request_free(r);
        return NULL;
    }
    if (rq->tail != NULL)
        rq->tail->next = r;
    else
        rq->head = r;
    rq->tail = r;
    send_request(rq, r);
    return r;
}

struct chat_request *chat_requests_ping(chat_requests *rq, enum req_kind kind, const char *group,
                                        struct call *call)
{
    char after[CHAT_PROTO_GROUP_MAX + 1];
    chat_obj o = {0};
    struct chat_request *r = NULL;
    char *cmd;

    /* A `sync` that lists nothing: no group name sorts after the longest
     * name made of the largest code point (docs/protocol.md, sync's
     * "after"), so the plugin visits no group's records for it. */
    for (size_t i = 0; i + 4 <= CHAT_PROTO_GROUP_MAX; i += 4)
        memcpy(after + i, "\xF4\x8F\xBF\xBF", 4); /* U+10FFFF */
    after[CHAT_PROTO_GROUP_MAX] = '\0';
    chat_obj_str(&o, "command", "sync");
    chat_obj_bool(&o, "replay", false);
    chat_obj_str(&o, "after", after);
    if ((cmd = chat_obj_end(&o)) != NULL)
        r = chat_requests_new(rq, kind, "sync", group, cmd, call);
    free(cmd);
    return r;
}

/* Records what each known group had shown when r was sent: the heads in
 * r's answer are no older than that, though live messages (another QoS) may
 * overtake the answer itself. */
static void snapshot(chat_requests *rq, struct chat_request *r)
{
    size_t n = 0;

    for (struct chat_group *g = rq->cfg.groups->head; g != NULL; g = g->next)
        n++;
    r->snap_group = calloc(n ? n : 1, sizeof *r->snap_group);
    r->snap_shown = calloc(n ? n : 1, sizeof *r->snap_shown);
    if (r->snap_group == NULL || r->snap_shown == NULL)
        return; /* no snapshot: no reset is ever concluded from r */
    for (struct chat_group *g = rq->cfg.groups->head; g != NULL; g = g->next) {
        if (!g->seq.known)
            continue;
        r->snap_group[r->nsnap] = g;
        r->snap_shown[r->nsnap++] = g->seq.shown;
    }
}

void chat_requests_sync(chat_requests *rq)
{
    struct chat_request *r;
    chat_obj o = {0};
    char *cmd;

    if (!chat_paho_up(rq->cfg.paho))
        return;
    chat_obj_str(&o, "command", "sync");
    chat_obj_bool(&o, "replay", false);
    cmd = chat_obj_end(&o);
    r = cmd != NULL ? chat_requests_new(rq, REQ_SYNC, "sync", NULL, cmd, NULL) : NULL;
    free(cmd);
    if (r == NULL)
        chat_notify_error(rq->cfg.notify, NULL, "out of memory sending sync");
    else
        snapshot(rq, r);
}

uint64_t chat_request_shown_when_sent(const struct chat_request *r, const struct chat_group *g)
{
    for (size_t i = 0; i < r->nsnap; i++)
        if (r->snap_group[i] == g)
            return r->snap_shown[i];
    return 0;
}

void chat_requests_gap_fetch(chat_requests *rq, struct chat_group *g)
{
    struct chat_request *r = NULL;
    chat_obj o = {0};
    char *cmd;

    chat_obj_str(&o, "command", "fetch");
    chat_obj_str(&o, "group", g->name);
    chat_obj_u64(&o, "after", g->seq.shown);
    if ((cmd = chat_obj_end(&o)) == NULL ||
        (r = chat_requests_new(rq, REQ_GAP, "fetch", g->name, cmd, NULL)) == NULL)
        chat_notify_error(rq->cfg.notify, g->name, "out of memory sending a fetch");
    else if (!r->sent)
        drop(rq, r); /* not connected: the gap's timer tries again */
    else
        g->fetching = true;
    free(cmd);
}

void chat_requests_connected(chat_requests *rq)
{
    for (struct chat_request *r = rq->head; r != NULL; r = r->next)
        if (!r->sent)
            send_request(rq, r);
}

void chat_requests_connection_ended(chat_requests *rq, struct chat_calls *calls)
{
    for (struct chat_request *r = rq->head, *next; r != NULL; r = next) {
        next = r->next;
        if (r->kind == REQ_USER && r->call != NULL) {
            r->sent = false; /* sent again after the connect */
            continue;
        }
        /* A flush pings again once the outbox, resent first, drains. */
        if (r->kind == REQ_BARRIER && r->call != NULL)
            chat_calls_add(calls, r->call);
        drop(rq, r);
    }
}

void chat_requests_expire_calls(chat_requests *rq, int64_t now)
{
    for (struct chat_request *r = rq->head, *next; r != NULL; r = next) {
        next = r->next;
        if (r->call == NULL || now < r->call->deadline)
            continue;
        chat_queue_finish(rq->cfg.queue, r->call, CHAT_CLIENT_ERR_TIMEOUT, NULL);
        drop(rq, r);
    }
}

struct chat_request *chat_requests_take_expired(chat_requests *rq, int64_t now)
{
    for (struct chat_request *r = rq->head; r != NULL; r = r->next) {
        if (!r->sent || r->call != NULL || now < r->sent_ms + rq->cfg.timeout_ms)
            continue;
        chat_requests_unlink(rq, r);
        return r;
    }
    return NULL;
}

void chat_requests_free(chat_requests *rq)
{
    while (rq->head != NULL) {
        struct chat_request *r = rq->head;
        rq->head = r->next;
        if (r->call != NULL)
            chat_queue_finish(rq->cfg.queue, r->call, CHAT_CLIENT_ERR_CLOSED, NULL);
        chat_request_free(r);
    }
    rq->tail = NULL;
}
