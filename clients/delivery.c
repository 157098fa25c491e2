/* delivery.c: messages to the application in order (see delivery.h). */
#include "delivery.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "proto.h"

#define STATE_ERROR_EVERY_MS 10000 /* at most one state file error event per period */
/* The state file is rewritten whole (write, rename): at most this often
 * between acks, which write it anyway (invariant state-before-ack). A kill -9 shows again
 * what was shown in the last STATE_FLUSH_MS. */
#define STATE_FLUSH_MS 200

void chat_delivery_init(chat_delivery *d, const struct chat_delivery_cfg *cfg)
{
    memset(d, 0, sizeof *d);
    d->cfg = *cfg;
    if (cfg->state != NULL)
        snprintf(d->incarnation, sizeof d->incarnation, "%s", chat_state_incarnation(cfg->state));
}

/* ===========================================================================
 * Subscriptions and acks
 * ========================================================================= */

void chat_delivery_subscribe(chat_delivery *d, struct chat_group *g)
{
    struct chat_op op = {.kind = CHAT_OP_SUBSCRIBE, .ptr = g};
    char topic[CHAT_PROTO_GROUP_MAX + 256];
    int rc;

    if (!chat_paho_up(d->cfg.paho))
        return; /* subscribed after the connect */
    snprintf(topic, sizeof topic, "%s/%s", d->cfg.prefix, g->name);
    rc = chat_paho_subscribe(d->cfg.paho, topic, d->cfg.listen_qos, &op);
    if (rc != MQTTASYNC_SUCCESS && rc != MQTTASYNC_DISCONNECTED)
        chat_notify_error(d->cfg.notify, g->name, "cannot subscribe to %s: %s", topic,
                          MQTTAsync_strerror(rc));
}

void chat_delivery_connected(chat_delivery *d)
{
    /* PROTOCOL.md v1.2: the reads and presence pushes go to a device that
     * subscribed to the response topic itself; first, so that the pushes
     * the group subscriptions start find it subscribed. Answers come
     * whatever the client subscribed to. */
    struct chat_op op = {.kind = CHAT_OP_SUBSCRIBE, .ptr = NULL};
    int rc = chat_paho_subscribe(d->cfg.paho, CHAT_PROTO_RESPONSE_TOPIC, 1, &op);
    if (rc != MQTTASYNC_SUCCESS && rc != MQTTASYNC_DISCONNECTED)
        chat_notify_error(d->cfg.notify, NULL, "cannot subscribe to %s: %s",
                          CHAT_PROTO_RESPONSE_TOPIC, MQTTAsync_strerror(rc));
    for (struct chat_group *g = d->cfg.groups->head; g != NULL; g = g->next) {
        g->acked = 0;
        g->progress_ms = chat_now_ms();
        if (g->listening)
            chat_delivery_subscribe(d, g);
    }
}

void chat_delivery_connection_ended(chat_delivery *d)
{
    d->acks_inflight = 0;
    for (struct chat_group *g = d->cfg.groups->head; g != NULL; g = g->next)
        g->fetching = false;
}

/* Reports a state file error, at most one event per period. */
static void state_error(chat_delivery *d, const char *group, const char *why)
{
    int64_t now = chat_now_ms();

    if (d->last_state_error_ms == 0 || now - d->last_state_error_ms >= STATE_ERROR_EVERY_MS) {
        d->last_state_error_ms = now;
        chat_notify_error(d->cfg.notify, group, "state file: %s", why);
    }
}

/* Writes the state file if it lags; false when that failed. */
static bool flush_state(chat_delivery *d)
{
    char why[CHAT_REASON_MAX];

    d->state_due = 0;
    if (d->cfg.state == NULL || !chat_state_dirty(d->cfg.state))
        return true;
    /* state-before-ack reaches into the application: what it buffered goes out
     * before the file says it was shown (mqchat listen's stdout). */
    if (d->cfg.on_commit != NULL && !d->cfg.on_commit(d->cfg.arg))
        snprintf(why, sizeof why, "the application could not commit what it was given");
    else if (chat_state_flush(d->cfg.state, why, sizeof why) == CHAT_CLIENT_OK) {
        /* The file now holds what each group showed (every id shown is
         * recorded before the next one, on this thread). */
        for (struct chat_group *g = d->cfg.groups->head; g != NULL; g = g->next)
            g->recorded = g->seq.shown;
        return true;
    }
    state_error(d, NULL, why);
    /* Try again soon; until a write succeeds no ack goes out. */
    d->state_due = chat_now_ms() + STATE_FLUSH_MS;
    return false;
}

