/* pg_job: the PostgreSQL backend's maintenance jobs, each on a thread of
 * its own with a connection of its own, so that the broker's thread and
 * its writer connection are never held:
 *   - CHAT_JOB_COMPACT: VACUUM (ANALYZE) of the chat tables. Plain VACUUM
 *     takes no lock that stops a publish (VACUUM FULL would lock every
 *     table for its whole run); it makes the room of deleted rows
 *     reusable and refreshes the planner's figures after a large deletion,
 *     which is what an operator asks of a compaction while brokers run.
 *   - CHAT_JOB_BACKUP: a LevelDB store at dest (ldb_copy), read from one
 *     REPEATABLE READ READ ONLY transaction, so from one snapshot of the
 *     database taken as the job's connection starts reading: the live
 *     state only (messages first..head, live memberships with their
 *     cursors, maximum cursors), as the LevelDB backend would hold it.
 *     mqchat-store reads it and a broker on LevelDB opens it.
 * Private to store/pg.
 *
 * The thread, its state and the checks every backend shares are
 * store_job's; this file holds only PostgreSQL's work.
 *
 * Threading: the job's thread shares with the caller's only the job's
 * state, under the job's mutex, and the cancel flag; it reads the handle's
 * conninfo and sync, which never change.
 */
#ifndef PG_JOB_H
#define PG_JOB_H

#include "pg_db.h"

/* The job_start op (store_backend.h), with the contract of
 * chat_store_job_start: checks dest on the caller's thread (stat only) and
 * starts the thread, which connects: the caller never waits for the
 * database. A finished job's thread is joined first. The job_state op and
 * the stop at close (a backup stops at its next page of rows, a VACUUM
 * through PostgreSQL's cancel request) are store_job's. */
store_job_start_fn pg_job_start;

#endif
