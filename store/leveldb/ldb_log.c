/* ldb_log: the message log (see ldb_log.h). */
#include "ldb_log.h"
#include "ldb_cidf.h"
#include "store_text.h"

#include <stdlib.h>
#include <string.h>

chat_err ldb_first(chat_store *cs, const char *group, uint64_t *first)
{
    key k;
    bool found = false;
    group_key(&k, TAG_FIRST, group);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    *first = 1;
    return ldb_get_u64(ldb_of(cs), &k, first, &found);
}

/* The head as the records say it (invariant dense-ids): the 'H' record, the floor
 * first - 1, or the newest message above both. Every id in [first, head]
 * has its message (invariant kept-range), and a batch that deletes the message at
 * head puts 'H' = head, so when no message lies above the floor the floor
 * is the head, and when one does the newest message is the head and live:
 * the backward step lands on it, never on deleted keys. A seek, not a
 * lookup of floor + 1: a message lost to damage (and a repair) must not
 * hide the ones above it, which a lower head would overwrite. */
static chat_err head_read(ldb *st, const char *group, const key *kh, uint64_t *head)
{
    key km, prefix;
    char *err = NULL;
    size_t vlen = 0;
    uint64_t floor = 0, first = 1;

    char *v = leveldb_get(st->db, st->ropt, kh->buf, kh->len, &vlen, &err);
    if (err) {
        return ldb_read_key_error(st, err, kh->buf, kh->len);
    }
    if (v && vlen != 8) {
        leveldb_free(v);
        return ldb_corrupt_key(st, kh->buf, kh->len, vlen);
    }
    floor = v ? get_u64(v) : 0;
    leveldb_free(v);
    chat_err rc = ldb_first(&st->base, group, &first);
    if (rc != CHAT_OK) {
        return rc;
    }
    if (first - 1 > floor) {
        floor = first - 1;
    }
    *head = floor;
    if (floor == UINT64_MAX) {
        return CHAT_OK;
    }
    id_key(&km, &prefix, TAG_MSG, group, floor + 1);
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, km.buf, km.len);
    bool above = false;
    if (!(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        above = klen == prefix.len + 8 && memcmp(kb, prefix.buf, prefix.len) == 0;
    }
    if (!err && above) {
        put_u64(km.buf + prefix.len, UINT64_MAX);
        leveldb_iter_seek(it, km.buf, km.len);
        if (!(err = iter_error(it))) {
            if (leveldb_iter_valid(it)) {
                leveldb_iter_prev(it);
            } else {
                leveldb_iter_seek_to_last(it);
            }
        }
        if (!err && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
            size_t klen = 0;
            const char *kb = leveldb_iter_key(it, &klen);
            if (klen == prefix.len + 8 && memcmp(kb, prefix.buf, prefix.len) == 0 &&
                get_u64(kb + prefix.len) > floor) {
                *head = get_u64(kb + prefix.len);
            }
        }
    }
    leveldb_iter_destroy(it);
    return err ? ldb_read_key_error(st, err, prefix.buf, prefix.len) : CHAT_OK;
}

chat_err ldb_head(chat_store *cs, const char *group, uint64_t *head)
{
    ldb *st = ldb_of(cs);
    key k;
    uint64_t x = 0;
    bool found = false;
    group_key(&k, TAG_HEAD, group);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    /* The cache holds the head itself under the 'H' key (ldb_db.h). */
    if (chat_cache_get(st->cache, k.buf, k.len, &found, head, &x)) {
        if (!found) {
            *head = 0;
        }
        return CHAT_OK;
    }
    chat_err rc = head_read(st, group, &k, head);
    if (rc == CHAT_OK) {
        chat_cache_put(st->cache, k.buf, k.len, *head != 0, *head, 0);
    }
    return rc;
}

