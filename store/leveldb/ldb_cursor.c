/* ldb_cursor: cursors and devices (see ldb_cursor.h). */
#include "ldb_cursor.h"
#include "ldb_log.h"
#include "ldb_member.h"

#include <stdlib.h>
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

/* ------------------------------------------------------------------------
 * Device expiry
 * --------------------------------------------------------------------- */

/* The length of the 'C' g m part of a cursor key (every device of member m
 * in group g: they come together in key order), or 0 when it does not
 * parse. */
static size_t member_prefix(const char *k, size_t klen)
{
    const char *p = k + 1, *end = k + klen, *s = NULL;
    size_t n = 0;
    if (klen < 1 || !next_part(&p, end, &s, &n) || !next_part(&p, end, &s, &n)) {
        return 0;
    }
    return (size_t)(p - k);
}

/* Byte order, LevelDB's: whether a sorts before b. */
static bool key_less(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c < 0 || (c == 0 && alen < blen);
}

/* One member's cursors in a group as a step of the walk meets them. */
struct run {
    bool active;
    bool all_gone; /* every one the step looked at is deleted in its batch */
    bool resumed;  /* the step began inside the run: cursors of it may come
                      before, kept by an earlier step */
    size_t plen;   /* first.buf[0, plen) is the run's 'C' g m */
    key first;     /* the first cursor of the run the step looked at */
};

/* What one step of the walk carries from run to run. */
struct expiry_step {
    ldb *st;
    bool drop; /* drop_members */
    leveldb_writebatch_t *wb;
    bool in_group;             /* group names the group of the runs so far */
    char group[MAX_PART + 1];  /* whose member count the batch lowers ... */
    uint64_t dropped;          /* ... by this many */
    size_t members;            /* members dropped by the step */
    char member[MAX_PART + 1]; /* the run's member, parsed */
};

/* Whether a cursor of the run's member sorts before the run's first one:
 * one an earlier step kept (its deletions are written already). */
static chat_err cursor_before(ldb *st, const struct run *r, bool *before)
{
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    size_t klen = 0;
    leveldb_iter_seek(it, r->first.buf, r->plen);
    char *err = iter_error(it);
    const char *k = !err && leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
    *before = k && klen >= r->plen && memcmp(k, r->first.buf, r->plen) == 0 &&
              key_less(k, klen, r->first.buf, r->first.len);
    leveldb_iter_destroy(it);
    return err ? ldb_read_key_error(st, err, r->first.buf, r->plen) : CHAT_OK;
}

/* Adds the member count of the runs' group, lowered by the members the
 * batch drops there, to the batch. */
static chat_err flush_count(struct expiry_step *x)
{
    chat_err rc = x->in_group ? ldb_member_count_drop(x->st, x->group, x->dropped, x->wb) : CHAT_OK;
    x->dropped = 0;
    return rc;
}

/* The run has ended: when the step deleted each of its cursors and no
 * other one is left, its member goes too, in the same batch. */
static chat_err finish_run(struct expiry_step *x, const struct run *r)
{
    const char *p = r->first.buf + 1, *end = r->first.buf + r->plen, *g = NULL, *m = NULL;
    size_t glen = 0, mlen = 0;
    bool before = false, dropped = false;
    chat_err rc = CHAT_OK;

    if (!x->drop || !r->all_gone) {
        return CHAT_OK;
    }
    if (r->resumed && ((rc = cursor_before(x->st, r, &before)) != CHAT_OK || before)) {
        return rc;
    }
    if (!next_part(&p, end, &g, &glen) || !next_part(&p, end, &m, &mlen)) {
        return CHAT_OK; /* member_prefix parsed it: not reached */
    }
    if (!x->in_group || strlen(x->group) != glen || memcmp(x->group, g, glen) != 0) {
        if ((rc = flush_count(x)) != CHAT_OK) {
            return rc;
        }
        memcpy(x->group, g, glen);
        x->group[glen] = '\0';
        x->in_group = true;
    }
    memcpy(x->member, m, mlen);
    x->member[mlen] = '\0';
    rc = ldb_member_drop_add(x->st, x->group, x->member, x->wb, &dropped);
    if (rc == CHAT_OK && dropped) {
        x->dropped++;
        x->members++;
    }
    return rc;
}

