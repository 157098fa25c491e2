/* pg_log: the message log of the PostgreSQL backend (see pg_log.h). */
#include "pg_log.h"

#include <stdlib.h>
#include <string.h>

/* One number of a group's row: dflt when the group has none. */
static chat_err group_number(pg *st, enum pg_stmt stmt, const char *group, uint64_t dflt,
                             uint64_t *v, const char *what)
{
    chat_err rc;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    const char *p[1] = {group};
    PGresult *res = pg_call(st, stmt, p, NULL, what, &rc);
    if (!res) {
        return rc;
    }
    *v = PQntuples(res) > 0 ? (uint64_t)pg_i64(res, 0, 0) : dflt;
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_head(chat_store *cs, const char *group, uint64_t *head)
{
    return group_number(pg_of(cs), PG_STMT_HEAD, group, 0, head, "reading a head");
}

chat_err pg_first(chat_store *cs, const char *group, uint64_t *first)
{
    return group_number(pg_of(cs), PG_STMT_FIRST, group, 1, first, "reading a first id");
}

chat_err pg_append(chat_store *cs, const char *group, const char *from, const char *cid,
                   const chat_envelope *env, bool sender_read, chat_appended *out)
{
    pg *st = pg_of(cs);
    char origin[24];
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(from) || (cid && !pg_name_ok(cid)) ||
        env->head_len > INT32_MAX || env->mid_len > INT32_MAX || env->tail_len > INT32_MAX) {
        return CHAT_EINVAL;
    }
    /* bytea goes binary: no escaping, the bytes as they are */
    const char *p[8] = {group,
                        from,
                        cid,
                        pg_i64s(origin, st->origin),
                        env->head ? env->head : "",
                        env->mid ? env->mid : "",
                        env->tail ? env->tail : "",
                        sender_read ? "t" : "f"};
    const int lens[8] = {-1, -1, -1, -1, (int)env->head_len, (int)env->mid_len, (int)env->tail_len,
                         -1};
    PGresult *res = pg_call(st, PG_STMT_APPEND, p, lens, "storing a message", &rc);
    if (!res) {
        return rc;
    }
    uint64_t id = (uint64_t)pg_i64(res, 0, 0);
    int64_t ts = pg_i64(res, 0, 1);
    if (pg_i64(res, 0, 2)) {
        size_t len = (size_t)PQgetlength(res, 0, 3);
        out->env = store_dup_bytes(PQgetvalue(res, 0, 3), len);
        if (!out->env) {
            PQclear(res);
            return CHAT_ENOMEM;
        }
        out->len = len;
        out->duplicate = true;
        out->id = id;
        PQclear(res);
        return CHAT_OK;
    }
    out->read = pg_i64(res, 0, 4) != 0;
    PQclear(res);
    /* Committed. The same bytes as the server's: a failure to copy them
     * here loses nothing, the message is stored. */
    rc = store_envelope_fill(env, id, ts, out);
    out->id = id;
    out->ts = ts;
    return rc;
}