void chat_delivery_flush(chat_delivery *d)
{
    (void)flush_state(d);
}

void chat_delivery_ack(chat_delivery *d, struct chat_group *g)
{
    struct chat_op op = {.kind = CHAT_OP_ACK, .ptr = g};
    char topic[CHAT_PROTO_GROUP_MAX + 256], payload[32];
    int rc;

    g->ack_due = 0;
    if (!chat_paho_up(d->cfg.paho) || !g->seq.known || g->seq.shown == 0 || d->closing)
        return; /* the sync after the next connect repairs the cursor */
    /* state-before-ack: the file holds what the ack says before the ack leaves;
     * an ack the file cannot back is not sent. */
    if (d->state_due != 0 && !flush_state(d)) {
        /* Retried with the file: a write that fails for a while (a full
         * disk, a commit hook) must not leave the cursor behind until the
         * next message or connect. */
        g->ack_due = d->state_due;
        return;
    }
    snprintf(topic, sizeof topic, "%s/%s" CHAT_PROTO_ACK_SUFFIX, d->cfg.prefix, g->name);
    snprintf(payload, sizeof payload, "%" PRIu64, g->seq.shown);
    rc = chat_paho_publish(d->cfg.paho, topic, payload, strlen(payload), 1, &op);
    if (rc != MQTTASYNC_SUCCESS) {
        if (rc != MQTTASYNC_DISCONNECTED) /* else the sync after the connect repairs it */
            chat_notify_error(d->cfg.notify, g->name, "cannot publish an ack: %s",
                              MQTTAsync_strerror(rc));
        return;
    }
    d->acks_inflight++;
    g->acked = g->seq.shown;
    g->unacked = 0;
}

void chat_delivery_ack_all(chat_delivery *d)
{
    for (struct chat_group *g = d->cfg.groups->head; g != NULL; g = g->next)
        if (g->seq.known && g->seq.shown > g->acked)
            chat_delivery_ack(d, g);
}

void chat_delivery_ack_done(chat_delivery *d)
{
    if (d->acks_inflight > 0)
        d->acks_inflight--;
}

void chat_delivery_tick(chat_delivery *d, int64_t now)
{
    for (struct chat_group *g = d->cfg.groups->head; g != NULL; g = g->next)
        if (g->ack_due != 0 && now >= g->ack_due)
            chat_delivery_ack(d, g);
    if (d->state_due != 0 && now >= d->state_due)
        chat_delivery_flush(d);
}

int64_t chat_delivery_next_wake(const chat_delivery *d, int64_t t)
{
    for (const struct chat_group *g = d->cfg.groups->head; g != NULL; g = g->next)
        if (g->ack_due != 0 && g->ack_due < t)
            t = g->ack_due;
    if (d->state_due != 0 && d->state_due < t)
        t = d->state_due;
    return t;
}

/* ===========================================================================
 * Delivery
 * ========================================================================= */

void chat_delivery_record(chat_delivery *d, struct chat_group *g, uint64_t id)
{
    char why[CHAT_REASON_MAX];

    if (d->cfg.state == NULL)
        return;
    if (chat_state_set(d->cfg.state, g->name, id, why, sizeof why) != CHAT_CLIENT_OK)
        state_error(d, g->name, why);
    else if (d->state_due == 0 && chat_state_dirty(d->cfg.state))
        d->state_due = chat_now_ms() + STATE_FLUSH_MS;
}

/* The change M (env) carries, to on_change (change-before-carrier). */
static void tell_change(chat_delivery *d, const struct chat_env *env)
{
    chat_client_change ch;

    if (d->cfg.on_change == NULL || (env->m.recall == 0 && env->m.edit == 0))
        return;
    memset(&ch, 0, sizeof ch);
    /* an edit a later recall took back (a catch-up brings it so) says that
     * N is recalled */
    bool recalled = env->m.recall != 0 || env->m.recalled;
    ch.type = recalled ? CHAT_CLIENT_RECALLED : CHAT_CLIENT_EDITED;
    ch.group = env->m.group;
    ch.id = env->m.recall != 0 ? env->m.recall : env->m.edit;
    ch.by = env->m.id;
    ch.member = env->m.from;
    ch.ts = env->m.ts;
    ch.body = recalled ? NULL : env->m.body;
    ch.json = env->m.json;
    d->cfg.on_change(d->cfg.arg, &ch);
}

