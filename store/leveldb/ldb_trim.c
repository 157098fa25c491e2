/* ldb_trim: retention in bounded steps (see ldb_trim.h). */
#include "ldb_trim.h"
#include "ldb_log.h"

/* Adds to wb the deletion of one reverse key (kb, value v) of message id,
 * and of the index entry it names while that entry still points at this
 * message (a later append may have reused the cid). */
static chat_err trim_cid(ldb *st, const char *group, uint64_t id, const char *kb, size_t klen,
                         const char *v, size_t vlen, leveldb_writebatch_t *wb)
{
    key ki;
    char *err = NULL;
    const char *end = v + vlen, *f = NULL, *c = NULL;
    size_t fn = 0, cn = 0, ilen = 0;
    bool named = next_part(&v, end, &f, &fn) && next_part(&v, end, &c, &cn) && v == end;

    leveldb_writebatch_delete(wb, kb, klen);
    group_key(&ki, TAG_CID, group);
    if (!named) {
        return CHAT_OK;
    }
    key_part(&ki, f, fn);
    key_part(&ki, c, cn);
    if (ki.overflow) {
        return CHAT_OK;
    }
    char *ival = leveldb_get(st->db, st->ropt, ki.buf, ki.len, &ilen, &err);
    if (err) {
        return ldb_read_key_error(st, err, ki.buf, ki.len);
    }
    /* An entry of another shape is as dead as its message. */
    if (ival && (ilen != 8 || get_u64(ival) == id)) {
        leveldb_writebatch_delete(wb, ki.buf, ki.len);
    }
    leveldb_free(ival);
    return CHAT_OK;
}

/* Ranges up to this many ids are trimmed by point lookups (a Bloom filter
 * answers most), longer ones by one iterator: retention by count trims one
 * message per publish, and an iterator costs more than a few lookups. */
#define TRIM_BY_GETS 16u

/* Adds to wb the deletion of the cid keys of group's messages [from, to). */
static chat_err trim_cids(ldb *st, const char *group, uint64_t from, uint64_t to,
                          leveldb_writebatch_t *wb)
{
    key prefix, k;
    char *err = NULL;
    chat_err rc = CHAT_OK;

    id_key(&k, &prefix, TAG_CIDREV, group, from);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    if (to - from <= TRIM_BY_GETS) {
        for (uint64_t id = from; id < to && rc == CHAT_OK; id++) {
            size_t vlen = 0;
            put_u64(k.buf + prefix.len, id);
            char *v = leveldb_get(st->db, st->ropt, k.buf, k.len, &vlen, &err);
            if (err) {
                return ldb_read_key_error(st, err, k.buf, k.len);
            }
            if (v) {
                rc = trim_cid(st, group, id, k.buf, k.len, v, vlen, wb);
                leveldb_free(v);
            }
        }
        return rc;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, k.buf, k.len);
         rc == CHAT_OK && !(err = iter_error(it)) && leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen != prefix.len + 8 || memcmp(kb, prefix.buf, prefix.len) != 0 ||
            get_u64(kb + prefix.len) >= to) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        rc = trim_cid(st, group, get_u64(kb + prefix.len), kb, klen, v, vlen, wb);
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = ldb_read_key_error(st, err, k.buf, k.len);
    }
    return rc;
}

chat_err ldb_trim(chat_store *cs, const char *group, uint64_t before, size_t max_keys,
                  uint64_t *first_now)
{
    ldb *st = ldb_of(cs);
    key kf, kh, km;
    uint64_t head = 0, first = 1;
    char val[8];
    chat_err rc;

    rc = ldb_head(cs, group, &head);
    if (rc == CHAT_OK) {
        rc = ldb_first(cs, group, &first);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    if (first_now) {
        *first_now = first;
    }
    if (before > head + 1) {
        before = head + 1;
    }
    if (before <= first) {
        return CHAT_OK;
    }
    group_key(&kf, TAG_FIRST, group);
    group_key(&kh, TAG_HEAD, group);
    if (kf.overflow || kh.overflow) {
        return CHAT_EINVAL;
    }
    /* One bounded batch per call, 'F' moving with it: a crash between two
     * calls leaves invariants kept-range and deletable-keys intact, and one call's work on the
     * broker's thread is bounded however long the backlog. */
    uint64_t stop = before - first > max_keys ? first + max_keys : before;
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    for (uint64_t id = first; id < stop; id++) {
        id_key(&km, NULL, TAG_MSG, group, id);
        leveldb_writebatch_delete(wb, km.buf, km.len);
    }
    rc = trim_cids(st, group, first, stop, wb);
    if (rc == CHAT_OK && stop == head + 1) {
        /* The newest message goes: 'H' keeps its id, in the same batch,
         * or the head would fall back to an older message and ids held
         * by clients would be given again (invariant dense-ids). */
        put_u64(val, head);
        leveldb_writebatch_put(wb, kh.buf, kh.len, val, sizeof(val));
    }
    if (rc == CHAT_OK) {
        put_u64(val, stop);
        leveldb_writebatch_put(wb, kf.buf, kf.len, val, sizeof(val));
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &kf);
    }
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK && first_now) {
        *first_now = stop;
    }
    return rc;
}
