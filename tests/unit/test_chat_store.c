/* Unit tests of store/chat_store against the contract in chat_store.h: one
 * table of named cases, each run on a fresh LevelDB directory made with
 * mkdtemp and removed in teardown. Every page and message the API hands out
 * is freed, because valgrind runs over this executable too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chat_store.h"

/* The on-disk layout is part of the contract that every key can be deleted
 * (chat_store.h, invariant 6): some cases count raw keys of a closed store. */
#include <leveldb/c.h>

/* ------------------------------------------------------------------------
 * Fixture
 * --------------------------------------------------------------------- */

struct fixture {
    char dir[64];   /* the test's private LevelDB directory */
    chat_store *st; /* open on dir, or NULL after a failed reopen */
};

/* Fails the running case with the code's text when expr is not CHAT_OK. */
#define ASSERT_OK(expr)                                                                            \
    do {                                                                                           \
        chat_err rc_ = (expr);                                                                     \
        if (rc_ != CHAT_OK)                                                                        \
            fail_msg("%s returned %d (%s)", #expr, (int)rc_, chat_strerror(rc_));                  \
    } while (0)

/* Removes path and everything below it; symlinks are removed, not followed.
 * Best effort: teardown must not fail because a file is already gone. */
static void rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d != NULL) {
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                    continue;
                size_t n = strlen(path) + 1 + strlen(de->d_name) + 1;
                char *child = malloc(n);
                if (child == NULL)
                    break;
                snprintf(child, n, "%s/%s", path, de->d_name);
                rm_tree(child);
                free(child);
            }
            closedir(d);
        }
        if (rmdir(path) != 0)
            fprintf(stderr, "rmdir %s: %s\n", path, strerror(errno));
    } else if (unlink(path) != 0) {
        fprintf(stderr, "unlink %s: %s\n", path, strerror(errno));
    }
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    char *errmsg = NULL;

    if (fx == NULL)
        return -1;
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/chat_store_test.XXXXXX");
    if (mkdtemp(fx->dir) == NULL) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        goto fail;
    }
    if (chat_store_open(fx->dir, CHAT_SYNC_NONE, &fx->st, &errmsg) != CHAT_OK) {
        fprintf(stderr, "chat_store_open %s: %s\n", fx->dir, errmsg ? errmsg : "(no message)");
        free(errmsg);
        rm_tree(fx->dir);
        goto fail;
    }
    *state = fx;
    return 0;
fail:
    free(fx);
    return -1;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    chat_store_close(fx->st);
    rm_tree(fx->dir);
    free(fx);
    return 0;
}

/* Closes the fixture's store and opens the same directory again. */
static void reopen(struct fixture *fx, chat_sync sync)
{
    char *errmsg = NULL;
    chat_err rc;

    chat_store_close(fx->st);
    fx->st = NULL;
    rc = chat_store_open(fx->dir, sync, &fx->st, &errmsg);
    if (rc != CHAT_OK) {
        fail_msg("reopen %s: %s (%s)", fx->dir, chat_strerror(rc),
                 errmsg ? errmsg : "(no message)");
        /* not reached: fail_msg leaves the case; errmsg leaks only on failure */
    }
    free(errmsg);
}

/* ------------------------------------------------------------------------
 * Envelopes and checks
 * --------------------------------------------------------------------- */

#define ENV_CAP 256

/* Writes the test envelope of (group, id) to buf and returns its length:
 * "group#id" when size is 0, else exactly size bytes starting with as much
 * of that text as fits and padded with '.'. buf gets a NUL after them. */
static size_t env_make(char *buf, const char *group, uint64_t id, size_t size)
{
    char text[ENV_CAP];
    int n = snprintf(text, sizeof(text), "%s#%llu", group, (unsigned long long)id);

    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_true(size < ENV_CAP);
    if (size == 0)
        size = (size_t)n;
    for (size_t i = 0; i < size; i++)
        buf[i] = i < (size_t)n ? text[i] : '.';
    buf[size] = '\0';
    return size;
}

/* Appends the test envelope of the group's next id; returns that id. */
static uint64_t append_env(chat_store *st, const char *group, const char *from, const char *cid,
                           size_t size)
{
    char env[ENV_CAP];
    uint64_t head = UINT64_MAX;
    size_t len;

    ASSERT_OK(chat_store_head(st, group, &head));
    len = env_make(env, group, head + 1, size);
    ASSERT_OK(chat_store_append(st, group, head + 1, from, cid, env, len));
    return head + 1;
}

/* Appends n natural-size envelopes to group. */
static void fill(chat_store *st, const char *group, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        append_env(st, group, "filler", NULL, 0);
}

/* Checks a page holds exactly the messages ids[0..count) of group, each with
 * the envelope env_make wrote for it (sizes NULL: natural size), a NUL after
 * the bytes, bytes equal to their sum, and the given more flag. */
static void check_page_ids(const chat_page *page, const char *group, const uint64_t *ids,
                           const size_t *sizes, size_t count, bool more)
{
    char env[ENV_CAP];
    size_t bytes = 0;

    assert_non_null(page);
    assert_int_equal(page->count, count);
    for (size_t i = 0; i < count; i++) {
        const chat_msg *m = &page->msgs[i];
        size_t len = env_make(env, group, ids[i], sizes ? sizes[i] : 0);

        assert_int_equal(m->id, ids[i]);
        assert_int_equal(m->len, len);
        assert_non_null(m->data);
        assert_memory_equal(m->data, env, len);
        assert_int_equal(m->data[len], '\0');
        bytes += m->len;
    }
    assert_int_equal(page->bytes, bytes);
    assert_int_equal(page->more, more);
}

/* check_page_ids for a run of count natural-size ids from first, ascending
 * (step 1) or descending (step -1). */
static void check_page_run(const chat_page *page, const char *group, uint64_t first, int step,
                           size_t count, bool more)
{
    uint64_t ids[600];

    assert_true(count <= sizeof(ids) / sizeof(ids[0]));
    for (size_t i = 0; i < count; i++)
        ids[i] = step > 0 ? first + i : first - i;
    check_page_ids(page, group, ids, NULL, count, more);
}

static void assert_head(chat_store *st, const char *group, uint64_t want)
{
    uint64_t head = UINT64_MAX;

    ASSERT_OK(chat_store_head(st, group, &head));
    assert_int_equal(head, want);
}

static void assert_cursor(chat_store *st, const char *group, const char *member, const char *device,
                          bool want_found, uint64_t want)
{
    uint64_t id = UINT64_MAX;
    bool found = !want_found;

    ASSERT_OK(chat_store_cursor_get(st, group, member, device, &id, &found));
    assert_int_equal(found, want_found);
    if (want_found)
        assert_int_equal(id, want);
}

