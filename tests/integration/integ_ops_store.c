/* integ_ops_store: issue 12, copies of the store and the offline tool,
 * against a real broker and store, one case per argument (ctest
 * integ_ops_<case>):
 *
 *   backup    admin backup, then a restore: the same messages, ids and
 *             cursors, a new incarnation
 *   backup_live  a backup while a member publishes: one moment of the
 *             store, which checks clean
 *   offline   mqchat-store check on a good store, on a running broker's, on
 *             a damaged one; repair; export and import give the same group
 *   tool      mqchat-store's errors: a path without a store (only import
 *             makes one), export of a group that is not there, an import
 *             that fails at a line writes nothing and can be run again
 *
 * With CHAT_TEST_PG_PORT (scripts/test's pg stage) the broker's store is
 * PostgreSQL and every case runs against it, mqchat-store with --store
 * postgresql and the broker's connection string. Where the backends differ
 * by design the case says so: a backup of PostgreSQL is a LevelDB store,
 * restored by starting the broker on it with `store leveldb`; check may run
 * while the broker does (it reads one snapshot); the damage is a row
 * changed behind the store's back, and repair and import are refused.
 */
#include "integ_ops.h"

#include "pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ===========================================================================
 * backup
 * ========================================================================= */

static void case_backup(void)
{
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins alice", NULL},
                           .users = ts_test_users,
                           .after =
                               (const char *const[]){"plugin_opt_backup_dir @DIR@/backups", NULL}};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client *alice = ops_user(b, "alice-cli", "alice");
    harness_client *bob = ops_user(b, "bob-phone", "bob");
    harness_client *carol = ops_user(b, "carol-phone", "carol");
    char body[64], path[600], db[600], before[64], after[64];
    cJSON *resp = NULL;
    const cJSON *e;

    harness_client_subscribe(carol, "chat/room1", 1);
    for (int i = 1; i <= 20; i++) {
        snprintf(body, sizeof body, "{\"body\":\"m%d\",\"cid\":\"c%d\"}", i, i);
        harness_client_publish(bob, "chat/room1", body, 1);
    }
    harness_ack(carol, "room1", 7, 1);
    ASSERT(ops_synced(carol, "room1", before, sizeof before) == 7);
    e = ops_ask(alice, "{\"command\":\"backup\"}", &resp);
    harness_expect_ok(e, "backup", NULL);
    snprintf(path, sizeof path, "%s", harness_json_str(e, "path"));
    ASSERTF(!strncmp(path, ts_broker_dir(b), strlen(ts_broker_dir(b))),
            "backup outside backup_dir: %s", path);
    cJSON_Delete(resp);
    ASSERT(!strcmp(ops_wait_job(alice), "done"));
    /* After the backup: not in it. */
    for (int i = 21; i <= 25; i++) {
        harness_client_publish(bob, "chat/room1", "later", 1);
    }
    harness_ack(carol, "room1", 25, 1);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    harness_client_disconnect(carol);
    ts_broker_stop(b);

    ASSERTF(ops_store_tool("check", path, NULL, NULL, NULL) == 0,
            "the backup does not check clean");
    /* Restore: the backup becomes the store. A PostgreSQL store's backup
     * is a LevelDB store too (pg_job.h): the broker starts on it. */
    snprintf(db, sizeof db, "%s", ts_broker_db_path(b));
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mv '%s' '%s'", db, path, db);
    ASSERT(system(cmd) == 0);
    if (ops_on_pg(b)) {
        ts_log("the PostgreSQL store's backup restored into a broker on LevelDB");
        ts_broker_set_opts(b, (const char *const[]){"admins alice", "store leveldb", NULL});
    }
    ts_broker_restart(b);
    bob = ops_user(b, "bob-phone", "bob");
    carol = ops_user(b, "carol-phone", "carol");
    harness_expect_store(bob, "room1", 20);
    ASSERT(ops_synced(carol, "room1", after, sizeof after) == 7);
    ASSERTF(strcmp(before, after) != 0, "a restored backup keeps the incarnation %s", after);
    /* cids came along: a retry of message 5 is recognised. */
    harness_client_publish(bob, "chat/room1", "{\"body\":\"m5\",\"cid\":\"c5\"}", 1);
    harness_client_publish(bob, "chat/room1", "new", 1);
    harness_expect_store(bob, "room1", 21);
    harness_client_disconnect(bob);
    harness_client_disconnect(carol);
    ts_broker_destroy(b);
}

#define LIVE 3000

