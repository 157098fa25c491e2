/* pg_push: push registrations (see pg_push.h). */
#include "pg_push.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

chat_err pg_push_put(chat_store *cs, const char *member, const char *device, const void *reg,
                     size_t len, int64_t created_ms, size_t max_per_member, chat_push_put *result)
{
    char b1[24], b2[24];
    chat_err rc;
    if (!pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[5] = {member, device, reg, pg_i64s(b1, created_ms), pg_u64(b2, max_per_member)};
    const int lens[5] = {-1, -1, (int)len, -1, -1};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_PUSH_PUT, p, lens, "storing a push registration", &rc);
    if (!res) {
        return rc;
    }
    switch (pg_i64(res, 0, 0)) {
    case 0:
        *result = CHAT_PUSH_STORED;
        break;
    case 1:
        *result = CHAT_PUSH_FULL;
        break;
    default:
        *result = CHAT_PUSH_NO_GROUP;
        break;
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_push_get(chat_store *cs, const char *member, const char *device, char **reg,
                     size_t *len, int64_t *created_ms, bool *found)
{
    chat_err rc;
    if (!pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[2] = {member, device};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_PUSH_GET, p, NULL, "reading a push registration", &rc);
    if (!res) {
        return rc;
    }
    if (PQntuples(res) > 0) {
        size_t n = (size_t)PQgetlength(res, 0, 0);
        *reg = malloc(n + 1);
        if (!*reg) {
            PQclear(res);
            return CHAT_ENOMEM;
        }
        memcpy(*reg, PQgetvalue(res, 0, 0), n);
        (*reg)[n] = '\0';
        *len = n;
        *created_ms = pg_i64(res, 0, 1);
        *found = true;
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_push_remove(chat_store *cs, const char *member, const char *device, const void *if_reg,
                        size_t if_len, bool *removed)
{
    chat_err rc;
    if (!pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[3] = {member, device, if_reg};
    const int lens[3] = {-1, -1, if_reg ? (int)if_len : -1};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_PUSH_REMOVE, p, lens, "removing a push registration", &rc);
    if (!res) {
        return rc;
    }
    *removed = PQntuples(res) > 0;
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_push_list(chat_store *cs, const char *member, chat_push_fn fn, void *ctx)
{
    chat_err rc;
    if (!pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    const char *p[1] = {member};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_PUSH_LIST, p, NULL, "listing push registrations", &rc);
    if (!res) {
        return rc;
    }
    int rows = PQntuples(res);
    for (int r = 0; r < rows; r++) {
        if (fn(ctx, PQgetvalue(res, r, 0), PQgetvalue(res, r, 1), (size_t)PQgetlength(res, r, 1),
               pg_i64(res, r, 2)) != 0) {
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_push_members(chat_store *cs, const char *group, const char *after, size_t max,
                         chat_push_member_fn fn, void *ctx, char *last, size_t last_cap, bool *done)
{
    char b[24];
    chat_err rc;
    if (!pg_name_ok(group) || (after && !pg_name_ok(after))) {
        return CHAT_EINVAL;
    }
    const char *p[3] = {group, after, pg_u64(b, max)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_PUSH_MEMBERS, p, NULL,
                            "listing a group's registered members", &rc);
    if (!res) {
        return rc;
    }
    /* One or more rows per member, in member order: a member is complete
     * once the next one's rows begin. */
    int rows = PQntuples(res);
    size_t members = 0;
    bool stopped = false;
    for (int r = 0; r < rows && !stopped; r++) {
        const char *member = PQgetvalue(res, r, 0);
        bool first_row = r == 0 || strcmp(member, PQgetvalue(res, r - 1, 0)) != 0;
        if (first_row) {
            if (r > 0) {
                snprintf(last, last_cap, "%s", PQgetvalue(res, r - 1, 0));
            }
            members++;
        }
        if (!PQgetisnull(res, r, 2)) {
            stopped = fn(ctx, member, (uint64_t)pg_i64(res, r, 1), PQgetvalue(res, r, 2),
                         PQgetvalue(res, r, 3), (size_t)PQgetlength(res, r, 3)) != 0;
        }
    }
    if (!stopped && rows > 0) {
        snprintf(last, last_cap, "%s", PQgetvalue(res, rows - 1, 0));
    }
    *done = !stopped && members < max;
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_push_expire(chat_store *cs, int64_t older_than_ms, size_t max_keys, char *resume,
                        size_t resume_cap, size_t *removed, bool *done)
{
    char parts[2][CHAT_STORE_MAX_NAME + 1];
    char b1[24], b2[24];
    chat_err rc;
    (void)resume_cap; /* at least CHAT_STORE_RESUME_MAX: two names fit */
    bool from = pg_resume_get(resume, parts, 2);
    const char *p[4] = {pg_i64s(b1, older_than_ms), pg_u64(b2, max_keys), from ? parts[0] : NULL,
                        from ? parts[1] : NULL};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_PUSH_EXPIRE, p, NULL, "expiring push registrations", &rc);
    if (!res) {
        return rc;
    }
    *removed = (size_t)pg_i64(res, 0, 0);
    *done = pg_i64(res, 0, 1) != 0;
    if (*done) {
        resume[0] = resume[1] = 0;
    } else if (!PQgetisnull(res, 0, 2)) {
        const char *lastp[2] = {PQgetvalue(res, 0, 2), PQgetvalue(res, 0, 3)};
        pg_resume_put(resume, lastp, 2);
    }
    PQclear(res);
    return CHAT_OK;
}
