/* ldb_trim: retention in the LevelDB backend: a group's oldest messages
 * and their cid keys deleted in bounded batches that move 'F' along
 * (invariants kept-range and deletable-keys). Private to store/leveldb.
 */
#ifndef LDB_TRIM_H
#define LDB_TRIM_H

#include "ldb_db.h"

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* One batch: the 'M' records, their 'K' and 'I' keys, and the new 'F'. */
store_trim_fn ldb_trim;

#endif
