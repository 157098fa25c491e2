/* Tests of the PostgreSQL backend's operations for operators (store/pg:
 * pg_admin, pg_job) below the broker, on a real database: listings in key
 * order with paging, deletions under way across a reopen, a group's start
 * for an import, the check of a whole database (clean, and with rows
 * changed behind the store's back), a backup (a LevelDB store of the live
 * state, a deletion under way left out, read markers and member counts
 * carried), a compaction, a close while a backup runs, read markers and
 * member counts (protocol v1.1) as the LevelDB backend keeps them, device
 * expiry with members (issue 21, item 8: the cases the LevelDB backend
 * runs, store_expiry_cases.c), push registrations (protocol v1.2) by
 * the cases the LevelDB backend runs, a put racing the end of the
 * member's last membership on another connection (it waits for it and
 * stores nothing), a database whose chat_change 0.2.0 made, shared by a
 * broker of this version and one of 0.2.0, the relay of another
 * broker's messages waiting for the writer after a lost connection
 * (issue 23, item 5), a writer that finds a read-only server (refused,
 * nothing stored, reconnects at pg_backoff's pace), a store available
 * again within pg_backoff's bound after its database came back, which
 * failed opens may mend by themselves (CHAT_EUNAVAIL) and which not, and
 * the opener that retries them, and a join with its device's cursor in
 * one transaction (issue 23, item 4: the cases the LevelDB backend runs,
 * store_join_cases.c, then both-or-neither and the broker's own cache).
 *
 * They need a PostgreSQL cluster: CHAT_TEST_PG_PORT names one on
 * 127.0.0.1 (scripts/test's pg stage makes it); without it the test exits
 * 77, which ctest counts as skipped. Each case gets a new database of its
 * own (tests/pg/pgcluster.sh createdb). One table of named cases. */
#include "store_expiry_cases.h"
#include "store_fixture.h"
#include "util.h"
#include "store_join_cases.h"
#include "store_page_cases.h"
#include "store_push_cases.h"

#include "pg_backoff.h"
#include "pg_db.h"
#include "pg_schema.h"
#include "pg_watch.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PGCLUSTER_MS 60000 /* pgcluster.sh createdb, or one statement, on a busy machine */

struct pgfx {
    char db[64]; /* the case's database */
    char conninfo[160];
    char dir[64]; /* for backups */
    chat_store *st;
};

static chat_store *open_pg(const char *conninfo)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    chat_store *st = NULL;
    char *errmsg = NULL;
    opts.backend = "postgresql";
    if (chat_store_open_opts(conninfo, &opts, &st, &errmsg) != CHAT_OK) {
        fail_msg("open %s: %s", conninfo, errmsg ? errmsg : "(no message)");
    }
    free(errmsg);
    return st;
}

static int pg_setup(void **state)
{
    static int n;
    char name[64];
    const char *port = getenv("CHAT_TEST_PG_PORT");
    char *argv[] = {CHAT_PGCLUSTER, "createdb", (char *)port, name, NULL};
    struct pgfx *fx = calloc(1, sizeof(*fx));
    if (!fx) {
        return -1;
    }
    snprintf(name, sizeof(name), "store_pg_%d_%d", (int)getpid(), n);
    if (ts_run(argv, NULL, NULL, "/dev/stderr", PGCLUSTER_MS) != 0) {
        free(fx);
        return -1;
    }
    snprintf(fx->db, sizeof(fx->db), "%s", name);
    snprintf(fx->conninfo, sizeof(fx->conninfo),
             "host=127.0.0.1 port=%s user=postgres dbname=store_pg_%d_%d", port, (int)getpid(),
             n++);
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/chat_store_pg.XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    fx->st = open_pg(fx->conninfo);
    *state = fx;
    return 0;
}

static int pg_teardown(void **state)
{
    struct pgfx *fx = *state;
    chat_store_close(fx->st);
    rm_tree(fx->dir);
    free(fx);
    return 0;
}

/* Runs SQL in the case's database, behind the store's back. */
static void sql(struct pgfx *fx, const char *text)
{
    char *argv[] = {CHAT_PGCLUSTER, "sql", fx->conninfo, (char *)text, NULL};
    assert_int_equal(ts_run(argv, NULL, NULL, "/dev/stderr", PGCLUSTER_MS), 0);
}

/* Runs SQL in the cluster's database postgres: what the case's own
 * database may not take (it is read-only, or refuses connections). */
static void sql_admin(const char *text)
{
    char conninfo[128];
    snprintf(conninfo, sizeof(conninfo), "host=127.0.0.1 port=%s user=postgres dbname=postgres",
             getenv("CHAT_TEST_PG_PORT"));
    char *argv[] = {CHAT_PGCLUSTER, "sql", conninfo, (char *)text, NULL};
    assert_int_equal(ts_run(argv, NULL, NULL, "/dev/stderr", PGCLUSTER_MS), 0);
}

/* Ends this store's sessions (application_name mosquitto-chat) in the
 * case's database behind its back: a failover, a restart, as it sees it. */
static void end_sessions(struct pgfx *fx)
{
    char text[300];
    snprintf(text, sizeof(text),
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
             "WHERE application_name = 'mosquitto-chat' AND datname = '%s'",
             fx->db);
    sql_admin(text);
}

/* One append to group, its result code (the envelope freed). */
static chat_err try_append(chat_store *st, const char *group)
{
    static const char head[] = "{\"id\":", mid[] = ",\"ts\":", tail[] = ",\"body\":\"x\"}";
    chat_envelope env = {head, sizeof(head) - 1, mid, sizeof(mid) - 1, tail, sizeof(tail) - 1};
    chat_appended ap = {0};
    chat_err rc = chat_store_append(st, group, "alice", NULL, &env, false, &ap);
    if (rc == CHAT_OK) {
        free(ap.env);
    }
    return rc;
}

/* Appends n messages to group (from "alice", cid "<group>-<id>" when
 * cids); returns the last id. */
static uint64_t publish(chat_store *st, const char *group, unsigned n, bool cids)
{
    static const char head[] = "{\"id\":", mid[] = ",\"ts\":", tail[] = ",\"body\":\"x\"}";
    chat_envelope env = {head, sizeof(head) - 1, mid, sizeof(mid) - 1, tail, sizeof(tail) - 1};
    uint64_t id = 0, h = 0;
    char cid[64];
    for (unsigned i = 0; i < n; i++) {
        chat_appended ap;
        ASSERT_OK(chat_store_head(st, group, &h));
        snprintf(cid, sizeof(cid), "%s-%llu", group, (unsigned long long)(h + 1));
        ASSERT_OK(chat_store_append(st, group, "alice", cids ? cid : NULL, &env, false, &ap));
        assert_false(ap.duplicate);
        id = ap.id;
        free(ap.env);
    }
    return id;
}

/* ------------------------------------------------------------------------
 * Cases
 * --------------------------------------------------------------------- */

