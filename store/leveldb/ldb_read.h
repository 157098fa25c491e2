/* ldb_read: read markers in the LevelDB backend ('R' records, invariant
 * read-markers): moving one forward with the device ack it implies, reading one, the
 * walk over a group's members in name order that receipts page through,
 * and the one-time upgrade that gives a store from before read markers its
 * 'R' and 'N' records. Private to store/leveldb.
 */
#ifndef LDB_READ_H
#define LDB_READ_H

#include "ldb_db.h"

/* What ldb_read_walk hands over of one member: its name, its read marker,
 * whether its membership counts (live; while the group is being deleted,
 * the deletion's walk removes the markers of the memberships it did away
 * with a step at a time, and until then they are met not live) and, when
 * it does, the id at which it joined. Sets *stop to end the walk; an
 * error ends it too and is the walk's. */
typedef chat_err ldb_read_visit_fn(void *ctx, const char *member, uint64_t marker, bool live,
                                   uint64_t joined, bool *stop);

/* Walks group's 'R' records, the members in name order (invariant
 * read-markers), from the first after `after` (NULL: from the first),
 * with one iterator: what receipts page through and pushes walk. */
chat_err ldb_read_walk(ldb *st, const char *group, const char *after, ldb_read_visit_fn *fn,
                       void *ctx);

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* The membership and the 'R' record through the cache; 'R' and what
 * ldb_cursor_advance_add puts ('C', 'X') in one batch. */
store_read_advance_fn ldb_read_advance;

/* The 'R' record through the cache; 0 without one. */
store_read_get_fn ldb_read_get;

/* ldb_read_walk, passing over the memberships that no longer count. */
store_reads_fn ldb_reads;

/* At open, before anything else is served: when the '#receipts' record is
 * missing (a new store, or one from before read markers), walks every 'J'
 * record once, writing a read marker of 0 for each membership that counts
 * and each group's member count, in batches, then the '#receipts' record.
 * A run cut short does it again at the next open. On failure *errmsg (when
 * errmsg is not NULL) receives a malloc'd reason. */
chat_err ldb_read_upgrade(ldb *st, char **errmsg);

#endif