static void assert_member(chat_store *st, const char *group, const char *member, bool want_found,
                          uint64_t want_joined)
{
    uint64_t joined = UINT64_MAX;
    bool found = !want_found;

    ASSERT_OK(chat_store_member_get(st, group, member, &joined, &found));
    assert_int_equal(found, want_found);
    if (want_found)
        assert_int_equal(joined, want_joined);
}

static void assert_cid(chat_store *st, const char *group, const char *from, const char *cid,
                       bool want_found, uint64_t want)
{
    uint64_t id = UINT64_MAX;
    bool found = !want_found;

    ASSERT_OK(chat_store_cid_find(st, group, from, cid, &id, &found));
    assert_int_equal(found, want_found);
    if (want_found)
        assert_int_equal(id, want);
}

static void assert_not_stored(chat_store *st, const char *group, uint64_t id)
{
    chat_msg msg = {0};
    bool found = true;

    ASSERT_OK(chat_store_get(st, group, id, &msg, &found));
    assert_false(found);
}

/* Collects what chat_store_member_groups reports; stops after stop_after
 * calls when that is not 0. */
#define WALK_MAX 16
struct walk {
    char names[WALK_MAX][32];
    uint64_t joined[WALK_MAX];
    int calls;
    int stop_after;
};

static int collect_group(void *ctx, const char *group, uint64_t joined)
{
    struct walk *w = ctx;

    if (w->calls < WALK_MAX) {
        snprintf(w->names[w->calls], sizeof(w->names[0]), "%s", group);
        w->joined[w->calls] = joined;
    }
    w->calls++;
    return (w->stop_after != 0 && w->calls >= w->stop_after) ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * Open, close, errors
 * --------------------------------------------------------------------- */

static void test_open_close_reopen(void **state)
{
    struct fixture *fx = *state;
    chat_msg msg = {0};
    bool found = false;
    char env[ENV_CAP];
    size_t len;

    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 2, NULL));

    reopen(fx, CHAT_SYNC_NONE);

    assert_head(fx->st, "g", 3);
    ASSERT_OK(chat_store_get(fx->st, "g", 2, &msg, &found));
    assert_true(found);
    len = env_make(env, "g", 2, 0);
    assert_int_equal(msg.id, 2);
    assert_int_equal(msg.len, len);
    assert_memory_equal(msg.data, env, len);
    free(msg.data);
    assert_member(fx->st, "g", "alice", true, 3);
    assert_cursor(fx->st, "g", "alice", "d1", true, 2);
}

static void test_open_unusable_path(void **state)
{
    struct fixture *fx = *state;
    char file[128], below[160];
    chat_store *st = NULL;
    char *errmsg = NULL;
    FILE *f;

    /* a regular file where the store's directory should be */
    snprintf(file, sizeof(file), "%s/plain", fx->dir);
    f = fopen(file, "w");
    assert_non_null(f);
    assert_true(fputs("not a database\n", f) >= 0);
    assert_int_equal(fclose(f), 0);

    assert_int_not_equal(chat_store_open(file, CHAT_SYNC_NONE, &st, &errmsg), CHAT_OK);
    assert_non_null(errmsg);
    assert_true(strlen(errmsg) > 0);
    free(errmsg);
    errmsg = NULL;

    /* a directory that cannot be created, below that file */
    snprintf(below, sizeof(below), "%s/sub", file);
    assert_int_not_equal(chat_store_open(below, CHAT_SYNC_NONE, &st, &errmsg), CHAT_OK);
    assert_non_null(errmsg);
    free(errmsg);

    /* errmsg may be NULL: the failure is still reported, nothing leaks */
    assert_int_not_equal(chat_store_open(file, CHAT_SYNC_NONE, &st, NULL), CHAT_OK);
}

static void test_null_destructors(void **state)
{
    struct fixture *fx = *state;
    chat_page *page = NULL;

    chat_store_close(NULL);
    chat_page_destroy(NULL);
    /* the fixture's store is still usable afterwards */
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 10, 1000, &page));
    assert_non_null(page);
    assert_int_equal(page->count, 0);
    chat_page_destroy(page);
}

static void test_strerror_every_code(void **state)
{
    (void)state;
    for (int e = CHAT_OK; e <= CHAT_ECONFLICT; e++) {
        const char *s = chat_strerror((chat_err)e);

        assert_non_null(s);
        assert_true(strlen(s) > 0);
    }
}

static void test_sync_modes(void **state)
{
    struct fixture *fx = *state;

    reopen(fx, CHAT_SYNC_BATCH);
    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_sync(fx->st));
    ASSERT_OK(chat_store_sync(fx->st)); /* nothing written since: still fine */
    reopen(fx, CHAT_SYNC_ALWAYS);
    assert_head(fx->st, "g", 2);
    fill(fx->st, "g", 1);
    ASSERT_OK(chat_store_sync(fx->st));
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 3);
}

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
 * Cursors
 * --------------------------------------------------------------------- */

static void test_cursor_get_not_found(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = true;

    assert_cursor(fx->st, "g", "alice", "d1", false, 0);
    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    assert_cursor(fx->st, "g", "alice", "d1", false, 0);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_false(found);
}

static void test_cursor_advance_forward_only(void **state)
{
    struct fixture *fx = *state;
    uint64_t now = 0;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 10);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, &now));
    assert_int_equal(now, 5);
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);

    now = 0;
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 3, &now));
    assert_int_equal(now, 5);
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, &now));
    assert_int_equal(now, 5);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 7, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 7);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 0, &now));
    assert_int_equal(now, 7);
    assert_cursor(fx->st, "g", "alice", "d1", true, 7);
}

static void test_cursor_advance_clamped_to_head(void **state)
{
    struct fixture *fx = *state;
    uint64_t now = 0;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 50, &now));
    assert_int_equal(now, 10);
    assert_cursor(fx->st, "g", "alice", "d1", true, 10);

    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", UINT64_MAX, &now));
    assert_int_equal(now, 12);
    assert_cursor(fx->st, "g", "alice", "d1", true, 12);
}

static void test_cursor_per_device(void **state)
{
    struct fixture *fx = *state;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alicex", NULL));
    fill(fx->st, "g", 10);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    assert_cursor(fx->st, "g", "alice", "d2", false, 0);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d2", 2, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
    assert_cursor(fx->st, "g", "alice", "d2", true, 2);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d2", 8, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
    assert_cursor(fx->st, "g", "alice", "d2", true, 8);

    /* device "d" is a prefix of "d1"; member "alice" of "alicex" */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d", 3, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
    assert_cursor(fx->st, "g", "alice", "d", true, 3);
    assert_cursor(fx->st, "g", "alicex", "d", false, 0);
    assert_cursor(fx->st, "g", "alicex", "d1", false, 0);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alicex", "d1", 9, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
}

