/* ldb_push: push registrations (see ldb_push.h). */
#include "ldb_push.h"
#include "ldb_cursor.h"
#include "ldb_member.h"

#include <stdlib.h>
#include <string.h>

#define CREATED_LEN 8 /* the value starts with when it was made */

/* ------------------------------------------------------------------------
 * Whether a member still belongs to a group (push-with-member)
 * --------------------------------------------------------------------- */

struct other_group {
    size_t plen;        /* the 'G' prefix's length: the group's name follows */
    const char *except; /* a group that does not count (its membership is going), or NULL */
    bool found;
};

static chat_err visit_other(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                            size_t vlen, bool *stop)
{
    struct other_group *o = ctx;
    const char *name = k + o->plen;
    size_t n = klen - o->plen;
    rec r;
    bool live = false;
    if (o->except && strlen(o->except) == n && memcmp(name, o->except, n) == 0) {
        return CHAT_OK;
    }
    if (!ldb_decode(TAG_GROUPS, v, vlen, &r)) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    chat_err rc = ldb_membership_live(st, name, n, &r, &live);
    o->found = rc == CHAT_OK && live;
    *stop = o->found;
    return rc;
}

/* Whether member (mlen bytes at m) has a membership that counts in a group
 * other than except (NULL: any). */
static chat_err in_a_group(ldb *st, const char *m, size_t mlen, const char *except, bool *found)
{
    key prefix;
    key_init(&prefix, TAG_GROUPS);
    key_part(&prefix, m, mlen);
    if (prefix.overflow) {
        return CHAT_EINVAL;
    }
    struct other_group o = {prefix.len, except, false};
    chat_err rc = ldb_walk(st, &prefix, visit_other, &o);
    *found = o.found;
    return rc;
}

static chat_err visit_delete(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                             size_t vlen, bool *stop)
{
    (void)st, (void)v, (void)vlen, (void)stop;
    leveldb_writebatch_delete(ctx, k, klen);
    return CHAT_OK;
}

chat_err ldb_push_orphans_add(ldb *st, const char *m, size_t mlen, const char *except_group,
                              leveldb_writebatch_t *wb)
{
    key prefix;
    bool other = false;
    chat_err rc = in_a_group(st, m, mlen, except_group, &other);
    if (rc != CHAT_OK || other) {
        return rc;
    }
    key_init(&prefix, TAG_PUSH);
    key_part(&prefix, m, mlen);
    return prefix.overflow ? CHAT_EINVAL : ldb_walk(st, &prefix, visit_delete, wb);
}

/* ------------------------------------------------------------------------
 * One registration
 * --------------------------------------------------------------------- */

struct count_others {
    key own; /* the key of the one being replaced, which does not count */
    size_t n;
};

static chat_err visit_count(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                            size_t vlen, bool *stop)
{
    struct count_others *c = ctx;
    (void)st, (void)v, (void)vlen, (void)stop;
    c->n += !(klen == c->own.len && memcmp(k, c->own.buf, klen) == 0);
    return CHAT_OK;
}

