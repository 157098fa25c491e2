/* pg_change: changes of stored messages (see pg_change.h). */
#include "pg_change.h"

#include <stdlib.h>
#include <string.h>

chat_err pg_change(chat_store *cs, const char *group, const char *from, const chat_change *ch,
                   chat_appended *out, bool *applied)
{
    pg *st = pg_of(cs);
    char origin[24], nid[24];
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(from) || ch->expect_len > INT32_MAX ||
        ch->before_len > INT32_MAX || ch->after_len > INT32_MAX || ch->msg.head_len > INT32_MAX ||
        ch->msg.mid_len > INT32_MAX || ch->msg.tail_len > INT32_MAX) {
        return CHAT_EINVAL;
    }
    if (ch->id > INT64_MAX) {
        return CHAT_OK; /* no such id: not applied */
    }
    /* bytea goes binary: no escaping, the bytes as they are */
    const char *p[11] = {group,
                         from,
                         pg_u64(nid, ch->id),
                         ch->expect ? ch->expect : "",
                         ch->before ? ch->before : "",
                         ch->stamp ? "t" : "f",
                         ch->after ? ch->after : "",
                         pg_i64s(origin, st->origin),
                         ch->msg.head ? ch->msg.head : "",
                         ch->msg.mid ? ch->msg.mid : "",
                         ch->msg.tail ? ch->msg.tail : ""};
    const int lens[11] = {-1,
                          -1,
                          -1,
                          (int)ch->expect_len,
                          (int)ch->before_len,
                          -1,
                          (int)ch->after_len,
                          -1,
                          (int)ch->msg.head_len,
                          (int)ch->msg.mid_len,
                          (int)ch->msg.tail_len};
    PGresult *res = pg_call(st, PG_STMT_CHANGE, p, lens, "changing a message", &rc);
    if (!res) {
        return rc;
    }
    bool ok = pg_i64(res, 0, 2) != 0;
    bool read = pg_i64(res, 0, 3) != 0;
    uint64_t id = (uint64_t)pg_i64(res, 0, 0);
    int64_t ts = pg_i64(res, 0, 1);
    PQclear(res);
    if (!ok) {
        return CHAT_OK;
    }
    /* Committed. The same bytes as the server's: a failure to copy them
     * here loses nothing, the change is stored. */
    *applied = true;
    rc = store_envelope_fill(&ch->msg, id, ts, out);
    out->id = id;
    out->ts = ts;
    out->read = read;
    return rc;
}

chat_err pg_cid_of(chat_store *cs, const char *group, uint64_t id, char **cid, bool *found)
{
    char b[24];
    chat_err rc;
    if (!pg_name_ok(group)) {
        return CHAT_EINVAL;
    }
    if (id > INT64_MAX) {
        return CHAT_OK;
    }
    const char *p[2] = {group, pg_u64(b, id)};
    PGresult *res = pg_call(pg_of(cs), PG_STMT_CID_OF, p, NULL, "reading a message's cid", &rc);
    if (!res) {
        return rc;
    }
    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0)) {
        *cid = store_dup_bytes(PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
        if (!*cid) {
            PQclear(res);
            return CHAT_ENOMEM;
        }
        *found = true;
    }
    PQclear(res);
    return CHAT_OK;
}