static void test_cursor_max(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = false;

    fill(fx->st, "g", 10);
    fill(fx->st, "g2", 10);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g2", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alicex", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d2", 8, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d3", 3, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g2", "alice", "d1", 9, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alicex", "d1", 10, NULL));

    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 8);

    found = true;
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "bob", &id, &found));
    assert_false(found);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 10, NULL));
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 10);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g2", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 9);
}

static void test_cursor_start_first_device(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0, joined = 0;
    bool found = false;

    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", &joined));
    assert_int_equal(joined, 3);
    fill(fx->st, "g", 4);

    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 3);
    /* the cursor now exists there */
    assert_cursor(fx->st, "g", "alice", "d1", true, 3);

    /* a member who joined an empty group starts at 0 */
    ASSERT_OK(chat_store_member_add(fx->st, "e", "alice", NULL));
    id = UINT64_MAX;
    found = false;
    ASSERT_OK(chat_store_cursor_start(fx->st, "e", "alice", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 0);
}

static void test_cursor_start_second_device(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = false;

    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 4);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_int_equal(id, 3);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d0", 4, NULL));

    /* the most advanced of the other devices, not the joined id */
    found = false;
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d2", &id, &found));
    assert_true(found);
    assert_int_equal(id, 5);
    assert_cursor(fx->st, "g", "alice", "d2", true, 5);

    /* later calls agree: d2 keeps its own cursor when d1 moves on */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 7, NULL));
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d2", &id, &found));
    assert_true(found);
    assert_int_equal(id, 5);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 7);
}

static void test_cursor_start_non_member(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = true;

    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g2", "carol", NULL));

    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "d1", &id, &found));
    assert_false(found);
    assert_cursor(fx->st, "g", "bob", "d1", false, 0);
    found = true;
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "carol", "d1", &id, &found));
    assert_false(found);
    assert_cursor(fx->st, "g", "carol", "d1", false, 0);
    found = true;
    ASSERT_OK(chat_store_cursor_start(fx->st, "nobody", "alice", "d1", &id, &found));
    assert_false(found);
}

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
    /* and the member index agrees (invariant 4) */
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
 * Persistence and volume
 * --------------------------------------------------------------------- */

static void test_ids_survive_reopen(void **state)
{
    struct fixture *fx = *state;
    chat_page *page = NULL;
    char env[ENV_CAP];
    size_t len;

    fill(fx->st, "g", 5);
    append_env(fx->st, "h", "alice", "c1", 0);
    append_env(fx->st, "h", "alice", "c2", 0);

    reopen(fx, CHAT_SYNC_NONE);

    assert_head(fx->st, "g", 5);
    len = env_make(env, "g", 5, 0);
    assert_int_equal(chat_store_append(fx->st, "g", 5, "u", NULL, env, len), CHAT_ECONFLICT);
    assert_int_equal(append_env(fx->st, "g", "u", NULL, 0), 6);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "g", 1, 1, 6, false);
    chat_page_destroy(page);

    assert_head(fx->st, "h", 2);
    assert_cid(fx->st, "h", "alice", "c2", true, 2);
    assert_int_equal(append_env(fx->st, "h", "alice", "c3", 0), 3);

    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 6);
    assert_head(fx->st, "h", 3);
    assert_cid(fx->st, "h", "alice", "c3", true, 3);
}

static void test_many_messages(void **state)
{
    struct fixture *fx = *state;
    const unsigned n = 5000;
    chat_page *page = NULL;
    chat_msg msg = {0};
    bool found = false;
    uint64_t after = 0, before = UINT64_MAX;
    size_t total = 0;
    int pages = 0;
    char env[ENV_CAP];

    for (unsigned i = 1; i <= n; i++)
        assert_int_equal(append_env(fx->st, "bulk", "u", NULL, 0), i);
    assert_head(fx->st, "bulk", n);

    do {
        ASSERT_OK(chat_store_read_forward(fx->st, "bulk", after, 128, SIZE_MAX, &page));
        size_t want = n - after < 128 ? n - after : 128;
        check_page_run(page, "bulk", after + 1, 1, want, after + want < n);
        total += page->count;
        after += page->count;
        chat_page_destroy(page);
        pages++;
    } while (after < n && pages < 100);
    assert_int_equal(total, n);
    assert_int_equal(pages, 40);

    total = 0;
    pages = 0;
    do {
        ASSERT_OK(chat_store_read_backward(fx->st, "bulk", before, 500, SIZE_MAX, &page));
        uint64_t top = before == UINT64_MAX ? n : before - 1;
        check_page_run(page, "bulk", top, -1, 500, top > 500);
        total += page->count;
        before = page->msgs[page->count - 1].id;
        chat_page_destroy(page);
        pages++;
    } while (before > 1 && pages < 100);
    assert_int_equal(total, n);
    assert_int_equal(pages, 10);

    ASSERT_OK(chat_store_get(fx->st, "bulk", 2500, &msg, &found));
    assert_true(found);
    assert_int_equal(msg.len, env_make(env, "bulk", 2500, 0));
    assert_memory_equal(msg.data, env, msg.len);
    free(msg.data);
}

/* ------------------------------------------------------------------------
 * Issue 9, item 7: a damaged block fails reads, not writes
 * --------------------------------------------------------------------- */

#define NOISE_LEN 1000

/* Writes an envelope of NOISE_LEN bytes for (group, id): a marker
 * "<group#id>" then pseudo-random printable bytes, which snappy leaves as
 * literals, so the marker can be found in a table file. */
static size_t noise_make(char *buf, const char *group, uint64_t id)
{
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (id * 0x100000001b3ull) ^ (uint64_t)strlen(group);
    int n = snprintf(buf, NOISE_LEN, "<%s#%llu>", group, (unsigned long long)id);

    assert_true(n > 0 && n < NOISE_LEN);
    for (size_t i = (size_t)n; i < NOISE_LEN; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (char)(0x21 + x % 94);
    }
    return NOISE_LEN;
}

static void noise_fill(chat_store *st, const char *group, uint64_t n)
{
    char env[NOISE_LEN];

    for (uint64_t id = 1; id <= n; id++)
        ASSERT_OK(chat_store_append(st, group, id, "u", NULL, env, noise_make(env, group, id)));
}

/* Finds needle in buf; NULL when absent. */
static char *find_bytes(char *buf, size_t len, const char *needle)
{
    size_t n = strlen(needle);

    for (size_t i = 0; n <= len && i <= len - n; i++)
        if (memcmp(buf + i, needle, n) == 0)
            return buf + i;
    return NULL;
}

