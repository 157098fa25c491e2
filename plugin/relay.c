/* relay.c: with a store that several brokers share (PostgreSQL), the
 * messages other brokers stored reach this broker's subscribers here. The
 * store's own thread reads them (chat_store_feed); the broker's tick
 * publishes them, since mosquitto_broker_publish may only be called from
 * the broker's thread, and the broker delivers them at the start of its
 * next loop pass, through the same read checks as a local publish.
 *
 * The read check (chat.c, is_stored_envelope) compares a delivery with the
 * stored envelope: the envelopes published by the last two ticks are kept
 * here for it, so that it answers from memory, not with a database round
 * trip per subscriber. */
#include "plugin.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Messages published per tick at most: the rest wait for the next. */
#define RELAY_PER_TICK 2000u

/* Envelopes relayed by the last two ticks, by (group, id) (relay_key). */
struct chat_relay {
    chat_hmap *now, *prev;
};

struct relayed {
    size_t len;
    char env[];
};

static void relayed_free(void *v)
{
    free(v);
}

/* The key of (group, id): the group, a NUL, the id's eight bytes. */
static size_t relay_key(char *k, const char *group, uint64_t id)
{
    size_t g = strlen(group);
    memcpy(k, group, g + 1);
    memcpy(k + g + 1, &id, sizeof(id));
    return g + 1 + sizeof(id);
}

static void publish_one(void *ctx, const char *group, uint64_t id, const char *env, size_t len)
{
    struct chat_plugin *pl = ctx;
    char key[CHAT_STORE_MAX_NAME + 16];
    if (strlen(group) > CHAT_GROUP_MAX) {
        return;
    }
    struct relayed *r = malloc(sizeof(*r) + len);
    if (r) {
        r->len = len;
        memcpy(r->env, env, len);
        void *old = NULL;
        if (chat_hmap_put(pl->relay->now, key, relay_key(key, group, id), r, &old)) {
            free(old);
        } else {
            free(r);
        }
    }
    (void)chat_publish_group(pl, group, id, env, len, "relay");
}

void chat_relay_tick(struct chat_plugin *pl)
{
    struct chat_relay *rl = pl->relay;
    if (!rl) {
        return;
    }
    /* What the tick before last published has been delivered by now. */
    chat_hmap *fresh = chat_hmap_create();
    if (fresh) {
        chat_hmap_destroy(rl->prev, relayed_free);
        rl->prev = rl->now;
        rl->now = fresh;
    }
    chat_store_feed(pl->store, RELAY_PER_TICK, publish_one, pl);
}

bool chat_relay_lookup(struct chat_plugin *pl, const char *group, uint64_t id, const void *payload,
                       size_t len, bool *same)
{
    char key[CHAT_STORE_MAX_NAME + 16];
    const struct chat_relay *rl = pl->relay;
    if (!rl || strlen(group) > CHAT_GROUP_MAX) {
        return false;
    }
    size_t klen = relay_key(key, group, id);
    struct relayed *r = chat_hmap_get(rl->now, key, klen);
    if (!r) {
        r = chat_hmap_get(rl->prev, key, klen);
    }
    if (!r) {
        return false;
    }
    *same = r->len == len && memcmp(r->env, payload, len) == 0;
    return true;
}

void chat_relay_follow(struct chat_plugin *pl, const char *group, uint64_t head)
{
    if (!pl->relay) {
        return;
    }
    chat_err rc = chat_store_follow(pl->store, group, head);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "following %s for other brokers' messages", group);
    }
}

bool chat_relay_init(struct chat_plugin *pl)
{
    if (!chat_store_shared(pl->store)) {
        return true;
    }
    pl->relay = calloc(1, sizeof(*pl->relay));
    return pl->relay && (pl->relay->now = chat_hmap_create()) &&
           (pl->relay->prev = chat_hmap_create());
}

void chat_relay_free(struct chat_plugin *pl)
{
    if (pl->relay) {
        chat_hmap_destroy(pl->relay->now, relayed_free);
        chat_hmap_destroy(pl->relay->prev, relayed_free);
    }
    free(pl->relay);
    pl->relay = NULL;
}
