/* dispatch.c: the client library's dispatcher thread, which owns the
 * connection's state and turns what Paho receives into ordered messages.
 *
 * Design. Paho's callbacks and the public API only queue events; this one
 * thread pops them and is the only one to touch groups, outbox and requests,
 * to call Paho (besides create/destroy) and to call the application. So the
 * ordering logic needs no locks, and nothing the application or the state
 * file does can stall Paho's thread.
 *
 * Invariants:
 *   1. on_message gets an id of group g only if it is shown(g) + 1 (seq.c);
 *      shown(g) only grows, except when the server's head falls below it
 *      (its store was replaced), which is reported.
 *   2. The state file is written after each message shown and before any
 *      ack covering it is published, so the plugin's cursor never passes the
 *      state file and a restart misses nothing. Should it pass anyway (a
 *      lost state file, a power loss), `sync` reports acked > shown and a
 *      fetch from shown fills the difference: messages may show twice then,
 *      never go missing.
 *   3. Every sending of a request carries a correlationData never used
 *      before, which the plugin says back in the command's entry (answer,
 *      page or error alike): an entry answers the sent request with that
 *      correlationData, or nothing, over MQTT 3.1.1 and 5 alike. Entries
 *      without one (refused publishes, subscribes and acks, replay pages)
 *      answer no request. A request whose answer does not come is given up
 *      at its deadline.
 *   4. An outbox entry leaves the outbox only when the broker acknowledged
 *      it (or refused it): after a reconnect everything left is sent again,
 *      with the same cid, in the original order.
 *   5. A group's baseline (the id after which it starts) comes from the state
 *      file or from the plugin (`sync`'s acked, or an earlier replay page's
 *      first - 1): until then everything is held, nothing shown.
 *   6. Each connection has its own MQTTAsync handle and epoch (paho.c); when
 *      it ends, the handle and everything pending on it go together, and news
 *      tagged with an older epoch changes no connection state.
 */
#include "client.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INFLIGHT 32            /* sends awaiting PUBACK at once */
#define BACKOFF_FIRST_MS 250       /* first pause before reconnecting */
#define TICK_MS 1000               /* the dispatcher wakes at least this often */
#define STATE_ERROR_EVERY_MS 10000 /* at most one state file error event per period */

/* ===========================================================================
 * Helpers
 * ========================================================================= */

static void emit(chat_client *c, chat_client_event *ev)
{
    if (c->on_event != NULL)
        c->on_event(c->arg, ev);
}

