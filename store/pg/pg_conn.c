/* pg_conn: one connection to PostgreSQL and the calls on it (see
 * pg_conn.h). */
#include "pg_conn.h"
#include "chat_mono.h"
#include "store_text.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

int64_t pg_mono_ms(void)
{
    return chat_mono_us() / 1000;
}

void pg_put_message(char *out, size_t cap, const char *msg)
{
    store_put_text(out, cap, "%s", msg && msg[0] ? msg : "unknown error");
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ')) {
        out[--n] = '\0';
    }
    for (char *p = out; *p; p++) {
        if (*p == '\n') {
            *p = ' ';
        }
    }
}

/* Defaults that the operator's connection string overrides (it comes
 * after them, as dbname): a dead host must not hold a connection attempt
 * for ever. */
static const char *const connect_keys[] = {"connect_timeout", "application_name", "dbname", NULL};
#define CONNECT_VALS(conninfo)                                                                     \
    {                                                                                              \
        "5", "mosquitto-chat", (conninfo), NULL                                                    \
    }

PGPing pg_ping(const char *conninfo)
{
    const char *const vals[] = CONNECT_VALS(conninfo);
    return PQpingParams(connect_keys, vals, 1);
}

PGconn *pg_connect(const char *conninfo, chat_sync sync, bool prepare, char *err, size_t cap)
{
    const char *const vals[] = CONNECT_VALS(conninfo);
    PGconn *conn = PQconnectdbParams(connect_keys, vals, 1);
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
        err[0] = '\0';
        pg_put_message(err, cap, conn ? PQerrorMessage(conn) : "out of memory");
        PQfinish(conn);
        return NULL;
    }
    /* none: a broker crash loses nothing (the commit reached the server),
     * a database crash may lose its last moments; batch and always: a
     * commit is on disk (and, with a synchronous standby, on two
     * machines) before the publish is acknowledged. */
    const char *setup = sync == CHAT_SYNC_NONE
                            ? "SET synchronous_commit TO off; SET client_min_messages TO warning"
                            : "SET synchronous_commit TO on; SET client_min_messages TO warning";
    PGresult *res = PQexec(conn, setup);
    bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    err[0] = '\0';
    if (ok && prepare) {
        ok = pg_prepare(conn, err, cap);
    }
    if (!ok) {
        if (!err[0]) {
            pg_put_message(err, cap, PQerrorMessage(conn));
        }
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

/* Whether the server setting name is reported "on" on conn; *known false
 * when the server does not report it (before PostgreSQL 14). */
static bool reported_on(PGconn *conn, const char *name, bool *known)
{
    const char *v = PQparameterStatus(conn, name);
    *known = v != NULL;
    return v && !strcmp(v, "on");
}

bool pg_check_writable(PGconn *conn, char *err, size_t cap)
{
    bool hs_known, ro_known;
    if (reported_on(conn, "in_hot_standby", &hs_known)) {
        store_set_text(err, cap, "the server is a standby (in_hot_standby on): not a writer");
        return false;
    }
    if (reported_on(conn, "default_transaction_read_only", &ro_known)) {
        store_set_text(err, cap,
                       "the server is read-only (default_transaction_read_only on): not a writer");
        return false;
    }
    if (hs_known && ro_known) {
        return true;
    }
    /* A server before 14 reports neither: one round trip asks it. */
    PGresult *res = PQexec(conn, "SELECT pg_is_in_recovery() OR "
                                 "current_setting('transaction_read_only') = 'on'");
    bool ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
    if (!ok) {
        store_set_text(err, cap, "asking whether the server takes writes: ");
        pg_put_message(err, cap, PQresultErrorMessage(res));
    } else if (strcmp(PQgetvalue(res, 0, 0), "f") != 0) {
        store_set_text(err, cap, "the server is a standby or read-only: not a writer");
        ok = false;
    }
    PQclear(res);
    return ok;
}

bool pg_prepare(PGconn *conn, char *err, size_t cap)
{
    for (int i = 0; i < PG_STMT_COUNT; i++) {
        const struct pg_statement *s = &pg_statements[i];
        PGresult *res = PQprepare(conn, s->name, s->sql, s->nparams, NULL);
        bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
        if (!ok) {
            store_set_text(err, cap, "preparing %s: ", s->name);
            pg_put_message(err, cap, PQresultErrorMessage(res));
        }
        PQclear(res);
        if (!ok) {
            return false;
        }
    }
    return true;
}

PGresult *pg_await(PGconn *conn, pg_wait_fn *wait, void *ctx, char *err, size_t cap,
                   pg_await_end *end, char state[6])
{
    err[0] = '\0';
    state[0] = '\0';
    while (PQisBusy(conn)) {
        int ms = wait(ctx, conn, err, cap);
        struct pollfd p = {PQsocket(conn), POLLIN, 0};
        if (ms < 0) {
            *end = PG_AWAIT_STOPPED;
            return NULL;
        }
        if (poll(&p, 1, ms) < 0 && errno != EINTR) {
            store_set_text(err, cap, "poll: %s", strerror(errno));
            *end = PG_AWAIT_POLL;
            return NULL;
        }
        if (!PQconsumeInput(conn)) {
            break; /* PQgetResult reports it */
        }
    }
    PGresult *res = PQgetResult(conn), *extra;
    while ((extra = PQgetResult(conn)) != NULL) {
        PQclear(extra);
    }
    ExecStatusType status = PQresultStatus(res);
    if (res && (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK)) {
        *end = PG_AWAIT_OK;
        return res;
    }
    const char *code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (code) {
        snprintf(state, 6, "%.5s", code);
    }
    pg_put_message(err, cap, res ? PQresultErrorMessage(res) : PQerrorMessage(conn));
    PQclear(res);
    *end = PG_AWAIT_FAILED;
    return NULL;
}

/* A call's deadline, for pg_await. */
struct deadline {
    int64_t at;
    int timeout_ms;
};

static int until_deadline(void *ctx, PGconn *conn, char *err, size_t cap)
{
    const struct deadline *d = ctx;
    int64_t left = d->at - pg_mono_ms();
    (void)conn;
    if (left <= 0) {
        store_set_text(err, cap, "no answer from PostgreSQL within %d ms", d->timeout_ms);
        return -1;
    }
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

PGresult *pg_run(PGconn *conn, enum pg_stmt stmt, const char *const *params, const int *lens,
                 int timeout_ms, char *err, size_t cap, bool *lost, bool *data, bool *readonly)
{
    const struct pg_statement *s = &pg_statements[stmt];
    /* As many as the statement with the most parameters takes (chat_change's). */
    int fmts[PG_PARAMS_MAX] = {0}, lengths[PG_PARAMS_MAX] = {0};
    char state[6];
    pg_await_end end;
    *lost = false;
    *data = false;
    *readonly = false;
    err[0] = '\0';
    for (int i = 0; lens && i < s->nparams && i < PG_PARAMS_MAX; i++) {
        fmts[i] = lens[i] >= 0;
        lengths[i] = lens[i] >= 0 ? lens[i] : 0;
    }
    if (!PQsendQueryPrepared(conn, s->name, s->nparams, params, lengths, fmts, 1)) {
        pg_put_message(err, cap, PQerrorMessage(conn));
        *lost = PQstatus(conn) != CONNECTION_OK;
        return NULL;
    }
    struct deadline d = {pg_mono_ms() + timeout_ms, timeout_ms};
    PGresult *res = pg_await(conn, until_deadline, &d, err, cap, &end, state);
    if (res) {
        return res;
    }
    if (end != PG_AWAIT_FAILED) {
        *lost = true; /* timed out with the statement in flight, or poll failed */
        return NULL;
    }
    /* A server going away (57P0x), a connection class error (08), or a
     * session on a server that does not take writes (25006,
     * read_only_sql_transaction: made read-only after the connection was
     * checked, or a server too old to report it): this connection is of
     * no more use. */
    *readonly = !strcmp(state, "25006");
    *lost = PQstatus(conn) != CONNECTION_OK || !strncmp(state, "08", 2) ||
            !strncmp(state, "57P", 3) || *readonly;
    /* a data exception (a name that is not UTF-8, a number out of range):
     * the caller's argument, not the store */
    *data = !strncmp(state, "22", 2) && !*lost;
    return NULL;
}

PGresult *pg_call_on(PGconn *conn, enum pg_stmt stmt, const char *const *params, char *err,
                     size_t cap)
{
    bool lost = false, data = false, readonly = false;
    return pg_run(conn, stmt, params, NULL, PG_CALL_TIMEOUT_MS, err, cap, &lost, &data, &readonly);
}

int64_t pg_i64(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col)) {
        return 0;
    }
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, row, col);
    int len = PQgetlength(res, row, col);
    uint64_t v = 0;
    for (int i = 0; i < len && i < 8; i++) {
        v = (v << 8) | p[i];
    }
    /* int4 (4 bytes) and bool (1) read the same way; int8 is 8 */
    if (len == 4) {
        return (int32_t)(uint32_t)v;
    }
    return (int64_t)v;
}

