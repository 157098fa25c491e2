/* ldb_log: the message log of the LevelDB backend: heads, appends, cid
 * lookups, reads and scans of a group's messages, and the list of groups;
 * it implements those functions of chat_store.h. Private to store/leveldb.
 */
#ifndef LDB_LOG_H
#define LDB_LOG_H

#include "ldb_db.h"

/* Shared by every reading: the group's 'M' keys form one contiguous range,
 * so a seek lands on the first candidate and each step reads the next id. */
chat_err ldb_scan(chat_store *st, const char *group, uint64_t from_id, bool forward,
                  size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx, bool *more);

#endif