static void emit_error(chat_client *c, const char *group, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void emit_error(chat_client *c, const char *group, const char *fmt, ...)
{
    chat_client_event ev;
    char reason[REASON_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_ERROR;
    ev.group = group;
    ev.reason = reason;
    emit(c, &ev);
}

static void free_json(void *item)
{
    cJSON_Delete(item);
}

static struct group *group_find(chat_client *c, const char *name)
{
    for (struct group *g = c->groups; g != NULL; g = g->next)
        if (strcmp(g->name, name) == 0)
            return g;
    return NULL;
}

/* The group named name, created if new; NULL when out of memory. */
static struct group *group_get(chat_client *c, const char *name)
{
    struct group *g = group_find(c, name);

    if (g != NULL)
        return g;
    if ((g = calloc(1, sizeof *g)) == NULL || (g->name = strdup(name)) == NULL) {
        free(g);
        return NULL;
    }
    chat_seq_init(&g->seq, c->max_held, free_json);
    g->progress_ms = chat_now_ms();
    g->next = c->groups;
    c->groups = g;
    return g;
}

/* A listened group known well enough to be behind: ids above shown exist. */
static bool behind(const struct group *g)
{
    return g->listening && g->seq.known && (g->seq.n > 0 || g->head > g->seq.shown);
}

/* Notes that ids up to head exist; a gap that opens now starts its clock. */
static void raise_head(struct group *g, uint64_t head)
{
    if (head <= g->head)
        return;
    if (!behind(g))
        g->progress_ms = chat_now_ms();
    g->head = head;
}

/* Records a tracked operation of the current connection. */
static bool pend_add(chat_client *c, int token, enum pend_kind kind, uint64_t ref, struct group *g)
{
    if (c->npend == c->cap_pend) {
        size_t cap = c->cap_pend ? c->cap_pend * 2 : 64;
        struct pend *p = realloc(c->pend, cap * sizeof *p);
        if (p == NULL)
            return false;
        c->pend = p;
        c->cap_pend = cap;
    }
    c->pend[c->npend].token = token;
    c->pend[c->npend].kind = kind;
    c->pend[c->npend].ref = ref;
    c->pend[c->npend].g = g;
    c->npend++;
    return true;
}

/* Removes the operation with token (or, for messages, ref) into *out;
 * false if there is none. */
static bool pend_take(chat_client *c, int token, enum pend_kind kind, uint64_t ref,
                      struct pend *out)
{
    for (size_t i = 0; i < c->npend; i++) {
        struct pend *p = &c->pend[i];
        if (token != 0 ? p->token != token : (p->kind != kind || p->ref != ref))
            continue;
        if (out != NULL)
            *out = *p;
        c->pend[i] = c->pend[--c->npend];
        return true;
    }
    return false;
}

/* ===========================================================================
 * Sending: acks, subscriptions, the outbox
 * ========================================================================= */

/* Publishes the highest gap-free id of g as its cumulative ack. */
static void send_ack(chat_client *c, struct group *g)
{
    char topic[CHAT_GROUP_MAX + 256], payload[32];
    int rc, token = 0;

    g->ack_due = 0;
    if (c->cs != CS_UP || !g->seq.known || g->seq.shown == 0)
        return; /* the sync after the next connect repairs the cursor */
    snprintf(topic, sizeof topic, "%s/%s/ack", c->prefix, g->name);
    snprintf(payload, sizeof payload, "%" PRIu64, g->seq.shown);
    rc = chat_paho_publish(c, topic, payload, strlen(payload), 1, true, &token);
    if (rc != MQTTASYNC_SUCCESS) {
        if (rc != MQTTASYNC_DISCONNECTED) /* else the sync after the connect repairs it */
            emit_error(c, g->name, "cannot publish an ack: %s", MQTTAsync_strerror(rc));
        return;
    }
    if (pend_add(c, token, PEND_ACK, 0, g))
        c->acks_inflight++;
    g->acked = g->seq.shown;
    g->unacked = 0;
}

static void subscribe_group(chat_client *c, struct group *g)
{
    char topic[CHAT_GROUP_MAX + 256];
    int rc, token = 0;

    snprintf(topic, sizeof topic, "%s/%s", c->prefix, g->name);
    rc = chat_paho_subscribe(c, topic, c->listen_qos, &token);
    if (rc == MQTTASYNC_DISCONNECTED)
        return; /* subscribed again after the connect */
    if (rc != MQTTASYNC_SUCCESS)
        emit_error(c, g->name, "cannot subscribe to %s: %s", topic, MQTTAsync_strerror(rc));
    else if (!pend_add(c, token, PEND_SUBSCRIBE, 0, g))
        emit_error(c, g->name, "out of memory subscribing");
}

/* Finishes an outbox entry: removes it and counts it out of outbox_len. */
static void outbox_remove(chat_client *c, struct outmsg *m)
{
    struct outmsg **pp = &c->out_head, *prev = NULL;

    while (*pp != NULL && *pp != m) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    assert(*pp == m);
    *pp = m->next;
    if (c->out_tail == m)
        c->out_tail = prev;
    if (m->pending) {
        (void)pend_take(c, 0, PEND_MESSAGE, m->seq, NULL);
        c->inflight--;
    }
    pthread_mutex_lock(&c->mu);
    c->outbox_len--;
    pthread_mutex_unlock(&c->mu);
    free(m->group);
    free(m->topic);
    free(m->payload);
    free(m);
}

/* Publishes outbox entries not yet sent on this connection, in order, while
 * fewer than MAX_INFLIGHT wait for their PUBACK. */
static void pump_outbox(chat_client *c)
{
    for (struct outmsg *m = c->out_head; m != NULL && c->cs == CS_UP && c->inflight < MAX_INFLIGHT;
         m = m->next) {
        int rc, token = 0;
        if (m->pending || m->sent_epoch == c->epoch)
            continue;
        m->sent_epoch = c->epoch;
        rc = chat_paho_publish(c, m->topic, m->payload, strlen(m->payload), c->send_qos, true,
                               &token);
        if (rc == MQTTASYNC_DISCONNECTED)
            break; /* the loss is on its way to us; everything goes after the connect */
        if (rc != MQTTASYNC_SUCCESS) {
            emit_error(c, m->group,
                       "cannot publish message %s: %s (sent again after the next "
                       "connect)",
                       m->cid, MQTTAsync_strerror(rc));
            continue;
        }
        if (!pend_add(c, token, PEND_MESSAGE, m->seq, NULL)) {
            emit_error(c, m->group, "out of memory tracking message %s", m->cid);
            continue;
        }
        m->pending = true;
        c->inflight++;
    }
}

/* ===========================================================================
 * Requests
 * ========================================================================= */

static void req_unlink(chat_client *c, struct request *r)
{
    struct request **pp = &c->req_head, *prev = NULL;

    while (*pp != NULL && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    assert(*pp == r);
    *pp = r->next;
    if (c->req_tail == r)
        c->req_tail = prev;
    r->next = NULL;
}

static void req_free(struct request *r)
{
    if (r == NULL)
        return;
    free(r->snap_group);
    free(r->snap_shown);
    free(r->group);
    free(r->cmd);
    free(r);
}

/* Unlinks and frees r. */
static void req_drop(chat_client *c, struct request *r)
{
    req_unlink(c, r);
    req_free(r);
}

/* The sent request whose correlationData is corr, or NULL. */
static struct request *req_find(chat_client *c, const char *corr)
{
    for (struct request *r = c->req_head; r != NULL; r = r->next)
        if (r->sent && strcmp(r->corr, corr) == 0)
            return r;
    return NULL;
}

/* Publishes r now if connected, with a correlationData never used before
 * (invariant 3): an answer to an earlier sending answers nothing any more. */
static void req_send(chat_client *c, struct request *r)
{
    char *payload;
    int rc;

    if (c->cs != CS_UP)
        return;
    snprintf(r->corr, sizeof r->corr, "%s-r%" PRIu64, c->cid_prefix, ++c->req_seq);
    if ((payload = chat_request_text(r->cmd, r->corr)) == NULL) {
        emit_error(c, r->group, "out of memory sending a %s request", r->command);
        return;
    }
    rc = chat_paho_publish(c, CHAT_CONTROL_TOPIC, payload, strlen(payload), 1, false, NULL);
    free(payload);
    if (rc == MQTTASYNC_DISCONNECTED)
        return; /* sent after the connect */
    if (rc != MQTTASYNC_SUCCESS) {
        emit_error(c, r->group, "cannot send a %s request: %s", r->command, MQTTAsync_strerror(rc));
        return;
    }
    r->sent = true;
    r->sent_ms = chat_now_ms();
}

/* Creates a request for one command (cmd, a JSON object text, named
 * command), appends it and sends it if connected. Returns NULL when out of
 * memory. */
static struct request *req_new(chat_client *c, enum req_kind kind, const char *command,
                               const char *group, const char *cmd, struct call *call)
{
    struct request *r = calloc(1, sizeof *r);

    if (r == NULL)
        return NULL;
    r->kind = kind;
    r->command = command;
    r->call = call;
    if ((group != NULL && (r->group = strdup(group)) == NULL) || (r->cmd = strdup(cmd)) == NULL) {
        req_free(r);
        return NULL;
    }
    if (c->req_tail != NULL)
        c->req_tail->next = r;
    else
        c->req_head = r;
    c->req_tail = r;
    req_send(c, r);
    return r;
}

/* A request whose answer alone matters (a flush's barrier, the probe after
 * a refused SUBACK): the plugin answers commands in the order they came,
 * after the error entries of what came before them. It is a `sync` that
 * lists nothing: no group name sorts after the longest name made of the
 * largest code point (docs/protocol.md, sync's "after"). */
static struct request *req_ping(chat_client *c, enum req_kind kind, const char *group,
                                struct call *call)
{
    char after[CHAT_GROUP_MAX + 1];
    chat_obj o = {0};
    struct request *r = NULL;
    char *cmd;

    for (size_t i = 0; i + 4 <= CHAT_GROUP_MAX; i += 4)
        memcpy(after + i, "\xF4\x8F\xBF\xBF", 4); /* U+10FFFF */
    after[CHAT_GROUP_MAX] = '\0';
    chat_obj_str(&o, "command", "sync");
    chat_obj_bool(&o, "replay", false);
    chat_obj_str(&o, "after", after);
    if ((cmd = chat_obj_end(&o)) != NULL)
        r = req_new(c, kind, "sync", group, cmd, call);
    free(cmd);
    return r;
}

/* Records what each listened group had shown when r was sent: the heads in
 * r's answer are no older than that, though live messages (another QoS) may
 * overtake the answer itself. */
static void snapshot(chat_client *c, struct request *r)
{
    size_t n = 0;

    for (struct group *g = c->groups; g != NULL; g = g->next)
        n++;
    free(r->snap_group);
    free(r->snap_shown);
    r->nsnap = 0;
    r->snap_group = calloc(n ? n : 1, sizeof *r->snap_group);
    r->snap_shown = calloc(n ? n : 1, sizeof *r->snap_shown);
    if (r->snap_group == NULL || r->snap_shown == NULL)
        return; /* no snapshot: no reset is ever concluded from r */
    for (struct group *g = c->groups; g != NULL; g = g->next) {
        if (!g->seq.known)
            continue;
        r->snap_group[r->nsnap] = g;
        r->snap_shown[r->nsnap++] = g->seq.shown;
    }
}

static void send_sync(chat_client *c)
{
    struct request *r;
    chat_obj o = {0};
    char *cmd;

    if (c->cs != CS_UP)
        return;
    chat_obj_str(&o, "command", "sync");
    chat_obj_bool(&o, "replay", false);
    cmd = chat_obj_end(&o);
    r = cmd != NULL ? req_new(c, REQ_SYNC, "sync", NULL, cmd, NULL) : NULL;
    free(cmd);
    if (r == NULL)
        emit_error(c, NULL, "out of memory sending sync");
    else
        snapshot(c, r);
}

/* What g had shown when r was sent (0 if unknown then). */
static uint64_t shown_when_sent(const struct request *r, const struct group *g)
{
    for (size_t i = 0; i < r->nsnap; i++)
        if (r->snap_group[i] == g)
            return r->snap_shown[i];
    return 0;
}

/* Asks for the messages after shown of g: the replay did not bring them in
 * time (or there is none, with plugin_opt_replay false). */
static void send_gap_fetch(chat_client *c, struct group *g)
{
    struct request *r = NULL;
    chat_obj o = {0};
    char *cmd;

    chat_obj_str(&o, "command", "fetch");
    chat_obj_str(&o, "group", g->name);
    chat_obj_u64(&o, "after", g->seq.shown);
    if ((cmd = chat_obj_end(&o)) == NULL ||
        (r = req_new(c, REQ_GAP, "fetch", g->name, cmd, NULL)) == NULL)
        emit_error(c, g->name, "out of memory sending a fetch");
    else if (!r->sent)
        req_drop(c, r); /* not connected: the timer tries again */
    else
        g->fetching = true;
    free(cmd);
}

/* ===========================================================================
 * Delivery
 * ========================================================================= */

/* Records id as shown for g in the state file (errors reported, throttled). */
static void record_shown(chat_client *c, struct group *g, uint64_t id)
{
    char why[REASON_MAX];
    int64_t now;

    if (c->state == NULL ||
        chat_state_set(c->state, g->name, id, why, sizeof why) == CHAT_CLIENT_OK)
        return;
    now = chat_now_ms();
    if (c->last_state_error_ms == 0 || now - c->last_state_error_ms >= STATE_ERROR_EVERY_MS) {
        c->last_state_error_ms = now;
        emit_error(c, g->name, "state file: %s", why);
    }
}

/* Hands every message of g that is due to the application, in order. */
static void deliver_ready(chat_client *c, struct group *g)
{
    uint64_t id;
    cJSON *item;

    while (!c->halted && (item = chat_seq_pop(&g->seq, &id)) != NULL) {
        char *json = cJSON_PrintUnformatted(item);
        chat_client_message m;
        bool taken = true;

        if (json == NULL || !chat_envelope_view(item, json, &m)) {
            /* Checked on arrival; only memory can fail here. */
            emit_error(c, g->name, "out of memory showing message %" PRIu64, id);
            taken = false;
        } else if (c->on_message != NULL) {
            taken = c->on_message(c->arg, &m);
        }
        cJSON_free(json);
        if (!taken) {
            c->halted = true; /* for good: see chat_client_message_fn */
            chat_seq_unpop(&g->seq, id, item);
            return;
        }
        cJSON_Delete(item);
        record_shown(c, g, id);
        g->progress_ms = chat_now_ms();
        if (g->catching_up)
            g->cu_msgs++;
        if (++g->unacked >= c->ack_every)
            send_ack(c, g);
        else if (g->ack_due == 0)
            g->ack_due = g->progress_ms + c->ack_interval_ms;
    }
}

/* Offers one envelope of g (item, taken) to g's sequencer. */
static void offer(chat_client *c, struct group *g, cJSON *item)
{
    const cJSON *grp = cJSON_GetObjectItemCaseSensitive(item, "group");
    uint64_t id = 0;

    if (!chat_json_u64(cJSON_GetObjectItemCaseSensitive(item, "id"), 1, &id) ||
        !cJSON_IsString(grp) || strcmp(grp->valuestring, g->name) != 0) {
        char *text = cJSON_PrintUnformatted(item);
        emit_error(c, g->name, "ignored a message that is not an envelope of this group: %.200s",
                   text ? text : "?");
        cJSON_free(text);
        cJSON_Delete(item);
        return;
    }
    if (!behind(g))
        g->progress_ms = chat_now_ms(); /* a gap may open: its clock starts now */
    if (id > g->head)
        g->head = id;
    if (chat_seq_offer(&g->seq, id, item) == CHAT_SEQ_DROPPED)
        emit_error(c, g->name, "message %" PRIu64 " dropped for now: %zu held ahead of a gap", id,
                   g->seq.n);
}

static void emit_catchup(chat_client *c, struct group *g)
{
    chat_client_event ev;

    if (!g->catching_up || !g->seq.known)
        return;
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_CATCHUP;
    ev.group = g->name;
    ev.id = g->seq.shown;
    ev.head = g->head > g->seq.shown ? g->head : g->seq.shown;
    ev.pages = g->cu_pages;
    ev.messages = g->cu_msgs;
    if (g->seq.shown >= g->head)
        g->catching_up = false;
    emit(c, &ev);
}

/* Applies a replay page or a fetch answer (entry, whose messages are taken)
 * of g. Returns the entry's `more`. */
static bool apply_page(chat_client *c, struct group *g, cJSON *entry, bool replay)
{
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    const cJSON *truncated = cJSON_GetObjectItemCaseSensitive(entry, "truncated");
    const cJSON *more = cJSON_GetObjectItemCaseSensitive(entry, "more");
    uint64_t head = 0, first = 0;
    cJSON *item, *next;

    if (!cJSON_IsArray(msgs)) {
        emit_error(c, g->name, "ignored a page without messages");
        return false;
    }
    if (chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "head"), 0, &head))
        raise_head(g, head);
    (void)chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "first"), 1, &first);
    if (!g->catching_up) {
        g->catching_up = true;
        g->cu_pages = 0;
        g->cu_msgs = 0;
    }
    g->cu_pages++;
    if (!g->seq.known) {
        /* Invariant 5: a page's first - 1 was the cursor when it was cut. */
        if (replay && first > 0 && (g->min_first == 0 || first < g->min_first))
            g->min_first = first;
    } else if (cJSON_IsTrue(truncated) && first > g->seq.shown + 1) {
        chat_client_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CHAT_CLIENT_EV_TRUNCATED;
        ev.group = g->name;
        ev.id = first;
        chat_seq_skip_to(&g->seq, first - 1);
        record_shown(c, g, first - 1);
        emit(c, &ev);
    }
    for (item = msgs->child; item != NULL; item = next) {
        next = item->next;
        offer(c, g, cJSON_DetachItemViaPointer(msgs, item));
    }
    deliver_ready(c, g);
    /* The ack at the end of each page releases the plugin's window. */
    if (replay)
        send_ack(c, g);
    emit_catchup(c, g);
    return cJSON_IsTrue(more);
}

