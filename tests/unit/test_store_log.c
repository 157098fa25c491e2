/* Unit tests of the message log (leveldb/ldb_log): appends, heads, the cid
 * index and the list of groups (reads and scans: test_store_read.c).
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"
#include "ldb_cidf.h"
#include "ldb_log.h"

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
    assert_true(first <= 1); /* invariant kept-range: first <= head + 1 */
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

/* A cid already stored: nothing written, the original id and envelope
 * come back, whatever the new template held. */
static void test_append_duplicate_cid(void **state)
{
    struct fixture *fx = *state;
    chat_page *page = NULL;
    char env[ENV_CAP];
    chat_envelope tpl = {"intruder", 8, "", 0, "", 0};
    chat_appended ap;
    bool dup = false;

    fill(fx->st, "g", 3);
    assert_int_equal(append_env(fx->st, "g", "alice", "x", 0), 4);
    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_append(fx->st, "g", "alice", "x", &tpl, false, &ap));
    assert_true(ap.duplicate);
    assert_int_equal(ap.id, 4);
    size_t len = env_make(env, "g", 4, 0);
    assert_int_equal(ap.len, len);
    assert_memory_equal(ap.env, env, len);
    free(ap.env);
    /* nothing of it was written: head, messages, index */
    assert_head(fx->st, "g", 6);
    assert_not_stored(fx->st, "g", 7);
    assert_cid(fx->st, "g", "alice", "x", true, 4);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 100, SIZE_MAX, &page));
    check_page_run(page, "g", 1, 1, 6, false);
    chat_page_destroy(page);

    /* another sender's, or another group's, same cid is a new message */
    assert_int_equal(append_env(fx->st, "g", "bob", "x", 0), 7);
    assert_int_equal(append_env(fx->st, "h", "alice", "x", 0), 1);
    /* the template's parts may be empty: the id and the time alone */
    assert_int_equal(append_parts(fx->st, "e", "u", NULL, NULL, 0, NULL, 0, NULL, 0, &dup), 1);
    assert_false(dup);
    assert_int_equal(append_parts(fx->st, "g", "alice", "x", NULL, 0, NULL, 0, NULL, 0, &dup), 4);
    assert_true(dup);
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

/* bench/store_floor's writes (ldb_append_floor) are an append's: group
 * "f" written by them reads back as group "a" written by chat_store_append
 * (the same envelopes, head, cid entries both ways), and retention deletes
 * its cid entries (invariant deletable-keys). */
static void test_append_floor_as_append(void **state)
{
    struct fixture *fx = *state;
    chat_envelope tpl = {"{\"id\":", 6, ",\"ts\":", 6, ",\"body\":\"hi\"}", 14};
    chat_appended ap = {0};
    chat_page *pa = NULL, *pf = NULL;
    const char *cids[] = {"c1", "c2", "c3"};
    uint64_t head = 0, first = 0;

    for (uint64_t id = 1; id <= 3; id++) {
        ASSERT_OK(chat_store_append(fx->st, "a", "alice", cids[id - 1], &tpl, false, &ap));
        assert_int_equal(ap.id, id);
        free(ap.env);
        ASSERT_OK(ldb_append_floor(fx->st, "f", "alice", cids[id - 1], &tpl, id, false));
    }
    ASSERT_OK(chat_store_head(fx->st, "f", &head));
    assert_int_equal(head, 3);
    ASSERT_OK(chat_store_read_forward(fx->st, "a", 0, 10, SIZE_MAX, &pa));
    ASSERT_OK(chat_store_read_forward(fx->st, "f", 0, 10, SIZE_MAX, &pf));
    assert_int_equal(pf->count, 3);
    assert_int_equal(pa->count, pf->count);
    for (size_t i = 0; i < pf->count; i++) {
        assert_int_equal(pf->msgs[i].id, i + 1);
        assert_int_equal(pf->msgs[i].len, pa->msgs[i].len);
        assert_memory_equal(pf->msgs[i].data, pa->msgs[i].data, pa->msgs[i].len);
    }
    chat_page_destroy(pa);
    chat_page_destroy(pf);
    for (uint64_t id = 1; id <= 3; id++) {
        char *cid = NULL;
        bool found = false;
        assert_cid(fx->st, "f", "alice", cids[id - 1], true, id);
        ASSERT_OK(chat_store_cid_of(fx->st, "f", id, &cid, &found));
        assert_true(found);
        assert_string_equal(cid, cids[id - 1]);
        free(cid);
    }
    ASSERT_OK(chat_store_trim(fx->st, "f", 3, 100, &first));
    assert_cid(fx->st, "f", "alice", "c1", false, 0);
    assert_cid(fx->st, "f", "alice", "c2", false, 0);
    assert_cid(fx->st, "f", "alice", "c3", true, 3);
    reopen(fx, CHAT_SYNC_NONE);
    assert_cid(fx->st, "f", "alice", "c1", false, 0);
    assert_cid(fx->st, "f", "alice", "c3", true, 3);
    assert_head(fx->st, "f", 3);
}