static void test_members_and_devices(void **state)
{
    struct pgfx *fx = *state;
    struct names w = {0};
    bool done = false;

    publish(fx->st, "g", 2, false);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    publish(fx->st, "g", 1, false);
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

    /* devices in the same order, bounded the same way */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bob", "laptop", 2, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bob", "phone", 3, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bobby", "x", 1, NULL));
    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_member_devices(fx->st, "g", "bob", 10, collect_device, &w, &done));
    assert_true(done);
    assert_int_equal(w.n, 2);
    assert_string_equal(w.name[0], "phone");
    assert_int_equal(w.num[0], 3);
    assert_string_equal(w.name[1], "laptop");
    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_member_devices(fx->st, "g", "bob", 1, collect_device, &w, &done));
    assert_false(done);
    assert_int_equal(w.n, 1);

    /* A deletion's first step: no member counts any more. */
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 1, &done));
    assert_false(done);
    memset(&w, 0, sizeof(w));
    ASSERT_OK(chat_store_group_members(fx->st, "g", NULL, 10, collect_member, &w, &done));
    assert_int_equal(w.n, 0);
    assert_true(done);
}

static void test_deletions_and_group_init(void **state)
{
    struct pgfx *fx = *state;
    struct names w = {0};
    bool done = false;
    uint64_t first = 0;

    publish(fx->st, "a", 30, true);
    publish(fx->st, "b", 3, false);
    ASSERT_OK(chat_store_deletions(fx->st, collect_name, &w));
    assert_int_equal(w.n, 0);
    ASSERT_OK(chat_store_group_delete(fx->st, "a", 4, &done));
    assert_false(done);
    /* A new run (another broker, a restart) finds it and goes on. */
    chat_store_close(fx->st);
    fx->st = open_pg(fx->conninfo);
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

    /* An import's start of a group: it continues after head. */
    ASSERT_OK(chat_store_group_init(fx->st, "g", 41));
    assert_head(fx->st, "g", 41);
    ASSERT_OK(chat_store_first(fx->st, "g", &first));
    assert_int_equal(first, 42);
    assert_int_equal(publish(fx->st, "g", 1, true), 42);
    assert_int_equal(chat_store_group_init(fx->st, "g", 5), CHAT_ECONFLICT);
    assert_int_equal(chat_store_group_init(fx->st, "b", 5), CHAT_ECONFLICT);
    ASSERT_OK(chat_store_group_init(fx->st, "h", 0));
    assert_head(fx->st, "h", 0);
    /* a group whose only row is a deletion's (head 0) may be started */
    ASSERT_OK(chat_store_group_delete(fx->st, "k", 10, &done));
    ASSERT_OK(chat_store_group_init(fx->st, "k", 7));
    assert_head(fx->st, "k", 7);
}

static void test_check(void **state)
{
    struct pgfx *fx = *state;
    struct problems p = {0};
    uint64_t groups = 0, problems = 0;
    bool done = false;

    publish(fx->st, "a", 20, true);
    publish(fx->st, "b", 3, false);
    ASSERT_OK(chat_store_member_add(fx->st, "a", "bob", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "a", "bob", "d", 7, NULL));
    ASSERT_OK(chat_store_trim(fx->st, "a", 5, 100, NULL));
    publish(fx->st, "c", 4, false);
    ASSERT_OK(chat_store_member_add(fx->st, "c", "carol", NULL));
    ASSERT_OK(chat_store_group_delete(fx->st, "c", 2, &done));
    assert_false(done);
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    assert_int_equal(groups, 3);
    if (problems) {
        fail_msg("%d problems:\n%s", p.n, p.all);
    }

    /* Damage, as a hand in the database would do it. */
    sql(fx, "DELETE FROM chat_messages WHERE grp = 'a' AND id IN (8, 9, 12)");
    sql(fx, "UPDATE chat_cursors SET acked = 99 WHERE grp = 'a'");
    sql(fx, "UPDATE chat_groups SET first = 9 WHERE grp = 'b'");
    sql(fx, "INSERT INTO chat_messages VALUES ('b', 7, 'x', NULL, 1, 'e'), ('zz', 1, 'x', NULL, "
            "1, 'e')");
    sql(fx, "INSERT INTO chat_members VALUES ('b', 'eve', 50, 0)");
    memset(&p, 0, sizeof(p));
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    static const char *const want[] = {
        "a: messages 8 to 9 are missing\n",
        "a: messages 12 to 12 are missing\n",
        "a: the cursor of bob/d is 99, above head 20\n",
        "a: the cursor of bob/d (99) is above the maximum cursor of bob (7)\n",
        "b: first (9) is above head + 1 (4)\n",
        "b: head is 3 but message 7 is stored\n",
        "b: 4 messages below first (9) are still stored\n",
        "zz: 1 messages are stored but the group has no head\n",
        "b: the membership of eve began at 50, above head 3\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (!strstr(p.all, want[i])) {
            fail_msg("check did not say \"%s\"; it said:\n%s", want[i], p.all);
        }
    }
    assert_int_equal(problems, sizeof(want) / sizeof(want[0]));
    assert_int_equal(p.n, (int)problems);
    assert_int_equal(groups, 3);
}

