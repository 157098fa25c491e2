/* dispatch.c: the dispatcher thread (see dispatch.h): events in, work for
 * the modules out.
 *
 * Invariant: each connection has its own MQTTAsync handle and epoch
 * (paho.h); when it ends, the handle and everything pending on it go
 * together (chat_paho_close, then connection_ended), and news tagged with
 * an older epoch changes no connection state.
 */
#include "dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"

#define TICK_MS 1000 /* the dispatcher wakes at least this often */

/* ===========================================================================
 * Connection
 * ========================================================================= */

/* Forgets what belonged to the connection that ended. */
static void connection_ended(chat_client *c)
{
    chat_outbox_connection_ended(&c->outbox);
    chat_delivery_connection_ended(&c->delivery);
    chat_receipts_connection_ended(&c->receipts);
    chat_requests_connection_ended(&c->requests, &c->calls);
}

static void on_connected(chat_client *c)
{
    chat_conn_up(&c->conn);
    if (c->conn.state != CONN_UP)
        return;
    /* Subscribing starts each group's catch-up; the sync after it reports
     * cursors and heads (delivery.h, baseline-first). */
    chat_delivery_connected(&c->delivery);
    chat_requests_sync(&c->requests);
    chat_requests_connected(&c->requests);
    chat_outbox_pump(&c->outbox);
    chat_calls_finish(&c->queue, &c->calls, CALL_CONNECT, CHAT_CLIENT_OK, NULL);
}

static void on_connection_lost(chat_client *c, const char *why)
{
    chat_conn_close(&c->conn);
    connection_ended(c);
    chat_conn_lost(&c->conn, why);
}

/* Our DISCONNECT went out (or the wait for it ended). */
static void closed(chat_client *c)
{
    chat_conn_close(&c->conn);
    connection_ended(c);
    chat_calls_finish(&c->queue, &c->calls, CALL_DISCONNECT, CHAT_CLIENT_OK, NULL);
}

/* A subscription was granted or refused. */
static void on_subscribed(chat_client *c, const struct chat_group *g, bool ok, int code)
{
    if (g == NULL) {
        /* The response topic (chat_delivery_connected): answers still come;
         * the reads and presence pushes do not. */
        if (!ok)
            chat_notify_error(&c->notify, NULL,
                              "subscription to the response topic refused: no reads or presence "
                              "pushes");
        return;
    }
    /* A refusal: the plugin's reason, if any, arrives before the answer to
     * a request sent now (one connection, in order). */
    if (!ok && code >= 0x80 && chat_requests_ping(&c->requests, REQ_PROBE, g->name, NULL) == NULL)
        chat_notify_error(&c->notify, g->name, "subscription refused");
}

/* A tracked publish or subscribe finished. */
static void on_done(chat_client *c, int token, bool ok, int code)
{
    struct chat_op op;

    if (!chat_paho_take(&c->paho, token, &op))
        return;
    switch (op.kind) {
    case CHAT_OP_MESSAGE:
        chat_outbox_done(&c->outbox, op.ref, ok, code);
        break;
    case CHAT_OP_ACK:
        chat_delivery_ack_done(&c->delivery);
        break;
    case CHAT_OP_SUBSCRIBE:
        on_subscribed(c, op.ptr, ok, code);
        break;
    case CHAT_OP_READ:
        chat_receipts_done(&c->receipts, op.ptr, op.ref, ok);
        break;
    }
}

/* ===========================================================================
 * Calls from the API
 * ========================================================================= */

static void on_disconnect_call(chat_client *c, struct call *call)
{
    chat_conn_unwant(&c->conn);
    if (c->conn.state == CONN_CONNECTING) {
        chat_conn_close(&c->conn);
        connection_ended(c);
    }
    if (c->conn.state == CONN_IDLE) {
        chat_queue_finish(&c->queue, call, CHAT_CLIENT_OK, NULL);
        return;
    }
    if (c->conn.state == CONN_UP) {
        chat_delivery_ack_all(&c->delivery);
        chat_receipts_flush(&c->receipts);
    }
    chat_calls_add(&c->calls, call); /* progress_calls goes on */
}

static void on_listen_call(chat_client *c, struct call *call)
{
    struct chat_group *g = chat_groups_get(&c->groups, call->group);

    if (g == NULL) {
        chat_notify_error(&c->notify, call->group, "out of memory listening");
    } else if (!g->listening) {
        g->listening = true;
        g->progress_ms = chat_now_ms();
        if (chat_paho_up(&c->paho)) {
            chat_delivery_subscribe(&c->delivery, g);
            chat_requests_sync(&c->requests);
        }
    }
    chat_queue_finish(&c->queue, call, CHAT_CLIENT_OK, NULL);
}

