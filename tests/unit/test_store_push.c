/* Unit tests of push registrations in the LevelDB backend (leveldb/ldb_push,
 * and what ldb_member and ldb_delete keep of push-with-member): the cases of
 * store_push_cases.c, each on a fresh store, and the raw keys they leave. */
#include "store_fixture.h"
#include "store_push_cases.h"

#include <stdlib.h>
#include <string.h>

static void test_registrations(void **state)
{
    struct fixture *fx = *state;
    push_case_registrations(fx->st);
}

static void test_membership(void **state)
{
    struct fixture *fx = *state;
    char prefix[64];
    push_case_membership(fx->st);
    /* No 'P' key of a member that left is left behind. */
    size_t n = raw_prefix(prefix, sizeof(prefix), 'P', "alice", NULL);
    assert_int_equal(raw_count(fx, prefix, n), 0);
    n = raw_prefix(prefix, sizeof(prefix), 'P', "bob", NULL);
    assert_int_equal(raw_count(fx, prefix, n), 0);
}

static void test_members(void **state)
{
    struct fixture *fx = *state;
    push_case_members(fx->st);
}

static void test_expire(void **state)
{
    struct fixture *fx = *state;
    push_case_expire(fx->st);
}

/* Registrations survive a reopen (they are records, not memory). */
static void test_reopen(void **state)
{
    struct fixture *fx = *state;
    chat_push_put res;
    char *reg = NULL;
    size_t len = 0;
    bool found = false;
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_push_put(fx->st, "alice", "a1", "reg", 3, 5, 4, &res));
    reopen(fx, CHAT_SYNC_NONE);
    ASSERT_OK(chat_store_push_get(fx->st, "alice", "a1", &reg, &len, NULL, &found));
    assert_true(found);
    assert_memory_equal(reg, "reg", 3);
    free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_registrations), CASE(test_membership), CASE(test_members),
        CASE(test_expire),        CASE(test_reopen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
