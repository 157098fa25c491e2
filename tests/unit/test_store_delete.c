/* Unit tests of group deletion in bounded steps (leveldb/ldb_delete).
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls chat_store_group_delete until done; returns the calls made. */
static int delete_all(chat_store *st, const char *group, size_t max_keys)
{
    bool done = false;
    int calls = 0;

    while (!done && calls < 100000) {
        ASSERT_OK(chat_store_group_delete(st, group, max_keys, &done));
        calls++;
    }
    assert_true(done);
    return calls;
}

/* A group with everything a group has: messages (every other with a cid),
 * three members with two devices each. */
static void populate(chat_store *st, const char *group, unsigned n)
{
    const char *members[] = {"alice", "bob", "carol"};
    char cid[16];

    for (int m = 0; m < 3; m++)
        ASSERT_OK(chat_store_member_add(st, group, members[m], NULL));
    for (unsigned i = 1; i <= n; i++) {
        snprintf(cid, sizeof(cid), "c%u", i);
        append_env(st, group, members[i % 3], i % 2 ? cid : NULL, 0);
    }
    for (int m = 0; m < 3; m++) {
        ASSERT_OK(chat_store_cursor_advance(st, group, members[m], "d1", n / 2, NULL));
        ASSERT_OK(chat_store_cursor_advance(st, group, members[m], "d2", n - 1, NULL));
    }
}

static void assert_group_keys(struct fixture *fx, const char *group, const size_t want[6])
{
    const char kinds[] = {'C', 'I', 'J', 'K', 'M', 'X'};

    for (int i = 0; i < 6; i++) {
        size_t n = group_keys(fx, kinds[i], group, NULL);
        if (n != want[i])
            fail_msg("group %s: %zu '%c' keys, want %zu", group, n, kinds[i], want[i]);
    }
}

static void test_i8d_group_delete_removes_every_key(void **state)
{
    struct fixture *fx = *state;
    const size_t none[6] = {0, 0, 0, 0, 0, 0};
    const size_t full[6] = {6, 20, 3, 20, 40, 3};
    struct walk w = {0};
    chat_page *page = NULL;
    uint64_t first = 0;
    bool done = true;
    char p[64];

    populate(fx->st, "g", 40);
    populate(fx->st, "g2", 40);
    populate(fx->st, "gg", 40);
    assert_group_keys(fx, "g", full);
    assert_int_equal(chat_store_group_delete(fx->st, "g", 0, &done), CHAT_EINVAL);

    /* 92 records in steps of 7 */
    assert_int_equal(delete_all(fx->st, "g", 7), 14);
    assert_group_keys(fx, "g", none);
    assert_int_equal(group_keys(fx, 'D', "g", NULL), 0);
    /* the membership index too: alice keeps her other groups only */
    assert_int_equal(raw_count(fx, p, raw_prefix(p, sizeof(p), 'G', "alice", NULL)), 2);
    ASSERT_OK(chat_store_member_groups(fx->st, "alice", collect_group, &w));
    assert_int_equal(w.calls, 2);
    assert_string_equal(w.names[0], "g2");
    assert_string_equal(w.names[1], "gg");
    /* the neighbours are whole */
    assert_group_keys(fx, "g2", full);
    assert_group_keys(fx, "gg", full);
    assert_cid(fx->st, "g2", "bob", "c1", true, 1);

    /* the head stays: ids go on after it */
    assert_int_equal(group_keys(fx, 'H', "g", NULL), 1);
    assert_head(fx->st, "g", 40);
    ASSERT_OK(chat_store_first(fx->st, "g", &first));
    assert_int_equal(first, 41);
    assert_int_equal(append_env(fx->st, "g", "alice", "c1", 0), 41);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "g", 41, 1, 1, false);
    chat_page_destroy(page);
    assert_member(fx->st, "g", "alice", false, 0);

    /* a group of members alone leaves nothing at all */
    ASSERT_OK(chat_store_member_add(fx->st, "lobby", "alice", NULL));
    ASSERT_OK(chat_store_cursor_start(fx->st, "lobby", "alice", "d1", &first, &done));
    assert_int_equal(delete_all(fx->st, "lobby", 100), 1);
    assert_int_equal(raw_count(fx, p, raw_prefix(p, sizeof(p), 'C', NULL, NULL)), 12);
    assert_group_keys(fx, "lobby", none);
    assert_int_equal(group_keys(fx, 'F', "lobby", NULL), 0);
    assert_int_equal(group_keys(fx, 'D', "lobby", NULL), 0);
}

