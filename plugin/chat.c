/* chat.c: publishes, acks and access checks on the chat topics
 * (<prefix>/<group>, <prefix>/<group>/ack and <prefix>/<group>/read). */
#include "access.h"
#include "push.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *chat_apply_ack(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                           uint64_t id, bool on_topic, uint64_t *now)
{
    const char *device = mosquitto_client_id(client);
    char member[CHAT_MEMBER_BUF];
    uint64_t cursor = 0;
    struct chat_decision d =
        chat_access_decide(pl, client, group, on_topic ? CHAT_DO_MARK_TOPIC : CHAT_DO_MARK);

    if (d.verdict != CHAT_ALLOW) {
        if (device) {
            chat_replay_stop(pl, device, group); /* nothing it may read goes on */
        }
        return d.why;
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
    struct chat_decision d = chat_access_decide(pl, ev->client, group, CHAT_DO_SEND);
    if (d.verdict != CHAT_ALLOW) {
        why = d.why;
        goto fail;
    }
    (void)chat_member(pl, ev->client, from); /* admitted: it has a name */
    if ((why = chat_envelope_build(ev->payload, ev->payloadlen, group, from, &env, &tpl, &cid)) !=
        NULL) {
        goto fail;
    }
    /* The store takes the id and the time, finds a retry by its cid, and
     * marks the message read by its sender (who is a member by now): one
     * write, which with PostgreSQL is one transaction that several brokers'
     * appends to the group queue on. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    chat_err err = chat_store_append(pl->store, group, from, cid, &tpl, true, &ap);
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
        chat_fanout_stored(pl, group, ap.id, ev->qos);
        chat_push_stored(pl, group, ap.id, from);
        /* The sender's marker moved (ap.read) but is not pushed: pushed, it
         * would cost every subscribed device a push per group and interval
         * wherever anyone sends, readers or not (integ_load's 200 devices
         * could not keep up). receipts answers it; the sender's own next
         * read, which our clients send as they show its envelope, pushes
         * it. */
    } else {
        /* A retry: the sender learns its id; the publish is acknowledged
         * as usual. Delivered live again only if the first copy never went
         * out (see fanout.c; and then only one of the copies goes out):
         * otherwise its payload becomes one that is no stored envelope,
         * which the read check (on_read) keeps from every subscriber,
         * whatever the QoS and whenever the broker fans it out. */
        chat_respond_duplicate(pl, ev->client, group, cid, ap.id);
        if (!chat_fanout_retry(pl, group, ap.id)) {
            if (!set_payload(ev, "", 0)) {
                why = "out of memory";
                goto fail;
            }
            ev->retain = false;
            rc = MOSQ_ERR_SUCCESS;
            goto done;
        }
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
    rc = MOSQ_ERR_SUCCESS;
    goto done;

fail:
    pl->stats.refused++;
    if (!cid) {
        /* Refused before the envelope was built: still name the message. */
        cid = chat_payload_cid(ev->payload, ev->payloadlen, 4 * pl->cfg.max_payload);
    }
    chat_respond_error(pl, ev->client, "publish", group, cid, why);
done:
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
    /* Published to the ack topic: behind other access checkers it passed
     * the broker's write check too, as good a reason to join an open group
     * as a publish (chat_access_decide). */
    const char *why = chat_apply_ack(pl, ev->client, group, id, true, NULL);
    if (why) {
        chat_respond_error(pl, ev->client, "ack", group, NULL, why);
        return MOSQ_ERR_ACL_DENIED;
    }
    /* Accepted; the read check keeps it from every subscriber, and a
     * retained copy would be kept for nobody, beyond anyone's reach: the
     * ack topic takes no empty publish to clear it (as reads). */
    ev->retain = false;
    return MOSQ_ERR_SUCCESS;
}

int chat_on_message(struct chat_plugin *pl, struct mosquitto_evt_message *ev)
{
    const char *g = NULL;
    size_t glen = 0;
    char group[CHAT_GROUP_MAX + 1];

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

/* What a subscription to <prefix>/<group> that mosquitto-chat allowed
 * starts (d: the decision). */
static void subscribed(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                       bool shared, const struct chat_decision *d)
{
    const char *id = mosquitto_client_id(client);
    if (d->pending) {
        if (id) {
            chat_pending_add(pl, id, group);
        }
        chat_relay_follow(pl, group, 0);
        return;
    }
    /* A shared subscription spreads live messages over its members: a
     * service taking turns, not a person; catching one of them up on the
     * group's history would be nobody's catch-up. */
    if (shared) {
        chat_relay_follow(pl, group, 0);
        return;
    }
    if (id) {
        chat_peer_subscribed(pl, id, group, true);
    }
    if (pl->cfg.replay) {
        chat_replay_start(pl, client, group);
    } else {
        chat_relay_follow(pl, group, 0);
    }
    chat_presence_subscribed(pl, client, group);
}

struct back {
    struct chat_plugin *pl;
    struct mosquitto *client;
};

static bool back_group(void *ctx, const char *group)
{
    struct back *b = ctx;
    if (b->pl->cfg.replay) {
        chat_replay_start(b->pl, b->client, group);
    }
    chat_presence_subscribed(b->pl, b->client, group);
    return false;
}

void chat_client_back(struct chat_plugin *pl, struct mosquitto *client)
{
    const char *id = mosquitto_client_id(client);
    struct back b = {pl, client};
    /* Its session kept its subscriptions at the broker, and the plugin kept
     * Mosquitto from queueing chat messages for it while it was away
     * (CHAT_DO_DELIVER): what it missed comes by catch-up, once. */
    if (id) {
        chat_peer_each_group(pl, id, back_group, &b);
    }
}

/* chat_client_resume's walk over the member's groups. */
struct resume {
    struct chat_plugin *pl;
    struct mosquitto *client;
    const char *member;
    const char *device;
    unsigned left; /* groups it may still look at */
};

static int resume_group(void *ctx, const char *group, uint64_t joined)
{
    struct resume *r = ctx;
    uint64_t cursor = 0;
    bool found = false;
    (void)joined;
    if (r->left-- == 0) {
        return 1;
    }
    chat_err rc = chat_store_cursor_get(r->pl->store, group, r->member, r->device, &cursor, &found);
    if (rc == CHAT_OK && found) {
        chat_replay_start(r->pl, r->client, group);
    }
    return 0;
}

void chat_client_resume(struct chat_plugin *pl, struct mosquitto *client)
{
    char member[CHAT_MEMBER_BUF];
    const char *device = mosquitto_client_id(client);
    if (!pl->cfg.replay || !device || chat_member(pl, client, member)) {
        return;
    }
    /* A cursor says the device read the group before; its catch-up is its
     * own. Bounded as a device's subscriptions are (1024 groups). */
    struct resume r = {pl, client, member, device, 1024};
    chat_err rc = chat_store_member_groups(pl->store, member, resume_group, &r);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "groups of %s for the catch-up of %s", member, device);
    }
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
    struct chat_decision d = chat_access_decide(pl, ev->client, group, CHAT_DO_SUBSCRIBE);
    if (d.verdict != CHAT_ALLOW) {
        chat_respond_error(pl, ev->client, "subscribe", group, NULL, d.why);
        return MOSQ_ERR_ACL_DENIED;
    }
    subscribed(pl, ev->client, group, shared, &d);
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
        chat_peer_subscribed(pl, id, group, false);
        chat_presence_unsubscribed(pl, id, group);
    }
    return pass;
}