/* ldb_cid_find for the 'I' key k of hash h (ldb_cidf_hash). */
static chat_err cid_find_key(chat_store *cs, const char *group, const key *k, uint64_t h,
                             uint64_t *id, bool *found)
{
    uint64_t first = 1;
    *found = false;
    /* Most appends carry a new cid: the filter says so without a lookup,
     * which LevelDB would also charge as a seek towards a compaction. */
    if (ldb_cidf_absent(ldb_of(cs)->cidf, h)) {
        return CHAT_OK;
    }
    chat_err rc = ldb_get_u64(ldb_of(cs), k, id, found);
    if (rc == CHAT_OK && *found) {
        /* An entry whose message is gone (a store from before the reverse
         * keys, or a group being deleted) no longer holds a retry back. */
        rc = ldb_first(cs, group, &first);
        *found = rc == CHAT_OK && *id >= first;
    }
    return rc;
}

/* The message the cid entry ki (hash h) names, when it is still kept:
 * out->duplicate then says so and out holds it. */
static chat_err find_duplicate(chat_store *cs, const char *group, const key *ki, uint64_t h,
                               chat_appended *out)
{
    uint64_t id = 0;
    bool found = false;
    chat_msg m = {0};
    chat_err rc = cid_find_key(cs, group, ki, h, &id, &found);
    if (rc == CHAT_OK && found) {
        rc = ldb_get(cs, group, id, &m, &found);
    }
    if (rc == CHAT_OK && found) {
        out->duplicate = true;
        out->id = id;
        out->env = m.data;
        out->len = m.len;
    }
    return rc;
}

/* The records of new message id (invariants dense-ids and deletable-keys):
 * its 'M', for a group's first message its 'H' and the groups' count, the
 * cid keys both ways when cid is not NULL, and from's read marker with
 * mark; one batch, written with the append's options. ldb_append and
 * ldb_append_floor both write through here, so that the floor bench writes
 * what an append writes. */
static chat_err append_write(ldb *st, const char *group, const char *from, const char *cid,
                             uint64_t hi, uint64_t id, bool first, bool mark,
                             const chat_appended *out)
{
    key kh, km, ki, kk, kv, kr;
    char val[8];

    group_key(&kh, TAG_HEAD, group);
    id_key(&km, NULL, TAG_MSG, group, id);
    if (kh.overflow || km.overflow) {
        return CHAT_EINVAL;
    }
    if (cid && !cid_keys(&ki, &kk, &kv, group, from, cid, id)) {
        return CHAT_EINVAL;
    }
    if (mark) {
        read_key(&kr, group, from);
        if (kr.overflow) {
            return CHAT_EINVAL;
        }
    }
    /* One batch for every append: a new one was an allocation (and its
     * buffer another) per message. */
    leveldb_writebatch_t *wb = st->append_wb;
    leveldb_writebatch_clear(wb);
    leveldb_writebatch_put(wb, km.buf, km.len, out->env, out->len);
    put_u64(val, id);
    /* The message is the new head (invariant dense-ids): no 'H' record per
     * message, only a group's first, which makes it a group and is
     * counted in the same batch. */
    if (first) {
        char n[8];
        leveldb_writebatch_put(wb, kh.buf, kh.len, val, sizeof(val));
        put_u64(n, st->groups + 1);
        ldb_put_meta(wb, META_GROUPS, n, sizeof(n));
    }
    if (cid) {
        /* Before the write: a key in the store always has its bits (a
         * failed write only leaves bits for nothing). */
        ldb_cidf_add(st->cidf, hi);
        leveldb_writebatch_put(wb, ki.buf, ki.len, val, sizeof(val));
        leveldb_writebatch_put(wb, kk.buf, kk.len, kv.buf, kv.len);
    }
    /* The sender has read its own message: its marker moves in the batch
     * that stores it (the new head is above any marker). */
    if (mark) {
        leveldb_writebatch_put(wb, kr.buf, kr.len, val, sizeof(val));
    }
    /* Nothing in this batch but the head and the marker goes through the
     * cache: the caller puts them there directly, without a walk over the
     * batch. */
    return ldb_write_raw(st, wb, st->wopt, &km);
}

