/* ldb_db: the LevelDB backend's handle and what every part of it reads and
 * writes through: records and the cache, write batches, and the errors
 * (invariant 5: the first write error latches, a read error fails its call
 * only). Private to store/leveldb.
 *
 * The cache (chat_cache) holds the small records of every cacheable kind
 * and is kept by ldb_write_batch, write-through, from the batch itself:
 * correct only while this process is the store's only writer (chat_store.h,
 * Threading).
 */
#ifndef LDB_DB_H
#define LDB_DB_H

#include "chat_cache.h"
#include "chat_store.h"
#include "ldb_keys.h"

#include <leveldb/c.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INCARNATION_LEN 32u

/* Room for a path and a log file name. */
#define PATH_MAX_LEN 4096

struct chat_store {
    leveldb_t *db;
    leveldb_options_t *options;
    leveldb_cache_t *lru; /* LevelDB's block cache */
    leveldb_filterpolicy_t *filter;
    leveldb_readoptions_t *ropt;
    leveldb_writeoptions_t *wopt;      /* appends: synced when CHAT_SYNC_ALWAYS */
    leveldb_writeoptions_t *wopt_lazy; /* cursors and membership: never synced */
    leveldb_writeoptions_t *wopt_sync; /* chat_store_sync */
    chat_cache *cache;                 /* heads, cursors, memberships: read on every publish */
    chat_sync sync;
    chat_clock_fn clock; /* stamps a cursor's last use */
    void *clock_ctx;
    bool dirty;         /* written since the last chat_store_sync */
    atomic_bool failed; /* invariant 5: the first write error makes the store read-only */
    char latched[CHAT_STORE_ERROR_MAX];  /* why failed was set (the broker's thread's writes) */
    char last_err[CHAT_STORE_ERROR_MAX]; /* chat_store_last_error */
    struct ldb_syncer *sync_thread;      /* CHAT_SYNC_BATCH: fsyncs beside the broker */
    char *path;
    bool running;                          /* this run's marker is written */
    bool recovered;                        /* the incarnation changed at this open */
    char incarnation[INCARNATION_LEN + 1]; /* chat_store_incarnation */
    uint64_t groups;                       /* 'H' records, as '#groups' counts them */
};

/* A record as the cache holds it: a value and an extra number. Cursors hold
 * (id, last use in ms) and memberships (joined, generation) since issue 9;
 * their older 8-byte values read with 0 as the extra number. */
typedef struct rec {
    uint64_t v;
    uint64_t x;
} rec;

/* The iterator's error, if it has one: LevelDB skips a block it cannot read
 * and goes on with the next, keeping the error aside, so every step must ask
 * before it trusts the key it landed on. */
static inline char *iter_error(const leveldb_iterator_t *it)
{
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    return err;
}

/* A failed read: maps LevelDB's message to CHAT_ECORRUPT (a checksum or a
 * block that does not parse) or CHAT_EIO, records it with what was being
 * read, and frees it. Reads never latch failure (invariant 5): one damaged
 * block fails the requests that touch it, not every later write. */
chat_err ldb_read_error(chat_store *st, char *err, const char *what);

/* read_error for one key. */
chat_err ldb_read_key_error(chat_store *st, char *err, const char *k, size_t len);

/* A record of the wrong shape. */
chat_err ldb_corrupt_key(chat_store *st, const char *k, size_t len, size_t vlen);

/* The refusal of a write after the first write error. */
chat_err ldb_refused(chat_store *st);

/* Decodes the value of a key of kind tag; false when it has a wrong shape. */
bool ldb_decode(char tag, const char *v, size_t vlen, rec *r);

/* Reads a record. A missing key leaves *r untouched and *found false. */
chat_err ldb_get_rec(chat_store *st, const key *k, rec *r, bool *found);

/* get_rec for the value alone. A missing key leaves *v untouched. */
chat_err ldb_get_u64(chat_store *st, const key *k, uint64_t *v, bool *found);

/* Writes a batch; k (NULL: a sync) names what it writes for an error
 * message. */
chat_err ldb_write_batch(chat_store *st, leveldb_writebatch_t *wb, const leveldb_writeoptions_t *wo,
                         const key *k);

/* Adds a put of an 8-byte value... */
void ldb_batch_put(leveldb_writebatch_t *wb, const key *k, uint64_t v);

/* ... and of a two-number record. */
void ldb_batch_put2(leveldb_writebatch_t *wb, const key *k, uint64_t v, uint64_t x);

/* Reads a meta record's raw value; *val is NULL when it is missing, else
 * LevelDB's memory to free with leveldb_free. */
chat_err ldb_get_meta(chat_store *st, const char *name, char **val, size_t *len);

void ldb_put_meta(leveldb_writebatch_t *wb, const char *name, const void *v, size_t len);

#endif