/* Inverts the bytes of the first occurrence of needle in one of dir's table
 * files (*.ldb), as a bad disk block would; true when one was found. */
static bool damage_table(const char *dir, const char *needle)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool done = false;

    assert_non_null(d);
    while (!done && (de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name);
        char path[512];
        char *buf, *hit;
        FILE *f;
        long len;

        if (nl < 5 || strcmp(de->d_name + nl - 4, ".ldb") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        f = fopen(path, "r+b");
        assert_non_null(f);
        assert_int_equal(fseek(f, 0, SEEK_END), 0);
        len = ftell(f);
        assert_true(len > 0);
        buf = malloc((size_t)len);
        assert_non_null(buf);
        rewind(f);
        assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
        hit = find_bytes(buf, (size_t)len, needle);
        if (hit) {
            for (size_t i = 0; i < strlen(needle); i++)
                hit[i] = (char)~hit[i];
            assert_int_equal(fseek(f, hit - buf, SEEK_SET), 0);
            assert_int_equal(fwrite(hit, 1, strlen(needle), f), strlen(needle));
            done = true;
        }
        free(buf);
        assert_int_equal(fclose(f), 0);
    }
    closedir(d);
    return done;
}

static void assert_error_names(chat_store *st, const char *a, const char *b)
{
    const char *e = chat_store_last_error(st);

    assert_non_null(e);
    if (!strstr(e, a) || (b && !strstr(e, b)))
        fail_msg("last error \"%s\" does not name %s %s", e, a, b ? b : "");
}

static void test_i7_bad_block_fails_reads_not_writes(void **state)
{
    struct fixture *fx = *state;
    chat_page *page = NULL;
    chat_msg msg = {0};
    bool found = true;
    char env[NOISE_LEN];
    chat_err rc;

    assert_string_equal(chat_store_last_error(fx->st), "");
    noise_fill(fx->st, "bad", 60);
    noise_fill(fx->st, "good", 60);
    /* into table files, where a bad block can be: the log is read once */
    ASSERT_OK(chat_store_compact(fx->st));
    chat_store_close(fx->st);
    fx->st = NULL;
    assert_true(damage_table(fx->dir, "<bad#30>"));
    reopen(fx, CHAT_SYNC_NONE);

    /* the damaged message: an error naming it, not its garbled bytes */
    rc = chat_store_get(fx->st, "bad", 30, &msg, &found);
    assert_true(rc == CHAT_ECORRUPT || rc == CHAT_EIO);
    assert_false(found);
    assert_error_names(fx->st, "\"bad\"", "30");
    /* a page over it fails whole, naming where it started */
    rc = chat_store_read_forward(fx->st, "bad", 0, 100, SIZE_MAX, &page);
    assert_true(rc == CHAT_ECORRUPT || rc == CHAT_EIO);
    assert_null(page);
    assert_error_names(fx->st, "\"bad\"", "after 0");

    /* the other group reads whole */
    ASSERT_OK(chat_store_read_forward(fx->st, "good", 0, 100, SIZE_MAX, &page));
    assert_int_equal(page->count, 60);
    for (size_t i = 0; i < 60; i++) {
        assert_int_equal(page->msgs[i].len, noise_make(env, "good", i + 1));
        assert_memory_equal(page->msgs[i].data, env, NOISE_LEN);
    }
    chat_page_destroy(page);

    /* and writes go on, to the other group and to the damaged one */
    ASSERT_OK(chat_store_append(fx->st, "good", 61, "u", "c", "g61", 3));
    ASSERT_OK(chat_store_append(fx->st, "bad", 61, "u", "c", "b61", 3));
    ASSERT_OK(chat_store_append(fx->st, "fresh", 1, "u", NULL, "f1", 2));
    ASSERT_OK(chat_store_member_add(fx->st, "bad", "alice", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "bad", "alice", "d1", 61, NULL));
    ASSERT_OK(chat_store_sync(fx->st));
    ASSERT_OK(chat_store_read_forward(fx->st, "bad", 60, 10, SIZE_MAX, &page));
    assert_int_equal(page->count, 1);
    assert_int_equal(page->msgs[0].id, 61);
    assert_string_equal(page->msgs[0].data, "b61");
    chat_page_destroy(page);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "bad", 61);
    assert_head(fx->st, "good", 61);
    assert_head(fx->st, "fresh", 1);
    assert_cursor(fx->st, "bad", "alice", "d1", true, 61);
}

/* ------------------------------------------------------------------------
 * Issue 9, item 8: every key has a way to be deleted
 * --------------------------------------------------------------------- */

/* A raw key prefix: a tag, then length-prefixed parts (NULL ends them). */
static size_t raw_prefix(char *buf, size_t cap, char tag, const char *a, const char *b)
{
    size_t len = 0;
    const char *parts[2] = {a, b};

    buf[len++] = tag;
    for (int i = 0; i < 2 && parts[i]; i++) {
        size_t n = strlen(parts[i]);
        assert_true(len + 2 + n <= cap);
        buf[len++] = (char)(n >> 8);
        buf[len++] = (char)(n & 0xff);
        memcpy(buf + len, parts[i], n);
        len += n;
    }
    return len;
}

/* Counts the keys starting with prefix in the fixture's store: closes it,
 * reads the directory with LevelDB itself, and opens the store again. */
static size_t raw_count(struct fixture *fx, const char *prefix, size_t plen)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL;
    size_t n = 0;

    chat_store_close(fx->st);
    fx->st = NULL;
    leveldb_t *db = leveldb_open(opt, fx->dir, &err);
    if (err)
        fail_msg("leveldb_open %s: %s", fx->dir, err);
    leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
    for (leveldb_iter_seek(it, prefix, plen); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0;
        const char *k = leveldb_iter_key(it, &klen);
        if (klen < plen || memcmp(k, prefix, plen) != 0)
            break;
        n++;
    }
    leveldb_iter_destroy(it);
    leveldb_close(db);
    leveldb_readoptions_destroy(ro);
    leveldb_options_destroy(opt);
    reopen(fx, CHAT_SYNC_NONE);
    return n;
}

