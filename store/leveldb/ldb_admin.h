/* ldb_admin: the LevelDB backend's operations for operators: the members
 * and devices of a group, deletions under way, a group's start for an
 * import, and the check of a whole store. Private to store/leveldb.
 */
#ifndef LDB_ADMIN_H
#define LDB_ADMIN_H

#include "ldb_db.h"

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* A seek to 'J' g after and a forward walk, live memberships only. */
store_group_members_fn ldb_group_members;

/* A forward walk over 'C' g m. */
store_member_devices_fn ldb_member_devices;

/* A walk over the 'D' records. */
store_deletions_fn ldb_deletions;

/* 'H' and 'F' (and the groups count) in one batch. */
store_group_init_fn ldb_group_init;

/* Per group ('H'): its 'M', 'C', 'X' and 'J' records; then every key of
 * the store once, so that every block's checksum is verified. */
store_check_fn ldb_check;

#endif
