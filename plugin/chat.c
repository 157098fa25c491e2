/* chat.c: publishes, acks and access checks on the chat topics
 * (<prefix>/<group>, <prefix>/<group>/ack and <prefix>/<group>/read). */
#include "plugin.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *chat_apply_ack(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                           uint64_t id, bool join, uint64_t *now)
{
    const char *device = mosquitto_client_id(client);
    char member[CHAT_MEMBER_BUF];
    uint64_t cursor = 0;
    const char *why = chat_admit_marker(pl, client, group, join);

    if (why) {
        if (device) {
            chat_replay_stop(pl, device, group); /* nothing it may read goes on */
        }
        return why;
    }
    (void)chat_member(pl, client, member); /* admitted: it has a name */
    chat_err rc = chat_store_cursor_advance(pl->store, group, member, device, id, &cursor);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "ack of %s in %s", device, group);
        /* The device holds what it acked even if the store cannot say so
         * (a full disk): its catch-up goes on; after a reconnect it resumes
         * from the stored cursor, and shows nothing twice (ids). */
        chat_replay_acked(pl, client, group, id);
        return "storage error";
    }
    if (now) {
        *now = cursor;
    }
    pl->stats.acks++;
    chat_replay_acked(pl, client, group, cursor);
    return NULL;
}

/* Replaces the publish's payload with bytes the broker will own and free;
 * false when out of memory. */
static bool set_payload(struct mosquitto_evt_message *ev, const char *data, size_t len)
{
    char *p = mosquitto_malloc(len + 1);
    if (!p) {
        return false;
    }
    memcpy(p, data, len);
    p[len] = '\0';
    ev->payload = p;
    ev->payloadlen = (uint32_t)len;
    return true;
}

/* A publish to <prefix>/<group>: store one copy, then let the broker deliver
 * the envelope instead of the original payload. */
static int on_group_message(struct chat_plugin *pl, struct mosquitto_evt_message *ev,
                            const char *group)
{
    const char *why = NULL;
    char from[CHAT_MEMBER_BUF];
    char *env = NULL, *cid = NULL;
    chat_envelope tpl;
    chat_appended ap = {0};
    int rc = MOSQ_ERR_ACL_DENIED;

    if (ev->payloadlen > pl->cfg.max_payload) {
        why = "payload is larger than max_payload";
        goto fail;
    }
    if ((why = chat_admit(pl, ev->client, group, true)) != NULL) {
        goto fail;
    }
    (void)chat_member(pl, ev->client, from); /* admitted: it has a name */
    if ((why = chat_envelope_build(ev->payload, ev->payloadlen, group, from, &env, &tpl, &cid)) !=
        NULL) {
        goto fail;
    }
    /* The store takes the id and the time, and finds a retry by its cid
     * (delivered again as the stored copy, with its original id, which
     * receivers that hold it drop): one write, which with PostgreSQL is
     * one transaction that several brokers' appends to the group queue on. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    chat_err err = chat_store_append(pl->store, group, from, cid, &tpl, &ap);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    chat_stats_write(
        &pl->stats, (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec)));
    if (err != CHAT_OK) {
        chat_log_store_error(pl, err, "append to %s", group);
        why = "storage error";
        goto fail;
    }
    if (!ap.duplicate) {
        if (pl->cfg.fsync == CHAT_SYNC_BATCH && !chat_tick_seen(pl) &&
            !chat_store_shared(pl->store) && (err = chat_store_sync(pl->store)) != CHAT_OK) {
            /* No tick syncs for us (see chat_tick_from_event). */
            chat_log_store_error(pl, err, "sync after an append to %s", group);
            why = "storage error";
            goto fail;
        }
        pl->stats.stored++;
        chat_retention_count(pl, group, ap.id);
    }
    if (!set_payload(ev, ap.env, ap.len)) {
        /* Stored but not deliverable now: receivers get it by catch-up. */
        why = "out of memory";
        goto fail;
    }
    chat_envelope_cache_put(pl, group, ap.id, ap.env, ap.len);
    ap.env = NULL;
    /* The log is the history; a retained envelope would be a second one. */
    ev->retain = false;
    free(env);
    free(cid);
    return MOSQ_ERR_SUCCESS;

