/* ldb_cidf: the in-memory filter over the cid index (see ldb_cidf.h). */
#include "ldb_cidf.h"
#include "chat_mono.h"
#include "ldb_db.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK_WORDS 8u /* 512 bits: one cache line per key */
#define PROBES 6u

/* One filter and the scan that fills it: the one in use, or a bigger one
 * being filled to replace it (grow-by-rescan). */
struct gen {
    _Atomic uint64_t *bits;         /* the filter; only ever ORed into (bits-only-set) */
    size_t bytes;                   /* its size, a power of two */
    size_t blocks;                  /* a power of two */
    atomic_bool ready;              /* the scan ended and found every key (filled-at-open) */
    atomic_bool stop;               /* destroy asks the scan to end */
    _Atomic uint64_t keys;          /* 'I' keys the scan found */
    _Atomic uint64_t ms;            /* the scan's time */
    uint64_t added;                 /* keys added since the snapshot (broker's thread) */
    ldb *st;                        /* the store scanned (its db outlives the thread) */
    const leveldb_snapshot_t *snap; /* the store as it was when the filter was made */
    pthread_t thread;
    bool started;
    pthread_mutex_t lock; /* guards hold, done */
    pthread_cond_t cond;
    bool hold; /* test hook: the scan waits for ldb_cidf_release */
    bool done; /* the scan has ended, ready or not */
};

