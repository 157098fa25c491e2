/* ldb_delete: deleting a group (see ldb_delete.h). */
#include "ldb_delete.h"
#include "ldb_log.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Deleting a group
 * --------------------------------------------------------------------- */

/* The kinds of a group's records, in key order: a deletion walks them one
 * after the other, and its resume point is the last key it looked at. */
static const char delete_kinds[] = {TAG_CURSOR, TAG_CID,  TAG_JOIN, TAG_CIDREV,
                                    TAG_MSG,    TAG_READ, TAG_MAX};
#define DELETE_KINDS (sizeof(delete_kinds) / sizeof(delete_kinds[0]))

/* Whether member (the bytes of a key) joined group since the deletion of
 * generation gen began: its cursors are the new membership's. */
static chat_err member_is_new(ldb *st, const char *group, const char *m, size_t mlen, uint64_t gen,
                              bool *is_new)
{
    key kj;
    rec r;
    bool found = false;
    group_key(&kj, TAG_JOIN, group);
    key_part(&kj, m, mlen);
    *is_new = false;
    if (kj.overflow) {
        return CHAT_OK;
    }
    chat_err rc = ldb_get_rec(st, &kj, &r, &found);
    *is_new = rc == CHAT_OK && found && r.x == gen;
    /* a membership record of the wrong shape goes with its cursors */
    return rc == CHAT_ECORRUPT ? CHAT_OK : rc;
}

/* A deletion in progress, as its 'D' record holds it. */
struct deletion {
    uint64_t gen;   /* this deletion's generation, unique in the store */
    uint64_t bound; /* head + 1 when it began: ids below are deleted */
    key pos;        /* the last key looked at; len 0: none yet */
};

/* What a deletion does with one record of group (key kb, value v) that it
 * walks over: adds its deletion to wb, or leaves it to the group as it is
 * now (ids from bound on, members who joined since). *stop is set when the
 * rest of this kind is newer (messages and their cid keys are in id
 * order). */
static chat_err delete_one(ldb *st, const char *group, size_t plen, const struct deletion *del,
                           const char *kb, size_t klen, const char *v, size_t vlen,
                           leveldb_writebatch_t *wb, bool *stop)
{
    const char *p = kb + plen, *end = kb + klen, *m = NULL;
    size_t mlen = 0;
    bool keep = false;
    rec r;
    chat_err rc = CHAT_OK;

    *stop = false;
    switch (kb[0]) {
    case TAG_CIDREV:
    case TAG_MSG:
        *stop = end - p == 8 && get_u64(p) >= del->bound;
        keep = *stop;
        break;
    case TAG_CID:
        keep = vlen == 8 && get_u64(v) >= del->bound;
        break;
    case TAG_JOIN:
        keep = ldb_decode(TAG_JOIN, v, vlen, &r) && r.x == del->gen;
        if (!keep && next_part(&p, end, &m, &mlen)) {
            key kg;
            key_init(&kg, TAG_GROUPS);
            key_part(&kg, m, mlen);
            key_raw(&kg, group);
            if (!kg.overflow) {
                leveldb_writebatch_delete(wb, kg.buf, kg.len);
            }
        }
        break;
    case TAG_CURSOR:
    case TAG_MAX:
        if (next_part(&p, end, &m, &mlen)) {
            rc = member_is_new(st, group, m, mlen, del->gen, &keep);
        }
        break;
    case TAG_READ:
        /* the member's name is the rest of the key, bare */
        rc = member_is_new(st, group, p, (size_t)(end - p), del->gen, &keep);
        break;
    default:
        break;
    }
    if (rc == CHAT_OK && !keep) {
        leveldb_writebatch_delete(wb, kb, klen);
    }
    return rc;
}

/* Reads the group's 'D' record: *pending when a deletion is under way, and
 * then *del is it. */
static chat_err deletion_get(ldb *st, const key *kd, struct deletion *del, bool *pending)
{
    char *err = NULL;
    size_t vlen = 0;
    chat_err rc = CHAT_OK;

    *pending = false;
    del->pos.len = 0;
    del->pos.overflow = false;
    char *v = leveldb_get(st->db, st->ropt, kd->buf, kd->len, &vlen, &err);
    if (err) {
        return ldb_read_key_error(st, err, kd->buf, kd->len);
    }
    if (!v) {
        return CHAT_OK;
    }
    if (vlen < DELETE_HEADER || vlen - DELETE_HEADER > sizeof(del->pos.buf)) {
        rc = ldb_corrupt_key(st, kd->buf, kd->len, vlen);
    } else {
        *pending = true;
        del->gen = get_u64(v);
        del->bound = get_u64(v + 8);
        del->pos.len = vlen - DELETE_HEADER;
        memcpy(del->pos.buf, v + DELETE_HEADER, del->pos.len);
    }
    leveldb_free(v);
    return rc;
}

