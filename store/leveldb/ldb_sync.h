/* ldb_sync: the background fsync of CHAT_SYNC_BATCH, on a thread of the
 * store's own (see struct ldb_syncer in ldb_sync.c for how it syncs), and
 * the sync of every log at a clean close. Private to store/leveldb.
 *
 * Threading: start, stop, request and state are called from the broker's
 * thread; the syncer thread touches only its own fields, LevelDB (for the
 * fallback's synced empty write) and the store's `failed` latch.
 */
#ifndef LDB_SYNC_H
#define LDB_SYNC_H

#include "ldb_db.h"

/* fdatasyncs every write-ahead log in the store's directory and the
 * directory itself; false when one could not be synced. */
bool ldb_sync_all_logs(const char *path);

void ldb_syncer_stop(chat_store *st);

chat_err ldb_syncer_start(chat_store *st);

void ldb_syncer_error(chat_store *st, char *out, size_t cap);

/* Asks the syncer thread for a round and returns at once. */
void ldb_syncer_request(struct ldb_syncer *sy);

/* Copies what the syncer has done to *out. */
void ldb_syncer_state(struct ldb_syncer *sy, chat_sync_state *out);

#endif
