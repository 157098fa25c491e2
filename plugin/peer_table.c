/* peer_table.c: what the plugin keeps per client id between its events:
 * subscriptions still waiting for the broker's verdict (pending), the chat
 * groups and the pushes it subscribed to, whether its persistent session is
 * away, and the budget of answers the client may be sent.
 *
 * Invariants, by name (the code cites them so):
 *   kept-sessions: A peer exists while its client is connected, or, for a
 *      persistent session that went offline, while it has pending
 *      subscriptions, chat groups or pushes: its session keeps its
 *      subscriptions at the broker, so live delivery must keep passing our
 *      read check, and its catch-up must restart, when it comes back without
 *      subscribing again. At most MAX_GONE are kept away, in the order they
 *      went (oldest..newest): a new one makes the oldest go. While away,
 *      offline is the connection it left (the broker checks deliveries to it
 *      to queue them); NULL once another connection took the session over.
 *   subs-set: A peer's chat groups (subs) are a set of at most MAX_SUBS.
 *   pending-set: A peer's pending groups are a set of group names of its
 *      own, at most MAX_PENDING: the read check of every delivery finds the
 *      peer by client id, then the group, and nothing repeats the client id
 *      per group.
 *   budget-bound: budget <= BUDGET_BYTES; it may fall below zero by at most
 *      one answer and its MSG_COST (an answer is bounded by chat_answer_cap).
 *   kick-count: kicks is the number of peers whose kick is KICK_DUE; a
 *      peer's kick leaves KICK_NONE only while it is connected, and goes back
 *      to it when its connection ends. A peer whose kick is not KICK_NONE is
 *      sent nothing more (chat_budget_check, chat_budget_left): KICK_DUE
 *      until the broker's tick disconnects it (chat_peers_kick), KICK_DONE
 *      from then until the broker says it is gone.
 */
#include "plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PENDING 1024u       /* pending subscriptions of one client */
#define MAX_SUBS 1024u          /* chat groups remembered for one client */
#define MAX_GONE 10000u         /* disconnected persistent sessions remembered */
#define BUDGET_BYTES (8u << 20) /* answers one client may have unread at once */
#define BUDGET_RATE (2u << 20)  /* bytes per second the budget comes back */
#define ERRORS_PER_SECOND 10u   /* "slow down" answers while over budget */
#define DROP_LOG_EVERY_MS 10000 /* one log line per client per period */
/* What each answer costs besides its bytes. Mosquitto (2.0.11 to 2.1.2)
 * never frees a message it drops for a client's full queue (see
 * chat_budget_spend), and holds about 300 bytes for each beyond its payload:
 * so that the budget bounds how many answers a client is sent, not only
 * their bytes. */
#define MSG_COST 1024u
/* A client disconnected for reading nothing (chat_budget_check): it had
 * requests dropped unanswered for KICK_AFTER_MS, at least KICK_DROPS of
 * them, with no pause of RUN_GAP_MS in between. */
#define KICK_DROPS 1000u
#define KICK_AFTER_MS 1000
#define RUN_GAP_MS 1000
#define KICKS_PER_TICK 64u /* clients disconnected per tick, at most */

/* The table: every peer by client id, and how many are disconnected
 * persistent sessions (invariant kept-sessions). */
struct chat_peers {
    chat_hmap *map;                    /* client id -> struct chat_peer */
    unsigned gone;                     /* peers kept for disconnected persistent sessions */
    struct chat_peer *oldest, *newest; /* those, in the order they went away */
    unsigned kicks;                    /* peers to disconnect (kick-count) */
};

enum kick { KICK_NONE, KICK_DUE, KICK_DONE };