static void on_call(chat_client *c, struct call *call)
{
    switch (call->op) {
    case CALL_CONNECT:
        if (c->conn.state == CONN_UP) {
            chat_queue_finish(&c->queue, call, CHAT_CLIENT_OK, NULL);
            return;
        }
        chat_calls_add(&c->calls, call);
        chat_conn_want(&c->conn, call->timeout_ms);
        return;
    case CALL_DISCONNECT:
        on_disconnect_call(c, call);
        return;
    case CALL_LISTEN:
        on_listen_call(c, call);
        return;
    case CALL_SEND: {
        bool ok = chat_outbox_add(&c->outbox, call->group, call->payload, call->cid);
        call->group = NULL;
        call->payload = NULL;
        chat_queue_finish(&c->queue, call, ok ? CHAT_CLIENT_OK : CHAT_CLIENT_ERR_NOMEM, NULL);
        chat_outbox_pump(&c->outbox);
        return;
    }
    case CALL_FLUSH:
        chat_calls_add(&c->calls, call); /* progress_calls goes on */
        return;
    case CALL_REQUEST:
        if (chat_requests_new(&c->requests, REQ_USER, call->command, call->group, call->payload,
                              call) == NULL)
            chat_queue_finish(&c->queue, call, CHAT_CLIENT_ERR_NOMEM, NULL);
        return;
    case CALL_READ: {
        struct chat_group *g = chat_groups_get(&c->groups, call->group);
        if (g != NULL)
            chat_receipts_want(&c->receipts, g, call->id);
        chat_queue_finish(&c->queue, call, g != NULL ? CHAT_CLIENT_OK : CHAT_CLIENT_ERR_NOMEM,
                          NULL);
        return;
    }
    }
}

/* Where a disconnect call stands: true when the connection must close now.
 * Once the final acks are taken: DISCONNECT, then closed(). */
static bool disconnect_progress(chat_client *c, bool expired)
{
    switch (c->conn.state) {
    case CONN_UP:
        if (!expired && (c->delivery.acks_inflight > 0 || c->receipts.inflight > 0))
            return false;
        return !chat_conn_disconnect(&c->conn, 1000);
    case CONN_CLOSING:
        return expired;
    case CONN_IDLE:
    case CONN_CONNECTING:
        break;
    }
    return true;
}

/* Moves flush and disconnect calls on, and expires every call's deadline. */
static void progress_calls(chat_client *c, int64_t now)
{
    bool close_now = false;

    for (struct call *call = c->calls.head, *next; call != NULL; call = next) {
        bool expired = now >= call->deadline;
        next = call->next;
        if (call->op == CALL_DISCONNECT) {
            close_now |= disconnect_progress(c, expired);
        } else if (expired) {
            chat_calls_remove(&c->calls, call);
            chat_queue_finish(&c->queue, call, CHAT_CLIENT_ERR_TIMEOUT, NULL);
        } else if (call->op == CALL_FLUSH && chat_paho_up(&c->paho) &&
                   chat_outbox_empty(&c->outbox)) {
            /* The outbox drained: the plugin's answer to a ping now comes
             * after the error entries of every message in it. */
            chat_calls_remove(&c->calls, call);
            if (chat_requests_ping(&c->requests, REQ_BARRIER, NULL, call) == NULL)
                chat_queue_finish(&c->queue, call, CHAT_CLIENT_ERR_NOMEM, NULL);
        }
    }
    if (close_now)
        closed(c);
    chat_requests_expire_calls(&c->requests, now);
}

/* ===========================================================================
 * Timers and the loop
 * ========================================================================= */

/* Does g wait for something the timer must ask for (a gap no replay filled,
 * a baseline no sync gave)? */
static bool gap_waits(const chat_client *c, const struct chat_group *g)
{
    return chat_paho_up(&c->paho) && g->listening && !g->fetching && !c->delivery.halted &&
           (chat_group_behind(g) || (!g->seq.known && g->seq.n > 0));
}

