/* Tests of chat_store_change and chat_store_cid_of (protocol v1.2, recall
 * and edit) below the broker, on either backend: `test_store_change
 * leveldb` on a fresh LevelDB directory per case, `test_store_change
 * postgresql` on a new database per case of the cluster CHAT_TEST_PG_PORT
 * names (without it the run exits 77, which ctest counts as skipped). One
 * table of named cases, the same for both: a change rewrites N and stores
 * M under the next id, in one write (change-atomic: a child process
 * changing messages in a loop is killed with SIGKILL at random moments,
 * and every state left has both or neither); every read then sees only
 * the new version (one-copy); a retry of N's cid is a duplicate answered
 * with it (cid-reserved); a change of a message that is gone, or that no
 * longer holds what the caller read, writes nothing; a recall rewrites the
 * carriers of the message's edits in its one write, all or none under
 * SIGKILL too (recall-complete). */
#include "store_fixture.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static bool on_pg; /* the backend of this run: argv[1] */

struct cfx {
    char dir[64];       /* LevelDB: the case's directory */
    char conninfo[160]; /* PostgreSQL: the case's database */
    chat_store *st;
};

static chat_store *open_store(struct cfx *fx)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    chat_store *st = NULL;
    char *errmsg = NULL;
    opts.backend = on_pg ? "postgresql" : "leveldb";
    if (chat_store_open_opts(on_pg ? fx->conninfo : fx->dir, &opts, &st, &errmsg) != CHAT_OK) {
        fail_msg("open: %s", errmsg ? errmsg : "(no message)");
    }
    free(errmsg);
    return st;
}

static int cx_setup(void **state)
{
    static int n;
    char cmd[512];
    struct cfx *fx = calloc(1, sizeof(*fx));
    if (!fx) {
        return -1;
    }
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/chat_store_change.XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    if (on_pg) {
        const char *port = getenv("CHAT_TEST_PG_PORT");
        snprintf(cmd, sizeof(cmd), "%s createdb %s store_change_%d_%d", CHAT_PGCLUSTER, port,
                 (int)getpid(), n);
        if (system(cmd) != 0) {
            rm_tree(fx->dir);
            free(fx);
            return -1;
        }
        snprintf(fx->conninfo, sizeof(fx->conninfo),
                 "host=127.0.0.1 port=%s user=postgres dbname=store_change_%d_%d", port,
                 (int)getpid(), n++);
    }
    fx->st = open_store(fx);
    *state = fx;
    return 0;
}

static int cx_teardown(void **state)
{
    struct cfx *fx = *state;
    chat_store_close(fx->st);
    rm_tree(fx->dir);
    free(fx);
    return 0;
}

/* Appends a message of group whose envelope is {"id":<id>,"ts":<ts>,
 * "body":"<body>"} (with "cid" when cid is not NULL); returns its id. */
static uint64_t put(chat_store *st, const char *group, const char *cid, const char *body)
{
    char tail[128];
    chat_appended ap;
    snprintf(tail, sizeof(tail), ",\"body\":\"%s\"%s%s%s}", body, cid ? ",\"cid\":\"" : "",
             cid ? cid : "", cid ? "\"" : "");
    chat_envelope env = {"{\"id\":", 6, ",\"ts\":", 6, tail, strlen(tail)};
    ASSERT_OK(chat_store_append(st, group, "alice", cid, &env, false, &ap));
    assert_false(ap.duplicate);
    free(ap.env);
    return ap.id;
}

/* The stored bytes of (group, id), a copy to free(); fails when missing. */
static char *get(chat_store *st, const char *group, uint64_t id)
{
    chat_msg m = {0};
    bool found = false;
    ASSERT_OK(chat_store_get(st, group, id, &m, &found));
    if (!found) {
        fail_msg("message %llu of %s is not stored", (unsigned long long)id, group);
    }
    assert_int_equal(strlen(m.data), m.len);
    return m.data;
}

/* Texts a change of n writes: a recall's tombstone, or an edit's version
 * stamped with the change's time; the carrying message names n. */
struct change_text {
    char before[128], after[16], mid[16], tail[64];
};

/* Changes id of group as the plugin would: reads it, then the change. out
 * receives M; returns whether it was applied. recall: a tombstone, else
 * an edit to body. */
