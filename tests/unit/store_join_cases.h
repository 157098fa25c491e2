/* store_join_cases: chat_store_member_join (a join and its device's cursor
 * in one call, issue 23 item 4) on the public interface alone, so that both
 * backends run the same cases: test_store_member (LevelDB, where the front
 * falls back to member_add then cursor_start) and test_store_pg
 * (PostgreSQL, one transaction). Each takes a fresh, empty store and fails
 * the running cmocka case on the first difference from what
 * chat_store_member_add and chat_store_cursor_start, called one after the
 * other, would have left. Cases that set the store's clock leave it set. */
#ifndef STORE_JOIN_CASES_H
#define STORE_JOIN_CASES_H

#include "chat_store.h"

/* A new member with a device: joined at the head, the device's cursor and
 * the member's maximum at the joined id, stamped with the store's clock;
 * read marker 0; one more in the member count. */
void join_case_new_member(chat_store *st);

/* An existing member: its joined id, read marker and count kept; a device
 * that has a cursor keeps it (a use stamped on a new day); a new device
 * starts at the member's most advanced cursor. */
void join_case_existing_member(chat_store *st);

/* Without a device: the membership alone (no cursor, no maximum), and
 * joined and device_err may be NULL. */
void join_case_no_device(chat_store *st);

/* During a group's deletion: an old member joins anew at the head without
 * its old cursors, a new one joins; both outlive the deletion's end. */
void join_case_group_deleting(chat_store *st);

/* A device name too long: CHAT_EINVAL and nothing written, on every
 * backend. */
void join_case_bad_device(chat_store *st);

#endif
