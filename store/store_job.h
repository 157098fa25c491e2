/* store_job: the machinery of a backend's maintenance job (a backup, a
 * compaction), the same for every backend: one job at a time on a thread
 * of its own, its state under a mutex, a cancel flag that close raises,
 * the checks of a backup's destination, and the start, state and stop that
 * the ops of chat_store.h need. A backend hands over only its work (what
 * runs on the thread) and, when its work needs something taken on the
 * owner's thread (LevelDB's snapshot), how to take it and give it back.
 * Private to store/.
 *
 * Ownership: the job lives in its store's common part (chat_store.job,
 * store_backend.h; NULL until the first job); store_job_start replaces a
 * finished job there, store_job_stop empties it. The job reads its store,
 * which outlives it: a backend's close calls store_job_stop first.
 *
 * Threading: the work runs on the job's thread and talks to the owner's
 * thread only through the functions below marked "job's thread"; the
 * others are for the owner's thread (the one that calls the store).
 */
#ifndef STORE_JOB_H
#define STORE_JOB_H

#include "chat_store.h"
#include "store_backend.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct store_job store_job;

/* A backend's part of a job. cs is the store the job runs for (the
 * backend's handle begins with it); taken is what take returned. */
typedef struct store_job_work {
    /* The work, on the job's thread; it must end with store_job_finish. */
    void (*run)(store_job *job, chat_store *cs, void *taken);
    /* On the owner's thread, once the checks have passed and before the
     * thread starts: what the job needs taken there, or NULL. May be NULL. */
    void *(*take)(chat_store *cs, chat_job_kind kind);
    /* On the owner's thread, when the job is freed or its thread could not
     * start: gives back what take returned (called only when not NULL).
     * May be NULL. */
    void (*give_back)(chat_store *cs, void *taken);
} store_job_work;

/* Starts a job of kind for cs with work: the job_start op's contract
 * (chat_store_job_start): CHAT_EINVAL "a backup/compaction is under way"
 * while cs's job runs, CHAT_EINVAL for a backup's dest too long or already
 * there (or its "<dest>.partial"), CHAT_ENOMEM, CHAT_EIO when the thread
 * cannot start; the text goes to cs->last_err. A finished job is joined
 * and freed first. */
chat_err store_job_start(chat_store *cs, const store_job_work *work, chat_job_kind kind,
                         const char *dest);

/* The job_state op of every backend: the state of cs's job (none yet: all
 * zero). Returns CHAT_OK. */
store_job_state_fn store_job_state;

/* For close: raises the cancel flag of cs's job, waits for its thread,
 * gives back what it took and frees it. Accepts a store without one. */
void store_job_stop(chat_store *cs);

/* Job's thread: the job's end, its status and, on failure (fmt not NULL),
 * why. Called once, last. */
void store_job_finish(store_job *job, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Job's thread: the records a backup has copied so far. */
void store_job_set_records(store_job *job, uint64_t records);

/* Job's thread: whether close asks the job to stop. */
bool store_job_cancelled(store_job *job);

/* The job's kind, a backup's dest and "<dest>.partial" (set at start,
 * never changed: any thread). */
chat_job_kind store_job_kind(const store_job *job);
const char *store_job_dest(const store_job *job);
const char *store_job_partial(const store_job *job);

#endif
