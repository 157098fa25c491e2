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
 * Memory: a blocked Bloom filter of 512-bit blocks with 6 bits per key,
 * sized for 10 bits per key: about 1% false positives (0.96% measured) up
 * to its design count, more beyond it. It grows with the store
 * (grow-by-rescan) instead of being reserved in full at open: a store
 * with few cids gets LDB_CIDF_MIN_BYTES (64 KiB, about 52,000 keys), a
 * bigger one LDB_CIDF_BYTES (8 MiB, about 6.7 million), the most it ever
 * takes.
 *   small-inline    At open, a store of at most LDB_CIDF_INLINE keys is read
 *                   on the opening thread (bounded: a few ms, beside
 *                   LevelDB's own open) and the filter is ready at once: an
 *                   idle broker runs no thread of the filter's, and glibc
 *                   reserves no malloc arena (64 MiB of address space) for
 *                   one.
 *   grow-by-rescan  When the keys of a default-sized filter (those its scan
 *                   found plus those added since) pass its design count, a
 *                   bigger one (for twice the keys, at most LDB_CIDF_BYTES)
 *                   is made with a snapshot and a scan of its own, exactly
 *                   as at open; both get every key added meanwhile
 *                   (writers-add), and the bigger one replaces the first
 *                   once its scan is ready. A failed scan or allocation
 *                   leaves the smaller one in use: it only answers "maybe"
 *                   more often.
 *
 * Threading: add and absent (and the growth and replacement they do) run
 * on the broker's thread, a scan on its own; both set bits with atomic OR
 * (see ldb_cidf.c). */
#ifndef LDB_CIDF_H
#define LDB_CIDF_H

#include "chat_store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest a default filter grows to, in bytes (small-inline,
 * grow-by-rescan). */
#define LDB_CIDF_BYTES (8u << 20)
/* The size of a default filter over a store of at most LDB_CIDF_INLINE
 * keys, in bytes. */
#define LDB_CIDF_MIN_BYTES (64u << 10)
/* The most keys read on the opening thread (small-inline). */
#define LDB_CIDF_INLINE 4096u

typedef struct ldb_cidf ldb_cidf;
struct ldb;

/* Makes a filter over st's 'I' keys and fills it: at once for a store of
 * at most LDB_CIDF_INLINE keys (small-inline), else by a scan on a thread
 * of its own, which waits for ldb_cidf_release first when `hold` (a test
 * hook; a held filter always scans on its thread). Its size is `bytes`
 * (0: by the keys, LDB_CIDF_MIN_BYTES or LDB_CIDF_BYTES; else rounded down
 * to a power of two of at least 64), and it grows up to `max` (0: to
 * LDB_CIDF_BYTES when bytes is 0, else never) (grow-by-rescan). Returns
 * NULL when out of memory (the store then works without one). Free with
 * ldb_cidf_destroy. */
ldb_cidf *ldb_cidf_create(struct ldb *st, size_t bytes, size_t max, bool hold);

/* Stops and joins its scans, then frees the filter. Accepts NULL. Call
 * before the database closes. */
void ldb_cidf_destroy(ldb_cidf *f);

/* The filter's hash of an 'I' key: an append looks its key up and then
 * adds it, and hashes it once for both. */
uint64_t ldb_cidf_hash(const char *k, size_t len);

/* Adds an 'I' key by its hash (writers-add), before the key is written;
 * may start a bigger filter's scan (grow-by-rescan). Accepts NULL. */
void ldb_cidf_add(ldb_cidf *f, uint64_t h);

/* True only when the key of hash h is surely not in the store: the filter
 * is ready and one of its bits is clear. False (ask LevelDB) otherwise.
 * Puts a bigger filter whose scan is ready in place first. */
bool ldb_cidf_absent(ldb_cidf *f, uint64_t h);

/* Test hooks, on a store ldb_open made: let a held scan go, and wait until
 * the scan has ended, and a bigger filter's too (each bounded to about
 * 30 s; the next add or lookup puts a ready one in place). Returns whether
 * the filter in use is ready. */
void ldb_cidf_release(chat_store *cs);
bool ldb_cidf_wait(chat_store *cs);
/* The size in bytes of the filter in use (0: none): a test hook. */
size_t ldb_cidf_bytes(chat_store *cs);

/* The 'I' keys the scan of the filter in use found and its time in ms
 * (both 0 until ready), and the lookups the filters answered: figures for a
 * log line or a stat. */
void ldb_cidf_figures(chat_store *cs, bool *ready, uint64_t *keys, uint64_t *ms, uint64_t *absent);

/* The store_cid_filter_fn of the LevelDB backend (chat_store_cid_filter). */
chat_err ldb_cidf_state(chat_store *cs, chat_cid_filter *out);

#endif