chat_err ldb_append(chat_store *cs, const char *group, const char *from, const char *cid,
                    const chat_envelope *env, bool sender_read, chat_appended *out)
{
    ldb *st = ldb_of(cs);
    key kh, ki, kr;
    uint64_t head = 0, id;
    bool mark = false;
    chat_err rc;

    /* The only writer: the head read here (from the cache) is the one the
     * batch below moves on, so the id needs no lock (ldb_db.h). */
    uint64_t hi = 0;
    if (cid) {
        if (!cid_key(&ki, group, from, cid)) {
            return CHAT_EINVAL;
        }
        hi = ldb_cidf_hash(ki.buf, ki.len);
        rc = find_duplicate(cs, group, &ki, hi, out);
        if (rc != CHAT_OK || out->duplicate) {
            return rc;
        }
    }
    rc = ldb_head(cs, group, &head);
    if (rc != CHAT_OK) {
        return rc;
    }
    id = head + 1;
    group_key(&kh, TAG_HEAD, group);
    if (sender_read && (rc = ldb_sender_marker(st, group, from, id, &kr, &mark)) != CHAT_OK) {
        return rc;
    }
    int64_t ts = store_now_ms(cs);
    rc = store_envelope_fill(env, id, ts, out);
    if (rc != CHAT_OK) {
        return rc;
    }
    out->ts = ts;
    rc = append_write(st, group, from, cid, hi, id, head == 0, mark, out);
    if (rc == CHAT_OK) {
        chat_cache_put(st->cache, kh.buf, kh.len, true, id, 0);
        if (mark) {
            chat_cache_put(st->cache, kr.buf, kr.len, true, id, 0);
            out->read = true;
        }
        out->id = id;
        atomic_fetch_add(&st->appended, 1);
        if (head == 0) {
            st->groups++;
        }
    }
    return rc;
}

chat_err ldb_append_floor(chat_store *cs, const char *group, const char *from, const char *cid,
                          const chat_envelope *env, uint64_t id, bool mark)
{
    ldb *st = ldb_of(cs);
    key ki;
    chat_appended out = {0};
    uint64_t hi = 0;

    if (cid) {
        if (!cid_key(&ki, group, from, cid)) {
            return CHAT_EINVAL;
        }
        hi = ldb_cidf_hash(ki.buf, ki.len);
    }
    chat_err rc = store_envelope_fill(env, id, store_now_ms(cs), &out);
    if (rc == CHAT_OK) {
        rc = append_write(st, group, from, cid, hi, id, id == 1, mark, &out);
    }
    if (rc == CHAT_OK) {
        atomic_fetch_add(&st->appended, 1);
        if (id == 1) {
            st->groups++; /* as ldb_append counts a new group */
        }
    }
    free(out.env);
    return rc;
}

chat_err ldb_cid_find(chat_store *cs, const char *group, const char *from, const char *cid,
                      uint64_t *id, bool *found)
{
    key k;
    *found = false;
    if (!cid_key(&k, group, from, cid)) {
        return CHAT_EINVAL;
    }
    return cid_find_key(cs, group, &k, ldb_cidf_hash(k.buf, k.len), id, found);
}

