/* Unit tests of reading a damaged store (leveldb/ldb_db): a bad block fails the
 * reads that touch it, not the writes.
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"
#include "ldb_cidf.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <leveldb/c.h>

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
    assert_int_equal(append_parts(fx->st, "good", "u", "c", "g", 1, "@", 1, NULL, 0, NULL), 61);
    assert_int_equal(append_parts(fx->st, "bad", "u", "c", "b", 1, "@", 1, NULL, 0, NULL), 61);
    assert_int_equal(append_parts(fx->st, "fresh", "u", NULL, "f", 1, "@", 1, NULL, 0, NULL), 1);
    ASSERT_OK(chat_store_member_add(fx->st, "bad", "alice", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "bad", "alice", "d1", 61, NULL));
    ASSERT_OK(chat_store_sync(fx->st));
    ASSERT_OK(chat_store_read_forward(fx->st, "bad", 60, 10, SIZE_MAX, &page));
    assert_int_equal(page->count, 1);
    assert_int_equal(page->msgs[0].id, 61);
    assert_string_equal(page->msgs[0].data, "b61@7");
    chat_page_destroy(page);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "bad", 61);
    assert_head(fx->st, "good", 61);
    assert_head(fx->st, "fresh", 1);
    assert_cursor(fx->st, "bad", "alice", "d1", true, 61);
}

/* ------------------------------------------------------------------------
 * Issue 11: damage found at open (leveldb/ldb_damage)
 * --------------------------------------------------------------------- */

/* The name of the largest table file (*.ldb) of dir in out; false if none. */
static bool largest_table(const char *dir, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    long best = -1;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        size_t nl = strlen(de->d_name);
        char path[512];
        struct stat sb;
        if (nl < 5 || strcmp(de->d_name + nl - 4, ".ldb") != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (stat(path, &sb) == 0 && sb.st_size > best) {
            best = sb.st_size;
            snprintf(out, cap, "%s", path);
        }
    }
    closedir(d);
    return best >= 0;
}

/* Fills two groups into table files and closes the store. */
static void tables_closed(struct fixture *fx)
{
    noise_fill(fx->st, "bad", 60);
    noise_fill(fx->st, "good", 60);
    ASSERT_OK(chat_store_compact(fx->st));
    chat_store_close(fx->st);
    fx->st = NULL;
}

/* Opens fx->dir (verify as given), expecting rc and an error naming
 * needle. */
static void expect_refused(struct fixture *fx, bool verify, chat_err rc, const char *needle)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    char *errmsg = NULL;

    opts.verify = verify;
    assert_int_equal(chat_store_open_opts(fx->dir, &opts, &fx->st, &errmsg), rc);
    assert_null(fx->st);
    assert_non_null(errmsg);
    if (!strstr(errmsg, needle))
        fail_msg("\"%s\" does not say \"%s\"", errmsg, needle);
    free(errmsg);
}

static void repair(struct fixture *fx)
{
    leveldb_options_t *opt = leveldb_options_create();
    char *err = NULL;

    /* Without it RepairDB reads blocks unchecked and keeps a damaged one. */
    leveldb_options_set_paranoid_checks(opt, 1);
    leveldb_repair_db(opt, fx->dir, &err);
    if (err)
        fail_msg("RepairDB %s: %s", fx->dir, err);
    leveldb_options_destroy(opt);
}

static void test_i11_missing_current_refused(void **state)
{
    struct fixture *fx = *state;
    char path[512], table[512];
    struct stat sb;

    tables_closed(fx);
    assert_true(largest_table(fx->dir, table, sizeof(table)));
    snprintf(path, sizeof(path), "%s/CURRENT", fx->dir);
    assert_int_equal(unlink(path), 0);
    /* LevelDB alone would start an empty store and delete the table */
    expect_refused(fx, false, CHAT_ECORRUPT, "CURRENT is missing");
    assert_int_equal(stat(table, &sb), 0);
    assert_int_equal(stat(path, &sb), -1);
    /* RepairDB rebuilds the manifest from the tables: nothing is lost */
    repair(fx);
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "bad", 60);
    assert_head(fx->st, "good", 60);
    assert_int_equal(append_parts(fx->st, "good", "u", NULL, "g", 1, "@", 1, NULL, 0, NULL), 61);
}