void chat_delivery_ready(chat_delivery *d, struct chat_group *g)
{
    uint64_t id;
    struct chat_env *env;

    while (!d->halted && !d->closing && (env = chat_seq_pop(&g->seq, &id)) != NULL) {
        tell_change(d, env);
        bool taken = d->cfg.on_message == NULL || d->cfg.on_message(d->cfg.arg, &env->m);

        if (!taken) {
            d->halted = true; /* for good: see chat_client_message_fn */
            chat_seq_unpop(&g->seq, id, env);
            return;
        }
        free(env);
        chat_delivery_record(d, g, id);
        g->progress_ms = chat_now_ms();
        if (g->catching_up)
            g->cu_msgs++;
        if (++g->unacked >= d->cfg.ack_every)
            chat_delivery_ack(d, g);
        else if (g->ack_due == 0)
            g->ack_due = g->progress_ms + d->cfg.ack_interval_ms;
    }
}

/* When env carries a change (v1.2) of a message g still holds (not shown
 * yet: behind a gap), that message becomes its new version now, so that
 * on_message never shows what the change replaced (change-before-carrier).
 * A change that does not apply, or memory that runs out, leaves it: the
 * change still reaches on_change when its turn comes. */
static void apply_to_held(struct chat_group *g, const struct chat_env *env)
{
    uint64_t n = env->m.recall != 0 ? env->m.recall : env->m.edit;
    struct chat_env *held, *nv;

    if (n == 0 || n >= env->m.id || (held = chat_seq_held(&g->seq, n)) == NULL)
        return;
    if (chat_env_apply(held, env, &nv) == CHAT_ENV_OK)
        chat_seq_replace(&g->seq, n, nv);
}

/* Offers one envelope of g (env, taken) to g's sequencer. */
static void offer(chat_delivery *d, struct chat_group *g, struct chat_env *env)
{
    uint64_t id = env->m.id;

    if (strcmp(env->m.group, g->name) != 0) {
        chat_notify_error(d->cfg.notify, g->name,
                          "ignored a message that is not an envelope of this group: %.200s",
                          env->m.json);
        free(env);
        return;
    }
    if (!chat_group_behind(g))
        g->progress_ms = chat_now_ms(); /* a gap may open: its clock starts now */
    if (id > g->head)
        g->head = id;
    apply_to_held(g, env);
    if (chat_seq_offer(&g->seq, id, env) == CHAT_SEQ_DROPPED)
        chat_notify_error(d->cfg.notify, g->name,
                          "message %" PRIu64 " dropped for now: %zu held ahead of a gap", id,
                          g->seq.n);
}

/* Offers what chat_env_read or chat_env_from_item made of text (len bytes,
 * for the error) to g. */
static void offer_read(chat_delivery *d, struct chat_group *g, chat_env_verdict v,
                       struct chat_env *env, const char *text, size_t len)
{
    if (v == CHAT_ENV_OK)
        offer(d, g, env);
    else if (v == CHAT_ENV_NOMEM)
        /* As a message dropped ahead of a gap: a gap fetch brings it. */
        chat_notify_error(d->cfg.notify, g->name, "out of memory reading a message");
    else
        chat_notify_error(d->cfg.notify, g->name,
                          "ignored a message that is not an envelope of this group: %.*s",
                          (int)(len < 200 ? len : 200), text);
}

/* Offers the envelope text s[0..len) (strict JSON) to g. */
static void offer_text(chat_delivery *d, struct chat_group *g, const char *s, size_t len)
{
    struct chat_env *env;
    chat_env_verdict v = chat_env_read(s, len, &env);

    offer_read(d, g, v, env, s, len);
}

/* Offers the envelope item (a tree) to g. */
static void offer_item(chat_delivery *d, struct chat_group *g, const cJSON *item)
{
    struct chat_env *env;
    chat_env_verdict v = chat_env_from_item(item, &env);
    char *text = v == CHAT_ENV_INVALID ? cJSON_PrintUnformatted(item) : NULL;

    offer_read(d, g, v, env, text ? text : "?", text ? strlen(text) : 1);
    cJSON_free(text);
}