/* A live message on <prefix>/<group>. */
static void handle_live(chat_client *c, const char *name, const char *payload, size_t len)
{
    struct group *g = group_find(c, name);
    cJSON *env;

    if (g == NULL || !g->listening)
        return;
    env = cJSON_ParseWithLength(payload, len);
    if (!cJSON_IsObject(env)) {
        emit_error(c, name, "ignored a live message that is not a JSON object: %.200s", payload);
        cJSON_Delete(env);
        return;
    }
    offer(c, g, env);
    deliver_ready(c, g);
}

/* ===========================================================================
 * Responses
 * ========================================================================= */

/* The internal sync's answer (to r): baselines, resets, lost acks, stale
 * state. */
static void apply_sync(chat_client *c, const struct request *r, const cJSON *entry)
{
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(entry, "groups");
    const cJSON *inc = cJSON_GetObjectItemCaseSensitive(entry, "incarnation");
    const cJSON *e;
    bool renewed = false;

    if (!cJSON_IsArray(groups)) {
        emit_error(c, NULL, "sync answer without groups");
        return;
    }
    if (cJSON_IsString(inc) && strlen(inc->valuestring) < sizeof c->incarnation) {
        /* The server's store lost its last writes (a crash across a reboot)
         * or was replaced: the ids we hold may now name other messages. */
        renewed = c->incarnation[0] && strcmp(c->incarnation, inc->valuestring) != 0;
        snprintf(c->incarnation, sizeof c->incarnation, "%s", inc->valuestring);
        if (c->state != NULL) {
            char why[256];
            if (chat_state_set_incarnation(c->state, c->incarnation, why, sizeof why) !=
                CHAT_CLIENT_OK)
                emit_error(c, NULL, "%s", why);
        }
    }
    cJSON_ArrayForEach(e, groups)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "group");
        uint64_t head = 0, acked = 0;
        struct group *g;

        if (!cJSON_IsString(name) || (g = group_find(c, name->valuestring)) == NULL ||
            !g->listening)
            continue;
        if (!chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "head"), 0, &head) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "acked"), 0, &acked)) {
            emit_error(c, g->name, "sync entry without head or acked");
            continue;
        }
        if (!g->seq.known) {
            uint64_t base = acked;
            if (g->min_first > 0 && g->min_first - 1 < base)
                base = g->min_first - 1;
            chat_seq_set_base(&g->seq, base);
            g->progress_ms = chat_now_ms();
            raise_head(g, head);
            deliver_ready(c, g);
            if (g->min_first > 0)
                send_ack(c, g); /* held replay pages wait for it */
        } else if (renewed || head < shown_when_sent(r, g)) {
            /* Ids it had stored are gone: its store was replaced. */
            if (renewed)
                emit_error(c, g->name,
                           "the server's store started a new incarnation (it lost its last "
                           "writes or was replaced); following it from its cursor %" PRIu64,
                           acked);
            else
                emit_error(c, g->name,
                           "the server's head %" PRIu64 " is below the last id shown %" PRIu64
                           ": its history was replaced; following it from its cursor %" PRIu64,
                           head, shown_when_sent(r, g), acked);
            chat_seq_clear(&g->seq);
            chat_seq_init(&g->seq, c->max_held, free_json);
            chat_seq_set_base(&g->seq, acked);
            record_shown(c, g, acked);
            g->head = head;
        } else if (acked < g->seq.shown) {
            send_ack(c, g); /* an ack was lost with the connection */
        } else if (acked > g->seq.shown && !g->fetching) {
            /* The cursor passed what was shown (invariant 2): no replay
             * will come for those ids, so fetch them now. */
            raise_head(g, head);
            send_gap_fetch(c, g);
        }
        raise_head(g, head);
        deliver_ready(c, g);
        emit_catchup(c, g);
    }
}