/* Keys of one kind in group (and of member, when not NULL). */
static size_t group_keys(struct fixture *fx, char tag, const char *group, const char *member)
{
    char p[256];
    return raw_count(fx, p, raw_prefix(p, sizeof(p), tag, group, member));
}

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

    /* the same cid appended twice (the store does not forbid it): the entry
     * points at the second, which trimming the first must not remove */
    append_env(fx->st, "g", "alice", "c", 0);
    append_env(fx->st, "g", "alice", "c", 0);
    append_env(fx->st, "g", "alice", "d", 0);
    assert_cid(fx->st, "g", "alice", "c", true, 2);
    ASSERT_OK(chat_store_trim(fx->st, "g", 2, 100, NULL));
    assert_cid(fx->st, "g", "alice", "c", true, 2);
    assert_int_equal(group_keys(fx, 'K', "g", NULL), 2);
    ASSERT_OK(chat_store_trim(fx->st, "g", 3, 100, NULL));
    assert_cid(fx->st, "g", "alice", "c", false, 0);
    assert_cid(fx->st, "g", "alice", "d", true, 3);
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

/* Writes one raw record into the fixture's store (closed meanwhile): how a
 * store written by an older version looks. */
static void raw_put(struct fixture *fx, const char *k, size_t klen, const void *v, size_t vlen)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;

    chat_store_close(fx->st);
    fx->st = NULL;
    leveldb_t *db = leveldb_open(opt, fx->dir, &err);
    if (err)
        fail_msg("leveldb_open %s: %s", fx->dir, err);
    leveldb_put(db, wo, k, klen, v, vlen, &err);
    if (err)
        fail_msg("leveldb_put: %s", err);
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(opt);
    reopen(fx, CHAT_SYNC_NONE);
}

/* An 8-byte cursor, as stores before issue 9 wrote them. */
static void raw_old_cursor(struct fixture *fx, const char *group, const char *member,
                           const char *device, uint64_t id)
{
    char k[256], v[8];
    size_t n = raw_prefix(k, sizeof(k), 'C', group, member);
    size_t dl = strlen(device);

    k[n++] = (char)(dl >> 8);
    k[n++] = (char)(dl & 0xff);
    memcpy(k + n, device, dl);
    n += dl;
    for (int i = 7; i >= 0; i--, id >>= 8)
        v[i] = (char)(id & 0xff);
    raw_put(fx, k, n, v, sizeof(v));
}

#define DAY_MS 86400000ll

/* The store's clock in these cases: a number the case sets. */
static int64_t fake_clock(void *ctx)
{
    return *(const int64_t *)ctx;
}

static void assert_used(chat_store *st, const char *group, const char *member, const char *device,
                        uint64_t want_id, int64_t want_used)
{
    uint64_t id = UINT64_MAX;
    int64_t used = -1;
    bool found = false;

    ASSERT_OK(chat_store_cursor_info(st, group, member, device, &id, &used, &found));
    assert_true(found);
    assert_int_equal(id, want_id);
    assert_int_equal(used, want_used);
}

static void test_i8b_cursor_touch_once_a_day(void **state)
{
    struct fixture *fx = *state;
    int64_t now = 100 * DAY_MS + 3600000;
    uint64_t id = 0;
    bool found = false;

    chat_store_set_clock(fx->st, fake_clock, &now);
    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_used(fx->st, "g", "alice", "d1", 10, now);

    /* the same day: nothing written */
    ASSERT_OK(chat_store_cursor_touch(fx->st, "g", "alice", "d1", now + 3600000));
    assert_used(fx->st, "g", "alice", "d1", 10, now);
    /* the next day: stamped */
    ASSERT_OK(chat_store_cursor_touch(fx->st, "g", "alice", "d1", now + DAY_MS));
    assert_used(fx->st, "g", "alice", "d1", 10, now + DAY_MS);
    /* no cursor, nothing created */
    ASSERT_OK(chat_store_cursor_touch(fx->st, "g", "alice", "d2", now + DAY_MS));
    assert_cursor(fx->st, "g", "alice", "d2", false, 0);

    /* an ack that moves nothing stamps once a day too; one that moves does */
    now += 3 * DAY_MS;
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    assert_used(fx->st, "g", "alice", "d1", 10, now);
    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 4, NULL));
    now += 1000;
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 4, NULL));
    assert_used(fx->st, "g", "alice", "d1", 10, now - 1000);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 12, NULL));
    assert_used(fx->st, "g", "alice", "d1", 12, now);
    /* a subscribe (cursor_start of a known device) is a use */
    now += DAY_MS;
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_int_equal(id, 12);
    assert_used(fx->st, "g", "alice", "d1", 12, now);
    /* and the stamps survive a reopen */
    reopen(fx, CHAT_SYNC_NONE);
    assert_used(fx->st, "g", "alice", "d1", 12, now);
}

/* Expires with max_keys per call until done; returns the calls made and
 * adds the removals to *removed. */
static int expire_all(chat_store *st, int64_t older_than, size_t max_keys, size_t *removed)
{
    char resume[CHAT_STORE_RESUME_MAX];
    bool done = false;
    int calls = 0;

    resume[0] = resume[1] = 0;
    *removed = 0;
    while (!done && calls < 10000) {
        size_t n = SIZE_MAX;
        ASSERT_OK(
            chat_store_expire_devices(st, older_than, max_keys, resume, sizeof(resume), &n, &done));
        assert_true(n <= max_keys);
        *removed += n;
        calls++;
    }
    assert_true(done);
    return calls;
}