/* Adds the put of the 'D' record to wb. */
static chat_err deletion_put(leveldb_writebatch_t *wb, const key *kd, const struct deletion *del)
{
    size_t len = DELETE_HEADER + del->pos.len;
    char *v = malloc(len);
    if (!v) {
        return CHAT_ENOMEM;
    }
    put_u64(v, del->gen);
    put_u64(v + 8, del->bound);
    memcpy(v + DELETE_HEADER, del->pos.buf, del->pos.len);
    leveldb_writebatch_put(wb, kd->buf, kd->len, v, len);
    free(v);
    return CHAT_OK;
}

/* Starts a deletion: a generation no other deletion in this store had
 * (memberships added during it carry it, so a later deletion of the same
 * group, even one at the same head, tells them apart), counted in a meta
 * record put in wb. */
static chat_err deletion_start(ldb *st, struct deletion *del, uint64_t head,
                               leveldb_writebatch_t *wb)
{
    key kn;
    uint64_t last = 0;
    bool found = false;
    meta_key(&kn, META_DELETE_GEN);
    chat_err rc = ldb_get_u64(st, &kn, &last, &found);
    if (rc == CHAT_OK) {
        del->gen = found ? last + 1 : 1;
        del->bound = head + 1;
        del->pos.len = 0;
        ldb_batch_put(wb, &kn, del->gen);
    }
    return rc;
}

/* Positions it on the first key of del to look at, in kind *kind. */
static void deletion_seek(leveldb_iterator_t *it, const struct deletion *del, key *prefix,
                          size_t *kind)
{
    const key *pos = &del->pos;
    *kind = 0;
    while (pos->len > 0 && *kind < DELETE_KINDS && delete_kinds[*kind] != pos->buf[0]) {
        (*kind)++;
    }
    if (pos->len == 0 || *kind == DELETE_KINDS) {
        *kind = 0;
        prefix->buf[0] = delete_kinds[0];
        leveldb_iter_seek(it, prefix->buf, prefix->len);
        return;
    }
    prefix->buf[0] = delete_kinds[*kind];
    leveldb_iter_seek(it, pos->buf, pos->len);
    if (leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen == pos->len && memcmp(kb, pos->buf, klen) == 0) {
            leveldb_iter_next(it);
        }
    }
}

chat_err ldb_group_delete(chat_store *cs, const char *group, size_t max_keys, bool *done)
{
    ldb *st = ldb_of(cs);
    key kd, kf, kh, kn, prefix;
    struct deletion del;
    uint64_t head = 0;
    size_t kind = 0, visited = 0;
    bool pending = false, finished = false, stop = false;
    char *err = NULL;
    chat_err rc;

    group_key(&kd, TAG_DELETE, group);
    group_key(&kf, TAG_FIRST, group);
    group_key(&kh, TAG_HEAD, group);
    group_key(&kn, TAG_COUNT, group);
    group_key(&prefix, TAG_MSG, group); /* the kind byte changes as the walk goes */
    if (kd.overflow || kf.overflow || kh.overflow || kn.overflow || prefix.overflow) {
        return CHAT_EINVAL;
    }
    rc = deletion_get(st, &kd, &del, &pending);
    if (rc == CHAT_OK && !pending) {
        rc = ldb_head(cs, group, &head);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    if (!pending) {
        /* The first step: from its batch on the group reads as empty (ids
         * below first are gone, memberships older than the deletion do not
         * count) and appends go on above the deleted range, so a publish
         * between two steps is never touched by the later ones. */
        rc = deletion_start(st, &del, head, wb);
        if (head > 0) {
            /* 'H' holds the head before the walk deletes the messages the
             * head was read from (invariant dense-ids). */
            ldb_batch_put(wb, &kh, head);
            ldb_batch_put(wb, &kf, del.bound);
        }
        /* No membership from before counts any more: neither does it in
         * the member count (invariant read-markers), which joins from now on raise
         * from zero. */
        leveldb_writebatch_delete(wb, kn.buf, kn.len);
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    deletion_seek(it, &del, &prefix, &kind);
    while (rc == CHAT_OK && !(err = iter_error(it))) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        if (stop || !kb || klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            /* This kind is done: on to the next. */
            stop = false;
            if (++kind == DELETE_KINDS) {
                finished = true;
                break;
            }
            prefix.buf[0] = delete_kinds[kind];
            leveldb_iter_seek(it, prefix.buf, prefix.len);
            continue;
        }
        if (visited == max_keys || klen > sizeof(del.pos.buf)) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        rc = delete_one(st, group, prefix.len, &del, kb, klen, v, vlen, wb, &stop);
        memcpy(del.pos.buf, kb, klen);
        del.pos.len = klen;
        visited++;
        if (!stop) {
            leveldb_iter_next(it);
        }
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = ldb_read_key_error(st, err, prefix.buf, prefix.len);
    }
    /* Finished, the group keeps its head and first records alone. */
    if (rc == CHAT_OK && finished) {
        leveldb_writebatch_delete(wb, kd.buf, kd.len);
    } else if (rc == CHAT_OK) {
        rc = deletion_put(wb, &kd, &del);
    }
    if (rc == CHAT_OK) {
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &kd);
    }
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK) {
        *done = finished;
    }
    return rc;
}