chat_err ldb_sender_marker(ldb *st, const char *group, const char *from, uint64_t id, key *kr,
                           bool *move)
{
    uint64_t marker = 0;
    bool member = false;
    *move = false;
    read_key(kr, group, from);
    if (kr->overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_u64(st, kr, &marker, &member);
    *move = rc == CHAT_OK && member && id > marker;
    return rc;
}

chat_err ldb_get(chat_store *cs, const char *group, uint64_t id, chat_msg *msg, bool *found)
{
    ldb *st = ldb_of(cs);
    key k;
    char *err = NULL;
    size_t vlen = 0;

    uint64_t first = 1;
    *found = false;
    id_key(&k, NULL, TAG_MSG, group, id);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_first(cs, group, &first);
    if (rc != CHAT_OK || id < first) {
        return rc;
    }
    char *val = leveldb_get(st->db, st->ropt, k.buf, k.len, &vlen, &err);
    if (err) {
        return ldb_read_key_error(st, err, k.buf, k.len);
    }
    if (!val) {
        return CHAT_OK;
    }
    msg->data = store_dup_bytes(val, vlen);
    leveldb_free(val);
    if (!msg->data) {
        return CHAT_ENOMEM;
    }
    msg->len = vlen;
    msg->id = id;
    *found = true;
    return CHAT_OK;
}

chat_err ldb_scan(chat_store *cs, const char *group, uint64_t from_id, bool forward,
                  size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx, bool *more)
{
    ldb *st = ldb_of(cs);
    key prefix, k;
    size_t count = 0, bytes = 0;
    uint64_t last = 0, first = 1;
    chat_err rc = CHAT_OK;
    char *err = NULL;

    *more = false;
    id_key(&k, &prefix, TAG_MSG, group, from_id);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    /* Ids below first are gone even while a group deletion has not yet
     * removed their records (invariant kept-range). */
    rc = ldb_first(cs, group, &first);
    if (rc != CHAT_OK) {
        return rc;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, k.buf, k.len);
    if (!forward && !(err = iter_error(it))) {
        /* Seek lands on the first key >= before; the page starts below it. */
        if (leveldb_iter_valid(it)) {
            leveldb_iter_prev(it);
        } else {
            leveldb_iter_seek_to_last(it);
        }
    }
    while (!err && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen != prefix.len + 8 || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        uint64_t id = get_u64(kb + prefix.len);
        if (!forward && id < first) {
            break;
        }
        if (forward ? id > from_id && id >= first : id < from_id) {
            const char *v = leveldb_iter_value(it, &vlen);
            if (count >= max_count || (count > 0 && bytes + vlen > max_bytes)) {
                *more = true;
                break;
            }
            if (fn(ctx, id, v, vlen) != 0) {
                *more = true; /* this message was not handed over */
                break;
            }
            count++;
            bytes += vlen;
            last = id;
        }
        forward ? leveldb_iter_next(it) : leveldb_iter_prev(it);
    }
    leveldb_iter_destroy(it);
    if (err) {
        char what[CHAT_STORE_ERROR_MAX / 2];
        what[0] = '\0';
        store_put_name(what, sizeof(what), "reading the messages of group ", group, strlen(group));
        store_put_text(what, sizeof(what), " %s %llu", forward ? "after" : "before",
                       (unsigned long long)from_id);
        if (count > 0) {
            store_put_text(what, sizeof(what), " (%zu read, up to %llu)", count,
                           (unsigned long long)last);
        }
        rc = ldb_read_error(st, err, what);
    }
    return rc;
}

chat_err ldb_groups(chat_store *cs, const char *after, size_t max, chat_head_fn fn, void *ctx,
                    bool *done)
{
    ldb *st = ldb_of(cs);
    key start;
    chat_err rc = CHAT_OK;
    char *err = NULL;
    char name[MAX_PART + 1];
    size_t seen = 0;

    key_init(&start, TAG_HEAD);
    if (after) {
        key_str(&start, after);
        if (start.overflow) {
            return CHAT_EINVAL;
        }
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    err = iter_seek_after(it, start.buf, start.len, after);
    while (!err && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen < 1 || kb[0] != TAG_HEAD) {
            *done = true;
            break;
        }
        if (seen == max) {
            break;
        }
        size_t n = klen >= 3 ? ((size_t)(unsigned char)kb[1] << 8) | (unsigned char)kb[2] : 0;
        (void)leveldb_iter_value(it, &vlen);
        if (klen < 3 || 3 + n != klen || n > MAX_PART || vlen != 8) {
            rc = ldb_corrupt_key(st, kb, klen, vlen);
            break;
        }
        memcpy(name, kb + 3, n);
        name[n] = '\0';
        seen++;
        /* The record is a floor of the head, the head itself only when
         * written last (invariant dense-ids): the head comes from the cache, or
         * from the group's newest message. */
        uint64_t head = 0;
        rc = ldb_head(cs, name, &head);
        if (rc == CHAT_ECORRUPT) {
            /* A damaged block among the group's newest messages: the walk
             * goes on past the group, or one damaged group would stop
             * check, the retention sweep and the admin listing for every
             * group after it. The group's own reads still fail, and check
             * reports the damage from its read of every block. */
            rc = CHAT_OK;
            leveldb_iter_next(it);
            continue;
        }
        if (rc != CHAT_OK || fn(ctx, name, head) != 0) {
            break;
        }
        leveldb_iter_next(it);
    }
    if (!err && rc == CHAT_OK && !leveldb_iter_valid(it)) {
        *done = true;
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = ldb_read_key_error(st, err, start.buf, start.len);
    }
    return rc;
}