fail:
    pl->stats.refused++;
    if (!cid) {
        /* Refused before the envelope was built: still name the message. */
        cid = chat_payload_cid(ev->payload, ev->payloadlen, 4 * pl->cfg.max_payload);
    }
    chat_respond_error(pl, ev->client, "publish", group, cid, why);
    free(ap.env);
    free(env);
    free(cid);
    return rc;
}

static int on_ack_message(struct chat_plugin *pl, struct mosquitto_evt_message *ev,
                          const char *group)
{
    uint64_t id = 0;

    if (!chat_ack_parse(ev->payload, ev->payloadlen, &id)) {
        chat_respond_error(pl, ev->client, "ack", group, NULL,
                           "ack payload must be a decimal message id");
        return MOSQ_ERR_ACL_DENIED;
    }
    /* Behind other access checkers an ack on the topic passed the broker's
     * own write check: in an open group it is as good a reason to join as a
     * publish (see on_subscribe). Alone, a subscribe has joined already. */
    bool join = pl->cfg.acl_mode != CHAT_ACL_ALLOW;
    const char *why = chat_apply_ack(pl, ev->client, group, id, join, NULL);
    if (why) {
        chat_respond_error(pl, ev->client, "ack", group, NULL, why);
        return MOSQ_ERR_ACL_DENIED;
    }
    /* Accepted; the read check keeps it from every subscriber. */
    return MOSQ_ERR_SUCCESS;
}

int chat_on_message(struct chat_plugin *pl, struct mosquitto_evt_message *ev)
{
    const char *g = NULL;
    size_t glen = 0;
    char group[CHAT_GROUP_MAX + 1];

    chat_tick_from_event(pl);
    enum chat_topic_kind kind = chat_topic_parse(&pl->cfg, ev->topic, &g, &glen);
    if (kind == CHAT_TOPIC_NONE) {
        return MOSQ_ERR_SUCCESS;
    }
    if (kind == CHAT_TOPIC_BAD) {
        char why[3 * CHAT_GROUP_MAX + 96];
        snprintf(why, sizeof(why),
                 "not a chat topic: publish to %s/<group>, %s/<group>/ack or %s/<group>/read",
                 pl->cfg.topic_prefix, pl->cfg.topic_prefix, pl->cfg.topic_prefix);
        chat_respond_error(pl, ev->client, "publish", NULL, NULL, why);
        pl->stats.refused++;
        return MOSQ_ERR_ACL_DENIED;
    }
    const char *why = chat_proto_group_error(g, glen);
    if (why) {
        pl->stats.refused += kind == CHAT_TOPIC_GROUP;
        chat_respond_error(pl, ev->client,
                           kind == CHAT_TOPIC_ACK    ? "ack"
                           : kind == CHAT_TOPIC_READ ? "read"
                                                     : "publish",
                           NULL, NULL, why);
        return MOSQ_ERR_ACL_DENIED;
    }
    memcpy(group, g, glen);
    group[glen] = '\0';
    if (kind == CHAT_TOPIC_READ) {
        if ((why = chat_read_publish(pl, ev, group)) != NULL) {
            chat_respond_error(pl, ev->client, "read", group, NULL, why);
            return MOSQ_ERR_ACL_DENIED;
        }
        return MOSQ_ERR_SUCCESS;
    }
    return kind == CHAT_TOPIC_ACK ? on_ack_message(pl, ev, group) : on_group_message(pl, ev, group);
}

/* Strips "$share/<name>/" from a subscription filter. */
static const char *unshare(const char *filter, bool *shared)
{
    *shared = false;
    if (strncmp(filter, "$share/", 7) != 0) {
        return filter;
    }
    const char *slash = strchr(filter + 7, '/');
    if (!slash) {
        return filter;
    }
    *shared = true;
    return slash + 1;
}

