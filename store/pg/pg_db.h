/* pg_db: the PostgreSQL backend's handle, its connection and the calls
 * through it: every op is one prepared statement, sent and awaited with a
 * deadline, its error mapped to chat_err and recorded. Private to store/pg.
 *
 * Connections: `conn`, the writer, belongs to the caller's thread (the
 * broker's) and serves every op. When it breaks (a failover, a restart of
 * the database), the call fails with CHAT_EIO and drops it; the watcher
 * thread (pg_watch) connects a new one and hands it over, so that the
 * broker's thread never waits for a connection to be made: until then
 * every call fails at once with CHAT_EIO, "not connected".
 *
 * Caches: there are none of heads, cursors or cids, which other brokers
 * write. Memberships, read on every delivery, are cached per broker and
 * invalidated: every change of one notifies PG_CHANNEL_INVAL at commit,
 * and the watcher then bumps `member_gen`, which empties the cache at the
 * next lookup; while the watcher is not listening (member_live false) the
 * cache is not used at all.
 */
#ifndef PG_DB_H
#define PG_DB_H

#include "chat_cache.h"
#include "chat_store.h"
#include "pg_schema.h"
#include "store_backend.h"

#include "pg_lib.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* How long one call may wait for its answer before the connection is
 * dropped (the call fails; whether the database committed it is unknown,
 * which a retry with the same cid settles). */
#define PG_CALL_TIMEOUT_MS 5000

struct pg_watch; /* pg_watch.c */

typedef struct pg {
    chat_store base; /* first: a chat_store * of this backend is a pg * */
    char *conninfo;
    chat_sync sync;
    PGconn *conn;         /* the writer: the caller's thread's, NULL while reconnecting */
    int64_t origin;       /* this handle's mark on the messages it stores (random) */
    chat_cache *members;  /* (group, member) -> joined, see above */
    uint64_t members_gen; /* member_gen when the cache was last emptied */
    atomic_uint_fast64_t member_gen;
    atomic_bool member_live; /* the watcher listens: the cache may be used */
    struct pg_watch *watch;
} pg;

static inline pg *pg_of(chat_store *cs)
{
    return (pg *)cs;
}

/* Opens a connection with conninfo and makes it ready for the ops: its
 * synchronous_commit from sync and every statement prepared. Returns NULL
 * and writes why to err (cap bytes) on failure. Blocking: for open and the
 * watcher thread only. */
PGconn *pg_connect(const char *conninfo, chat_sync sync, bool prepare, char *err, size_t cap);

/* Prepares every statement of pg_statements on conn; false with why in
 * err when one fails (the schema is missing, or of another version). */
bool pg_prepare(PGconn *conn, char *err, size_t cap);

/* Runs statement stmt with its parameters on the writer, asking for
 * binary results, and waits at most PG_CALL_TIMEOUT_MS. params[i] NULL is
 * SQL NULL; lens NULL: every parameter is text, else lens[i] >= 0 makes
 * parameter i binary of that length (bytea). Returns the result
 * (PGRES_TUPLES_OK or PGRES_COMMAND_OK) to PQclear, or NULL with *rc set
 * and the error recorded (what names the call). A lost connection is
 * dropped, and the watcher asked for a new one. */
PGresult *pg_call(pg *st, enum pg_stmt stmt, const char *const *params, const int *lens,
                  const char *what, chat_err *rc);

/* pg_call with a deadline of timeout_ms instead: for the calls of a tool
 * that read the whole database (chat_store_check), never the broker's. */
PGresult *pg_call_long(pg *st, enum pg_stmt stmt, const char *const *params, const int *lens,
                       int timeout_ms, const char *what, chat_err *rc);

/* The same on another connection (the watcher's), which it does not drop:
 * NULL on failure with why in err. */
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

/* CLOCK_MONOTONIC in ms, for deadlines. */
int64_t pg_mono_ms(void);

/* Reads a binary bigint (or a bool, as 0/1) at (row, col); 0 when NULL. */
int64_t pg_i64(const PGresult *res, int row, int col);

/* Writes v in decimal into buf (24 bytes), clamped to 2^63 - 1: ids above
 * do not exist. Returns buf. */
const char *pg_u64(char buf[24], uint64_t v);
const char *pg_i64s(char buf[24], int64_t v);

/* Whether a name fits the store's limit; the ops refuse longer ones. */
bool pg_name_ok(const char *s);

#endif
