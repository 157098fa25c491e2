/* Unit tests of reading the message log (leveldb/ldb_log, and the pages of
 * chat_store.c): pages in both directions, one message, scans without a
 * copy, and a catch-up's page and start with the numbers read beside them
 * (store_page_cases.c, which test_store_pg runs on PostgreSQL). One table
 * of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"
#include "store_page_cases.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

    static const char binary_env[] = {'a', '\0', 'b', '2', '\0', '7', '\0'};

    assert_int_equal(append_parts(fx->st, "g", "u", NULL, "hello", 5, NULL, 0, NULL, 0, NULL), 1);
    assert_int_equal(append_parts(fx->st, "g", "u", NULL, binary, sizeof(binary), binary + 1, 1,
                                  binary + 1, 1, NULL),
                     2);

    ASSERT_OK(chat_store_get(fx->st, "g", 1, &msg, &found));
    assert_true(found);
    assert_int_equal(msg.id, 1);
    assert_int_equal(msg.len, 7);
    assert_string_equal(msg.data, "hello17");
    free(msg.data);

    memset(&msg, 0, sizeof(msg));
    found = false;
    ASSERT_OK(chat_store_get(fx->st, "g", 2, &msg, &found));
    assert_true(found);
    assert_int_equal(msg.id, 2);
    assert_int_equal(msg.len, sizeof(binary_env));
    assert_memory_equal(msg.data, binary_env, sizeof(binary_env));
    assert_int_equal(msg.data[msg.len], '\0');
    free(msg.data);

    assert_not_stored(fx->st, "g", 0);
    assert_not_stored(fx->st, "g", 3);
    assert_not_stored(fx->st, "g", UINT64_MAX);
    assert_not_stored(fx->st, "nobody", 1);
}

/* ------------------------------------------------------------------------
 * Scanning without a copy (chat_store_scan_forward)
 * --------------------------------------------------------------------- */

/* The ids a scan handed to collect_msg, which checks each message's bytes
 * against the envelope stored for it. */
#define SEEN_MAX 16
struct seen {
    const char *group;
    size_t size;    /* the size the envelopes were made with (0: natural) */
    size_t stop_at; /* collect_msg stops the scan on this call (0: never) */
    size_t calls;
    uint64_t ids[SEEN_MAX];
};

static int collect_msg(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct seen *s = ctx;
    char env[ENV_CAP];
    size_t want = env_make(env, s->group, id, s->size);

    assert_int_equal(len, want);
    assert_memory_equal(data, env, len);
    assert_true(s->calls < SEEN_MAX);
    s->ids[s->calls++] = id;
    return s->stop_at != 0 && s->calls == s->stop_at;
}

/* Scans of group "g", which holds ids 1..10 of 10 bytes each. */
static const struct scan_case {
    const char *name;
    const char *group;
    uint64_t after;
    size_t max_count, max_bytes;
    size_t stop_at; /* the callback stops the scan on this call (0: never) */
    uint64_t first; /* the first id handed over; the rest follow it */
    size_t calls;
    bool more;
} scan_cases[] = {
    {"a page by count", "g", 0, 4, SIZE_MAX, 0, 1, 4, true},
    {"the rest", "g", 8, 10, SIZE_MAX, 0, 9, 2, false},
    {"exactly the rest", "g", 6, 4, SIZE_MAX, 0, 7, 4, false},
    {"after the head", "g", 10, 5, SIZE_MAX, 0, 0, 0, false},
    {"far beyond the head", "g", 99, 5, SIZE_MAX, 0, 0, 0, false},
    {"an unknown group", "nobody", 0, 5, SIZE_MAX, 0, 0, 0, false},
    {"by bytes", "g", 0, 10, 25, 0, 1, 2, true},
    {"the first message even when larger", "g", 3, 10, 5, 0, 4, 1, true},
    {"fn stops on the third", "g", 0, 10, SIZE_MAX, 3, 1, 3, true},
    {"fn stops on the last", "g", 8, 10, SIZE_MAX, 2, 9, 2, true},
};

static void test_scan_forward_cases(void **state)
{
    struct fixture *fx = *state;

    for (uint64_t id = 1; id <= 10; id++)
        append_env(fx->st, "g", "u", NULL, 10);
    for (size_t i = 0; i < sizeof(scan_cases) / sizeof(scan_cases[0]); i++) {
        const struct scan_case *c = &scan_cases[i];
        struct seen s = {c->group, 10, c->stop_at, 0, {0}};
        bool more = !c->more;
        chat_err rc = chat_store_scan_forward(fx->st, c->group, c->after, c->max_count,
                                              c->max_bytes, collect_msg, &s, &more);

        if (rc != CHAT_OK || s.calls != c->calls || more != c->more)
            fail_msg("%s: %s, %zu calls (want %zu), more %d", c->name, chat_strerror(rc), s.calls,
                     c->calls, (int)more);
        for (size_t k = 0; k < s.calls; k++)
            if (s.ids[k] != c->first + k)
                fail_msg("%s: call %zu had id %llu", c->name, k, (unsigned long long)s.ids[k]);
    }
}

static void test_scan_forward_from_first(void **state)
{
    struct fixture *fx = *state;
    struct seen s = {"g", 0, 0, 0, {0}};
    uint64_t first = 0;
    bool more = true, done = false;

    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_trim(fx->st, "g", 6, 100, &first));
    assert_int_equal(first, 6);
    ASSERT_OK(chat_store_scan_forward(fx->st, "g", 0, 10, SIZE_MAX, collect_msg, &s, &more));
    assert_int_equal(s.calls, 5);
    assert_int_equal(s.ids[0], 6);
    assert_false(more);

    /* a deleted group reads as empty from its first step on */
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 1, &done));
    s.calls = 0;
    ASSERT_OK(chat_store_scan_forward(fx->st, "g", 0, 10, SIZE_MAX, collect_msg, &s, &more));
    assert_int_equal(s.calls, 0);
    assert_false(more);
}

static void test_scan_forward_bad_arguments(void **state)
{
    struct fixture *fx = *state;
    struct seen s = {"g", 0, 0, 0, {0}};
    const char *long_name = too_long_name();
    bool more = true;

    fill(fx->st, "g", 3);
    assert_int_equal(chat_store_scan_forward(fx->st, "g", 0, 0, SIZE_MAX, collect_msg, &s, &more),
                     CHAT_EINVAL);
    assert_false(more);
    assert_int_equal(chat_store_scan_forward(fx->st, "g", 0, 5, SIZE_MAX, NULL, &s, &more),
                     CHAT_EINVAL);
    assert_int_equal(
        chat_store_scan_forward(fx->st, long_name, 0, 5, SIZE_MAX, collect_msg, &s, &more),
        CHAT_EINVAL);
    assert_int_equal(s.calls, 0);
}

static void test_scan_page(void **state)
{
    page_case_scan_page(((struct fixture *)*state)->st);
}

static void test_cursor_open(void **state)
{
    page_case_cursor_open(((struct fixture *)*state)->st);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_read_forward_by_count),
        CASE(test_read_forward_by_bytes),
        CASE(test_read_forward_oversized_message),
        CASE(test_read_forward_after_head),
        CASE(test_read_backward),
        CASE(test_get_found_and_not_found),
        CASE(test_scan_forward_cases),
        CASE(test_scan_forward_from_first),
        CASE(test_scan_forward_bad_arguments),
        CASE(test_scan_page),
        CASE(test_cursor_open),
    };

    return cmocka_run_group_tests_name("store_read", tests, NULL, NULL);
}