static int on_subscribe(struct chat_plugin *pl, struct mosquitto_evt_acl_check *ev, int pass)
{
    bool shared = false;
    const char *filter = unshare(ev->topic, &shared);
    size_t plen = pl->cfg.prefix_len;
    const char *g = NULL;
    size_t glen = 0;
    char group[CHAT_GROUP_MAX + 1];

    if (strncmp(filter, pl->cfg.topic_prefix, plen) != 0 || filter[plen] != '/') {
        return pass; /* "#", "+/room1" and the like: filtered per delivery */
    }
    const char *level = filter + plen + 1;
    size_t level_len = strcspn(level, "/");
    if (memchr(level, '+', level_len) || memchr(level, '#', level_len)) {
        char why[CHAT_GROUP_MAX + 96];
        snprintf(why, sizeof(why),
                 "wildcards at the group level are refused: subscribe to %s/<group>",
                 pl->cfg.topic_prefix);
        chat_respond_error(pl, ev->client, "subscribe", NULL, NULL, why);
        return MOSQ_ERR_ACL_DENIED;
    }
    if (chat_topic_parse(&pl->cfg, filter, &g, &glen) != CHAT_TOPIC_GROUP) {
        return pass; /* <prefix>/<group>/ack and deeper: nothing is ever delivered there */
    }
    const char *why = chat_proto_group_error(g, glen);
    if (why) {
        chat_respond_error(pl, ev->client, "subscribe", NULL, NULL, why);
        return MOSQ_ERR_ACL_DENIED;
    }
    memcpy(group, g, glen);
    group[glen] = '\0';
    /* Mosquitto asks the access checkers after us only once we have
     * answered, and never tells us theirs. Alone, our answer is final and a
     * subscribe may join. Otherwise the subscribe may still be refused: a
     * non-member joins (and catches up) here only when the broker's own
     * checks would let it read the group live; else it is only let through
     * to the broker's read check of each live message, and joins when the
     * broker accepts its first publish or ack to the group. */
    bool final = pl->cfg.acl_mode == CHAT_ACL_ALLOW;
    if (!final && pl->cfg.open_groups && !chat_is_member(pl, ev->client, group)) {
        bool readable = chat_access_broker_asked(pl) && pl->cfg.read_check == CHAT_READ_BROKER &&
                        !chat_may_read(pl, ev->client, group);
        if (!readable) {
            const char *id = mosquitto_client_id(ev->client);
            if (id) {
                chat_pending_add(pl, id, group);
            }
            chat_relay_follow(pl, group, 0);
            return pass;
        }
        final = true;
    }
    if ((why = chat_admit(pl, ev->client, group, final)) != NULL) {
        chat_respond_error(pl, ev->client, "subscribe", group, NULL, why);
        return MOSQ_ERR_ACL_DENIED;
    }
    /* A shared subscription spreads live messages over its members; catching
     * one of them up on the group's history would be nobody's catch-up. */
    if (pl->cfg.replay && !shared) {
        chat_replay_start(pl, ev->client, group);
    } else {
        chat_relay_follow(pl, group, 0);
    }
    /* A shared subscription is a service taking turns, not a person. */
    if (!shared) {
        chat_presence_subscribed(pl, ev->client, group);
    }
    return pass;
}

static int on_unsubscribe(struct chat_plugin *pl, struct mosquitto_evt_acl_check *ev, int pass)
{
    bool shared = false;
    const char *filter = unshare(ev->topic, &shared);
    const char *g = NULL;
    const char *id = mosquitto_client_id(ev->client);
    size_t glen = 0;
    char group[CHAT_GROUP_MAX + 1];

    if (!shared && id && chat_topic_parse(&pl->cfg, filter, &g, &glen) == CHAT_TOPIC_GROUP &&
        glen <= CHAT_GROUP_MAX) {
        memcpy(group, g, glen);
        group[glen] = '\0';
        chat_pending_remove(pl, id, group);
        chat_presence_unsubscribed(pl, id, group);
    }
    return pass;
}

/* True when payload is byte for byte an envelope stored in group. Only
 * envelopes the message event made may reach members: Wills (and bridged
 * messages) never pass through that event, so a Will that imitates an
 * envelope would arrive unstored, with a forged id and sender. */
