/* ldb_admin: operators' operations on the LevelDB backend (see ldb_admin.h). */
#include "ldb_admin.h"
#include "ldb_log.h"
#include "ldb_member.h"
#include "store_text.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Positions it after `start` (on it when not exact): the first key of a
 * walk that resumes after a name. */
static void seek_after(leveldb_iterator_t *it, const key *start, bool exact_skip)
{
    leveldb_iter_seek(it, start->buf, start->len);
    if (exact_skip && leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen == start->len && memcmp(kb, start->buf, klen) == 0) {
            leveldb_iter_next(it);
        }
    }
}

/* ------------------------------------------------------------------------
 * Members and devices
 * --------------------------------------------------------------------- */

chat_err ldb_group_members(chat_store *cs, const char *group, const char *after, size_t max,
                           chat_member_fn fn, void *ctx, bool *done)
{
    ldb *st = ldb_of(cs);
    key prefix, start;
    char name[MAX_PART + 1];
    char *err = NULL;
    size_t seen = 0;
    chat_err rc = CHAT_OK;

    group_key(&prefix, TAG_JOIN, group);
    start = prefix;
    if (after) {
        key_str(&start, after);
    }
    if (prefix.overflow || start.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    seek_after(it, &start, after != NULL);
    while (rc == CHAT_OK && !(err = iter_error(it))) {
        size_t klen = 0, vlen = 0, mlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        const char *m = NULL;
        if (!kb || klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            *done = true;
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        const char *p = kb + prefix.len;
        rec r;
        bool live = false;
        if (!next_part(&p, kb + klen, &m, &mlen) || p != kb + klen ||
            !ldb_decode(TAG_JOIN, v, vlen, &r)) {
            rc = ldb_corrupt_key(st, kb, klen, vlen);
            break;
        }
        rc = ldb_membership_live(st, group, strlen(group), &r, &live);
        if (rc == CHAT_OK && live) {
            if (seen == max) {
                break;
            }
            seen++;
            memcpy(name, m, mlen);
            name[mlen] = '\0';
            if (fn(ctx, name, r.v) != 0) {
                break;
            }
        }
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(it);
    return err ? ldb_read_key_error(st, err, prefix.buf, prefix.len) : rc;
}

chat_err ldb_member_devices(chat_store *cs, const char *group, const char *member, size_t max,
                            chat_device_fn fn, void *ctx, bool *done)
{
    ldb *st = ldb_of(cs);
    key prefix;
    char name[MAX_PART + 1];
    char *err = NULL;
    size_t seen = 0;
    chat_err rc = CHAT_OK;

    cursor_key(&prefix, group, member, NULL);
    if (prefix.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, prefix.buf, prefix.len);
    while (!(err = iter_error(it))) {
        size_t klen = 0, vlen = 0, dlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        const char *d = NULL;
        if (!kb || klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            *done = true;
            break;
        }
        if (seen == max) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        const char *p = kb + prefix.len;
        rec r;
        if (!next_part(&p, kb + klen, &d, &dlen) || p != kb + klen ||
            !ldb_decode(TAG_CURSOR, v, vlen, &r)) {
            rc = ldb_corrupt_key(st, kb, klen, vlen);
            break;
        }
        seen++;
        memcpy(name, d, dlen);
        name[dlen] = '\0';
        if (fn(ctx, name, r.v, (int64_t)r.x) != 0) {
            break;
        }
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(it);
    return err ? ldb_read_key_error(st, err, prefix.buf, prefix.len) : rc;
}

/* ------------------------------------------------------------------------
 * Deletions under way, and a group's start
 * --------------------------------------------------------------------- */

struct deletions_walk {
    chat_head_fn fn;
    void *ctx;
};

static chat_err visit_deletion(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                               size_t vlen, bool *stop)
{
    struct deletions_walk *w = ctx;
    const char *p = k + 1, *g = NULL;
    size_t glen = 0;
    char name[MAX_PART + 1];
    if (!next_part(&p, k + klen, &g, &glen) || p != k + klen) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    (void)v;
    memcpy(name, g, glen);
    name[glen] = '\0';
    *stop = w->fn(w->ctx, name, 0) != 0;
    return CHAT_OK;
}

chat_err ldb_deletions(chat_store *cs, chat_head_fn fn, void *ctx)
{
    key prefix;
    struct deletions_walk w = {fn, ctx};
    key_init(&prefix, TAG_DELETE);
    return ldb_walk(ldb_of(cs), &prefix, visit_deletion, &w);
}

chat_err ldb_group_init(chat_store *cs, const char *group, uint64_t head)
{
    ldb *st = ldb_of(cs);
    key kh, kf;
    uint64_t now = 0;
    group_key(&kh, TAG_HEAD, group);
    group_key(&kf, TAG_FIRST, group);
    if (kh.overflow || kf.overflow || head >= UINT64_MAX / 2) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_head(cs, group, &now);
    if (rc != CHAT_OK) {
        return rc;
    }
    if (now != 0) {
        return CHAT_ECONFLICT;
    }
    if (head == 0) {
        return CHAT_OK;
    }
    char n[8];
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    ldb_batch_put(wb, &kh, head);
    ldb_batch_put(wb, &kf, head + 1);
    put_u64(n, st->groups + 1);
    ldb_put_meta(wb, META_GROUPS, n, sizeof(n));
    rc = ldb_write_batch(st, wb, st->wopt, &kh);
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK) {
        st->groups++;
    }
    return rc;
}

/* ------------------------------------------------------------------------
 * Checking a store
 * --------------------------------------------------------------------- */

struct check {
    ldb *st;
    chat_problem_fn fn;
    void *ctx;
    uint64_t problems;
};

static void problem(struct check *c, const char *group, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct check *c, const char *group, const char *fmt, ...)
{
    char text[CHAT_STORE_ERROR_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    c->problems++;
    c->fn(c->ctx, group, text);
}

/* Reports an iterator's read error (and frees it); true when there was one. */
static bool read_failed(struct check *c, const char *group, leveldb_iterator_t *it,
                        const char *what)
{
    char *err = iter_error(it);
    if (!err) {
        return false;
    }
    problem(c, group, "cannot read its %s: %s", what, err);
    leveldb_free(err);
    return true;
}

/* The messages of one group: ids first..head, each once, each naming its
 * none above head; none below first unless a deletion is under
 * way (it removes them step by step). */
static void check_messages(struct check *c, const char *group, uint64_t first, uint64_t head,
                           bool deleting)
{
    key prefix;
    uint64_t expect = first, highest = 0, below = 0;
    group_key(&prefix, TAG_MSG, group);
    leveldb_iterator_t *it = leveldb_create_iterator(c->st->db, c->st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len); leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        if (klen != prefix.len + 8) {
            problem(c, group, "a message key of %zu bytes", klen);
            continue;
        }
        uint64_t id = get_u64(kb + prefix.len);
        highest = id > highest ? id : highest;
        if (id < first) {
            below++;
            continue;
        }
        if (id > expect) {
            problem(c, group, "messages %" PRIu64 " to %" PRIu64 " are missing", expect, id - 1);
        }
        expect = id + 1;
    }
    if (!read_failed(c, group, it, "messages") && expect <= head) {
        problem(c, group, "messages %" PRIu64 " to %" PRIu64 " are missing", expect, head);
    }
    leveldb_iter_destroy(it);
    if (highest > head) {
        problem(c, group, "head is %" PRIu64 " but message %" PRIu64 " is stored", head, highest);
    }
    if (below && !deleting) {
        problem(c, group, "%" PRIu64 " messages below first (%" PRIu64 ") are still stored", below,
                first);
    }
}

/* Cursors ('C') and maximum cursors ('X') of one group: none above head. */
static void check_cursors(struct check *c, const char *group, char tag, uint64_t head)
{
    key prefix;
    group_key(&prefix, tag, group);
    leveldb_iterator_t *it = leveldb_create_iterator(c->st->db, c->st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len); leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0, mlen = 0, dlen = 0;
        const char *kb = leveldb_iter_key(it, &klen), *m = "", *d = "";
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        const char *p = kb + prefix.len, *end = kb + klen;
        rec r;
        bool named =
            next_part(&p, end, &m, &mlen) && (tag != TAG_CURSOR || next_part(&p, end, &d, &dlen));
        if (!named || p != end || !ldb_decode(tag, v, vlen, &r)) {
            problem(c, group, "a %s record of the wrong shape",
                    tag == TAG_CURSOR ? "cursor" : "maximum cursor");
            continue;
        }
        if (r.v > head) {
            problem(c, group, "the %s of %.*s%s%.*s is %" PRIu64 ", above head %" PRIu64,
                    tag == TAG_CURSOR ? "cursor" : "maximum cursor", (int)(mlen > 200 ? 200 : mlen),
                    m, tag == TAG_CURSOR ? "/" : "", (int)(dlen > 200 ? 200 : dlen), d, r.v, head);
        }
    }
    read_failed(c, group, it, tag == TAG_CURSOR ? "cursors" : "maximum cursors");
    leveldb_iter_destroy(it);
}

/* Memberships of one group: every 'J' g m has its 'G' m g (invariant member-pairs). */
static void check_members(struct check *c, const char *group)
{
    key prefix;
    group_key(&prefix, TAG_JOIN, group);
    leveldb_iterator_t *it = leveldb_create_iterator(c->st->db, c->st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len); leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen = 0, mlen = 0;
        const char *kb = leveldb_iter_key(it, &klen), *m = NULL;
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        const char *p = kb + prefix.len;
        if (!next_part(&p, kb + klen, &m, &mlen) || p != kb + klen) {
            problem(c, group, "a membership record of the wrong shape");
            continue;
        }
        key kg;
        key_init(&kg, TAG_GROUPS);
        key_part(&kg, m, mlen);
        key_raw(&kg, group);
        char *err = NULL;
        size_t vlen = 0;
        char *v =
            kg.overflow ? NULL : leveldb_get(c->st->db, c->st->ropt, kg.buf, kg.len, &vlen, &err);
        if (err) {
            problem(c, group, "cannot read a membership index record: %s", err);
            leveldb_free(err);
        } else if (!v) {
            problem(c, group, "the membership of %.*s has no index record",
                    (int)(mlen > 200 ? 200 : mlen), m);
        }
        leveldb_free(v);
    }
    read_failed(c, group, it, "memberships");
    leveldb_iter_destroy(it);
}

struct check_group {
    struct check *c;
    uint64_t groups;
    char last[MAX_PART + 1]; /* the group checked last: the next run's start */
};

static int check_one(void *ctx, const char *group, uint64_t head)
{
    struct check_group *cg = ctx;
    struct check *c = cg->c;
    uint64_t first = 1;
    key kd;
    bool deleting = false;

    cg->groups++;
    snprintf(cg->last, sizeof(cg->last), "%s", group);
    chat_err rc = ldb_first(&c->st->base, group, &first);
    if (rc != CHAT_OK) {
        problem(c, group, "cannot read its first id: %s", chat_store_last_error(&c->st->base));
        return 0;
    }
    group_key(&kd, TAG_DELETE, group);
    if (!kd.overflow) {
        char *err = NULL;
        size_t vlen = 0;
        char *v = leveldb_get(c->st->db, c->st->ropt, kd.buf, kd.len, &vlen, &err);
        deleting = v != NULL;
        leveldb_free(v);
        leveldb_free(err);
    }
    if (first > head + 1) {
        problem(c, group, "first (%" PRIu64 ") is above head + 1 (%" PRIu64 ")", first, head + 1);
    }
    check_messages(c, group, first, head, deleting);
    check_cursors(c, group, TAG_CURSOR, head);
    check_cursors(c, group, TAG_MAX, head);
    check_members(c, group);
    return 0;
}

/* Reads every record once: LevelDB verifies each block's checksum as it
 * reads it, and skips (remembering the error) a block it cannot read. */
static void check_all_blocks(struct check *c, uint64_t *heads)
{
    leveldb_iterator_t *it = leveldb_create_iterator(c->st->db, c->st->ropt);
    *heads = 0;
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        (void)leveldb_iter_value(it, &vlen);
        *heads += klen > 0 && kb[0] == TAG_HEAD;
    }
    read_failed(c, "", it, "table files (a damaged block)");
    leveldb_iter_destroy(it);
}

chat_err ldb_check(chat_store *cs, chat_problem_fn fn, void *ctx, uint64_t *groups,
                   uint64_t *problems)
{
    ldb *st = ldb_of(cs);
    struct check c = {st, fn, ctx, 0};
    struct check_group cg = {&c, 0, ""};
    bool done = false;
    uint64_t heads = 0;

    /* Group by group, in runs that resume after the last one checked. */
    while (!done) {
        uint64_t before = cg.groups;
        char after[MAX_PART + 1];
        snprintf(after, sizeof(after), "%s", cg.last);
        chat_err rc = ldb_groups(cs, before ? after : NULL, 64, check_one, &cg, &done);
        if (rc != CHAT_OK) {
            problem(&c, "", "cannot list the groups: %s", chat_store_last_error(cs));
            break;
        }
        if (cg.groups == before) {
            break;
        }
    }
    check_all_blocks(&c, &heads);
    if (heads != st->groups) {
        problem(&c, "", "the groups count says %" PRIu64 " but %" PRIu64 " groups have a head",
                st->groups, heads);
    }
    *groups = cg.groups;
    *problems = c.problems;
    return CHAT_OK;
}