/* ------------------------------------------------------------------------
 * The list of groups (chat_store_groups)
 * --------------------------------------------------------------------- */

/* What a walk over the groups saw: their names, space-separated, with the
 * head of each checked against group_heads. */
struct listing {
    char names[128];
    size_t calls;
    size_t stop_at; /* list_group stops the walk on this call (0: never) */
};

/* The groups of test_groups_cases and their heads; "d" is deleted. */
static const struct {
    const char *name;
    uint64_t head;
} group_heads[] = {{"a", 3}, {"aa", 1}, {"b", 2}, {"c", 5}, {"d", 2}};

static int list_group(void *ctx, const char *group, uint64_t head)
{
    struct listing *l = ctx;
    bool known = false;

    for (size_t i = 0; i < sizeof(group_heads) / sizeof(group_heads[0]); i++) {
        if (strcmp(group, group_heads[i].name) == 0) {
            assert_int_equal(head, group_heads[i].head);
            known = true;
        }
    }
    assert_true(known);
    snprintf(l->names + strlen(l->names), sizeof(l->names) - strlen(l->names), "%s%s",
             l->calls ? " " : "", group);
    l->calls++;
    return l->stop_at != 0 && l->calls == l->stop_at;
}

static const struct groups_case {
    const char *name;
    const char *after; /* NULL: from the first */
    size_t max;
    size_t stop_at; /* the callback stops the walk on this call (0: never) */
    const char *want;
    bool done;
} groups_cases[] = {
    {"all of them, shorter names first", NULL, 10, 0, "a b c d aa", true},
    {"a first run", NULL, 2, 0, "a b", false},
    {"the next run", "b", 2, 0, "c d", false},
    {"exactly the rest", "c", 2, 0, "d aa", true},
    {"after the last", "aa", 5, 0, "", true},
    {"after a name that is no group", "e", 10, 0, "aa", true},
    {"max 0", NULL, 0, 0, "", false},
    {"fn stops on the second", NULL, 10, 2, "a b", false},
    {"fn stops on the last", "d", 10, 1, "aa", false},
};

static void test_groups_cases(void **state)
{
    struct fixture *fx = *state;
    bool done = false;

    for (size_t i = 0; i < sizeof(group_heads) / sizeof(group_heads[0]); i++)
        fill(fx->st, group_heads[i].name, (unsigned)group_heads[i].head);
    /* a group deletion leaves the head: the group is still listed */
    ASSERT_OK(chat_store_group_delete(fx->st, "d", 100, &done));
    assert_true(done);
    ASSERT_OK(chat_store_member_add(fx->st, "b", "alice", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "b", "alice", "d1", 1, NULL));
    for (size_t i = 0; i < sizeof(groups_cases) / sizeof(groups_cases[0]); i++) {
        const struct groups_case *c = &groups_cases[i];
        struct listing l = {"", 0, c->stop_at};
        done = !c->done;
        chat_err rc = chat_store_groups(fx->st, c->after, c->max, list_group, &l, &done);

        if (rc != CHAT_OK || strcmp(l.names, c->want) != 0 || done != c->done)
            fail_msg("%s: %s, listed \"%s\" (want \"%s\"), done %d", c->name, chat_strerror(rc),
                     l.names, c->want, (int)done);
    }
}

static void test_groups_empty_store(void **state)
{
    struct fixture *fx = *state;
    struct listing l = {"", 0, 0};
    bool done = false;

    /* records of other kinds only: none is a group */
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_groups(fx->st, NULL, 10, list_group, &l, &done));
    assert_int_equal(l.calls, 0);
    assert_true(done);
}

