/* ldb_cidf: an in-memory filter over the cid index ('I' keys) of the
 * LevelDB backend, so that an append with a cid that was never stored (the
 * common case: a new message) need not ask LevelDB. Private to
 * store/leveldb.
 *
 * Design (invariants, by name):
 *   absent-exact    Exact in one direction: "absent" is answered only for a
 *                   key whose bits are not all set, and every 'I' key in the
 *                   store has its bits set before the filter says it is ready.
 *                   A false "absent" would give a retried message a second id,
 *                   so anything else ("maybe") goes to LevelDB as before
 *                   (ldb_cid_find).
 *   bits-only-set   Bits are only ever set, never cleared: a deleted or
 *                   trimmed 'I' key keeps its bits and only costs selectivity.
 *   writers-add     Every writer of an 'I' key into an open store adds it:
 *                   ldb_append, the only one (ldb_copy writes a new store that
 *                   is not open; jobs, trims and deletions only delete 'I'
 *                   keys).
 *   filled-at-open  Filled at open by a thread scanning a snapshot of the 'I'
 *                   keys taken before the store is handed out: keys written
 *                   later are added (writers-add). Until the scan ends, and
 *                   for ever if it fails, the filter is not ready and every
 *                   lookup goes to LevelDB.
 *
 * Memory: a fixed size (LDB_CIDF_BYTES, 8 MiB), a blocked Bloom filter of
 * 512-bit blocks with 6 bits per key: about 1% false positives (0.96%
 * measured) up to its
 * design count of about 6.7 million keys (10 bits per key), more beyond it.
 *
 * Threading: add and absent run on the broker's thread, the scan on its
 * own; both set bits with atomic OR (see ldb_cidf.c). */
#ifndef LDB_CIDF_H
#define LDB_CIDF_H

#include "chat_store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The default size of the filter, in bytes. */
#define LDB_CIDF_BYTES (8u << 20)

typedef struct ldb_cidf ldb_cidf;
struct ldb;

/* Makes a filter of `bytes` (0: LDB_CIDF_BYTES; rounded down to a power of
 * two of at least 64) and starts its scan of st's 'I' keys, which waits for
 * ldb_cidf_release first when `hold` (a test hook). Returns NULL when out of
 * memory (the store then works without one). Free with ldb_cidf_destroy. */
ldb_cidf *ldb_cidf_create(struct ldb *st, size_t bytes, bool hold);

/* Stops and joins the scan, then frees the filter. Accepts NULL. Call
 * before the database closes. */
void ldb_cidf_destroy(ldb_cidf *f);

/* The filter's hash of an 'I' key: an append looks its key up and then
 * adds it, and hashes it once for both. */
uint64_t ldb_cidf_hash(const char *k, size_t len);

/* Adds an 'I' key by its hash (writers-add). Accepts NULL. */
void ldb_cidf_add(ldb_cidf *f, uint64_t h);

/* True only when the key of hash h is surely not in the store: the filter
 * is ready and one of its bits is clear. False (ask LevelDB) otherwise. */
bool ldb_cidf_absent(ldb_cidf *f, uint64_t h);

/* Test hooks, on a store ldb_open made: let a held scan go, and wait until
 * the scan has ended (bounded to about 30 s). Returns whether the filter is
 * ready. */
void ldb_cidf_release(chat_store *cs);
bool ldb_cidf_wait(chat_store *cs);

/* The 'I' keys the scan found and its time in ms (both 0 until ready), and
 * the lookups it answered: figures for a log line or a stat. */
void ldb_cidf_figures(chat_store *cs, bool *ready, uint64_t *keys, uint64_t *ms, uint64_t *absent);

/* The store_cid_filter_fn of the LevelDB backend (chat_store_cid_filter). */
chat_err ldb_cidf_state(chat_store *cs, chat_cid_filter *out);

#endif