const char *pg_u64(char buf[24], uint64_t v)
{
    snprintf(buf, 24, "%" PRIu64, v > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : v);
    return buf;
}

const char *pg_i64s(char buf[24], int64_t v)
{
    snprintf(buf, 24, "%" PRId64, v);
    return buf;
}

bool pg_name_ok(const char *s)
{
    return s && strlen(s) <= CHAT_STORE_MAX_NAME;
}

bool pg_resume_get(const char *resume, char (*parts)[CHAT_STORE_MAX_NAME + 1], int n)
{
    const unsigned char *r = (const unsigned char *)resume;
    size_t total = ((size_t)r[0] << 8) | r[1], at = 2;
    if (total == 0) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        size_t len = ((size_t)r[at] << 8) | r[at + 1];
        if (len > CHAT_STORE_MAX_NAME || at + 2 + len > total + 2) {
            return false;
        }
        memcpy(parts[i], resume + at + 2, len);
        parts[i][len] = '\0';
        at += 2 + len;
    }
    return true;
}

void pg_resume_put(char *resume, const char *const *parts, int n)
{
    size_t at = 2;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(parts[i]);
        resume[at] = (char)(len >> 8);
        resume[at + 1] = (char)(len & 0xff);
        memcpy(resume + at + 2, parts[i], len);
        at += 2 + len;
    }
    resume[0] = (char)((at - 2) >> 8);
    resume[1] = (char)((at - 2) & 0xff);
}
