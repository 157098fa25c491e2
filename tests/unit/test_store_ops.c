/* Unit tests of the store's operations for operators (leveldb/ldb_admin,
 * leveldb/ldb_job, leveldb/ldb_copy): listing members and devices,
 * deletions under way, a group's start for an import, the check of a
 * store, backups and compactions on the job thread, repair, and the
 * LevelDB store that a PostgreSQL backup writes record by record.
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"

#include "ldb_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void test_group_members_in_runs(void **state)
{
    struct fixture *fx = *state;
    struct names w = {0};
    bool done = false;

    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    fill(fx->st, "g", 1);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "al", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "carol", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "other", "dave", NULL));
    /* Shorter names first, then byte order; at most max per call. */
    ASSERT_OK(chat_store_group_members(fx->st, "g", NULL, 2, collect_member, &w, &done));
    assert_false(done);
    assert_int_equal(w.n, 2);
    assert_string_equal(w.name[0], "al");
    assert_int_equal(w.num[0], 3);
    assert_string_equal(w.name[1], "bob");
    assert_int_equal(w.num[1], 2);
    ASSERT_OK(chat_store_group_members(fx->st, "g", "bob", 2, collect_member, &w, &done));
    assert_true(done);
    assert_int_equal(w.n, 3);
    assert_string_equal(w.name[2], "carol");
    /* An unknown group has none; a deleted one's members are gone at once. */
    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_group_members(fx->st, "nope", NULL, 10, collect_member, &w, &done));
    assert_true(done);
    assert_int_equal(w.n, 0);
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 1, &done));
    assert_false(done);
    ASSERT_OK(chat_store_group_members(fx->st, "g", NULL, 10, collect_member, &w, &done));
    assert_int_equal(w.n, 0);
    assert_int_equal(chat_store_group_members(fx->st, "g", NULL, 0, collect_member, &w, &done),
                     CHAT_EINVAL);
}

static void test_member_devices(void **state)
{
    struct fixture *fx = *state;
    struct names w = {0};
    bool done = false, found = false;
    uint64_t id = 0;

    fill(fx->st, "g", 5);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bobby", NULL));
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "phone", &id, &found));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bob", "laptop", 3, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bobby", "x", 4, NULL));
    ASSERT_OK(chat_store_member_devices(fx->st, "g", "bob", 10, collect_device, &w, &done));
    assert_true(done);
    assert_int_equal(w.n, 2);
    assert_string_equal(w.name[0], "phone");
    assert_int_equal(w.num[0], 5);
    assert_string_equal(w.name[1], "laptop");
    assert_int_equal(w.num[1], 3);
    assert_true(w.used[1] > 0);
    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_member_devices(fx->st, "g", "bob", 1, collect_device, &w, &done));
    assert_false(done);
    assert_int_equal(w.n, 1);
}

static void test_deletions_listed_until_done(void **state)
{
    struct fixture *fx = *state;
    struct names w = {0};
    bool done = false;

    fill(fx->st, "a", 30);
    fill(fx->st, "b", 3);
    ASSERT_OK(chat_store_deletions(fx->st, collect_name, &w));
    assert_int_equal(w.n, 0);
    ASSERT_OK(chat_store_group_delete(fx->st, "a", 4, &done));
    assert_false(done);
    reopen(fx, CHAT_SYNC_NONE);
    ASSERT_OK(chat_store_deletions(fx->st, collect_name, &w));
    assert_int_equal(w.n, 1);
    assert_string_equal(w.name[0], "a");
    for (int i = 0; i < 100 && !done; i++) {
        ASSERT_OK(chat_store_group_delete(fx->st, "a", 4, &done));
    }
    assert_true(done);
    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_deletions(fx->st, collect_name, &w));
    assert_int_equal(w.n, 0);
}

