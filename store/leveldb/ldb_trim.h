/* ldb_trim: retention, chat_store_trim of chat_store.h: a group's oldest
 * messages and their cid keys deleted in bounded batches. Private to
 * store/leveldb.
 */
#ifndef LDB_TRIM_H
#define LDB_TRIM_H

#include "ldb_db.h"

#endif
