/* pg_log: the message log of the PostgreSQL backend (chat_groups and
 * chat_messages): heads, appends, cid lookups, reads and scans, retention
 * and the list of groups. Private to store/pg. Each op is one statement of
 * pg_schema, one round trip. */
#ifndef PG_LOG_H
#define PG_LOG_H

#include "pg_db.h"

store_head_fn pg_head;
store_first_fn pg_first;
/* chat_append (pg_schema.c): one transaction that takes the group's row
 * lock, stores the message and notifies; the envelope is put together on
 * the server and again here, from the same id and time. */
store_append_fn pg_append;
store_cid_find_fn pg_cid_find;
store_get_fn pg_get;
store_scan_fn pg_scan;
store_scan_page_fn pg_scan_page;
store_trim_fn pg_trim;
store_groups_fn pg_groups;

#endif
