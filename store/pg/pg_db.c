/* pg_db: the PostgreSQL backend's handle and its calls on the writer
 * connection (see pg_db.h). */
#include "pg_db.h"
#include "pg_watch.h"
#include "store_text.h"

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
    bool lost = false, data = false;
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
        pg_run(st->conn, stmt, params, lens, timeout_ms, err, sizeof(err), &lost, &data);
    if (res) {
        *rc = CHAT_OK;
        return res;
    }
    store_set_text(st->base.last_err, sizeof(st->base.last_err), "%s: %s", what, err);
    *rc = data ? CHAT_EINVAL : CHAT_EIO;
    if (lost) {
        PQfinish(st->conn);
        pg_set_writer(st, NULL);
        pg_watch_want_writer(st);
    }
    return NULL;
}
