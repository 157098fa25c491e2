/* Unit tests of the message log (leveldb/ldb_log, and the pages of chat_store.c):
 * appends, heads, reads, scans, the cid index and the list of groups.
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Append, head, groups
 * --------------------------------------------------------------------- */

static void test_head_unknown_group(void **state)
{
    struct fixture *fx = *state;
    uint64_t first = UINT64_MAX;

    assert_head(fx->st, "nobody", 0);
    ASSERT_OK(chat_store_first(fx->st, "nobody", &first));
    assert_true(first <= 1); /* invariant 2: first <= head + 1 */
    fill(fx->st, "g", 1);
    assert_head(fx->st, "nobody", 0);
    assert_head(fx->st, "g", 1);
}

static void test_append_dense_ids(void **state)
{
    struct fixture *fx = *state;
    const unsigned n = 20;
    uint64_t first = 0;
    chat_page *page = NULL;

    for (unsigned i = 1; i <= n; i++) {
        assert_head(fx->st, "g", i - 1);
        assert_int_equal(append_env(fx->st, "g", "alice", NULL, 0), i);
        assert_head(fx->st, "g", i);
    }
    ASSERT_OK(chat_store_first(fx->st, "g", &first));
    assert_int_equal(first, 1);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "g", 1, 1, n, false);
    chat_page_destroy(page);
}

static void test_append_wrong_id_conflict(void **state)
{
    struct fixture *fx = *state;
    const uint64_t bad[] = {22, 20, 1, 19};
    chat_page *page = NULL;
    chat_msg msg = {0};
    bool found = false;
    char env[ENV_CAP];
    size_t len;

    fill(fx->st, "g", 20);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        len = env_make(env, "intruder", bad[i], 0);
        assert_int_equal(chat_store_append(fx->st, "g", bad[i], "mallory", "x", env, len),
                         CHAT_ECONFLICT);
    }
    /* nothing of those appends was written: head, message, index */
    assert_head(fx->st, "g", 20);
    assert_not_stored(fx->st, "g", 22);
    assert_not_stored(fx->st, "g", 21);
    ASSERT_OK(chat_store_get(fx->st, "g", 20, &msg, &found));
    assert_true(found);
    len = env_make(env, "g", 20, 0);
    assert_int_equal(msg.len, len);
    assert_memory_equal(msg.data, env, len);
    free(msg.data);
    assert_cid(fx->st, "g", "mallory", "x", false, 0);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "g", 1, 1, 20, false);
    chat_page_destroy(page);

    /* an empty group only takes id 1 */
    len = env_make(env, "empty", 2, 0);
    assert_int_equal(chat_store_append(fx->st, "empty", 2, "mallory", NULL, env, len),
                     CHAT_ECONFLICT);
    assert_head(fx->st, "empty", 0);
    assert_not_stored(fx->st, "empty", 2);

    /* and the right id still works afterwards */
    assert_int_equal(append_env(fx->st, "g", "alice", NULL, 0), 21);
}

static void test_groups_isolated(void **state)
{
    struct fixture *fx = *state;
    chat_page *page = NULL;
    uint64_t id_a, id_ab;

    /* interleaved, and "a" is a prefix of "ab" */
    for (int i = 0; i < 5; i++) {
        if (i < 3)
            append_env(fx->st, "a", "u", NULL, 0);
        append_env(fx->st, "ab", "u", NULL, 0);
        if (i < 1)
            append_env(fx->st, "b", "u", NULL, 0);
    }
    id_a = append_env(fx->st, "a", "u", "c", 0);
    id_ab = append_env(fx->st, "ab", "u", "c", 0);
    assert_int_equal(id_a, 4);
    assert_int_equal(id_ab, 6);
    assert_head(fx->st, "a", 4);
    assert_head(fx->st, "ab", 6);
    assert_head(fx->st, "b", 1);

    ASSERT_OK(chat_store_read_forward(fx->st, "a", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "a", 1, 1, 4, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_forward(fx->st, "ab", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "ab", 1, 1, 6, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "a", UINT64_MAX, 100, SIZE_MAX, &page));
    check_page_run(page, "a", 4, -1, 4, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "b", UINT64_MAX, 100, SIZE_MAX, &page));
    check_page_run(page, "b", 1, -1, 1, false);
    chat_page_destroy(page);
    assert_not_stored(fx->st, "a", 5);

    assert_cid(fx->st, "a", "u", "c", true, 4);
    assert_cid(fx->st, "ab", "u", "c", true, 6);
    assert_cid(fx->st, "b", "u", "c", false, 0);

    ASSERT_OK(chat_store_member_add(fx->st, "a", "alice", NULL));
    assert_member(fx->st, "ab", "alice", false, 0);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "ab", "alice", "d", 5, NULL));
    assert_cursor(fx->st, "a", "alice", "d", false, 0);
    assert_cursor(fx->st, "ab", "alice", "d", true, 5);
}