static void test_backup_and_compact(void **state)
{
    struct pgfx *fx = *state;
    char dest[96], partial[112];
    chat_store *copy = NULL;
    struct stat sb;
    struct problems p = {0};
    uint64_t id = 0, groups = 0, problems = 0;
    bool found = false, done = false;
    chat_job_state js;

    ASSERT_OK(chat_store_job_state(fx->st, &js));
    assert_int_equal(js.status, CHAT_JOB_IDLE);
    snprintf(dest, sizeof(dest), "%s/backup", fx->dir);
    snprintf(partial, sizeof(partial), "%s.partial", dest);
    publish(fx->st, "g", 50, true);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bob", "d", 20, NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "amy", NULL));
    ASSERT_OK(chat_store_read_advance(fx->st, "g", "bob", "d", 15, NULL, NULL, NULL, &found));
    ASSERT_OK(chat_store_trim(fx->st, "g", 11, 100, NULL));
    /* a group being deleted: its old member and messages stay out of the
     * copy, a member who joined since comes along */
    publish(fx->st, "old", 5, false);
    ASSERT_OK(chat_store_member_add(fx->st, "old", "carol", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "old", "carol", "c", 5, NULL));
    ASSERT_OK(chat_store_group_delete(fx->st, "old", 1, &done));
    assert_false(done);
    ASSERT_OK(chat_store_member_add(fx->st, "old", "dan", NULL));
    chat_push_put put = CHAT_PUSH_FULL;
    ASSERT_OK(chat_store_push_put(fx->st, "bob", "d", "reg", 3, 77, 4, &put));
    assert_int_equal(put, CHAT_PUSH_STORED);

    ASSERT_OK(chat_store_job_start(fx->st, CHAT_JOB_BACKUP, dest));
    assert_int_equal(chat_store_job_start(fx->st, CHAT_JOB_COMPACT, NULL), CHAT_EINVAL);
    js = wait_job(fx->st, 30);
    assert_int_equal(js.kind, CHAT_JOB_BACKUP);
    if (js.status != CHAT_JOB_DONE) {
        fail_msg("backup failed: %s", js.error);
    }
    assert_string_equal(js.path, dest);
    assert_true(js.records >= 40);
    assert_int_equal(stat(partial, &sb), -1);
    /* A second backup to the same place is refused at once. */
    assert_int_equal(chat_store_job_start(fx->st, CHAT_JOB_BACKUP, dest), CHAT_EINVAL);

    ASSERT_OK(chat_store_open(dest, CHAT_SYNC_NONE, &copy, NULL));
    assert_false(chat_store_recovered(copy));
    assert_string_not_equal(chat_store_incarnation(copy), chat_store_incarnation(fx->st));
    assert_head(copy, "g", 50);
    ASSERT_OK(chat_store_first(copy, "g", &id));
    assert_int_equal(id, 11);
    assert_not_stored(copy, "g", 10);
    assert_cursor(copy, "g", "bob", "d", true, 20);
    assert_member(copy, "g", "bob", true, 50);
    assert_cid(copy, "g", "alice", "g-50", true, 50);
    ASSERT_OK(chat_store_cursor_max(copy, "g", "bob", &id, &found));
    assert_true(found);
    assert_int_equal(id, 20);
    chat_page *page = NULL;
    ASSERT_OK(chat_store_read_forward(copy, "g", 0, 100, 1u << 20, &page));
    assert_int_equal(page->count, 40);
    assert_int_equal(page->msgs[0].id, 11);
    assert_non_null(strstr(page->msgs[0].data, "\"id\":11,"));
    chat_page_destroy(page);
    assert_head(copy, "old", 5);
    assert_member(copy, "old", "carol", false, 0);
    assert_cursor(copy, "old", "carol", "c", false, 0);
    assert_member(copy, "old", "dan", true, 5);
    /* read markers and member counts came along */
    ASSERT_OK(chat_store_read_get(copy, "g", "bob", &id));
    assert_int_equal(id, 15);
    ASSERT_OK(chat_store_read_get(copy, "g", "amy", &id));
    assert_int_equal(id, 0);
    ASSERT_OK(chat_store_member_count(copy, "g", &id));
    assert_int_equal(id, 2);
    ASSERT_OK(chat_store_member_count(copy, "old", &id));
    assert_int_equal(id, 1);
    /* and push registrations */
    char *reg = NULL;
    size_t reg_len = 0;
    int64_t created = 0;
    ASSERT_OK(chat_store_push_get(copy, "bob", "d", &reg, &reg_len, &created, &found));
    assert_true(found);
    assert_int_equal(reg_len, 3);
    assert_memory_equal(reg, "reg", 3);
    assert_int_equal(created, 77);
    free(reg);
    ASSERT_OK(chat_store_check(copy, collect_problem, &p, &groups, &problems));
    assert_int_equal(groups, 2);
    if (problems) {
        fail_msg("%d problems in the copy:\n%s", p.n, p.all);
    }
    chat_store_close(copy);

    ASSERT_OK(chat_store_job_start(fx->st, CHAT_JOB_COMPACT, NULL));
    js = wait_job(fx->st, 30);
    assert_int_equal(js.kind, CHAT_JOB_COMPACT);
    if (js.status != CHAT_JOB_DONE) {
        fail_msg("compaction failed: %s", js.error);
    }
    assert_true(js.finished_ms >= js.started_ms);
}

static int collect_read(void *ctx, const char *member, uint64_t read)
{
    return collect_member(ctx, member, read);
}

/* What chat_store_read_advance answered. */
struct read_out {
    uint64_t read, acked;
    bool moved, found;
};

static struct read_out read_advance(chat_store *st, const char *group, const char *member,
                                    const char *device, uint64_t id)
{
    struct read_out o;
    ASSERT_OK(chat_store_read_advance(st, group, member, device, id, &o.read, &o.acked, &o.moved,
                                      &o.found));
    return o;
}

static void test_read_markers(void **state)
{
    struct pgfx *fx = *state;
    struct names w = {0};
    struct read_out o;
    uint64_t id = 0;
    bool more = false, done = false;

    publish(fx->st, "g", 10, false);
    ASSERT_OK(chat_store_member_count(fx->st, "g", &id));
    assert_int_equal(id, 0);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "Zed", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "al", NULL));
    ASSERT_OK(chat_store_member_count(fx->st, "g", &id));
    assert_int_equal(id, 3);

    /* a non-member: nothing written, not even the device's cursor */
    o = read_advance(fx->st, "g", "eve", "e1", 5);
    assert_false(o.found);
    assert_cursor(fx->st, "g", "eve", "e1", false, 0);

    /* forward only, per member over its devices; each read acks its device,
     * never back, and above head is head */
    o = read_advance(fx->st, "g", "bob", "phone", 4);
    assert_true(o.found && o.moved);
    assert_int_equal(o.read, 4);
    assert_int_equal(o.acked, 4);
    assert_cursor(fx->st, "g", "bob", "phone", true, 4);
    o = read_advance(fx->st, "g", "bob", "laptop", 2);
    assert_true(o.found);
    assert_false(o.moved);
    assert_int_equal(o.read, 4);
    assert_int_equal(o.acked, 2);
    assert_cursor(fx->st, "g", "bob", "laptop", true, 2);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "bob", "laptop", 6, NULL));
    o = read_advance(fx->st, "g", "bob", "laptop", 5);
    assert_true(o.moved);
    assert_int_equal(o.read, 5);
    assert_int_equal(o.acked, 6); /* the cursor stays where it was */
    o = read_advance(fx->st, "g", "bob", "phone", 99);
    assert_int_equal(o.read, 10);
    assert_int_equal(o.acked, 10);
    ASSERT_OK(chat_store_read_get(fx->st, "g", "bob", &id));
    assert_int_equal(id, 10);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "bob", &id, &done));
    assert_int_equal(id, 10);
    ASSERT_OK(chat_store_read_get(fx->st, "g", "eve", &id));
    assert_int_equal(id, 0);

    /* every member in byte order of the names, 0 for nothing read, paged */
    ASSERT_OK(chat_store_reads(fx->st, "g", NULL, 2, collect_read, &w, &more));
    assert_true(more);
    assert_int_equal(w.n, 2);
    assert_string_equal(w.name[0], "Zed");
    assert_string_equal(w.name[1], "al");
    assert_int_equal(w.num[0], 0);
    ASSERT_OK(chat_store_reads(fx->st, "g", "al", 2, collect_read, &w, &more));
    assert_false(more);
    assert_int_equal(w.n, 3);
    assert_string_equal(w.name[2], "bob");
    assert_int_equal(w.num[2], 10);

    /* leaving drops the marker: joining again starts at 0 */
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "bob"));
    ASSERT_OK(chat_store_member_count(fx->st, "g", &id));
    assert_int_equal(id, 2);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_read_get(fx->st, "g", "bob", &id));
    assert_int_equal(id, 0);
    o = read_advance(fx->st, "g", "bob", "phone", 7);
    assert_int_equal(o.read, 7);

    /* a deletion: the old memberships stop counting at its first step, and
     * one who joins meanwhile starts at 0 */
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 1, &done));
    assert_false(done);
    ASSERT_OK(chat_store_member_count(fx->st, "g", &id));
    assert_int_equal(id, 0);
    ASSERT_OK(chat_store_read_get(fx->st, "g", "bob", &id));
    assert_int_equal(id, 0);
    assert_false(read_advance(fx->st, "g", "al", "a", 3).found);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_read_get(fx->st, "g", "bob", &id));
    assert_int_equal(id, 0);
    w.n = 0;
    ASSERT_OK(chat_store_reads(fx->st, "g", NULL, 10, collect_read, &w, &more));
    assert_int_equal(w.n, 1);
    assert_string_equal(w.name[0], "bob");
    assert_int_equal(w.num[0], 0);
    ASSERT_OK(chat_store_member_count(fx->st, "g", &id));
    assert_int_equal(id, 1);
}