static bool change(chat_store *st, const char *group, uint64_t id, bool recall, const char *body,
                   chat_appended *out)
{
    struct change_text t;
    char *cur = get(st, group, id);
    bool applied = false;
    if (recall) {
        snprintf(t.before, sizeof(t.before), "{\"id\":%llu,\"recalled\":true}",
                 (unsigned long long)id);
        snprintf(t.tail, sizeof(t.tail), ",\"recall\":%llu}", (unsigned long long)id);
    } else {
        snprintf(t.before, sizeof(t.before),
                 "{\"id\":%llu,\"body\":\"%s\",\"edited\":", (unsigned long long)id, body);
        snprintf(t.tail, sizeof(t.tail), ",\"edit\":%llu,\"body\":\"%s\"}", (unsigned long long)id,
                 body);
    }
    snprintf(t.after, sizeof(t.after), "}");
    snprintf(t.mid, sizeof(t.mid), ",\"ts\":");
    chat_change ch = {.id = id,
                      .expect = cur,
                      .expect_len = strlen(cur),
                      .before = t.before,
                      .before_len = strlen(t.before),
                      .stamp = !recall,
                      .after = t.after,
                      .after_len = strlen(t.after),
                      .msg = {"{\"id\":", 6, t.mid, strlen(t.mid), t.tail, strlen(t.tail)}};
    ASSERT_OK(chat_store_change(st, group, "bob", &ch, out, &applied));
    free(cur);
    return applied;
}

/* ------------------------------------------------------------------------
 * Cases
 * --------------------------------------------------------------------- */

/* A recall: N becomes its tombstone, M is the new head with the change's
 * time; every read (a lookup, pages both ways) sees the tombstone. */
static void test_recall_rewrites_and_appends(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    chat_page *page = NULL;
    uint64_t head = 0;
    char want[128];

    put(fx->st, "g", NULL, "one");
    put(fx->st, "g", "c2", "secret");
    put(fx->st, "g", NULL, "three");
    assert_true(change(fx->st, "g", 2, true, NULL, &ap));
    assert_int_equal(ap.id, 4);
    assert_false(ap.duplicate);
    snprintf(want, sizeof(want), "{\"id\":4,\"ts\":%lld,\"recall\":2}", (long long)ap.ts);
    assert_string_equal(ap.env, want);
    free(ap.env);
    ASSERT_OK(chat_store_head(fx->st, "g", &head));
    assert_int_equal(head, 4);

    char *n = get(fx->st, "g", 2);
    assert_string_equal(n, "{\"id\":2,\"recalled\":true}");
    free(n);
    char *m = get(fx->st, "g", 4);
    assert_string_equal(m, want);
    free(m);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 10, 1 << 20, &page));
    assert_int_equal(page->count, 4);
    assert_string_equal(page->msgs[1].data, "{\"id\":2,\"recalled\":true}");
    assert_null(strstr(page->msgs[1].data, "secret"));
    chat_page_destroy(page);
    ASSERT_OK(chat_store_read_backward(fx->st, "g", 5, 10, 1 << 20, &page));
    assert_int_equal(page->count, 4);
    assert_string_equal(page->msgs[2].data, "{\"id\":2,\"recalled\":true}");
    chat_page_destroy(page);
    /* The next publish continues after M (dense-ids). */
    assert_int_equal(put(fx->st, "g", NULL, "five"), 5);
}

/* An edit: N's version carries the change's time, which is M's. */
static void test_edit_stamps_version(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    char want[128];

    put(fx->st, "g", "c1", "helo");
    assert_true(change(fx->st, "g", 1, false, "hello", &ap));
    assert_int_equal(ap.id, 2);
    char *n = get(fx->st, "g", 1);
    snprintf(want, sizeof(want), "{\"id\":1,\"body\":\"hello\",\"edited\":%lld}", (long long)ap.ts);
    assert_string_equal(n, want);
    free(n);
    snprintf(want, sizeof(want), "{\"id\":2,\"ts\":%lld,\"edit\":1,\"body\":\"hello\"}",
             (long long)ap.ts);
    assert_string_equal(ap.env, want);
    free(ap.env);
    /* A second edit rewrites the same record again. */
    assert_true(change(fx->st, "g", 1, false, "hello!", &ap));
    assert_int_equal(ap.id, 3);
    free(ap.env);
    n = get(fx->st, "g", 1);
    assert_non_null(strstr(n, "\"body\":\"hello!\""));
    free(n);
}

/* M is its sender's own message: a member's read marker moves to it in
 * the same write, as a publish's does (issue 25); a non-member (an admin
 * recalling elsewhere) gets none. */
