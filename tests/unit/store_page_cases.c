/* store_page_cases: a catch-up's reads on any backend (see
 * store_page_cases.h). */
#include "store_page_cases.h"
#include "store_fixture.h"

#include <stdio.h>
#include <string.h>

/* What a scan_page call handed its callback. */
struct got {
    const uint64_t *head, *first; /* the call's out-parameters */
    uint64_t ids[64];
    size_t n;
    uint64_t head_seen, first_seen; /* at the first message */
    size_t stop_after;              /* 0: never stop */
    size_t len0;                    /* the first message's length */
};

static int got_add(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct got *g = ctx;
    char want[ENV_CAP];
    if (g->n == 0) {
        g->head_seen = *g->head;
        g->first_seen = *g->first;
        g->len0 = len;
    }
    assert_true(g->n < 64);
    g->ids[g->n++] = id;
    /* the envelope append_env stored for id, up to its time (PostgreSQL
     * stamps the server's) */
    int wl = snprintf(want, sizeof(want), "g#%llu@", (unsigned long long)id);
    assert_true(len > (size_t)wl);
    assert_memory_equal(data, want, (size_t)wl);
    return g->stop_after && g->n == g->stop_after ? 1 : 0;
}

/* One scan_page of g after `after`; checks the ids from..from+count-1,
 * head, first and more. */
static size_t page_is(chat_store *st, uint64_t after, size_t max_count, size_t max_bytes,
                      size_t stop_after, uint64_t from, size_t count, bool more, uint64_t head,
                      uint64_t first)
{
    uint64_t h = 99, f = 99;
    bool m = !more;
    struct got g = {&h, &f, {0}, 0, 0, 0, stop_after, 0};
    ASSERT_OK(chat_store_scan_page(st, "g", after, max_count, max_bytes, got_add, &g, &m, &h, &f));
    assert_int_equal(h, head);
    assert_int_equal(f, first);
    if (count) {
        assert_int_equal(g.head_seen, head);
        assert_int_equal(g.first_seen, first);
    }
    assert_int_equal(g.n, count);
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(g.ids[i], from + i);
    }
    if (m != more) {
        fail_msg("page after %llu: more %d, want %d", (unsigned long long)after, m, more);
    }
    return g.len0;
}

void page_case_scan_page(chat_store *st)
{
    uint64_t first_now = 0;
    page_is(st, 0, 10, 1 << 20, 0, 0, 0, false, 0, 1); /* no group yet */
    for (int i = 0; i < 20; i++) {
        append_env(st, "g", "alice", NULL, 0);
    }
    size_t one = page_is(st, 0, 10, 1 << 20, 0, 1, 10, true, 20, 1);
    page_is(st, 10, 10, 1 << 20, 0, 11, 10, false, 20, 1);
    page_is(st, 15, 10, 1 << 20, 0, 16, 5, false, 20, 1);
    page_is(st, 20, 10, 1 << 20, 0, 0, 0, false, 20, 1);
    /* bytes: the first message always, then what fits (1 to 3 are as
     * long as each other) */
    page_is(st, 0, 10, 1, 0, 1, 1, true, 20, 1);
    page_is(st, 0, 10, 3 * one, 0, 1, 3, true, 20, 1);
    /* a callback that stops: more */
    page_is(st, 0, 10, 1 << 20, 2, 1, 2, true, 20, 1);
    /* retention: first moves, the page begins there */
    ASSERT_OK(chat_store_trim(st, "g", 6, 100, &first_now));
    assert_int_equal(first_now, 6);
    page_is(st, 0, 3, 1 << 20, 0, 6, 3, true, 20, 6);
    page_is(st, UINT64_MAX, 3, 1 << 20, 0, 0, 0, false, 20, 6);
}

void page_case_cursor_open(chat_store *st)
{
    uint64_t id = 99, head = 99, joined = 0;
    bool found = true;
    ASSERT_OK(chat_store_cursor_open(st, "g", "bob", "b1", &id, &found, &head));
    assert_false(found);
    assert_int_equal(head, 0);
    for (int i = 0; i < 5; i++) {
        append_env(st, "g", "alice", NULL, 0);
    }
    ASSERT_OK(chat_store_member_add(st, "g", "bob", &joined));
    assert_int_equal(joined, 5);
    for (int i = 0; i < 3; i++) {
        append_env(st, "g", "alice", NULL, 0);
    }
    ASSERT_OK(chat_store_cursor_open(st, "g", "bob", "b1", &id, &found, &head));
    assert_true(found);
    assert_int_equal(id, 5); /* where bob joined */
    assert_int_equal(head, 8);
    assert_cursor(st, "g", "bob", "b1", true, 5); /* created there */
    ASSERT_OK(chat_store_cursor_advance(st, "g", "bob", "b1", 7, &id));
    ASSERT_OK(chat_store_cursor_open(st, "g", "bob", "b1", &id, &found, &head));
    assert_true(found);
    assert_int_equal(id, 7);
    assert_int_equal(head, 8);
    /* a second device starts at the member's most advanced cursor */
    ASSERT_OK(chat_store_cursor_open(st, "g", "bob", "b2", &id, &found, &head));
    assert_true(found);
    assert_int_equal(id, 7);
}