static void test_i8d_publish_between_steps(void **state)
{
    struct fixture *fx = *state;
    const size_t after[6] = {2, 1, 2, 1, 1, 2};
    struct walk w = {0};
    chat_page *page = NULL;
    uint64_t id = 0, joined = 0;
    bool done = true, found = false;

    populate(fx->st, "g", 30);
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 3, &done));
    assert_false(done);

    /* from the first step on the group reads as empty */
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, SIZE_MAX, &page));
    check_page_ids(page, "g", NULL, NULL, 0, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", UINT64_MAX, 100, SIZE_MAX, &page));
    check_page_ids(page, "g", NULL, NULL, 0, false);
    chat_page_destroy(page);
    assert_not_stored(fx->st, "g", 30);
    assert_cid(fx->st, "g", "bob", "c1", false, 0);
    assert_member(fx->st, "g", "alice", false, 0);
    assert_member(fx->st, "g", "bob", false, 0);
    ASSERT_OK(chat_store_member_groups(fx->st, "bob", collect_group, &w));
    assert_int_equal(w.calls, 0);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "d1", &id, &found));
    assert_false(found);

    /* a publish, a rejoin and a new member between steps */
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", &joined));
    assert_int_equal(joined, 30);
    assert_int_equal(append_env(fx->st, "g", "bob", "c1", 0), 31);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 30); /* the new membership's, not the old cursor */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bob", "d1", 31, NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "dave", &joined));
    assert_int_equal(joined, 31);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "dave", "p", &id, &found));
    assert_int_equal(id, 31);

    /* a reopen in the middle, then the rest */
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 3, &done));
    assert_false(done);
    reopen(fx, CHAT_SYNC_NONE);
    assert_member(fx->st, "g", "alice", false, 0);
    assert_member(fx->st, "g", "bob", true, 30);
    delete_all(fx->st, "g", 3);

    /* what came after the first step is whole; nothing else is left */
    assert_group_keys(fx, "g", after);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "g", 31, 1, 1, false);
    chat_page_destroy(page);
    assert_cid(fx->st, "g", "bob", "c1", true, 31);
    assert_member(fx->st, "g", "bob", true, 30);
    assert_member(fx->st, "g", "dave", true, 31);
    assert_member(fx->st, "g", "alice", false, 0);
    assert_cursor(fx->st, "g", "bob", "d1", true, 31);
    assert_cursor(fx->st, "g", "bob", "d2", false, 0);
    assert_cursor(fx->st, "g", "dave", "p", true, 31);
    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_member_groups(fx->st, "bob", collect_group, &w));
    assert_int_equal(w.calls, 1);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "bob", &id, &found));
    assert_int_equal(id, 31);
}

static void test_i8d_delete_again_at_same_head(void **state)
{
    struct fixture *fx = *state;
    bool done = true;

    populate(fx->st, "g", 10);
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 2, &done));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "erin", NULL));
    delete_all(fx->st, "g", 2);
    assert_member(fx->st, "g", "erin", true, 10);
    /* no message since: the same head, yet a new deletion takes erin too */
    assert_int_equal(delete_all(fx->st, "g", 100), 1);
    assert_member(fx->st, "g", "erin", false, 0);
    assert_int_equal(group_keys(fx, 'J', "g", NULL), 0);
    assert_int_equal(group_keys(fx, 'D', "g", NULL), 0);
    assert_head(fx->st, "g", 10);
}

/* Issue 16: a deletion puts the head in 'H' before it deletes the
 * messages the head was read from; the next id follows it after a reopen
 * (no cache), never the newest message left. */
static void test_i16_head_kept_by_deletion(void **state)
{
    struct fixture *fx = *state;
    bool done = false;

    populate(fx->st, "g", 20);
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 30, &done));
    assert_false(done);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 20);
    delete_all(fx->st, "g", 30);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 20);
    assert_int_equal(append_env(fx->st, "g", "alice", "c1", 0), 21);
}

/* A store of format 1 (before issue 16): 'H' written with every message,
 * a 'K' reverse key for every message with a cid, no '#format' record or
 * one of 1. It opens as it is, becomes version 2, and its trims and
 * deletions remove every key of what they delete. */
static void test_i16_old_format_store(void **state)
{
    struct fixture *fx = *state;
    const size_t none[6] = {0, 0, 0, 0, 0, 0};
    struct problems p = {0};
    uint64_t groups = 0, problems = 0, first = 0;
    char k[64], v[8] = {0};
    const char one[8] = {0, 0, 0, 0, 0, 0, 0, 1};

    populate(fx->st, "g", 40);
    populate(fx->st, "g2", 40);
    /* what format 1 left: the head in every 'H', the version 1 */
    v[7] = 40;
    raw_write(fx, k, raw_prefix(k, sizeof(k), 'H', "g", NULL), v, 8);
    raw_write(fx, k, raw_prefix(k, sizeof(k), 'H', "g2", NULL), v, 8);
    raw_write(fx, "#format", 7, one, 8);
    assert_head(fx->st, "g", 40);
    assert_head(fx->st, "g2", 40);
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    assert_int_equal(groups, 2);
    if (problems)
        fail_msg("%d problems, the last: %s", p.n, p.last);

    /* retention: 1..30 go with their cid keys both ways */
    ASSERT_OK(chat_store_trim(fx->st, "g2", 31, 100, &first));
    assert_int_equal(first, 31);
    assert_int_equal(group_keys(fx, 'M', "g2", NULL), 10);
    assert_int_equal(group_keys(fx, 'I', "g2", NULL), 5);
    assert_int_equal(group_keys(fx, 'K', "g2", NULL), 5);
    /* then the rest, the newest too: the head stays */
    ASSERT_OK(chat_store_trim(fx->st, "g2", UINT64_MAX, 100, &first));
    assert_int_equal(first, 41);
    assert_int_equal(group_keys(fx, 'I', "g2", NULL), 0);
    assert_int_equal(group_keys(fx, 'K', "g2", NULL), 0);
    assert_head(fx->st, "g2", 40);
    assert_int_equal(append_env(fx->st, "g2", "alice", "c1", 0), 41);

    /* a deletion leaves nothing of the group but its head and first */
    delete_all(fx->st, "g", 7);
    assert_group_keys(fx, "g", none);
    assert_head(fx->st, "g", 40);
    assert_int_equal(append_env(fx->st, "g", "alice", "c1", 0), 41);
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    assert_int_equal(groups, 2);
    if (problems)
        fail_msg("%d problems, the last: %s", p.n, p.last);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_i8d_group_delete_removes_every_key),
        CASE(test_i8d_publish_between_steps),
        CASE(test_i8d_delete_again_at_same_head),
        CASE(test_i16_head_kept_by_deletion),
        CASE(test_i16_old_format_store),
    };

    return cmocka_run_group_tests_name("store_delete", tests, NULL, NULL);
}