/* ------------------------------------------------------------------------
 * Reading
 * --------------------------------------------------------------------- */

static void test_read_forward_by_count(void **state)
{
    struct fixture *fx = *state;
    const size_t want_count[] = {3, 3, 3, 1};
    const bool want_more[] = {true, true, true, false};
    chat_page *page = NULL;
    uint64_t after = 0;

    fill(fx->st, "g", 10);
    for (size_t p = 0; p < 4; p++) {
        ASSERT_OK(chat_store_read_forward(fx->st, "g", after, 3, SIZE_MAX, &page));
        check_page_run(page, "g", after + 1, 1, want_count[p], want_more[p]);
        assert_true(page->count <= 3);
        after = page->msgs[page->count - 1].id;
        chat_page_destroy(page);
    }
    assert_int_equal(after, 10);

    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 10, SIZE_MAX, &page));
    check_page_run(page, "g", 1, 1, 10, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 9, SIZE_MAX, &page));
    check_page_run(page, "g", 1, 1, 9, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 4, 1, SIZE_MAX, &page));
    check_page_run(page, "g", 5, 1, 1, true);
    chat_page_destroy(page);
}

static void test_read_forward_by_bytes(void **state)
{
    struct fixture *fx = *state;
    const size_t ten[10] = {10, 10, 10, 10, 10, 10, 10, 10, 10, 10};
    uint64_t ids[10];
    chat_page *page = NULL;
    uint64_t after = 0;
    int pages = 0;

    for (int i = 0; i < 10; i++)
        append_env(fx->st, "g", "u", NULL, 10);

    /* "no more than max_bytes in total": 30 fits three, 29 only two */
    ids[0] = 1, ids[1] = 2, ids[2] = 3;
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, 30, &page));
    check_page_ids(page, "g", ids, ten, 3, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, 29, &page));
    check_page_ids(page, "g", ids, ten, 2, true);
    chat_page_destroy(page);

    /* walk in 25-byte pages: two messages each, never more than 25 bytes */
    do {
        ASSERT_OK(chat_store_read_forward(fx->st, "g", after, 100, 25, &page));
        for (size_t i = 0; i < 2; i++)
            ids[i] = after + 1 + i;
        check_page_ids(page, "g", ids, ten, 2, after + 2 < 10);
        assert_true(page->bytes <= 25);
        after = page->msgs[page->count - 1].id;
        chat_page_destroy(page);
        pages++;
    } while (after < 10 && pages < 20);
    assert_int_equal(pages, 5);

    /* the count bound applies even when bytes would allow more */
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 4, 1000, &page));
    check_page_ids(page, "g", (uint64_t[]){1, 2, 3, 4}, ten, 4, true);
    chat_page_destroy(page);
}

static void test_read_forward_oversized_message(void **state)
{
    struct fixture *fx = *state;
    const size_t sizes[] = {5, 100, 5, 5, 200};
    chat_page *page = NULL;

    for (size_t i = 0; i < 5; i++)
        append_env(fx->st, "g", "u", NULL, sizes[i]);

    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 10, 20, &page));
    check_page_ids(page, "g", (uint64_t[]){1}, &sizes[0], 1, true);
    chat_page_destroy(page);
    /* bigger than max_bytes on its own: returned alone, so a reader moves on */
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 1, 10, 20, &page));
    check_page_ids(page, "g", (uint64_t[]){2}, &sizes[1], 1, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 2, 10, 20, &page));
    check_page_ids(page, "g", (uint64_t[]){3, 4}, &sizes[2], 2, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 4, 10, 20, &page));
    check_page_ids(page, "g", (uint64_t[]){5}, &sizes[4], 1, false);
    chat_page_destroy(page);
    /* max_bytes 0 still yields one message per page */
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 2, 10, 0, &page));
    check_page_ids(page, "g", (uint64_t[]){3}, &sizes[2], 1, true);
    chat_page_destroy(page);
}

static void test_read_forward_after_head(void **state)
{
    struct fixture *fx = *state;
    const uint64_t afters[] = {5, 6, 1000, UINT64_MAX};
    chat_page *page = NULL;

    fill(fx->st, "g", 5);
    for (size_t i = 0; i < sizeof(afters) / sizeof(afters[0]); i++) {
        ASSERT_OK(chat_store_read_forward(fx->st, "g", afters[i], 10, SIZE_MAX, &page));
        check_page_ids(page, "g", NULL, NULL, 0, false);
        chat_page_destroy(page);
    }
    ASSERT_OK(chat_store_read_forward(fx->st, "nobody", 0, 10, SIZE_MAX, &page));
    check_page_ids(page, "nobody", NULL, NULL, 0, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 4, 10, SIZE_MAX, &page));
    check_page_run(page, "g", 5, 1, 1, false);
    chat_page_destroy(page);
}