static void test_change_read_by_sender(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    uint64_t since = 0, read = 0;

    put(fx->st, "g", NULL, "one");
    put(fx->st, "g", NULL, "two");
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", &since));
    assert_true(change(fx->st, "g", 1, true, NULL, &ap));
    assert_true(ap.read);
    free(ap.env);
    ASSERT_OK(chat_store_read_get(fx->st, "g", "bob", &read));
    assert_int_equal(read, 3);
    assert_true(change(fx->st, "g", 2, false, "2", &ap));
    assert_true(ap.read);
    free(ap.env);
    ASSERT_OK(chat_store_read_get(fx->st, "g", "bob", &read));
    assert_int_equal(read, 4);
    /* bob is no member of h */
    put(fx->st, "h", NULL, "one");
    assert_true(change(fx->st, "h", 1, true, NULL, &ap));
    assert_false(ap.read);
    free(ap.env);
    ASSERT_OK(chat_store_read_get(fx->st, "h", "bob", &read));
    assert_int_equal(read, 0);
}

/* An edit that lists its carrier: N's version is before, the change's
 * time, after, M's id, last (the plugin's "edits" list). */
static void test_edit_stamps_id(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    bool applied = false;
    char want[160];

    put(fx->st, "g", NULL, "helo");
    char *cur = get(fx->st, "g", 1);
    const char *before = "{\"id\":1,\"body\":\"hello\",\"edited\":";
    chat_change ch = {.id = 1,
                      .expect = cur,
                      .expect_len = strlen(cur),
                      .before = before,
                      .before_len = strlen(before),
                      .stamp = true,
                      .after = ",\"edits\":[",
                      .after_len = 10,
                      .stamp_id = true,
                      .last = "]}",
                      .last_len = 2,
                      .msg = {"{\"id\":", 6, ",\"ts\":", 6, ",\"edit\":1}", 10}};
    ASSERT_OK(chat_store_change(fx->st, "g", "alice", &ch, &ap, &applied));
    free(cur);
    assert_true(applied);
    assert_int_equal(ap.id, 2);
    char *n = get(fx->st, "g", 1);
    snprintf(want, sizeof(want), "{\"id\":1,\"body\":\"hello\",\"edited\":%lld,\"edits\":[2]}",
             (long long)ap.ts);
    assert_string_equal(n, want);
    free(n);
    free(ap.env);
    /* the id hole needs the time's */
    ch.stamp = false;
    assert_int_equal(chat_store_change(fx->st, "g", "alice", &ch, &ap, &applied), CHAT_EINVAL);
}

/* The tombstone a recall writes over the carrier of an edit of n. */
static void carrier_tombstone(char *buf, size_t cap, uint64_t id, uint64_t n)
{
    snprintf(buf, cap, "{\"id\":%llu,\"edit\":%llu,\"recalled\":true}", (unsigned long long)id,
             (unsigned long long)n);
}

/* A recall of id of group with every message of carriers (k of them, the
 * carriers of its edits) rewritten to its tombstone in the same write, as
 * the plugin's recall does; returns whether it was applied. */
static bool recall_all(chat_store *st, const char *group, uint64_t id, const uint64_t *carriers,
                       size_t k, chat_appended *out)
{
    chat_rewrite rw[CHAT_STORE_REWRITES_MAX];
    char text[CHAT_STORE_REWRITES_MAX][64], before[64], tail[32];
    char *cur = get(st, group, id);
    bool applied = false;
    assert_true(k <= CHAT_STORE_REWRITES_MAX);
    for (size_t i = 0; i < k; i++) {
        carrier_tombstone(text[i], sizeof(text[i]), carriers[i], id);
        char *was = get(st, group, carriers[i]);
        rw[i] = (chat_rewrite){carriers[i], was, strlen(was), text[i], strlen(text[i])};
    }
    snprintf(before, sizeof(before), "{\"id\":%llu,\"recalled\":true}", (unsigned long long)id);
    snprintf(tail, sizeof(tail), ",\"recall\":%llu}", (unsigned long long)id);
    chat_change ch = {.id = id,
                      .expect = cur,
                      .expect_len = strlen(cur),
                      .before = before,
                      .before_len = strlen(before),
                      .rewrites = rw,
                      .nrewrites = k,
                      .msg = {"{\"id\":", 6, ",\"ts\":", 6, tail, strlen(tail)}};
    ASSERT_OK(chat_store_change(st, group, "alice", &ch, out, &applied));
    for (size_t i = 0; i < k; i++) {
        free((char *)rw[i].expect);
    }
    free(cur);
    return applied;
}

/* recall-complete: a recall rewrites N and the carriers of its edits in
 * one write; every read then sees tombstones only. */