static bool is_stored_envelope(struct chat_plugin *pl, const char *group, const void *payload,
                               size_t len)
{
    const char *p = payload;
    uint64_t id = 0;
    size_t i = 6;
    if (len < 8 || memcmp(p, "{\"id\":", 6) != 0) {
        return false;
    }
    for (; i < len && i < 26 && p[i] >= '0' && p[i] <= '9'; i++) {
        id = id * 10 + (uint64_t)(p[i] - '0');
    }
    if (i == 6 || i >= len || p[i] != ',') {
        return false;
    }
    /* Every delivery of a fresh publish asks about the envelope just stored,
     * ... */
    bool same = false;
    if (chat_envelope_cache_lookup(pl, group, id, payload, len, &same)) {
        return same;
    }
    /* ... and of a message another broker stored, the relayed envelope. */
    if (chat_relay_lookup(pl, group, id, payload, len, &same)) {
        return same;
    }
    chat_msg m = {0};
    bool found = false;
    chat_err rc = chat_store_get(pl->store, group, id, &m, &found);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "reading message %llu of %s for a delivery",
                             (unsigned long long)id, group);
    }
    same = rc == CHAT_OK && found && m.len == len && memcmp(m.data, p, len) == 0;
    free(m.data);
    return same;
}

/* A delivery of a message on topic to ev->client. */
static int on_read(struct chat_plugin *pl, struct mosquitto_evt_acl_check *ev, int pass)
{
    const char *g = NULL;
    size_t glen = 0;
    char group[CHAT_GROUP_MAX + 1];

    switch (chat_topic_parse(&pl->cfg, ev->topic, &g, &glen)) {
    case CHAT_TOPIC_NONE:
        return pass;
    case CHAT_TOPIC_GROUP:
        break;
    default:
        return MOSQ_ERR_ACL_DENIED; /* acks and stray topics reach nobody */
    }
    if (glen > CHAT_GROUP_MAX) {
        return MOSQ_ERR_ACL_DENIED;
    }
    memcpy(group, g, glen);
    group[glen] = '\0';
    if (!is_stored_envelope(pl, group, ev->payload, ev->payloadlen)) {
        return MOSQ_ERR_ACL_DENIED;
    }
    if (chat_is_member(pl, ev->client, group)) {
        return pass;
    }
    const char *id = mosquitto_client_id(ev->client);
    return (id && chat_pending_has(pl, id, group)) ? pass : MOSQ_ERR_ACL_DENIED;
}

/* $CONTROL/chat/...: requests go to $CONTROL/chat/v1 and are handed to the
 * plugin, never delivered; answers reach their client straight from the
 * plugin, never through a subscription. So nothing under $CONTROL/chat/ is
 * ever delivered by the broker (a Will or a retained message there could
 * only be a forgery), and only the request topic may be published to. */
static int on_control_topic(struct mosquitto_evt_acl_check *ev, int pass)
{
    switch (ev->access) {
    case MOSQ_ACL_READ:
        return MOSQ_ERR_ACL_DENIED;
    case MOSQ_ACL_WRITE:
        return strcmp(ev->topic, CHAT_CONTROL_TOPIC) == 0 ? pass : MOSQ_ERR_ACL_DENIED;
    default:
        return pass;
    }
}

int chat_on_acl(struct chat_plugin *pl, struct mosquitto_evt_acl_check *ev)
{
    int pass = pl->cfg.acl_mode == CHAT_ACL_ALLOW ? MOSQ_ERR_SUCCESS : MOSQ_ERR_PLUGIN_DEFER;

    if (chat_access_probing(pl)) {
        /* Our own question (chat_may_read): the other checkers answer it. */
        return MOSQ_ERR_PLUGIN_DEFER;
    }
    chat_tick_from_event(pl);
    if (!ev->topic) {
        return pass;
    }
    if (!strncmp(ev->topic, CHAT_CONTROL_PREFIX, sizeof(CHAT_CONTROL_PREFIX) - 1)) {
        return on_control_topic(ev, pass);
    }
    switch (ev->access) {
    case MOSQ_ACL_SUBSCRIBE:
        return on_subscribe(pl, ev, pass);
    case MOSQ_ACL_UNSUBSCRIBE:
        return on_unsubscribe(pl, ev, pass);
    case MOSQ_ACL_READ:
        return on_read(pl, ev, pass);
    default:
        /* Publishes are checked in full by the message event, which can
         * answer the client. */
        return pass;
    }
}