static void test_groups_bad_arguments(void **state)
{
    struct fixture *fx = *state;
    struct listing l = {"", 0, 0};
    const char *long_name = too_long_name();
    bool done = true;

    fill(fx->st, "a", 1);
    assert_int_equal(chat_store_groups(fx->st, NULL, 10, NULL, NULL, &done), CHAT_EINVAL);
    assert_false(done);
    assert_int_equal(chat_store_groups(fx->st, long_name, 10, list_group, &l, &done), CHAT_EINVAL);
    assert_int_equal(l.calls, 0);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

/* ------------------------------------------------------------------------
 * The cid filter (leveldb/ldb_cidf): never a false "not stored"
 * --------------------------------------------------------------------- */

/* Closes the fixture's store and opens it again with a filter of `bytes`
 * (0: the default) growing up to `max` (0: the default), whose scan waits
 * for ldb_cidf_release when hold. */
static void reopen_filter_max(struct fixture *fx, size_t bytes, size_t max, bool hold)
{
    chat_store_opts o = CHAT_STORE_OPTS_INIT;
    char *errmsg = NULL;
    o.cid_filter_bytes = bytes;
    o.cid_filter_max = max;
    o.cid_filter_hold = hold;
    chat_store_close(fx->st);
    fx->st = NULL;
    chat_err rc = chat_store_open_opts(fx->dir, &o, &fx->st, &errmsg);
    free(errmsg);
    ASSERT_OK(rc);
}

static void reopen_filter(struct fixture *fx, size_t bytes, bool hold)
{
    reopen_filter_max(fx, bytes, 0, hold);
}

/* Appends (group, from, cid) and checks whether it was a duplicate and of
 * which id. */
static void append_cid(chat_store *st, const char *group, const char *cid, bool want_dup,
                       uint64_t want_id)
{
    bool dup = false;
    uint64_t id = append_parts(st, group, "alice", cid, "h", 1, "", 0, "t", 1, &dup);
    if (dup != want_dup || id != want_id) {
        fail_msg("%s/%s: dup %d id %llu, want dup %d id %llu", group, cid, dup,
                 (unsigned long long)id, want_dup, (unsigned long long)want_id);
    }
}

/* A cid stored before a reopen is a duplicate before the scan ends (held:
 * LevelDB answers) and after; one appended while the scan waits is too
 * (the append added it); and the filter answers a new cid by itself. */
static void test_cid_filter_reopen(void **state)
{
    struct fixture *fx = *state;
    char cid[32];
    bool ready = true;
    uint64_t keys = 0, ms = 0, absent = 0;

    for (unsigned i = 0; i < 50; i++) {
        snprintf(cid, sizeof(cid), "c%u", i);
        append_cid(fx->st, "g", cid, false, i + 1);
    }
    reopen_filter(fx, 0, true);
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent);
    assert_false(ready);
    for (unsigned i = 0; i < 50; i++) {
        snprintf(cid, sizeof(cid), "c%u", i);
        append_cid(fx->st, "g", cid, true, i + 1);
    }
    append_cid(fx->st, "g", "during", false, 51);
    append_cid(fx->st, "g", "during", true, 51);
    ldb_cidf_release(fx->st);
    assert_true(ldb_cidf_wait(fx->st));
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent);
    assert_true(ready);
    assert_int_equal(keys, 50); /* the snapshot of the open; "during" came later */
    assert_int_equal(absent, 0);
    for (unsigned i = 0; i < 50; i++) {
        snprintf(cid, sizeof(cid), "c%u", i);
        append_cid(fx->st, "g", cid, true, i + 1);
    }
    append_cid(fx->st, "g", "during", true, 51);
    append_cid(fx->st, "g", "after", false, 52);
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent);
    assert_true(absent >= 1); /* "after" was answered without LevelDB */
    append_cid(fx->st, "g", "after", true, 52);
    assert_cid(fx->st, "g", "alice", "after", true, 52);
    /* and once more across a reopen whose scan runs at once */
    reopen_filter(fx, 0, false);
    assert_true(ldb_cidf_wait(fx->st));
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent);
    assert_int_equal(keys, 52);
    chat_cid_filter cf;
    ASSERT_OK(chat_store_cid_filter(fx->st, &cf));
    assert_true(cf.done && cf.ready);
    assert_int_equal(cf.keys, 52);
    append_cid(fx->st, "g", "c7", true, 8);
    append_cid(fx->st, "g", "during", true, 51);
    append_cid(fx->st, "g", "after", true, 52);
}

