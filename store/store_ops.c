/* store_ops: the operations of chat_store.h (listings, deletions under
 * way, imports, the check, maintenance jobs) in front of the backend's
 * ops; a backend that offers none of them (its op is NULL) answers
 * CHAT_EINVAL through store_unsupported. */
#include "chat_store.h"
#include "store_backend.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Operations
 * --------------------------------------------------------------------- */

chat_err chat_store_group_members(chat_store *st, const char *group, const char *after, size_t max,
                                  chat_member_fn fn, void *ctx, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!group || !fn || max == 0) {
        return CHAT_EINVAL;
    }
    if (!st->ops->group_members) {
        return store_unsupported(st, "group members");
    }
    return st->ops->group_members(st, group, after, max, fn, ctx, done);
}

chat_err chat_store_member_devices(chat_store *st, const char *group, const char *member,
                                   size_t max, chat_device_fn fn, void *ctx, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!group || !member || !fn || max == 0) {
        return CHAT_EINVAL;
    }
    if (!st->ops->member_devices) {
        return store_unsupported(st, "member devices");
    }
    return st->ops->member_devices(st, group, member, max, fn, ctx, done);
}

chat_err chat_store_deletions(chat_store *st, chat_head_fn fn, void *ctx)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->deletions) {
        return store_unsupported(st, "deletions");
    }
    return fn ? st->ops->deletions(st, fn, ctx) : CHAT_EINVAL;
}

chat_err chat_store_group_init(chat_store *st, const char *group, uint64_t head)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->group_init) {
        return store_unsupported(st, "group init");
    }
    return group ? st->ops->group_init(st, group, head) : CHAT_EINVAL;
}

chat_err chat_store_check(chat_store *st, chat_problem_fn fn, void *ctx, uint64_t *groups,
                          uint64_t *problems)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!fn || !groups || !problems) {
        return CHAT_EINVAL;
    }
    *groups = 0;
    *problems = 0;
    if (!st->ops->check) {
        return store_unsupported(st, "check");
    }
    return st->ops->check(st, fn, ctx, groups, problems);
}

chat_err chat_store_job_start(chat_store *st, chat_job_kind kind, const char *dest)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if ((kind != CHAT_JOB_BACKUP && kind != CHAT_JOB_COMPACT) ||
        (kind == CHAT_JOB_BACKUP && (!dest || !dest[0]))) {
        return CHAT_EINVAL;
    }
    if (!st->ops->job_start) {
        return store_unsupported(st, "job start");
    }
    return st->ops->job_start(st, kind, dest);
}

chat_err chat_store_job_state(chat_store *st, chat_job_state *out)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->job_state) {
        return store_unsupported(st, "job state");
    }
    return st && out ? st->ops->job_state(st, out) : CHAT_EINVAL;
}
