/* ldb_read: read markers (see ldb_read.h). */
#include "ldb_read.h"
#include "ldb_cursor.h"
#include "ldb_log.h"
#include "ldb_member.h"
#include "store_text.h"

#include <string.h>

#define UPGRADE_BATCH 10000u /* records per batch of the upgrade */

chat_err ldb_read_get(chat_store *cs, const char *group, const char *member, uint64_t *id)
{
    key kr;
    bool found = false;
    read_key(&kr, group, member);
    if (kr.overflow) {
        return CHAT_EINVAL;
    }
    return ldb_get_u64(ldb_of(cs), &kr, id, &found);
}

chat_err ldb_read_advance(chat_store *cs, const char *group, const char *member, const char *device,
                          uint64_t id, uint64_t *read, uint64_t *acked, bool *moved, bool *found)
{
    ldb *st = ldb_of(cs);
    key kr;
    uint64_t joined = 0, head = 0, marker = 0, cursor = 0;
    bool put = false;

    read_key(&kr, group, member);
    if (kr.overflow) {
        return CHAT_EINVAL;
    }
    /* Only a member has a marker (invariant read-markers). */
    chat_err rc = ldb_member_get(cs, group, member, &joined, found);
    if (rc != CHAT_OK || !*found) {
        return rc;
    }
    rc = ldb_head(cs, group, &head);
    if (rc == CHAT_OK) {
        rc = ldb_read_get(cs, group, member, &marker);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    if (id > head) {
        id = head;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    /* What the member read, this device has received: its cursor moves in
     * the same batch, so that no crash leaves a marker ahead of the ack it
     * implies. */
    rc = ldb_cursor_advance_add(st, group, member, device, id, wb, &cursor, &put);
    bool move = id > marker;
    if (rc == CHAT_OK && move) {
        ldb_batch_put(wb, &kr, id);
    }
    if (rc == CHAT_OK && (put || move)) {
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &kr);
    }
    leveldb_writebatch_destroy(wb);
    if (rc != CHAT_OK) {
        return rc;
    }
    *read = move ? id : marker;
    *acked = cursor;
    *moved = move;
    return CHAT_OK;
}

/* ------------------------------------------------------------------------
 * The members of a group in name order
 * --------------------------------------------------------------------- */

chat_err ldb_read_walk(ldb *st, const char *group, const char *after, ldb_read_visit_fn *fn,
                       void *ctx)
{
    key prefix, start;
    char name[MAX_PART + 1];
    char *err = NULL;
    chat_err rc = CHAT_OK;
    bool stop = false;

    key_init(&prefix, TAG_READ);
    key_str(&prefix, group);
    start = prefix;
    if (after) {
        key_raw(&start, after);
    }
    if (prefix.overflow || start.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, start.buf, start.len);
    while (rc == CHAT_OK && !stop && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
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
        const char *v = leveldb_iter_value(it, &vlen);
        if (vlen != 8) {
            rc = ldb_corrupt_key(st, kb, klen, vlen);
            break;
        }
        uint64_t joined = 0;
        bool live = false;
        rc = ldb_member_get(&st->base, group, name, &joined, &live);
        if (rc == CHAT_OK) {
            rc = fn(ctx, name, get_u64(v), live, joined, &stop);
        }
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(it);
    return err ? ldb_read_key_error(st, err, prefix.buf, prefix.len) : rc;
}

struct reads_walk {
    chat_read_fn fn;
    void *ctx;
    size_t max, given;
    bool *more;
};

static chat_err visit_read(void *ctx, const char *member, uint64_t marker, bool live,
                           uint64_t joined, bool *stop)
{
    struct reads_walk *w = ctx;
    (void)joined;
    if (!live) {
        return CHAT_OK;
    }
    if (w->given == w->max || w->fn(w->ctx, member, marker) != 0) {
        *w->more = *stop = true;
        return CHAT_OK;
    }
    w->given++;
    return CHAT_OK;
}

chat_err ldb_reads(chat_store *cs, const char *group, const char *after, size_t max,
                   chat_read_fn fn, void *ctx, bool *more)
{
    struct reads_walk w = {fn, ctx, max, 0, more};
    return ldb_read_walk(ldb_of(cs), group, after, visit_read, &w);
}

/* ------------------------------------------------------------------------
 * Upgrade of a store from before read markers
 * --------------------------------------------------------------------- */

/* What the upgrade carries from one 'J' record to the next. */
struct upgrade {
    leveldb_writebatch_t *wb;
    size_t puts;          /* records in wb */
    key count;            /* 'N' of the group being counted; len 0: none yet */
    uint64_t members;     /* members of that group that count */
    char group[MAX_PART]; /* that group, as in its keys */
    size_t glen;
};

/* Adds the member count of the group just walked to wb. */
static void put_count(struct upgrade *u)
{
    if (u->count.len == 0) {
        return;
    }
    if (u->members > 0) {
        ldb_batch_put(u->wb, &u->count, u->members);
    } else {
        leveldb_writebatch_delete(u->wb, u->count.buf, u->count.len);
    }
    u->puts++;
}

static chat_err visit_join(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                           size_t vlen, bool *stop)
{
    struct upgrade *u = ctx;
    const char *p = k + 1, *end = k + klen, *g = NULL, *m = NULL;
    size_t gl = 0, ml = 0;
    bool live = false;
    rec r;
    (void)stop;
    if (!next_part(&p, end, &g, &gl) || !next_part(&p, end, &m, &ml) || p != end || gl > MAX_PART ||
        !ldb_decode(TAG_JOIN, v, vlen, &r)) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    if (u->count.len == 0 || gl != u->glen || memcmp(g, u->group, gl) != 0) {
        put_count(u);
        key_init(&u->count, TAG_COUNT);
        key_part(&u->count, g, gl);
        memcpy(u->group, g, gl);
        u->glen = gl;
        u->members = 0;
    }
    chat_err rc = ldb_membership_live(st, g, gl, &r, &live);
    if (rc != CHAT_OK || !live) {
        return rc;
    }
    key kr;
    key_init(&kr, TAG_READ);
    key_part(&kr, g, gl);
    if (kr.overflow || kr.len + ml > sizeof(kr.buf)) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    memcpy(kr.buf + kr.len, m, ml);
    kr.len += ml;
    /* A run cut short between two batches comes here again: writing 0
     * again is harmless, since no marker moves before the upgrade is done. */
    ldb_batch_put(u->wb, &kr, 0);
    u->members++;
    u->puts++;
    if (u->puts >= UPGRADE_BATCH) {
        rc = ldb_write_batch(st, u->wb, st->wopt_lazy, &kr);
        leveldb_writebatch_clear(u->wb);
        u->puts = 0;
    }
    return rc;
}

chat_err ldb_read_upgrade(ldb *st, char **errmsg)
{
    char *val = NULL;
    size_t len = 0;
    key prefix;
    struct upgrade u;

    chat_err rc = ldb_get_meta(st, META_RECEIPTS, &val, &len);
    leveldb_free(val);
    if (rc != CHAT_OK || val) {
        if (rc != CHAT_OK) {
            store_open_error(errmsg, "reading the store's receipts record", st->base.last_err);
        }
        return rc;
    }
    memset(&u, 0, sizeof(u));
    u.wb = leveldb_writebatch_create();
    key_init(&prefix, TAG_JOIN);
    rc = ldb_walk(st, &prefix, visit_join, &u);
    if (rc == CHAT_OK) {
        put_count(&u);
        ldb_put_meta(u.wb, META_RECEIPTS, "\1", 1);
        rc = ldb_write_batch(st, u.wb, st->wopt_sync, NULL);
    }
    leveldb_writebatch_destroy(u.wb);
    if (rc != CHAT_OK) {
        store_open_error(errmsg, "giving the store its read markers", st->base.last_err);
    }
    return rc;
}
