/* Unit tests of memberships (leveldb/ldb_member), and of a join with its
 * device's cursor in one call (chat_store_member_join: the cases
 * test_store_pg runs on PostgreSQL, store_join_cases.c).
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"
#include "store_join_cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Membership
 * --------------------------------------------------------------------- */

static void test_member_add_idempotent(void **state)
{
    struct fixture *fx = *state;
    uint64_t joined = 0;

    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", &joined));
    assert_int_equal(joined, 2);
    fill(fx->st, "g", 2);
    joined = 0;
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", &joined));
    assert_int_equal(joined, 2);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    assert_member(fx->st, "g", "alice", true, 2);

    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", &joined));
    assert_int_equal(joined, 4);
    assert_member(fx->st, "g", "bob", true, 4);
    assert_member(fx->st, "g", "alice", true, 2);
}

static void test_member_get(void **state)
{
    struct fixture *fx = *state;

    assert_member(fx->st, "g", "alice", false, 0);
    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    assert_member(fx->st, "g", "alice", true, 3);
    assert_member(fx->st, "g", "bob", false, 0);
    assert_member(fx->st, "g", "alic", false, 0);
    assert_member(fx->st, "g2", "alice", false, 0);
    assert_member(fx->st, "gg", "alice", false, 0);
}

static void test_member_remove(void **state)
{
    struct fixture *fx = *state;
    struct walk w = {0};
    uint64_t id = 0, joined = 0;
    bool found = true;

    fill(fx->st, "g1", 5);
    fill(fx->st, "g2", 5);
    ASSERT_OK(chat_store_member_add(fx->st, "g1", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g2", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g1", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g1", "alicex", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g1", "alice", "d1", 3, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g1", "alice", "d2", 4, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g2", "alice", "d1", 2, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g1", "bob", "d1", 5, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g1", "alicex", "d1", 1, NULL));

    ASSERT_OK(chat_store_member_remove(fx->st, "g1", "alice"));

    /* gone from g1 with every device's cursor */
    assert_member(fx->st, "g1", "alice", false, 0);
    assert_cursor(fx->st, "g1", "alice", "d1", false, 0);
    assert_cursor(fx->st, "g1", "alice", "d2", false, 0);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g1", "alice", &id, &found));
    assert_false(found);
    /* everything else stays */
    assert_member(fx->st, "g2", "alice", true, 5);
    assert_cursor(fx->st, "g2", "alice", "d1", true, 2);
    assert_member(fx->st, "g1", "bob", true, 5);
    assert_cursor(fx->st, "g1", "bob", "d1", true, 5);
    assert_member(fx->st, "g1", "alicex", true, 5);
    assert_cursor(fx->st, "g1", "alicex", "d1", true, 1);
    /* and the member index agrees (invariant member-pairs) */
    ASSERT_OK(chat_store_member_groups(fx->st, "alice", collect_group, &w));
    assert_int_equal(w.calls, 1);
    assert_string_equal(w.names[0], "g2");

    /* rejoining is a new membership: new joined id, no old cursor */
    fill(fx->st, "g1", 2);
    ASSERT_OK(chat_store_member_add(fx->st, "g1", "alice", &joined));
    assert_int_equal(joined, 7);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g1", "alice", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 7);
}

static void test_member_groups_byte_order(void **state)
{
    struct fixture *fx = *state;
    /* added out of order; byte order is "B" < "a" < "aa" < "ab" < "b" < "c" */
    const char *added[] = {"b", "ab", "c", "a", "B", "aa"};
    const char *want[] = {"B", "a", "aa", "ab", "b", "c"};
    const uint64_t want_joined[] = {5, 4, 6, 2, 1, 3};
    struct walk w = {0};

    for (size_t i = 0; i < 6; i++) {
        fill(fx->st, added[i], (unsigned)i + 1);
        ASSERT_OK(chat_store_member_add(fx->st, added[i], "alice", NULL));
    }
    ASSERT_OK(chat_store_member_add(fx->st, "a", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "zz", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "x", "alicex", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "y", "alic", NULL));

    ASSERT_OK(chat_store_member_groups(fx->st, "alice", collect_group, &w));
    assert_int_equal(w.calls, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(w.names[i], want[i]);
        assert_int_equal(w.joined[i], want_joined[i]);
    }

    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_member_groups(fx->st, "bob", collect_group, &w));
    assert_int_equal(w.calls, 2);
    assert_string_equal(w.names[0], "a");
    assert_string_equal(w.names[1], "zz");

    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_member_groups(fx->st, "nobody", collect_group, &w));
    assert_int_equal(w.calls, 0);
}

static void test_member_groups_stop(void **state)
{
    struct fixture *fx = *state;
    const char *groups[] = {"d", "c", "b", "a"};
    struct walk w = {0};

    for (size_t i = 0; i < 4; i++)
        ASSERT_OK(chat_store_member_add(fx->st, groups[i], "alice", NULL));
    w.stop_after = 2;
    ASSERT_OK(chat_store_member_groups(fx->st, "alice", collect_group, &w));
    assert_int_equal(w.calls, 2);
    assert_string_equal(w.names[0], "a");
    assert_string_equal(w.names[1], "b");

    memset(&w, 0, sizeof(w));
    w.stop_after = 1;
    ASSERT_OK(chat_store_member_groups(fx->st, "alice", collect_group, &w));
    assert_int_equal(w.calls, 1);
}

/* ------------------------------------------------------------------------
 * A join with its device's cursor (issue 23, item 4): on LevelDB the
 * front's fallback, member_add then cursor_start
 * --------------------------------------------------------------------- */

static void test_member_join_new(void **state)
{
    join_case_new_member(((struct fixture *)*state)->st);
}

static void test_member_join_existing(void **state)
{
    join_case_existing_member(((struct fixture *)*state)->st);
}

static void test_member_join_no_device(void **state)
{
    join_case_no_device(((struct fixture *)*state)->st);
}

static void test_member_join_group_deleting(void **state)
{
    join_case_group_deleting(((struct fixture *)*state)->st);
}

static void test_member_join_bad_device(void **state)
{
    join_case_bad_device(((struct fixture *)*state)->st);
}

/* What the join wrote survives a reopen (the cache answered before). */
static void test_member_join_reopen(void **state)
{
    struct fixture *fx = *state;
    join_case_new_member(fx->st);
    reopen(fx, CHAT_SYNC_NONE);
    assert_member(fx->st, "g", "bob", true, 3);
    assert_cursor(fx->st, "g", "bob", "b1", true, 3);
    assert_member(fx->st, "g", "carol", true, 5);
    assert_cursor(fx->st, "g", "carol", "c1", true, 5);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_member_add_idempotent),
        CASE(test_member_get),
        CASE(test_member_remove),
        CASE(test_member_groups_byte_order),
        CASE(test_member_groups_stop),
        CASE(test_member_join_new),
        CASE(test_member_join_existing),
        CASE(test_member_join_no_device),
        CASE(test_member_join_group_deleting),
        CASE(test_member_join_bad_device),
        CASE(test_member_join_reopen),
    };

    return cmocka_run_group_tests_name("store_member", tests, NULL, NULL);
}