/* Error entries that answer no request (no correlationData): refused
 * publishes, subscribes and acks, replay errors, and requests the plugin
 * refused whole (too many requests). */
static void handle_unsolicited(chat_client *c, const char *command, const cJSON *entry)
{
    const cJSON *grp = cJSON_GetObjectItemCaseSensitive(entry, "group");
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(entry, "cid");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(entry, "error");
    const char *group = cJSON_IsString(grp) ? grp->valuestring : NULL;
    const char *reason = cJSON_IsString(err) ? err->valuestring : "refused";
    chat_client_event ev;

    memset(&ev, 0, sizeof ev);
    ev.group = group;
    ev.reason = reason;
    if (strcmp(command, "publish") == 0) {
        ev.type = CHAT_CLIENT_EV_SEND_REFUSED;
        ev.cid = cJSON_IsString(cid) ? cid->valuestring : NULL;
        /* MQTT 5 counted it at its PUBACK already. */
        if (c->mqtt_version < 5)
            c->refused_count++;
        emit(c, &ev);
    } else if (strcmp(command, "subscribe") == 0) {
        /* Reported when the probe after the refused SUBACK is answered. */
        struct group *g = group ? group_find(c, group) : NULL;
        if (g != NULL) {
            free(g->refusal);
            g->refusal = strdup(reason);
        } else {
            emit_error(c, group, "subscription refused: %s", reason);
        }
    } else {
        emit_error(c, group, "%s refused: %s", command, reason);
    }
}

