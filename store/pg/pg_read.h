/* pg_read: read markers and member counts in the PostgreSQL backend
 * (protocol v1.1). A marker is the read_id column of the member's row of
 * chat_members, so it starts at 0 with the membership and goes with it.
 * Private to store/pg. Each op is one statement of pg_schema, one round
 * trip. */
#ifndef PG_READ_H
#define PG_READ_H

#include "pg_db.h"

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names. */

/* count(*) of the memberships that count: a walk over the group's index
 * entries, for the requests that show it (receipts, presence), not for
 * every delivery. */
store_member_count_fn pg_member_count;

/* chat_read_advance: the marker and the device's cursor in one
 * transaction, under the membership row's lock. */
store_read_advance_fn pg_read_advance;

store_read_get_fn pg_read_get;

/* One statement of at most max + 1 rows, in byte order of the names (the
 * "C" collation). */
store_reads_fn pg_reads;

#endif
