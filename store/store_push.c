/* store_push: the push registrations of chat_store.h in front of the
 * backend's ops, with the argument checks that need no data. */
#include "chat_store.h"
#include "store_backend.h"

#include <stdlib.h>
#include <string.h>

chat_err chat_store_push_put(chat_store *st, const char *member, const char *device,
                             const void *reg, size_t len, int64_t created_ms, size_t max_per_member,
                             chat_push_put *result)
{
    *result = CHAT_PUSH_NO_GROUP;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!member || !device || !reg || len == 0 || len > CHAT_STORE_PUSH_MAX ||
        max_per_member == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->push_put(st, member, device, reg, len, created_ms, max_per_member, result);
}

chat_err chat_store_push_get(chat_store *st, const char *member, const char *device, char **reg,
                             size_t *len, int64_t *created_ms, bool *found)
{
    int64_t created = 0;
    *found = false;
    *reg = NULL;
    *len = 0;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!member || !device) {
        return CHAT_EINVAL;
    }
    chat_err rc = st->ops->push_get(st, member, device, reg, len, &created, found);
    if (created_ms) {
        *created_ms = created;
    }
    return rc;
}

chat_err chat_store_push_remove(chat_store *st, const char *member, const char *device,
                                const void *if_reg, size_t if_len, bool *removed)
{
    bool gone = false;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!member || !device) {
        return CHAT_EINVAL;
    }
    chat_err rc = st->ops->push_remove(st, member, device, if_reg, if_len, &gone);
    if (removed) {
        *removed = gone;
    }
    return rc;
}

chat_err chat_store_push_list(chat_store *st, const char *member, chat_push_fn fn, void *ctx)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return member && fn ? st->ops->push_list(st, member, fn, ctx) : CHAT_EINVAL;
}

chat_err chat_store_push_members(chat_store *st, const char *group, const char *after, size_t max,
                                 chat_push_member_fn fn, void *ctx, char *last, size_t last_cap,
                                 bool *done)
{
    *done = false;
    if (last && last_cap > 0) {
        last[0] = '\0';
    }
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || !fn || max == 0 || !last || last_cap < CHAT_STORE_MAX_NAME + 1) {
        return CHAT_EINVAL;
    }
    return st->ops->push_members(st, group, after && after[0] ? after : NULL, max, fn, ctx, last,
                                 last_cap, done);
}

chat_err chat_store_push_expire(chat_store *st, int64_t older_than_ms, size_t max_keys,
                                char *resume, size_t resume_cap, size_t *removed, bool *done)
{
    *removed = 0;
    *done = false;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!resume || resume_cap < CHAT_STORE_RESUME_MAX || max_keys == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->push_expire(st, older_than_ms, max_keys, resume, resume_cap, removed, done);
}
