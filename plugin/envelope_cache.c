/* envelope_cache.c: the envelope stored last, kept for the read checks of
 * its deliveries: every subscriber's delivery of a fresh publish asks
 * whether its payload is a stored envelope (chat.c, is_stored_envelope),
 * and this answers from memory rather than with a store read per
 * subscriber. A group's deletion forgets its envelope here, so that a
 * delivery of it after the delete finds nothing.
 *
 * It answers alone for two ticks, as the relay keeps other brokers'
 * envelopes (relay.c): a publish's deliveries are checked before the pass
 * of the broker's loop that stored it ends, a change's M (published by the
 * plugin) at the start of the next. After that a check reads the store,
 * and the envelope answers again for two ticks only if the store still
 * holds it (chat_envelope_cache_renew): a QoS 2 publish, delivered at its
 * PUBREL, costs one read, not one per subscriber. Trusted longer, it could
 * answer for a store that changed under it: with a store other brokers
 * write, a recall made on another broker rewrites the envelope held here,
 * and a kept session's queue, checked again at its reconnect, would pass
 * the old text (redteam4, f_pg_cache_recall.py). */
#include "plugin.h"

#include <stdlib.h>
#include <string.h>

struct chat_envelope_cache {
    char group[CHAT_GROUP_MAX + 1];
    uint64_t id;
    char *env; /* malloc'd, NULL when none */
    size_t len;
    unsigned ticks; /* ticks since it was stored */
};

bool chat_envelope_cache_init(struct chat_plugin *pl)
{
    pl->envelopes = calloc(1, sizeof(*pl->envelopes));
    return pl->envelopes != NULL;
}

void chat_envelope_cache_free(struct chat_plugin *pl)
{
    if (pl->envelopes) {
        free(pl->envelopes->env);
    }
    free(pl->envelopes);
    pl->envelopes = NULL;
}

void chat_envelope_cache_put(struct chat_plugin *pl, const char *group, uint64_t id, char *env,
                             size_t len)
{
    struct chat_envelope_cache *c = pl->envelopes;
    free(c->env);
    c->env = env;
    c->len = len;
    c->id = id;
    c->ticks = 0;
    /* group is a checked name of at most CHAT_GROUP_MAX bytes. */
    size_t glen = strnlen(group, sizeof(c->group) - 1);
    memcpy(c->group, group, glen);
    c->group[glen] = '\0';
}

bool chat_envelope_cache_lookup(const struct chat_plugin *pl, const char *group, uint64_t id,
                                const void *payload, size_t len, bool *same)
{
    const struct chat_envelope_cache *c = pl->envelopes;
    if (!c->env || c->ticks >= 2 || id != c->id || strcmp(group, c->group) != 0) {
        return false;
    }
    *same = len == c->len && memcmp(payload, c->env, len) == 0;
    return true;
}

void chat_envelope_cache_forget(struct chat_plugin *pl, const char *group)
{
    struct chat_envelope_cache *c = pl->envelopes;
    if (c->env && !strcmp(c->group, group)) {
        free(c->env);
        c->env = NULL;
    }
}

void chat_envelope_cache_renew(struct chat_plugin *pl, const char *group, uint64_t id,
                               const void *stored, size_t len)
{
    struct chat_envelope_cache *c = pl->envelopes;
    if (!c->env || id != c->id || strcmp(group, c->group) != 0) {
        return;
    }
    if (len == c->len && memcmp(stored, c->env, len) == 0) {
        c->ticks = 0;
    } else {
        free(c->env);
        c->env = NULL;
    }
}

void chat_envelope_cache_tick(struct chat_plugin *pl)
{
    struct chat_envelope_cache *c = pl->envelopes;
    if (c && c->env && c->ticks < 2) {
        c->ticks++;
    }
}

const char *chat_envelope_cache_last(const struct chat_plugin *pl, size_t *len)
{
    *len = pl->envelopes->env ? pl->envelopes->len : 0;
    return pl->envelopes->env;
}
