/* store_page_cases: a catch-up's reads on any backend
 * (chat_store_scan_page, chat_store_cursor_open), so that the LevelDB
 * tests (test_store_read) and the PostgreSQL ones (test_store_pg) check the
 * same contract: what the separate reads (head, first, scan, cursor start)
 * would have answered. Each case takes a fresh, empty store and fails the
 * running cmocka case on the first difference. */
#ifndef STORE_PAGE_CASES_H
#define STORE_PAGE_CASES_H

#include "chat_store.h"

/* A group without messages; pages from the start, the middle and the
 * head; bounds of count and bytes (*more); first after a trim; head and
 * first known at the first message; a callback that stops. */
void page_case_scan_page(chat_store *st);

/* A non-member; a member's new device (where the member joined, head
 * beside it); a device that has a cursor; a group without a head. */
void page_case_cursor_open(chat_store *st);

#endif
