/* chat_cache: open-addressing hash map from store keys to two-number records
 * (see chat_cache.h). Linear probing at most half full; entries are never
 * removed one by one (absence is an entry too), only all at once when the
 * cache is full. The slots start few and double as entries come, up to
 * twice max: an idle broker does not reserve the 24 MiB of a full cache. */
#include "chat_cache.h"

#include <stdlib.h>
#include <string.h>

struct slot {
    char *key; /* NULL: empty */
    size_t len;
    uint64_t hash;
    uint64_t value;
    uint64_t extra;
    bool found;
};

/* The slots a new cache starts with. */
#define FIRST_CAP 1024u

struct chat_cache {
    struct slot *slots;
    size_t cap;  /* power of two, at least twice used */
    size_t full; /* the cap it grows to: a power of two, at least twice max */
    size_t used;
    size_t max;
};

/* FNV-1a: short keys, good enough spread for linear probing. */
static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}

chat_cache *chat_cache_create(size_t max_entries)
{
    chat_cache *c = calloc(1, sizeof(*c));
    if (!c) {
        return NULL;
    }
    c->max = max_entries ? max_entries : 1;
    c->full = 16;
    while (c->full < 2 * c->max) {
        c->full *= 2;
    }
    c->cap = c->full < FIRST_CAP ? c->full : FIRST_CAP;
    c->slots = calloc(c->cap, sizeof(*c->slots));
    if (!c->slots) {
        free(c);
        return NULL;
    }
    return c;
}

static void clear(chat_cache *c)
{
    for (size_t i = 0; i < c->cap; i++) {
        free(c->slots[i].key);
    }
    memset(c->slots, 0, c->cap * sizeof(*c->slots));
    c->used = 0;
}

void chat_cache_destroy(chat_cache *c)
{
    if (!c) {
        return;
    }
    /* Not clear(): zeroing 12 MiB of slots about to be freed cost as much
     * as a second of publishes at every broker shutdown. */
    for (size_t i = 0; i < c->cap; i++) {
        free(c->slots[i].key);
    }
    free(c->slots);
    free(c);
}

/* Doubles the slots, moving every entry by its hash. False (nothing
 * changed) when out of memory. */
static bool grow(chat_cache *c)
{
    size_t cap = c->cap * 2, mask = cap - 1;
    struct slot *slots = calloc(cap, sizeof(*slots));
    if (!slots) {
        return false;
    }
    for (size_t i = 0; i < c->cap; i++) {
        if (c->slots[i].key) {
            size_t j = c->slots[i].hash & mask;
            while (slots[j].key) {
                j = (j + 1) & mask;
            }
            slots[j] = c->slots[i];
        }
    }
    free(c->slots);
    c->slots = slots;
    c->cap = cap;
    return true;
}

/* The slot holding key, or the empty slot where it would go. */
static struct slot *find(const chat_cache *c, const char *key, size_t len, uint64_t h)
{
    size_t mask = c->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct slot *s = &c->slots[i];
        if (!s->key || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)) {
            return s;
        }
    }
}

bool chat_cache_get(const chat_cache *c, const char *key, size_t len, bool *found, uint64_t *value,
                    uint64_t *extra)
{
    const struct slot *s = find(c, key, len, hash_bytes(key, len));
    if (!s->key) {
        return false;
    }
    *found = s->found;
    if (s->found) {
        *value = s->value;
        *extra = s->extra;
    }
    return true;
}

void chat_cache_put(chat_cache *c, const char *key, size_t len, bool found, uint64_t value,
                    uint64_t extra)
{
    uint64_t h = hash_bytes(key, len);
    struct slot *s = find(c, key, len, h);
    if (!s->key) {
        if (c->used >= c->max) {
            clear(c);
            s = find(c, key, len, h);
        } else if (2 * (c->used + 1) > c->cap) {
            /* At most half full, so that probes stay short and one slot
             * stays empty; out of memory, start over (only a cache). */
            if (c->cap >= c->full || !grow(c)) {
                clear(c);
            }
            s = find(c, key, len, h);
        }
        s->key = malloc(len ? len : 1);
        if (!s->key) {
            return;
        }
        memcpy(s->key, key, len);
        s->len = len;
        s->hash = h;
        c->used++;
    }
    s->found = found;
    s->value = value;
    s->extra = extra;
}