/* Whether the key at the iterator (not looked at yet) continues run r. */
static bool run_goes_on(leveldb_iterator_t *it, const struct run *r)
{
    size_t klen = 0;
    const char *k = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
    return k && klen >= r->plen && memcmp(k, r->first.buf, r->plen) == 0;
}

chat_err ldb_expire_devices(chat_store *cs, int64_t older_than_ms, bool drop_members,
                            size_t max_keys, char *resume, size_t resume_cap, chat_expired *out,
                            bool *done)
{
    ldb *st = ldb_of(cs);
    key start, last;
    size_t visited = 0, gone = 0;
    bool finished = false;
    char *err = NULL;
    chat_err rc = CHAT_OK;
    struct run run = {0};

    /* At least CHAT_STORE_RESUME_MAX (chat_store.c checked it), which holds
     * any key (ldb_keys.h). */
    (void)resume_cap;
    bool after = false;
    if (!ldb_resume_get(resume, TAG_CURSOR, &start, &after)) {
        return CHAT_EINVAL;
    }
    last = start;
    int64_t now = store_now_ms(cs);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    struct expiry_step *x = calloc(1, sizeof(*x));
    if (!x) {
        leveldb_writebatch_destroy(wb);
        return CHAT_ENOMEM;
    }
    x->st = st;
    x->drop = drop_members;
    x->wb = wb;
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    err = iter_seek_after(it, start.buf, start.len, after);
    while (rc == CHAT_OK && !err && !(err = iter_error(it))) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        if (!kb || klen < 1 || kb[0] != TAG_CURSOR) {
            finished = true;
            break;
        }
        if (visited == max_keys || klen > sizeof(last.buf)) {
            break;
        }
        size_t plen = member_prefix(kb, klen);
        if (run.active && (plen != run.plen || memcmp(kb, run.first.buf, plen) != 0)) {
            run.active = false;
            if ((rc = finish_run(x, &run)) != CHAT_OK) {
                break;
            }
        }
        if (!run.active && plen > 0) {
            run.active = true;
            run.all_gone = true;
            run.plen = plen;
            run.resumed =
                visited == 0 && after && start.len >= plen && memcmp(start.buf, kb, plen) == 0;
            memcpy(run.first.buf, kb, klen);
            run.first.len = klen;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        if (vlen == 8) {
            /* Written before last-use stamps: counts as used now, so that
             * an upgrade does not expire every device at its first sweep. */
            char val[16];
            memcpy(val, v, 8);
            put_u64(val + 8, (uint64_t)now);
            leveldb_writebatch_put(wb, kb, klen, val, sizeof(val));
            run.all_gone = false;
        } else if (vlen != 16 || (int64_t)get_u64(v + 8) < older_than_ms) {
            /* Stale, or unreadable: a device that comes back starts where
             * the member's most advanced device was ('X' stays, unless the
             * member goes with it). */
            leveldb_writebatch_delete(wb, kb, klen);
            gone++;
        } else {
            run.all_gone = false;
        }
        memcpy(last.buf, kb, klen);
        last.len = klen;
        visited++;
        leveldb_iter_next(it);
    }
    /* A run the step's bound cut off goes on in the next step, which
     * decides for its member. */
    if (rc == CHAT_OK && !err && run.active && (finished || !run_goes_on(it, &run))) {
        rc = finish_run(x, &run);
    }
    if (rc == CHAT_OK && !err) {
        rc = flush_count(x);
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = ldb_read_key_error(st, err, last.buf, last.len);
    } else if (rc == CHAT_OK && visited > 0) {
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &last);
    }
    leveldb_writebatch_destroy(wb);
    size_t members = x->members;
    free(x);
    if (rc != CHAT_OK) {
        return rc;
    }
    out->devices = gone;
    out->members = members;
    *done = finished;
    if (finished || visited > 0) {
        ldb_resume_put(resume, finished ? NULL : &last);
    }
    return CHAT_OK;
}
