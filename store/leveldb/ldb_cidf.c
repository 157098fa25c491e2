/* ldb_cidf: the in-memory filter over the cid index (see ldb_cidf.h). */
#include "ldb_cidf.h"
#include "ldb_db.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_WORDS 8u /* 512 bits: one cache line per key */
#define PROBES 6u

struct ldb_cidf {
    _Atomic uint64_t *bits;         /* the filter; only ever ORed into (bits-only-set) */
    size_t blocks;                  /* a power of two */
    atomic_bool ready;              /* the scan ended and found every key (filled-at-open) */
    atomic_bool stop;               /* destroy asks the scan to end */
    _Atomic uint64_t keys;          /* 'I' keys the scan found */
    _Atomic uint64_t ms;            /* the scan's time */
    _Atomic uint64_t absent;        /* lookups answered without LevelDB */
    ldb *st;                        /* the store scanned (its db outlives the thread) */
    const leveldb_snapshot_t *snap; /* the store as it was at open */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock; /* guards hold, done */
    pthread_cond_t cond;
    bool hold; /* test hook: the scan waits for ldb_cidf_release */
    bool done; /* the scan has ended, ready or not */
};

/* splitmix64's finaliser: spreads every input bit over the output. */
static uint64_t mix(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

/* FNV-1a, then the finaliser. */
static uint64_t key_hash(const char *k, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)k[i]) * 0x100000001b3ull;
    }
    return mix(h);
}

/* Visits the key's PROBES bits, in one block: one hash chooses the block
 * (blocks is a power of two), a second, mixed from it, gives six 9-bit
 * positions (they must not share bits with the block's number, or keys of
 * one block would share positions). Sets them (set) or says whether they
 * are all set. */
