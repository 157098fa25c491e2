/* hmap.c: chained hash map with byte-string keys (see hmap.h). */
#include "hmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_BUCKETS 64u

struct entry {
    struct entry *next;
    uint64_t hash;
    size_t len;
    void *val;
    unsigned char key[]; /* len bytes */
};

struct chat_hmap {
    struct entry **buckets;
    size_t nbuckets; /* a power of two */
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

void chat_hmap_destroy(chat_hmap *m, void (*free_val)(void *))
{
    if (!m) {
        return;
    }
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct entry *e = m->buckets[i];
        while (e) {
            struct entry *next = e->next;
            if (free_val) {
                free_val(e->val);
            }
            free(e);
            e = next;
        }
    }
    free(m->buckets);
    free(m);
}

static struct entry **find(const chat_hmap *m, const void *key, size_t len, uint64_t h)
{
    struct entry **pp = &m->buckets[h & (m->nbuckets - 1)];
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

/* Doubles the bucket array; on failure keeps the old one (chains get longer,
 * nothing breaks). */
static void grow(chat_hmap *m)
{
    size_t n = m->nbuckets * 2;
    /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
    struct entry **b = calloc(n, sizeof(*b));
    if (!b) {
        return;
    }
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct entry *e = m->buckets[i];
        while (e) {
            struct entry *next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
            e = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = n;
}

bool chat_hmap_put(chat_hmap *m, const void *key, size_t len, void *val, void **old)
{
    uint64_t h = hash_bytes(key, len);
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
    struct entry **pp = find(m, key, len, hash_bytes(key, len));
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

void chat_hmap_foreach(chat_hmap *m, chat_hmap_fn fn, void *ctx)
{
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct entry **pp = &m->buckets[i];
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