static void test_recall_rewrites_carriers(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    chat_page *page = NULL;
    char want[64];

    put(fx->st, "g", "c1", "secret");
    assert_true(change(fx->st, "g", 1, false, "secret two", &ap)); /* 2 */
    free(ap.env);
    put(fx->st, "g", NULL, "other");                                 /* 3 */
    assert_true(change(fx->st, "g", 1, false, "secret three", &ap)); /* 4 */
    free(ap.env);
    const uint64_t carriers[] = {2, 4};
    assert_true(recall_all(fx->st, "g", 1, carriers, 2, &ap));
    assert_int_equal(ap.id, 5);
    free(ap.env);
    ASSERT_OK(chat_store_read_forward(fx->st, "g", 0, 10, 1 << 20, &page));
    assert_int_equal(page->count, 5);
    for (size_t i = 0; i < page->count; i++) {
        assert_null(strstr(page->msgs[i].data, "secret"));
    }
    assert_string_equal(page->msgs[0].data, "{\"id\":1,\"recalled\":true}");
    carrier_tombstone(want, sizeof(want), 2, 1);
    assert_string_equal(page->msgs[1].data, want);
    carrier_tombstone(want, sizeof(want), 4, 1);
    assert_string_equal(page->msgs[3].data, want);
    assert_non_null(strstr(page->msgs[2].data, "other"));
    chat_page_destroy(page);
    /* the same after a reopen (nothing served from memory) */
    chat_store_close(fx->st);
    fx->st = open_store(fx);
    char *c = get(fx->st, "g", 4);
    assert_string_equal(c, want);
    free(c);
}

/* One stale carrier (another broker's write, a caller's old list) and
 * nothing is written: not N, not the others, no M. Bad lists are refused. */
static void test_rewrite_not_applied(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    bool applied = true;
    uint64_t head = 0;

    put(fx->st, "g", NULL, "secret");
    assert_true(change(fx->st, "g", 1, false, "secret two", &ap)); /* 2 */
    free(ap.env);
    put(fx->st, "g", NULL, "three"); /* 3 */
    char *cur = get(fx->st, "g", 1);
    char *two = get(fx->st, "g", 2);
    chat_rewrite rw[2] = {{2, two, strlen(two), "{\"id\":2,\"x\":1}", 14},
                          {3, "{\"id\":3}", 8, "{\"id\":3,\"x\":1}", 14}};
    chat_change ch = {.id = 1,
                      .expect = cur,
                      .expect_len = strlen(cur),
                      .before = "{\"id\":1,\"recalled\":true}",
                      .before_len = 24,
                      .rewrites = rw,
                      .nrewrites = 2,
                      .msg = {"{\"id\":", 6, ",\"ts\":", 6, "}", 1}};
    ASSERT_OK(chat_store_change(fx->st, "g", "alice", &ch, &ap, &applied));
    assert_false(applied); /* 3 does not hold what rw[1] expects */
    ASSERT_OK(chat_store_head(fx->st, "g", &head));
    assert_int_equal(head, 3);
    char *n = get(fx->st, "g", 1), *m = get(fx->st, "g", 2);
    assert_string_equal(n, cur);
    assert_string_equal(m, two);
    free(n);
    free(m);
    /* one above head: not stored, nothing written either */
    rw[1].id = 9;
    ASSERT_OK(chat_store_change(fx->st, "g", "alice", &ch, &ap, &applied));
    assert_false(applied);
    /* not above N, twice, too many: refused */
    rw[1].id = 1;
    assert_int_equal(chat_store_change(fx->st, "g", "alice", &ch, &ap, &applied), CHAT_EINVAL);
    rw[1].id = 2;
    assert_int_equal(chat_store_change(fx->st, "g", "alice", &ch, &ap, &applied), CHAT_EINVAL);
    ch.nrewrites = CHAT_STORE_REWRITES_MAX + 1;
    assert_int_equal(chat_store_change(fx->st, "g", "alice", &ch, &ap, &applied), CHAT_EINVAL);
    ASSERT_OK(chat_store_head(fx->st, "g", &head));
    assert_int_equal(head, 3);
    free(cur);
    free(two);
}

/* Nothing is written when N no longer holds what the caller read (another
 * broker changed it meanwhile), nor for an id that is not stored. */