struct chat_peer {
    chat_hmap *pending; /* group names (values unused), NULL when none */
    chat_hmap *subs;    /* chat groups subscribed to (values unused), NULL when none */
    bool pushes;        /* subscribed to the response topic */
    bool connected;
    const struct mosquitto *offline; /* see kept-sessions */
    struct chat_peer *older, *newer; /* the list of peers away (not connected) */
    int64_t budget;                  /* bytes; see budget-bound */
    int64_t budget_ms;               /* when budget was last brought up to date */
    int64_t err_sec;                 /* the second in which errs were counted */
    unsigned errs;                   /* "slow down" answers sent in err_sec */
    uint64_t dropped;                /* requests dropped unanswered since the last log line */
    int64_t drop_log_ms;             /* when the last line was logged */
    uint64_t missed;                 /* pushes not sent since the last log line ... */
    int64_t miss_log_ms;             /* ... logged then */
    int64_t run_ms;                  /* when the current run of dropped requests began */
    int64_t run_last_ms;             /* when its last request was dropped */
    uint64_t run_drops;              /* requests dropped in it */
    enum kick kick;                  /* see kick-count */
    size_t id_len;
    char id[];
};

static void peer_free(void *p)
{
    struct chat_peer *peer = p;
    if (peer) {
        chat_hmap_destroy(peer->pending, NULL);
        chat_hmap_destroy(peer->subs, NULL);
    }
    free(peer);
}

bool chat_peers_init(struct chat_plugin *pl)
{
    struct chat_peers *t = calloc(1, sizeof(*t));
    if (!t || !(t->map = chat_hmap_create())) {
        free(t);
        return false;
    }
    pl->peers = t;
    return true;
}

void chat_peers_free(struct chat_plugin *pl)
{
    if (pl->peers) {
        chat_hmap_destroy(pl->peers->map, peer_free);
    }
    free(pl->peers);
    pl->peers = NULL;
}

size_t chat_peers_count(const struct chat_plugin *pl)
{
    return chat_hmap_count(pl->peers->map);
}

unsigned chat_peers_gone(const struct chat_plugin *pl)
{
    return pl->peers->gone;
}

bool chat_peer_known(const struct chat_plugin *pl, const char *client_id)
{
    return chat_hmap_get(pl->peers->map, client_id, strlen(client_id)) != NULL;
}

static struct chat_peer *peer_get(struct chat_plugin *pl, const char *client_id, bool create)
{
    size_t len = strlen(client_id);
    struct chat_peer *p = chat_hmap_get(pl->peers->map, client_id, len);
    if (p || !create) {
        return p;
    }
    p = calloc(1, sizeof(*p) + len + 1);
    if (!p) {
        return NULL;
    }
    memcpy(p->id, client_id, len + 1);
    p->id_len = len;
    p->connected = true;
    p->budget = BUDGET_BYTES;
    p->budget_ms = chat_now_ms();
    if (!chat_hmap_put(pl->peers->map, client_id, len, p, NULL)) {
        free(p);
        return NULL;
    }
    return p;
}

bool chat_pending_has(struct chat_plugin *pl, const char *client_id, const char *group)
{
    struct chat_peer *p = peer_get(pl, client_id, false);
    return p && p->pending && chat_hmap_get(p->pending, group, strlen(group)) != NULL;
}

void chat_pending_add(struct chat_plugin *pl, const char *client_id, const char *group)
{
    struct chat_peer *p = peer_get(pl, client_id, true);
    size_t len = strlen(group);
    if (!p || (p->pending && chat_hmap_get(p->pending, group, len))) {
        return;
    }
    if (p->pending && chat_hmap_count(p->pending) >= MAX_PENDING) {
        /* Fails closed: live messages of that group do not reach it. */
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: %s subscribed to more than %u groups it is not a "
                             "member of; not delivering %s to it",
                             client_id, MAX_PENDING, group);
        return;
    }
    if (!p->pending && !(p->pending = chat_hmap_create())) {
        return;
    }
    /* Any non-NULL value marks the group. */
    (void)chat_hmap_put(p->pending, group, len, p, NULL);
}

void chat_pending_remove(struct chat_plugin *pl, const char *client_id, const char *group)
{
    struct chat_peer *p = peer_get(pl, client_id, false);
    if (p && p->pending) {
        (void)chat_hmap_remove(p->pending, group, strlen(group));
    }
}

static bool forget_group_cb(void *ctx, const void *key, size_t len, void *val)
{
    const char *group = ctx;
    struct chat_peer *p = val;
    (void)key;
    (void)len;
    if (p->pending) {
        (void)chat_hmap_remove(p->pending, group, strlen(group));
    }
    return false;
}