chat_err pg_cid_find(chat_store *cs, const char *group, const char *from, const char *cid,
                     uint64_t *id, bool *found)
{
    chat_err rc;
    *found = false;
    if (!pg_name_ok(group) || !pg_name_ok(from) || !pg_name_ok(cid)) {
        return CHAT_EINVAL;
    }
    const char *p[3] = {group, from, cid};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_CID_FIND, p, NULL, "looking up a cid", &rc);
    if (!res) {
        return rc;
    }
    if (PQntuples(res) > 0) {
        *id = (uint64_t)pg_i64(res, 0, 0);
        *found = true;
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_get(chat_store *cs, const char *group, uint64_t id, chat_msg *msg, bool *found)
{
    char b[24];
    chat_err rc;
    *found = false;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    if (id > INT64_MAX) {
        return CHAT_OK;
    }
    const char *p[2] = {group, pg_u64(b, id)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_GET, p, NULL, "reading a message", &rc);
    if (!res) {
        return rc;
    }
    if (PQntuples(res) > 0) {
        size_t len = (size_t)PQgetlength(res, 0, 0);
        msg->data = store_dup_bytes(PQgetvalue(res, 0, 0), len);
        if (!msg->data) {
            PQclear(res);
            return CHAT_ENOMEM;
        }
        msg->len = len;
        msg->id = id;
        *found = true;
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_scan(chat_store *cs, const char *group, uint64_t from_id, bool forward,
                 size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx, bool *more)
{
    char b1[24], b2[24], b3[24];
    chat_err rc;
    *more = false;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    if (forward && from_id >= INT64_MAX) {
        return CHAT_OK;
    }
    const char *p[4] = {group, pg_u64(b1, from_id),
                        pg_u64(b2, max_count > INT32_MAX ? INT32_MAX : max_count),
                        pg_u64(b3, max_bytes)};
    PGresult *res = pg_call(pg_of(cs), forward ? PG_STMT_SCAN_FWD : PG_STMT_SCAN_BACK, p, NULL,
                            "reading messages", &rc);
    if (!res) {
        return rc;
    }
    int rows = PQntuples(res);
    for (int r = 0; r < rows; r++) {
        /* past max_count, or past max_bytes (the server left the envelope
         * out): what the page does not hold */
        if ((size_t)r >= max_count || PQgetisnull(res, r, 1)) {
            *more = true;
            break;
        }
        if (fn(ctx, (uint64_t)pg_i64(res, r, 0), PQgetvalue(res, r, 1),
               (size_t)PQgetlength(res, r, 1)) != 0) {
            *more = true;
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_scan_page(chat_store *cs, const char *group, uint64_t after, size_t max_count,
                      size_t max_bytes, chat_msg_fn fn, void *ctx, bool *more, uint64_t *head,
                      uint64_t *first)
{
    char b1[24], b2[24], b3[24];
    chat_err rc;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    if (after >= INT64_MAX) {
        /* no id follows: the page is empty, the numbers are still read */
        after = INT64_MAX;
    }
    const char *p[4] = {group, pg_u64(b1, after),
                        pg_u64(b2, max_count > INT32_MAX ? INT32_MAX : max_count),
                        pg_u64(b3, max_bytes)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_PAGE, p, NULL, "reading a page", &rc);
    if (!res) {
        return rc;
    }
    /* the aggregate gives a row even for a group without one */
    int rows = PQntuples(res);
    *head = rows > 0 ? (uint64_t)pg_i64(res, 0, 0) : 0;
    *first = rows > 0 ? (uint64_t)pg_i64(res, 0, 1) : 1;
    for (int r = 0; r < rows && !PQgetisnull(res, r, 2); r++) {
        /* as pg_scan: past max_count, or past max_bytes */
        if ((size_t)r >= max_count || PQgetisnull(res, r, 3)) {
            *more = true;
            break;
        }
        if (fn(ctx, (uint64_t)pg_i64(res, r, 2), PQgetvalue(res, r, 3),
               (size_t)PQgetlength(res, r, 3)) != 0) {
            *more = true;
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_trim(chat_store *cs, const char *group, uint64_t before, size_t max_keys,
                 uint64_t *first_now)
{
    char b1[24], b2[24];
    chat_err rc;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    const char *p[3] = {group, pg_u64(b1, before), pg_u64(b2, max_keys)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_TRIM, p, NULL, "deleting old messages", &rc);
    if (!res) {
        return rc;
    }
    if (first_now) {
        *first_now = (uint64_t)pg_i64(res, 0, 0);
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_groups(chat_store *cs, const char *after, size_t max, chat_head_fn fn, void *ctx,
                   bool *done)
{
    char b[24];
    chat_err rc;
    if (after && !pg_name_ok(after)) {
        return CHAT_EINVAL;
    }
    const char *p[2] = {after, pg_u64(b, max > INT32_MAX ? INT32_MAX : max)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_GROUPS, p, NULL, "listing groups", &rc);
    if (!res) {
        return rc;
    }
    int rows = PQntuples(res);
    *done = (size_t)rows <= max;
    for (int r = 0; r < rows && (size_t)r < max; r++) {
        if (fn(ctx, PQgetvalue(res, r, 0), (uint64_t)pg_i64(res, r, 1)) != 0) {
            *done = false;
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}
