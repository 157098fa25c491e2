/* ldb_job: the LevelDB backend's maintenance jobs (a backup from a
 * snapshot, a full compaction) on a thread of their own, and the repair of
 * a stopped store. Private to store/leveldb.
 *
 * The thread, its state and the checks every backend shares are
 * store_job's; this file holds only LevelDB's work.
 *
 * Threading: the job's thread reads LevelDB (through a snapshot, which
 * LevelDB lets any thread read while the owner's thread writes) and writes
 * only the backup's own new database; it shares with the owner's thread
 * only the job's state, under the job's mutex, and the cancel flag.
 */
#ifndef LDB_JOB_H
#define LDB_JOB_H

#include "ldb_db.h"

/* The job_start op (store_backend.h), with the contract of
 * chat_store_job_start: takes the snapshot (backup) on the caller's
 * thread, then starts the thread; a finished job's thread is joined first.
 * The job_state op and the stop at close are store_job's. */
store_job_start_fn ldb_job_start;

/* chat_store_repair for LevelDB: holds the store's LOCK file (so that a
 * running broker's store is refused), runs RepairDB, then opens the store,
 * writes a new incarnation (synced) and closes it cleanly. */
store_repair_fn ldb_repair;

#endif