/* True when payload is byte for byte an envelope stored in group (its id
 * in *idp). Only envelopes the message event made may reach members: Wills
 * (and bridged messages) never pass through that event, so a Will that
 * imitates an envelope would arrive unstored, with a forged id and sender;
 * nor does a retry the message event emptied (a duplicate). */
static bool is_stored_envelope(struct chat_plugin *pl, const char *group, const void *payload,
                               size_t len, uint64_t *idp)
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
    *idp = id;
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
    if (rc == CHAT_OK && found) {
        chat_envelope_cache_renew(pl, group, id, m.data, m.len);
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
    uint64_t id = 0;
    if (!is_stored_envelope(pl, group, ev->payload, ev->payloadlen, &id)) {
        return MOSQ_ERR_ACL_DENIED;
    }
    if (!chat_fanout_seen(pl, group, id, ev->payload)) {
        return MOSQ_ERR_ACL_DENIED; /* another copy of it went out: a retry's (fanout.c) */
    }
    struct chat_decision d = chat_access_decide(pl, ev->client, group, CHAT_DO_DELIVER);
    return d.verdict == CHAT_ALLOW ? pass : MOSQ_ERR_ACL_DENIED;
}

/* $CONTROL/chat/...: requests go to $CONTROL/chat/v1 and are handed to the
 * plugin, never delivered; answers reach their client straight from the
 * plugin, never through a subscription. So nothing under $CONTROL/chat/ is
 * ever delivered by the broker (a Will or a retained message there could
 * only be a forgery), and only the request topic may be published to. */