chat_err ldb_push_put(chat_store *cs, const char *member, const char *device, const void *reg,
                      size_t len, int64_t created_ms, size_t max_per_member, chat_push_put *result)
{
    ldb *st = ldb_of(cs);
    key k, prefix;
    bool member_of = false;

    push_key(&k, member, device);
    push_key(&prefix, member, NULL);
    if (k.overflow || prefix.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = in_a_group(st, member, strlen(member), NULL, &member_of);
    if (rc != CHAT_OK || !member_of) {
        return rc; /* *result stays CHAT_PUSH_NO_GROUP */
    }
    struct count_others c = {k, 0};
    rc = ldb_walk(st, &prefix, visit_count, &c);
    if (rc != CHAT_OK) {
        return rc;
    }
    if (c.n >= max_per_member) {
        *result = CHAT_PUSH_FULL;
        return CHAT_OK;
    }
    char *val = malloc(CREATED_LEN + len);
    if (!val) {
        return CHAT_ENOMEM;
    }
    put_u64(val, (uint64_t)created_ms);
    memcpy(val + CREATED_LEN, reg, len);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_put(wb, k.buf, k.len, val, CREATED_LEN + len);
    rc = ldb_write_batch(st, wb, st->wopt_lazy, &k);
    leveldb_writebatch_destroy(wb);
    free(val);
    if (rc == CHAT_OK) {
        *result = CHAT_PUSH_STORED;
    }
    return rc;
}

chat_err ldb_push_get(chat_store *cs, const char *member, const char *device, char **reg,
                      size_t *len, int64_t *created_ms, bool *found)
{
    ldb *st = ldb_of(cs);
    key k;
    char *err = NULL;
    size_t vlen = 0;

    push_key(&k, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    char *v = leveldb_get(st->db, st->ropt, k.buf, k.len, &vlen, &err);
    if (err) {
        return ldb_read_key_error(st, err, k.buf, k.len);
    }
    if (!v) {
        return CHAT_OK;
    }
    chat_err rc = CHAT_OK;
    if (vlen <= CREATED_LEN) {
        rc = ldb_corrupt_key(st, k.buf, k.len, vlen);
    } else if (!(*reg = malloc(vlen - CREATED_LEN + 1))) {
        rc = CHAT_ENOMEM;
    } else {
        memcpy(*reg, v + CREATED_LEN, vlen - CREATED_LEN);
        (*reg)[vlen - CREATED_LEN] = '\0';
        *len = vlen - CREATED_LEN;
        *created_ms = (int64_t)get_u64(v);
        *found = true;
    }
    leveldb_free(v);
    return rc;
}

chat_err ldb_push_remove(chat_store *cs, const char *member, const char *device, const void *if_reg,
                         size_t if_len, bool *removed)
{
    ldb *st = ldb_of(cs);
    key k;
    char *reg = NULL;
    size_t len = 0;
    int64_t created = 0;
    bool found = false;

    push_key(&k, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_push_get(cs, member, device, &reg, &len, &created, &found);
    bool same = found && (!if_reg || (len == if_len && memcmp(reg, if_reg, len) == 0));
    free(reg);
    if (rc != CHAT_OK || !same) {
        return rc;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_delete(wb, k.buf, k.len);
    rc = ldb_write_batch(st, wb, st->wopt_lazy, &k);
    leveldb_writebatch_destroy(wb);
    *removed = rc == CHAT_OK;
    return rc;
}

/* ------------------------------------------------------------------------
 * The walks
 * --------------------------------------------------------------------- */

struct list_walk {
    size_t plen; /* the 'P' m prefix's length: the device part follows */
    chat_push_fn fn;
    void *ctx;
};

static chat_err visit_list(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                           size_t vlen, bool *stop)
{
    struct list_walk *w = ctx;
    const char *p = k + w->plen, *d = NULL;
    size_t dlen = 0;
    char device[MAX_PART + 1];
    if (!next_part(&p, k + klen, &d, &dlen) || p != k + klen || vlen <= CREATED_LEN) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    memcpy(device, d, dlen);
    device[dlen] = '\0';
    *stop = w->fn(w->ctx, device, v + CREATED_LEN, vlen - CREATED_LEN, (int64_t)get_u64(v)) != 0;
    return CHAT_OK;
}

chat_err ldb_push_list(chat_store *cs, const char *member, chat_push_fn fn, void *ctx)
{
    key prefix;
    push_key(&prefix, member, NULL);
    if (prefix.overflow) {
        return CHAT_EINVAL;
    }
    struct list_walk w = {prefix.len, fn, ctx};
    return ldb_walk(ldb_of(cs), &prefix, visit_list, &w);
}

/* One member's registrations handed to the caller of push_members, with
 * seen worked out at the first; one iterator serves every member of a
 * call (a seek per member, not an iterator). Returns the read error, with
 * *stopped set when fn stopped the walk. */
static chat_err member_regs(ldb *st, leveldb_iterator_t *it, const char *group, const char *member,
                            uint64_t joined, chat_push_member_fn fn, void *ctx, bool *stopped)
{
    key prefix;
    uint64_t seen = 0;
    bool have_seen = false;
    char *err = NULL;
    chat_err rc = CHAT_OK;

    push_key(&prefix, member, NULL);
    if (prefix.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_iter_seek(it, prefix.buf, prefix.len);
    while (rc == CHAT_OK && !*stopped && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        const char *p = kb + prefix.len, *d = NULL;
        size_t dlen = 0;
        char device[MAX_PART + 1];
        if (!next_part(&p, kb + klen, &d, &dlen) || p != kb + klen || vlen <= CREATED_LEN) {
            rc = ldb_corrupt_key(st, kb, klen, vlen);
            break;
        }
        if (!have_seen) {
            uint64_t best = 0;
            bool found = false;
            rc = ldb_cursor_max(&st->base, group, member, &best, &found);
            seen = found && best > joined ? best : joined;
            have_seen = true;
        }
        if (rc == CHAT_OK) {
            memcpy(device, d, dlen);
            device[dlen] = '\0';
            *stopped = fn(ctx, member, seen, device, v + CREATED_LEN, vlen - CREATED_LEN) != 0;
            leveldb_iter_next(it);
        }
    }
    return err ? ldb_read_key_error(st, err, prefix.buf, prefix.len) : rc;
}

chat_err ldb_push_members(chat_store *cs, const char *group, const char *after, size_t max,
                          chat_push_member_fn fn, void *ctx, char *last, size_t last_cap,
                          bool *done)
{
    ldb *st = ldb_of(cs);
    key prefix, start;
    char name[MAX_PART + 1];
    size_t looked = 0;
    char *err = NULL;
    chat_err rc = CHAT_OK;
    bool stopped = false;

    (void)last_cap; /* at least CHAT_STORE_MAX_NAME + 1 (store_push.c checked) */
    key_init(&prefix, TAG_READ);
    key_str(&prefix, group);
    start = prefix;
    if (after) {
        key_raw(&start, after);
    }
    if (prefix.overflow || start.overflow) {
        return CHAT_EINVAL;
    }
    /* Members in name order, as the 'R' records keep them (invariant 8),
     * so that the walk goes on after the last one whatever joined since. */
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iterator_t *regs = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, start.buf, start.len);
    bool end = true;
    while (rc == CHAT_OK && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        size_t n = klen - prefix.len;
        if (n > MAX_PART) {
            rc = ldb_corrupt_key(st, kb, klen, 0);
            break;
        }
        memcpy(name, kb + prefix.len, n);
        name[n] = '\0';
        if (after && strcmp(name, after) <= 0) {
            leveldb_iter_next(it); /* `after` itself */
            continue;
        }
        if (looked == max) {
            end = false;
            break;
        }
        looked++;
        uint64_t joined = 0;
        bool live = false;
        /* A membership a deletion did away with is passed over, as
         * ldb_reads does. */
        rc = ldb_member_get(cs, group, name, &joined, &live);
        if (rc == CHAT_OK && live) {
            rc = member_regs(st, regs, group, name, joined, fn, ctx, &stopped);
        }
        if (stopped) {
            end = false;
            break;
        }
        if (rc == CHAT_OK) {
            memcpy(last, name, n + 1);
        }
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(regs);
    leveldb_iter_destroy(it);
    if (err) {
        return ldb_read_key_error(st, err, prefix.buf, prefix.len);
    }
    *done = rc == CHAT_OK && end && !stopped;
    return rc;
}

/* ------------------------------------------------------------------------
 * Registrations whose device is gone
 * --------------------------------------------------------------------- */

struct any_cursor {
    size_t plen; /* the 'G' prefix's length: the group's name follows */
    const char *member, *device;
    bool found;
};

static chat_err visit_cursor_group(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                                   size_t vlen, bool *stop)
{
    struct any_cursor *a = ctx;
    char group[MAX_PART + 1];
    size_t n = klen - a->plen;
    key kc;
    rec r;
    (void)v, (void)vlen;
    if (n > MAX_PART) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    memcpy(group, k + a->plen, n);
    group[n] = '\0';
    cursor_key(&kc, group, a->member, a->device);
    chat_err rc = kc.overflow ? CHAT_OK : ldb_get_rec(st, &kc, &r, &a->found);
    *stop = a->found;
    return rc;
}

/* Whether device of member has a cursor in one of the member's groups. */
static chat_err has_cursor(ldb *st, const char *member, const char *device, bool *found)
{
    key prefix;
    key_init(&prefix, TAG_GROUPS);
    key_str(&prefix, member);
    if (prefix.overflow) {
        *found = true; /* not ours to judge: keep it */
        return CHAT_OK;
    }
    struct any_cursor a = {prefix.len, member, device, false};
    chat_err rc = ldb_walk(st, &prefix, visit_cursor_group, &a);
    *found = a.found;
    return rc;
}

chat_err ldb_push_expire(chat_store *cs, int64_t older_than_ms, size_t max_keys, char *resume,
                         size_t resume_cap, size_t *removed, bool *done)
{
    ldb *st = ldb_of(cs);
    key start, last;
    size_t visited = 0, gone = 0;
    bool finished = false;
    char *err = NULL;
    chat_err rc = CHAT_OK;

    (void)resume_cap; /* at least CHAT_STORE_RESUME_MAX (store_push.c checked) */
    size_t rlen = ((size_t)(unsigned char)resume[0] << 8) | (unsigned char)resume[1];
    if (rlen > sizeof(start.buf) || (rlen > 0 && resume[2] != TAG_PUSH)) {
        return CHAT_EINVAL;
    }
    key_init(&start, TAG_PUSH);
    if (rlen > 0) {
        memcpy(start.buf, resume + 2, rlen);
        start.len = rlen;
    }
    last = start;
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    err = iter_seek_after(it, start.buf, start.len, rlen > 0);
    while (rc == CHAT_OK && !err && !(err = iter_error(it))) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        if (!kb || klen < 1 || kb[0] != TAG_PUSH) {
            finished = true;
            break;
        }
        if (visited == max_keys || klen > sizeof(last.buf)) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        const char *p = kb + 1, *m = NULL, *d = NULL;
        size_t mlen = 0, dlen = 0;
        char member[MAX_PART + 1], device[MAX_PART + 1];
        if (!next_part(&p, kb + klen, &m, &mlen) || !next_part(&p, kb + klen, &d, &dlen) ||
            vlen <= CREATED_LEN) {
            /* A record of the wrong shape reaches nobody: it goes. */
            leveldb_writebatch_delete(wb, kb, klen);
            gone++;
        } else if ((int64_t)get_u64(v) < older_than_ms) {
            bool found = false;
            memcpy(member, m, mlen);
            member[mlen] = '\0';
            memcpy(device, d, dlen);
            device[dlen] = '\0';
            rc = has_cursor(st, member, device, &found);
            if (rc == CHAT_OK && !found) {
                leveldb_writebatch_delete(wb, kb, klen);
                gone++;
            }
        }
        memcpy(last.buf, kb, klen);
        last.len = klen;
        visited++;
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = ldb_read_key_error(st, err, last.buf, last.len);
    } else if (rc == CHAT_OK && gone > 0) {
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
