/* pg_change: changes of stored messages (see pg_change.h). */
#include "pg_change.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text form of the bytea[] of len[i] bytes at v[i] (n of them): hex
 * elements, which need no escaping but their backslash. Malloc'd (the
 * caller frees it), NULL when memory runs out. */
static char *bytea_array(const char *const *v, const size_t *len, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t cap = 3;
    for (size_t i = 0; i < n; i++) {
        cap += 2 * len[i] + 6;
    }
    char *p = malloc(cap), *o = p;
    if (!p) {
        return NULL;
    }
    *o++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i) {
            *o++ = ',';
        }
        memcpy(o, "\"\\\\x", 4);
        o += 4;
        for (size_t j = 0; j < len[i]; j++) {
            unsigned char c = (unsigned char)v[i][j];
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
        *o++ = '"';
    }
    *o++ = '}';
    *o = '\0';
    return p;
}

/* ch->rewrites as the three arrays chat_change takes: ids, what each must
 * hold, what it gets (malloc'd, the caller frees each). */
static chat_err rewrite_arrays(const chat_change *ch, char **ids, char **expect, char **text)
{
    const char *xv[CHAT_STORE_REWRITES_MAX], *tv[CHAT_STORE_REWRITES_MAX];
    size_t xl[CHAT_STORE_REWRITES_MAX], tl[CHAT_STORE_REWRITES_MAX];
    size_t n = ch->nrewrites;
    /* '{', each id with its comma (21 bytes), '}', the NUL */
    *ids = malloc(3 + n * 22);
    if (!*ids) {
        return CHAT_ENOMEM;
    }
    char *o = *ids;
    *o++ = '{';
    for (size_t i = 0; i < n; i++) {
        const chat_rewrite *w = &ch->rewrites[i];
        if (w->id > INT64_MAX || w->expect_len > INT32_MAX / 2 || w->text_len > INT32_MAX / 2) {
            return CHAT_EINVAL;
        }
        o += snprintf(o, 22, "%s%llu", i ? "," : "", (unsigned long long)w->id);
        xv[i] = w->expect ? w->expect : "";
        xl[i] = w->expect_len;
        tv[i] = w->text ? w->text : "";
        tl[i] = w->text_len;
    }
    *o++ = '}';
    *o = '\0';
    *expect = bytea_array(xv, xl, n);
    *text = bytea_array(tv, tl, n);
    return *expect && *text ? CHAT_OK : CHAT_ENOMEM;
}

chat_err pg_change(chat_store *cs, const char *group, const char *from, const chat_change *ch,
                   chat_appended *out, bool *applied)
{
    pg *st = pg_of(cs);
    char origin[24], nid[24];
    char *ids = NULL, *expect = NULL, *text = NULL;
    PGresult *res = NULL;
    chat_err rc;
    if (!pg_name_ok(group) || !pg_name_ok(from) || ch->expect_len > INT32_MAX ||
        ch->before_len > INT32_MAX || ch->after_len > INT32_MAX || ch->last_len > INT32_MAX ||
        ch->msg.head_len > INT32_MAX || ch->msg.mid_len > INT32_MAX ||
        ch->msg.tail_len > INT32_MAX) {
        return CHAT_EINVAL;
    }
    if (ch->id > INT64_MAX) {
        return CHAT_OK; /* no such id: not applied */
    }
    rc = rewrite_arrays(ch, &ids, &expect, &text);
    if (rc != CHAT_OK) {
        goto done;
    }
    /* bytea goes binary: no escaping, the bytes as they are (but the
     * arrays of the rewrites, text) */
    const char *p[16] = {group,
                         from,
                         pg_u64(nid, ch->id),
                         ch->expect ? ch->expect : "",
                         ch->before ? ch->before : "",
                         ch->stamp ? "t" : "f",
                         ch->after ? ch->after : "",
                         ch->stamp_id ? "t" : "f",
                         ch->last ? ch->last : "",
                         pg_i64s(origin, st->origin),
                         ch->msg.head ? ch->msg.head : "",
                         ch->msg.mid ? ch->msg.mid : "",
                         ch->msg.tail ? ch->msg.tail : "",
                         ids,
                         expect,
                         text};
    const int lens[16] = {-1,
                          -1,
                          -1,
                          (int)ch->expect_len,
                          (int)ch->before_len,
                          -1,
                          (int)ch->after_len,
                          -1,
                          (int)ch->last_len,
                          -1,
                          (int)ch->msg.head_len,
                          (int)ch->msg.mid_len,
                          (int)ch->msg.tail_len,
                          -1,
                          -1,
                          -1};
    res = pg_call(st, PG_STMT_CHANGE, p, lens, "changing a message", &rc);
    if (!res) {
        goto done;
    }
    bool ok = pg_i64(res, 0, 2) != 0;
    bool read = pg_i64(res, 0, 3) != 0;
    uint64_t id = (uint64_t)pg_i64(res, 0, 0);
    int64_t ts = pg_i64(res, 0, 1);
    if (!ok) {
        rc = CHAT_OK;
        goto done;
    }
    /* Committed. The same bytes as the server's: a failure to copy them
     * here loses nothing, the change is stored. */
    *applied = true;
    rc = store_envelope_fill(&ch->msg, id, ts, out);
    out->id = id;
    out->ts = ts;
    out->read = read;

done:
    PQclear(res);
    free(ids);
    free(expect);
    free(text);
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
