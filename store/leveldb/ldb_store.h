/* ldb_store: the LevelDB store's open, close, figures and syncs; it
 * implements chat_store_open_opts, chat_store_close, chat_store_stats,
 * chat_store_compact and the chat_store_sync* functions of chat_store.h.
 * Private to store/leveldb.
 */
#ifndef LDB_STORE_H
#define LDB_STORE_H

#include "chat_store.h"

#endif
