/* pg_admin: operators' operations on the PostgreSQL backend (see
 * pg_admin.h). */
#include "pg_admin.h"

#include <stdio.h>
#include <string.h>

/* max as the statements' LIMIT takes it ($3 + 1 must fit an int4). */
static size_t limit_of(size_t max)
{
    return max > INT32_MAX - 1 ? INT32_MAX - 1 : max;
}

chat_err pg_group_members(chat_store *cs, const char *group, const char *after, size_t max,
                          chat_member_fn fn, void *ctx, bool *done)
{
    char b[24];
    chat_err rc;
    if (!pg_name_ok(group) || (after && !pg_name_ok(after))) {
        return CHAT_EINVAL;
    }
    size_t lim = limit_of(max);
    const char *p[3] = {group, after, pg_u64(b, lim)};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_GROUP_MEMBERS, p, NULL, "listing a group's members", &rc);
    if (!res) {
        return rc;
    }
    int rows = PQntuples(res);
    *done = (size_t)rows <= lim;
    for (int r = 0; r < rows && (size_t)r < lim; r++) {
        if (fn(ctx, PQgetvalue(res, r, 0), (uint64_t)pg_i64(res, r, 1)) != 0) {
            *done = false;
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_member_devices(chat_store *cs, const char *group, const char *member, size_t max,
                           chat_device_fn fn, void *ctx, bool *done)
{
    char b[24];
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    size_t lim = limit_of(max);
    const char *p[3] = {group, member, pg_u64(b, lim)};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_MEMBER_DEVICES, p, NULL, "listing a member's devices", &rc);
    if (!res) {
        return rc;
    }
    int rows = PQntuples(res);
    *done = (size_t)rows <= lim;
    for (int r = 0; r < rows && (size_t)r < lim; r++) {
        if (fn(ctx, PQgetvalue(res, r, 0), (uint64_t)pg_i64(res, r, 1), pg_i64(res, r, 2)) != 0) {
            *done = false;
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_deletions(chat_store *cs, chat_head_fn fn, void *ctx)
{
    chat_err rc;
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_DELETIONS, NULL, NULL, "listing the deletions under way", &rc);
    if (!res) {
        return rc;
    }
    for (int r = 0; r < PQntuples(res); r++) {
        if (fn(ctx, PQgetvalue(res, r, 0), 0) != 0) {
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_group_init(chat_store *cs, const char *group, uint64_t head)
{
    char b[24];
    chat_err rc;
    /* head + 1 becomes first: it must fit a bigint too */
    if (!pg_name_ok(group) || head >= (uint64_t)INT64_MAX) {
        return CHAT_EINVAL;
    }
    const char *p[2] = {group, pg_u64(b, head)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_GROUP_INIT, p, NULL, "starting a group", &rc);
    if (!res) {
        return rc;
    }
    bool ok = pg_i64(res, 0, 0) != 0;
    PQclear(res);
    return ok ? CHAT_OK : CHAT_ECONFLICT;
}

chat_err pg_check(chat_store *cs, chat_problem_fn fn, void *ctx, uint64_t *groups,
                  uint64_t *problems)
{
    chat_err rc;
    PGresult *res = pg_call_long(pg_of(cs), PG_STMT_CHECK, NULL, NULL, PG_CHECK_TIMEOUT_MS,
                                 "checking the database", &rc);
    if (!res) {
        return rc;
    }
    for (int r = 0; r < PQntuples(res); r++) {
        if (!PQgetisnull(res, r, 2)) {
            *groups = (uint64_t)pg_i64(res, r, 2);
            continue;
        }
        (*problems)++;
        fn(ctx, PQgetisnull(res, r, 0) ? "" : PQgetvalue(res, r, 0), PQgetvalue(res, r, 1));
    }
    PQclear(res);
    return CHAT_OK;
}
