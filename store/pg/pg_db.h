/* pg_db: the PostgreSQL backend's handle, its writer connection and the
 * calls through it: every op is one prepared statement, sent and awaited
 * with a deadline (pg_conn, below this and pg_watch both), its error
 * mapped to chat_err and recorded. Private to store/pg.
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
 * cache is not used at all. The changes the writer makes are this
 * broker's own: the op that made one has updated the cache itself when it
 * returns (a join or a leave: the one entry; anything wider, or a call
 * that failed and may yet have committed: bumped), so the watcher passes
 * over the notifications of the writer's backend (`writer_pid`), and a
 * broker's own joins, a storm of first subscribes, do not empty its cache
 * for every other member.
 */
#ifndef PG_DB_H
#define PG_DB_H

#include "chat_cache.h"
#include "chat_store.h"
#include "pg_conn.h"
#include "chat_quiet.h"
#include "store_backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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
    atomic_int writer_pid;   /* conn's server process (0: none), see above */
    chat_quiet writer_log;   /* the writer's outages: lost here, remade by the watcher */
    struct pg_watch *watch;
} pg;

static inline pg *pg_of(chat_store *cs)
{
    return (pg *)cs;
}

/* Makes c (NULL: none) the writer, and its server process the one whose
 * membership notifications the watcher passes over. Caller's thread. */
void pg_set_writer(pg *st, PGconn *c);

/* Runs statement stmt with its parameters on the writer, asking for
 * binary results, and waits at most PG_CALL_TIMEOUT_MS. params[i] NULL is
 * SQL NULL; lens NULL: every parameter is text, else lens[i] >= 0 makes
 * parameter i binary of that length (bytea). Returns the result
 * (PGRES_TUPLES_OK or PGRES_COMMAND_OK) to PQclear, or NULL with *rc set
 * and the error recorded (what names the call). A lost connection is
 * dropped, and the watcher asked for a new one. */
PGresult *pg_call(pg *st, enum pg_stmt stmt, const char *const *params, const int *lens,
                  const char *what, chat_err *rc);

/* Whether the writer is there and, as far as its socket tells without a
 * round trip, alive: a connection the server closed (a failover, a
 * terminated backend, haproxy dropping a dead server's sessions) has
 * something to read while idle, its farewell and end of file. Such a
 * writer is dropped (and the watcher asked for a new one), as a failed
 * call drops it, and the answer is false; so is it while there is none.
 * A server that vanished without a word (no FIN) is found by the next
 * call's deadline instead. Broker's thread; no database call. */
bool pg_writer_ready(pg *st);

/* pg_call with a deadline of timeout_ms instead: for the calls of a tool
 * that read the whole database (chat_store_check), never the broker's. */
PGresult *pg_call_long(pg *st, enum pg_stmt stmt, const char *const *params, const int *lens,
                       int timeout_ms, const char *what, chat_err *rc);

#endif