/* Issue 21, item 8: device expiry takes a member with its last device in
 * open groups, in the transaction of that last cursor; the cases the
 * LevelDB backend runs too (store_expiry_cases.c). */
static void test_i21_8_members_expire(void **state)
{
    struct pgfx *fx = *state;
    expiry_case_members(fx->st, 2, true);
}

static void test_i21_8_members_expire_one_step(void **state)
{
    struct pgfx *fx = *state;
    expiry_case_members(fx->st, 256, true);
}

static void test_i21_8_closed_groups_keep_members(void **state)
{
    struct pgfx *fx = *state;
    expiry_case_members(fx->st, 3, false);
}

static void test_i21_8_member_of_group_being_deleted(void **state)
{
    struct pgfx *fx = *state;
    expiry_case_deleting(fx->st);
}

/* Push registrations (protocol v1.2): the cases the LevelDB backend runs
 * (test_store_push), on PostgreSQL. */
static void test_push_registrations(void **state)
{
    push_case_registrations(((struct pgfx *)*state)->st);
}

static void test_push_membership(void **state)
{
    push_case_membership(((struct pgfx *)*state)->st);
}

static void test_push_members(void **state)
{
    push_case_members(((struct pgfx *)*state)->st);
}

static void test_push_expire(void **state)
{
    push_case_expire(((struct pgfx *)*state)->st);
}

/* A catch-up's page and start in one statement each (issue 23): the
 * cases test_store_read runs on LevelDB. */
static void test_scan_page(void **state)
{
    page_case_scan_page(((struct pgfx *)*state)->st);
}

static void test_cursor_open(void **state)
{
    page_case_cursor_open(((struct pgfx *)*state)->st);
}

/* A join with its device's cursor (issue 23, item 4): the cases
 * test_store_member runs on LevelDB, here one statement of
 * chat_member_join. */
static void test_member_join_new(void **state)
{
    join_case_new_member(((struct pgfx *)*state)->st);
}

static void test_member_join_existing(void **state)
{
    join_case_existing_member(((struct pgfx *)*state)->st);
}

static void test_member_join_no_device(void **state)
{
    join_case_no_device(((struct pgfx *)*state)->st);
}

static void test_member_join_group_deleting(void **state)
{
    join_case_group_deleting(((struct pgfx *)*state)->st);
}

static void test_member_join_bad_device(void **state)
{
    join_case_bad_device(((struct pgfx *)*state)->st);
}

/* One transaction: a cursor the database refuses (a trigger put behind
 * the store's back) takes the join with it, the call fails as a whole
 * (no device_err), and the broker's cache does not keep the membership
 * that never was. An earlier membership is left as it was. */
static void test_member_join_both_or_neither(void **state)
{
    struct pgfx *fx = *state;
    uint64_t joined = 99;
    chat_err dev = CHAT_EIO;
    append_env(fx->st, "g", "alice", NULL, 0);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "amy", NULL));
    sql(fx, "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN RAISE EXCEPTION 'boom'; END $$; "
            "CREATE TRIGGER boom BEFORE INSERT ON chat_cursors FOR EACH ROW "
            "WHEN (NEW.device = 'boom') EXECUTE FUNCTION boom()");
    assert_int_not_equal(chat_store_member_join(fx->st, "g", "zed", "boom", &joined, &dev),
                         CHAT_OK);
    assert_int_equal(joined, 99);
    assert_int_equal(dev, CHAT_OK);
    assert_member(fx->st, "g", "zed", false, 0);
    ASSERT_OK(chat_store_member_count(fx->st, "g", &joined));
    assert_int_equal(joined, 1);
    /* an existing member: its membership stays, no cursor */
    assert_int_not_equal(chat_store_member_join(fx->st, "g", "amy", "boom", NULL, &dev), CHAT_OK);
    assert_member(fx->st, "g", "amy", true, 1);
    assert_cursor(fx->st, "g", "amy", "boom", false, 0);
    /* the connection serves the next join */
    ASSERT_OK(chat_store_member_join(fx->st, "g", "zed", "z1", &joined, &dev));
    assert_int_equal(joined, 1);
    assert_int_equal(dev, CHAT_OK);
    assert_cursor(fx->st, "g", "zed", "z1", true, 1);
}

/* The join puts its one entry in the broker's own cache, as
 * chat_store_member_add does (pg_db.h): a membership removed behind the
 * store's back without a notification is still answered from it. */
