/* ldb_member: memberships (see ldb_member.h). */
#include "ldb_member.h"
#include "ldb_log.h"
#include "ldb_push.h"

#include <string.h>

/* Whether group is being deleted (chat_store_group_delete), and the
 * generation of that deletion: memberships added meanwhile carry it. */
static chat_err pending_delete(ldb *st, const char *group, size_t glen, uint64_t *gen,
                               bool *pending)
{
    key kd;
    rec r;
    bool found = false;
    key_init(&kd, TAG_DELETE);
    key_part(&kd, group, glen);
    *pending = false;
    if (kd.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_rec(st, &kd, &r, &found);
    if (rc == CHAT_OK && found) {
        *pending = true;
        *gen = r.v;
    }
    return rc;
}

chat_err ldb_membership_live(ldb *st, const char *group, size_t glen, const rec *r, bool *live)
{
    uint64_t gen = 0;
    bool pending = false;
    chat_err rc = pending_delete(st, group, glen, &gen, &pending);
    *live = rc == CHAT_OK && (!pending || r->x == gen);
    return rc;
}

chat_err ldb_member_get(chat_store *cs, const char *group, const char *member, uint64_t *joined,
                        bool *found)
{
    ldb *st = ldb_of(cs);
    key kj, kg;
    rec r;
    join_keys(&kj, &kg, group, member);
    *found = false;
    if (kj.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_rec(st, &kj, &r, found);
    if (rc == CHAT_OK && *found) {
        rc = ldb_membership_live(st, group, strlen(group), &r, found);
    }
    if (rc == CHAT_OK && *found) {
        *joined = r.v;
    }
    return rc;
}

static chat_err visit_delete(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                             size_t vlen, bool *stop)
{
    (void)st, (void)v, (void)vlen, (void)stop;
    leveldb_writebatch_delete(ctx, k, klen);
    return CHAT_OK;
}

/* Adds to wb the deletion of member's cursors in group, of its maximum
 * cursor record and of its read marker: what a membership holds besides
 * its 'J' and 'G' records. */
static chat_err delete_cursors(ldb *st, const char *group, const char *member,
                               leveldb_writebatch_t *wb)
{
    key kx, kr, prefix;
    cursor_key(&prefix, group, member, NULL);
    max_key(&kx, group, member);
    read_key(&kr, group, member);
    if (prefix.overflow || kx.overflow || kr.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_delete(wb, kx.buf, kx.len);
    leveldb_writebatch_delete(wb, kr.buf, kr.len);
    return ldb_walk(st, &prefix, visit_delete, wb);
}

chat_err ldb_member_count(chat_store *cs, const char *group, uint64_t *count)
{
    key kn;
    bool found = false;
    group_key(&kn, TAG_COUNT, group);
    *count = 0;
    if (kn.overflow) {
        return CHAT_EINVAL;
    }
    return ldb_get_u64(ldb_of(cs), &kn, count, &found);
}

/* Adds to wb the group's member count moved up by one, or down by `down`:
 * a put, or the record's deletion when no member is left, so that a group
 * nobody belongs to keeps no count. */
static chat_err count_move(ldb *st, const char *group, bool up, uint64_t down,
                           leveldb_writebatch_t *wb)
{
    key kn;
    uint64_t n = 0;
    group_key(&kn, TAG_COUNT, group);
    chat_err rc = ldb_member_count(&st->base, group, &n);
    if (rc != CHAT_OK) {
        return rc;
    }
    n = up ? n + 1 : (n > down ? n - down : 0);
    if (n == 0) {
        leveldb_writebatch_delete(wb, kn.buf, kn.len);
    } else {
        ldb_batch_put(wb, &kn, n);
    }
    return CHAT_OK;
}

static chat_err count_step(ldb *st, const char *group, bool up, leveldb_writebatch_t *wb)
{
    return count_move(st, group, up, 1, wb);
}

chat_err ldb_member_count_drop(ldb *st, const char *group, uint64_t n, leveldb_writebatch_t *wb)
{
    return n ? count_move(st, group, false, n, wb) : CHAT_OK;
}

chat_err ldb_member_drop_add(ldb *st, const char *group, const char *member,
                             leveldb_writebatch_t *wb, bool *dropped)
{
    key kj, kg, kx, kr;
    rec r;
    bool found = false, live = false;
    *dropped = false;
    join_keys(&kj, &kg, group, member);
    max_key(&kx, group, member);
    read_key(&kr, group, member);
    if (kj.overflow || kg.overflow || kx.overflow || kr.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_rec(st, &kj, &r, &found);
    if (rc == CHAT_OK && found) {
        rc = ldb_membership_live(st, group, strlen(group), &r, &live);
    }
    if (rc != CHAT_OK || (found && !live)) {
        /* A membership a deletion under way has done away with: that
         * deletion's walk removes it with its records. */
        return rc;
    }
    /* No membership: cursors left behind without one (deletable-keys);
     * their maximum goes with the last of them. */
    leveldb_writebatch_delete(wb, kx.buf, kx.len);
    if (found) {
        leveldb_writebatch_delete(wb, kj.buf, kj.len);
        leveldb_writebatch_delete(wb, kg.buf, kg.len);
        leveldb_writebatch_delete(wb, kr.buf, kr.len);
        *dropped = true;
        /* Its last group: its push registrations go too (push-with-member;
         * a member whose last two groups one batch drops keeps them until
         * the push sweep, as its devices then have no cursor). */
        return ldb_push_orphans_add(st, member, strlen(member), group, wb);
    }
    return CHAT_OK;
}

chat_err ldb_member_add(chat_store *cs, const char *group, const char *member, uint64_t *joined)
{
    ldb *st = ldb_of(cs);
    key kj, kg;
    uint64_t at = 0, gen = 0;
    bool found = false, pending = false;
    chat_err rc;

    join_keys(&kj, &kg, group, member);
    if (kj.overflow || kg.overflow) {
        return CHAT_EINVAL;
    }
    rc = ldb_member_get(cs, group, member, &at, &found);
    if (rc == CHAT_OK && !found) {
        rc = ldb_head(cs, group, &at);
    }
    if (rc == CHAT_OK && !found) {
        rc = pending_delete(st, group, strlen(group), &gen, &pending);
    }
    if (rc == CHAT_OK && !found) {
        key kr;
        read_key(&kr, group, member);
        leveldb_writebatch_t *wb = leveldb_writebatch_create();
        if (pending) {
            /* Joining a group being deleted: a new membership, marked as
             * such so that the deletion's later steps keep it, without the
             * cursors of the membership the deletion removes. */
            rc = delete_cursors(st, group, member, wb);
            ldb_batch_put2(wb, &kj, at, gen);
            ldb_batch_put2(wb, &kg, at, gen);
        } else {
            ldb_batch_put(wb, &kj, at);
            ldb_batch_put(wb, &kg, at);
        }
        /* A read marker from the start (it lists the member for receipts,
         * in name order), and one more member in the count. */
        if (rc == CHAT_OK) {
            rc = kr.overflow ? CHAT_EINVAL : count_step(st, group, true, wb);
        }
        if (rc == CHAT_OK) {
            ldb_batch_put(wb, &kr, 0);
            rc = ldb_write_batch(st, wb, st->wopt_lazy, &kj);
        }
        leveldb_writebatch_destroy(wb);
    }
    if (rc == CHAT_OK && joined) {
        *joined = at;
    }
    return rc;
}

chat_err ldb_member_remove(chat_store *cs, const char *group, const char *member)
{
    ldb *st = ldb_of(cs);
    key kj, kg;
    uint64_t joined = 0;
    bool live = false;
    chat_err rc;

    join_keys(&kj, &kg, group, member);
    if (kj.overflow || kg.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_delete(wb, kj.buf, kj.len);
    leveldb_writebatch_delete(wb, kg.buf, kg.len);
    rc = delete_cursors(st, group, member, wb);
    /* Only a membership that counts is in the count: one a deletion has
     * done away with left it when the deletion began. */
    if (rc == CHAT_OK) {
        rc = ldb_member_get(cs, group, member, &joined, &live);
    }
    if (rc == CHAT_OK && live) {
        rc = count_step(st, group, false, wb);
    }
    /* Leaving the last group takes the member's push registrations along
     * (push-with-member). */
    if (rc == CHAT_OK) {
        rc = ldb_push_orphans_add(st, member, strlen(member), group, wb);
    }
    if (rc == CHAT_OK) {
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &kj);
    }
    leveldb_writebatch_destroy(wb);
    return rc;
}

/* What member_groups walks with: the caller's callback. */
struct groups_walk {
    size_t plen; /* the 'G' prefix's length: the group's name follows */
    chat_group_fn fn;
    void *ctx;
};

static chat_err visit_group(ldb *st, void *ctx, const char *k, size_t klen, const char *v,
                            size_t vlen, bool *stop)
{
    struct groups_walk *w = ctx;
    char name[MAX_PART + 1];
    size_t n = klen - w->plen;
    bool live = false;
    rec r;
    if (n > MAX_PART || !ldb_decode(TAG_GROUPS, v, vlen, &r)) {
        return ldb_corrupt_key(st, k, klen, vlen);
    }
    memcpy(name, k + w->plen, n);
    name[n] = '\0';
    chat_err rc = ldb_membership_live(st, name, n, &r, &live);
    *stop = rc == CHAT_OK && live && w->fn(w->ctx, name, r.v) != 0;
    return rc;
}

chat_err ldb_member_groups(chat_store *cs, const char *member, chat_group_fn fn, void *ctx)
{
    key prefix;
    key_init(&prefix, TAG_GROUPS);
    key_str(&prefix, member);
    if (prefix.overflow) {
        return CHAT_EINVAL;
    }
    struct groups_walk w = {prefix.len, fn, ctx};
    return ldb_walk(ldb_of(cs), &prefix, visit_group, &w);
}