static void case_backup_live(void)
{
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins alice", NULL},
                           .users = ts_test_users,
                           .after =
                               (const char *const[]){"plugin_opt_backup_dir @DIR@/backups", NULL}};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client *alice = ops_user(b, "alice-cli", "alice");
    harness_client *bob = ops_user(b, "bob-phone", "bob");
    harness_ticket last = {0};
    char body[64], path[600], out[700];
    cJSON *resp = NULL;

    harness_client_set_window(bob, 200);
    for (int i = 1; i <= LIVE; i++) {
        snprintf(body, sizeof body, "{\"body\":\"m%d\",\"cid\":\"c%d\"}", i, i);
        ASSERT(harness_client_publish_async(bob, "chat/room1", body, 1, &last) == 0);
        if (i == LIVE / 3) {
            /* at least LIVE / 3 - 200 are stored: the rest of the window */
            const cJSON *e = ops_ask(alice, "{\"command\":\"backup\"}", &resp);
            harness_expect_ok(e, "backup", NULL);
            snprintf(path, sizeof path, "%s", harness_json_str(e, "path"));
            cJSON_Delete(resp);
        }
    }
    ASSERT(!strcmp(ops_wait_job(alice), "done"));
    harness_client_wait_acked(bob, last, 30000);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_stop(b);

    /* Dense ids up to a head that is the highest id stored: no message read
     * after the head was, none missing below it. */
    snprintf(out, sizeof out, "%s/check.out", ts_broker_dir(b));
    ASSERTF(ops_store_tool("check", path, NULL, NULL, out) == 0, "the backup does not check clean");
    snprintf(out, sizeof out, "%s/room1.jsonl", ts_broker_dir(b));
    ASSERT(ops_store_tool("export", path, "room1", NULL, out) == 0);
    char *text = ts_read_file(out, NULL);
    const char *h = strstr(text, "\"head\":");
    long long head = h ? strtoll(h + 7, NULL, 10) : -1;
    ASSERTF(head >= LIVE / 3 - 200 && head <= LIVE, "the backup's head is %lld", head);
    free(text);
    ASSERT(ops_broker_store_tool(b, "check", NULL, NULL, NULL) == 0);
    ts_log("a backup taken mid-stream holds ids 1..%lld and checks clean", head);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * offline
 * ========================================================================= */

static void corrupt_log(const char *db)
{
    char cmd[800], path[600] = "";
    FILE *p;
    snprintf(cmd, sizeof cmd, "ls %s/*.log | head -1", db);
    if ((p = popen(cmd, "r")) != NULL) {
        if (fgets(path, sizeof path, p) == NULL) {
            path[0] = '\0';
        }
        pclose(p);
    }
    path[strcspn(path, "\n")] = '\0';
    ASSERTF(path[0] != '\0', "no write-ahead log in the store");
    size_t len = 0;
    char *bytes = ts_read_file(path, &len);
    ASSERT(len > 1000);
    bytes[len / 2] = (char)~bytes[len / 2];
    ts_write_file(path, bytes, len);
    free(bytes);
}

static void expect_checked(const char *out, const char *line)
{
    char *text = ts_read_file(out, NULL);
    ASSERTF(strstr(text, line) != NULL, "check said: %s", text);
    free(text);
}

/* Rows changed behind the store's back: check names each problem; repair
 * and import are refused with PostgreSQL's tools named. */
static void damage_pg(const ts_broker *b, const char *out, const char *jsonl)
{
    const char *ci = ts_broker_pg_conninfo(b);
    ts_pg_run((const char *const[]){"sql", ci,
                                    "DELETE FROM chat_messages WHERE grp = 'room2' AND id = 5; "
                                    "UPDATE chat_cursors SET acked = 99 WHERE grp = 'room1'; "
                                    "UPDATE chat_groups SET first = 40 WHERE grp = 'room1'",
                                    NULL},
              NULL);
    ASSERT(ops_broker_store_tool(b, "check", NULL, NULL, out) == 1);
    expect_checked(out, "group room2: messages 5 to 5 are missing");
    expect_checked(out, "group room1: the cursor of alice/alice is 99, above head 1");
    expect_checked(out, "group room1: the cursor of alice/alice (99) is above the maximum cursor");
    expect_checked(out, "group room1: first (40) is above head + 1 (2)");
    expect_checked(out, "2 groups checked, 5 problems");
    ASSERT(ops_broker_store_tool(b, "repair", NULL, NULL, NULL) == 1);
    ASSERT(ops_broker_store_tool(b, "import", NULL, jsonl, NULL) == 1);
    ts_log("check on PostgreSQL found the damage; repair and import refused");
}