static void test_member_join_cache(void **state)
{
    struct pgfx *fx = *state;
    uint64_t joined = 0;
    bool found = false;
    pg *p = (pg *)fx->st;
    for (int i = 0; i < 2000 && !atomic_load(&p->member_live); i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    assert_true(atomic_load(&p->member_live));
    append_env(fx->st, "g", "alice", NULL, 0);
    ASSERT_OK(chat_store_member_join(fx->st, "g", "bob", "b1", &joined, NULL));
    assert_int_equal(joined, 1);
    sql(fx, "DELETE FROM chat_members WHERE grp = 'g' AND member = 'bob'");
    ASSERT_OK(chat_store_member_get(fx->st, "g", "bob", &joined, &found));
    assert_true(found);
    assert_int_equal(joined, 1);
}

static void test_close_during_backup(void **state)
{
    struct pgfx *fx = *state;
    char dest[96];
    uint64_t head = 0;
    snprintf(dest, sizeof(dest), "%s/stopped", fx->dir);
    publish(fx->st, "g", 300, true);
    ASSERT_OK(chat_store_job_start(fx->st, CHAT_JOB_BACKUP, dest));
    /* Close waits for the job (stopped or done): nothing leaks, no crash. */
    chat_store_close(fx->st);
    fx->st = open_pg(fx->conninfo);
    ASSERT_OK(chat_store_head(fx->st, "g", &head));
    assert_int_equal(head, 300);
}

/* ------------------------------------------------------------------------
 * A registration's put against the end of the member's last membership
 * on another broker (issue 23): another connection ends it in a
 * transaction left open; the put, made meanwhile, must wait for that
 * commit and then find no membership. (0.2.0 looked for the membership
 * before it took the lock that orders them: it saw the membership the
 * open transaction had deleted, stored the registration after that
 * transaction's sweep, and left it behind the membership's end.)
 * --------------------------------------------------------------------- */

struct put_call {
    chat_store *st;
    chat_err rc;
    chat_push_put result;
    atomic_bool done;
};

static void *put_thread(void *v)
{
    struct put_call *c = v;
    c->rc = chat_store_push_put(c->st, "bob", "b1", "rb", 2, 5, 4, &c->result);
    atomic_store(&c->done, true);
    return NULL;
}

static PGconn *connect_pg(const char *conninfo)
{
    const char *kw[] = {"dbname", NULL};
    const char *val[] = {conninfo, NULL};
    PGconn *c = PQconnectdbParams(kw, val, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        fail_msg("connect %s: %s", conninfo, c ? PQerrorMessage(c) : "out of memory");
    }
    return c;
}

static void exec_ok(PGconn *c, const char *text)
{
    PGresult *r = PQexec(c, text);
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        fail_msg("%s: %s", text, PQresultErrorMessage(r));
    }
    PQclear(r);
}

/* Whether the store's writer waits for a lock (watch: a third connection). */
static bool store_waits(PGconn *watch)
{
    PGresult *r = PQexec(watch, "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                "'mosquitto-chat' AND wait_event_type = 'Lock'");
    bool waits = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "0") != 0;
    PQclear(r);
    return waits;
}

static void put_against(struct pgfx *fx, const char *ending)
{
    struct put_call call = {fx->st, CHAT_EIO, CHAT_PUSH_STORED, false};
    pthread_t t;
    char *reg = NULL;
    size_t len = 0;
    int64_t created = 0;
    bool found = true;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    PGconn *other = connect_pg(fx->conninfo);
    PGconn *watch = connect_pg(fx->conninfo);
    exec_ok(other, "BEGIN");
    exec_ok(other, ending);
    assert_int_equal(pthread_create(&t, NULL, put_thread, &call), 0);
    /* until the put waits for the open transaction, or (0.2.0) is done */
    for (int i = 0; i < 2000 && !atomic_load(&call.done) && !store_waits(watch); i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    /* the race is on (the put waits for the lock), or there is none */
    assert_true(atomic_load(&call.done) || store_waits(watch));
    exec_ok(other, "COMMIT");
    pthread_join(t, NULL);
    PQfinish(other);
    PQfinish(watch);
    ASSERT_OK(call.rc);
    ASSERT_OK(chat_store_push_get(fx->st, "bob", "b1", &reg, &len, &created, &found));
    free(reg);
    assert_false(found); /* no registration outlives the membership */
    assert_int_equal(call.result, CHAT_PUSH_NO_GROUP);
}

/* The membership cache (pg_db.h): this store's own joins and leaves
 * update its entry at once (the watcher passes over the writer's own
 * notifications), another connection's change reaches it by
 * notification. */
static void test_member_cache_own_and_other(void **state)
{
    struct pgfx *fx = *state;
    uint64_t joined = 0;
    bool found = false;
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_member_get(fx->st, "g", "bob", &joined, &found));
    assert_true(found);
    /* another broker's leave: seen once its notification arrives */
    sql(fx, "SELECT chat_member_remove('g', 'bob')");
    for (int i = 0; i < 2000 && found; i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        ASSERT_OK(chat_store_member_get(fx->st, "g", "bob", &joined, &found));
    }
    assert_false(found);
    /* our own join and leave: seen at once, each */
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_member_get(fx->st, "g", "bob", &joined, &found));
    assert_true(found);
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "bob"));
    ASSERT_OK(chat_store_member_get(fx->st, "g", "bob", &joined, &found));
    assert_false(found);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_member_get(fx->st, "g", "bob", &joined, &found));
    assert_true(found);
}

static void test_push_put_waits_for_leave(void **state)
{
    put_against(*state, "SELECT chat_member_remove('g', 'bob')");
}

static void test_push_put_waits_for_group_delete(void **state)
{
    put_against(*state, "SELECT chat_group_delete('g', 1000)");
}

static void test_push_put_waits_for_expiry(void **state)
{
    struct pgfx *fx = *state;
    uint64_t at = 0;
    bool found = false;
    /* bob's one device, unused since long ago: its expiry ends bob's
     * membership (open groups) */
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "old", &at, &found));
    sql(fx, "UPDATE chat_cursors SET used = 0");
    put_against(fx, "SELECT * FROM chat_expire_devices(1000, 100, true, NULL, NULL, NULL)");
}

/* chat_change as 0.2.0 created it, word for word: no rd, and no rdm in
 * its result. */
static const char old_change_sql[] =
    "CREATE OR REPLACE FUNCTION chat_change(g text, s text, n bigint, x bytea, vh bytea,\n"
    "    st boolean, vt bytea, o bigint, h bytea, m bytea, t bytea, OUT nid bigint,\n"
    "    OUT nts bigint, OUT ok boolean) LANGUAGE plpgsql AS $$\n"
    "DECLARE now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);\n"
    "  f bigint; cur bytea;\n"
    "BEGIN\n"
    "  ok := false; nid := 0; nts := 0;\n"
    "  SELECT first INTO f FROM chat_groups WHERE grp = g FOR UPDATE;\n"
    "  IF NOT FOUND OR n < f THEN RETURN; END IF;\n"
    "  SELECT mm.env INTO cur FROM chat_messages mm WHERE mm.grp = g AND mm.id = n;\n"
    "  IF NOT FOUND OR cur <> x THEN RETURN; END IF;\n"
    "  UPDATE chat_groups SET head = head + 1, last_ts = greatest(last_ts, now_ms)\n"
    "    WHERE grp = g RETURNING head, last_ts INTO nid, nts;\n"
    "  UPDATE chat_messages SET env = CASE WHEN st THEN vh || convert_to(nts::text, 'UTF8')\n"
    "    || vt ELSE vh END WHERE grp = g AND id = n;\n"
    "  INSERT INTO chat_messages VALUES (g, nid, s, NULL, o, h || convert_to(nid::text, 'UTF8')\n"
    "    || m || convert_to(nts::text, 'UTF8') || t);\n"
    "  ok := true;\n"
    "  PERFORM pg_notify('chat_msg', o::text || '/' || nid::text || '/' || g);\n"
    "END $$;\n";

/* Recalls id of group as from, as the plugin would (N read, then the
 * change); returns whether it was applied, M in *out (env freed). */
