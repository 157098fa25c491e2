/* ldb_cursor: cursors and devices (see ldb_cursor.h). */
#include "ldb_cursor.h"
#include "ldb_log.h"
#include "ldb_member.h"

#include <string.h>

/* The day of a time in ms: last-use stamps change at most once a day. */
static int64_t day_of(int64_t ms)
{
    return ms / 86400000;
}

chat_err ldb_cursor_info(chat_store *cs, const char *group, const char *member, const char *device,
                         uint64_t *id, int64_t *last_used, bool *found)
{
    ldb *st = ldb_of(cs);
    key k;
    rec r;
    cursor_key(&k, group, member, device);
    *found = false;
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_rec(st, &k, &r, found);
    if (rc == CHAT_OK && *found) {
        *id = r.v;
        if (last_used) {
            *last_used = (int64_t)r.x;
        }
    }
    return rc;
}

/* The highest of the cursors scan_cursors visits. */
struct highest {
    uint64_t *id;
    bool *found;
};

static chat_err visit_cursor(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                             size_t vlen, bool *stop)
{
    struct highest *h = ctx;
    rec r;
    (void)stop;
    if (!ldb_decode(TAG_CURSOR, v, vlen, &r)) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    if (!*h->found || r.v > *h->id) {
        *h->id = r.v;
        *h->found = true;
    }
    return CHAT_OK;
}

/* The highest cursor among the member's device records: how a store from
 * before the 'X' records answers, once per member. */
static chat_err scan_cursors(ldb *st, const char *group, const char *member, uint64_t *id,
                             bool *found)
{
    key prefix;
    struct highest h = {id, found};
    cursor_key(&prefix, group, member, NULL);
    return prefix.overflow ? CHAT_EINVAL : ldb_walk(st, &prefix, visit_cursor, &h);
}