/* Trims and deletions leave bits set: what they removed is stored anew (as
 * without a filter), what they kept is still a duplicate. */
static void test_cid_filter_trim_delete(void **state)
{
    struct fixture *fx = *state;
    char cid[32];
    bool done = false;
    uint64_t first = 0;

    for (unsigned i = 1; i <= 10; i++) {
        snprintf(cid, sizeof(cid), "c%u", i);
        append_cid(fx->st, "g", cid, false, i);
        append_cid(fx->st, "h", cid, false, i);
    }
    reopen_filter(fx, 0, false);
    assert_true(ldb_cidf_wait(fx->st));
    ASSERT_OK(chat_store_trim(fx->st, "g", 6, 1000, &first));
    assert_int_equal(first, 6);
    for (unsigned i = 6; i <= 10; i++) {
        snprintf(cid, sizeof(cid), "c%u", i);
        append_cid(fx->st, "g", cid, true, i);
    }
    append_cid(fx->st, "g", "c1", false, 11);
    append_cid(fx->st, "g", "c1", true, 11);
    ASSERT_OK(chat_store_group_delete(fx->st, "h", 1000, &done));
    assert_true(done);
    append_cid(fx->st, "h", "c3", false, 11);
    reopen_filter(fx, 0, false);
    assert_true(ldb_cidf_wait(fx->st));
    append_cid(fx->st, "g", "c1", true, 11);
    append_cid(fx->st, "g", "c8", true, 8);
    append_cid(fx->st, "h", "c3", true, 11);
    append_cid(fx->st, "h", "c4", false, 12);
}

/* A filter of one 512-bit block, far beyond its design count: nearly every
 * answer is "maybe", and LevelDB keeps it exact both ways. */
static void test_cid_filter_tiny_exact(void **state)
{
    struct fixture *fx = *state;
    char cid[32];
    const unsigned n = 1500;

    reopen_filter(fx, 64, false);
    assert_true(ldb_cidf_wait(fx->st));
    for (unsigned i = 0; i < n; i++) {
        snprintf(cid, sizeof(cid), "k%u", i);
        append_cid(fx->st, "g", cid, false, i + 1);
    }
    reopen_filter(fx, 64, false);
    assert_true(ldb_cidf_wait(fx->st));
    for (unsigned i = 0; i < n; i++) {
        snprintf(cid, sizeof(cid), "k%u", i);
        append_cid(fx->st, "g", cid, true, i + 1);
        snprintf(cid, sizeof(cid), "new%u", i);
        append_cid(fx->st, "g", cid, false, n + i + 1);
    }
}

/* A filter past its design count grows (grow-by-rescan): a bigger one,
 * filled by a scan while appends go on, replaces it, and no stored cid is
 * ever answered "new" on the way; a default filter over a small store is
 * the small size, ready at once (small-inline). */
static void test_cid_filter_grows(void **state)
{
    struct fixture *fx = *state;
    char cid[32];
    bool ready = false;
    uint64_t keys = 0, ms = 0, absent = 0, absent_before = 0;
    const unsigned n = 400;

    reopen_filter(fx, 0, false);
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent);
    assert_true(ready); /* read at open, no scan to wait for */
    assert_int_equal(ldb_cidf_bytes(fx->st), LDB_CIDF_MIN_BYTES);
    for (unsigned i = 0; i < 30; i++) {
        snprintf(cid, sizeof(cid), "k%u", i);
        append_cid(fx->st, "g", cid, false, i + 1);
    }
    /* one block (51 keys by design), growing up to 4 KiB (3276 keys) */
    reopen_filter_max(fx, 64, 4096, false);
    assert_true(ldb_cidf_wait(fx->st));
    assert_int_equal(ldb_cidf_bytes(fx->st), 64);
    for (unsigned i = 30; i < n; i++) {
        snprintf(cid, sizeof(cid), "k%u", i);
        append_cid(fx->st, "g", cid, false, i + 1);
        /* every cid stored so far is still a duplicate, whichever filter answers */
        snprintf(cid, sizeof(cid), "k%u", i / 2);
        append_cid(fx->st, "g", cid, true, i / 2 + 1);
        if (i % 50 == 0) {
            assert_true(ldb_cidf_wait(fx->st));
        }
    }
    assert_true(ldb_cidf_wait(fx->st));
    append_cid(fx->st, "g", "one-more", false, n + 1); /* puts a ready one in place */
    assert_true(ldb_cidf_bytes(fx->st) > 64);
    assert_true(ldb_cidf_bytes(fx->st) <= 4096);
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent_before);
    for (unsigned i = 0; i < n; i++) {
        snprintf(cid, sizeof(cid), "k%u", i);
        append_cid(fx->st, "g", cid, true, i + 1);
        snprintf(cid, sizeof(cid), "fresh%u", i);
        append_cid(fx->st, "g", cid, false, n + 2 + i);
    }
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent);
    assert_true(ready);
    /* the bigger filter answers most new cids by itself again */
    assert_true(absent - absent_before > n / 2);
}