static void test_not_applied(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    bool applied = true;
    uint64_t head = 0;

    put(fx->st, "g", NULL, "one");
    chat_change ch = {.id = 1,
                      .expect = "{\"id\":1,\"ts\":0,\"body\":\"other\"}",
                      .expect_len = 31,
                      .before = "x",
                      .before_len = 1,
                      .msg = {"{\"id\":", 6, ",\"ts\":", 6, "}", 1}};
    ASSERT_OK(chat_store_change(fx->st, "g", "bob", &ch, &ap, &applied));
    assert_false(applied);
    assert_null(ap.env);
    ch.id = 7; /* above head */
    ASSERT_OK(chat_store_change(fx->st, "g", "bob", &ch, &ap, &applied));
    assert_false(applied);
    ASSERT_OK(chat_store_change(fx->st, "nogroup", "bob", &ch, &ap, &applied));
    assert_false(applied);
    ASSERT_OK(chat_store_head(fx->st, "g", &head));
    assert_int_equal(head, 1);
    char *n = get(fx->st, "g", 1);
    assert_non_null(strstr(n, "\"body\":\"one\""));
    free(n);
    /* Arguments out of range. */
    ch.id = 0;
    assert_int_equal(chat_store_change(fx->st, "g", "bob", &ch, &ap, &applied), CHAT_EINVAL);
    assert_int_equal(chat_store_change(fx->st, "g", "bob", NULL, &ap, &applied), CHAT_EINVAL);
    assert_int_equal(chat_store_change(NULL, "g", "bob", &ch, &ap, &applied), CHAT_EIO);
}

/* A message retention removed cannot be changed (an edit of it is refused
 * as "no such message" by the plugin), and the rewritten copy goes with
 * retention like any message: with it its cid. */
static void test_trimmed(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    uint64_t first = 0, id = 0;
    bool applied = true, found = true;
    char *cid = NULL;

    put(fx->st, "g", "c1", "one");
    put(fx->st, "g", "c2", "two");
    assert_true(change(fx->st, "g", 2, true, NULL, &ap));
    free(ap.env);
    ASSERT_OK(chat_store_trim(fx->st, "g", 2, 100, &first));
    assert_int_equal(first, 2);
    /* N = 1 is gone: a change of it writes nothing. */
    chat_change ch = {.id = 1,
                      .expect = "{\"id\":1}",
                      .expect_len = 8,
                      .before = "x",
                      .before_len = 1,
                      .msg = {"{\"id\":", 6, ",\"ts\":", 6, "}", 1}};
    ASSERT_OK(chat_store_change(fx->st, "g", "bob", &ch, &ap, &applied));
    assert_false(applied);
    ASSERT_OK(chat_store_cid_of(fx->st, "g", 1, &cid, &found));
    assert_false(found);
    assert_null(cid);
    /* Then the tombstone itself, and its cid with it. */
    ASSERT_OK(chat_store_trim(fx->st, "g", 4, 100, &first));
    assert_int_equal(first, 4);
    assert_not_stored(fx->st, "g", 2);
    ASSERT_OK(chat_store_cid_find(fx->st, "g", "alice", "c2", &id, &found));
    assert_false(found);
    ASSERT_OK(chat_store_cid_of(fx->st, "g", 2, &cid, &found));
    assert_false(found);
}

/* cid-reserved: a retry of a recalled message's cid is a duplicate that
 * answers with the tombstone; cid_of still names the cid, which the
 * tombstone does not hold. */
static void test_cid_reserved(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    uint64_t id = 0;
    bool found = false;
    char *cid = NULL;

    put(fx->st, "g", "a-17", "oops");
    assert_true(change(fx->st, "g", 1, true, NULL, &ap));
    free(ap.env);
    chat_envelope env = {"{\"id\":", 6, ",\"ts\":", 6, ",\"body\":\"oops\",\"cid\":\"a-17\"}", 28};
    ASSERT_OK(chat_store_append(fx->st, "g", "alice", "a-17", &env, false, &ap));
    assert_true(ap.duplicate);
    assert_int_equal(ap.id, 1);
    assert_string_equal(ap.env, "{\"id\":1,\"recalled\":true}");
    free(ap.env);
    ASSERT_OK(chat_store_cid_find(fx->st, "g", "alice", "a-17", &id, &found));
    assert_true(found);
    assert_int_equal(id, 1);
    ASSERT_OK(chat_store_cid_of(fx->st, "g", 1, &cid, &found));
    assert_true(found);
    assert_string_equal(cid, "a-17");
    free(cid);
    cid = NULL;
    /* M has none. */
    ASSERT_OK(chat_store_cid_of(fx->st, "g", 2, &cid, &found));
    assert_false(found);
    /* Another sender's cid of the same text is a new message. */
    ASSERT_OK(chat_store_append(fx->st, "g", "bob", "a-17", &env, false, &ap));
    assert_false(ap.duplicate);
    assert_int_equal(ap.id, 3);
    free(ap.env);
}

