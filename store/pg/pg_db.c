/* pg_db: the PostgreSQL backend's handle and its calls on the writer
 * connection (see pg_db.h). */
#include "pg_db.h"
#include "pg_watch.h"
#include "store_text.h"

#include <poll.h>

void pg_set_writer(pg *st, PGconn *c)
{
    st->conn = c;
    atomic_store(&st->writer_pid, c ? PQbackendPID(c) : 0);
}

PGresult *pg_call(pg *st, enum pg_stmt stmt, const char *const *params, const int *lens,
                  const char *what, chat_err *rc)
{
    return pg_call_long(st, stmt, params, lens, PG_CALL_TIMEOUT_MS, what, rc);
}

PGresult *pg_call_long(pg *st, enum pg_stmt stmt, const char *const *params, const int *lens,
                       int timeout_ms, const char *what, chat_err *rc)
{
    char err[CHAT_STORE_ERROR_MAX];
    bool lost = false, data = false, readonly = false;
    if (!st->conn) {
        pg_set_writer(st, pg_watch_take_writer(st));
    }
    if (!st->conn) {
        store_set_text(st->base.last_err, sizeof(st->base.last_err),
                       "%s: not connected to PostgreSQL (reconnecting)", what);
        *rc = CHAT_EIO;
        return NULL;
    }
    PGresult *res =
        pg_run(st->conn, stmt, params, lens, timeout_ms, err, sizeof(err), &lost, &data, &readonly);
    if (res) {
        *rc = CHAT_OK;
        return res;
    }
    store_set_text(st->base.last_err, sizeof(st->base.last_err), "%s: %s%s", what, err,
                   readonly ? " (the server does not take writes: reconnecting)" : "");
    *rc = data ? CHAT_EINVAL : CHAT_EIO;
    if (lost) {
        /* A writer on a read-only server is no writer: dropped like a
         * broken one, nothing was written, and the watcher's next attempt
         * (pg_backoff's pace) takes only a server that takes writes. */
        chat_quiet_fail(&st->writer_log, "PostgreSQL writer %s: %s",
                        readonly ? "on a read-only server" : "lost", err);
        PQfinish(st->conn);
        pg_set_writer(st, NULL);
        pg_watch_want_writer(st);
    }
    return NULL;
}

bool pg_writer_ready(pg *st)
{
    if (!st->conn) {
        pg_set_writer(st, pg_watch_take_writer(st));
    }
    if (!st->conn) {
        return false;
    }
    /* An idle connection is sent nothing unasked but its end: what can be
     * read is read, a few times at most, until the socket is quiet again
     * (alive) or libpq finds the end (dropped). */
    for (int i = 0; i < 4; i++) {
        struct pollfd p = {PQsocket(st->conn), POLLIN, 0};
        if (p.fd < 0) {
            break;
        }
        if (poll(&p, 1, 0) <= 0) {
            return true;
        }
        if (!PQconsumeInput(st->conn) || PQstatus(st->conn) != CONNECTION_OK) {
            break;
        }
    }
    if (PQstatus(st->conn) == CONNECTION_OK && PQsocket(st->conn) >= 0) {
        return true; /* still talking after four reads: not an end */
    }
    char err[CHAT_STORE_ERROR_MAX];
    err[0] = '\0';
    pg_put_message(err, sizeof(err), PQerrorMessage(st->conn));
    chat_quiet_fail(&st->writer_log, "PostgreSQL writer lost: %s", err);
    PQfinish(st->conn);
    pg_set_writer(st, NULL);
    pg_watch_want_writer(st);
    return false;
}
