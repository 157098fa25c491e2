/* pg_read: read markers and member counts (see pg_read.h). */
#include "pg_read.h"

#include <stdlib.h>
#include <string.h>

chat_err pg_member_count(chat_store *cs, const char *group, uint64_t *count)
{
    chat_err rc;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    const char *p[1] = {group};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_MEMBER_COUNT, p, NULL, "counting a group's members", &rc);
    if (!res) {
        return rc;
    }
    *count = (uint64_t)pg_i64(res, 0, 0);
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_read_advance(chat_store *cs, const char *group, const char *member, const char *device,
                         uint64_t id, uint64_t *read, uint64_t *acked, bool *moved, bool *found)
{
    char b1[24], b2[24];
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[5] = {group, member, device, pg_u64(b1, id), pg_i64s(b2, store_now_ms(cs))};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_READ_ADVANCE, p, NULL, "moving a read marker", &rc);
    if (!res) {
        return rc;
    }
    *found = pg_i64(res, 0, 3) != 0;
    if (*found) {
        *read = (uint64_t)pg_i64(res, 0, 0);
        *acked = (uint64_t)pg_i64(res, 0, 1);
        *moved = pg_i64(res, 0, 2) != 0;
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_read_get(chat_store *cs, const char *group, const char *member, uint64_t *id)
{
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    const char *p[2] = {group, member};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_READ_GET, p, NULL, "reading a read marker", &rc);
    if (!res) {
        return rc;
    }
    if (PQntuples(res) > 0) {
        *id = (uint64_t)pg_i64(res, 0, 0);
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_reads(chat_store *cs, const char *group, const char *after, size_t max, chat_read_fn fn,
                  void *ctx, bool *more)
{
    char b[24];
    chat_err rc;
    if (!pg_name_ok(group) || (after && !pg_name_ok(after))) {
        return CHAT_EINVAL;
    }
    const char *p[3] = {group, after && after[0] ? after : NULL, pg_u64(b, max)};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_READS, p, NULL, "listing a group's read markers", &rc);
    if (!res) {
        return rc;
    }
    int rows = PQntuples(res);
    for (int r = 0; r < rows; r++) {
        if ((size_t)r == max || fn(ctx, PQgetvalue(res, r, 0), (uint64_t)pg_i64(res, r, 1)) != 0) {
            *more = true;
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}