static void test_group_init(void **state)
{
    struct fixture *fx = *state;
    uint64_t first = 0, groups = 0;

    ASSERT_OK(chat_store_group_init(fx->st, "g", 41));
    assert_head(fx->st, "g", 41);
    ASSERT_OK(chat_store_first(fx->st, "g", &first));
    assert_int_equal(first, 42);
    assert_int_equal(append_env(fx->st, "g", "alice", "c1", 0), 42);
    ASSERT_OK(chat_store_stats(fx->st, &groups, NULL));
    assert_int_equal(groups, 1);
    assert_int_equal(chat_store_group_init(fx->st, "g", 5), CHAT_ECONFLICT);
    ASSERT_OK(chat_store_group_init(fx->st, "h", 0));
    assert_head(fx->st, "h", 0);
}

static void test_check_good_store(void **state)
{
    struct fixture *fx = *state;
    struct problems p = {0};
    uint64_t groups = 0, problems = 0;
    bool done = false;

    fill(fx->st, "a", 20);
    fill(fx->st, "b", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "a", "bob", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "a", "bob", "d", 7, NULL));
    ASSERT_OK(chat_store_trim(fx->st, "a", 5, 100, NULL));
    fill(fx->st, "c", 4);
    ASSERT_OK(chat_store_group_delete(fx->st, "c", 2, &done));
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    assert_int_equal(groups, 3);
    if (problems) {
        fail_msg("%d problems, the last: %s", p.n, p.last);
    }
}

static void test_check_finds_damage(void **state)
{
    struct fixture *fx = *state;
    struct problems p = {0};
    uint64_t groups = 0, problems = 0;
    char k[64];
    char v[16] = {0};

    fill(fx->st, "a", 10);
    fill(fx->st, "b", 10);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "b", "bob", "d", 3, NULL));
    /* A hole in a: message 4 gone. */
    size_t n = raw_prefix(k, sizeof(k), 'M', "a", NULL);
    memset(k + n, 0, 8);
    k[n + 7] = 4;
    raw_write(fx, k, n + 8, NULL, 0);
    /* A cursor of b above its head. */
    n = raw_prefix(k, sizeof(k), 'C', "b", "bob");
    k[n++] = 0;
    k[n++] = 1;
    k[n++] = 'd';
    v[7] = 99;
    raw_write(fx, k, n, v, 16);
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    assert_int_equal(groups, 2);
    assert_int_equal(problems, 2);
    assert_int_equal(p.n, 2);
    assert_non_null(strstr(p.last, "b: the cursor of bob/d is 99, above head 10"));
}

static void test_backup_is_a_snapshot(void **state)
{
    struct fixture *fx = *state;
    char dest[96], partial[112];
    chat_store *copy = NULL;
    struct stat sb;
    bool found = false;
    uint64_t id = 0;

    snprintf(dest, sizeof(dest), "%s-backup", fx->dir);
    snprintf(partial, sizeof(partial), "%s.partial", dest);
    fill(fx->st, "g", 50);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bob", "d", 20, NULL));
    assert_int_equal(append_env(fx->st, "g", "alice", "c-51", 0), 51);
    ASSERT_OK(chat_store_job_start(fx->st, CHAT_JOB_BACKUP, dest));
    /* Written after the snapshot: not in the copy. */
    fill(fx->st, "g", 5);
    chat_job_state js = wait_job(fx->st, 10);
    assert_int_equal(js.kind, CHAT_JOB_BACKUP);
    if (js.status != CHAT_JOB_DONE) {
        fail_msg("backup failed: %s", js.error);
    }
    assert_string_equal(js.path, dest);
    assert_true(js.records > 50);
    assert_int_equal(stat(partial, &sb), -1);
    /* A second backup to the same place is refused. */
    assert_int_equal(chat_store_job_start(fx->st, CHAT_JOB_BACKUP, dest), CHAT_EINVAL);

    ASSERT_OK(chat_store_open(dest, CHAT_SYNC_NONE, &copy, NULL));
    assert_false(chat_store_recovered(copy));
    assert_string_not_equal(chat_store_incarnation(copy), chat_store_incarnation(fx->st));
    assert_head(copy, "g", 51);
    assert_cursor(copy, "g", "bob", "d", true, 20);
    assert_member(copy, "g", "bob", true, 50);
    assert_cid(copy, "g", "alice", "c-51", true, 51);
    ASSERT_OK(chat_store_cursor_max(copy, "g", "bob", &id, &found));
    assert_int_equal(id, 20);
    chat_page *page = NULL;
    ASSERT_OK(chat_store_read_forward(copy, "g", 0, 100, 1u << 20, &page));
    check_page_run(page, "g", 1, 1, 51, false);
    chat_page_destroy(page);
    chat_store_close(copy);
    rm_tree(dest);
}