/* Reports the refusal of g's subscription, with the plugin's reason if it
 * came (the probe's answer follows it). */
static void report_listen_refused(chat_client *c, const char *group)
{
    struct group *g = group != NULL ? group_find(c, group) : NULL;
    chat_client_event ev;

    if (g == NULL)
        return;
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_LISTEN_REFUSED;
    ev.group = g->name;
    ev.reason = g->refusal ? g->refusal : "the broker refused the subscription";
    emit(c, &ev);
    free(g->refusal);
    g->refusal = NULL;
}

/* Finishes request r with entry, its answer (whose messages may be taken). */
static void complete_request(chat_client *c, struct request *r, cJSON *entry)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(entry, "error");
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
    const char *why = cJSON_IsString(err) ? err->valuestring : NULL;
    struct group *g = r->group ? group_find(c, r->group) : NULL;

    req_unlink(c, r);
    if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, r->command) != 0) {
        /* The plugin says back what it was sent: this is not our answer. */
        if (r->call != NULL)
            chat_call_finish(c, r->call, CHAT_CLIENT_ERR_PROTOCOL,
                             "the answer to a command names another command");
        else
            emit_error(c, r->group, "ignored an answer to %s that names another command",
                       r->command);
        if (r->kind == REQ_GAP && g != NULL)
            g->fetching = false;
        req_free(r);
        return;
    }
    switch (r->kind) {
    case REQ_SYNC:
        if (why != NULL)
            emit_error(c, NULL, "sync refused: %s", why);
        else
            apply_sync(c, r, entry);
        break;
    case REQ_GAP:
        if (g == NULL)
            break;
        g->fetching = false;
        g->progress_ms = chat_now_ms();
        if (why != NULL) {
            emit_error(c, g->name, "fetch refused: %s", why);
        } else if (g->listening && g->seq.known) {
            uint64_t before = g->seq.shown;
            bool more = apply_page(c, g, entry, false);
            /* No replay brings these: keep pulling while it helps. */
            if (behind(g) && (more || g->seq.shown > before) && !g->fetching)
                send_gap_fetch(c, g);
        }
        break;
    case REQ_PROBE:
        report_listen_refused(c, r->group);
        break;
    case REQ_BARRIER:
        /* Any answer will do, an error too: it came after the error entries
         * of every message sent before it. */
        if (r->call != NULL) {
            r->call->refused = c->refused_count;
            c->refused_count = 0;
            chat_call_finish(c, r->call, CHAT_CLIENT_OK, NULL);
        }
        break;
    case REQ_USER:
        if (r->call == NULL)
            break; /* its caller gave up */
        if (why != NULL) {
            chat_call_finish(c, r->call, CHAT_CLIENT_ERR_REFUSED, why);
            break;
        }
        if ((r->call->entry = cJSON_Duplicate(entry, 1)) == NULL) {
            chat_call_finish(c, r->call, CHAT_CLIENT_ERR_NOMEM, NULL);
            break;
        }
        /* Fetched messages of a listened group also go the usual way. */
        if (strcmp(r->command, "fetch") == 0 && g != NULL && g->listening && g->seq.known) {
            cJSON *copy = cJSON_Duplicate(entry, 1);
            if (copy != NULL) {
                (void)apply_page(c, g, copy, false);
                cJSON_Delete(copy);
            }
        }
        chat_call_finish(c, r->call, CHAT_CLIENT_OK, NULL);
        break;
    }
    req_free(r);
}

/* One entry of a response: an answer (by its correlationData), a replay
 * page, or an error about something else. */
static void handle_entry(chat_client *c, const struct event *ev, cJSON *entry)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
    const cJSON *corr = cJSON_GetObjectItemCaseSensitive(entry, "correlationData");
    const char *command = cJSON_IsString(cmd) ? cmd->valuestring : "request";
    struct request *r;

    if (cJSON_IsString(corr)) {
        /* An answer from a connection that ended answers nothing any more;
         * nor one whose request is gone (its caller gave up, it expired). */
        if (ev->epoch == c->epoch && c->cs == CS_UP && (r = req_find(c, corr->valuestring)) != NULL)
            complete_request(c, r, entry);
        return;
    }
    if (cJSON_GetObjectItemCaseSensitive(entry, "error") != NULL) {
        handle_unsolicited(c, command, entry);
    } else if (strcmp(command, "replay") == 0) {
        const cJSON *grp = cJSON_GetObjectItemCaseSensitive(entry, "group");
        struct group *g = cJSON_IsString(grp) ? group_find(c, grp->valuestring) : NULL;
        if (g != NULL && g->listening)
            (void)apply_page(c, g, entry, true);
    }
    /* Anything else answers nothing we asked. */
}

/* A message on the response topic. */
static void handle_response(chat_client *c, const struct event *ev)
{
    cJSON *root = cJSON_ParseWithLength(ev->payload, ev->len);
    cJSON *responses = cJSON_GetObjectItemCaseSensitive(root, "responses");
    cJSON *entry;

    if (!cJSON_IsArray(responses))
        emit_error(c, NULL, "ignored a response that is not {\"responses\":[...]}: %.200s",
                   ev->payload);
    else
        cJSON_ArrayForEach(entry, responses) handle_entry(c, ev, entry);
    cJSON_Delete(root);
}

static void handle_message(chat_client *c, const struct event *ev)
{
    size_t plen = strlen(c->prefix);
    const char *name;

    if (strcmp(ev->topic, CHAT_RESPONSE_TOPIC) == 0) {
        handle_response(c, ev);
        return;
    }
    if (strncmp(ev->topic, c->prefix, plen) != 0 || ev->topic[plen] != '/')
        return;
    name = ev->topic + plen + 1;
    if (strchr(name, '/') == NULL)
        handle_live(c, name, ev->payload, ev->len);
}

