/* store_expiry_cases: device expiry with its members (issue 21, item 8) on
 * the public interface alone, so that both backends run the same cases:
 * test_store_cursor (LevelDB) and test_store_pg (PostgreSQL). Each case
 * sets the store's clock to a variable of its own; the caller restores the
 * clock it wants afterwards.
 */
#ifndef STORE_EXPIRY_CASES_H
#define STORE_EXPIRY_CASES_H

#include <stdbool.h>
#include <stddef.h>

#include "chat_store.h"

/* The group the member cases use, and its members, for the callers that
 * look at the raw records afterwards. */
#define EXPIRY_GROUP "room"

/* One walk from the start, max_keys cursors per call, until done; returns
 * the calls made and what they deleted in *sum. */
int expiry_walk(chat_store *st, int64_t older_than_ms, bool drop_members, size_t max_keys,
                chat_expired *sum);

/* In EXPIRY_GROUP: alice (one stale device, one used), bob (three stale
 * devices, a read marker), carol (one stale device), dave (no device),
 * erin (used, then two stale), frank (two stale, then used); bob also has a
 * used device in the group "other". One walk of max_keys per call. With
 * drop_members, bob and carol go (membership, read marker, maximum cursor,
 * count) and bob stays in "other"; bob joins again as a new member. Without
 * it (closed groups), every member stays and keeps its maximum cursor. */
void expiry_case_members(chat_store *st, size_t max_keys, bool drop_members);

/* A member whose devices are all stale while its group is being deleted:
 * the walk takes the cursors and leaves the membership, which the deletion
 * has done away with already, to the deletion; the count stays right. */
void expiry_case_deleting(chat_store *st);

#endif
