/* pg_job: backups and compactions of a PostgreSQL store (see pg_job.h). */
#include "pg_job.h"
#include "ldb_copy.h"
#include "store_job.h"
#include "store_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows per FETCH: envelopes are at most a broker's max_payload and some
 * (64 KiB by default), so a page of messages stays a few MiB. */
#define FETCH_MESSAGES "256"
#define FETCH_ROWS "1000"
/* How long a cancelled statement may take to end before its connection is
 * dropped (the server may be out of reach). */
#define CANCEL_WAIT_MS 5000

/* A job's work on its thread: the job and the thread's own connection. */
struct pg_work {
    store_job *job;
    PGconn *conn;
    int64_t give_up; /* the running statement's end after a cancel request; 0: none asked */
};

/* pg_await's wait for a job's statement: no deadline until close asks the
 * job to stop, then PostgreSQL's cancel request and CANCEL_WAIT_MS. */
static int until_cancelled(void *ctx, PGconn *conn, char *err, size_t cap)
{
    struct pg_work *w = ctx;
    if (store_job_cancelled(w->job) && w->give_up == 0) {
        char why[256];
        PGcancel *c = PQgetCancel(conn);
        if (c) {
            (void)PQcancel(c, why, sizeof(why));
            PQfreeCancel(c);
        }
        w->give_up = pg_mono_ms() + CANCEL_WAIT_MS;
    }
    if (w->give_up && pg_mono_ms() > w->give_up) {
        store_set_text(err, cap, "stopped: the store was closed");
        return -1;
    }
    return 200;
}

/* Runs sql on the job's connection with binary results and waits for its
 * end, with no deadline (a VACUUM or a page of a large table takes what it
 * takes) until close asks the job to stop: then PostgreSQL is asked to
 * cancel the statement, and waited for CANCEL_WAIT_MS at most. Returns the
 * result to PQclear, or NULL with why in err. */
static PGresult *job_exec(struct pg_work *w, const char *sql, const char *what, char *err,
                          size_t cap)
{
    char why[CHAT_STORE_ERROR_MAX];
    pg_await_end end;
    char state[6];
    w->give_up = 0;
    if (!PQsendQueryParams(w->conn, sql, 0, NULL, NULL, NULL, NULL, 1)) {
        store_set_text(err, cap, "%s: ", what);
        pg_put_message(err, cap, PQerrorMessage(w->conn));
        return NULL;
    }
    PGresult *res = pg_await(w->conn, until_cancelled, w, why, sizeof(why), &end, state);
    if (res) {
        return res;
    }
    /* stopped: the connection is left mid-statement, only PQfinish remains */
    if (end == PG_AWAIT_STOPPED || (end == PG_AWAIT_FAILED && store_job_cancelled(w->job))) {
        store_set_text(err, cap, "stopped: the store was closed");
    } else {
        store_set_text(err, cap, "%s: %s", what, why);
    }
    return NULL;
}

/* ------------------------------------------------------------------------
 * Backup
 * --------------------------------------------------------------------- */

/* What a backup reads: one cursor per kind of record, in that order. */
enum part { PART_GROUPS, PART_MESSAGES, PART_MEMBERS, PART_CURSORS, PART_MAX, PART_PUSH };

