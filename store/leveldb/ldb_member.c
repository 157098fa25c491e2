/* ldb_member: memberships (see ldb_member.h). */
#include "ldb_member.h"
#include "ldb_log.h"

#include <string.h>

/* Whether group is being deleted (chat_store_group_delete), and the
 * generation of that deletion: memberships added meanwhile carry it. */
static chat_err pending_delete(chat_store *st, const char *group, size_t glen, uint64_t *gen,
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

/* Whether a membership record (joined, generation) counts: while its group
 * is being deleted, only those added since the deletion began do. */
static chat_err membership_live(chat_store *st, const char *group, size_t glen, const rec *r,
                                bool *live)
{
    uint64_t gen = 0;
    bool pending = false;
    chat_err rc = pending_delete(st, group, glen, &gen, &pending);
    *live = rc == CHAT_OK && (!pending || r->x == gen);
    return rc;
}

chat_err chat_store_member_get(chat_store *st, const char *group, const char *member,
                               uint64_t *joined, bool *found)
{
    key kj, kg;
    rec r;
    join_keys(&kj, &kg, group, member);
    *found = false;
    if (kj.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = ldb_get_rec(st, &kj, &r, found);
    if (rc == CHAT_OK && *found) {
        rc = membership_live(st, group, strlen(group), &r, found);
    }
    if (rc == CHAT_OK && *found) {
        *joined = r.v;
    }
    return rc;
}

/* Adds to wb the deletion of member's cursors in group and of its maximum
 * cursor record. */
static chat_err delete_cursors(chat_store *st, const char *group, const char *member,
                               leveldb_writebatch_t *wb)
{
    key kx, prefix;
    char *err = NULL;

    cursor_key(&prefix, group, member, NULL);
    max_key(&kx, group, member);
    if (prefix.overflow || kx.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_delete(wb, kx.buf, kx.len);
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len);
         !(err = iter_error(it)) && leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        leveldb_writebatch_delete(wb, kb, klen);
    }
    leveldb_iter_destroy(it);
    return err ? ldb_read_key_error(st, err, prefix.buf, prefix.len) : CHAT_OK;
}

chat_err chat_store_member_add(chat_store *st, const char *group, const char *member,
                               uint64_t *joined)
{
    key kj, kg;
    uint64_t at = 0, gen = 0;
    bool found = false, pending = false;
    chat_err rc;

    join_keys(&kj, &kg, group, member);
    if (kj.overflow || kg.overflow) {
        return CHAT_EINVAL;
    }
    rc = chat_store_member_get(st, group, member, &at, &found);
    if (rc == CHAT_OK && !found) {
        rc = chat_store_head(st, group, &at);
    }
    if (rc == CHAT_OK && !found) {
        rc = pending_delete(st, group, strlen(group), &gen, &pending);
    }
    if (rc == CHAT_OK && !found) {
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
        if (rc == CHAT_OK) {
            rc = ldb_write_batch(st, wb, st->wopt_lazy, &kj);
        }
        leveldb_writebatch_destroy(wb);
    }
    if (rc == CHAT_OK && joined) {
        *joined = at;
    }
    return rc;
}

chat_err chat_store_member_remove(chat_store *st, const char *group, const char *member)
{
    key kj, kg;
    chat_err rc;

    join_keys(&kj, &kg, group, member);
    if (kj.overflow || kg.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_delete(wb, kj.buf, kj.len);
    leveldb_writebatch_delete(wb, kg.buf, kg.len);
    rc = delete_cursors(st, group, member, wb);
    if (rc == CHAT_OK) {
        rc = ldb_write_batch(st, wb, st->wopt_lazy, &kj);
    }
    leveldb_writebatch_destroy(wb);
    return rc;
}

chat_err chat_store_member_groups(chat_store *st, const char *member, chat_group_fn fn, void *ctx)
{
    key prefix;
    chat_err rc = CHAT_OK;
    char *err = NULL;
    char name[MAX_PART + 1];
    rec r;
    bool live = false;

    key_init(&prefix, TAG_GROUPS);
    key_str(&prefix, member);
    if (prefix.overflow || !fn) {
        return CHAT_EINVAL;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len);
         !(err = iter_error(it)) && leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        size_t n = klen - prefix.len;
        const char *v = leveldb_iter_value(it, &vlen);
        if (n > MAX_PART || !ldb_decode(TAG_GROUPS, v, vlen, &r)) {
            rc = ldb_corrupt_key(st, kb, klen, vlen);
            break;
        }
        memcpy(name, kb + prefix.len, n);
        name[n] = '\0';
        rc = membership_live(st, name, n, &r, &live);
        if (rc != CHAT_OK) {
            break;
        }
        if (live && fn(ctx, name, r.v) != 0) {
            rc = CHAT_EINVAL;
            break;
        }
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = ldb_read_key_error(st, err, prefix.buf, prefix.len);
    }
    return rc;
}