void chat_delivery_catchup(chat_delivery *d, struct chat_group *g)
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
    chat_notify_event(d->cfg.notify, &ev);
}

bool chat_delivery_page(chat_delivery *d, struct chat_group *g, const cJSON *entry,
                        const struct chat_span *msgs_text, bool replay)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    const cJSON *truncated = cJSON_GetObjectItemCaseSensitive(entry, "truncated");
    const cJSON *more = cJSON_GetObjectItemCaseSensitive(entry, "more");
    uint64_t head = 0, first = 0;
    const cJSON *item;

    if (!cJSON_IsArray(msgs)) {
        chat_notify_error(d->cfg.notify, g->name, "ignored a page without messages");
        return false;
    }
    if (chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "head"), 0, &head))
        chat_group_raise_head(g, head);
    (void)chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "first"), 1, &first);
    if (!g->catching_up) {
        g->catching_up = true;
        g->cu_pages = 0;
        g->cu_msgs = 0;
    }
    g->cu_pages++;
    if (!g->seq.known) {
        /* baseline-first: a page's first - 1 was the cursor when it was cut. */
        if (replay && first > 0 && (g->min_first == 0 || first < g->min_first))
            g->min_first = first;
    } else if (cJSON_IsTrue(truncated) && first > g->seq.shown + 1) {
        chat_client_event ev;
        memset(&ev, 0, sizeof ev);
        ev.type = CHAT_CLIENT_EV_TRUNCATED;
        ev.group = g->name;
        ev.id = first;
        chat_seq_skip_to(&g->seq, first - 1);
        chat_delivery_record(d, g, first - 1);
        chat_notify_event(d->cfg.notify, &ev);
    }
    if (msgs_text != NULL && msgs_text->text != NULL) {
        const char *elem;
        size_t at = 0, len;
        chat_env_verdict v;
        struct chat_env *env;
        while (chat_span_next(msgs_text, &at, &v, &env, &elem, &len))
            offer_read(d, g, v, env, elem, len);
    } else {
        cJSON_ArrayForEach(item, msgs) offer_item(d, g, item);
    }
    chat_delivery_ready(d, g);
    /* The ack at the end of each page releases the plugin's window; one
     * that ack_every sent already for the page's last message (pages of
     * ack_every messages) is not sent twice. */
    if (replay && g->seq.shown > g->acked)
        chat_delivery_ack(d, g);
    chat_delivery_catchup(d, g);
    return cJSON_IsTrue(more);
}

void chat_delivery_live(chat_delivery *d, const char *name, const char *payload, size_t len)
{
    struct chat_group *g = chat_groups_find(d->cfg.groups, name);
    cJSON *env;

    if (g == NULL || !g->listening)
        return;
    if (chat_proto_json_valid(payload, len)) {
        size_t i = 0;
        while (i < len && (payload[i] == ' ' || payload[i] == '\t' || payload[i] == '\r' ||
                           payload[i] == '\n'))
            i++;
        if (i < len && payload[i] == '{')
            offer_text(d, g, payload, len);
        else
            chat_notify_error(d->cfg.notify, name,
                              "ignored a live message that is not a JSON object: %.200s", payload);
    } else {
        /* cJSON reads more than strict JSON: as it did before. */
        env = cJSON_ParseWithLength(payload, len);
        if (!cJSON_IsObject(env))
            chat_notify_error(d->cfg.notify, name,
                              "ignored a live message that is not a JSON object: %.200s", payload);
        else
            offer_item(d, g, env);
        cJSON_Delete(env);
    }
    chat_delivery_ready(d, g);
}

bool chat_delivery_incarnation(chat_delivery *d, const char *incarnation)
{
    bool renewed;
    char why[CHAT_REASON_MAX];

    if (strlen(incarnation) >= sizeof d->incarnation)
        return false;
    /* The server's store lost its last writes (a crash across a reboot) or
     * was replaced: the ids we hold may now name other messages. */
    renewed = d->incarnation[0] && strcmp(d->incarnation, incarnation) != 0;
    snprintf(d->incarnation, sizeof d->incarnation, "%s", incarnation);
    if (d->cfg.state != NULL &&
        chat_state_set_incarnation(d->cfg.state, d->incarnation, why, sizeof why) != CHAT_CLIENT_OK)
        chat_notify_error(d->cfg.notify, NULL, "%s", why);
    return renewed;
}
