/* chat_cache: open-addressing hash map from store keys to two-number records
 * (see chat_cache.h). Linear probing at most half full; entries are never
 * removed one by one (absence is an entry too), only all at once when the
 * cache is full. The slots start few and double as entries come, up to
 * twice max: an idle broker does not reserve the 24 MiB of a full cache. */
#include "chat_cache.h"
#include "store_text.h"

#include <stdlib.h>
#include <string.h>

struct slot {
    char *key; /* NULL: never used; with an old epoch: free to reuse */
    size_t len;
    uint64_t hash;
    uint64_t value;
    uint64_t extra;
    uint32_t epoch; /* the cache's epoch when written: live while it is the current one */
    bool found;
};

/* The slots a new cache starts with. */
#define FIRST_CAP 1024u
/* Old slots moved over by each put while the slots double. */
#define MOVE_PER_PUT 8u

/* Neither growing nor starting over walks every entry at once: with 50,000
 * devices in a group a doubling took 20 ms and a start over (free a quarter
 * of a million keys, zero 24 MiB) longer, on the broker's thread.
 *   - Starting over moves to a new epoch: slots of an older one count as
 *     empty, and the key a slot still holds is freed when the slot is
 *     written again (or at destroy).
 *   - Doubling keeps the old slots beside the new ones and moves
 *     MOVE_PER_PUT of them over at each put. Invariant newest-first: a key
 *     live in the new slots is newer than any copy in the old ones, so a
 *     lookup asks the new slots, then the old ones; a put writes the new
 *     slots only. The old slots are gone long before the new ones fill
 *     (they move over within cap / 2 / MOVE_PER_PUT puts). */
struct chat_cache {
    struct slot *slots;
    size_t cap;  /* power of two, at least twice used */
    size_t full; /* the cap it grows to: a power of two, at least twice max */
    size_t used; /* live entries, in slots and old */
    size_t max;
    uint32_t epoch;
    struct slot *old; /* slots being moved from, or NULL (newest-first) */
    size_t old_cap;
    size_t old_next; /* old[0, old_next) moved */
};

static bool live(const chat_cache *c, const struct slot *s)
{
    return s->key && s->epoch == c->epoch;
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
    c->epoch = 1;
    return c;
}

static void keys_free(struct slot *slots, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        free(slots[i].key);
    }
}

void chat_cache_destroy(chat_cache *c)
{
    if (!c) {
        return;
    }
    if (c->old) {
        keys_free(c->old, c->old_next, c->old_cap);
        free(c->old);
    }
    keys_free(c->slots, 0, c->cap);
    free(c->slots);
    free(c);
}

/* The slot of slots[0, cap) holding key live, or the first one not live
 * where the probe ends (empty, or of an older epoch). */
static struct slot *find_in(const chat_cache *c, struct slot *slots, size_t cap, const char *key,
                            size_t len, uint64_t h)
{
    size_t mask = cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct slot *s = &slots[i];
        if (!live(c, s) || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)) {
            return s;
        }
    }
}

/* Moves up to n old slots into the new ones (newest-first: a key already
 * live there is newer, and the old copy goes); frees the old slots once all
 * moved. */
static void move_some(chat_cache *c, size_t n)
{
    for (; c->old && n > 0; n--) {
        struct slot *o = &c->old[c->old_next];
        if (live(c, o)) {
            struct slot *s = find_in(c, c->slots, c->cap, o->key, o->len, o->hash);
            if (live(c, s)) {
                /* A put took the key over where a hole in the old probe run
                 * hid this copy from it (forget_old): counted twice. */
                free(o->key);
                c->used--;
            } else {
                free(s->key); /* an older epoch's */
                *s = *o;
            }
        } else {
            free(o->key);
        }
        o->key = NULL;
        if (++c->old_next == c->old_cap) {
            free(c->old);
            c->old = NULL;
            c->old_cap = c->old_next = 0;
        }
    }
}

/* Forgets every entry: a new epoch (see above). */
static void clear(chat_cache *c)
{
    if (c->old) {
        /* Full while still doubling: only with a max just above a quarter
         * of full; rare enough to free the old slots at once. */
        keys_free(c->old, c->old_next, c->old_cap);
        free(c->old);
        c->old = NULL;
        c->old_cap = c->old_next = 0;
    }
    c->used = 0;
    if (++c->epoch == 0) {
        /* Once in 2^32 starts over: slots of epoch 1 would look live again. */
        keys_free(c->slots, 0, c->cap);
        memset(c->slots, 0, c->cap * sizeof(*c->slots));
        c->epoch = 1;
    }
}

/* Starts doubling the slots (see above). False (nothing changed) when out
 * of memory. */
static bool grow(chat_cache *c)
{
    move_some(c, c->old_cap); /* never two old sets of slots */
    size_t cap = c->cap * 2;
    struct slot *slots = calloc(cap, sizeof(*slots));
    if (!slots) {
        return false;
    }
    c->old = c->slots;
    c->old_cap = c->cap;
    c->old_next = 0;
    c->slots = slots;
    c->cap = cap;
    return true;
}

bool chat_cache_get(const chat_cache *c, const char *key, size_t len, bool *found, uint64_t *value,
                    uint64_t *extra)
{
    uint64_t h = store_hash(key, len);
    const struct slot *s = find_in(c, c->slots, c->cap, key, len, h);
    if (!live(c, s) && c->old) {
        s = find_in(c, c->old, c->old_cap, key, len, h);
    }
    if (!live(c, s)) {
        return false;
    }
    *found = s->found;
    if (s->found) {
        *value = s->value;
        *extra = s->extra;
    }
    return true;
}

/* Drops key's copy in the old slots, if any, and says whether there was
 * one: the new slots are about to take the key (newest-first, and one count
 * per key). Leaving a hole in a probe run there only makes later lookups
 * miss: the cache never answers wrong for it. */
static bool forget_old(chat_cache *c, const char *key, size_t len, uint64_t h)
{
    if (c->old) {
        struct slot *o = find_in(c, c->old, c->old_cap, key, len, h);
        if (live(c, o)) {
            free(o->key);
            o->key = NULL;
            return true;
        }
    }
    return false;
}

void chat_cache_put(chat_cache *c, const char *key, size_t len, bool found, uint64_t value,
                    uint64_t extra)
{
    uint64_t h = store_hash(key, len);
    move_some(c, MOVE_PER_PUT);
    struct slot *s = find_in(c, c->slots, c->cap, key, len, h);
    if (!live(c, s)) {
        if (forget_old(c, key, len, h)) {
            c->used--;
        }
        if (c->used >= c->max) {
            clear(c);
            s = find_in(c, c->slots, c->cap, key, len, h);
        } else if (2 * (c->used + 1) > c->cap) {
            /* At most half full, so that probes stay short and one slot
             * stays empty; out of memory, start over (only a cache). */
            if (c->cap >= c->full || !grow(c)) {
                clear(c);
            }
            s = find_in(c, c->slots, c->cap, key, len, h);
        }
        free(s->key); /* an older epoch's, or NULL */
        s->key = malloc(len ? len : 1);
        if (!s->key) {
            return;
        }
        memcpy(s->key, key, len);
        s->len = len;
        s->hash = h;
        s->epoch = c->epoch;
        c->used++;
    }
    s->found = found;
    s->value = value;
    s->extra = extra;
}
