/* ldb_member: memberships in the LevelDB backend ('J' and 'G' records,
 * invariant member-pairs), with their generations while a group is being deleted, and
 * the member count ('N', invariant read-markers); a membership starts with its read
 * marker ('R') and ends with it and its cursors. Private to store/leveldb.
 */
#ifndef LDB_MEMBER_H
#define LDB_MEMBER_H

#include "ldb_db.h"

/* Whether a membership record r (joined, generation) of group (glen bytes)
 * counts: while its group is being deleted, only those added since the
 * deletion began do. */
chat_err ldb_membership_live(ldb *st, const char *group, size_t glen, const rec *r, bool *live);

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* 'J' through the cache, live unless a 'D' record of another generation
 * says the group is being deleted. */
store_member_get_fn ldb_member_get;

/* 'J', 'G', 'R' (0) and 'N' in one batch (invariants member-pairs and read-markers), with a
 * deletion's generation and without the old cursors while the group is
 * being deleted. */
store_member_add_fn ldb_member_add;

/* 'J', 'G', every 'C' of the member in group, its 'X' and 'R', and 'N'
 * when the membership counted, in one batch. */
store_member_remove_fn ldb_member_remove;

/* An iterator over the member's 'G' records, in group-name order. */
store_member_groups_fn ldb_member_groups;

/* The 'N' record through the cache (0 without one), which member_add and
 * member_remove keep in their batches and a group deletion drops when it
 * begins. */
store_member_count_fn ldb_member_count;

#endif