struct ldb_cidf {
    struct gen *cur;         /* the filter lookups ask */
    struct gen *next;        /* a bigger one being filled, or NULL (broker's thread) */
    size_t max;              /* the most bytes it grows to */
    bool grow_off;           /* a bigger one could not be made or filled: stay */
    _Atomic uint64_t absent; /* lookups answered without LevelDB */
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
static bool probe(struct gen *f, uint64_t h, bool set)
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

/* How read_keys ended. */
enum read_end { READ_ALL, READ_MORE, READ_ERROR, READ_STOPPED };

/* Reads the 'I' keys of the snapshot, keys only, without filling LevelDB's
 * block cache: sets each one's bits in g (when not NULL), or keeps its hash
 * in hashes[] (when not NULL), and counts them in *n. Stops after `limit`
 * keys when another follows (READ_MORE), and when *stop is set. */
static enum read_end read_keys(ldb *st, const leveldb_snapshot_t *snap, struct gen *g,
                               uint64_t *hashes, uint64_t limit, uint64_t *n)
{
    char *err = NULL;
    const char tag = TAG_CID;
    enum read_end end = READ_ALL;

    *n = 0;
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_readoptions_set_snapshot(ro, snap);
    leveldb_readoptions_set_fill_cache(ro, 0);
    leveldb_readoptions_set_verify_checksums(ro, 1);
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, ro);
    for (leveldb_iter_seek(it, &tag, 1);; leveldb_iter_next(it)) {
        if (g && atomic_load(&g->stop)) {
            end = READ_STOPPED;
            break;
        }
        if ((err = iter_error(it)) != NULL) {
            end = READ_ERROR;
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
        if (*n == limit) {
            end = READ_MORE;
            break;
        }
        uint64_t h = key_hash(k, klen);
        if (g) {
            probe(g, h, true);
        }
        if (hashes) {
            hashes[*n] = h;
        }
        (*n)++;
    }
    leveldb_free(err);
    leveldb_iter_destroy(it);
    leveldb_readoptions_destroy(ro);
    return end;
}

/* The filter's scan has ended: ready (with release: every bit set before
 * is seen by whoever reads ready as true with acquire, ldb_cidf_absent)
 * when it read every key, and done either way. */
static void gen_finish(struct gen *g, bool ok, uint64_t n, uint64_t t0)
{
    if (ok) {
        atomic_store(&g->keys, n);
        atomic_store(&g->ms, (uint64_t)chat_mono_us() / 1000u - t0);
        atomic_store_explicit(&g->ready, true, memory_order_release);
    }
    pthread_mutex_lock(&g->lock);
    g->done = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* The scan thread: every 'I' key of the snapshot. Any read error leaves the
 * filter not ready. */
static void *scan(void *arg)
{
    struct gen *g = arg;
    uint64_t t0 = (uint64_t)chat_mono_us() / 1000u, n = 0;

    pthread_mutex_lock(&g->lock);
    while (g->hold && !atomic_load(&g->stop)) {
        pthread_cond_wait(&g->cond, &g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    enum read_end end = read_keys(g->st, g->snap, g, NULL, UINT64_MAX, &n);
    leveldb_release_snapshot(g->st->db, g->snap);
    g->snap = NULL;
    gen_finish(g, end == READ_ALL, n, t0);
    return NULL;
}

/* A power of two of at least 64 bytes: the largest not above bytes. */
static size_t pow2_floor(size_t bytes)
{
    size_t size = 64;
    while (size * 2 <= bytes && size * 2 > size) {
        size *= 2;
    }
    return size;
}

/* An empty filter of `bytes` (a power of two of at least 64) over st, or
 * NULL when out of memory. Free with gen_free. */
static struct gen *gen_new(ldb *st, size_t bytes)
{
    struct gen *g = calloc(1, sizeof(*g));
    if (!g) {
        return NULL;
    }
    g->bits = calloc(bytes / sizeof(uint64_t), sizeof(uint64_t));
    if (!g->bits) {
        free(g);
        return NULL;
    }
    g->bytes = bytes;
    g->blocks = bytes / (BLOCK_WORDS * sizeof(uint64_t));
    g->st = st;
    atomic_init(&g->ready, false);
    atomic_init(&g->stop, false);
    pthread_mutex_init(&g->lock, NULL);
    /* gen_wait's bound is on the monotonic clock: a step of the wall
     * clock must not end it early or stretch it */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cond, &ca);
    pthread_condattr_destroy(&ca);
    return g;
}

/* Stops and joins its scan, then frees it. Accepts NULL. */
static void gen_free(struct gen *g)
{
    if (!g) {
        return;
    }
    atomic_store(&g->stop, true);
    pthread_mutex_lock(&g->lock);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    if (g->started) {
        pthread_join(g->thread, NULL);
    }
    if (g->snap) {
        leveldb_release_snapshot(g->st->db, g->snap);
    }
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free((void *)g->bits);
    free(g);
}

/* Starts g's scan of the snapshot taken now: every 'I' key written later
 * goes through ldb_cidf_add (filled-at-open). False when no thread could be
 * started: g is then done and never ready. */
static bool gen_scan(struct gen *g)
{
    g->snap = leveldb_create_snapshot(g->st->db);
    if (store_thread_start(&g->thread, scan, g) != 0) {
        leveldb_release_snapshot(g->st->db, g->snap);
        g->snap = NULL;
        g->done = true;
        return false;
    }
    g->started = true;
    return true;
}

/* The filter of the open (small-inline): the keys are read here, up to
 * LDB_CIDF_INLINE; a store with more gets a filter of `big` bytes and a
 * scan on a thread. `bytes` (when not 0) is the size either way. NULL when
 * out of memory. */
static struct gen *gen_at_open(ldb *st, size_t bytes, size_t big)
{
    uint64_t t0 = (uint64_t)chat_mono_us() / 1000u, n = 0;
    uint64_t *hashes = malloc(LDB_CIDF_INLINE * sizeof(*hashes));
    if (!hashes) {
        return NULL;
    }
    const leveldb_snapshot_t *snap = leveldb_create_snapshot(st->db);
    enum read_end end = read_keys(st, snap, NULL, hashes, LDB_CIDF_INLINE, &n);
    struct gen *g = NULL;
    if (end == READ_MORE) {
        leveldb_release_snapshot(st->db, snap);
        g = gen_new(st, bytes ? bytes : big);
        if (g) {
            gen_scan(g);
        }
    } else {
        g = gen_new(st, bytes ? bytes : LDB_CIDF_MIN_BYTES);
        if (g) {
            for (uint64_t i = 0; end == READ_ALL && i < n; i++) {
                probe(g, hashes[i], true);
            }
            gen_finish(g, end == READ_ALL, n, t0);
        }
        /* The snapshot goes only now: no key written after it was seen by
         * read_keys, and no write happens before the store is handed out. */
        leveldb_release_snapshot(st->db, snap);
    }
    free(hashes);
    return g;
}

ldb_cidf *ldb_cidf_create(ldb *st, size_t bytes, size_t max, bool hold)
{
    ldb_cidf *f = calloc(1, sizeof(*f));
    if (!f) {
        return NULL;
    }
    atomic_init(&f->absent, 0);
    size_t size = bytes ? pow2_floor(bytes) : 0;
    f->max = max ? pow2_floor(max) : bytes ? size : LDB_CIDF_BYTES;
    if (hold) {
        f->cur = gen_new(st, size ? size : LDB_CIDF_BYTES);
        if (f->cur) {
            f->cur->hold = true;
            gen_scan(f->cur);
        }
    } else {
        f->cur = gen_at_open(st, size, LDB_CIDF_BYTES);
    }
    if (!f->cur) {
        free(f);
        return NULL;
    }
    return f;
}

void ldb_cidf_destroy(ldb_cidf *f)
{
    if (!f) {
        return;
    }
    gen_free(f->next);
    gen_free(f->cur);
    free(f);
}

/* Whether g's scan has ended. */
static bool gen_done(struct gen *g)
{
    pthread_mutex_lock(&g->lock);
    bool done = g->done;
    pthread_mutex_unlock(&g->lock);
    return done;
}

/* Puts a bigger filter whose scan has ended in place when it is ready, or
 * drops it when it is not (grow-by-rescan). Its scan has ended: freeing
 * the smaller one joins a thread that has long ended, if any. */
static void maybe_replace(ldb_cidf *f)
{
    struct gen *g = f->next;
    if (!g || !gen_done(g)) {
        return;
    }
    f->next = NULL;
    if (atomic_load_explicit(&g->ready, memory_order_acquire)) {
        gen_free(f->cur);
        f->cur = g;
    } else {
        gen_free(g);
        f->grow_off = true;
    }
}

/* Starts a bigger filter when the one in use holds more keys than it is
 * made for (grow-by-rescan): for twice its keys, at most f->max. Before
 * the key about to be written is added, so that the new snapshot does not
 * hold it and the add reaches both. */
static void maybe_grow(ldb_cidf *f)
{
    struct gen *c = f->cur;
    if (f->next || f->grow_off || c->bytes >= f->max ||
        !atomic_load_explicit(&c->ready, memory_order_acquire)) {
        return;
    }
    /* 10 bits per key: the design count of the false positive rate above */
    uint64_t keys = atomic_load(&c->keys) + c->added + 1;
    if (keys <= (uint64_t)c->bytes * 8u / 10u) {
        return;
    }
    size_t want = c->bytes * 2;
    while (want < f->max && (uint64_t)want * 8u / 10u < keys * 2u) {
        want *= 2;
    }
    if (want > f->max) {
        want = f->max;
    }
    struct gen *g = gen_new(c->st, want);
    if (!g) {
        f->grow_off = true;
        return;
    }
    if (!gen_scan(g)) {
        gen_free(g);
        f->grow_off = true;
        return;
    }
    f->next = g;
}

uint64_t ldb_cidf_hash(const char *k, size_t len)
{
    return key_hash(k, len);
}

void ldb_cidf_add(ldb_cidf *f, uint64_t h)
{
    if (!f) {
        return;
    }
    maybe_replace(f);
    maybe_grow(f);
    probe(f->cur, h, true);
    f->cur->added++;
    if (f->next) {
        probe(f->next, h, true);
        f->next->added++;
    }
}

bool ldb_cidf_absent(ldb_cidf *f, uint64_t h)
{
    if (!f) {
        return false;
    }
    maybe_replace(f);
    if (!atomic_load_explicit(&f->cur->ready, memory_order_acquire)) {
        return false;
    }
    if (probe(f->cur, h, false)) {
        return false;
    }
    atomic_fetch_add_explicit(&f->absent, 1, memory_order_relaxed);
    return true;
}

void ldb_cidf_release(chat_store *cs)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    if (f) {
        pthread_mutex_lock(&f->cur->lock);
        f->cur->hold = false;
        pthread_cond_broadcast(&f->cur->cond);
        pthread_mutex_unlock(&f->cur->lock);
    }
}

/* Waits, bounded to about 30 s, until g's scan has ended. */
static void gen_wait(struct gen *g)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += 30;
    pthread_mutex_lock(&g->lock);
    int rc = 0;
    while (!g->done && rc == 0) {
        rc = pthread_cond_timedwait(&g->cond, &g->lock, &dl);
    }
    pthread_mutex_unlock(&g->lock);
}

bool ldb_cidf_wait(chat_store *cs)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    if (!f) {
        return false;
    }
    gen_wait(f->cur);
    if (f->next) {
        gen_wait(f->next);
    }
    return atomic_load(&f->cur->ready);
}

size_t ldb_cidf_bytes(chat_store *cs)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    return f ? f->cur->bytes : 0;
}

void ldb_cidf_figures(chat_store *cs, bool *ready, uint64_t *keys, uint64_t *ms, uint64_t *absent)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    *ready = f && atomic_load_explicit(&f->cur->ready, memory_order_acquire);
    *keys = *ready ? atomic_load(&f->cur->keys) : 0;
    *ms = *ready ? atomic_load(&f->cur->ms) : 0;
    *absent = f ? atomic_load(&f->absent) : 0;
}

chat_err ldb_cidf_state(chat_store *cs, chat_cid_filter *out)
{
    ldb_cidf *f = ldb_of(cs)->cidf;
    ldb_cidf_figures(cs, &out->ready, &out->keys, &out->ms, &out->absent);
    if (f) {
        out->done = gen_done(f->cur);
    } else {
        out->done = true; /* none (out of memory at open): LevelDB answers */
    }
    return CHAT_OK;
}
