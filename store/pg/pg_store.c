/* pg_store: the PostgreSQL backend's constructor and ops table, and the ops
 * of the whole store (see pg_store.h and docs/postgresql.md). */
#include "pg_store.h"
#include "pg_admin.h"
#include "pg_db.h"
#include "pg_job.h"
#include "store_job.h"
#include "pg_log.h"
#include "pg_change.h"
#include "pg_member.h"
#include "pg_push.h"
#include "pg_read.h"
#include "pg_watch.h"
#include "store_text.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One statement with PG_CALL_TIMEOUT_MS like every broker call: a count
 * over chat_groups (one row a group) and pg_total_relation_size of the six
 * tables (a stat of their files, no scan); the plugin asks once a
 * sys_interval, and for the admin command stats. */
static chat_err op_stats(chat_store *cs, uint64_t *groups, uint64_t *bytes)
{
    chat_err rc;
    PGresult *res = pg_call(pg_of(cs), PG_STMT_STATS, NULL, NULL, "reading figures", &rc);
    if (!res) {
        return rc;
    }
    if (groups) {
        *groups = (uint64_t)pg_i64(res, 0, 0);
    }
    if (bytes) {
        *bytes = (uint64_t)pg_i64(res, 0, 1);
    }
    PQclear(res);
    return CHAT_OK;
}

/* VACUUM: what compaction is to LevelDB, dead rows given back (pg_job.h
 * says why not VACUUM FULL); here on the caller's thread, for tools. */
static chat_err op_compact(chat_store *cs)
{
    pg *st = pg_of(cs);
    chat_err rc = CHAT_EIO;
    if (!st->conn) {
        pg_set_writer(st, pg_watch_take_writer(st));
    }
    if (st->conn) {
        PGresult *res =
            PQexec(st->conn, "VACUUM (ANALYZE) chat_messages, chat_groups, chat_members, "
                             "chat_cursors, chat_cursor_max, chat_meta");
        rc = PQresultStatus(res) == PGRES_COMMAND_OK ? CHAT_OK : CHAT_EIO;
        if (rc != CHAT_OK) {
            store_set_text(st->base.last_err, sizeof(st->base.last_err), "VACUUM: %s",
                           PQresultErrorMessage(res));
        }
        PQclear(res);
    }
    return rc;
}

/* Every commit is as durable as synchronous_commit makes it when it
 * returns: there is nothing left to sync. */
static chat_err op_sync(chat_store *cs)
{
    (void)cs;
    return CHAT_OK;
}

static chat_err op_sync_state(chat_store *cs, chat_sync_state *out)
{
    (void)cs, (void)out;
    return CHAT_EINVAL;
}

static void op_close(chat_store *cs)
{
    pg *st = pg_of(cs);
    store_job_stop(cs);
    pg_watch_stop(st);
    PQfinish(st->conn);
    chat_quiet_destroy(&st->writer_log);
    chat_cache_destroy(st->members);
    free(st->conninfo);
    free(st);
}

static bool op_available(chat_store *cs)
{
    return pg_writer_ready(pg_of(cs));
}