void chat_pending_forget_group(struct chat_plugin *pl, const char *group)
{
    /* Peers that keep nothing else stay until they disconnect, as always. */
    chat_hmap_foreach(pl->peers->map, forget_group_cb, (void *)group);
}

/* Links p, gone away, as the newest of the peers away. */
static void away_link(struct chat_peers *t, struct chat_peer *p)
{
    p->older = t->newest;
    p->newer = NULL;
    if (t->newest) {
        t->newest->newer = p;
    } else {
        t->oldest = p;
    }
    t->newest = p;
    t->gone++;
}

static void away_unlink(struct chat_peers *t, struct chat_peer *p)
{
    if (p->older) {
        p->older->newer = p->newer;
    } else {
        t->oldest = p->newer;
    }
    if (p->newer) {
        p->newer->older = p->older;
    } else {
        t->newest = p->older;
    }
    p->older = p->newer = NULL;
    t->gone--;
}

/* kick-count: p's connection ended, or p goes. */
static void unkick(struct chat_peers *t, struct chat_peer *p)
{
    if (p->kick == KICK_DUE) {
        t->kicks--;
    }
    p->kick = KICK_NONE;
    p->run_drops = 0;
    p->run_ms = p->run_last_ms = 0;
}

static void peer_remove(struct chat_plugin *pl, struct chat_peer *p)
{
    unkick(pl->peers, p);
    if (!p->connected) {
        away_unlink(pl->peers, p);
    }
    chat_hmap_remove(pl->peers->map, p->id, p->id_len);
    peer_free(p);
}

/* Adds (on) or removes group in the set *set, creating it, at most max. */
static void set_mark(chat_hmap **set, const char *group, bool on, unsigned max, void *val)
{
    size_t len = strlen(group);
    if (!on) {
        if (*set) {
            (void)chat_hmap_remove(*set, group, len);
        }
        return;
    }
    if (*set && (chat_hmap_get(*set, group, len) || chat_hmap_count(*set) >= max)) {
        return;
    }
    if (!*set && !(*set = chat_hmap_create())) {
        return;
    }
    (void)chat_hmap_put(*set, group, len, val, NULL);
}

void chat_peer_subscribed(struct chat_plugin *pl, const char *client_id, const char *group, bool on)
{
    struct chat_peer *p = peer_get(pl, client_id, on);
    if (p) {
        set_mark(&p->subs, group, on, MAX_SUBS, p);
    }
}

struct each_group {
    bool (*fn)(void *ctx, const char *group);
    void *ctx;
};

static bool each_group_cb(void *ctx, const void *key, size_t len, void *val)
{
    struct each_group *e = ctx;
    char group[CHAT_GROUP_MAX + 1];
    (void)val;
    if (len > CHAT_GROUP_MAX) {
        return false;
    }
    memcpy(group, key, len);
    group[len] = '\0';
    return e->fn(e->ctx, group);
}

void chat_peer_each_group(struct chat_plugin *pl, const char *client_id,
                          bool (*fn)(void *ctx, const char *group), void *ctx)
{
    struct chat_peer *p = peer_get(pl, client_id, false);
    struct each_group e = {fn, ctx};
    if (p && p->subs) {
        chat_hmap_foreach(p->subs, each_group_cb, &e);
    }
}

void chat_peer_wants_pushes(struct chat_plugin *pl, const char *client_id, bool on)
{
    struct chat_peer *p = peer_get(pl, client_id, on);
    if (p) {
        p->pushes = on;
    }
}

bool chat_peer_pushes(struct chat_plugin *pl, const char *client_id)
{
    struct chat_peer *p = peer_get(pl, client_id, false);
    return p && p->pushes;
}

static bool keeps_something(const struct chat_peer *p)
{
    return (p->pending && chat_hmap_count(p->pending) > 0) ||
           (p->subs && chat_hmap_count(p->subs) > 0) || p->pushes;
}