static bool recall(chat_store *st, const char *group, const char *from, uint64_t id,
                   chat_appended *out)
{
    chat_msg cur = {0};
    bool found = false, applied = false;
    char before[64], tail[64];
    ASSERT_OK(chat_store_get(st, group, id, &cur, &found));
    assert_true(found);
    snprintf(before, sizeof(before), "{\"id\":%llu,\"recalled\":true}", (unsigned long long)id);
    snprintf(tail, sizeof(tail), ",\"recall\":%llu}", (unsigned long long)id);
    chat_change ch = {.id = id,
                      .expect = cur.data,
                      .expect_len = cur.len,
                      .before = before,
                      .before_len = strlen(before),
                      .msg = {"{\"id\":", 6, ",\"ts\":", 6, tail, strlen(tail)}};
    ASSERT_OK(chat_store_change(st, group, from, &ch, out, &applied));
    free(cur.data);
    free(out->env);
    out->env = NULL;
    return applied;
}

/* A database whose chat_change 0.2.0 made (it moved no read marker, and
 * its result had no rdm): a broker of this version starts on it, and its
 * recall moves the sender's marker; a 0.2.0 broker beside it still calls
 * its own chat_change as it prepared it, and still starts (it creates
 * that function again), after which this version starts again. */
static void test_change_upgrade_from_0_2_0(void **state)
{
    struct pgfx *fx = *state;
    chat_appended ap;
    uint64_t read = 0;
    struct problems p = {0};
    uint64_t groups = 0, problems = 0;

    publish(fx->st, "g", 3, false);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    chat_store_close(fx->st);
    fx->st = NULL;
    /* back to what 0.2.0 left */
    sql(fx, "DROP FUNCTION chat_change(text, text, bigint, bytea, bytea, boolean, bytea, "
            "bigint, bytea, bytea, bytea, boolean)");
    sql(fx, old_change_sql);
    fx->st = open_pg(fx->conninfo);
    assert_true(recall(fx->st, "g", "alice", 1, &ap));
    assert_int_equal(ap.id, 4);
    assert_true(ap.read);
    ASSERT_OK(chat_store_read_get(fx->st, "g", "alice", &read));
    assert_int_equal(read, 4);
    /* 0.2.0's statement, on its old function: applied, no marker moved */
    sql(fx, "DO $$ DECLARE r record; BEGIN\n"
            "  SELECT nid, nts, ok INTO r FROM chat_change('g', 'alice', 2,\n"
            "    (SELECT env FROM chat_messages WHERE grp = 'g' AND id = 2),\n"
            "    convert_to('{\"id\":2,\"recalled\":true}', 'UTF8'), false, ''::bytea, 0,\n"
            "    convert_to('{\"id\":', 'UTF8'), convert_to(',\"ts\":', 'UTF8'),\n"
            "    convert_to(',\"recall\":2}', 'UTF8'));\n"
            "  IF NOT r.ok OR r.nid <> 5 THEN RAISE EXCEPTION 'old chat_change: %', r; END IF;\n"
            "END $$");
    ASSERT_OK(chat_store_read_get(fx->st, "g", "alice", &read));
    assert_int_equal(read, 4);
    /* a 0.2.0 broker starts again: its CREATE OR REPLACE of the old one */
    sql(fx, old_change_sql);
    chat_store_close(fx->st);
    fx->st = open_pg(fx->conninfo);
    assert_true(recall(fx->st, "g", "alice", 3, &ap));
    assert_int_equal(ap.id, 6);
    assert_true(ap.read);
    ASSERT_OK(chat_store_read_get(fx->st, "g", "alice", &read));
    assert_int_equal(read, 6);
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    if (problems) {
        fail_msg("%d problems:\n%s", p.n, p.all);
    }
}

/* What chat_store_feed handed over: the ids, and whether the membership
 * read the broker's read check makes right after each failed. */
struct fed {
    chat_store *st;
    uint64_t ids[8];
    int n;
    int member_failures;
};

static void on_fed(void *ctx, const char *group, uint64_t id, const char *env, size_t len)
{
    struct fed *f = ctx;
    uint64_t since = 0;
    bool found = false;
    (void)env;
    (void)len;
    if (f->n < 8) {
        f->ids[f->n++] = id;
    }
    /* the broker's read check of the delivery, as plugin/access.c makes it */
    if (chat_store_member_get(f->st, group, "bob", &since, &found) != CHAT_OK || !found) {
        f->member_failures++;
    }
}

/* A message another broker stored is handed over only while this store's
 * writer is alive (issue 23, item 5: in bench/failover the broker's read
 * check refused, fail closed, the deliveries of the messages its listener
 * had read just before the primary went, since the writer it asks was
 * gone). This store's connections are terminated behind its back; the
 * listener reconnects and reads the other broker's message; feed must not
 * hand it over before the writer is back, so every membership read right
 * after a delivery succeeds. */