/* What a change wrote is there after a reopen, and the store's check finds
 * nothing wrong: ids dense, the head M's. */
static void test_reopen_and_check(void **state)
{
    struct cfx *fx = *state;
    chat_appended ap;
    struct problems p = {0};
    uint64_t groups = 0, problems = 0, head = 0;

    put(fx->st, "g", NULL, "one");
    assert_true(change(fx->st, "g", 1, false, "uno", &ap));
    free(ap.env);
    assert_true(change(fx->st, "g", 1, true, NULL, &ap));
    free(ap.env);
    chat_store_close(fx->st);
    fx->st = open_store(fx);
    ASSERT_OK(chat_store_head(fx->st, "g", &head));
    assert_int_equal(head, 3);
    char *n = get(fx->st, "g", 1);
    assert_string_equal(n, "{\"id\":1,\"recalled\":true}");
    free(n);
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
    if (problems) {
        fail_msg("check: %s", p.all);
    }
    assert_int_equal(groups, 1);
}

/* change-atomic: a child process appends and changes messages in a loop
 * (every odd one recalled, every other one edited) and is killed with
 * SIGKILL at a random moment; the store then holds, for each message the
 * child appended, either its first version and no change, or its new
 * version and exactly one message carrying it, and the ids are dense. */
#define KILL_ROUNDS 12
/* A child tells its parent, through a pipe, once it has been round its
 * loop a number of times the parent drew in 1..KILL_AFTER_MAX, and goes
 * on: the kill then lands in the middle of the loop, at a point that
 * varies with the draw, never before the first write (a slow machine),
 * and no test waits on a clock for it. */
#define KILL_AFTER_MAX 64

/* Writes one byte to the parent's pipe, or ends the child. */
static void tell_parent(int ready)
{
    if (write(ready, "w", 1) != 1) {
        _exit(2);
    }
}

/* Waits (at most 30 s) for the child's byte on ready, and closes it. */
static void wait_child(int ready)
{
    struct pollfd pfd = {.fd = ready, .events = POLLIN};
    char c = 0;
    assert_int_equal(poll(&pfd, 1, 30000), 1);
    assert_int_equal(read(ready, &c, 1), 1);
    close(ready);
}

static void child_loop(struct cfx *fx, int ready, int tell_after)
{
    chat_store *st = open_store(fx);
    for (int i = 0; i < 1000000; i++) {
        if (i == tell_after) {
            tell_parent(ready);
        }
        chat_appended ap = {0};
        uint64_t id = put(st, "k", NULL, "v1");
        (void)change(st, "k", id, id % 2 == 1, "v2", &ap);
        free(ap.env);
    }
    chat_store_close(st);
    _exit(0);
}

struct tally {
    uint64_t *changed; /* per id: 0 none, else the id of the message carrying its change */
    bool *version;     /* per id: the message holds its new version */
    bool *carrier;     /* per id: the message carries a change */
    uint64_t n, cap;   /* the last id seen; room in the arrays */
};

static int tally_one(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct tally *t = ctx;
    const char *r = strstr(data, "\"recall\":");
    const char *e = strstr(data, "\"edit\":");
    (void)len;
    if (id >= t->cap) {
        uint64_t cap = t->cap ? 2 * t->cap : 4096;
        while (cap <= id) {
            cap *= 2;
        }
        t->changed = realloc(t->changed, cap * sizeof(*t->changed));
        t->version = realloc(t->version, cap * sizeof(*t->version));
        t->carrier = realloc(t->carrier, cap * sizeof(*t->carrier));
        assert_true(t->changed && t->version && t->carrier);
        memset(t->changed + t->cap, 0, (cap - t->cap) * sizeof(*t->changed));
        memset(t->version + t->cap, 0, (cap - t->cap) * sizeof(*t->version));
        memset(t->carrier + t->cap, 0, (cap - t->cap) * sizeof(*t->carrier));
        t->cap = cap;
    }
    assert_int_equal(id, t->n + 1); /* dense, in order */
    t->n = id;
    if (r || e) {
        uint64_t n = strtoull(r ? r + 9 : e + 7, NULL, 10);
        assert_true(n < id);
        if (t->changed[n] != 0) {
            fail_msg("message %llu is changed by both %llu and %llu", (unsigned long long)n,
                     (unsigned long long)t->changed[n], (unsigned long long)id);
        }
        t->changed[n] = id;
        t->carrier[id] = true;
    } else {
        t->version[id] = strstr(data, "\"recalled\":true") || strstr(data, "\"edited\":");
    }
    return 0;
}

