/* chat_store_ops: the operations of chat_store (listing, checking,
 * backing up and repairing a store), for the plugin's admin commands and
 * the offline tool mqchat-store; the part of the public interface that the
 * message path never calls. chat_store.h includes this header at its end,
 * so that `#include "chat_store.h"` gives the whole interface; this header
 * includes chat_store.h for its types, its numbered conventions
 * (ownership, "not found", callbacks, threads, errors) and the promises it
 * names. */
#ifndef CHAT_STORE_OPS_H
#define CHAT_STORE_OPS_H

#include "chat_store.h"

/* Calls fn(ctx, member, joined) for up to max members of group that come
 * after `after` (NULL: from the first), in the order of the membership
 * records' keys: shorter names first, names of one length in byte order.
 * Memberships a group deletion has done away with are skipped (not
 * counted in max). Sets *done when the walk reached the last member (never
 * when fn stopped it). */
typedef int (*chat_member_fn)(void *ctx, const char *member, uint64_t joined);
chat_err chat_store_group_members(chat_store *st, const char *group, const char *after, size_t max,
                                  chat_member_fn fn, void *ctx, bool *done);

/* Calls fn(ctx, device, acked, last_used) for up to max device cursors of
 * member in group (key order, as above); last_used as chat_store_cursor_info
 * gives it. Sets *done as chat_store_group_members does. */
typedef int (*chat_device_fn)(void *ctx, const char *device, uint64_t acked, int64_t last_used);
chat_err chat_store_member_devices(chat_store *st, const char *group, const char *member,
                                   size_t max, chat_device_fn fn, void *ctx, bool *done);

/* Calls fn(ctx, group, 0) for every group whose deletion
 * (chat_store_group_delete) is under way, so that a new run finishes what
 * a stopped one began. There are as many as deletions were begun and not
 * finished. */
chat_err chat_store_deletions(chat_store *st, chat_head_fn fn, void *ctx);

/* For an import: makes a group that has no head yet (head 0, never written)
 * continue after head, with no message kept (first = head + 1), so that
 * the next append is head + 1. CHAT_ECONFLICT when the group has a head. */
chat_err chat_store_group_init(chat_store *st, const char *group, uint64_t head);

/* Verifies the whole store, for the offline tool: for every group, that
 * its ids are dense (a message for every id from first to head, none
 * outside), that head is the highest id stored, that first <= head + 1,
 * that no cursor and no maximum cursor record is above head, and that
 * membership records come in pairs (LevelDB's member-pairs); every record is read,
 * so LevelDB's checksums find damaged blocks too. Calls fn(ctx, group,
 * problem) once per problem found (group "" for a problem of no group) and
 * counts them in *problems; *groups receives the groups checked. A read
 * error is a problem, not a failure: the walk goes on. Slow: reads every
 * key; never on a broker's thread. PostgreSQL checks the whole database
 * from one snapshot (brokers may be writing it meanwhile), in one
 * statement that may take up to an hour; its membership records cannot
 * come unpaired, so it looks instead at memberships begun above head and at
 * cursors above their member's maximum cursor (invariant cursor-forward). */
typedef void (*chat_problem_fn)(void *ctx, const char *group, const char *problem);
chat_err chat_store_check(chat_store *st, chat_problem_fn fn, void *ctx, uint64_t *groups,
                          uint64_t *problems);

/* Maintenance jobs, which run on a thread of the store's own so that the
 * caller's thread is never held: at most one at a time per store.
 *   CHAT_JOB_BACKUP  copies a snapshot of the store, taken when the job
 *                    starts, into a new store at dest: written in
 *                    "<dest>.partial", synced, then renamed to dest, so
 *                    that dest exists only complete. The copy has no run
 *                    marker (it opens as cleanly closed) and a new
 *                    incarnation: a store restored from it forgets what
 *                    came after the backup, and its ids may be given again.
 *   CHAT_JOB_COMPACT chat_store_compact on the job's thread (dest unused).
 * chat_store_close waits for a running job, which stops at its next record
 * (a backup then leaves only its ".partial" directory).
 * PostgreSQL: the job's thread has a connection of its own, and a backup
 * is a LevelDB store too, written from one REPEATABLE READ snapshot taken
 * as that connection begins reading, moments after the start: the live
 * state only (no deletion under way comes along), which mqchat-store reads
 * and a broker on LevelDB opens; close cancels a running VACUUM. */
typedef enum chat_job_kind { CHAT_JOB_NONE = 0, CHAT_JOB_BACKUP, CHAT_JOB_COMPACT } chat_job_kind;

typedef enum chat_job_status {
    CHAT_JOB_IDLE = 0, /* no job since the store was opened */
    CHAT_JOB_RUNNING,
    CHAT_JOB_DONE,
    CHAT_JOB_FAILED
} chat_job_status;

/* What the last job did (chat_store_job_state). */
typedef struct chat_job_state {
    chat_job_kind kind;
    chat_job_status status;
    uint64_t records;                 /* backup: records copied so far */
    int64_t started_ms, finished_ms;  /* by the store's clock; finished 0 while running */
    char path[4096];                  /* backup: dest */
    char error[CHAT_STORE_ERROR_MAX]; /* CHAT_JOB_FAILED: why */
} chat_job_state;

/* Starts a job. CHAT_EINVAL when one is running, when kind is unknown, or
 * for a backup without dest or whose dest (or "<dest>.partial") exists;
 * CHAT_EIO when the thread cannot start. The result comes through
 * chat_store_job_state. */
chat_err chat_store_job_start(chat_store *st, chat_job_kind kind, const char *dest);

/* Copies the state of the running or last job to *out. */
chat_err chat_store_job_state(chat_store *st, chat_job_state *out);

/* For a stopped store (no process has it open): LevelDB's repair, which
 * keeps every record it can read and drops what it cannot, then an open
 * that draws a new incarnation (ids it lost may be given again; clients
 * start over from their cursors) and a clean close. On failure *errmsg
 * (if not NULL) receives a malloc'd reason to free(). backend as in
 * chat_store_opts (NULL: leveldb). */
chat_err chat_store_repair(const char *path, const char *backend, char **errmsg);

#endif
