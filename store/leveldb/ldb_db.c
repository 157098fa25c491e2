/* ldb_db: records, the cache, batches and errors (see ldb_db.h). */
#include "ldb_db.h"
#include "ldb_syncer.h"
#include "store_text.h"

#include <stdio.h>
#include <string.h>

/* Records "what: detail" as the store's last error. */
static void set_error(ldb *st, const char *what, const char *detail)
{
    store_set_text(st->base.last_err, sizeof(st->base.last_err), "%s: %s", what, detail);
}

chat_err ldb_read_error(ldb *st, char *err, const char *what)
{
    chat_err rc = strncmp(err, "Corruption", 10) == 0 ? CHAT_ECORRUPT : CHAT_EIO;
    set_error(st, what, err);
    leveldb_free(err);
    return rc;
}

chat_err ldb_read_key_error(ldb *st, char *err, const char *k, size_t len)
{
    char what[CHAT_STORE_ERROR_MAX];
    char desc[CHAT_STORE_ERROR_MAX - 16];
    ldb_describe_key(k, len, desc, sizeof(desc));
    store_set_text(what, sizeof(what), "reading %s", desc);
    return ldb_read_error(st, err, what);
}

chat_err ldb_corrupt_key(ldb *st, const char *k, size_t len, size_t vlen)
{
    char desc[CHAT_STORE_ERROR_MAX - 64];
    ldb_describe_key(k, len, desc, sizeof(desc));
    store_set_text(st->base.last_err, sizeof(st->base.last_err),
                   "reading %s: value of %zu bytes has a wrong shape", desc, vlen);
    return CHAT_ECORRUPT;
}

/* A failed write: latches failure (invariant write-latch), since LevelDB may have
 * written part of what it was given, and remembers why for the refusals
 * that follow. */
static chat_err write_error(ldb *st, char *err, const char *k, size_t len)
{
    char desc[CHAT_STORE_ERROR_MAX - 64];
    if (k) {
        ldb_describe_key(k, len, desc, sizeof(desc));
    } else {
        snprintf(desc, sizeof(desc), "a sync of the write-ahead log");
    }
    store_set_text(st->latched, sizeof(st->latched), "writing %s: %s", desc, err);
    store_set_text(st->base.last_err, sizeof(st->base.last_err), "%s", st->latched);
    leveldb_free(err);
    atomic_store(&st->failed, true);
    return CHAT_EIO;
}

chat_err ldb_refused(ldb *st)
{
    char why[CHAT_STORE_ERROR_MAX];
    if (st->latched[0]) {
        memcpy(why, st->latched, sizeof(why));
    } else {
        ldb_syncer_error(st, why, sizeof(why));
    }
    st->base.last_err[0] = '\0';
    store_put_text(st->base.last_err, sizeof(st->base.last_err),
                   "writes refused until the store is reopened, after ");
    store_put_text(st->base.last_err, sizeof(st->base.last_err), "%s", why);
    return CHAT_EIO;
}

/* Kinds whose records go through the cache. Message records are too many,
 * and cids are nearly all looked up once (a Bloom filter answers). */
static bool cacheable(const char *k, size_t len)
{
    return len > 0 && (k[0] == TAG_HEAD || k[0] == TAG_FIRST || k[0] == TAG_CURSOR ||
                       k[0] == TAG_JOIN || k[0] == TAG_GROUPS || k[0] == TAG_MAX ||
                       k[0] == TAG_DELETE || k[0] == TAG_READ || k[0] == TAG_COUNT);
}

bool ldb_decode(char tag, const char *v, size_t vlen, rec *r)
{
    if (tag == TAG_CURSOR || tag == TAG_JOIN || tag == TAG_GROUPS) {
        if (vlen != 8 && vlen != 16) {
            return false;
        }
    } else if (tag == TAG_DELETE) {
        /* the cache needs the generation alone */
        if (vlen < DELETE_HEADER) {
            return false;
        }
        r->v = get_u64(v);
        r->x = 0;
        return true;
    } else if (vlen != 8) {
        return false;
    }
    r->v = get_u64(v);
    r->x = vlen == 16 ? get_u64(v + 8) : 0;
    return true;
}