static void test_kill9_both_or_neither(void **state)
{
    struct cfx *fx = *state;
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    uint64_t changes = 0, plain = 0;

    for (int round = 0; round < KILL_ROUNDS; round++) {
        chat_store_close(fx->st);
        fx->st = NULL;
        int ready[2];
        int tell_after = 1 + (int)(rand_r(&seed) % KILL_AFTER_MAX);
        assert_int_equal(pipe(ready), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(ready[0]);
            child_loop(fx, ready[1], tell_after);
        }
        close(ready[1]);
        /* Killed once the child has appended and changed tell_after
         * messages, while it writes the next ones. */
        wait_child(ready[0]);
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        /* killed by us, not crashed on its own */
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        fx->st = open_store(fx);
        /* Every message, read again each round. */
        struct tally t = {0};
        bool more = true;
        for (int i = 0; i < 100000 && more; i++) {
            ASSERT_OK(
                chat_store_scan_forward(fx->st, "k", t.n, 1000, 1 << 22, tally_one, &t, &more));
        }
        assert_false(more);
        changes = plain = 0;
        for (uint64_t id = 1; id <= t.n; id++) {
            if (t.carrier[id]) {
                continue;
            }
            if (t.version[id] != (t.changed[id] != 0)) {
                fail_msg("round %d: message %llu %s", round, (unsigned long long)id,
                         t.version[id] ? "holds a new version but no message carries it"
                                       : "is changed by a message but holds its first version");
            }
            changes += t.changed[id] != 0;
            plain += t.changed[id] == 0;
        }
        free(t.changed);
        free(t.version);
        free(t.carrier);
        struct problems p = {0};
        uint64_t groups = 0, problems = 0;
        ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
        if (problems) {
            fail_msg("round %d: check: %s", round, p.all);
        }
    }
    /* The rounds made changes, and each left at most one message unchanged
     * (appended before the kill came between it and its change). */
    assert_true(changes > 0);
    assert_true(plain <= KILL_ROUNDS);
    print_message("%llu changes, %llu messages left unchanged by a kill\n",
                  (unsigned long long)changes, (unsigned long long)plain);
}

/* recall-complete under SIGKILL: a child appends a message, edits it
 * twice and recalls it with both carriers rewritten, in a loop, and is
 * killed at a random moment; every message then is in one of the states
 * of that sequence (first version; edited with its carriers' texts;
 * recalled with both carriers rewritten and the recall), never a recall
 * beside a carrier that still holds its text. */
static void child_recall_loop(struct cfx *fx, int ready, int tell_after)
{
    chat_store *st = open_store(fx);
    for (int i = 0; i < 1000000; i++) {
        if (i == tell_after) {
            /* tell_after recalls written: the parent's kill now lands mid-loop */
            tell_parent(ready);
        }
        chat_appended ap = {0};
        uint64_t c[2];
        uint64_t id = put(st, "r", NULL, "v1");
        for (int k = 0; k < 2; k++) {
            (void)change(st, "r", id, false, "v2", &ap);
            c[k] = ap.id;
            free(ap.env);
        }
        (void)recall_all(st, "r", id, c, 2, &ap);
        free(ap.env);
    }
    chat_store_close(st);
    _exit(0);
}

/* Per message of the loop: its state, and what names it. */
struct rtally {
    uint64_t n, cap;
    unsigned char *kind; /* 1 plain, 2 edited, 3 tombstone, 4 carrier with text,
                            5 recalled carrier, 6 recall */
    uint64_t *of;        /* carriers and recalls: the message they name */
};

static int rtally_one(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct rtally *t = ctx;
    const char *r = strstr(data, "\"recall\":"), *e = strstr(data, "\"edit\":");
    (void)len;
    if (id >= t->cap) {
        uint64_t cap = t->cap ? 2 * t->cap : 4096;
        while (cap <= id) {
            cap *= 2;
        }
        t->kind = realloc(t->kind, cap);
        t->of = realloc(t->of, cap * sizeof(*t->of));
        assert_true(t->kind && t->of);
        memset(t->kind + t->cap, 0, cap - t->cap);
        memset(t->of + t->cap, 0, (cap - t->cap) * sizeof(*t->of));
        t->cap = cap;
    }
    assert_int_equal(id, t->n + 1);
    t->n = id;
    bool recalled = strstr(data, "\"recalled\":true") != NULL;
    if (r) {
        t->kind[id] = 6;
        t->of[id] = strtoull(r + 9, NULL, 10);
    } else if (e) {
        t->kind[id] = recalled ? 5 : 4;
        t->of[id] = strtoull(e + 7, NULL, 10);
    } else {
        t->kind[id] = recalled ? 3 : strstr(data, "\"edited\":") ? 2 : 1;
    }
    return 0;
}

