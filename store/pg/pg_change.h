/* pg_change: changes of stored messages in the PostgreSQL backend
 * (protocol v1.2, recall and edit) and the cid a message was stored with.
 * Private to store/pg. Each op is one statement of pg_schema, one round
 * trip. */
#ifndef PG_CHANGE_H
#define PG_CHANGE_H

#include "pg_db.h"

/* chat_change (pg_schema.c): one transaction that takes the group's row
 * lock (ordering it with every append, trim and deletion of the group on
 * any broker), compares N with ch->expect, updates N's row in place (its
 * sender and cid columns stay: cid-reserved) and inserts M, then notifies
 * as an append does, so that other brokers relay M. M is put together on
 * the server and again here, from the same id and time. */
store_change_fn pg_change;

/* One row's cid column, while the id is at least first. */
store_cid_of_fn pg_cid_of;

#endif