static int on_control_topic(struct chat_plugin *pl, struct mosquitto_evt_acl_check *ev, int pass)
{
    const char *id = mosquitto_client_id(ev->client);
    switch (ev->access) {
    case MOSQ_ACL_READ:
        return MOSQ_ERR_ACL_DENIED;
    case MOSQ_ACL_WRITE:
        return strcmp(ev->topic, CHAT_CONTROL_TOPIC) == 0 ? pass : MOSQ_ERR_ACL_DENIED;
    case MOSQ_ACL_SUBSCRIBE:
    case MOSQ_ACL_UNSUBSCRIBE:
        /* PROTOCOL.md v1.2: a device that subscribes to the response topic
         * itself (not through a wildcard) asks for the reads and presence
         * pushes; an unsubscribe ends them. */
        if (id && strcmp(ev->topic, CHAT_RESPONSE_TOPIC) == 0) {
            chat_peer_wants_pushes(pl, id, ev->access == MOSQ_ACL_SUBSCRIBE);
        }
        return pass;
    default:
        return pass;
    }
}

bool chat_will_refused(struct chat_plugin *pl, const struct mosquitto *client, const char *topic)
{
    const char *g = NULL;
    size_t glen = 0;
    if (!topic || (chat_topic_parse(&pl->cfg, topic, &g, &glen) == CHAT_TOPIC_NONE &&
                   strncmp(topic, CHAT_CONTROL_PREFIX, sizeof(CHAT_CONTROL_PREFIX) - 1) != 0)) {
        return false;
    }
    /* Never delivered there (on_read), and with the retain flag the broker
     * would keep it for nobody, beyond an empty publish's reach (the
     * hostile-client audit: 20 such Wills of 65 kB, 1.3 MB kept). */
    const char *id = mosquitto_client_id(client);
    mosquitto_log_printf(MOSQ_LOG_NOTICE,
                         "mosquitto-chat: the Will of %s on %s is not published: chat topics "
                         "take no Will",
                         id ? id : "(no client id)", topic);
    return true;
}

int chat_on_acl(struct chat_plugin *pl, struct mosquitto_evt_acl_check *ev)
{
    int pass = chat_access_pass(pl, ev->client);
    if (!ev->topic) {
        return pass;
    }
    if (!strncmp(ev->topic, CHAT_CONTROL_PREFIX, sizeof(CHAT_CONTROL_PREFIX) - 1)) {
        return on_control_topic(pl, ev, pass);
    }
    switch (ev->access) {
    case MOSQ_ACL_SUBSCRIBE:
        return on_subscribe(pl, ev, pass);
    case MOSQ_ACL_UNSUBSCRIBE:
        return on_unsubscribe(pl, ev, pass);
    case MOSQ_ACL_READ:
        return on_read(pl, ev, pass);
    default:
        /* A command to dynamic-security may change who may read what:
         * remembered read verdicts are asked again. */
        if (!strncmp(ev->topic, "$CONTROL/dynamic-security/", 26)) {
            chat_verdict_changed(pl);
        }
        /* Publishes are checked in full by the message event, which can
         * answer the client. */
        return pass;
    }
}