static void test_feed_waits_for_writer(void **state)
{
    struct pgfx *fx = *state;
    char other_info[200];
    uint64_t since = 0;
    snprintf(other_info, sizeof(other_info), "%s application_name=other-broker", fx->conninfo);
    chat_store *other = open_pg(other_info);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", &since));
    assert_int_equal(publish(other, "g", 1, false), 1);
    ASSERT_OK(chat_store_follow(fx->st, "g", 1));

    sql(fx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'mosquitto-chat' AND datname = current_database()");
    assert_int_equal(publish(other, "g", 1, false), 2);

    struct fed f = {.st = fx->st};
    int64_t until = ts_now_ms() + 20000;
    while (f.n == 0 && ts_now_ms() < until) {
        chat_store_feed(fx->st, 8, on_fed, &f);
        ts_sleep_ms(5);
    }
    assert_int_equal(f.n, 1);
    assert_int_equal(f.ids[0], 2);
    assert_int_equal(f.member_failures, 0);
    chat_store_close(other);
}

/* How long the read-only case watches the writer's attempts: the bound
 * of pg_backoff.h for it, 5 + (4000 - 1875) / 1000 = 7 attempts at most
 * (the first at once, then 125-250, 250-500, 500-1000 ms and 1-2 s apart),
 * and at least 3 on a slow machine (5 by the timing alone). */
#define RO_WINDOW_MS 4000
#define RO_ATTEMPTS_MAX 7
/* How long a connection attempt, its check and its statements may take
 * on a busy machine (or under valgrind), beyond the backoff's delay. */
#define CONNECT_SLACK_MS 1500

/* The writer lands on a server that does not take writes (a standby
 * before its promotion, or the old primary turned standby behind a load
 * balancer): here the case's database made read-only for new sessions
 * and this store's sessions ended. Every connection the watcher makes is
 * turned away at connect (pg_check_writable: default_transaction_read_only
 * on), so the store stays unavailable: every append is refused with
 * CHAT_EIO, nothing is stored, and the attempts come at pg_backoff's pace,
 * not a connection per publish or four a second. Once the database takes
 * writes again, the writer is back within the backoff's largest delay. */
static void test_standby_writer_backs_off(void **state)
{
    struct pgfx *fx = *state;
    char text[200];
    uint64_t head = 0;

    assert_true(chat_store_available(fx->st));
    snprintf(text, sizeof(text), "ALTER DATABASE %s SET default_transaction_read_only = on",
             fx->db);
    sql_admin(text);
    uint64_t before = pg_watch_writer_attempts((pg *)fx->st);
    end_sessions(fx);
    int64_t t0 = ts_now_ms();
    unsigned refused = 0;
    while (ts_now_ms() - t0 < RO_WINDOW_MS) {
        assert_int_equal(try_append(fx->st, "ro"), CHAT_EIO);
        refused++;
        ts_sleep_ms(20);
    }
    uint64_t attempts = pg_watch_writer_attempts((pg *)fx->st) - before;
    assert_false(chat_store_available(fx->st));
    assert_true(refused >= 10);
    assert_in_range(attempts, 3, RO_ATTEMPTS_MAX);
    /* nothing stored, not even the head of the group */
    sql(fx, "DO $$ BEGIN IF (SELECT count(*) FROM chat_messages) <> 0 OR "
            "(SELECT count(*) FROM chat_groups) <> 0 THEN "
            "RAISE EXCEPTION 'stored on a read-only server'; END IF; END $$");

    snprintf(text, sizeof(text), "ALTER DATABASE %s RESET default_transaction_read_only", fx->db);
    sql_admin(text);
    int64_t t1 = ts_now_ms();
    while (!chat_store_available(fx->st) &&
           ts_now_ms() - t1 < PG_BACKOFF_MAX_MS + CONNECT_SLACK_MS) {
        ts_sleep_ms(5);
    }
    assert_true(chat_store_available(fx->st));
    ASSERT_OK(try_append(fx->st, "ro"));
    ASSERT_OK(chat_store_head(fx->st, "ro", &head));
    assert_int_equal(head, 1);
}

/* A statement that a read-only server refuses (SQLSTATE 25006: the
 * session was made read-only after its connection was checked, or a
 * server too old to report it) marks its connection lost and read-only,
 * which pg_call drops as it drops a broken one; a read on it still works,
 * and a write on a writable session is neither. */
static void test_readonly_statement_lost(void **state)
{
    struct pgfx *fx = *state;
    char err[CHAT_STORE_ERROR_MAX];
    bool lost = true, data = true, readonly = true;
    const char *add[2] = {"g", "bob"};

    PGconn *c = pg_connect(fx->conninfo, CHAT_SYNC_NONE, true, err, sizeof(err));
    assert_non_null(c);
    assert_true(pg_check_writable(c, err, sizeof(err)));
    PGresult *res =
        pg_run(c, PG_STMT_MEMBER_ADD, add, NULL, 5000, err, sizeof(err), &lost, &data, &readonly);
    assert_non_null(res);
    assert_false(lost || data || readonly);
    PQclear(res);

    res = PQexec(c, "SET default_transaction_read_only = on");
    assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
    PQclear(res);
    assert_false(pg_check_writable(c, err, sizeof(err)));
    assert_non_null(strstr(err, "read-only"));
    res = pg_run(c, PG_STMT_MEMBER_GET, add, NULL, 5000, err, sizeof(err), &lost, &data, &readonly);
    assert_non_null(res); /* reading is fine */
    PQclear(res);
    add[1] = "carol";
    res = pg_run(c, PG_STMT_MEMBER_ADD, add, NULL, 5000, err, sizeof(err), &lost, &data, &readonly);
    assert_null(res);
    assert_true(readonly);
    assert_true(lost);
    assert_false(data);
    PQfinish(c);
}

/* The store's database goes away and comes back (a restart, as this store
 * sees it: the database refuses connections, ALLOW_CONNECTIONS false, and
 * this store's sessions are ended): while it is away the store is not
 * available and appends are refused; once it is back, the store is
 * available again within the backoff's largest delay (plus a connection's
 * time), and stores again. */
static void test_available_after_loss(void **state)
{
    struct pgfx *fx = *state;
    char text[200];
    uint64_t head = 0;

    snprintf(text, sizeof(text), "ALTER DATABASE %s ALLOW_CONNECTIONS false", fx->db);
    sql_admin(text);
    end_sessions(fx);
    int64_t t0 = ts_now_ms();
    uint64_t before = pg_watch_writer_attempts((pg *)fx->st);
    while (ts_now_ms() - t0 < 3000) {
        assert_int_equal(try_append(fx->st, "g"), CHAT_EIO);
        ts_sleep_ms(20);
    }
    assert_false(chat_store_available(fx->st));
    /* 3 s: 5 + (3000 - 1875) / 1000 = 6 at most */
    assert_in_range(pg_watch_writer_attempts((pg *)fx->st) - before, 2, 6);

    snprintf(text, sizeof(text), "ALTER DATABASE %s ALLOW_CONNECTIONS true", fx->db);
    sql_admin(text);
    int64_t t1 = ts_now_ms();
    while (!chat_store_available(fx->st) &&
           ts_now_ms() - t1 < PG_BACKOFF_MAX_MS + CONNECT_SLACK_MS) {
        ts_sleep_ms(5);
    }
    int64_t took = ts_now_ms() - t1;
    assert_true(chat_store_available(fx->st));
    assert_true(took <= PG_BACKOFF_MAX_MS + CONNECT_SLACK_MS);
    ASSERT_OK(try_append(fx->st, "g"));
    ASSERT_OK(chat_store_head(fx->st, "g", &head));
    assert_int_equal(head, 1);
}

/* Opens conninfo, expecting want; returns the open's message (to free). */
static char *open_expect(const char *conninfo, chat_err want)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    chat_store *st = NULL;
    char *errmsg = NULL;
    opts.backend = "postgresql";
    chat_err rc = chat_store_open_opts(conninfo, &opts, &st, &errmsg);
    chat_store_close(st);
    if (rc != want) {
        fail_msg("open %s: %s (%s), expected %s", conninfo, chat_strerror(rc),
                 errmsg ? errmsg : "no message", chat_strerror(want));
    }
    assert_non_null(errmsg);
    return errmsg;
}

static void expect_in(char *msg, const char *needle)
{
    if (!strstr(msg, needle)) {
        fail_msg("\"%s\" not in \"%s\"", needle, msg);
    }
    free(msg);
}

/* What an open that fails says of itself (chat_store_open): CHAT_EUNAVAIL
 * when retrying may mend it (nothing listening, a read-only server),
 * CHAT_EIO when only an operator can (a connection string libpq cannot
 * read, a database that does not exist, a schema of another version, a
 * permission denied), which the plugin's start turns into "running
 * without it" and a refusal to start. */