static void test_i8b_expire_devices_bounded(void **state)
{
    struct fixture *fx = *state;
    const char *groups[] = {"a", "b", "c"};
    int64_t now = 1000 * DAY_MS;
    char resume[CHAT_STORE_RESUME_MAX], dev[16];
    uint64_t id = 0;
    bool found = false, done = false;
    size_t removed = 0;

    chat_store_set_clock(fx->st, fake_clock, &now);
    /* 3 groups x 2 members x 5 devices; devices 0-2 used long ago */
    for (int g = 0; g < 3; g++) {
        ASSERT_OK(chat_store_member_add(fx->st, groups[g], "alice", NULL));
        ASSERT_OK(chat_store_member_add(fx->st, groups[g], "bob", NULL));
        fill(fx->st, groups[g], 20);
        for (int m = 0; m < 2; m++) {
            const char *member = m ? "bob" : "alice";
            for (int d = 0; d < 5; d++) {
                now = d < 3 ? 10 * DAY_MS + d : 999 * DAY_MS;
                snprintf(dev, sizeof(dev), "d%d", d);
                ASSERT_OK(chat_store_cursor_advance(fx->st, groups[g], member, dev, 10 + d, NULL));
            }
        }
    }
    now = 1000 * DAY_MS;

    assert_int_equal(
        chat_store_expire_devices(fx->st, now, 0, resume, sizeof(resume), &removed, &done),
        CHAT_EINVAL);
    assert_int_equal(chat_store_expire_devices(fx->st, now, 4, resume, 16, &removed, &done),
                     CHAT_EINVAL);

    /* 30 cursors, 4 looked at per call: 8 calls, 18 stale ones gone */
    assert_int_equal(expire_all(fx->st, 900 * DAY_MS, 4, &removed), 8);
    assert_int_equal(removed, 18);
    for (int g = 0; g < 3; g++) {
        assert_cursor(fx->st, groups[g], "alice", "d0", false, 0);
        assert_cursor(fx->st, groups[g], "bob", "d2", false, 0);
        assert_cursor(fx->st, groups[g], "bob", "d3", true, 13);
        assert_cursor(fx->st, groups[g], "alice", "d4", true, 14);
        assert_member(fx->st, groups[g], "alice", true, 0);
    }
    assert_int_equal(group_keys(fx, 'C', "b", NULL), 4);
    /* a second walk finds nothing more to do */
    assert_int_equal(expire_all(fx->st, 900 * DAY_MS, 100, &removed), 1);
    assert_int_equal(removed, 0);

    /* every device gone: the member's record of its maximum stays, so a
     * device that comes back starts where the most advanced one was */
    chat_store_set_clock(fx->st, fake_clock, &now);
    expire_all(fx->st, now + 1, 7, &removed);
    assert_int_equal(removed, 12);
    assert_int_equal(group_keys(fx, 'C', "a", NULL), 0);
    assert_int_equal(group_keys(fx, 'X', "a", NULL), 2);
    chat_store_set_clock(fx->st, fake_clock, &now);
    ASSERT_OK(chat_store_cursor_start(fx->st, "a", "alice", "d0", &id, &found));
    assert_true(found);
    assert_int_equal(id, 14);
    ASSERT_OK(chat_store_cursor_start(fx->st, "a", "alice", "new", &id, &found));
    assert_int_equal(id, 14);
}

static void test_i8b_new_device_reads_one_record(void **state)
{
    struct fixture *fx = *state;
    char dev[16];
    uint64_t id = 0;
    bool found = false;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alicex", NULL));
    fill(fx->st, "g", 300);
    /* the review's case, smaller: many client ids of one user */
    for (int d = 0; d < 200; d++) {
        snprintf(dev, sizeof(dev), "rnd%03d", d);
        ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", dev, &id, &found));
        assert_int_equal(id, d == 0 ? 0 : 100 + (uint64_t)d - 1);
        ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", dev, 100 + (uint64_t)d, NULL));
    }
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alicex", "x", 300, NULL));
    assert_int_equal(group_keys(fx, 'X', "g", "alice"), 1);
    assert_int_equal(group_keys(fx, 'X', "g", NULL), 2);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 299);

    /* member_remove takes the record with the cursors */
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "alice"));
    assert_int_equal(group_keys(fx, 'X', "g", "alice"), 0);
    assert_int_equal(group_keys(fx, 'C', "g", "alice"), 0);
    assert_int_equal(group_keys(fx, 'X', "g", "alicex"), 1);
    found = true;
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_false(found);
}

static void test_i8b_old_cursor_values(void **state)
{
    struct fixture *fx = *state;
    int64_t now = 50 * DAY_MS, used = -1;
    uint64_t id = 0;
    bool found = false;
    size_t removed = 0;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    raw_old_cursor(fx, "g", "alice", "d1", 5);
    raw_old_cursor(fx, "g", "alice", "d2", 7);
    chat_store_set_clock(fx->st, fake_clock, &now);

    /* read as (id, never stamped); no maximum record yet: computed */
    ASSERT_OK(chat_store_cursor_info(fx->st, "g", "alice", "d1", &id, &used, &found));
    assert_true(found);
    assert_int_equal(id, 5);
    assert_int_equal(used, 0);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 7);
    /* the first move writes the record from the old cursors */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 6, NULL));
    assert_used(fx->st, "g", "alice", "d1", 6, now);
    assert_int_equal(group_keys(fx, 'X', "g", "alice"), 1);
    chat_store_set_clock(fx->st, fake_clock, &now);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d3", &id, &found));
    assert_int_equal(id, 7);

    /* an old cursor is stamped by the first expiry walk, not deleted */
    now = 60 * DAY_MS;
    raw_old_cursor(fx, "g", "bob", "b1", 3);
    chat_store_set_clock(fx->st, fake_clock, &now);
    expire_all(fx->st, 55 * DAY_MS, 10, &removed);
    assert_int_equal(removed, 2); /* alice d1 and d3, stamped on day 50 */
    assert_used(fx->st, "g", "alice", "d2", 7, now);
    assert_used(fx->st, "g", "bob", "b1", 3, now);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "b2", &id, &found));
    assert_int_equal(id, 10); /* joined at 10 beats bob's old cursor */
}

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

/* ------------------------------------------------------------------------
 * Figures for $SYS
 * --------------------------------------------------------------------- */

/* Deletes one raw record from the fixture's store (closed meanwhile). */
static void raw_del(struct fixture *fx, const char *k, size_t klen)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;

    chat_store_close(fx->st);
    fx->st = NULL;
    leveldb_t *db = leveldb_open(opt, fx->dir, &err);
    if (err)
        fail_msg("leveldb_open %s: %s", fx->dir, err);
    leveldb_delete(db, wo, k, klen, &err);
    if (err)
        fail_msg("leveldb_delete: %s", err);
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(opt);
    reopen(fx, CHAT_SYNC_NONE);
}

static void assert_groups(chat_store *st, uint64_t want)
{
    uint64_t groups = UINT64_MAX;

    ASSERT_OK(chat_store_stats(st, &groups, NULL));
    assert_int_equal(groups, want);
}

static void test_stats_groups_and_bytes(void **state)
{
    struct fixture *fx = *state;
    uint64_t bytes = UINT64_MAX;
    bool done = false;

    assert_groups(fx->st, 0);
    ASSERT_OK(chat_store_stats(fx->st, NULL, &bytes));
    assert_int_equal(bytes, 0);
    noise_fill(fx->st, "a", 100);
    fill(fx->st, "b", 3);
    fill(fx->st, "c", 1);
    ASSERT_OK(chat_store_member_add(fx->st, "members-only", "alice", NULL));
    assert_groups(fx->st, 3);
    reopen(fx, CHAT_SYNC_NONE);
    assert_groups(fx->st, 3);
    /* a deleted group keeps its head, and is counted */
    while (!done)
        ASSERT_OK(chat_store_group_delete(fx->st, "c", 100, &done));
    assert_groups(fx->st, 3);
    fill(fx->st, "c", 1);
    assert_groups(fx->st, 3);

    /* table files: about the 100 KB of noise */
    ASSERT_OK(chat_store_compact(fx->st));
    ASSERT_OK(chat_store_stats(fx->st, NULL, &bytes));
    assert_true(bytes > 90000 && bytes < 200000);

    /* a store from before the counter counts once, at open */
    raw_del(fx, "#groups", 7);
    assert_groups(fx->st, 3);
    fill(fx->st, "d", 1);
    reopen(fx, CHAT_SYNC_NONE);
    assert_groups(fx->st, 4);
}

