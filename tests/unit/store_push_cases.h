/* store_push_cases: the cases of push registrations (chat_store_push_*,
 * push-with-member) on an open store of any backend, so that the LevelDB tests
 * (test_store_push) and the PostgreSQL ones (test_store_pg) check the same
 * contract. Each case takes a fresh, empty store and fails the running
 * cmocka case on the first difference. */
#ifndef STORE_PUSH_CASES_H
#define STORE_PUSH_CASES_H

#include "chat_store.h"

/* put, get, replace, the bound per member, a member of no group, remove
 * (any, and only if unchanged), the list. */
void push_case_registrations(chat_store *st);

/* Leaving the last group, and a group deletion that ends the last
 * membership, delete the member's registrations; leaving one group of two
 * does not. */
void push_case_membership(chat_store *st);

/* The registered members of a group: name order, pages, what each has
 * seen, members without registrations passed over. */
void push_case_members(chat_store *st);

/* The sweep: a registration whose device has no cursor goes once old
 * enough; one whose device has a cursor stays. */
void push_case_expire(chat_store *st);

#endif
