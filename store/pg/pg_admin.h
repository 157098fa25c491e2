/* pg_admin: the PostgreSQL backend's operations for operators: the members
 * and devices of a group, deletions under way, a group's start for an
 * import, and the check of a whole database. Private to store/pg. Each op
 * is one statement of pg_schema, one round trip.
 */
#ifndef PG_ADMIN_H
#define PG_ADMIN_H

#include "pg_db.h"

/* How long chat_store_check may wait for the database's answer: it reads
 * every row, and runs in tools (mqchat-store), never on a broker's thread. */
#define PG_CHECK_TIMEOUT_MS (3600 * 1000)

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* At most max + 1 rows of chat_members in key order (index
 * chat_members_order), live memberships only: the row past max says that
 * there is more. */
store_group_members_fn pg_group_members;

/* The same over the member's rows of chat_cursors. */
store_member_devices_fn pg_member_devices;

/* The groups of chat_groups with a deletion generation. */
store_deletions_fn pg_deletions;

/* chat_group_init (pg_schema.c): the group's row, under its lock. */
store_group_init_fn pg_group_init;

/* chat_check (pg_schema.c): the whole database from one snapshot, on the
 * writer connection with a deadline of PG_CHECK_TIMEOUT_MS. Membership
 * records are one row here, so they cannot come unpaired; the check looks
 * instead at memberships that begin above head and at cursors above their
 * member's maximum (invariant cursor-forward). Rows are read through PostgreSQL, which
 * verifies its pages' checksums when the cluster has them (initdb -k). */
store_check_fn pg_check;

#endif