/* ===========================================================================
 * Connection
 * ========================================================================= */

static void finish_calls(chat_client *c, enum call_op op, chat_client_err err, const char *why)
{
    struct call **pp = &c->calls;

    while (*pp != NULL) {
        struct call *call = *pp;
        if (call->op != op) {
            pp = &call->next;
            continue;
        }
        *pp = call->next;
        chat_call_finish(c, call, err, why);
    }
}

/* Destroys the handle; its late news carries an epoch no longer current. */
static void close_handle(chat_client *c)
{
    chat_paho_close(c);
    c->epoch++;
}

/* Forgets what belonged to the connection that ended (invariants 3, 6). */
static void connection_ended(chat_client *c)
{
    struct request *r, *next;

    c->cs = CS_IDLE;
    c->npend = 0;
    c->inflight = 0;
    c->acks_inflight = 0;
    for (struct outmsg *m = c->out_head; m != NULL; m = m->next)
        m->pending = false;
    for (struct group *g = c->groups; g != NULL; g = g->next) {
        g->subscribed = false;
        g->fetching = false;
    }
    for (r = c->req_head; r != NULL; r = next) {
        next = r->next;
        if (r->kind == REQ_USER && r->call != NULL) {
            r->sent = false; /* sent again after the connect */
        } else if (r->kind == REQ_BARRIER && r->call != NULL) {
            /* Sent again once the outbox, resent first, drains. */
            r->call->barrier_sent = false;
            r->call->next = c->calls;
            c->calls = r->call;
            req_drop(c, r);
        } else {
            req_drop(c, r);
        }
    }
}

/* When to try again after a failed or lost connection: doubling pauses with
 * some jitter, so that a restarted broker is not hit by every client at once. */
static void schedule_reconnect(chat_client *c)
{
    int64_t pause = c->backoff_ms;

    pause += (int64_t)(rand_r(&c->rng) % (unsigned)(c->backoff_ms / 4 + 1)) - c->backoff_ms / 8;
    c->reconnect_at = chat_now_ms() + pause;
    if (c->backoff_ms < c->reconnect_max_s * 1000)
        c->backoff_ms = c->backoff_ms * 2 < c->reconnect_max_s * 1000 ? c->backoff_ms * 2
                                                                      : c->reconnect_max_s * 1000;
}

static void attempt_failed(chat_client *c, int code, const char *text)
{
    char why[REASON_MAX];
    bool waited = false;

    if (code > 0 && c->mqtt_version >= 5)
        snprintf(why, sizeof why, "the broker refused the connection: %s",
                 MQTTReasonCode_toString((enum MQTTReasonCodes)code));
    else if (code > 0)
        snprintf(why, sizeof why, "the broker refused the connection (CONNACK code %d)", code);
    else
        snprintf(why, sizeof why, "cannot connect to %s: %s", c->uri,
                 text != NULL ? text : MQTTAsync_strerror(code));
    close_handle(c);
    c->cs = CS_IDLE;
    /* A refusal (bad credentials, not authorised) is the broker's answer,
     * not a network failure: callers may stop rather than wait. Nobody waits
     * on a retry in the background: the application hears of a refusal
     * there by an event, or it would retry unnoticed for ever. */
    for (struct call *call = c->calls; code > 0 && call != NULL; call = call->next)
        if (call->op == CALL_CONNECT)
            waited = true;
    if (code > 0 && !waited)
        emit_error(c, NULL, "%s", why);
    finish_calls(c, CALL_CONNECT, code > 0 ? CHAT_CLIENT_ERR_REFUSED : CHAT_CLIENT_ERR_CONNECT,
                 why);
    if (c->want)
        schedule_reconnect(c);
}

static void start_attempt(chat_client *c)
{
    int rc;

    c->epoch++;
    c->cs = CS_CONNECTING;
    c->server_reason = 0;
    c->server_reason_text[0] = '\0';
    rc = chat_paho_open(c, c->epoch, c->connect_timeout_ms);
    if (rc != MQTTASYNC_SUCCESS)
        attempt_failed(c, rc, NULL);
}

static void on_connected(chat_client *c)
{
    chat_client_event ev;

    c->cs = CS_UP;
    c->ever_up = true;
    c->backoff_ms = BACKOFF_FIRST_MS;
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_CONNECTED;
    emit(c, &ev);
    if (c->cs != CS_UP)
        return;
    /* Subscribing starts each group's catch-up; the sync after it reports
     * cursors and heads (invariant 5). */
    for (struct group *g = c->groups; g != NULL; g = g->next) {
        g->acked = 0;
        g->progress_ms = chat_now_ms();
        if (g->listening)
            subscribe_group(c, g);
    }
    send_sync(c);
    for (struct request *r = c->req_head; r != NULL; r = r->next)
        if (!r->sent)
            req_send(c, r);
    pump_outbox(c);
    finish_calls(c, CALL_CONNECT, CHAT_CLIENT_OK, NULL);
}

static void on_connection_lost(chat_client *c, const char *why)
{
    chat_client_event ev;
    char text[REASON_MAX];
    int code = c->server_reason;

    close_handle(c);
    connection_ended(c);
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_DISCONNECTED;
    ev.reason = why;
    if (code > 0) {
        /* MQTT 5: the broker said why in its DISCONNECT. */
        snprintf(text, sizeof text, "the broker disconnected this client: %s (0x%02X)%s%s%s",
                 MQTTReasonCode_toString((enum MQTTReasonCodes)code), (unsigned)code,
                 code == MQTTREASONCODE_SESSION_TAKEN_OVER
                     ? ", another client connected with the same client id"
                     : "",
                 c->server_reason_text[0] != '\0' ? ": " : "", c->server_reason_text);
        ev.reason = text;
        ev.code = code;
    }
    emit(c, &ev);
    if (c->want) {
        c->backoff_ms = BACKOFF_FIRST_MS;
        schedule_reconnect(c);
    }
}

/* Our DISCONNECT went out (or the wait for it ended). */
static void closed(chat_client *c)
{
    close_handle(c);
    connection_ended(c);
    finish_calls(c, CALL_DISCONNECT, CHAT_CLIENT_OK, NULL);
}