static bool probe(ldb_cidf *f, uint64_t h, bool set)
{
    _Atomic uint64_t *b = f->bits + (size_t)(h & (f->blocks - 1)) * BLOCK_WORDS;
    uint64_t g = mix(h ^ 0x9e3779b97f4a7c15ull);
    bool all = true;
    for (unsigned i = 0; i < PROBES; i++, g >>= 9) {
        unsigned pos = (unsigned)(g & 511u);
        uint64_t m = (uint64_t)1 << (pos & 63u);
        /* Relaxed: the bits carry no other data. What a reader of another
         * thread must see (the scan's bits) is published by the release
         * store of ready and the reader's acquire load of it; the broker's
         * own adds are in its program order. Bits are only ever set, so a
         * racing OR can only turn an "absent" into a "maybe". */
        if (set) {
            atomic_fetch_or_explicit(&b[pos >> 6], m, memory_order_relaxed);
        } else if (!(atomic_load_explicit(&b[pos >> 6], memory_order_relaxed) & m)) {
            all = false;
            break;
        }
    }
    return all;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The scan: every 'I' key of the snapshot, keys only, without filling
 * LevelDB's block cache. Any read error leaves the filter not ready. */
static void *scan(void *arg)
{
    ldb_cidf *f = arg;
    uint64_t t0 = now_ms(), n = 0;
    char *err = NULL;
    const char tag = TAG_CID;

    pthread_mutex_lock(&f->lock);
    while (f->hold && !atomic_load(&f->stop)) {
        pthread_cond_wait(&f->cond, &f->lock);
    }
    pthread_mutex_unlock(&f->lock);

    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_readoptions_set_snapshot(ro, f->snap);
    leveldb_readoptions_set_fill_cache(ro, 0);
    leveldb_readoptions_set_verify_checksums(ro, 1);
    leveldb_iterator_t *it = leveldb_create_iterator(f->st->db, ro);
    bool ok = true;
    for (leveldb_iter_seek(it, &tag, 1); !atomic_load(&f->stop); leveldb_iter_next(it)) {
        if ((err = iter_error(it)) != NULL) {
            ok = false;
            break;
        }
        if (!leveldb_iter_valid(it)) {
            break;
        }
        size_t klen = 0;
        const char *k = leveldb_iter_key(it, &klen);
        if (klen == 0 || k[0] != TAG_CID) {
            break;
        }
        probe(f, key_hash(k, klen), true);
        n++;
    }
    leveldb_free(err);
    ok = ok && !atomic_load(&f->stop);
    leveldb_iter_destroy(it);
    leveldb_readoptions_destroy(ro);
    leveldb_release_snapshot(f->st->db, f->snap);
    if (ok) {
        atomic_store(&f->keys, n);
        atomic_store(&f->ms, now_ms() - t0);
        /* Release: every bit the scan set is seen by whoever reads ready
         * as true with acquire (ldb_cidf_absent). */
        atomic_store_explicit(&f->ready, true, memory_order_release);
    }
    pthread_mutex_lock(&f->lock);
    f->done = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

ldb_cidf *ldb_cidf_create(ldb *st, size_t bytes, bool hold)
{
    size_t size = 64;
    if (bytes == 0) {
        bytes = LDB_CIDF_BYTES;
    }
    while (size * 2 <= bytes && size * 2 > size) {
        size *= 2;
    }
    ldb_cidf *f = calloc(1, sizeof(*f));
    if (!f) {
        return NULL;
    }
    f->bits = calloc(size / sizeof(uint64_t), sizeof(uint64_t));
    if (!f->bits) {
        free(f);
        return NULL;
    }
    f->blocks = size / (BLOCK_WORDS * sizeof(uint64_t));
    f->st = st;
    f->hold = hold;
    atomic_init(&f->ready, false);
    atomic_init(&f->stop, false);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    /* Taken here, before the store is handed out: every 'I' key written
     * later goes through ldb_cidf_add (filled-at-open). */
    f->snap = leveldb_create_snapshot(st->db);
    if (store_thread_start(&f->thread, scan, f) != 0) {
        leveldb_release_snapshot(st->db, f->snap);
        f->done = true; /* never ready: LevelDB answers every lookup */
    } else {
        f->started = true;
    }
    return f;
}

void ldb_cidf_destroy(ldb_cidf *f)
{
    if (!f) {
        return;
    }
    atomic_store(&f->stop, true);
    pthread_mutex_lock(&f->lock);
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    if (f->started) {
        pthread_join(f->thread, NULL);
    }
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free((void *)f->bits);
    free(f);
}

uint64_t ldb_cidf_hash(const char *k, size_t len)
{
    return key_hash(k, len);
}

void ldb_cidf_add(ldb_cidf *f, uint64_t h)
{
    if (f) {
        probe(f, h, true);
    }
}

bool ldb_cidf_absent(ldb_cidf *f, uint64_t h)
{
    if (!f || !atomic_load_explicit(&f->ready, memory_order_acquire)) {
        return false;
    }
    if (probe(f, h, false)) {
        return false;
    }
    atomic_fetch_add_explicit(&f->absent, 1, memory_order_relaxed);
    return true;
}

void ldb_cidf_release(chat_store *cs)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    if (f) {
        pthread_mutex_lock(&f->lock);
        f->hold = false;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->lock);
    }
}

bool ldb_cidf_wait(chat_store *cs)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    if (!f) {
        return false;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 30;
    pthread_mutex_lock(&f->lock);
    int rc = 0;
    while (!f->done && rc == 0) {
        rc = pthread_cond_timedwait(&f->cond, &f->lock, &dl);
    }
    pthread_mutex_unlock(&f->lock);
    return atomic_load(&f->ready);
}

void ldb_cidf_figures(chat_store *cs, bool *ready, uint64_t *keys, uint64_t *ms, uint64_t *absent)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    *ready = f && atomic_load_explicit(&f->ready, memory_order_acquire);
    *keys = *ready ? atomic_load(&f->keys) : 0;
    *ms = *ready ? atomic_load(&f->ms) : 0;
    *absent = f ? atomic_load(&f->absent) : 0;
}

chat_err ldb_cidf_state(chat_store *cs, chat_cid_filter *out)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    ldb_cidf_figures(cs, &out->ready, &out->keys, &out->ms, &out->absent);
    if (f) {
        pthread_mutex_lock(&f->lock);
        out->done = f->done;
        pthread_mutex_unlock(&f->lock);
    } else {
        out->done = true; /* none (out of memory at open): LevelDB answers */
    }
    return CHAT_OK;
}
