/* ldb_store: the LevelDB backend's constructor, and the ops that concern
 * the whole store: close, figures, compaction, syncs. Private to store/.
 */
#ifndef LDB_STORE_H
#define LDB_STORE_H

#include "store_backend.h"

/* The name chat_store_opts.backend gives the LevelDB backend by. */
#define LDB_NAME "leveldb"

/* The LevelDB backend's constructor (store_open_fn): makes the directory
 * if missing, opens LevelDB in it, starts a run (invariant incarnation-first) and, with
 * CHAT_SYNC_BATCH, the syncer thread. */
store_open_fn ldb_open;

#endif