static void test_read_backward(void **state)
{
    struct fixture *fx = *state;
    const size_t ten[4] = {10, 10, 10, 10};
    chat_page *page = NULL;

    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", 11, 4, SIZE_MAX, &page));
    check_page_run(page, "g", 10, -1, 4, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", 7, 4, SIZE_MAX, &page));
    check_page_run(page, "g", 6, -1, 4, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", 3, 4, SIZE_MAX, &page));
    check_page_run(page, "g", 2, -1, 2, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", 1, 4, SIZE_MAX, &page));
    check_page_ids(page, "g", NULL, NULL, 0, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", 0, 4, SIZE_MAX, &page));
    check_page_ids(page, "g", NULL, NULL, 0, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", UINT64_MAX, 2, SIZE_MAX, &page));
    check_page_run(page, "g", 10, -1, 2, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", 100, 20, SIZE_MAX, &page));
    check_page_run(page, "g", 10, -1, 10, false);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "nobody", UINT64_MAX, 20, SIZE_MAX, &page));
    check_page_ids(page, "nobody", NULL, NULL, 0, false);
    chat_page_destroy(page);

    /* byte bounds apply backwards too, oversized first message included */
    for (int i = 0; i < 4; i++)
        append_env(fx->st, "s", "u", NULL, 10);
    ASSERT_OK(chat_store_read_backward(fx->st, "s", UINT64_MAX, 10, 20, &page));
    check_page_ids(page, "s", (uint64_t[]){4, 3}, ten, 2, true);
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "s", 4, 10, 5, &page));
    check_page_ids(page, "s", (uint64_t[]){3}, ten, 1, true);
    chat_page_destroy(page);
}

static void test_get_found_and_not_found(void **state)
{
    struct fixture *fx = *state;
    static const char binary[] = {'a', '\0', 'b'};
    chat_msg msg = {0};
    bool found = false;

    ASSERT_OK(chat_store_append(fx->st, "g", 1, "u", NULL, "hello", 5));
    ASSERT_OK(chat_store_append(fx->st, "g", 2, "u", NULL, binary, sizeof(binary)));

    ASSERT_OK(chat_store_get(fx->st, "g", 1, &msg, &found));
    assert_true(found);
    assert_int_equal(msg.id, 1);
    assert_int_equal(msg.len, 5);
    assert_string_equal(msg.data, "hello");
    free(msg.data);

    memset(&msg, 0, sizeof(msg));
    found = false;
    ASSERT_OK(chat_store_get(fx->st, "g", 2, &msg, &found));
    assert_true(found);
    assert_int_equal(msg.id, 2);
    assert_int_equal(msg.len, sizeof(binary));
    assert_memory_equal(msg.data, binary, sizeof(binary));
    assert_int_equal(msg.data[msg.len], '\0');
    free(msg.data);

    assert_not_stored(fx->st, "g", 0);
    assert_not_stored(fx->st, "g", 3);
    assert_not_stored(fx->st, "g", UINT64_MAX);
    assert_not_stored(fx->st, "nobody", 1);
}

/* ------------------------------------------------------------------------
 * Client id index
 * --------------------------------------------------------------------- */

static void test_cid_index(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = true;
    chat_err rc;

    assert_int_equal(append_env(fx->st, "g", "alice", "c1", 0), 1);
    assert_int_equal(append_env(fx->st, "g", "bob", "c1", 0), 2);
    assert_int_equal(append_env(fx->st, "g", "alice", NULL, 0), 3);
    assert_int_equal(append_env(fx->st, "g", "alice", "c2", 0), 4);
    assert_int_equal(append_env(fx->st, "g", "ab", "c", 0), 5);

    assert_cid(fx->st, "g", "alice", "c1", true, 1);
    assert_cid(fx->st, "g", "bob", "c1", true, 2);
    assert_cid(fx->st, "g", "alice", "c2", true, 4);
    assert_cid(fx->st, "g", "ab", "c", true, 5);
    /* other from, other cid, other group, and a from/cid split elsewhere */
    assert_cid(fx->st, "g", "carol", "c1", false, 0);
    assert_cid(fx->st, "g", "alice", "c3", false, 0);
    assert_cid(fx->st, "g2", "alice", "c1", false, 0);
    assert_cid(fx->st, "g", "a", "bc", false, 0);

    /* the append without cid indexed nothing, not even under "" */
    rc = chat_store_cid_find(fx->st, "g", "alice", "", &id, &found);
    if (rc == CHAT_OK)
        assert_false(found);
    else
        assert_int_equal(rc, CHAT_EINVAL);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_head_unknown_group),
        CASE(test_append_dense_ids),
        CASE(test_append_wrong_id_conflict),
        CASE(test_groups_isolated),
        CASE(test_read_forward_by_count),
        CASE(test_read_forward_by_bytes),
        CASE(test_read_forward_oversized_message),
        CASE(test_read_forward_after_head),
        CASE(test_read_backward),
        CASE(test_get_found_and_not_found),
        CASE(test_cid_index),
    };

    return cmocka_run_group_tests_name("store_log", tests, NULL, NULL);
}