chat_err ldb_get_rec(ldb *st, const key *k, rec *r, bool *found)
{
    char *err = NULL;
    size_t vlen = 0;
    bool cache = cacheable(k->buf, k->len);
    *found = false;
    if (cache && chat_cache_get(st->cache, k->buf, k->len, found, &r->v, &r->x)) {
        return CHAT_OK;
    }
    char *val = leveldb_get(st->db, st->ropt, k->buf, k->len, &vlen, &err);
    if (err) {
        return ldb_read_key_error(st, err, k->buf, k->len);
    }
    if (!val) {
        if (cache) {
            chat_cache_put(st->cache, k->buf, k->len, false, 0, 0);
        }
        return CHAT_OK;
    }
    bool ok = ldb_decode(k->buf[0], val, vlen, r);
    leveldb_free(val);
    if (!ok) {
        return ldb_corrupt_key(st, k->buf, k->len, vlen);
    }
    *found = true;
    if (cache) {
        chat_cache_put(st->cache, k->buf, k->len, true, r->v, r->x);
    }
    return CHAT_OK;
}

chat_err ldb_get_u64(ldb *st, const key *k, uint64_t *v, bool *found)
{
    rec r;
    chat_err rc = ldb_get_rec(st, k, &r, found);
    if (rc == CHAT_OK && *found) {
        *v = r.v;
    }
    return rc;
}

/* Write-through: after a batch is written, its puts and deletes of cached
 * keys update the cache, whoever built the batch. */
static void cache_put_cb(void *ctx, const char *k, size_t klen, const char *v, size_t vlen)
{
    ldb *st = ctx;
    rec r;
    if (cacheable(k, klen) && ldb_decode(k[0], v, vlen, &r)) {
        chat_cache_put(st->cache, k, klen, true, r.v, r.x);
    }
}

static void cache_del_cb(void *ctx, const char *k, size_t klen)
{
    ldb *st = ctx;
    if (cacheable(k, klen)) {
        chat_cache_put(st->cache, k, klen, false, 0, 0);
    }
}

chat_err ldb_write_raw(ldb *st, leveldb_writebatch_t *wb, const leveldb_writeoptions_t *wo,
                       const key *k)
{
    char *err = NULL;
    if (atomic_load(&st->failed)) {
        return ldb_refused(st);
    }
    leveldb_write(st->db, wo, wb, &err);
    if (err) {
        return write_error(st, err, k ? k->buf : NULL, k ? k->len : 0);
    }
    st->dirty = true;
    return CHAT_OK;
}

chat_err ldb_write_batch(ldb *st, leveldb_writebatch_t *wb, const leveldb_writeoptions_t *wo,
                         const key *k)
{
    chat_err rc = ldb_write_raw(st, wb, wo, k);
    if (rc == CHAT_OK) {
        leveldb_writebatch_iterate(wb, st, cache_put_cb, cache_del_cb);
    }
    return rc;
}

void ldb_batch_put(leveldb_writebatch_t *wb, const key *k, uint64_t v)
{
    char val[8];
    put_u64(val, v);
    leveldb_writebatch_put(wb, k->buf, k->len, val, sizeof(val));
}

void ldb_batch_put2(leveldb_writebatch_t *wb, const key *k, uint64_t v, uint64_t x)
{
    char val[16];
    put_u64(val, v);
    put_u64(val + 8, x);
    leveldb_writebatch_put(wb, k->buf, k->len, val, sizeof(val));
}

chat_err ldb_get_meta(ldb *st, const char *name, char **val, size_t *len)
{
    key k;
    char *err = NULL;
    meta_key(&k, name);
    *val = leveldb_get(st->db, st->ropt, k.buf, k.len, len, &err);
    return err ? ldb_read_key_error(st, err, k.buf, k.len) : CHAT_OK;
}

void ldb_put_meta(leveldb_writebatch_t *wb, const char *name, const void *v, size_t len)
{
    key k;
    meta_key(&k, name);
    leveldb_writebatch_put(wb, k.buf, k.len, v, len);
}

chat_err ldb_walk(ldb *st, const key *prefix, ldb_visit_fn *fn, void *ctx)
{
    chat_err rc = CHAT_OK;
    bool stop = false;
    char *err = NULL;
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, prefix->buf, prefix->len);
    while (rc == CHAT_OK && !stop && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix->len || memcmp(kb, prefix->buf, prefix->len) != 0) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        rc = fn(st, ctx, kb, klen, v, vlen, &stop);
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(it);
    return err ? ldb_read_key_error(st, err, prefix->buf, prefix->len) : rc;
}
