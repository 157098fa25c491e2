/* pg_conn: one connection to PostgreSQL and the calls on it: connecting
 * and preparing every statement, sending one and awaiting its result with
 * a deadline, and the conversions of parameters and results. Below both
 * pg_db (the handle's writer connection) and pg_watch (the thread's
 * connections), which share it; it knows neither. Private to store/pg.
 *
 * Threading: none of its own; a connection is used by one thread at a
 * time, whichever made it or was handed it. */
#ifndef PG_CONN_H
#define PG_CONN_H

#include "chat_store.h"
#include "pg_schema.h"

#include "pg_lib.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How long one call may wait for its answer before the connection is
 * dropped (the call fails; whether the database committed it is unknown,
 * which a retry with the same cid settles). */
#define PG_CALL_TIMEOUT_MS 5000

/* Opens a connection with conninfo and makes it ready for the ops: its
 * synchronous_commit from sync and every statement prepared. Returns NULL
 * and writes why to err (cap bytes) on failure. Blocking: for open and the
 * watcher thread only. */
PGconn *pg_connect(const char *conninfo, chat_sync sync, bool prepare, char *err, size_t cap);

/* Asks the server that conninfo names (with pg_connect's defaults) whether
 * it accepts connections, without logging in (PQpingParams): PQPING_OK
 * when it answers, even to refuse this user or database;
 * PQPING_REJECT when it is starting up, shutting down or recovering;
 * PQPING_NO_RESPONSE when nothing answers; PQPING_NO_ATTEMPT when
 * conninfo is not a valid connection string. Blocking, at most
 * connect_timeout per host: for open only. */
PGPing pg_ping(const char *conninfo);

/* Whether the server of conn takes writes: false, with why in err (cap
 * bytes), when it is a standby (in_hot_standby) or read-only
 * (default_transaction_read_only), as the server reports them at connect
 * (PostgreSQL 14 on), else as one query answers, or when that query
 * fails. Blocking (one round trip before 14): for open and the watcher
 * thread only. */
bool pg_check_writable(PGconn *conn, char *err, size_t cap);

/* Prepares every statement of pg_statements on conn; false with why in
 * err when one fails (the schema is missing, or of another version). */
bool pg_prepare(PGconn *conn, char *err, size_t cap);

/* Sends stmt with its parameters on conn, asking for binary results
 * (params and lens as pg_call takes them), and waits for its result at
 * most timeout_ms. Returns the result (PGRES_TUPLES_OK or
 * PGRES_COMMAND_OK) to PQclear, or NULL with why in err (cap bytes),
 * *lost set when the connection can no longer be used (broken, timed out
 * with the statement in flight, or on a server that refused a write),
 * *readonly when that refusal is why (SQLSTATE 25006: a standby, or a
 * server made read-only; *lost is set too) and *data when the statement
 * failed on its arguments (SQLSTATE class 22). It never drops conn: that
 * is the caller's to do. */
PGresult *pg_run(PGconn *conn, enum pg_stmt stmt, const char *const *params, const int *lens,
                 int timeout_ms, char *err, size_t cap, bool *lost, bool *data, bool *readonly);

/* pg_run with text parameters and PG_CALL_TIMEOUT_MS, for a connection
 * other than the writer (the watcher's): NULL on failure with why in
 * err. */
PGresult *pg_call_on(PGconn *conn, enum pg_stmt stmt, const char *const *params, char *err,
                     size_t cap);

/* How pg_await ended. */
typedef enum pg_await_end {
    PG_AWAIT_OK,      /* a result */
    PG_AWAIT_STOPPED, /* wait gave up, and wrote why */
    PG_AWAIT_POLL,    /* poll failed: "poll: <why>" */
    PG_AWAIT_FAILED   /* the statement failed: libpq's message */
} pg_await_end;

/* Called before each wait of pg_await: returns the longest wait in ms, or
 * a negative number to stop waiting, having written why to err (cap
 * bytes). It may act on conn (a cancel request). */
typedef int pg_wait_fn(void *ctx, PGconn *conn, char *err, size_t cap);

/* Waits for the answer to the statement just sent on conn (wait decides
 * for how long), takes its first result and drops any others. Returns the
 * result when PGRES_TUPLES_OK or PGRES_COMMAND_OK, to PQclear; else NULL
 * with *end saying why, why in err from its start (libpq's message on one
 * line, as pg_put_message writes it) and, for PG_AWAIT_FAILED, the
 * SQLSTATE in state ("" when none). A connection left with a statement in
 * flight (PG_AWAIT_STOPPED, PG_AWAIT_POLL) is of no more use. */
PGresult *pg_await(PGconn *conn, pg_wait_fn *wait, void *ctx, char *err, size_t cap,
                   pg_await_end *end, char state[6]);

/* Appends libpq's message msg (NULL or empty: "unknown error") to the text
 * in out (cap bytes) as one line: libpq's messages end with a newline and
 * may hold more, which a log line must not. */
void pg_put_message(char *out, size_t cap, const char *msg);

/* chat_mono_us in ms, for deadlines. */
int64_t pg_mono_ms(void);

/* Reads a binary bigint (or a bool, as 0/1) at (row, col); 0 when NULL. */
int64_t pg_i64(const PGresult *res, int row, int col);

/* Writes v in decimal into buf (24 bytes), clamped to 2^63 - 1: ids above
 * do not exist. Returns buf. */
const char *pg_u64(char buf[24], uint64_t v);
const char *pg_i64s(char buf[24], int64_t v);

/* Whether a name fits the store's limit; the ops refuse longer ones. */
bool pg_name_ok(const char *s);

/* A sweep's resume point (the caller's buffer, as chat_store.h's sweeps
 * give it): two bytes of length, then n names, each two bytes of length
 * and its bytes. pg_resume_get reads them into parts (false when the point
 * is empty, the start, or does not hold n names that fit); pg_resume_put
 * writes them. The resume buffer holds n names of the store's limit. */
bool pg_resume_get(const char *resume, char (*parts)[CHAT_STORE_MAX_NAME + 1], int n);
void pg_resume_put(char *resume, const char *const *parts, int n);

#endif