/* Red team (item 3): retries of any stored cid race many growths of a tiny
 * filter (64 bytes up to 64 KiB, a scan thread per growth, never waited
 * for), over three groups; then the store is reopened with the default
 * filter at exactly LDB_CIDF_INLINE cids (read inline) and at one more (the
 * big filter, its scan on a thread, asked before it ends). Every retry must
 * be answered duplicate with its first id: a cid is never stored twice. */
static void test_cid_filter_grow_stress(void **state)
{
    struct fixture *fx = *state;
    char cid[32], grp[8];
    const unsigned groups = 3, n = LDB_CIDF_INLINE;
    uint64_t heads[3] = {0, 0, 0}, ids[LDB_CIDF_INLINE + 1];
    uint32_t rnd = 12345;

    reopen_filter_max(fx, 64, 64u << 10, false);
    for (unsigned i = 0; i < n; i++) {
        snprintf(grp, sizeof(grp), "g%u", i % groups);
        snprintf(cid, sizeof(cid), "s%u", i);
        ids[i] = ++heads[i % groups];
        append_cid(fx->st, grp, cid, false, ids[i]);
        for (unsigned r = 0; r < 2; r++) {
            rnd = rnd * 1103515245u + 12345u;
            unsigned k = (rnd >> 8) % (i + 1);
            snprintf(grp, sizeof(grp), "g%u", k % groups);
            snprintf(cid, sizeof(cid), "s%u", k);
            append_cid(fx->st, grp, cid, true, ids[k]);
        }
    }
    assert_true(ldb_cidf_bytes(fx->st) > 64);
    /* exactly LDB_CIDF_INLINE cids: read at open */
    reopen_filter(fx, 0, false);
    assert_int_equal(ldb_cidf_bytes(fx->st), LDB_CIDF_MIN_BYTES);
    for (unsigned k = 0; k < n; k++) {
        snprintf(grp, sizeof(grp), "g%u", k % groups);
        snprintf(cid, sizeof(cid), "s%u", k);
        append_cid(fx->st, grp, cid, true, ids[k]);
    }
    snprintf(grp, sizeof(grp), "g%u", n % groups);
    ids[n] = ++heads[n % groups];
    append_cid(fx->st, grp, "s-last", false, ids[n]);
    /* one more: the big filter, asked while its scan runs */
    reopen_filter(fx, 0, false);
    for (unsigned k = 0; k < n; k++) {
        snprintf(grp, sizeof(grp), "g%u", k % groups);
        snprintf(cid, sizeof(cid), "s%u", k);
        append_cid(fx->st, grp, cid, true, ids[k]);
    }
    snprintf(grp, sizeof(grp), "g%u", n % groups);
    append_cid(fx->st, grp, "s-last", true, ids[n]);
    assert_true(ldb_cidf_wait(fx->st));
    for (unsigned k = 0; k < n; k += 7) {
        snprintf(grp, sizeof(grp), "g%u", k % groups);
        snprintf(cid, sizeof(cid), "s%u", k);
        append_cid(fx->st, grp, cid, true, ids[k]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_head_unknown_group),
        CASE(test_append_dense_ids),
        CASE(test_append_duplicate_cid),
        CASE(test_groups_isolated),
        CASE(test_cid_index),
        CASE(test_append_floor_as_append),
        CASE(test_groups_cases),
        CASE(test_groups_empty_store),
        CASE(test_groups_bad_arguments),
        CASE(test_cid_filter_reopen),
        CASE(test_cid_filter_trim_delete),
        CASE(test_cid_filter_tiny_exact),
        CASE(test_cid_filter_grows),
        CASE(test_cid_filter_grow_stress),
    };

    return cmocka_run_group_tests_name("store_log", tests, NULL, NULL);
}