/* ------------------------------------------------------------------------
 * Issue 9, item 11: the store's incarnation
 * --------------------------------------------------------------------- */

/* Closes the fixture's store and opens it again with a given boot id. */
static void reopen_boot(struct fixture *fx, chat_sync sync, const char *boot)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    char *errmsg = NULL;
    chat_err rc;

    chat_store_close(fx->st);
    fx->st = NULL;
    opts.sync = sync;
    opts.boot_id = boot;
    rc = chat_store_open_opts(fx->dir, &opts, &fx->st, &errmsg);
    if (rc != CHAT_OK)
        fail_msg("reopen %s: %s (%s)", fx->dir, chat_strerror(rc), errmsg ? errmsg : "");
    free(errmsg);
}

/* Copies every file of the fixture's directory into it again once the
 * store is gone: what a crash of the process leaves (every write reached
 * the kernel, nothing was closed). The store stays open meanwhile. */
static void crash(struct fixture *fx)
{
    char snap[64];
    DIR *d;
    struct dirent *de;

    snprintf(snap, sizeof(snap), "/tmp/chat_store_snap.XXXXXX");
    assert_non_null(mkdtemp(snap));
    for (int pass = 0; pass < 2; pass++) {
        const char *from = pass ? snap : fx->dir, *to = pass ? fx->dir : snap;
        if (pass) {
            chat_store_close(fx->st); /* a clean close, then undone */
            fx->st = NULL;
            rm_tree(fx->dir);
            assert_int_equal(mkdir(fx->dir, 0700), 0);
        }
        d = opendir(from);
        assert_non_null(d);
        while ((de = readdir(d)) != NULL) {
            char src[512], dst[512], buf[8192];
            size_t n;
            if (de->d_name[0] == '.')
                continue;
            snprintf(src, sizeof(src), "%s/%s", from, de->d_name);
            snprintf(dst, sizeof(dst), "%s/%s", to, de->d_name);
            FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
            assert_non_null(in);
            assert_non_null(out);
            while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
                assert_int_equal(fwrite(buf, 1, n, out), n);
            assert_int_equal(fclose(in), 0);
            assert_int_equal(fclose(out), 0);
        }
        closedir(d);
    }
    rm_tree(snap);
}

static bool is_hex32(const char *s)
{
    if (strlen(s) != 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!strchr("0123456789abcdef", s[i]))
            return false;
    return true;
}

static void test_i11_incarnation_kept_by_clean_close(void **state)
{
    struct fixture *fx = *state;
    char inc[40];

    snprintf(inc, sizeof(inc), "%s", chat_store_incarnation(fx->st));
    assert_true(is_hex32(inc));
    assert_false(chat_store_recovered(fx->st));
    fill(fx->st, "g", 3);
    /* a clean close, even on a restarted machine, keeps it */
    for (chat_sync m = CHAT_SYNC_NONE; m <= CHAT_SYNC_ALWAYS; m++) {
        reopen_boot(fx, m, m == CHAT_SYNC_BATCH ? "boot-B" : "boot-A");
        assert_string_equal(chat_store_incarnation(fx->st), inc);
        assert_false(chat_store_recovered(fx->st));
    }
    assert_head(fx->st, "g", 3);

    /* another store has another one */
    chat_store *other = NULL;
    char dir[64];
    snprintf(dir, sizeof(dir), "/tmp/chat_store_other.XXXXXX");
    assert_non_null(mkdtemp(dir));
    ASSERT_OK(chat_store_open(dir, CHAT_SYNC_NONE, &other, NULL));
    assert_true(is_hex32(chat_store_incarnation(other)));
    assert_string_not_equal(chat_store_incarnation(other), inc);
    chat_store_close(other);
    rm_tree(dir);
}

static void test_i11_process_crash_keeps_incarnation(void **state)
{
    struct fixture *fx = *state;
    char inc[40];

    for (chat_sync m = CHAT_SYNC_NONE; m <= CHAT_SYNC_ALWAYS; m++) {
        reopen_boot(fx, m, "boot-A");
        snprintf(inc, sizeof(inc), "%s", chat_store_incarnation(fx->st));
        append_env(fx->st, "g", "u", NULL, 0);
        crash(fx);
        /* the same boot: what reached the kernel is there */
        reopen_boot(fx, CHAT_SYNC_NONE, "boot-A");
        assert_string_equal(chat_store_incarnation(fx->st), inc);
        assert_false(chat_store_recovered(fx->st));
        assert_head(fx->st, "g", (uint64_t)m + 1);
    }
}

static void test_i11_power_loss_new_incarnation(void **state)
{
    struct fixture *fx = *state;
    char inc[40];

    for (chat_sync m = CHAT_SYNC_NONE; m <= CHAT_SYNC_BATCH; m++) {
        reopen_boot(fx, m, "boot-A");
        snprintf(inc, sizeof(inc), "%s", chat_store_incarnation(fx->st));
        append_env(fx->st, "g", "u", NULL, 0);
        crash(fx);
        /* another boot, unsynced appends: ids may have been lost */
        reopen_boot(fx, CHAT_SYNC_NONE, "boot-B");
        assert_true(chat_store_recovered(fx->st));
        assert_true(is_hex32(chat_store_incarnation(fx->st)));
        assert_string_not_equal(chat_store_incarnation(fx->st), inc);
        /* and it is on disk: a clean reopen keeps the new one */
        snprintf(inc, sizeof(inc), "%s", chat_store_incarnation(fx->st));
        reopen_boot(fx, CHAT_SYNC_NONE, "boot-B");
        assert_false(chat_store_recovered(fx->st));
        assert_string_equal(chat_store_incarnation(fx->st), inc);
        /* so does a crash of the recovering run itself on the same boot */
        crash(fx);
        reopen_boot(fx, CHAT_SYNC_NONE, "boot-B");
        assert_string_equal(chat_store_incarnation(fx->st), inc);
    }

    /* every append synced: a reboot loses nothing, the incarnation stays */
    reopen_boot(fx, CHAT_SYNC_ALWAYS, "boot-A");
    snprintf(inc, sizeof(inc), "%s", chat_store_incarnation(fx->st));
    append_env(fx->st, "g", "u", NULL, 0);
    crash(fx);
    reopen_boot(fx, CHAT_SYNC_NONE, "boot-C");
    assert_false(chat_store_recovered(fx->st));
    assert_string_equal(chat_store_incarnation(fx->st), inc);
}

