/* ldb_syncer: the background fsync of CHAT_SYNC_BATCH, on a thread of the
 * store's own (struct ldb_syncer in ldb_syncer.c says how it syncs), and
 * the sync of every log at a clean close. Private to store/leveldb.
 *
 * Threading: start, stop, request and state are called from the broker's
 * thread; the syncer thread touches only its own fields, LevelDB (for the
 * fallback's synced empty write) and the store's `failed` latch.
 */
#ifndef LDB_SYNCER_H
#define LDB_SYNCER_H

#include "ldb_db.h"

/* fdatasyncs every write-ahead log in the store's directory and the
 * directory itself; false when one could not be synced. */
bool ldb_sync_all_logs(const char *path);

/* Starts the syncer thread of st (st->sync_thread); CHAT_ENOMEM when it
 * cannot. */
chat_err ldb_syncer_start(ldb *st);

/* Stops the thread after the round under way and frees it; nothing when
 * st has none. */
void ldb_syncer_stop(ldb *st);

/* Writes why a background sync failed to out ("an unknown error" when it
 * knows none): the reason of a refusal after the latch. */
void ldb_syncer_error(ldb *st, char *out, size_t cap);

/* Asks the syncer thread for a round and returns at once. */
void ldb_syncer_request(struct ldb_syncer *sy);

/* Copies what the syncer has done to *out. */
void ldb_syncer_state(struct ldb_syncer *sy, chat_sync_state *out);

#endif
