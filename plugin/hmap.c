/* hmap.c: chained hash map with byte-string keys (see hmap.h). */
#include "hmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_BUCKETS 64u
#define MOVE_PER_CHANGE 4u /* old buckets moved by each put and remove while growing */

struct entry {
    struct entry *next;
    uint64_t hash;
    size_t len;
    void *val;
    unsigned char key[]; /* len bytes */
};

/* Growing is incremental, as Redis's dict rehashes: a put that finds the
 * map full allocates a table twice the size and leaves the old one in
 * place; every put and remove after it moves MOVE_PER_CHANGE old buckets
 * over. So no single call walks every entry (a map of 50,000 devices took
 * 20 ms to double at once, on the broker's thread).
 *
 * Invariant one-home: an entry whose old bucket index is below moved is in
 * buckets; every other entry is in old (while old is not NULL). The old
 * table is gone before the next doubling: that takes nbuckets / 2 more puts,
 * and nold / MOVE_PER_CHANGE changes empty the old table. */
struct chat_hmap {
    struct entry **buckets;
    size_t nbuckets;    /* a power of two */
    struct entry **old; /* the table being moved from, or NULL */
    size_t nold;        /* its size (a power of two) */
    size_t moved;       /* old buckets [0, moved) are empty (one-home) */
    size_t count;
};

/* FNV-1a: keys are client ids and group names, short and not chosen to
 * collide with a secret; a chain that grows anyway stays correct, only
 * slower, and every chain is bounded by the resize below. */
