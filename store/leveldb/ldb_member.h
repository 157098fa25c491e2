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

/* Adds to wb what removes member from group when its last device cursor
 * goes (device expiry): 'J', 'G', 'X' and 'R' of a membership that counts,
 * *dropped then set; the caller deletes the cursors and moves 'N' down by
 * the members it dropped (ldb_member_count_drop), once per group and
 * batch, since 'N' is read from the cache, which a batch changes only once
 * it is written. A membership a deletion under way has done away with is
 * left to that deletion; without a membership, only a leftover 'X' goes. */
chat_err ldb_member_drop_add(ldb *st, const char *group, const char *member,
                             leveldb_writebatch_t *wb, bool *dropped);

/* Adds to wb group's member count ('N') lowered by n (nothing when n is 0;
 * the record goes when no member is left). */
chat_err ldb_member_count_drop(ldb *st, const char *group, uint64_t n, leveldb_writebatch_t *wb);

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* 'J' through the cache, live unless a 'D' record of another generation
 * says the group is being deleted. */
store_member_get_fn ldb_member_get;

/* 'J', 'G', 'R' (0) and 'N' in one batch (invariants member-pairs and read-markers), with a
 * deletion's generation and without the old cursors while the group is
 * being deleted. */
store_member_add_fn ldb_member_add;

/* 'J', 'G', every 'C' of the member in group, its 'X' and 'R', 'N'
 * when the membership counted, and its 'P' records when this was its last
 * group (push-with-member), in one batch. */
store_member_remove_fn ldb_member_remove;

/* An iterator over the member's 'G' records, in group-name order. */
store_member_groups_fn ldb_member_groups;

/* The 'N' record through the cache (0 without one), which member_add and
 * member_remove keep in their batches and a group deletion drops when it
 * begins. */
store_member_count_fn ldb_member_count;

#endif
