/* pg_member: cursors, devices, memberships and group deletion in the
 * PostgreSQL backend (chat_cursors, chat_cursor_max, chat_members). Private
 * to store/pg. Each op is one statement of pg_schema, one round trip (a
 * join with its device's cursor too: chat_member_join); a
 * membership lookup is answered from the broker's cache while it is valid
 * (pg_db.h). */
#ifndef PG_MEMBER_H
#define PG_MEMBER_H

#include "pg_db.h"

store_cursor_info_fn pg_cursor_info;
store_cursor_advance_fn pg_cursor_advance;
store_cursor_max_fn pg_cursor_max;
store_cursor_start_fn pg_cursor_start;
store_cursor_open_fn pg_cursor_open;
store_cursor_touch_fn pg_cursor_touch;
store_expire_devices_fn pg_expire_devices;
store_member_add_fn pg_member_add;
store_member_join_fn pg_member_join;
store_member_get_fn pg_member_get;
store_member_remove_fn pg_member_remove;
store_member_groups_fn pg_member_groups;
store_group_delete_fn pg_group_delete;

#endif