static void test_compact_job(void **state)
{
    struct fixture *fx = *state;
    fill(fx->st, "g", 100);
    ASSERT_OK(chat_store_job_start(fx->st, CHAT_JOB_COMPACT, NULL));
    chat_job_state js = wait_job(fx->st, 10);
    assert_int_equal(js.kind, CHAT_JOB_COMPACT);
    assert_int_equal(js.status, CHAT_JOB_DONE);
    assert_true(js.finished_ms >= js.started_ms);
    assert_int_equal(chat_store_job_start(fx->st, (chat_job_kind)7, NULL), CHAT_EINVAL);
    assert_int_equal(chat_store_job_start(fx->st, CHAT_JOB_BACKUP, NULL), CHAT_EINVAL);
}

static void test_close_during_backup(void **state)
{
    struct fixture *fx = *state;
    char dest[96];
    snprintf(dest, sizeof(dest), "%s-stopped", fx->dir);
    noise_fill(fx->st, "g", 2000);
    ASSERT_OK(chat_store_job_start(fx->st, CHAT_JOB_BACKUP, dest));
    /* Close waits for the job (stopped or done): nothing leaks, no crash. */
    reopen(fx, CHAT_SYNC_NONE);
    assert_head(fx->st, "g", 2000);
    char partial[112];
    snprintf(partial, sizeof(partial), "%s.partial", dest);
    rm_tree(partial);
    rm_tree(dest);
}

static void test_repair_draws_incarnation(void **state)
{
    struct fixture *fx = *state;
    char before[40];
    char *errmsg = NULL;
    fill(fx->st, "g", 10);
    snprintf(before, sizeof(before), "%s", chat_store_incarnation(fx->st));
    /* (Another process's store is refused: see the tool's test.) */
    chat_store_close(fx->st);
    fx->st = NULL;
    ASSERT_OK(chat_store_repair(fx->dir, NULL, &errmsg));
    assert_null(errmsg);
    ASSERT_OK(chat_store_open(fx->dir, CHAT_SYNC_NONE, &fx->st, NULL));
    assert_string_not_equal(chat_store_incarnation(fx->st), before);
    assert_false(chat_store_recovered(fx->st));
    assert_head(fx->st, "g", 10);
    assert_int_equal(chat_store_repair("/nonexistent/store", NULL, NULL), CHAT_EINVAL);
}

/* What a PostgreSQL backup hands ldb_copy (the live state) opens as a
 * LevelDB store holding exactly that, and checks clean. */