static void test_kill9_recall_complete(void **state)
{
    struct cfx *fx = *state;
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    uint64_t recalled = 0;

    for (int round = 0; round < KILL_ROUNDS / 2; round++) {
        chat_store_close(fx->st);
        fx->st = NULL;
        int ready[2];
        int tell_after = 1 + (int)(rand_r(&seed) % KILL_AFTER_MAX);
        assert_int_equal(pipe(ready), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(ready[0]);
            child_recall_loop(fx, ready[1], tell_after);
        }
        close(ready[1]);
        /* Killed only once the child has written tell_after recalls, so
         * that no round passes by killing a child that had not started (a
         * slow machine), while it writes the next ones. */
        wait_child(ready[0]);
        assert_int_equal(kill(pid, SIGKILL), 0);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        fx->st = open_store(fx);
        struct rtally tt = {0}, *t = &tt;
        bool more = true;
        for (int i = 0; i < 100000 && more; i++) {
            ASSERT_OK(
                chat_store_scan_forward(fx->st, "r", t->n, 1000, 1 << 22, rtally_one, t, &more));
        }
        assert_false(more);
        /* For each N: its carriers' states must match N's. */
        recalled = 0;
        for (uint64_t id = 1; id <= t->n; id++) {
            if (t->kind[id] < 4) {
                continue;
            }
            uint64_t n = t->of[id];
            assert_true(n < id);
            unsigned char k = t->kind[n];
            bool ok = t->kind[id] == 4 ? k == 2 : k == 3;
            if (!ok) {
                fail_msg("round %d: message %llu (kind %d) names %llu of kind %d", round,
                         (unsigned long long)id, t->kind[id], (unsigned long long)n, k);
            }
            recalled += t->kind[id] == 6;
        }
        /* a tombstone has its recall, and then no carrier of it holds text
         * (checked above: a carrier with text names an edited version) */
        for (uint64_t id = 1; id <= t->n; id++) {
            if (t->kind[id] == 3) {
                bool found = false;
                for (uint64_t j = id + 1; j <= t->n && j <= id + 4 && !found; j++) {
                    found = t->kind[j] == 6 && t->of[j] == id;
                }
                if (!found) {
                    fail_msg("round %d: message %llu is recalled but no recall follows", round,
                             (unsigned long long)id);
                }
            }
        }
        free(t->kind);
        free(t->of);
        struct problems p = {0};
        uint64_t groups = 0, problems = 0;
        ASSERT_OK(chat_store_check(fx->st, collect_problem, &p, &groups, &problems));
        if (problems) {
            fail_msg("round %d: check: %s", round, p.all);
        }
    }
    assert_true(recalled > 0);
    print_message("%llu recalls with their carriers rewritten\n", (unsigned long long)recalled);
}

int main(int argc, char **argv)
{
    on_pg = argc > 1 && strcmp(argv[1], "postgresql") == 0;
    if (on_pg) {
        const char *port = getenv("CHAT_TEST_PG_PORT");
        if (!port || !port[0]) {
            printf("SKIP: CHAT_TEST_PG_PORT is not set (scripts/test pg sets it)\n");
            return 77;
        }
    }
#define CXCASE(f) cmocka_unit_test_setup_teardown(f, cx_setup, cx_teardown)
    const struct CMUnitTest tests[] = {
        CXCASE(test_recall_rewrites_and_appends),
        CXCASE(test_edit_stamps_version),
        CXCASE(test_change_read_by_sender),
        CXCASE(test_not_applied),
        CXCASE(test_trimmed),
        CXCASE(test_cid_reserved),
        CXCASE(test_reopen_and_check),
        CXCASE(test_kill9_both_or_neither),
        CXCASE(test_edit_stamps_id),
        CXCASE(test_recall_rewrites_carriers),
        CXCASE(test_rewrite_not_applied),
        CXCASE(test_kill9_recall_complete),
    };
    return cmocka_run_group_tests_name(on_pg ? "store_change postgresql" : "store_change leveldb",
                                       tests, NULL, NULL);
}