/* ------------------------------------------------------------------------
 * Issue 9, item 12: the fsync thread of CHAT_SYNC_BATCH
 * --------------------------------------------------------------------- */

/* Waits (at most 10 s) until the syncer finished `rounds` rounds. */
static chat_sync_state wait_rounds(chat_store *st, uint64_t rounds)
{
    chat_sync_state ss = {{0}, 0, 0};
    struct timespec nap = {0, 1000000};

    for (int i = 0; i < 10000; i++) {
        ASSERT_OK(chat_store_sync_state(st, &ss));
        if (ss.rounds >= rounds)
            return ss;
        nanosleep(&nap, NULL);
    }
    fail_msg("the syncer did %llu rounds, not %llu", (unsigned long long)ss.rounds,
             (unsigned long long)rounds);
    return ss;
}

/* The name of the newest write-ahead log in dir. */
static void newest_log(const char *dir, char *out, size_t cap)
{
    unsigned long long best = 0, n;
    char tail[8];
    DIR *d = opendir(dir);
    struct dirent *de;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        if (sscanf(de->d_name, "%llu.%7s", &n, tail) == 2 && !strcmp(tail, "log") && n > best)
            best = n;
    closedir(d);
    assert_true(best > 0);
    snprintf(out, cap, "%06llu.log", best);
}

static void reopen_batch(struct fixture *fx, size_t write_buffer)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;

    chat_store_close(fx->st);
    fx->st = NULL;
    opts.sync = CHAT_SYNC_BATCH;
    opts.write_buffer_size = write_buffer;
    ASSERT_OK(chat_store_open_opts(fx->dir, &opts, &fx->st, NULL));
}

static void test_i12_syncer_follows_log_rotation(void **state)
{
    struct fixture *fx = *state;
    chat_sync_state ss;
    char first[32], now[32];

    assert_int_equal(chat_store_sync_state(fx->st, &ss), CHAT_EINVAL); /* not batch */
    reopen_batch(fx, 64 << 10); /* LevelDB's smallest memtable */
    append_env(fx->st, "g", "u", NULL, 0);
    ASSERT_OK(chat_store_sync_async(fx->st));
    ss = wait_rounds(fx->st, 1);
    newest_log(fx->dir, first, sizeof(first));
    assert_string_equal(ss.log, first);

    /* 300 KB through a 64 KB memtable: several new logs in quick succession */
    noise_fill(fx->st, "n", 300);
    ASSERT_OK(chat_store_sync_async(fx->st));
    ss = wait_rounds(fx->st, 2);
    newest_log(fx->dir, now, sizeof(now));
    assert_string_not_equal(now, first);
    assert_string_equal(ss.log, now);
    assert_int_equal(ss.fallbacks, 0);

    /* and once more, with writes between each request */
    for (uint64_t r = 3; r < 13; r++) {
        for (int i = 0; i < 20; i++)
            append_env(fx->st, "g", "u", NULL, 200);
        ASSERT_OK(chat_store_sync_async(fx->st));
        ss = wait_rounds(fx->st, r);
    }
    newest_log(fx->dir, now, sizeof(now));
    assert_string_equal(ss.log, now);
    append_env(fx->st, "g", "u", NULL, 0);
    ASSERT_OK(chat_store_sync(fx->st));
}

static void test_i12_syncer_survives_emfile(void **state)
{
    struct fixture *fx = *state;
    struct rlimit old, lim;
    chat_sync_state ss;
    int probe;

    reopen_batch(fx, 0);
    /* no descriptor left: the lowest free one is the limit */
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    probe = open("/dev/null", O_RDONLY);
    assert_true(probe >= 0);
    close(probe);
    lim = old;
    lim.rlim_cur = (rlim_t)probe;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    probe = open("/dev/null", O_RDONLY);
    if (probe >= 0) {
        /* valgrind emulates the limit without enforcing it */
        close(probe);
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
        skip();
    }

    /* before its first open: a synced write instead, and no failure */
    append_env(fx->st, "g", "u", NULL, 0);
    ASSERT_OK(chat_store_sync_async(fx->st));
    ss = wait_rounds(fx->st, 1);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(ss.fallbacks, 1);
    assert_string_equal(ss.log, "");

    /* descriptors back: it opens the log and syncs as before */
    append_env(fx->st, "g", "u", NULL, 0);
    ASSERT_OK(chat_store_sync_async(fx->st));
    ss = wait_rounds(fx->st, 2);
    assert_int_equal(ss.fallbacks, 1);
    assert_true(strlen(ss.log) > 0);
    append_env(fx->st, "g", "u", NULL, 0);
    ASSERT_OK(chat_store_sync_async(fx->st));
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 3);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

#define CASE(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_open_close_reopen),
        CASE(test_open_unusable_path),
        CASE(test_null_destructors),
        CASE(test_strerror_every_code),
        CASE(test_sync_modes),
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
        CASE(test_cursor_get_not_found),
        CASE(test_cursor_advance_forward_only),
        CASE(test_cursor_advance_clamped_to_head),
        CASE(test_cursor_per_device),
        CASE(test_cursor_max),
        CASE(test_cursor_start_first_device),
        CASE(test_cursor_start_second_device),
        CASE(test_cursor_start_non_member),
        CASE(test_member_add_idempotent),
        CASE(test_member_get),
        CASE(test_member_remove),
        CASE(test_member_groups_byte_order),
        CASE(test_member_groups_stop),
        CASE(test_ids_survive_reopen),
        CASE(test_many_messages),
        CASE(test_i7_bad_block_fails_reads_not_writes),
        CASE(test_i8a_trim_removes_cid_keys),
        CASE(test_i8a_trim_keeps_reused_cid),
        CASE(test_i8c_trim_bounded_per_call),
        CASE(test_i8b_cursor_touch_once_a_day),
        CASE(test_i8b_expire_devices_bounded),
        CASE(test_i8b_new_device_reads_one_record),
        CASE(test_i8b_old_cursor_values),
        CASE(test_i8d_group_delete_removes_every_key),
        CASE(test_i8d_publish_between_steps),
        CASE(test_i8d_delete_again_at_same_head),
        CASE(test_stats_groups_and_bytes),
        CASE(test_i11_incarnation_kept_by_clean_close),
        CASE(test_i11_process_crash_keeps_incarnation),
        CASE(test_i11_power_loss_new_incarnation),
        CASE(test_i12_syncer_follows_log_rotation),
        CASE(test_i12_syncer_survives_emfile),
    };

    return cmocka_run_group_tests_name("chat_store", tests, NULL, NULL);
}
