/* pg_push: push registrations in the PostgreSQL backend (chat_push,
 * push-with-member kept by chat_member_remove and chat_group_delete). Private
 * to store/pg. Each op is one statement of pg_schema, one round trip; a
 * group's registered members come a page of members at a time, with what
 * each has seen, in that one statement. */
#ifndef PG_PUSH_H
#define PG_PUSH_H

#include "pg_db.h"

store_push_put_fn pg_push_put;
store_push_get_fn pg_push_get;
store_push_remove_fn pg_push_remove;
store_push_list_fn pg_push_list;
store_push_members_fn pg_push_members;
store_push_expire_fn pg_push_expire;

#endif
