/* ldb_push: push registrations in the LevelDB backend ('P' records,
 * push-with-member): put, get, remove, the walks over a member's registrations
 * and over the registered members of a group, the sweep of registrations
 * whose device is gone, and what ldb_member and ldb_delete call when a
 * member leaves its last group. Private to store/leveldb.
 */
#ifndef LDB_PUSH_H
#define LDB_PUSH_H

#include "ldb_db.h"

/* Adds to wb the deletion of every registration of member (the mlen bytes
 * at m) when it has no membership that counts but in except_group (whose
 * membership wb removes): what keeps push-with-member in the batches that end
 * memberships. */
chat_err ldb_push_orphans_add(ldb *st, const char *m, size_t mlen, const char *except_group,
                              leveldb_writebatch_t *wb);

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* A walk of the member's 'G' records (does it belong to a group) and of
 * its 'P' records (how many others), then one put. */
store_push_put_fn ldb_push_put;

/* One get of 'P'. */
store_push_get_fn ldb_push_get;

/* A get of 'P' to compare, then its delete. */
store_push_remove_fn ldb_push_remove;

/* An iterator over the member's 'P' records. */
store_push_list_fn ldb_push_list;

/* An iterator over the group's 'R' records (members in name order), and
 * a second one sought to each counting member's 'P' records; seen from 'J'
 * and 'X' through the cache. */
store_push_members_fn ldb_push_members;

/* An iterator over the 'P' records from the resume key and, for each one
 * old enough, the member's 'G' records with a 'C' lookup (cached) per
 * group. */
store_push_expire_fn ldb_push_expire;

#endif