static void run_timers(chat_client *c, int64_t now)
{
    struct chat_request *r;

    chat_conn_tick(&c->conn, now);
    chat_delivery_tick(&c->delivery, now);
    chat_receipts_tick(&c->receipts, now);
    for (struct chat_group *g = c->groups.head; g != NULL; g = g->next) {
        if (!gap_waits(c, g) || now < g->progress_ms + c->gap_timeout_ms)
            continue;
        if (chat_group_behind(g)) {
            chat_requests_gap_fetch(&c->requests, g);
        } else {
            /* Messages wait for a baseline the sync did not give. */
            g->progress_ms = now;
            chat_requests_sync(&c->requests);
        }
    }
    while ((r = chat_requests_take_expired(&c->requests, now)) != NULL)
        chat_response_expired(&c->responses, r);
    progress_calls(c, now);
}

/* When the loop must wake next. */
static int64_t next_wake(const chat_client *c, int64_t now)
{
    int64_t t = now + TICK_MS;

    t = chat_conn_next_wake(&c->conn, t);
    t = chat_delivery_next_wake(&c->delivery, t);
    t = chat_receipts_next_wake(&c->receipts, t);
    for (const struct chat_group *g = c->groups.head; g != NULL; g = g->next)
        if (gap_waits(c, g) && g->progress_ms + c->gap_timeout_ms < t)
            t = g->progress_ms + c->gap_timeout_ms;
    for (const struct call *call = c->calls.head; call != NULL; call = call->next)
        if (call->deadline < t)
            t = call->deadline;
    return t < now ? now : t;
}

static void handle_message(chat_client *c, const struct event *ev)
{
    size_t plen = strlen(c->prefix);
    const char *name;

    if (strcmp(ev->topic, CHAT_PROTO_RESPONSE_TOPIC) == 0) {
        chat_response_handle(&c->responses, ev);
        return;
    }
    if (strncmp(ev->topic, c->prefix, plen) != 0 || ev->topic[plen] != '/')
        return;
    name = ev->topic + plen + 1;
    if (strchr(name, '/') == NULL)
        chat_delivery_live(&c->delivery, name, ev->payload, ev->len);
}

static void handle_event(chat_client *c, struct event *ev)
{
    bool current = ev->epoch == chat_paho_epoch(&c->paho);
    enum conn_state cs = c->conn.state;

    switch (ev->kind) {
    case EV_CALL:
        on_call(c, ev->call);
        break;
    case EV_MESSAGE:
        handle_message(c, ev);
        break;
    case EV_CONNECTED:
        if (current && cs == CONN_CONNECTING)
            on_connected(c);
        break;
    case EV_CONNECT_FAILED:
        if (current && cs == CONN_CONNECTING)
            chat_conn_failed(&c->conn, ev->code, ev->text);
        break;
    case EV_SERVER_DISCONNECT:
        /* Paho 1.3.12 reports a broker's DISCONNECT only here: it calls no
         * connection_lost after it, so this is the end of the connection. */
        if (current && cs == CONN_UP) {
            chat_conn_server_disconnect(&c->conn, ev->code, ev->text);
            on_connection_lost(c, NULL);
        }
        break;
    case EV_CONN_LOST:
        if (current && cs == CONN_UP)
            on_connection_lost(c, ev->text);
        else if (current && cs == CONN_CLOSING)
            closed(c);
        break;
    case EV_DISCONNECTED:
        if (current && cs == CONN_CLOSING)
            closed(c);
        break;
    case EV_DONE:
        if (current)
            on_done(c, ev->token, ev->ok, ev->code);
        break;
    }
}

void *chat_dispatch_main(void *arg)
{
    chat_client *c = arg;
    struct event *ev;
    bool lost_news;

    while (chat_queue_pop(&c->queue, next_wake(c, chat_now_ms()), &ev, &lost_news)) {
        if (lost_news) {
            /* Perhaps the news that the connection changed: ask Paho. */
            chat_notify_error(&c->notify, NULL, "out of memory: news from Paho was lost");
            if (c->conn.state == CONN_UP && !chat_paho_connected(&c->paho))
                on_connection_lost(c, "lost (noticed late)");
            else if (c->conn.state == CONN_CONNECTING && chat_paho_connected(&c->paho))
                on_connected(c);
        }
        if (ev != NULL) {
            handle_event(c, ev);
            chat_event_free(ev);
        }
        run_timers(c, chat_now_ms());
    }
    /* On exit the state file catches up with everything shown. */
    chat_delivery_flush(&c->delivery);
    return NULL;
}

void chat_dispatch_free(chat_client *c)
{
    chat_paho_free(&c->paho);
    chat_groups_free(&c->groups);
    chat_outbox_free(&c->outbox);
    chat_requests_free(&c->requests);
    chat_calls_finish_all(&c->queue, &c->calls, CHAT_CLIENT_ERR_CLOSED);
}
