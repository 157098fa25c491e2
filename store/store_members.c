/* store_members: the device cursors, memberships and read markers of
 * chat_store.h in front of the backend's ops, with the argument checks
 * that need no data. */
#include "chat_store.h"
#include "store_backend.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Cursors and devices
 * --------------------------------------------------------------------- */

chat_err chat_store_cursor_info(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *id, int64_t *last_used, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_info(st, group, member, device, id, last_used, found);
}

chat_err chat_store_cursor_get(chat_store *st, const char *group, const char *member,
                               const char *device, uint64_t *id, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_info(st, group, member, device, id, NULL, found);
}

chat_err chat_store_cursor_advance(chat_store *st, const char *group, const char *member,
                                   const char *device, uint64_t id, uint64_t *now)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_advance(st, group, member, device, id, now);
}

chat_err chat_store_cursor_max(chat_store *st, const char *group, const char *member, uint64_t *id,
                               bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_max(st, group, member, id, found);
}

chat_err chat_store_cursor_start(chat_store *st, const char *group, const char *member,
                                 const char *device, uint64_t *id, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_start(st, group, member, device, id, found);
}

chat_err chat_store_cursor_open(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *id, bool *found, uint64_t *head)
{
    uint64_t h = 0;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (st->ops->cursor_open) {
        return st->ops->cursor_open(st, group, member, device, id, found, head);
    }
    chat_err rc = st->ops->cursor_start(st, group, member, device, id, found);
    if (rc == CHAT_OK) {
        rc = st->ops->head(st, group, &h);
    }
    if (rc == CHAT_OK) {
        *head = h;
    }
    return rc;
}

chat_err chat_store_cursor_touch(chat_store *st, const char *group, const char *member,
                                 const char *device, int64_t now_ms)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_touch(st, group, member, device, now_ms);
}

chat_err chat_store_expire_devices(chat_store *st, int64_t older_than_ms, bool drop_members,
                                   size_t max_keys, char *resume, size_t resume_cap,
                                   chat_expired *out, bool *done)
{
    out->devices = out->members = 0;
    *done = false;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!resume || resume_cap < CHAT_STORE_RESUME_MAX || max_keys == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->expire_devices(st, older_than_ms, drop_members, max_keys, resume, resume_cap,
                                   out, done);
}

/* ------------------------------------------------------------------------
 * Membership
 * --------------------------------------------------------------------- */

chat_err chat_store_member_add(chat_store *st, const char *group, const char *member,
                               uint64_t *joined)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->member_add(st, group, member, joined);
}

chat_err chat_store_member_join(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *joined, chat_err *device_err)
{
    uint64_t j = 0, at = 0;
    bool found = false;
    chat_err rc, drc = CHAT_OK;
    if (device_err) {
        *device_err = CHAT_OK;
    }
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    /* A bad device fails the whole call on every backend: the fallback
     * below must not write a membership and then refuse its cursor. */
    if (!group || !member || (device && strlen(device) > CHAT_STORE_MAX_NAME)) {
        return CHAT_EINVAL;
    }
    if (st->ops->member_join) {
        rc = st->ops->member_join(st, group, member, device, &j);
    } else {
        rc = st->ops->member_add(st, group, member, &j);
        if (rc == CHAT_OK && device) {
            drc = st->ops->cursor_start(st, group, member, device, &at, &found);
        }
    }
    if (rc == CHAT_OK && joined) {
        *joined = j;
    }
    if (rc == CHAT_OK && device_err) {
        *device_err = drc;
    }
    return rc;
}

chat_err chat_store_member_get(chat_store *st, const char *group, const char *member,
                               uint64_t *joined, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->member_get(st, group, member, joined, found);
}

chat_err chat_store_member_remove(chat_store *st, const char *group, const char *member)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->member_remove(st, group, member);
}

chat_err chat_store_member_groups(chat_store *st, const char *member, chat_group_fn fn, void *ctx)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return fn ? st->ops->member_groups(st, member, fn, ctx) : CHAT_EINVAL;
}

chat_err chat_store_group_delete(chat_store *st, const char *group, size_t max_keys, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!group || max_keys == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->group_delete(st, group, max_keys, done);
}

chat_err chat_store_member_count(chat_store *st, const char *group, uint64_t *count)
{
    *count = 0;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->member_count) {
        return store_unsupported(st, "member count");
    }
    return group ? st->ops->member_count(st, group, count) : CHAT_EINVAL;
}

/* ------------------------------------------------------------------------
 * Read markers
 * --------------------------------------------------------------------- */

chat_err chat_store_read_advance(chat_store *st, const char *group, const char *member,
                                 const char *device, uint64_t id, uint64_t *read, uint64_t *acked,
                                 bool *moved, bool *found)
{
    uint64_t r = 0, a = 0;
    bool m = false, f = false;
    chat_err rc = CHAT_EINVAL;
    if (!st) {
        rc = CHAT_EIO; /* closed: see chat_store.h */
    } else if (!st->ops->read_advance) {
        rc = store_unsupported(st, "read markers");
    } else if (group && member && device) {
        rc = st->ops->read_advance(st, group, member, device, id, &r, &a, &m, &f);
    }
    if (read) {
        *read = r;
    }
    if (acked) {
        *acked = a;
    }
    if (moved) {
        *moved = m;
    }
    *found = f;
    return rc;
}

chat_err chat_store_read_get(chat_store *st, const char *group, const char *member, uint64_t *id)
{
    *id = 0;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->read_get) {
        return store_unsupported(st, "read markers");
    }
    return group && member ? st->ops->read_get(st, group, member, id) : CHAT_EINVAL;
}

chat_err chat_store_reads(chat_store *st, const char *group, const char *after, size_t max,
                          chat_read_fn fn, void *ctx, bool *more)
{
    *more = false;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || !fn || max == 0) {
        return CHAT_EINVAL;
    }
    if (!st->ops->reads) {
        return store_unsupported(st, "read markers");
    }
    return st->ops->reads(st, group, after, max, fn, ctx, more);
}
