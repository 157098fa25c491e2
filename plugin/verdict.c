/* verdict.c: the broker's read verdict for a (client, group): would the
 * broker's own access checks let the client subscribe to <prefix>/<group>
 * and receive its messages live? Asked of the broker where it exports its
 * check, worked out from what the plugin can read of the checkers after it
 * where it does not (broker.c), and remembered per device so that a push to
 * 10,000 devices does not ask 10,000 times.
 *
 * Invariants, by name:
 *   fresh-verdict: what a client reads itself (history, a catch-up page,
 *      lists, markers, a subscribe) asks afresh, so a right revoked stops
 *      the next page; the pushes to every device of a group use what was
 *      remembered. A remembered verdict is used only while no change of the
 *      broker's access configuration was seen since (generation: a reload,
 *      a publish to $CONTROL/dynamic-security/#) and for at most
 *      KNOWN_TTL_MS (LONG where every checker after ours is one whose
 *      changes the plugin sees, else SHORT: another plugin may change its
 *      mind at any time). So a revoked right stops history within that.
 *   bounded-memory: at most MAX_ENTRIES verdicts are kept; past that all
 *      are forgotten and asked again. A client's go with its disconnect.
 */
#include "access.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LONG_TTL_MS 60000
#define SHORT_TTL_MS 1000
#define MAX_ENTRIES 200000u

struct verdict {
    uint64_t gen;
    int64_t at_ms;
    enum chat_bv bv;
};

struct chat_verdicts {
    chat_hmap *clients; /* client id -> chat_hmap of group -> struct verdict */
    uint64_t gen;
    size_t entries;
    bool probing;
};

static void groups_free(void *m)
{
    chat_hmap_destroy(m, free);
}

bool chat_verdict_init(struct chat_plugin *pl)
{
    struct chat_verdicts *v = calloc(1, sizeof(*v));
    if (!v || !(v->clients = chat_hmap_create())) {
        free(v);
        return false;
    }
    v->gen = 1;
    pl->verdicts = v;
    return true;
}

void chat_verdict_free(struct chat_plugin *pl)
{
    if (pl->verdicts) {
        chat_hmap_destroy(pl->verdicts->clients, groups_free);
    }
    free(pl->verdicts);
    pl->verdicts = NULL;
}

void chat_verdict_changed(struct chat_plugin *pl)
{
    pl->verdicts->gen++;
}

void chat_verdict_forget_client(struct chat_plugin *pl, const char *client_id)
{
    struct chat_verdicts *v = pl->verdicts;
    chat_hmap *groups = chat_hmap_remove(v->clients, client_id, strlen(client_id));
    if (groups) {
        size_t n = chat_hmap_count(groups);
        v->entries = v->entries >= n ? v->entries - n : 0;
        groups_free(groups);
    }
}

bool chat_verdict_probing(const struct chat_plugin *pl)
{
    return pl->verdicts->probing;
}

/* Asks (or works out) the broker's answer to access on topic for client:
 * CHAT_BV_UNKNOWN where it can do neither. */
static enum chat_bv ask_one(struct chat_plugin *pl, struct mosquitto *client, const char *topic,
                            int access)
{
    int rc = MOSQ_ERR_ACL_DENIED;
    /* on_acl stands aside while the broker's chain, ours first, runs. */
    pl->verdicts->probing = true;
    bool asked = chat_broker_ask(pl, client, topic, access, &rc);
    pl->verdicts->probing = false;
    if (!asked && !chat_broker_emulate(pl, client, topic, access, &rc)) {
        return CHAT_BV_UNKNOWN;
    }
    return rc == MOSQ_ERR_SUCCESS ? CHAT_BV_ALLOW : CHAT_BV_DENY;
}

/* The broker's answers to a subscription to topic and a delivery on it,
 * the two questions a live reader puts to the broker's checks
 * (dynamic-security answers them apart; acl_file allows every subscription
 * and checks reads). */
static enum chat_bv ask(struct chat_plugin *pl, struct mosquitto *client, const char *topic)
{
    enum chat_bv bv = ask_one(pl, client, topic, MOSQ_ACL_SUBSCRIBE);
    return bv == CHAT_BV_ALLOW ? ask_one(pl, client, topic, MOSQ_ACL_READ) : bv;
}

enum chat_bv chat_verdict_write(struct chat_plugin *pl, struct mosquitto *client, const char *group)
{
    if (chat_broker_alone(pl, client)) {
        return CHAT_BV_ALLOW; /* our own answer is the broker's */
    }
    char topic[CHAT_GROUP_MAX + 256];
    snprintf(topic, sizeof(topic), "%s/%s", pl->cfg.topic_prefix, group);
    return ask_one(pl, client, topic, MOSQ_ACL_WRITE);
}

enum chat_bv chat_verdict_read(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                               bool fresh)
{
    struct chat_verdicts *v = pl->verdicts;
    if (chat_broker_alone(pl, client)) {
        return CHAT_BV_ALLOW; /* our own answer is the broker's */
    }
    const char *id = mosquitto_client_id(client);
    if (!id) {
        return CHAT_BV_DENY;
    }
    int64_t now = chat_now_ms();
    int64_t ttl = chat_broker_chain_known(pl, client) ? LONG_TTL_MS : SHORT_TTL_MS;
    size_t idlen = strlen(id), glen = strlen(group);
    chat_hmap *groups = chat_hmap_get(v->clients, id, idlen);
    struct verdict *e = groups ? chat_hmap_get(groups, group, glen) : NULL;
    if (!fresh && e && e->gen == v->gen && now - e->at_ms >= 0 && now - e->at_ms < ttl) {
        return e->bv;
    }
    char topic[CHAT_GROUP_MAX + 256];
    snprintf(topic, sizeof(topic), "%s/%s", pl->cfg.topic_prefix, group);
    enum chat_bv bv = ask(pl, client, topic);
    if (!e) {
        if (v->entries >= MAX_ENTRIES) {
            /* bounded-memory: forget all, or keep all when out of memory */
            chat_hmap *fresh = chat_hmap_create();
            if (!fresh) {
                return bv;
            }
            chat_hmap_destroy(v->clients, groups_free);
            v->clients = fresh;
            v->entries = 0;
            groups = NULL;
        }
        if (!groups) {
            groups = chat_hmap_create();
            if (!groups || !chat_hmap_put(v->clients, id, idlen, groups, NULL)) {
                chat_hmap_destroy(groups, NULL);
                return bv;
            }
        }
        e = calloc(1, sizeof(*e));
        if (!e || !chat_hmap_put(groups, group, glen, e, NULL)) {
            free(e);
            return bv;
        }
        v->entries++;
    }
    e->gen = v->gen;
    e->at_ms = now;
    e->bv = bv;
    return bv;
}