static void case_offline(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    char out[600], out2[600], in[600], copy[600], before[64], after[64];
    const char *db = ts_broker_db_path(b);

    harness_client_subscribe(alice, "chat/room1", 1);
    for (int i = 0; i < 30; i++) {
        harness_client_publish(alice, "chat/room1", "{\"body\":\"kept\",\"cid\":\"x\"}", 1);
        harness_client_publish(alice, "chat/room2", "text", 1);
    }
    harness_ack(alice, "room1", 1, 1);
    ASSERT(ops_synced(alice, "room1", before, sizeof before) == 1);
    snprintf(out, sizeof out, "%s/check.out", ts_broker_dir(b));
    if (ops_on_pg(b)) {
        /* A database: check reads one snapshot while the broker runs. */
        ASSERT(ops_broker_store_tool(b, "check", NULL, NULL, out) == 0);
        expect_checked(out, "2 groups checked, 0 problems");
    } else {
        /* While the broker runs, the tool is refused. */
        ASSERT(ops_store_tool("check", db, NULL, NULL, NULL) == 1);
    }
    harness_client_disconnect(alice);
    ts_broker_stop(b);

    ASSERT(ops_broker_store_tool(b, "check", NULL, NULL, out) == 0);
    expect_checked(out, "2 groups checked, 0 problems");

    /* export, import into a new store, export again: the same lines. */
    snprintf(in, sizeof in, "%s/room1.jsonl", ts_broker_dir(b));
    snprintf(copy, sizeof copy, "%s/copy", ts_broker_dir(b));
    snprintf(out2, sizeof out2, "%s/room1-copy.jsonl", ts_broker_dir(b));
    ASSERT(ops_broker_store_tool(b, "export", "room1", NULL, in) == 0);
    ASSERT(ops_store_tool("import", copy, NULL, in, NULL) == 0);
    ASSERT(ops_store_tool("import", copy, NULL, in, NULL) == 1); /* the group is there */
    ASSERT(ops_store_tool("export", copy, "room1", NULL, out2) == 0);
    char *a = ts_read_file(in, NULL), *c = ts_read_file(out2, NULL);
    const char *la = strchr(a, '\n'), *lc = strchr(c, '\n');
    ASSERT(la && lc && !strcmp(la, lc)); /* all but the group line (its incarnation) */
    ASSERT(strstr(a, "\"type\":\"cursor\",\"member\":\"alice\",\"device\":\"alice\",\"acked\":1"));
    free(a);
    free(c);
    ASSERT(ops_store_tool("check", copy, NULL, NULL, NULL) == 0);
    if (ops_on_pg(b)) {
        damage_pg(b, out, in);
        ts_broker_destroy(b);
        return;
    }

    /* A damaged store: check says so; repair; check clean; new incarnation. */
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    for (int i = 0; i < 30; i++) {
        harness_client_publish(alice, "chat/room2", "in the log only", 1);
    }
    harness_client_destroy(alice);
    ts_broker_kill(b);
    corrupt_log(db);
    ASSERT(ops_store_tool("check", db, NULL, NULL, out) == 1);
    ASSERT(ops_store_tool("repair", db, NULL, NULL, out) == 0);
    ASSERT(ops_store_tool("check", db, NULL, NULL, out) == 0);
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    ops_synced(alice, "room1", after, sizeof after);
    ASSERTF(strcmp(before, after) != 0, "a repaired store keeps its incarnation");
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * tool
 * ========================================================================= */

/* Fails unless the text of file holds want. */
static void expect_in_file(const char *file, const char *want)
{
    char *text = ts_read_file(file, NULL);
    ASSERTF(strstr(text, want) != NULL, "%s says: %s (expected %s)", file, text, want);
    free(text);
}

/* Each command but import on a path without a store: exit 1, the path
 * named on stderr, nothing created there. */
static void expect_no_store(const char *path, const char *err, bool dir_exists)
{
    static const char *const cmds[][2] = {
        {"check", NULL}, {"export", "room1"}, {"compact", NULL}, {"repair", NULL}};
    char current[700];
    snprintf(current, sizeof current, "%s/CURRENT", path);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int status = ops_store_tool_err(cmds[i][0], path, cmds[i][1], NULL, NULL, err);
        ASSERTF(status == 1, "%s on %s: exit %d", cmds[i][0], path, status);
        expect_in_file(err, path);
        ASSERTF(access(dir_exists ? current : path, F_OK) != 0, "%s made a store at %s", cmds[i][0],
                path);
    }
}

