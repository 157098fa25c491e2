/* Unit tests of retention (leveldb/ldb_trim): trims bounded per call that take
 * their cid keys along.
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls chat_store_trim until it reaches before; returns the calls made. */
static int trim_all(chat_store *st, const char *group, uint64_t before, size_t max_keys)
{
    uint64_t first = 0, prev = 0;
    int calls = 0;

    do {
        prev = first;
        ASSERT_OK(chat_store_trim(st, group, before, max_keys, &first));
        calls++;
        assert_true(calls == 1 || first > prev);
    } while (first < before && calls < 100000);
    return calls;
}

static void test_i8a_trim_removes_cid_keys(void **state)
{
    struct fixture *fx = *state;
    const unsigned n = 500;
    char cid[32];
    uint64_t first = 0;

    /* the review's case: retention_count 10, every publish with a cid */
    for (unsigned i = 1; i <= n; i++) {
        snprintf(cid, sizeof(cid), "c%u", i);
        assert_int_equal(append_env(fx->st, "g", i % 2 ? "alice" : "bob", cid, 0), i);
        append_env(fx->st, "other", "alice", cid, 0);
    }
    assert_int_equal(trim_all(fx->st, "g", n - 9, 64), (int)((n - 10 + 63) / 64));
    ASSERT_OK(chat_store_first(fx->st, "g", &first));
    assert_int_equal(first, n - 9);

    /* ten messages, ten index entries, ten reverse keys */
    assert_int_equal(group_keys(fx, 'M', "g", NULL), 10);
    assert_int_equal(group_keys(fx, 'I', "g", NULL), 10);
    assert_int_equal(group_keys(fx, 'K', "g", NULL), 10);
    /* the other group keeps all of its own */
    assert_int_equal(group_keys(fx, 'I', "other", NULL), n);
    assert_int_equal(group_keys(fx, 'K', "other", NULL), n);

    assert_cid(fx->st, "g", "alice", "c1", false, 0);
    assert_cid(fx->st, "g", "bob", "c490", false, 0);
    assert_cid(fx->st, "g", "alice", "c491", true, 491);
    assert_cid(fx->st, "other", "alice", "c1", true, 1);
    /* a retry after expiry is a new message, indexed anew */
    assert_int_equal(append_env(fx->st, "g", "alice", "c1", 0), n + 1);
    assert_cid(fx->st, "g", "alice", "c1", true, n + 1);
    assert_int_equal(group_keys(fx, 'I', "g", NULL), 11);
}

static void test_i8a_trim_keeps_reused_cid(void **state)
{
    struct fixture *fx = *state;

    /* a cid whose message retention removed is a new message when sent
     * again; trimming later messages leaves its new entry alone */
    append_env(fx->st, "g", "alice", "c", 0);
    append_env(fx->st, "g", "alice", "d", 0);
    ASSERT_OK(chat_store_trim(fx->st, "g", 2, 100, NULL));
    assert_cid(fx->st, "g", "alice", "c", false, 0);
    assert_int_equal(append_env(fx->st, "g", "alice", "c", 0), 3);
    assert_cid(fx->st, "g", "alice", "c", true, 3);
    ASSERT_OK(chat_store_trim(fx->st, "g", 3, 100, NULL));
    assert_cid(fx->st, "g", "alice", "c", true, 3);
    assert_cid(fx->st, "g", "alice", "d", false, 0);
    assert_int_equal(group_keys(fx, 'I', "g", NULL), 1);
    assert_int_equal(group_keys(fx, 'K', "g", NULL), 1);
}

static void test_i8c_trim_bounded_per_call(void **state)
{
    struct fixture *fx = *state;
    uint64_t first = 0;
    chat_page *page = NULL;

    fill(fx->st, "g", 1000);
    assert_int_equal(chat_store_trim(fx->st, "g", 10, 0, &first), CHAT_EINVAL);

    /* one call deletes at most max_keys messages and says where it stopped */
    ASSERT_OK(chat_store_trim(fx->st, "g", 901, 64, &first));
    assert_int_equal(first, 65);
    assert_not_stored(fx->st, "g", 64);
    ASSERT_OK(chat_store_first(fx->st, "g", &first));
    assert_int_equal(first, 65);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 2, SIZE_MAX, &page));
    check_page_run(page, "g", 65, 1, 2, true);
    chat_page_destroy(page);

    /* the caller repeats while first < before: 900 in 64s is 15 calls */
    assert_int_equal(trim_all(fx->st, "g", 901, 64) + 1, 15);
    ASSERT_OK(chat_store_first(fx->st, "g", &first));
    assert_int_equal(first, 901);
    assert_int_equal(group_keys(fx, 'M', "g", NULL), 100);

    /* before beyond head + 1 is clamped; below first changes nothing */
    ASSERT_OK(chat_store_trim(fx->st, "g", 500, 64, &first));
    assert_int_equal(first, 901);
    ASSERT_OK(chat_store_trim(fx->st, "g", UINT64_MAX, 1000, &first));
    assert_int_equal(first, 1001);
    assert_head(fx->st, "g", 1000);
    assert_int_equal(group_keys(fx, 'M', "g", NULL), 0);
    assert_int_equal(append_env(fx->st, "g", "u", NULL, 0), 1001);
    ASSERT_OK(chat_store_trim(fx->st, "nobody", 10, 10, &first));
    assert_int_equal(first, 1);
}

/* Issue 16: 'H' is written with a group's first message only, not with
 * every message; the head is the largest of that record, first - 1 and the
 * newest message, so a trim that takes the newest message keeps the head
 * through 'F'. A store that took the newest message for the head would
 * give the trimmed ids again. */
static void test_i16_head_kept_when_newest_trimmed(void **state)
{
    struct fixture *fx = *state;
    uint64_t first = 0;

    fill(fx->st, "g", 10);
    fill(fx->st, "h", 10);
    /* the oldest go: the newest message says the head */
    ASSERT_OK(chat_store_trim(fx->st, "g", 4, 100, &first));
    assert_int_equal(first, 4);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 10);

    /* all of them go, the last step with the newest: after a reopen (no
     * cache) the head is still 10 and the next id 11 */
    assert_int_equal(trim_all(fx->st, "g", 11, 4), 2);
    assert_int_equal(group_keys(fx, 'M', "g", NULL), 0);
    assert_head(fx->st, "g", 10);
    assert_int_equal(append_env(fx->st, "g", "u", "c", 0), 11);
    assert_int_equal(append_env(fx->st, "g", "u", NULL, 0), 12);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 12);

    /* a step that stops short of the newest, then one that takes it */
    ASSERT_OK(chat_store_trim(fx->st, "h", 11, 9, &first));
    assert_int_equal(first, 10);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "h", 10);
    ASSERT_OK(chat_store_trim(fx->st, "h", 11, 9, &first));
    assert_int_equal(first, 11);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "h", 10);
    assert_int_equal(append_env(fx->st, "h", "u", NULL, 0), 11);

    /* one 'H' record a group, and the groups' count unchanged */
    assert_int_equal(group_keys(fx, 'H', "g", NULL), 1);
    assert_int_equal(group_keys(fx, 'H', "h", NULL), 1);
    uint64_t groups = 0;
    ASSERT_OK(chat_store_stats(fx->st, &groups, NULL));
    assert_int_equal(groups, 2);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_i8a_trim_removes_cid_keys),
        CASE(test_i8a_trim_keeps_reused_cid),
        CASE(test_i8c_trim_bounded_per_call),
        CASE(test_i16_head_kept_when_newest_trimmed),
    };

    return cmocka_run_group_tests_name("store_trim", tests, NULL, NULL);
}
