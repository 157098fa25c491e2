/* ldb_push: push registrations (see ldb_push.h). */
#include "ldb_push.h"
#include "ldb_cursor.h"
#include "ldb_member.h"
#include "ldb_read.h"

#include <stdlib.h>
#include <string.h>

#define CREATED_LEN 8 /* the value starts with when it was made */

/* ------------------------------------------------------------------------
 * Whether a member still belongs to a group (push-with-member)
 * --------------------------------------------------------------------- */

struct other_group {
    const char *except; /* a group that does not count (its membership is going), or NULL */
    bool found;
};

static int other_group(void *ctx, const char *group, uint64_t joined)
{
    struct other_group *o = ctx;
    (void)joined;
    o->found = !o->except || strcmp(group, o->except) != 0;
    return o->found;
}

/* Whether member has a membership that counts in a group other than
 * except (NULL: any). */
static chat_err in_a_group(ldb *st, const char *member, const char *except, bool *found)
{
    struct other_group o = {except, false};
    chat_err rc = ldb_member_groups(&st->base, member, other_group, &o);
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
    char member[MAX_PART + 1];
    bool other = false;
    if (mlen > MAX_PART) {
        return CHAT_EINVAL;
    }
    memcpy(member, m, mlen);
    member[mlen] = '\0';
    chat_err rc = in_a_group(st, member, except_group, &other);
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
    chat_err rc = in_a_group(st, member, NULL, &member_of);
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

/* The 'P' record at k: its value (leveldb_free), or NULL without one; a
 * value too short to hold a registration is damage. */
static chat_err reg_read(ldb *st, const key *k, char **v, size_t *vlen)
{
    char *err = NULL;
    *v = leveldb_get(st->db, st->ropt, k->buf, k->len, vlen, &err);
    if (err) {
        return ldb_read_key_error(st, err, k->buf, k->len);
    }
    if (*v && *vlen <= CREATED_LEN) {
        leveldb_free(*v);
        *v = NULL;
        return ldb_corrupt_key(st, k->buf, k->len, *vlen);
    }
    return CHAT_OK;
}

chat_err ldb_push_get(chat_store *cs, const char *member, const char *device, char **reg,
                      size_t *len, int64_t *created_ms, bool *found)
{
    key k;
    char *v = NULL;
    size_t vlen = 0;

    push_key(&k, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = reg_read(ldb_of(cs), &k, &v, &vlen);
    if (rc != CHAT_OK || !v) {
        return rc;
    }
    if (!(*reg = malloc(vlen - CREATED_LEN + 1))) {
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
    char *v = NULL;
    size_t vlen = 0;

    push_key(&k, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = reg_read(st, &k, &v, &vlen);
    bool same =
        v &&
        (!if_reg || (vlen - CREATED_LEN == if_len && memcmp(v + CREATED_LEN, if_reg, if_len) == 0));
    leveldb_free(v);
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

struct members_walk {
    ldb *st;
    leveldb_iterator_t *regs; /* sought to each counting member's 'P' records */
    const char *group;
    chat_push_member_fn fn;
    void *ctx;
    size_t max, looked;
    char *last;
    bool stopped; /* by fn, or at max */
};

static chat_err visit_member(void *ctx, const char *member, uint64_t marker, bool live,
                             uint64_t joined, bool *stop)
{
    struct members_walk *w = ctx;
    chat_err rc = CHAT_OK;
    (void)marker;
    if (w->looked == w->max) {
        w->stopped = *stop = true;
        return CHAT_OK;
    }
    w->looked++;
    /* A membership a deletion did away with is passed over, as ldb_reads
     * does. */
    if (live) {
        rc = member_regs(w->st, w->regs, w->group, member, joined, w->fn, w->ctx, &w->stopped);
    }
    if (w->stopped) {
        *stop = true;
    } else if (rc == CHAT_OK) {
        memcpy(w->last, member, strlen(member) + 1);
    }
    return rc;
}

chat_err ldb_push_members(chat_store *cs, const char *group, const char *after, size_t max,
                          chat_push_member_fn fn, void *ctx, char *last, size_t last_cap,
                          bool *done)
{
    ldb *st = ldb_of(cs);
    (void)last_cap; /* at least CHAT_STORE_MAX_NAME + 1 (store_push.c checked) */
    /* Members in name order, as the 'R' records keep them, so that the
     * walk goes on after the last one whatever joined since. */
    struct members_walk w = {
        st, leveldb_create_iterator(st->db, st->ropt), group, fn, ctx, max, 0, last, false};
    chat_err rc = ldb_read_walk(st, group, after, visit_member, &w);
    leveldb_iter_destroy(w.regs);
    *done = rc == CHAT_OK && !w.stopped;
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
    bool after = false;
    if (!ldb_resume_get(resume, TAG_PUSH, &start, &after)) {
        return CHAT_EINVAL;
    }
    last = start;
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    err = iter_seek_after(it, start.buf, start.len, after);
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
    if (finished || visited > 0) {
        ldb_resume_put(resume, finished ? NULL : &last);
    }
    return CHAT_OK;
}