/* A tracked publish or subscribe finished. */
static void on_done(chat_client *c, int token, bool ok, int code)
{
    struct pend p;
    struct outmsg *m;

    if (!pend_take(c, token, PEND_MESSAGE, 0, &p))
        return;
    switch (p.kind) {
    case PEND_MESSAGE:
        for (m = c->out_head; m != NULL && m->seq != p.ref; m = m->next)
            ;
        if (m == NULL)
            break;
        m->pending = false;
        c->inflight--;
        if (ok) {
            outbox_remove(c, m);
        } else if (code >= 0x80) {
            /* MQTT 5: refused (0x87 from the plugin); the error entry with
             * the reason follows on the response topic. */
            c->refused_count++;
            outbox_remove(c, m);
        }
        /* Otherwise the connection broke: sent again after the connect. */
        pump_outbox(c);
        break;
    case PEND_ACK:
        if (c->acks_inflight > 0)
            c->acks_inflight--;
        break;
    case PEND_SUBSCRIBE:
        if (ok) {
            p.g->subscribed = true;
        } else if (code >= 0x80) {
            /* The plugin's reason, if any, arrives before the answer to
             * a request sent now (one connection, in order). */
            if (req_ping(c, REQ_PROBE, p.g->name, NULL) == NULL)
                emit_error(c, p.g->name, "subscription refused");
        }
        break;
    }
}

/* ===========================================================================
 * Calls from the API
 * ========================================================================= */

static void on_call(chat_client *c, struct call *call)
{
    struct group *g;
    struct outmsg *m;

    switch (call->op) {
    case CALL_CONNECT:
        if (c->cs == CS_UP) {
            chat_call_finish(c, call, CHAT_CLIENT_OK, NULL);
            return;
        }
        call->next = c->calls;
        c->calls = call;
        c->want = true;
        c->connect_timeout_ms = call->timeout_ms;
        if (c->cs == CS_IDLE) {
            c->backoff_ms = BACKOFF_FIRST_MS;
            start_attempt(c);
        }
        return;
    case CALL_DISCONNECT:
        c->want = false;
        if (c->cs == CS_CONNECTING) {
            close_handle(c);
            connection_ended(c);
        }
        if (c->cs == CS_IDLE) {
            chat_call_finish(c, call, CHAT_CLIENT_OK, NULL);
            return;
        }
        if (c->cs == CS_UP)
            for (g = c->groups; g != NULL; g = g->next)
                if (g->seq.known && g->seq.shown > g->acked)
                    send_ack(c, g);
        call->next = c->calls;
        c->calls = call;
        return;
    case CALL_LISTEN:
        if ((g = group_get(c, call->group)) == NULL) {
            emit_error(c, call->group, "out of memory listening");
        } else if (!g->listening) {
            g->listening = true;
            g->progress_ms = chat_now_ms();
            if (c->cs == CS_UP) {
                subscribe_group(c, g);
                send_sync(c);
            }
        }
        chat_call_finish(c, call, CHAT_CLIENT_OK, NULL);
        return;
    case CALL_SEND:
        if ((m = calloc(1, sizeof *m)) == NULL ||
            (m->topic = malloc(strlen(c->prefix) + strlen(call->group) + 2)) == NULL) {
            free(m);
            pthread_mutex_lock(&c->mu);
            c->outbox_len--;
            pthread_mutex_unlock(&c->mu);
            emit_error(c, call->group, "out of memory: message %s not sent", call->cid);
            chat_call_finish(c, call, CHAT_CLIENT_ERR_NOMEM, NULL);
            return;
        }
        sprintf(m->topic, "%s/%s", c->prefix, call->group);
        m->seq = ++c->out_seq;
        m->group = call->group;
        m->payload = call->payload;
        call->group = NULL;
        call->payload = NULL;
        memcpy(m->cid, call->cid, sizeof m->cid);
        if (c->out_tail != NULL)
            c->out_tail->next = m;
        else
            c->out_head = m;
        c->out_tail = m;
        chat_call_finish(c, call, CHAT_CLIENT_OK, NULL);
        pump_outbox(c);
        return;
    case CALL_FLUSH:
        call->next = c->calls;
        c->calls = call;
        return;
    case CALL_REQUEST:
        if (req_new(c, REQ_USER, call->command, call->group, call->payload, call) == NULL)
            chat_call_finish(c, call, CHAT_CLIENT_ERR_NOMEM, NULL);
        return;
    }
}

/* Moves flush and disconnect calls on, and expires every call's deadline. */
static void progress_calls(chat_client *c, int64_t now)
{
    struct call **pp = &c->calls;
    bool close_now = false;

    while (*pp != NULL) {
        struct call *call = *pp;
        bool expired = now >= call->deadline;
        if (call->op == CALL_FLUSH && !expired && c->cs == CS_UP && c->out_head == NULL) {
            *pp = call->next;
            call->barrier_sent = true;
            if (req_ping(c, REQ_BARRIER, NULL, call) == NULL)
                chat_call_finish(c, call, CHAT_CLIENT_ERR_NOMEM, NULL);
            continue;
        }
        if (call->op == CALL_DISCONNECT) {
            /* Once the final acks are taken: DISCONNECT, then closed(). */
            if (c->cs == CS_UP && (expired || c->acks_inflight == 0)) {
                if (chat_paho_disconnect(c, 1000) == MQTTASYNC_SUCCESS)
                    c->cs = CS_CLOSING;
                else
                    close_now = true;
            } else if (c->cs == CS_CLOSING && expired) {
                close_now = true;
            } else if (c->cs == CS_IDLE || c->cs == CS_CONNECTING) {
                close_now = true;
            }
            pp = &call->next;
            continue;
        }
        if (expired) {
            *pp = call->next;
            chat_call_finish(c, call, CHAT_CLIENT_ERR_TIMEOUT, NULL);
            continue;
        }
        pp = &call->next;
    }
    if (close_now)
        closed(c);
    /* Requests whose caller's deadline passed: answered with a timeout; a
     * late answer then matches nothing. */
    for (struct request *r = c->req_head, *next; r != NULL; r = next) {
        next = r->next;
        if (r->call == NULL || now < r->call->deadline)
            continue;
        chat_call_finish(c, r->call, CHAT_CLIENT_ERR_TIMEOUT, NULL);
        r->call = NULL;
        req_drop(c, r);
    }
}

/* ===========================================================================
 * Timers and the loop
 * ========================================================================= */

