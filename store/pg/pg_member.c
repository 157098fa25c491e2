/* pg_member: cursors, memberships and group deletion (see pg_member.h). */
#include "pg_member.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

chat_err pg_cursor_info(chat_store *cs, const char *group, const char *member, const char *device,
                        uint64_t *id, int64_t *last_used, bool *found)
{
    chat_err rc;
    *found = false;
    if (!pg_name_ok(group) || !pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[3] = {group, member, device};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_CURSOR_INFO, p, NULL, "reading a cursor", &rc);
    if (!res) {
        return rc;
    }
    if (PQntuples(res) > 0) {
        *found = true;
        *id = (uint64_t)pg_i64(res, 0, 0);
        if (last_used) {
            *last_used = pg_i64(res, 0, 1);
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_cursor_advance(chat_store *cs, const char *group, const char *member,
                           const char *device, uint64_t id, uint64_t *now)
{
    char b1[24], b2[24];
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[5] = {group, member, device, pg_u64(b1, id), pg_i64s(b2, store_now_ms(cs))};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_CURSOR_ADVANCE, p, NULL, "moving a cursor", &rc);
    if (!res) {
        return rc;
    }
    if (now) {
        *now = (uint64_t)pg_i64(res, 0, 0);
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_cursor_max(chat_store *cs, const char *group, const char *member, uint64_t *id,
                       bool *found)
{
    chat_err rc;
    *found = false;
    if (!pg_name_ok(group) || !pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    const char *p[2] = {group, member};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_CURSOR_MAX, p, NULL, "reading a maximum cursor", &rc);
    if (!res) {
        return rc;
    }
    if (PQntuples(res) > 0) {
        *found = true;
        *id = (uint64_t)pg_i64(res, 0, 0);
    }
    PQclear(res);
    return CHAT_OK;
}

/* A device's cursor started by stmt (PG_STMT_CURSOR_START or _OPEN, which
 * also reads the group's head into head): both answer (id, found[, head]). */
static chat_err cursor_call(chat_store *cs, enum pg_stmt stmt, const char *group,
                            const char *member, const char *device, uint64_t *id, bool *found,
                            uint64_t *head)
{
    char b[24];
    chat_err rc;
    *found = false;
    if (!pg_name_ok(group) || !pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[4] = {group, member, device, pg_i64s(b, store_now_ms(cs))};
    PGresult *res = pg_call(pg_of(cs), stmt, p, NULL, "starting a device's cursor", &rc);
    if (!res) {
        return rc;
    }
    *found = pg_i64(res, 0, 1) != 0;
    if (*found) {
        *id = (uint64_t)pg_i64(res, 0, 0);
    }
    if (head) {
        *head = (uint64_t)pg_i64(res, 0, 2);
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_cursor_start(chat_store *cs, const char *group, const char *member, const char *device,
                         uint64_t *id, bool *found)
{
    return cursor_call(cs, PG_STMT_CURSOR_START, group, member, device, id, found, NULL);
}

chat_err pg_cursor_open(chat_store *cs, const char *group, const char *member, const char *device,
                        uint64_t *id, bool *found, uint64_t *head)
{
    return cursor_call(cs, PG_STMT_CURSOR_OPEN, group, member, device, id, found, head);
}

chat_err pg_cursor_touch(chat_store *cs, const char *group, const char *member, const char *device,
                         int64_t now_ms)
{
    char b[24];
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(member) || !pg_name_ok(device)) {
        return CHAT_EINVAL;
    }
    const char *p[4] = {group, member, device, pg_i64s(b, now_ms)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_CURSOR_TOUCH, p, NULL, "stamping a device", &rc);
    PQclear(res);
    return rc;
}

chat_err pg_expire_devices(chat_store *cs, int64_t older_than_ms, bool drop_members,
                           size_t max_keys, char *resume, size_t resume_cap, chat_expired *out,
                           bool *done)
{
    char parts[3][CHAT_STORE_MAX_NAME + 1];
    char b1[24], b2[24];
    chat_err rc;
    (void)resume_cap; /* at least CHAT_STORE_RESUME_MAX: three names fit */
    bool from = pg_resume_get(resume, parts, 3);
    const char *p[6] = {pg_i64s(b1, older_than_ms),      pg_u64(b2, max_keys),
                        drop_members ? "true" : "false", from ? parts[0] : NULL,
                        from ? parts[1] : NULL,          from ? parts[2] : NULL};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_EXPIRE, p, NULL, "expiring devices", &rc);
    if (!res) {
        /* it may have committed, members with it: our cache forgets */
        atomic_fetch_add(&pg_of(cs)->member_gen, 1);
        return rc;
    }
    out->devices = (size_t)pg_i64(res, 0, 0);
    out->members = (size_t)pg_i64(res, 0, 1);
    *done = pg_i64(res, 0, 2) != 0;
    if (*done) {
        resume[0] = resume[1] = 0;
    } else if (!PQgetisnull(res, 0, 3)) {
        const char *last[3] = {PQgetvalue(res, 0, 3), PQgetvalue(res, 0, 4), PQgetvalue(res, 0, 5)};
        pg_resume_put(resume, last, 3);
    }
    PQclear(res);
    if (out->members > 0) {
        /* Our own cache forgets at once; the others when the notification
         * arrives. */
        atomic_fetch_add(&pg_of(cs)->member_gen, 1);
    }
    return CHAT_OK;
}

/* ------------------------------------------------------------------------
 * Memberships, with the broker's cache
 * --------------------------------------------------------------------- */

/* The cache's key: group, a NUL, member. */
static size_t member_key(char *k, const char *group, const char *member)
{
    size_t g = strlen(group), m = strlen(member);
    memcpy(k, group, g + 1);
    memcpy(k + g + 1, member, m + 1); /* k has room for the NUL; not part of the key */
    return g + 1 + m;
}

/* The cache when it may be used (the watcher listens), emptied when a
 * membership changed since; NULL when it may not. *gen receives the
 * generation the lookup belongs to. */
static chat_cache *members_cache(pg *st, uint64_t *gen)
{
    *gen = atomic_load(&st->member_gen);
    if (!atomic_load(&st->member_live)) {
        return NULL;
    }
    if (*gen != st->members_gen) {
        chat_cache *fresh = chat_cache_create(65536);
        if (!fresh) {
            return NULL;
        }
        chat_cache_destroy(st->members);
        st->members = fresh;
        st->members_gen = *gen;
    }
    return st->members;
}

/* Keeps a lookup's answer, unless a membership changed since it began. */
static void members_put(pg *st, uint64_t gen, const char *k, size_t klen, bool found,
                        uint64_t joined)
{
    if (st->members && gen == st->members_gen && atomic_load(&st->member_gen) == gen &&
        atomic_load(&st->member_live)) {
        chat_cache_put(st->members, k, klen, found, joined, 0);
    }
}

chat_err pg_member_get(chat_store *cs, const char *group, const char *member, uint64_t *joined,
                       bool *found)
{
    pg *st = pg_of(cs);
    char k[2 * CHAT_STORE_MAX_NAME + 2];
    uint64_t gen = 0, v = 0, x = 0;
    chat_err rc;
    *found = false;
    if (!pg_name_ok(group) || !pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    size_t klen = member_key(k, group, member);
    chat_cache *c = members_cache(st, &gen);
    if (c && chat_cache_get(c, k, klen, found, &v, &x)) {
        if (*found) {
            *joined = v;
        }
        return CHAT_OK;
    }
    const char *p[2] = {group, member};
    PGresult *res = pg_call(st, PG_STMT_MEMBER_GET, p, NULL, "reading a membership", &rc);
    if (!res) {
        return rc;
    }
    *found = !PQgetisnull(res, 0, 0);
    if (*found) {
        *joined = (uint64_t)pg_i64(res, 0, 0);
    }
    PQclear(res);
    members_put(st, gen, k, klen, *found, *found ? *joined : 0);
    return CHAT_OK;
}

/* A join through stmt, whose parameters p begin with group and member and
 * whose first column is the joined id: chat_member_add, or
 * chat_member_join with a device's cursor in the same transaction (which
 * changes no membership more, so the cache is kept alike). */
static chat_err join_call(pg *st, enum pg_stmt stmt, const char *const *p, const char *what,
                          uint64_t *joined)
{
    chat_err rc;
    char k[2 * CHAT_STORE_MAX_NAME + 2];
    uint64_t gen = 0;
    size_t klen = member_key(k, p[0], p[1]);
    /* the generation before the call, as pg_member_get takes it: a change
     * notified meanwhile empties the cache rather than meet our entry */
    (void)members_cache(st, &gen);
    PGresult *res = pg_call(st, stmt, p, NULL, what, &rc);
    if (!res) {
        /* it may have committed all the same: forget everything */
        atomic_fetch_add(&st->member_gen, 1);
        return rc;
    }
    uint64_t j = (uint64_t)pg_i64(res, 0, 0);
    if (joined) {
        *joined = j;
    }
    PQclear(res);
    /* The one entry that changed, in our own cache (the watcher passes
     * over the writer's notification); the other brokers forget theirs
     * when it arrives. */
    members_put(st, gen, k, klen, true, j);
    return CHAT_OK;
}

chat_err pg_member_add(chat_store *cs, const char *group, const char *member, uint64_t *joined)
{
    if (!pg_name_ok(group) || !pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    const char *p[2] = {group, member};
    return join_call(pg_of(cs), PG_STMT_MEMBER_ADD, p, "adding a member", joined);
}

chat_err pg_member_join(chat_store *cs, const char *group, const char *member, const char *device,
                        uint64_t *joined)
{
    char b[24];
    if (!pg_name_ok(group) || !pg_name_ok(member) || (device && !pg_name_ok(device))) {
        return CHAT_EINVAL;
    }
    /* one round trip, one commit: chat_member_join in pg_schema.c */
    const char *p[4] = {group, member, device, pg_i64s(b, store_now_ms(cs))};
    return join_call(pg_of(cs), PG_STMT_MEMBER_JOIN, p, "joining a member", joined);
}

chat_err pg_member_remove(chat_store *cs, const char *group, const char *member)
{
    pg *st = pg_of(cs);
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    char k[2 * CHAT_STORE_MAX_NAME + 2];
    uint64_t gen = 0;
    size_t klen = member_key(k, group, member);
    (void)members_cache(st, &gen); /* as in join_call */
    const char *p[2] = {group, member};
    PGresult *res = pg_call(st, PG_STMT_MEMBER_REMOVE, p, NULL, "removing a member", &rc);
    PQclear(res);
    if (rc == CHAT_OK) {
        members_put(st, gen, k, klen, false, 0);
    } else {
        atomic_fetch_add(&st->member_gen, 1);
    }
    return rc;
}

chat_err pg_member_groups(chat_store *cs, const char *member, chat_group_fn fn, void *ctx)
{
    chat_err rc;
    if (!pg_name_ok(member)) {
        return CHAT_EINVAL;
    }
    const char *p[1] = {member};
    PGresult *res =
        pg_call(pg_of(cs), PG_STMT_MEMBER_GROUPS, p, NULL, "listing a member's groups", &rc);
    if (!res) {
        return rc;
    }
    for (int r = 0; r < PQntuples(res); r++) {
        if (fn(ctx, PQgetvalue(res, r, 0), (uint64_t)pg_i64(res, r, 1)) != 0) {
            break;
        }
    }
    PQclear(res);
    return CHAT_OK;
}

chat_err pg_group_delete(chat_store *cs, const char *group, size_t max_keys, bool *done)
{
    pg *st = pg_of(cs);
    char b[24];
    chat_err rc;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    const char *p[2] = {group, pg_u64(b, max_keys)};
    PGresult *res = pg_call(st, PG_STMT_GROUP_DELETE, p, NULL, "deleting a group", &rc);
    /* done or failed (it may have committed), our own cache forgets: the
     * watcher passes over the writer's notification */
    atomic_fetch_add(&st->member_gen, 1);
    if (!res) {
        return rc;
    }
    *done = pg_i64(res, 0, 0) != 0;
    PQclear(res);
    return CHAT_OK;
}