static uint64_t hash_bytes(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

chat_hmap *chat_hmap_create(void)
{
    chat_hmap *m = calloc(1, sizeof(*m));
    if (!m) {
        return NULL;
    }
    /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
    m->buckets = calloc(FIRST_BUCKETS, sizeof(*m->buckets));
    if (!m->buckets) {
        free(m);
        return NULL;
    }
    m->nbuckets = FIRST_BUCKETS;
    return m;
}

static void chains_free(struct entry **b, size_t from, size_t to, void (*free_val)(void *))
{
    for (size_t i = from; i < to; i++) {
        struct entry *e = b[i];
        while (e) {
            struct entry *next = e->next;
            if (free_val) {
                free_val(e->val);
            }
            free(e);
            e = next;
        }
    }
}

void chat_hmap_destroy(chat_hmap *m, void (*free_val)(void *))
{
    if (!m) {
        return;
    }
    if (m->old) {
        chains_free(m->old, m->moved, m->nold, free_val);
        free(m->old);
    }
    chains_free(m->buckets, 0, m->nbuckets, free_val);
    free(m->buckets);
    free(m);
}

/* The chain that holds (or would hold) an entry of hash h (one-home). */
static struct entry **chain(const chat_hmap *m, uint64_t h)
{
    if (m->old && (h & (m->nold - 1)) >= m->moved) {
        return &m->old[h & (m->nold - 1)];
    }
    return &m->buckets[h & (m->nbuckets - 1)];
}

static struct entry **find(const chat_hmap *m, const void *key, size_t len, uint64_t h)
{
    struct entry **pp = chain(m, h);
    for (; *pp; pp = &(*pp)->next) {
        if ((*pp)->hash == h && (*pp)->len == len && memcmp((*pp)->key, key, len) == 0) {
            return pp;
        }
    }
    return pp;
}

void *chat_hmap_get(const chat_hmap *m, const void *key, size_t len)
{
    struct entry *e = *find(m, key, len, hash_bytes(key, len));
    return e ? e->val : NULL;
}

/* Moves up to n old buckets into the new table; frees the old table once
 * it is empty. */
static void move_some(chat_hmap *m, size_t n)
{
    for (; m->old && n > 0; n--) {
        struct entry *e = m->old[m->moved];
        while (e) {
            struct entry *next = e->next;
            size_t i = e->hash & (m->nbuckets - 1);
            e->next = m->buckets[i];
            m->buckets[i] = e;
            e = next;
        }
        m->old[m->moved] = NULL;
        if (++m->moved == m->nold) {
            free(m->old);
            m->old = NULL;
            m->nold = m->moved = 0;
        }
    }
}

/* Starts doubling the bucket array; on failure keeps the old one (chains
 * get longer, nothing breaks). */
static void grow(chat_hmap *m)
{
    if (m->old) {
        move_some(m, m->nold); /* not reached (see one-home), but never two old tables */
    }
    size_t n = m->nbuckets * 2;
    /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
    struct entry **b = calloc(n, sizeof(*b));
    if (!b) {
        return;
    }
    m->old = m->buckets;
    m->nold = m->nbuckets;
    m->moved = 0;
    m->buckets = b;
    m->nbuckets = n;
}

bool chat_hmap_put(chat_hmap *m, const void *key, size_t len, void *val, void **old)
{
    uint64_t h = hash_bytes(key, len);
    move_some(m, MOVE_PER_CHANGE); /* before find: moving relinks chains */
    struct entry **pp = find(m, key, len, h);
    if (*pp) {
        if (old) {
            *old = (*pp)->val;
        }
        (*pp)->val = val;
        return true;
    }
    struct entry *e = malloc(sizeof(*e) + len);
    if (!e) {
        return false;
    }
    e->next = NULL;
    e->hash = h;
    e->len = len;
    e->val = val;
    memcpy(e->key, key, len);
    *pp = e;
    if (old) {
        *old = NULL;
    }
    if (++m->count > m->nbuckets) {
        grow(m);
    }
    return true;
}

void *chat_hmap_remove(chat_hmap *m, const void *key, size_t len)
{
    uint64_t h = hash_bytes(key, len);
    move_some(m, MOVE_PER_CHANGE);
    struct entry **pp = find(m, key, len, h);
    struct entry *e = *pp;
    if (!e) {
        return NULL;
    }
    void *val = e->val;
    *pp = e->next;
    free(e);
    m->count--;
    return val;
}

size_t chat_hmap_count(const chat_hmap *m)
{
    return m->count;
}

/* Frees up to *n entries of chain *pp; lowers *n and m->count. */
static void chain_drain(chat_hmap *m, struct entry **pp, size_t *n, void (*free_val)(void *))
{
    while (*pp && *n > 0) {
        struct entry *e = *pp;
        *pp = e->next;
        if (free_val) {
            free_val(e->val);
        }
        free(e);
        m->count--;
        (*n)--;
    }
}

size_t chat_hmap_drain(chat_hmap *m, size_t n, void (*free_val)(void *))
{
    /* The old table first, bucket by bucket: an emptied old bucket counts as
     * moved (one-home holds), so no call scans it again. */
    while (m->old && n > 0) {
        chain_drain(m, &m->old[m->moved], &n, free_val);
        if (!m->old[m->moved]) {
            move_some(m, 1); /* an empty bucket: only advances */
        }
    }
    for (size_t i = 0; i < m->nbuckets && n > 0; i++) {
        chain_drain(m, &m->buckets[i], &n, free_val);
    }
    return m->count;
}

/* chat_hmap_foreach over the chains b[from, to). */
static void chains_each(chat_hmap *m, struct entry **b, size_t from, size_t to, chat_hmap_fn fn,
                        void *ctx)
{
    for (size_t i = from; i < to; i++) {
        struct entry **pp = &b[i];
        while (*pp) {
            struct entry *e = *pp;
            if (fn(ctx, e->key, e->len, e->val)) {
                *pp = e->next;
                free(e);
                m->count--;
            } else {
                pp = &e->next;
            }
        }
    }
}

void chat_hmap_foreach(chat_hmap *m, chat_hmap_fn fn, void *ctx)
{
    /* fn may not change the map but by its answer: nothing moves meanwhile. */
    if (m->old) {
        chains_each(m, m->old, m->moved, m->nold, fn, ctx);
    }
    chains_each(m, m->buckets, 0, m->nbuckets, fn, ctx);
}