static void case_tool(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    char out[600], err[600], in[600], bad[700], cut[700], copy[600], path[600];

    for (int i = 0; i < 3; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "{\"body\":\"hi\",\"cid\":\"c%d\"}", i);
        harness_client_publish(alice, "chat/room1", msg, 1);
    }
    harness_client_publish(alice, "chat/room2", "two", 1);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    snprintf(out, sizeof out, "%s/out", ts_broker_dir(b));
    snprintf(err, sizeof err, "%s/err", ts_broker_dir(b));

    /* A group that is not in the store: an error, no group line. */
    ASSERT(ops_broker_store_tool(b, "export", "nosuch", NULL, out) == 1);
    char *text = ts_read_file(out, NULL);
    ASSERTF(text[0] == '\0', "export of a missing group printed: %s", text);
    free(text);

    /* A path without a store, missing or an empty directory. */
    snprintf(path, sizeof path, "%s/missing", ts_broker_dir(b));
    expect_no_store(path, err, false);
    expect_in_file(err, "no such store directory");
    snprintf(path, sizeof path, "%s/empty", ts_broker_dir(b));
    ASSERT(mkdir(path, 0700) == 0);
    expect_no_store(path, err, true);
    expect_in_file(err, "no store in this directory");

    /* An import that fails at its last line writes nothing, not even the
     * group before it (room2); run again with the line mended, it goes in. */
    snprintf(in, sizeof in, "%s/two.jsonl", ts_broker_dir(b));
    snprintf(bad, sizeof bad, "%s/bad.jsonl", ts_broker_dir(b));
    snprintf(copy, sizeof copy, "%s/copy", ts_broker_dir(b));
    ASSERT(ops_broker_store_tool(b, "export", "room2", NULL, out) == 0);
    ASSERT(ops_broker_store_tool(b, "export", "room1", NULL, in) == 0);
    char *r2 = ts_read_file(out, NULL), *r1 = ts_read_file(in, NULL);
    size_t cap = strlen(r1) + strlen(r2) + 200;
    char *all = malloc(cap);
    ASSERT(all);
    snprintf(all, cap, "%s%s", r2, r1);
    ts_write_file(in, all, strlen(all));
    snprintf(all, cap, "%s%s{\"type\":\"message\",\"id\":4}\n", r2, r1);
    ts_write_file(bad, all, strlen(all));
    /* An export cut short before room1's last message: its group line says
     * a head the messages do not reach, and importing it would give that
     * id again. */
    char *last = strstr(r1, "{\"type\":\"message\",\"id\":3,");
    ASSERT(last);
    snprintf(all, cap, "%s%.*s", r2, (int)(last - r1), r1);
    snprintf(cut, sizeof cut, "%s/cut.jsonl", ts_broker_dir(b));
    ts_write_file(cut, all, strlen(all));
    free(all);
    free(r1);
    free(r2);
    ASSERT(ops_store_tool_err("import", copy, NULL, cut, NULL, err) == 1);
    expect_in_file(err, "its messages end at 2 but its line says head 3");
    ASSERT(ops_store_tool_err("import", copy, NULL, bad, NULL, err) == 1);
    expect_in_file(err, "line ");
    ASSERT(ops_store_tool("export", copy, "room1", NULL, NULL) == 1);
    ASSERT(ops_store_tool("export", copy, "room2", NULL, NULL) == 1);
    ASSERT(ops_store_tool("check", copy, NULL, NULL, out) == 0);
    expect_in_file(out, "0 groups checked, 0 problems");
    ASSERT(ops_store_tool("import", copy, NULL, in, NULL) == 0);
    ASSERT(ops_store_tool("check", copy, NULL, NULL, out) == 0);
    expect_in_file(out, "2 groups checked, 0 problems");
    ASSERT(ops_store_tool("export", copy, "room1", NULL, out) == 0);
    expect_in_file(out, "{\"type\":\"message\",\"id\":3,");
    ts_log("mqchat-store: no store made by check/export/compact/repair; a failed import wrote "
           "nothing, and ran again");
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"backup", case_backup},
    {"backup_live", case_backup_live},
    {"offline", case_offline},
    {"tool", case_tool},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_ops_", cases, sizeof cases / sizeof cases[0]);
}
