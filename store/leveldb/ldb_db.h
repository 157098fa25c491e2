/* ldb_db: the LevelDB backend's handle and what every part of it reads and
 * writes through: records and the cache, write batches, and the errors
 * (invariant write-latch: the first write error latches, a read error fails its call
 * only). Private to store/leveldb.
 *
 * The cache (chat_cache) holds the small records ('H', 'F', 'C', 'X', 'J',
 * 'G', 'D', 'R', 'N'); ldb_write_batch keeps it, write-through, from each batch it
 * writes, so it is exact for this process's own writes. It is right only
 * while this process is the store's only writer: another writer's records
 * would never be read again once a key is cached. The entry of an 'H' key
 * holds the group's head, not the record (a floor of the head since format
 * 2): ldb_head computes it on a miss, ldb_append puts it after each
 * message, and every batch that writes 'H' writes the head itself. What
 * relies on the cache being exact:
 *   - append: the head it checks the new id against (a stale head would
 *     put a message over one another writer stored under that id), and
 *     the groups count kept in `groups` (stats too);
 *   - cursor_advance, cursor_touch, cursor_start, cursor_max: the cursor
 *     and 'X' record they compare with (a stale one would move back);
 *   - member_add, member_get, member_groups, cursor_start: memberships and
 *     the deletion generation ('D') that says whether they count;
 *   - member_add, member_remove, member_count: the member count ('N');
 *     read_advance: the read marker ('R') it moves forward only;
 *   - head, first and what first bounds (get, scan, cid_find, trim), and
 *     group_delete (the 'J' records of members who joined meanwhile).
 * Only the walks over many keys (scans of messages, expire_devices,
 * member_groups' index, group_delete's walk, the members' read markers and
 * the read markers' upgrade) read LevelDB directly.
 */
#ifndef LDB_DB_H
#define LDB_DB_H

#include "chat_cache.h"
#include "chat_store.h"
#include "ldb_keys.h"
#include "store_backend.h"

#include <leveldb/c.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Room for a path and a log file name. */
#define PATH_MAX_LEN 4096

/* The LevelDB store: a chat_store (store_backend.h) and what LevelDB needs. */
typedef struct ldb {
    chat_store base; /* first: a chat_store * of this backend is an ldb * */
    leveldb_t *db;
    leveldb_options_t *options;
    leveldb_cache_t *lru; /* LevelDB's block cache */
    leveldb_filterpolicy_t *filter;
    leveldb_readoptions_t *ropt;
    leveldb_writeoptions_t *wopt;      /* appends: synced when CHAT_SYNC_ALWAYS */
    leveldb_writeoptions_t *wopt_lazy; /* cursors and membership: never synced */
    leveldb_writeoptions_t *wopt_sync; /* chat_store_sync */
    chat_cache *cache;                 /* heads, cursors, memberships: read on every publish */
    leveldb_writebatch_t *append_wb;   /* ldb_append's, cleared and reused (one writer) */
    chat_sync sync;
    bool dirty;                /* written since the last chat_store_sync */
    atomic_bool failed;        /* write-latch: the first write error makes the store read-only */
    _Atomic uint64_t appended; /* messages appended (acknowledged once the call returns) */
    char latched[CHAT_STORE_ERROR_MAX]; /* why failed was set (the broker's thread's writes) */
    struct ldb_syncer *sync_thread;     /* CHAT_SYNC_BATCH: fsyncs beside the broker */
    char *path;
    bool running;          /* this run's marker is written */
    uint64_t groups;       /* 'H' records, as '#groups' counts them */
    struct ldb_cidf *cidf; /* which cids are surely not stored (ldb_cidf.h), or NULL */
    /* chat_store_release_memory: LevelDB's memory at the last look, and the
     * appends and time of the last trim */
    uint64_t mem_seen;
    uint64_t release_appended;
    int64_t release_us;
} ldb;

/* The LevelDB store behind a handle that ldb_open made. */
static inline ldb *ldb_of(chat_store *cs)
{
    return (ldb *)cs;
}

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

/* Seeks it to the key k, and past it when past and the key is there: where
 * a walk resumes after the last key it visited (which a step may have
 * deleted meanwhile). Returns the iterator's error, if it has one. */
static inline char *iter_seek_after(leveldb_iterator_t *it, const char *k, size_t klen, bool past)
{
    leveldb_iter_seek(it, k, klen);
    char *err = iter_error(it);
    if (past && !err && leveldb_iter_valid(it)) {
        size_t n = 0;
        const char *at = leveldb_iter_key(it, &n);
        if (n == klen && memcmp(at, k, n) == 0) {
            leveldb_iter_next(it);
        }
    }
    return err;
}

/* What ldb_walk calls with each record: its key and value, valid during the
 * call. A code other than CHAT_OK ends the walk with it; *stop ends it
 * with CHAT_OK. */
typedef chat_err ldb_visit_fn(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                              size_t vlen, bool *stop);

/* Calls fn, in key order, with every record whose key is prefix and more.
 * A read error ends the walk and is reported on the prefix's key. */
chat_err ldb_walk(ldb *st, const key *prefix, ldb_visit_fn *fn, void *ctx);

/* A failed read: maps LevelDB's message to CHAT_ECORRUPT (a checksum or a
 * block that does not parse) or CHAT_EIO, records it with what was being
 * read, and frees it. Reads never latch failure (invariant write-latch): one damaged
 * block fails the requests that touch it, not every later write. */
chat_err ldb_read_error(ldb *st, char *err, const char *what);

/* read_error for one key. */
chat_err ldb_read_key_error(ldb *st, char *err, const char *k, size_t len);

/* A record of the wrong shape. */
chat_err ldb_corrupt_key(ldb *st, const char *k, size_t len, size_t vlen);

/* The refusal of a write after the first write error. */
chat_err ldb_refused(ldb *st);

/* Decodes the value of a key of kind tag; false when it has a wrong shape. */
bool ldb_decode(char tag, const char *v, size_t vlen, rec *r);

/* Reads a record. A missing key leaves *r untouched and *found false. */
chat_err ldb_get_rec(ldb *st, const key *k, rec *r, bool *found);

/* get_rec for the value alone. A missing key leaves *v untouched. */
chat_err ldb_get_u64(ldb *st, const key *k, uint64_t *v, bool *found);

/* Writes a batch; k (NULL: a sync) names what it writes for an error
 * message. */
chat_err ldb_write_batch(ldb *st, leveldb_writebatch_t *wb, const leveldb_writeoptions_t *wo,
                         const key *k);

/* ldb_write_batch without the cache: for a writer that keeps the cache
 * itself (ldb_append, whose batch holds one cached key, the head, and
 * whose walk over the batch cost as much as a record). */
chat_err ldb_write_raw(ldb *st, leveldb_writebatch_t *wb, const leveldb_writeoptions_t *wo,
                       const key *k);

/* Adds a put of an 8-byte value... */
void ldb_batch_put(leveldb_writebatch_t *wb, const key *k, uint64_t v);

/* ... and of a two-number record. */
void ldb_batch_put2(leveldb_writebatch_t *wb, const key *k, uint64_t v, uint64_t x);

/* Reads a meta record's raw value; *val is NULL when it is missing, else
 * LevelDB's memory to free with leveldb_free. */
chat_err ldb_get_meta(ldb *st, const char *name, char **val, size_t *len);

void ldb_put_meta(leveldb_writebatch_t *wb, const char *name, const void *v, size_t len);

#endif
