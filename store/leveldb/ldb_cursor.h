/* ldb_cursor: device cursors and members' maximum cursors in the LevelDB
 * backend ('C' and 'X' records, invariant cursor-forward): reads, advances, the start
 * of a new device, last-use stamps and device expiry. Private to
 * store/leveldb.
 */
#ifndef LDB_CURSOR_H
#define LDB_CURSOR_H

#include "ldb_db.h"

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* 'C' through the cache. */
store_cursor_info_fn ldb_cursor_info;

/* 'X', or for a store from before 'X' the highest of the member's 'C'
 * records. */
store_cursor_max_fn ldb_cursor_max;

/* 'C' and, when it moves, 'X' in one batch (invariant cursor-forward), as
 * ldb_cursor_advance_add makes it. */
store_cursor_advance_fn ldb_cursor_advance;

/* What moves device's cursor in group forward to id (clamped to head), as
 * puts added to wb, for a caller that writes more in the same batch (a
 * read marker). *now receives the cursor as it is once wb is written; *put
 * whether anything was added (nothing to write: the cursor is at id
 * already and its last use is of today). On error wb may hold part of it:
 * the caller drops it. */
chat_err ldb_cursor_advance_add(ldb *st, const char *group, const char *member, const char *device,
                                uint64_t id, leveldb_writebatch_t *wb, uint64_t *now, bool *put);

/* Rewrites 'C' when the day of its last use changed. */
store_cursor_touch_fn ldb_cursor_touch;

/* 'C' if any, else 'X' or 'J': a constant number of lookups. */
store_cursor_start_fn ldb_cursor_start;

/* One iterator over the 'C' records from the resume key, which is the
 * last key it looked at. */
store_expire_devices_fn ldb_expire_devices;

#endif