static const chat_store_ops pg_ops = {
    .name = PG_NAME,
    .close = op_close,
    .stats = op_stats,
    .compact = op_compact,
    .sync = op_sync,
    .sync_async = op_sync,
    .sync_state = op_sync_state,
    .head = pg_head,
    .first = pg_first,
    .append = pg_append,
    .cid_find = pg_cid_find,
    .get = pg_get,
    .change = pg_change,
    .cid_of = pg_cid_of,
    .scan = pg_scan,
    .scan_page = pg_scan_page,
    .trim = pg_trim,
    .groups = pg_groups,
    .cursor_info = pg_cursor_info,
    .cursor_advance = pg_cursor_advance,
    .cursor_max = pg_cursor_max,
    .cursor_start = pg_cursor_start,
    .cursor_open = pg_cursor_open,
    .cursor_touch = pg_cursor_touch,
    .expire_devices = pg_expire_devices,
    .member_add = pg_member_add,
    .member_join = pg_member_join,
    .member_get = pg_member_get,
    .member_remove = pg_member_remove,
    .member_groups = pg_member_groups,
    .group_delete = pg_group_delete,
    .member_count = pg_member_count,
    .read_advance = pg_read_advance,
    .read_get = pg_read_get,
    .reads = pg_reads,
    .push_put = pg_push_put,
    .push_get = pg_push_get,
    .push_remove = pg_push_remove,
    .push_list = pg_push_list,
    .push_members = pg_push_members,
    .push_expire = pg_push_expire,
    .group_members = pg_group_members,
    .member_devices = pg_member_devices,
    .deletions = pg_deletions,
    .group_init = pg_group_init,
    .check = pg_check,
    .job_start = pg_job_start,
    .job_state = store_job_state,
    .follow = pg_follow,
    .feed = pg_feed,
    .available = op_available,
    .shared = true,
};

/* A random mark for this handle's messages (63 bits, positive). */
static int64_t new_origin(void)
{
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
        v = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&v;
    }
    if (fd >= 0) {
        close(fd);
    }
    v &= (uint64_t)INT64_MAX;
    return v ? (int64_t)v : 1;
}

/* ===========================================================================
 * Open: what passes by itself, and what an operator must mend
 *
 * An open that fails because the database cannot be used now returns
 * CHAT_EUNAVAIL (the plugin then starts without its store and retries):
 * nothing answers at the address (refused, or no answer within a second:
 * a timeout), the server is starting up, shutting down or recovering
 * (pg_ping), it takes no writes (a standby, or
 * default_transaction_read_only), or the connection was lost or the server
 * refused for a passing reason during the schema's check (SQLSTATE classes
 * 08 connection, 53 resources, 40 rollback: another broker creating the
 * schema at the same instant; 57P01-57P03 shutdown, 25006 read-only). Any
 * other failure is CHAT_EIO, which retrying would not mend: a connection
 * string libpq cannot read, a server that answers but refuses this user or
 * database (authentication, a database that does not exist, too many
 * connections: an operator's matter, seen at once when the broker refuses
 * to start), a schema of another version or a foreign one, a permission
 * denied on it, libpq missing.
 * ========================================================================= */

/* Whether the SQLSTATE of a failed statement is one that passes by itself. */
static bool passing_state(const char *state)
{
    if (!state || strlen(state) != 5) {
        return false;
    }
    return !strncmp(state, "08", 2) || !strncmp(state, "53", 2) || !strncmp(state, "40", 2) ||
           !strcmp(state, "57P01") || !strcmp(state, "57P02") || !strcmp(state, "57P03") ||
           !strcmp(state, "25006");
}

/* How a failed statement of the open (res, on st's connection) counts:
 * CHAT_EUNAVAIL when it passes by itself (its SQLSTATE, or a connection
 * lost under it), else CHAT_EIO. */
static chat_err open_failure(const pg *st, const PGresult *res)
{
    if (PQstatus(st->conn) != CONNECTION_OK) {
        return CHAT_EUNAVAIL;
    }
    return res && passing_state(PQresultErrorField(res, PG_DIAG_SQLSTATE)) ? CHAT_EUNAVAIL
                                                                           : CHAT_EIO;
}

/* Creates the schema when missing, checks its version, reads the
 * incarnation, prepares the statements. On failure CHAT_EUNAVAIL or
 * CHAT_EIO as open_failure says, or CHAT_ENOMEM. */