void chat_peer_disconnected(struct chat_plugin *pl, const struct mosquitto *client,
                            enum chat_gone how)
{
    const char *id = mosquitto_client_id(client);
    struct chat_peer *p = id ? peer_get(pl, id, false) : NULL;
    if (!p) {
        return;
    }
    /* kick-count: whatever connection ends, a later one starts afresh (the
     * budget itself keeps refilling with time) */
    unkick(pl->peers, p);
    if (how == CHAT_GONE_REPLACED) {
        /* The session goes on in the newer connection: whether it was
         * away (it resumes) or connected (it was taken over), nothing the
         * session keeps is lost, and the old connection is no one's now.
         * The new one is back at its first event (chat_peer_back). */
        p->offline = NULL;
        if (!p->connected) {
            return;
        }
    } else if (!p->connected) {
        return;
    }
    if (how == CHAT_GONE_ENDED || !keeps_something(p)) {
        peer_remove(pl, p);
        return;
    }
    /* kept-sessions: the one away longest makes room. Forgotten, it is
     * caught up from its cursors when it comes back (chat_peer_note), and
     * the broker may queue for it meanwhile. */
    if (pl->peers->gone >= MAX_GONE && pl->peers->oldest) {
        peer_remove(pl, pl->peers->oldest);
    }
    p->connected = false;
    p->offline = how == CHAT_GONE_OFFLINE ? client : NULL;
    away_link(pl->peers, p);
}

bool chat_peer_offline(struct chat_plugin *pl, const struct mosquitto *client)
{
    const char *id = mosquitto_client_id(client);
    struct chat_peer *p = id ? peer_get(pl, id, false) : NULL;
    return p && !p->connected && p->offline == client;
}

bool chat_peer_back(struct chat_plugin *pl, const struct mosquitto *client, bool own)
{
    const char *id = mosquitto_client_id(client);
    struct chat_peer *p = id ? peer_get(pl, id, false) : NULL;
    /* A delivery to the very connection the session left is the broker
     * queueing for it; anything the client does itself is a connection,
     * even at the same address (a session that expired unseen, its
     * memory given to the next connection of the client id). */
    if (!p || p->connected || (p->offline == client && !own)) {
        return false;
    }
    if (mosquitto_client_clean_session(client)) {
        /* A clean start: the broker dropped the session that was away, and
         * its subscriptions with it; nothing of it resumes. */
        peer_remove(pl, p);
        return false;
    }
    away_unlink(pl->peers, p);
    p->connected = true;
    p->offline = NULL;
    return true;
}

bool chat_peer_note(struct chat_plugin *pl, const struct mosquitto *client)
{
    const char *id = mosquitto_client_id(client);
    return id && !peer_get(pl, id, false) && peer_get(pl, id, true) != NULL;
}

/* ===========================================================================
 * Answer budget
 * ========================================================================= */

/* Brings p's budget up to date: Mosquitto 2.0 does not tell a plugin when a
 * client has read what it was sent, so the budget comes back with time, as
 * if the client read BUDGET_RATE bytes a second. */
static void refill(struct chat_peer *p, int64_t now)
{
    if (now > p->budget_ms) {
        int64_t back = (now - p->budget_ms) * (int64_t)BUDGET_RATE / 1000;
        p->budget =
            p->budget + back > (int64_t)BUDGET_BYTES ? (int64_t)BUDGET_BYTES : p->budget + back;
        p->budget_ms = now;
    }
}

/* A request of p dropped unanswered at now: a client that goes on sending
 * them, past its budget and past the errors that say so, for longer than
 * it takes to read one, reads nothing. Each answer the budget lets through
 * again is one the broker may drop and never free: only a disconnect stops
 * that. */
static void count_drop(struct chat_peers *t, struct chat_peer *p, int64_t now)
{
    if (now - p->run_last_ms >= RUN_GAP_MS) {
        p->run_ms = now;
        p->run_drops = 0;
    }
    p->run_last_ms = now;
    p->run_drops++;
    if (p->run_drops >= KICK_DROPS && now - p->run_ms >= KICK_AFTER_MS && p->connected &&
        p->kick == KICK_NONE) {
        p->kick = KICK_DUE;
        t->kicks++;
    }
}