chat_err ldb_cursor_max(chat_store *cs, const char *group, const char *member, uint64_t *id,
                        bool *found)
{
    ldb *st = ldb_of(cs);
    key kx;
    max_key(&kx, group, member);
    *found = false;
    if (kx.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_u64(st, &kx, id, found);
    if (rc == CHAT_OK && !*found) {
        rc = scan_cursors(st, group, member, id, found);
    }
    return rc;
}

/* Adds to wb what keeps the member's 'X' record at least `to` (invariant
 * cursor-forward): a put when it is lower, or when it is missing (then at least the
 * highest device cursor, for stores from before 'X'). */
static chat_err raise_max(ldb *st, const char *group, const char *member, uint64_t to,
                          leveldb_writebatch_t *wb)
{
    key kx;
    uint64_t max = 0;
    bool found = false;
    max_key(&kx, group, member);
    chat_err rc = ldb_get_u64(st, &kx, &max, &found);
    if (rc != CHAT_OK || (found && max >= to)) {
        return rc;
    }
    if (!found) {
        rc = scan_cursors(st, group, member, &max, &found);
        if (rc != CHAT_OK) {
            return rc;
        }
    }
    ldb_batch_put(wb, &kx, found && max > to ? max : to);
    return CHAT_OK;
}

chat_err ldb_cursor_advance_add(ldb *st, const char *group, const char *member, const char *device,
                                uint64_t id, leveldb_writebatch_t *wb, uint64_t *now, bool *put)
{
    key k;
    uint64_t head = 0;
    rec cur = {0, 0};
    bool found = false;
    chat_err rc;

    *put = false;
    cursor_key(&k, group, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    rc = ldb_head(&st->base, group, &head);
    if (rc == CHAT_OK) {
        rc = ldb_get_rec(st, &k, &cur, &found);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    if (id > head) {
        id = head;
    }
    int64_t t = store_now_ms(&st->base);
    bool move = !found || id > cur.v;
    /* An ack that moves nothing is still a use of the device. */
    if (move || day_of(t) != day_of((int64_t)cur.x)) {
        uint64_t to = move ? id : cur.v;
        ldb_batch_put2(wb, &k, to, (uint64_t)t);
        if (move) {
            rc = raise_max(st, group, member, to, wb);
        }
        cur.v = to;
        *put = true;
    }
    *now = cur.v;
    return rc;
}

chat_err ldb_cursor_advance(chat_store *cs, const char *group, const char *member,
                            const char *device, uint64_t id, uint64_t *now)
{
    ldb *st = ldb_of(cs);
    uint64_t to = 0;
    bool put = false;
    key k;

    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    chat_err rc = ldb_cursor_advance_add(st, group, member, device, id, wb, &to, &put);
    if (rc == CHAT_OK && put) {
        cursor_key(&k, group, member, device);
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &k);
    }
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK && now) {
        *now = to;
    }
    return rc;
}

chat_err ldb_cursor_touch(chat_store *cs, const char *group, const char *member, const char *device,
                          int64_t now_ms)
{
    ldb *st = ldb_of(cs);
    key k;
    rec cur;
    bool found = false;
    cursor_key(&k, group, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_rec(st, &k, &cur, &found);
    if (rc != CHAT_OK || !found || day_of(now_ms) == day_of((int64_t)cur.x)) {
        return rc;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    ldb_batch_put2(wb, &k, cur.v, (uint64_t)now_ms);
    rc = ldb_write_batch(st, wb, st->wopt_lazy, &k);
    leveldb_writebatch_destroy(wb);
    return rc;
}

chat_err ldb_cursor_start(chat_store *cs, const char *group, const char *member, const char *device,
                          uint64_t *id, bool *found)
{
    ldb *st = ldb_of(cs);
    key k;
    uint64_t start = 0;
    bool have = false;
    chat_err rc;

    *found = false;
    cursor_key(&k, group, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    int64_t t = store_now_ms(cs);
    rc = ldb_cursor_info(cs, group, member, device, id, NULL, &have);
    if (rc != CHAT_OK || have) {
        *found = have;
        return rc == CHAT_OK && have ? ldb_cursor_touch(cs, group, member, device, t) : rc;
    }
    rc = ldb_member_get(cs, group, member, &start, &have);
    if (rc != CHAT_OK || !have) {
        return rc;
    }
    /* cursor-forward: the 'X' record is the member's most advanced device,
     * one lookup however many devices it has had. */
    uint64_t best = 0;
    bool any = false;
    rc = ldb_cursor_max(cs, group, member, &best, &any);
    if (rc != CHAT_OK) {
        return rc;
    }
    if (any && best > start) {
        start = best;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    ldb_batch_put2(wb, &k, start, (uint64_t)t);
    rc = raise_max(st, group, member, start, wb);
    if (rc == CHAT_OK) {
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &k);
    }
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK) {
        *id = start;
        *found = true;
    }
    return rc;
}

chat_err ldb_expire_devices(chat_store *cs, int64_t older_than_ms, size_t max_keys, char *resume,
                            size_t resume_cap, size_t *removed, bool *done)
{
    ldb *st = ldb_of(cs);
    key start, last;
    size_t visited = 0, gone = 0;
    bool finished = false;
    char *err = NULL;
    chat_err rc = CHAT_OK;

    /* At least CHAT_STORE_RESUME_MAX (chat_store.c checked it), which holds
     * any key (ldb_keys.h). */
    (void)resume_cap;
    size_t rlen = ((size_t)(unsigned char)resume[0] << 8) | (unsigned char)resume[1];
    if (rlen > sizeof(start.buf) || (rlen > 0 && resume[2] != TAG_CURSOR)) {
        return CHAT_EINVAL;
    }
    key_init(&start, TAG_CURSOR);
    if (rlen > 0) {
        memcpy(start.buf, resume + 2, rlen);
        start.len = rlen;
    }
    last = start;
    int64_t now = store_now_ms(cs);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, start.buf, start.len);
    if (rlen > 0 && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen == start.len && memcmp(kb, start.buf, klen) == 0) {
            leveldb_iter_next(it);
        }
    }
    while (!err && !(err = iter_error(it))) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        if (!kb || klen < 1 || kb[0] != TAG_CURSOR) {
            finished = true;
            break;
        }
        if (visited == max_keys || klen > sizeof(last.buf)) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        if (vlen == 8) {
            /* Written before last-use stamps: counts as used now, so that
             * an upgrade does not expire every device at its first sweep. */
            char val[16];
            memcpy(val, v, 8);
            put_u64(val + 8, (uint64_t)now);
            leveldb_writebatch_put(wb, kb, klen, val, sizeof(val));
        } else if (vlen != 16 || (int64_t)get_u64(v + 8) < older_than_ms) {
            /* Stale, or unreadable: a device that comes back starts where
             * the member's most advanced device was ('X' stays). */
            leveldb_writebatch_delete(wb, kb, klen);
            gone++;
        }
        memcpy(last.buf, kb, klen);
        last.len = klen;
        visited++;
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = ldb_read_key_error(st, err, last.buf, last.len);
    } else if (visited > 0) {
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &last);
    }
    leveldb_writebatch_destroy(wb);
    if (rc != CHAT_OK) {
        return rc;
    }
    *removed = gone;
    *done = finished;
    if (finished) {
        resume[0] = resume[1] = 0;
    } else if (visited > 0) {
        resume[0] = (char)(last.len >> 8);
        resume[1] = (char)(last.len & 0xff);
        memcpy(resume + 2, last.buf, last.len);
    }
    return CHAT_OK;
}
