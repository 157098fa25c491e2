/* ldb_change: changes of stored messages (see ldb_change.h). */
#include "ldb_change.h"
#include "ldb_log.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Whether every message of ch->rewrites is kept and holds its expect
 * (*same); their keys are as short as N's, which fitted. */
static chat_err rewrites_hold(chat_store *cs, const char *group, const chat_change *ch, bool *same)
{
    for (size_t i = 0; i < ch->nrewrites && *same; i++) {
        const chat_rewrite *w = &ch->rewrites[i];
        chat_msg cur = {0};
        bool found = false;
        chat_err rc = ldb_get(cs, group, w->id, &cur, &found);
        if (rc != CHAT_OK) {
            return rc;
        }
        *same = found && cur.len == w->expect_len &&
                (cur.len == 0 || memcmp(cur.data, w->expect, cur.len) == 0);
        free(cur.data);
    }
    return CHAT_OK;
}

chat_err ldb_change(chat_store *cs, const char *group, const char *from, const chat_change *ch,
                    chat_appended *out, bool *applied)
{
    ldb *st = ldb_of(cs);
    key kn, km, kh, kr;
    chat_msg cur = {0};
    bool found = false, mark = false;
    uint64_t head = 0;
    char *version = NULL;
    size_t vlen = 0;

    /* M has no cid: no key names its sender, but its read marker. */
    id_key(&kn, NULL, TAG_MSG, group, ch->id);
    group_key(&kh, TAG_HEAD, group);
    if (kn.overflow || kh.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get(cs, group, ch->id, &cur, &found);
    if (rc != CHAT_OK || !found || cur.len != ch->expect_len ||
        (cur.len && memcmp(cur.data, ch->expect, cur.len) != 0)) {
        goto done; /* gone, or another version than the caller decided on */
    }
    /* recall-complete: every other message rewritten must hold what the
     * caller read too, or nothing is written (the store's only writer
     * cannot see them change, but a caller's list can be stale). */
    bool same = true;
    rc = rewrites_hold(cs, group, ch, &same);
    if (rc != CHAT_OK || !same) {
        goto done;
    }
    /* The only writer: the head read here (from the cache) is the one the
     * batch below moves on, as in ldb_append (dense-ids). N is stored, so
     * the group has its 'H' record and its count already. */
    rc = ldb_head(cs, group, &head);
    if (rc != CHAT_OK) {
        goto done;
    }
    assert(head >= ch->id);
    id_key(&km, NULL, TAG_MSG, group, head + 1);
    if (km.overflow) {
        rc = CHAT_EINVAL;
        goto done;
    }
    /* M is its sender's own message, read by it as a publish is (only a
     * member has a marker: an admin's recall elsewhere moves none). */
    rc = ldb_sender_marker(st, group, from, head + 1, &kr, &mark);
    if (rc != CHAT_OK) {
        goto done;
    }
    int64_t ts = store_now_ms(cs);
    rc = store_envelope_fill(&ch->msg, head + 1, ts, out);
    if (rc == CHAT_OK) {
        rc = store_version_fill(ch, ts, head + 1, &version, &vlen);
    }
    if (rc != CHAT_OK) {
        goto done;
    }
    /* change-atomic: N's new version and M in one batch, so a crash leaves
     * both or neither; LevelDB writes a batch as one log record. */
    leveldb_writebatch_t *wb = st->append_wb;
    leveldb_writebatch_clear(wb);
    leveldb_writebatch_put(wb, kn.buf, kn.len, version, vlen);
    for (size_t i = 0; i < ch->nrewrites; i++) {
        key kw;
        id_key(&kw, NULL, TAG_MSG, group, ch->rewrites[i].id);
        leveldb_writebatch_put(wb, kw.buf, kw.len, ch->rewrites[i].text, ch->rewrites[i].text_len);
    }
    leveldb_writebatch_put(wb, km.buf, km.len, out->env, out->len);
    /* In the batch that stores M, as ldb_append's (M is the new head:
     * above any marker). */
    if (mark) {
        char val[8];
        put_u64(val, head + 1);
        leveldb_writebatch_put(wb, kr.buf, kr.len, val, sizeof(val));
    }
    rc = ldb_write_raw(st, wb, st->wopt, &km);
    if (rc == CHAT_OK) {
        chat_cache_put(st->cache, kh.buf, kh.len, true, head + 1, 0);
        if (mark) {
            chat_cache_put(st->cache, kr.buf, kr.len, true, head + 1, 0);
            out->read = true;
        }
        atomic_fetch_add(&st->appended, 1);
        out->id = head + 1;
        out->ts = ts;
        *applied = true;
    }

done:
    free(version);
    free(cur.data);
    return rc;
}

chat_err ldb_cid_of(chat_store *cs, const char *group, uint64_t id, char **cid, bool *found)
{
    ldb *st = ldb_of(cs);
    key kk;
    char *err = NULL;
    size_t vlen = 0;
    uint64_t first = 1;

    id_key(&kk, NULL, TAG_CIDREV, group, id);
    if (kk.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_first(cs, group, &first);
    if (rc != CHAT_OK || id < first) {
        return rc;
    }
    char *v = leveldb_get(st->db, st->ropt, kk.buf, kk.len, &vlen, &err);
    if (err) {
        return ldb_read_key_error(st, err, kk.buf, kk.len);
    }
    if (!v) {
        return CHAT_OK;
    }
    /* The value is the sender then the cid, each length-prefixed. */
    const char *p = v, *end = v + vlen, *s = NULL;
    size_t n = 0;
    if (!next_part(&p, end, &s, &n) || !next_part(&p, end, &s, &n) || p != end) {
        leveldb_free(v);
        return ldb_corrupt_key(st, kk.buf, kk.len, vlen);
    }
    *cid = store_dup_bytes(s, n);
    leveldb_free(v);
    if (!*cid) {
        return CHAT_ENOMEM;
    }
    *found = true;
    return CHAT_OK;
}