enum chat_budget chat_budget_check(struct chat_plugin *pl, const char *client_id)
{
    struct chat_peer *p = peer_get(pl, client_id, true);
    int64_t now = chat_now_ms();
    if (!p) {
        return CHAT_BUDGET_DROP;
    }
    if (p->kick != KICK_NONE) {
        return CHAT_BUDGET_DROP; /* kick-count: nothing more until the tick disconnects it */
    }
    refill(p, now);
    if (p->budget > 0) {
        return CHAT_BUDGET_OK;
    }
    if (now / 1000 != p->err_sec) {
        p->err_sec = now / 1000;
        p->errs = 0;
    }
    if (p->errs < ERRORS_PER_SECOND) {
        p->errs++;
        return CHAT_BUDGET_SLOW_DOWN;
    }
    p->dropped++;
    if (now - p->drop_log_ms >= DROP_LOG_EVERY_MS) {
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: %s is sent answers faster than it reads them; "
                             "%llu requests dropped unanswered",
                             client_id, (unsigned long long)p->dropped);
        p->dropped = 0;
        p->drop_log_ms = now;
    }
    count_drop(pl->peers, p, now);
    return CHAT_BUDGET_DROP;
}

bool chat_budget_left(struct chat_plugin *pl, const char *client_id)
{
    struct chat_peer *p = peer_get(pl, client_id, true);
    if (!p || p->kick != KICK_NONE) {
        return false;
    }
    int64_t now = chat_now_ms();
    refill(p, now);
    if (p->budget > 0) {
        return true;
    }
    p->missed++;
    if (now - p->miss_log_ms >= DROP_LOG_EVERY_MS) {
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: %s is sent answers faster than it reads them; "
                             "%llu pushes not sent",
                             client_id, (unsigned long long)p->missed);
        p->missed = 0;
        p->miss_log_ms = now;
    }
    return false;
}

void chat_budget_spend(struct chat_plugin *pl, const char *client_id, size_t bytes)
{
    struct chat_peer *p = peer_get(pl, client_id, false);
    if (p) {
        /* One message more at the broker, which it never frees if it drops
         * it for the client's full queue (single_publish stores it
         * unreferenced, and only the broker's start clears such messages,
         * 2.0.11 to 2.1.2). */
        p->budget -= (int64_t)bytes + (int64_t)MSG_COST;
    }
}

/* Collects the ids of up to KICKS_PER_TICK peers to disconnect. */
struct kick_list {
    char *id[KICKS_PER_TICK];
    unsigned n;
};

static bool collect_kick(void *ctx, const void *key, size_t len, void *val)
{
    struct kick_list *k = ctx;
    const struct chat_peer *p = val;
    (void)key;
    (void)len;
    if (p->kick == KICK_DUE && k->n < KICKS_PER_TICK && (k->id[k->n] = strdup(p->id)) != NULL) {
        k->n++;
    }
    return false;
}

void chat_peers_kick(struct chat_plugin *pl)
{
    struct kick_list k = {{NULL}, 0};
    if (pl->peers->kicks == 0) {
        return;
    }
    /* Ids, not peers: each disconnect runs our disconnect callback at
     * once, which changes the table (and may free the peer). */
    chat_hmap_foreach(pl->peers->map, collect_kick, &k);
    for (unsigned i = 0; i < k.n; i++) {
        const struct chat_peer *p = peer_get(pl, k.id[i], false);
        if (p && p->kick == KICK_DUE) {
            int rc = mosquitto_kick_client_by_clientid(k.id[i], false);
            /* Our disconnect callback has normally run by now and forgotten
             * the kick. Where the broker closes later (a websocket) the peer
             * stays silenced until it does, and is not kicked twice; where
             * the broker knows no such client, no disconnect will come. */
            struct chat_peer *q = peer_get(pl, k.id[i], false);
            if (q && q->kick == KICK_DUE && rc == MOSQ_ERR_SUCCESS) {
                q->kick = KICK_DONE;
                pl->peers->kicks--;
            } else if (q) {
                unkick(pl->peers, q);
            }
            if (rc == MOSQ_ERR_SUCCESS) {
                mosquitto_log_printf(MOSQ_LOG_NOTICE,
                                     "mosquitto-chat: %s disconnected: it sends requests faster "
                                     "than it reads their answers",
                                     k.id[i]);
            }
        }
        free(k.id[i]);
    }
}