static void test_open_failures_split(void **state)
{
    struct pgfx *fx = *state;
    const char *port = getenv("CHAT_TEST_PG_PORT");
    char ci[256], text[256];

    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres dbname=x", ts_free_port());
    expect_in(open_expect(ci, CHAT_EUNAVAIL), "cannot connect to PostgreSQL");
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%s user=postgres dbname=nosuchdb_%d", port,
             (int)getpid());
    expect_in(open_expect(ci, CHAT_EIO), "does not exist");
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%s nosuchkeyword=1", port);
    expect_in(open_expect(ci, CHAT_EIO), "cannot connect to PostgreSQL");

    snprintf(text, sizeof(text), "ALTER DATABASE %s SET default_transaction_read_only = on",
             fx->db);
    sql_admin(text);
    expect_in(open_expect(fx->conninfo, CHAT_EUNAVAIL), "cannot write to PostgreSQL");
    snprintf(text, sizeof(text), "ALTER DATABASE %s RESET default_transaction_read_only", fx->db);
    sql_admin(text);

    /* A role that may log in and nothing more. */
    snprintf(text, sizeof(text),
             "DO $$ BEGIN CREATE ROLE chat_nobody_%d LOGIN; "
             "EXCEPTION WHEN duplicate_object THEN NULL; END $$",
             (int)getpid());
    sql_admin(text);
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%s user=chat_nobody_%d dbname=%s", port,
             (int)getpid(), fx->db);
    expect_in(open_expect(ci, CHAT_EIO), "permission denied");
    snprintf(text, sizeof(text), "DROP ROLE chat_nobody_%d", (int)getpid());
    sql_admin(text);

    sql(fx, "UPDATE chat_meta SET value = '999' WHERE name = 'schema'");
    expect_in(open_expect(fx->conninfo, CHAT_EIO), "another version");
    sql(fx, "UPDATE chat_meta SET value = '" PG_SCHEMA_VERSION "' WHERE name = 'schema'");
}

/* The opener (chat_store.h): while nothing answers it retries at
 * pg_backoff's pace, counting its failures with the last one's text, and
 * its stop ends at once; on a database that answers it opens the store,
 * which its owner takes. */
static void test_opener(void **state)
{
    struct pgfx *fx = *state;
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    chat_store_opener *op = NULL;
    char ci[160], last[CHAT_STORE_ERROR_MAX];
    uint64_t failures = 0, head = 7;

    opts.backend = "postgresql";
    snprintf(ci, sizeof(ci), "host=127.0.0.1 port=%d user=postgres dbname=x", ts_free_port());
    ASSERT_OK(chat_store_opener_start(ci, &opts, &op));
    int64_t t0 = ts_now_ms();
    /* at once, then 125-250 ms, 250-500 ms: three within 750 ms and a
     * connection's time each */
    while (failures < 3 && ts_now_ms() - t0 < 3000) {
        assert_null(chat_store_opener_take(op, &failures, last, sizeof(last)));
        ts_sleep_ms(10);
    }
    assert_true(failures >= 3);
    assert_non_null(strstr(last, "cannot connect to PostgreSQL"));
    int64_t t1 = ts_now_ms();
    chat_store_opener_stop(op);
    assert_true(ts_now_ms() - t1 < 1000);

    ASSERT_OK(chat_store_opener_start(fx->conninfo, &opts, &op));
    chat_store *st = NULL;
    t0 = ts_now_ms();
    while (!(st = chat_store_opener_take(op, &failures, last, sizeof(last))) &&
           ts_now_ms() - t0 < 10000) {
        ts_sleep_ms(10);
    }
    assert_non_null(st);
    assert_int_equal(failures, 0);
    assert_null(chat_store_opener_take(op, NULL, NULL, 0));
    chat_store_opener_stop(op);
    ASSERT_OK(chat_store_head(st, "g", &head));
    assert_int_equal(head, 0);
    chat_store_close(st);
}

/* A broker before recall-complete (0.2.x, the 12-argument chat_change)
 * shares the database with this version: its statement still finds its
 * function, which this version's schema leaves as it was, beside the new
 * overload; this version's recall goes on after its change. */
static void test_change_12_args_kept(void **state)
{
    struct pgfx *fx = *state;
    chat_appended ap;

    publish(fx->st, "g", 2, false);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    sql(fx, "DO $$ DECLARE r record; BEGIN\n"
            "  SELECT nid, nts, ok, rdm INTO r FROM chat_change('g', 'alice', 2,\n"
            "    (SELECT env FROM chat_messages WHERE grp = 'g' AND id = 2),\n"
            "    convert_to('{\"id\":2,\"recalled\":true}', 'UTF8'), false, ''::bytea, 0,\n"
            "    convert_to('{\"id\":', 'UTF8'), convert_to(',\"ts\":', 'UTF8'),\n"
            "    convert_to(',\"recall\":2}', 'UTF8'), true);\n"
            "  IF NOT r.ok OR r.nid <> 3 OR NOT r.rdm THEN\n"
            "    RAISE EXCEPTION '0.2.x chat_change: %', r;\n"
            "  END IF;\n"
            "END $$");
    assert_true(recall(fx->st, "g", "alice", 1, &ap));
    assert_int_equal(ap.id, 4);
}

int main(void)
{
    const char *port = getenv("CHAT_TEST_PG_PORT");
    if (!port || !port[0]) {
        printf("SKIP: CHAT_TEST_PG_PORT is not set (scripts/test pg sets it)\n");
        return 77;
    }
#define PGCASE(f) cmocka_unit_test_setup_teardown(f, pg_setup, pg_teardown)
    const struct CMUnitTest tests[] = {
        PGCASE(test_members_and_devices),
        PGCASE(test_change_12_args_kept),
        PGCASE(test_deletions_and_group_init),
        PGCASE(test_check),
        PGCASE(test_backup_and_compact),
        PGCASE(test_close_during_backup),
        PGCASE(test_read_markers),
        PGCASE(test_change_upgrade_from_0_2_0),
        PGCASE(test_i21_8_members_expire),
        PGCASE(test_i21_8_members_expire_one_step),
        PGCASE(test_i21_8_closed_groups_keep_members),
        PGCASE(test_i21_8_member_of_group_being_deleted),
        PGCASE(test_push_registrations),
        PGCASE(test_push_membership),
        PGCASE(test_push_members),
        PGCASE(test_push_expire),
        PGCASE(test_feed_waits_for_writer),
        PGCASE(test_standby_writer_backs_off),
        PGCASE(test_available_after_loss),
        PGCASE(test_open_failures_split),
        PGCASE(test_opener),
        PGCASE(test_readonly_statement_lost),
        PGCASE(test_scan_page),
        PGCASE(test_cursor_open),
        PGCASE(test_member_cache_own_and_other),
        PGCASE(test_push_put_waits_for_leave),
        PGCASE(test_push_put_waits_for_group_delete),
        PGCASE(test_push_put_waits_for_expiry),
        PGCASE(test_member_join_new),
        PGCASE(test_member_join_existing),
        PGCASE(test_member_join_no_device),
        PGCASE(test_member_join_group_deleting),
        PGCASE(test_member_join_bad_device),
        PGCASE(test_member_join_both_or_neither),
        PGCASE(test_member_join_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