static void test_i11_truncated_table_refused(void **state)
{
    struct fixture *fx = *state;
    char table[512];

    tables_closed(fx);
    assert_true(largest_table(fx->dir, table, sizeof(table)));
    assert_int_equal(truncate(table, 1000), 0);
    /* found without reading every block: the manifest has its size */
    expect_refused(fx, false, CHAT_ECORRUPT, "is truncated: 1000 bytes");
    expect_refused(fx, true, CHAT_ECORRUPT, table);
}

static void test_i11_verify_finds_bad_block(void **state)
{
    struct fixture *fx = *state;
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;

    tables_closed(fx);
    /* a good store passes the check */
    opts.verify = true;
    ASSERT_OK(chat_store_open_opts(fx->dir, &opts, &fx->st, NULL));
    assert_head(fx->st, "bad", 60);
    chat_store_close(fx->st);
    fx->st = NULL;
    assert_true(damage_table(fx->dir, "<bad#30>"));
    /* without the check the store opens (reads of the block fail later) */
    reopen(fx, CHAT_SYNC_NONE);
    chat_store_close(fx->st);
    fx->st = NULL;
    /* with it, the open fails, saying about where */
    expect_refused(fx, true, CHAT_ECORRUPT, "checksum");
    expect_refused(fx, true, CHAT_ECORRUPT, "of group \"bad\"");
    /* RepairDB keeps every record it can read: the other group whole */
    repair(fx);
    ASSERT_OK(chat_store_open_opts(fx->dir, &opts, &fx->st, NULL));
    assert_head(fx->st, "good", 60);
    assert_head(fx->st, "bad", 60);
    assert_not_stored(fx->st, "bad", 30);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

/* A bad block among the cid keys: the filter's scan fails and the filter
 * never becomes ready (every lookup goes to LevelDB), never half-filled. */
static void test_i7_bad_cid_block_filter_not_ready(void **state)
{
    struct fixture *fx = *state;
    char cid[32];
    bool ready = true;
    uint64_t keys = 1, ms = 1, absent = 1;

    /* enough keys that the damaged one is blocks away from the meta
     * records (a block is 4 KiB), which the open reads */
    for (unsigned i = 0; i < 400; i++) {
        snprintf(cid, sizeof(cid), "c%03u", i);
        append_parts(fx->st, "g", "u", cid, "m", 1, "@", 1, NULL, 0, NULL);
    }
    append_parts(fx->st, "g", "u", "~~damage-this-cid~~", "m", 1, "@", 1, NULL, 0, NULL);
    ASSERT_OK(chat_store_compact(fx->st));
    chat_store_close(fx->st);
    fx->st = NULL;
    assert_true(damage_table(fx->dir, "damage-this-cid"));
    reopen(fx, CHAT_SYNC_NONE);
    assert_false(ldb_cidf_wait(fx->st));
    ldb_cidf_figures(fx->st, &ready, &keys, &ms, &absent);
    assert_false(ready);
    assert_int_equal(keys, 0);
    assert_int_equal(absent, 0);
    chat_cid_filter cf;
    ASSERT_OK(chat_store_cid_filter(fx->st, &cf));
    assert_true(cf.done);
    assert_false(cf.ready);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_i7_bad_block_fails_reads_not_writes), CASE(test_i11_missing_current_refused),
        CASE(test_i11_truncated_table_refused),         CASE(test_i11_verify_finds_bad_block),
        CASE(test_i7_bad_cid_block_filter_not_ready),
    };

    return cmocka_run_group_tests_name("store_damage", tests, NULL, NULL);
}
