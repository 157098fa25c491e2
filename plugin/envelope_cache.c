/* envelope_cache.c: the envelope stored last, kept for the read checks of
 * its deliveries: every subscriber's delivery of a fresh publish asks
 * whether its payload is a stored envelope (chat.c, is_stored_envelope),
 * and this answers from memory rather than with a store read per
 * subscriber. A group's deletion forgets its envelope here, so that a
 * delivery of it after the delete finds nothing. */
#include "plugin.h"

#include <stdlib.h>
#include <string.h>

struct chat_envelope_cache {
    char group[CHAT_GROUP_MAX + 1];
    uint64_t id;
    char *env; /* malloc'd, NULL when none */
    size_t len;
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
    /* group is a checked name of at most CHAT_GROUP_MAX bytes. */
    size_t glen = strnlen(group, sizeof(c->group) - 1);
    memcpy(c->group, group, glen);
    c->group[glen] = '\0';
}

bool chat_envelope_cache_lookup(const struct chat_plugin *pl, const char *group, uint64_t id,
                                const void *payload, size_t len, bool *same)
{
    const struct chat_envelope_cache *c = pl->envelopes;
    if (!c->env || id != c->id || strcmp(group, c->group) != 0) {
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

const char *chat_envelope_cache_last(const struct chat_plugin *pl, size_t *len)
{
    *len = pl->envelopes->env ? pl->envelopes->len : 0;
    return pl->envelopes->env;
}