static chat_err setup(pg *st, char **errmsg)
{
    char err[CHAT_STORE_ERROR_MAX];
    size_t len = 1;
    for (size_t i = 0; pg_schema_sql[i]; i++) {
        len += strlen(pg_schema_sql[i]);
    }
    char *sql = malloc(len);
    if (!sql) {
        return CHAT_ENOMEM;
    }
    sql[0] = '\0';
    for (size_t i = 0; pg_schema_sql[i]; i++) {
        strcat(sql, pg_schema_sql[i]);
    }
    PGresult *res = PQexec(st->conn, sql);
    free(sql);
    bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    chat_err rc = ok ? CHAT_OK : open_failure(st, res);
    if (!ok) {
        store_open_error(errmsg, "creating the schema", PQresultErrorMessage(res));
    }
    PQclear(res);
    if (!ok) {
        return rc;
    }
    res = PQexec(st->conn, "SELECT (SELECT value FROM chat_meta WHERE name = 'schema'), "
                           "(SELECT value FROM chat_meta WHERE name = 'incarnation')");
    ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0) &&
         !PQgetisnull(res, 0, 1);
    if (!ok) {
        rc = PQresultStatus(res) == PGRES_TUPLES_OK ? CHAT_EIO : open_failure(st, res);
        store_open_error(errmsg, "reading chat_meta", PQresultErrorMessage(res));
        PQclear(res);
        return rc;
    }
    if (strcmp(PQgetvalue(res, 0, 0), PG_SCHEMA_VERSION) != 0) {
        store_open_error(errmsg, "the database's chat schema has another version",
                         PQgetvalue(res, 0, 0));
        PQclear(res);
        return CHAT_EIO;
    }
    snprintf(st->base.incarnation, sizeof(st->base.incarnation), "%s", PQgetvalue(res, 0, 1));
    PQclear(res);
    if (!pg_prepare(st->conn, err, sizeof(err))) {
        store_open_error(errmsg, "preparing statements", err);
        return open_failure(st, NULL);
    }
    return CHAT_OK;
}

chat_err pg_open(const char *path, const chat_store_opts *opts, chat_store **out, char **errmsg)
{
    char err[CHAT_STORE_ERROR_MAX];
    const char *why = NULL;
    if (!pg_lib_load(&why)) {
        store_open_error(errmsg, "PostgreSQL store", why);
        return CHAT_EIO;
    }
    pg *st = calloc(1, sizeof(*st));
    chat_err rc = CHAT_ENOMEM;
    if (!st) {
        return CHAT_ENOMEM;
    }
    store_base_init(&st->base, &pg_ops);
    chat_quiet_init(&st->writer_log, "PostgreSQL writer", NULL, NULL, NULL);
    st->sync = opts->sync;
    st->origin = new_origin();
    atomic_init(&st->member_gen, 1);
    atomic_init(&st->member_live, false);
    atomic_init(&st->writer_pid, 0);
    st->conninfo = strdup(path);
    if (!st->conninfo) {
        goto fail;
    }
    int64_t t0 = pg_mono_ms();
    pg_set_writer(st, pg_connect(st->conninfo, st->sync, false, err, sizeof(err)));
    if (!st->conn) {
        /* Whether retrying may mend it (the note above). A failure that
         * took a second or more is a server that did not answer in time:
         * a refusal comes within a round trip, and a ping after a timeout
         * would wait as long again (a plugin cleanup waits for this open). */
        PGPing ping = pg_mono_ms() - t0 >= 1000 ? PQPING_NO_RESPONSE : pg_ping(st->conninfo);
        rc = ping == PQPING_OK || ping == PQPING_NO_ATTEMPT ? CHAT_EIO : CHAT_EUNAVAIL;
    }
    if (!st->conn) {
        store_open_error(errmsg, "cannot connect to PostgreSQL", err);
        goto fail;
    }
    /* A standby would fail at the schema's first statement: say why. */
    if (!pg_check_writable(st->conn, err, sizeof(err))) {
        store_open_error(errmsg, "cannot write to PostgreSQL", err);
        rc = CHAT_EUNAVAIL;
        goto fail;
    }
    rc = setup(st, errmsg);
    if (rc != CHAT_OK) {
        goto fail;
    }
    rc = pg_watch_start(st);
    if (rc != CHAT_OK) {
        goto fail;
    }
    *out = &st->base;
    return CHAT_OK;

fail:
    op_close(&st->base);
    return rc;
}