static void test_copy_reads_as_a_store(void **state)
{
    struct fixture *fx = *state;
    char dest[96], partial[112], err[256], env[ENV_CAP];
    chat_store *copy = NULL;
    chat_page *page = NULL;
    struct names w = {0};
    struct problems p = {0};
    struct stat sb;
    uint64_t id = 0, groups = 0, problems = 0;
    int64_t used = 0;
    bool found = false, done = false;

    snprintf(dest, sizeof(dest), "%s-copy", fx->dir);
    snprintf(partial, sizeof(partial), "%s.partial", dest);
    ldb_copy *c = ldb_copy_create(dest, err, sizeof(err));
    if (!c) {
        fail_msg("ldb_copy_create: %s", err);
    }
    ASSERT_OK(ldb_copy_group(c, "g", 5, 3));
    for (uint64_t i = 3; i <= 5; i++) {
        size_t n = env_make(env, "g", i, 0);
        ASSERT_OK(ldb_copy_message(c, "g", i, "alice", i == 4 ? "c-4" : NULL, env, n));
    }
    ASSERT_OK(ldb_copy_member(c, "g", "bob", 2, 1));
    ASSERT_OK(ldb_copy_cursor(c, "g", "bob", "phone", 4, 86400000));
    ASSERT_OK(ldb_copy_max(c, "g", "bob", 5));
    assert_int_equal(ldb_copy_records(c), 7);
    assert_int_equal(stat(dest, &sb), -1); /* only complete */
    ASSERT_OK(ldb_copy_finish(c, err, sizeof(err)));
    ldb_copy_destroy(c);
    assert_int_equal(stat(partial, &sb), -1);

    ASSERT_OK(chat_store_open(dest, CHAT_SYNC_NONE, &copy, NULL));
    assert_false(chat_store_recovered(copy));
    assert_int_equal(strlen(chat_store_incarnation(copy)), 32);
    assert_head(copy, "g", 5);
    ASSERT_OK(chat_store_first(copy, "g", &id));
    assert_int_equal(id, 3);
    ASSERT_OK(chat_store_read_forward(copy, "g", 0, 100, 1u << 20, &page));
    check_page_run(page, "g", 3, 1, 3, false);
    chat_page_destroy(page);
    assert_cid(copy, "g", "alice", "c-4", true, 4);
    assert_member(copy, "g", "bob", true, 2);
    /* the read marker came along, and the member count with it */
    ASSERT_OK(chat_store_read_get(copy, "g", "bob", &id));
    assert_int_equal(id, 1);
    ASSERT_OK(chat_store_member_count(copy, "g", &id));
    assert_int_equal(id, 1);
    ASSERT_OK(chat_store_cursor_info(copy, "g", "bob", "phone", &id, &used, &found));
    assert_true(found);
    assert_int_equal(id, 4);
    assert_int_equal(used, 86400000);
    ASSERT_OK(chat_store_cursor_max(copy, "g", "bob", &id, &found));
    assert_int_equal(id, 5);
    ASSERT_OK(chat_store_group_members(copy, "g", NULL, 10, collect_member, &w, &done));
    assert_int_equal(w.n, 1);
    ASSERT_OK(chat_store_stats(copy, &groups, NULL));
    assert_int_equal(groups, 1);
    ASSERT_OK(chat_store_check(copy, collect_problem, &p, &groups, &problems));
    assert_int_equal(groups, 1);
    if (problems) {
        fail_msg("%d problems, the last: %s", p.n, p.last);
    }
    chat_store_close(copy);
    rm_tree(dest);
}

static void test_copy_refusals(void **state)
{
    struct fixture *fx = *state;
    char dest[96], partial[112], err[256] = "";

    snprintf(dest, sizeof(dest), "%s-copy", fx->dir);
    snprintf(partial, sizeof(partial), "%s.partial", dest);
    ldb_copy *c = ldb_copy_create(dest, err, sizeof(err));
    assert_non_null(c);
    /* a name too long for a key; nothing is written for it */
    assert_int_equal(ldb_copy_member(c, "g", too_long_name(), 1, 0), CHAT_EINVAL);
    assert_int_equal(ldb_copy_records(c), 0);
    /* abandoned: its ".partial" stays, and a second copy there is refused */
    ldb_copy_destroy(c);
    assert_null(ldb_copy_create(dest, err, sizeof(err)));
    assert_non_null(strstr(err, "cannot create"));
    rm_tree(partial);
    ldb_copy_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_group_members_in_runs),
        CASE(test_member_devices),
        CASE(test_deletions_listed_until_done),
        CASE(test_group_init),
        CASE(test_check_good_store),
        CASE(test_check_finds_damage),
        CASE(test_backup_is_a_snapshot),
        CASE(test_compact_job),
        CASE(test_close_during_backup),
        CASE(test_repair_draws_incarnation),
        CASE(test_copy_reads_as_a_store),
        CASE(test_copy_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