static const struct {
    const char *what;
    const char *query; /* its rows, as copy_row reads them */
    const char *fetch; /* "FETCH n FROM c" */
} parts[] = {
    [PART_GROUPS] = {"reading the groups",
                     "SELECT grp, head, first FROM chat_groups WHERE head > 0",
                     "FETCH " FETCH_ROWS " FROM c"},
    /* messages first..head only: those below first are deleted or being
     * deleted */
    [PART_MESSAGES] = {"reading the messages",
                       "SELECT mm.grp, mm.id, mm.sender, mm.cid, mm.env FROM chat_messages mm "
                       "JOIN chat_groups gg ON gg.grp = mm.grp WHERE mm.id >= gg.first AND "
                       "mm.id <= gg.head",
                       "FETCH " FETCH_MESSAGES " FROM c"},
    /* while a group is being deleted only the memberships begun since
     * count, and only their cursors: the copy holds no deletion */
    [PART_MEMBERS] = {"reading the memberships",
                      "SELECT mm.grp, mm.member, mm.joined, mm.read_id FROM chat_members mm "
                      "LEFT JOIN chat_groups gg ON gg.grp = mm.grp WHERE gg.del_gen IS NULL OR "
                      "mm.gen = gg.del_gen ORDER BY mm.grp",
                      "FETCH " FETCH_ROWS " FROM c"},
    [PART_CURSORS] = {"reading the cursors",
                      "SELECT cc.grp, cc.member, cc.device, cc.acked, cc.used FROM chat_cursors "
                      "cc LEFT JOIN chat_groups gg ON gg.grp = cc.grp WHERE gg.del_gen IS NULL "
                      "OR EXISTS (SELECT 1 FROM chat_members mm WHERE mm.grp = cc.grp AND "
                      "mm.member = cc.member AND mm.gen = gg.del_gen)",
                      "FETCH " FETCH_ROWS " FROM c"},
    [PART_MAX] = {"reading the maximum cursors",
                  "SELECT x.grp, x.member, x.acked FROM chat_cursor_max x LEFT JOIN chat_groups "
                  "gg ON gg.grp = x.grp WHERE gg.del_gen IS NULL OR EXISTS (SELECT 1 FROM "
                  "chat_members mm WHERE mm.grp = x.grp AND mm.member = x.member AND mm.gen = "
                  "gg.del_gen)",
                  "FETCH " FETCH_ROWS " FROM c"},
    /* member first, as every other part has a name in its first column */
    [PART_PUSH] = {"reading the push registrations",
                   "SELECT member, device, reg, created FROM chat_push",
                   "FETCH " FETCH_ROWS " FROM c"},
};

static const char *text_at(const PGresult *res, int r, int c)
{
    return PQgetisnull(res, r, c) ? NULL : PQgetvalue(res, r, c);
}

static chat_err copy_row(ldb_copy *cp, enum part part, const PGresult *res, int r)
{
    const char *g = PQgetvalue(res, r, 0);
    switch (part) {
    case PART_GROUPS:
        return ldb_copy_group(cp, g, (uint64_t)pg_i64(res, r, 1), (uint64_t)pg_i64(res, r, 2));
    case PART_MESSAGES:
        return ldb_copy_message(cp, g, (uint64_t)pg_i64(res, r, 1), PQgetvalue(res, r, 2),
                                text_at(res, r, 3), PQgetvalue(res, r, 4),
                                (size_t)PQgetlength(res, r, 4));
    case PART_MEMBERS:
        return ldb_copy_member(cp, g, PQgetvalue(res, r, 1), (uint64_t)pg_i64(res, r, 2),
                               (uint64_t)pg_i64(res, r, 3));
    case PART_CURSORS:
        return ldb_copy_cursor(cp, g, PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
                               (uint64_t)pg_i64(res, r, 3), pg_i64(res, r, 4));
    case PART_MAX:
        return ldb_copy_max(cp, g, PQgetvalue(res, r, 1), (uint64_t)pg_i64(res, r, 2));
    case PART_PUSH:
        return ldb_copy_push(cp, g, PQgetvalue(res, r, 1), PQgetvalue(res, r, 2),
                             (size_t)PQgetlength(res, r, 2), pg_i64(res, r, 3));
    }
    return CHAT_EINVAL;
}

