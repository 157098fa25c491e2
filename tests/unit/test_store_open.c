/* Unit tests of opening and closing (chat_store.c, leveldb/ldb_store and ldb_run):
 * errors, sync modes, persistence, figures and the incarnation.
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Some cases read or write raw keys of a closed store. */
#include <leveldb/c.h>

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

static void test_open_backend_option(void **state)
{
    struct fixture *fx = *state;
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    chat_store *st = NULL;
    char *errmsg = NULL;
    char dir[128];
    struct stat sb;

    /* LevelDB by default and by name: the same store */
    assert_null(opts.backend);
    append_env(fx->st, "g", "u", NULL, 0);
    chat_store_close(fx->st);
    fx->st = NULL;
    opts.backend = "leveldb";
    ASSERT_OK(chat_store_open_opts(fx->dir, &opts, &fx->st, &errmsg));
    assert_null(errmsg);
    assert_head(fx->st, "g", 1);

    /* another name is refused with a reason, before anything is made */
    snprintf(dir, sizeof(dir), "%s/other", fx->dir);
    opts.backend = "mysql";
    assert_int_equal(chat_store_open_opts(dir, &opts, &st, &errmsg), CHAT_EINVAL);
    assert_null(st);
    assert_non_null(errmsg);
    assert_non_null(strstr(errmsg, "unknown store backend"));
    assert_non_null(strstr(errmsg, "mysql"));
    free(errmsg);
    assert_int_equal(stat(dir, &sb), -1);

    /* PostgreSQL takes a connection string; a database that cannot be
     * reached fails the open with the reason, as one that may answer later
     * (CHAT_EUNAVAIL), and nothing is left behind */
    opts.backend = "postgresql";
    assert_int_equal(
        chat_store_open_opts("host=127.0.0.1 port=1 connect_timeout=2", &opts, &st, &errmsg),
        CHAT_EUNAVAIL);
    assert_null(st);
    assert_non_null(errmsg);
    assert_non_null(strstr(errmsg, "cannot connect to PostgreSQL"));
    free(errmsg);
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
    for (int e = CHAT_OK; e <= CHAT_EUNAVAIL; e++) {
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
 * Persistence and volume
 * --------------------------------------------------------------------- */

static void test_ids_survive_reopen(void **state)
{
    struct fixture *fx = *state;
    chat_page *page = NULL;

    fill(fx->st, "g", 5);
    append_env(fx->st, "h", "alice", "c1", 0);
    append_env(fx->st, "h", "alice", "c2", 0);

    reopen(fx, CHAT_SYNC_NONE);

    assert_head(fx->st, "g", 5);
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
 * Figures for $SYS
 * --------------------------------------------------------------------- */

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
    /* the files of an empty store: CURRENT, a manifest, LevelDB's log */
    ASSERT_OK(chat_store_stats(fx->st, NULL, &bytes));
    assert_true(bytes > 0 && bytes < 20000);
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

    /* the files: at least the 100 KB of noise, counted wherever it lies
     * (tables or write-ahead log) */
    ASSERT_OK(chat_store_stats(fx->st, NULL, &bytes));
    assert_true(bytes > 90000);
    /* after a compaction, in a table and a fresh log */
    ASSERT_OK(chat_store_compact(fx->st));
    ASSERT_OK(chat_store_stats(fx->st, NULL, &bytes));
    assert_true(bytes > 90000 && bytes < 200000);

    /* a store from before the counter counts once, at open */
    raw_write(fx, "#groups", 7, NULL, 0);
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

/* Copies every file of directory from into directory to; false when a file
 * went away between listing and copying (LevelDB deletes obsolete files on
 * a thread of its own while the store is open). */
static bool copy_dir(const char *from, const char *to)
{
    DIR *d = opendir(from);
    struct dirent *de;
    bool whole = true;

    assert_non_null(d);
    while (whole && (de = readdir(d)) != NULL) {
        char src[512], dst[512], buf[8192];
        size_t n;
        if (de->d_name[0] == '.')
            continue;
        snprintf(src, sizeof(src), "%s/%s", from, de->d_name);
        snprintf(dst, sizeof(dst), "%s/%s", to, de->d_name);
        FILE *in = fopen(src, "rb");
        if (!in) {
            assert_int_equal(errno, ENOENT);
            whole = false;
            break;
        }
        FILE *out = fopen(dst, "wb");
        assert_non_null(out);
        while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
            assert_int_equal(fwrite(buf, 1, n, out), n);
        assert_int_equal(fclose(in), 0);
        assert_int_equal(fclose(out), 0);
    }
    closedir(d);
    return whole;
}

/* Copies every file of the fixture's directory into it again once the
 * store is gone: what a crash of the process leaves (every write reached
 * the kernel, nothing was closed). The store stays open meanwhile; a copy
 * that raced with LevelDB's removal of an obsolete file is taken again. */
static void crash(struct fixture *fx)
{
    char snap[64];
    bool whole = false;

    for (int tries = 0; !whole && tries < 20; tries++) {
        snprintf(snap, sizeof(snap), "/tmp/chat_store_snap.XXXXXX");
        assert_non_null(mkdtemp(snap));
        whole = copy_dir(fx->dir, snap);
        if (!whole)
            rm_tree(snap);
    }
    assert_true(whole);
    chat_store_close(fx->st); /* a clean close, then undone */
    fx->st = NULL;
    rm_tree(fx->dir);
    assert_int_equal(mkdir(fx->dir, 0700), 0);
    assert_true(copy_dir(snap, fx->dir));
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

/* Issue 16: the head is the newest message or the 'H' record the batch
 * that deleted it wrote; a process crash at any point keeps both, so the
 * next id after a crash follows every id given before it. */
static void test_i16_head_after_crash(void **state)
{
    struct fixture *fx = *state;
    uint64_t first = 0;

    fill(fx->st, "g", 5);
    crash(fx);
    reopen_boot(fx, CHAT_SYNC_NONE, "boot-A");
    assert_head(fx->st, "g", 5);
    assert_int_equal(append_env(fx->st, "g", "u", "c6", 0), 6);
    crash(fx);
    reopen_boot(fx, CHAT_SYNC_NONE, "boot-A");
    assert_head(fx->st, "g", 6);
    assert_cid(fx->st, "g", "u", "c6", true, 6);

    /* retention took them all, the newest too: its id is not given again */
    ASSERT_OK(chat_store_trim(fx->st, "g", UINT64_MAX, 100, &first));
    assert_int_equal(first, 7);
    crash(fx);
    reopen_boot(fx, CHAT_SYNC_NONE, "boot-A");
    assert_head(fx->st, "g", 6);
    assert_int_equal(append_env(fx->st, "g", "u", "c6", 0), 7);
    crash(fx);
    reopen_boot(fx, CHAT_SYNC_NONE, "boot-A");
    assert_head(fx->st, "g", 7);
    uint64_t groups = 0;
    ASSERT_OK(chat_store_stats(fx->st, &groups, NULL));
    assert_int_equal(groups, 1);
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
 * Issue 11: the format version
 * --------------------------------------------------------------------- */

#define FORMAT_KEY "#format"

/* Puts (v not NULL) or deletes a raw key of the closed store in dir. */
static void raw_put_closed(const char *dir, const char *k, const void *v, size_t vlen)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;
    leveldb_t *db = leveldb_open(opt, dir, &err);

    if (err)
        fail_msg("leveldb_open %s: %s", dir, err);
    if (v)
        leveldb_put(db, wo, k, strlen(k), v, vlen, &err);
    else
        leveldb_delete(db, wo, k, strlen(k), &err);
    if (err)
        fail_msg("writing %s: %s", k, err);
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(opt);
}

/* The raw value of k in the closed store in dir (len bytes, freed with
 * free()), or NULL when missing. */
static char *raw_get_closed(const char *dir, const char *k, size_t *len)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL, *v;
    leveldb_t *db = leveldb_open(opt, dir, &err);

    if (err)
        fail_msg("leveldb_open %s: %s", dir, err);
    v = leveldb_get(db, ro, k, strlen(k), len, &err);
    if (err)
        fail_msg("reading %s: %s", k, err);
    leveldb_close(db);
    leveldb_readoptions_destroy(ro);
    leveldb_options_destroy(opt);
    return v;
}

/* The closed store's format record as a number; 0 when missing. */
static uint64_t raw_format(const char *dir)
{
    size_t len = 0;
    char *v = raw_get_closed(dir, FORMAT_KEY, &len);
    uint64_t n = 0;

    if (!v)
        return 0;
    assert_int_equal(len, 8);
    for (size_t i = 0; i < 8; i++)
        n = n << 8 | (unsigned char)v[i];
    free(v);
    return n;
}

static void put_format(const char *dir, uint64_t version)
{
    char v[8];
    for (int i = 7; i >= 0; i--, version >>= 8)
        v[i] = (char)(version & 0xff);
    raw_put_closed(dir, FORMAT_KEY, v, 8);
}

static void test_i11_format_written_and_checked(void **state)
{
    struct fixture *fx = *state;
    char *errmsg = NULL, *run;
    size_t len = 0;

    /* a new store records version 2 (issue 16: 'H' is a floor of the head) */
    fill(fx->st, "g", 2);
    chat_store_close(fx->st);
    fx->st = NULL;
    assert_int_equal(raw_format(fx->dir), 2);

    /* a store from before the record is version 1, read as it is and
     * marked 2 at open */
    raw_put_closed(fx->dir, FORMAT_KEY, NULL, 0);
    assert_int_equal(raw_format(fx->dir), 0);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 2);
    chat_store_close(fx->st);
    fx->st = NULL;
    assert_int_equal(raw_format(fx->dir), 2);

    /* a newer one is refused, and nothing is written to it: no run marker */
    put_format(fx->dir, 3);
    assert_int_equal(chat_store_open(fx->dir, CHAT_SYNC_NONE, &fx->st, &errmsg), CHAT_EFORMAT);
    assert_null(fx->st);
    assert_non_null(errmsg);
    if (!strstr(errmsg, "format version 3") || !strstr(errmsg, "newer"))
        fail_msg("the refusal does not say why: %s", errmsg);
    free(errmsg);
    errmsg = NULL;
    assert_int_equal(raw_format(fx->dir), 3);
    run = raw_get_closed(fx->dir, "#running", &len);
    assert_null(run);

    /* a record of the wrong shape is damage */
    raw_put_closed(fx->dir, FORMAT_KEY, "v2", 2);
    assert_int_equal(chat_store_open(fx->dir, CHAT_SYNC_NONE, &fx->st, &errmsg), CHAT_ECORRUPT);
    assert_non_null(errmsg);
    assert_non_null(strstr(errmsg, "format record"));
    free(errmsg);

    /* back to version 1: the store opens with everything in it, and is
     * version 2 from then on */
    put_format(fx->dir, 1);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 2);
    assert_int_equal(append_env(fx->st, "g", "u", NULL, 0), 3);
    chat_store_close(fx->st);
    fx->st = NULL;
    assert_int_equal(raw_format(fx->dir), 2);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 3);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_open_close_reopen),
        CASE(test_open_unusable_path),
        CASE(test_open_backend_option),
        CASE(test_null_destructors),
        CASE(test_strerror_every_code),
        CASE(test_sync_modes),
        CASE(test_ids_survive_reopen),
        CASE(test_many_messages),
        CASE(test_stats_groups_and_bytes),
        CASE(test_i11_incarnation_kept_by_clean_close),
        CASE(test_i11_process_crash_keeps_incarnation),
        CASE(test_i11_power_loss_new_incarnation),
        CASE(test_i11_format_written_and_checked),
        CASE(test_i16_head_after_crash),
    };

    return cmocka_run_group_tests_name("store_open", tests, NULL, NULL);
}