static void run_timers(chat_client *c, int64_t now)
{
    if (c->cs == CS_IDLE && c->want && now >= c->reconnect_at)
        start_attempt(c);
    for (struct group *g = c->groups; g != NULL; g = g->next) {
        if (g->ack_due != 0 && now >= g->ack_due)
            send_ack(c, g);
        if (c->cs != CS_UP || c->halted || !g->listening || g->fetching ||
            now < g->progress_ms + c->gap_timeout_ms)
            continue;
        if (behind(g)) {
            send_gap_fetch(c, g);
        } else if (!g->seq.known && g->seq.n > 0) {
            /* Messages wait for a baseline the sync did not give. */
            g->progress_ms = now;
            send_sync(c);
        }
    }
    /* An internal request unanswered this long (its answer was lost) is
     * given up: a sync goes again, a gap's timer fetches again, a refused
     * subscription is reported without the plugin's reason. */
    for (struct request *r = c->req_head, *next; r != NULL; r = next) {
        struct group *g;
        next = r->next;
        if (!r->sent || r->call != NULL || now < r->sent_ms + c->request_timeout_ms)
            continue;
        req_unlink(c, r);
        if (r->kind == REQ_SYNC) {
            send_sync(c);
        } else if (r->kind == REQ_GAP && (g = group_find(c, r->group)) != NULL) {
            g->fetching = false;
        } else if (r->kind == REQ_PROBE) {
            report_listen_refused(c, r->group);
        }
        req_free(r);
    }
    progress_calls(c, now);
}

/* When the loop must wake next. */
static int64_t next_wake(const chat_client *c, int64_t now)
{
    int64_t t = now + TICK_MS;

    if (c->cs == CS_IDLE && c->want && c->reconnect_at < t)
        t = c->reconnect_at;
    for (const struct group *g = c->groups; g != NULL; g = g->next) {
        if (g->ack_due != 0 && g->ack_due < t)
            t = g->ack_due;
        if (c->cs == CS_UP && g->listening && !g->fetching &&
            (behind(g) || (!g->seq.known && g->seq.n > 0)) &&
            g->progress_ms + c->gap_timeout_ms < t)
            t = g->progress_ms + c->gap_timeout_ms;
    }
    for (const struct call *call = c->calls; call != NULL; call = call->next)
        if (call->deadline < t)
            t = call->deadline;
    return t < now ? now : t;
}

static void handle_event(chat_client *c, struct event *ev)
{
    bool current = ev->epoch == c->epoch;

    switch (ev->kind) {
    case EV_CALL:
        on_call(c, ev->call);
        break;
    case EV_MESSAGE:
        handle_message(c, ev);
        break;
    case EV_CONNECTED:
        if (current && c->cs == CS_CONNECTING)
            on_connected(c);
        break;
    case EV_CONNECT_FAILED:
        if (current && c->cs == CS_CONNECTING)
            attempt_failed(c, ev->code, ev->text);
        break;
    case EV_SERVER_DISCONNECT:
        /* Paho 1.3.12 reports a broker's DISCONNECT only here: it calls no
         * connection_lost after it, so this is the end of the connection. */
        if (current && c->cs == CS_UP) {
            c->server_reason = ev->code;
            snprintf(c->server_reason_text, sizeof c->server_reason_text, "%s",
                     ev->text != NULL ? ev->text : "");
            on_connection_lost(c, NULL);
        }
        break;
    case EV_CONN_LOST:
        if (current && c->cs == CS_UP)
            on_connection_lost(c, ev->text);
        else if (current && c->cs == CS_CLOSING)
            closed(c);
        break;
    case EV_DISCONNECTED:
        if (current && c->cs == CS_CLOSING)
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

    pthread_mutex_lock(&c->mu);
    for (;;) {
        struct event *ev;
        bool lost_news;
        int64_t now = chat_now_ms();
        int64_t wake = next_wake(c, now);

        while (c->ev_head == NULL && !c->stopping && now < wake) {
            struct timespec ts;
            ts.tv_sec = (time_t)(wake / 1000);
            ts.tv_nsec = (long)(wake % 1000) * 1000000L;
            pthread_cond_timedwait(&c->wake, &c->mu, &ts);
            now = chat_now_ms();
        }
        if (c->stopping)
            break;
        ev = c->ev_head;
        if (ev != NULL) {
            c->ev_head = ev->next;
            if (c->ev_head == NULL)
                c->ev_tail = NULL;
        }
        lost_news = c->lost_news;
        c->lost_news = false;
        pthread_mutex_unlock(&c->mu);

        if (lost_news) {
            /* Perhaps the news that the connection changed: ask Paho. */
            emit_error(c, NULL, "out of memory: news from Paho was lost");
            if (c->cs == CS_UP && !MQTTAsync_isConnected(c->mqtt))
                on_connection_lost(c, "lost (noticed late)");
            else if (c->cs == CS_CONNECTING && MQTTAsync_isConnected(c->mqtt))
                on_connected(c);
        }
        if (ev != NULL) {
            handle_event(c, ev);
            chat_event_free(ev);
        }
        run_timers(c, chat_now_ms());
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void chat_dispatch_free(chat_client *c)
{
    chat_paho_close(c);
    while (c->groups != NULL) {
        struct group *g = c->groups;
        c->groups = g->next;
        chat_seq_clear(&g->seq);
        free(g->refusal);
        free(g->name);
        free(g);
    }
    while (c->out_head != NULL) {
        struct outmsg *m = c->out_head;
        c->out_head = m->next;
        free(m->group);
        free(m->topic);
        free(m->payload);
        free(m);
    }
    c->out_tail = NULL;
    while (c->req_head != NULL) {
        struct request *r = c->req_head;
        c->req_head = r->next;
        if (r->call != NULL)
            chat_call_finish(c, r->call, CHAT_CLIENT_ERR_CLOSED, NULL);
        req_free(r);
    }
    c->req_tail = NULL;
    while (c->calls != NULL) {
        struct call *call = c->calls;
        c->calls = call->next;
        chat_call_finish(c, call, CHAT_CLIENT_ERR_CLOSED, NULL);
    }
    free(c->pend);
    c->pend = NULL;
}

chat_client_err chat_dispatch_load(chat_client *c)
{
    for (size_t i = 0; c->state != NULL && i < chat_state_count(c->state); i++) {
        uint64_t shown = 0;
        const char *name = chat_state_group(c->state, i, &shown);
        struct group *g = group_get(c, name);
        if (g == NULL)
            return CHAT_CLIENT_ERR_NOMEM;
        chat_seq_set_base(&g->seq, shown);
        g->head = shown;
    }
    return CHAT_CLIENT_OK;
}