/* Reads one part through a cursor, a page at a time, into the copy. */
static bool copy_part(struct pg_work *w, ldb_copy *cp, enum part part, char *err, size_t cap)
{
    char sql[1024];
    snprintf(sql, sizeof(sql), "DECLARE c NO SCROLL CURSOR FOR %s", parts[part].query);
    PGresult *res = job_exec(w, sql, parts[part].what, err, cap);
    if (!res) {
        return false;
    }
    PQclear(res);
    for (;;) {
        if (store_job_cancelled(w->job)) {
            store_set_text(err, cap, "stopped: the store was closed");
            return false;
        }
        res = job_exec(w, parts[part].fetch, parts[part].what, err, cap);
        if (!res) {
            return false;
        }
        int rows = PQntuples(res);
        for (int r = 0; r < rows; r++) {
            chat_err rc = copy_row(cp, part, res, r);
            if (rc != CHAT_OK) {
                store_set_text(err, cap, "%s: %s", parts[part].what,
                               rc == CHAT_EINVAL ? "a name too long for a LevelDB key"
                                                 : "writing the copy failed");
                PQclear(res);
                return false;
            }
        }
        PQclear(res);
        store_job_set_records(w->job, ldb_copy_records(cp));
        if (rows == 0) {
            break;
        }
    }
    res = job_exec(w, "CLOSE c", parts[part].what, err, cap);
    PQclear(res);
    return res != NULL;
}

static void run_backup(struct pg_work *w)
{
    char err[CHAT_STORE_ERROR_MAX] = "";
    ldb_copy *cp = ldb_copy_create(store_job_dest(w->job), err, sizeof(err));
    bool ok = cp != NULL;
    if (ok) {
        /* One snapshot for every part: the copy is the database as one
         * moment left it, whatever brokers commit meanwhile. */
        PGresult *res = job_exec(w, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
                                 "starting the snapshot", err, sizeof(err));
        ok = res != NULL;
        PQclear(res);
    }
    for (int part = PART_GROUPS; ok && part <= PART_PUSH; part++) {
        ok = copy_part(w, cp, (enum part)part, err, sizeof(err));
    }
    if (ok) {
        PGresult *res = job_exec(w, "COMMIT", "ending the snapshot", err, sizeof(err));
        ok = res != NULL;
        PQclear(res);
    }
    if (ok) {
        ok = ldb_copy_finish(cp, err, sizeof(err)) == CHAT_OK;
    }
    if (cp) {
        store_job_set_records(w->job, ldb_copy_records(cp));
    }
    ldb_copy_destroy(cp);
    if (ok) {
        store_job_finish(w->job, NULL);
    } else {
        store_job_finish(w->job, "%s", err);
    }
}

/* ------------------------------------------------------------------------
 * The thread, start and state
 * --------------------------------------------------------------------- */

static void job_run(store_job *job, chat_store *cs, void *taken)
{
    pg *st = pg_of(cs);
    struct pg_work w = {job, NULL, 0};
    char err[CHAT_STORE_ERROR_MAX];
    (void)taken;
    w.conn = pg_connect(st->conninfo, st->sync, false, err, sizeof(err));
    if (!w.conn) {
        store_job_finish(job, "cannot connect to PostgreSQL: %s", err);
        return;
    }
    if (store_job_kind(job) == CHAT_JOB_BACKUP) {
        run_backup(&w);
    } else {
        PGresult *res = job_exec(&w,
                                 "VACUUM (ANALYZE) chat_messages, chat_groups, chat_members, "
                                 "chat_cursors, chat_cursor_max, chat_meta",
                                 "VACUUM", err, sizeof(err));
        if (res) {
            store_job_finish(job, NULL);
        } else {
            store_job_finish(job, "%s", err);
        }
        PQclear(res);
    }
    PQfinish(w.conn);
}

/* Nothing is taken on the owner's thread: the job connects on its own. */
static const store_job_work pg_work = {job_run, NULL, NULL};

chat_err pg_job_start(chat_store *cs, chat_job_kind kind, const char *dest)
{
    return store_job_start(cs, &pg_work, kind, dest);
}
