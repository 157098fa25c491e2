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
 *   tool_import_validates  issue 21, item 9: import refuses what the broker
 *             never would store, one bad line per rule, each with its line
 *             number and reason, writing nothing; a good export (a \u0000
 *             and a 30-digit number in it, a group named ~room) comes back
 *             byte for byte, but for the new store's incarnation
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

#include <errno.h>
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
    ASSERTF(ts_remove_tree(db, 8) == 0, "cannot remove %s: %s", db, strerror(errno));
    ASSERTF(rename(path, db) == 0, "cannot move %s to %s: %s", path, db, strerror(errno));
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
    harness_expect_duplicate(bob, "room1", "c5", 5, WAIT_MS);
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
    char path[600];
    ASSERTF(ts_find_file(db, ".log", false, path, sizeof path), "no write-ahead log in the store");
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
        if (i > 0)
            harness_expect_duplicate(alice, "room1", "x", 1, WAIT_MS);
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

/* ===========================================================================
 * tool_import_validates
 * ========================================================================= */

/* The group every bad case starts from: a line each of its kinds, all of
 * them good; a case puts its bad line in place of one (at, 1-based), or
 * after them (at 6). */
static const char *const base_lines[5] = {
    "{\"type\":\"group\",\"group\":\"g9\",\"head\":2,\"first\":1,\"incarnation\":\"x\"}",
    "{\"type\":\"member\",\"member\":\"alice\",\"joined\":0}",
    "{\"type\":\"message\",\"id\":1,\"envelope\":{\"id\":1,\"group\":\"g9\",\"from\":"
    "\"alice\",\"ts\":1000,\"body\":\"hi\"}}",
    "{\"type\":\"message\",\"id\":2,\"envelope\":{\"id\":2,\"group\":\"g9\",\"from\":"
    "\"alice\",\"ts\":1001,\"cid\":\"c1\",\"body\":\"ho\"}}",
    "{\"type\":\"cursor\",\"member\":\"alice\",\"device\":\"phone\",\"acked\":2,\"used\":"
    "1000}",
};

/* A message line of g9 with id 2 around an envelope's text after its id. */
#define MSG2(rest) "{\"type\":\"message\",\"id\":2,\"envelope\":{\"id\":2," rest "}}"

/* One rule each: where the bad line goes, the line, what stderr says. */
struct bad_line_case {
    int at;
    const char *line;
    const char *why;
};

static const struct bad_line_case bad_lines[] = {
    /* the group's name, by the plugin's own rule */
    {1, "{\"type\":\"group\",\"group\":\"a/b\",\"head\":2,\"first\":1}",
     "group: group name contains one of / + # $"},
    {1, "{\"type\":\"group\",\"group\":\"a+b\",\"head\":2,\"first\":1}",
     "group: group name contains one of / + # $"},
    {1, "{\"type\":\"group\",\"group\":\"a#b\",\"head\":2,\"first\":1}",
     "group: group name contains one of / + # $"},
    {1, "{\"type\":\"group\",\"group\":\"$g\",\"head\":2,\"first\":1}",
     "group: group name contains one of / + # $"},
    {1, "{\"type\":\"group\",\"group\":\"a\\u0001b\",\"head\":2,\"first\":1}",
     "group: group name contains a control character"},
    {1, "{\"type\":\"group\",\"group\":\"g\\u0000\",\"head\":2,\"first\":1}",
     "group: group name contains a control character"},
    {1, "{\"type\":\"group\",\"group\":\"\\ud800g\",\"head\":2,\"first\":1}",
     "a \\u escape that is no character (a lone surrogate)"},
    {1, "{\"type\":\"group\",\"group\":\"\",\"head\":2,\"first\":1}", "group: group name is empty"},
    /* members */
    {2, "{\"type\":\"member\",\"member\":\"\",\"joined\":0}", "member: member name is empty"},
    {2, "{\"type\":\"member\",\"member\":\"al\\nice\",\"joined\":0}",
     "member: member name contains a control character"},
    {2, "{\"type\":\"member\",\"member\":\"alice\\u0000\",\"joined\":0}",
     "member: member name contains a control character"},
    {2, "{\"type\":\"member\",\"member\":\"alice\",\"joined\":3}",
     "a member's joined is above the group's head"},
    {6, "{\"type\":\"member\",\"member\":\"alice\",\"joined\":1}",
     "group g9: member alice is on line"},
    /* envelopes: the plugin's shape, the line's id and the lines' group */
    {4, MSG2("\"group\":\"g8\",\"from\":\"alice\",\"ts\":1001"),
     "the envelope's group is not the group of its lines"},
    {4,
     "{\"type\":\"message\",\"id\":2,\"envelope\":{\"id\":3,\"group\":\"g9\",\"from\":"
     "\"alice\",\"ts\":1}}",
     "the envelope's id is not its line's"},
    {4, MSG2("\"group\":\"g9/x\",\"from\":\"alice\",\"ts\":1001"),
     "envelope \"group\": group name contains one of / + # $"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"al\\u0007ice\",\"ts\":1001"),
     "envelope \"from\": member name contains a control character"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"\",\"ts\":1001"),
     "envelope \"from\": member name is empty"},
    {4, MSG2("\"group\":\"g9\",\"ts\":1001"),
     "envelope \"from\": envelope has no \"from\" after its group"},
    {4, MSG2("\"group\":\"g9\",\"from\":7,\"ts\":1001"),
     "envelope \"from\": envelope \"from\" must be a string"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":-5"),
     "envelope \"ts\": envelope ts must be an integer from 0 to 9007199254740991"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":1.5"),
     "envelope \"ts\": envelope ts must be an integer from 0 to 9007199254740991"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\""),
     "envelope \"ts\": envelope has no \"ts\" after its sender"},
    {4,
     "{\"type\":\"message\",\"id\":2,\"envelope\":{\"group\":\"g9\",\"id\":2,\"from\":"
     "\"alice\",\"ts\":1}}",
     "envelope \"id\": envelope does not begin with {\"id\":"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":1001,\"id\":9"),
     "envelope \"id\": envelope has the key \"id\" more than once"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":1001,\"\\u0066rom\":\"bob\""),
     "envelope \"from\": envelope has the key \"from\" more than once"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":1001,\"cid\":\"a\",\"cid\":\"b\""),
     "envelope \"cid\": envelope has the key \"cid\" more than once"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":1001,\"cid\":7"),
     "envelope \"cid\": cid must be a string of 1 to 64 bytes"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":1001,\"cid\":\"\""),
     "envelope \"cid\": cid must be a string of 1 to 64 bytes"},
    {4, MSG2("\"group\":\"g9\",\"from\":\"alice\",\"ts\":1001,\"n\":01"), "not strict JSON"},
    /* cursors */
    {5,
     "{\"type\":\"cursor\",\"member\":\"alice\",\"device\":\"ph\\tone\",\"acked\":2,"
     "\"used\":1}",
     "device: device name contains a control character"},
    {5, "{\"type\":\"cursor\",\"member\":\"alice\",\"device\":\"\",\"acked\":2,\"used\":1}",
     "device: device name is empty"},
    {5,
     "{\"type\":\"cursor\",\"member\":\"alice\",\"device\":\"phone\",\"acked\":3,"
     "\"used\":1}",
     "a cursor's acked is above the group's head"},
    {5, "{\"type\":\"cursor\",\"member\":\"bob\",\"device\":\"phone\",\"acked\":2,\"used\":1}",
     "group g9: a cursor of bob, who is on no member line before it"},
};

/* Writes good (a whole export) then g9's lines, bad (not NULL) in place of
 * line at (or after the five: at 6), to path. */
static void write_case(const char *path, const char *good, int at, const char *bad)
{
    size_t cap = strlen(good) + (bad ? strlen(bad) : 0) + 2048;
    char *all = malloc(cap);
    ASSERT(all);
    size_t n = (size_t)snprintf(all, cap, "%s", good);
    for (int i = 1; i <= 6; i++) {
        const char *line = i == at && bad ? bad : i <= 5 ? base_lines[i - 1] : NULL;
        if (line) {
            n += (size_t)snprintf(all + n, cap - n, "%s\n", line);
        }
    }
    ts_write_file(path, all, n);
    free(all);
}

/* A name of n bytes of c, as a JSON string's text. */
static char *long_name(char c, size_t n)
{
    char *s = malloc(n + 1);
    ASSERT(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* Imports path into copy: refused (exit 1), stderr saying "line N: why",
 * and neither group of it in copy. */
static void expect_refused(const char *copy, const char *path, const char *err, int line,
                           const char *why)
{
    char want[600];
    ASSERTF(ops_store_tool_err("import", copy, NULL, path, NULL, err) == 1,
            "an import with a bad line %d (%s) was not refused", line, why);
    snprintf(want, sizeof want, "line %d: %s", line, why);
    expect_in_file(err, want);
    ASSERT(ops_store_tool("export", copy, "room1", NULL, NULL) == 1);
    ASSERT(ops_store_tool("export", copy, "g9", NULL, NULL) == 1);
}

static void case_tool_import_validates(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    char good[600], in[600], err[600], copy[600], out[600], bad[2400];

    /* What a client can make the broker store: a \u0000 and a number of
     * 30 digits kept as sent, a cid; and a group whose name begins with ~,
     * which the protocol's rule allows and the broker stores. */
    harness_client_subscribe(alice, "chat/room1", 1);
    harness_client_publish(alice, "chat/room1", "{\"body\":\"a\\u0000b\",\"cid\":\"c\\u0000d\"}",
                           1);
    harness_client_publish(alice, "chat/room1", "{\"n\":123456789012345678901234567890}", 1);
    harness_client_publish(alice, "chat/room1", "plain text", 1);
    harness_client_publish(alice, "chat/~room", "tilde", 1);
    harness_ack(alice, "room1", 3, 1);
    harness_expect_store(alice, "~room", 1);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    snprintf(good, sizeof good, "%s/good.jsonl", ts_broker_dir(b));
    snprintf(in, sizeof in, "%s/in.jsonl", ts_broker_dir(b));
    snprintf(err, sizeof err, "%s/err", ts_broker_dir(b));
    snprintf(out, sizeof out, "%s/out", ts_broker_dir(b));
    snprintf(copy, sizeof copy, "%s/copy", ts_broker_dir(b));
    ASSERT(ops_broker_store_tool(b, "export", "room1", NULL, good) == 0);
    char *exported = ts_read_file(good, NULL);
    int lines = 0;
    for (const char *p = exported; (p = strchr(p, '\n')) != NULL; p++) {
        lines++;
    }
    ASSERTF(strstr(exported, "a\\u0000b") && strstr(exported, "123456789012345678901234567890"),
            "the export lost what the broker stored: %s", exported);

    /* One bad line per rule, after a good group: the whole input refused
     * at that line, nothing of either group written. */
    for (size_t i = 0; i < sizeof bad_lines / sizeof bad_lines[0]; i++) {
        write_case(in, exported, bad_lines[i].at, bad_lines[i].line);
        expect_refused(copy, in, err, lines + bad_lines[i].at, bad_lines[i].why);
    }
    /* names too long: a group of 1,000 bytes, a member of 1,025 */
    char *name = long_name('g', 1000);
    snprintf(bad, sizeof bad, "{\"type\":\"group\",\"group\":\"%s\",\"head\":2,\"first\":1}", name);
    write_case(in, exported, 1, bad);
    expect_refused(copy, in, err, lines + 1, "group: group name is longer than 128 bytes");
    free(name);
    name = long_name('m', 1025);
    snprintf(bad, sizeof bad, "{\"type\":\"member\",\"member\":\"%s\",\"joined\":0}", name);
    write_case(in, exported, 2, bad);
    expect_refused(copy, in, err, lines + 2, "member: member name is longer than 1024 bytes");
    free(name);
    /* raw bytes that are not UTF-8 */
    write_case(in, exported, 2, "{\"type\":\"member\",\"member\":\"al\xffice\",\"joined\":0}");
    expect_refused(copy, in, err, lines + 2, "not valid UTF-8");
    ts_log("%zu bad lines refused, each at its line, nothing written",
           sizeof bad_lines / sizeof bad_lines[0] + 3);

    /* The good input goes in; the broker's group comes back byte for byte
     * (the envelopes as stored, not printed again), and the group ~room. */
    write_case(in, exported, 0, NULL);
    ASSERT(ops_store_tool_err("import", copy, NULL, in, NULL, err) == 0);
    ASSERT(ops_store_tool("export", copy, "room1", NULL, out) == 0);
    /* (the group line's incarnation is the new store's) */
    char *again = ts_read_file(out, NULL);
    ASSERTF(strcmp(strchr(again, '\n'), strchr(exported, '\n')) == 0,
            "export after import:\n%s\nbefore:\n%s", again, exported);
    free(again);
    ASSERT(ops_store_tool("export", copy, "g9", NULL, NULL) == 0);
    ASSERT(ops_broker_store_tool(b, "export", "~room", NULL, good) == 0);
    snprintf(copy, sizeof copy, "%s/copy2", ts_broker_dir(b));
    ASSERT(ops_store_tool("import", copy, NULL, good, NULL) == 0);
    ASSERT(ops_store_tool("check", copy, NULL, NULL, out) == 0);
    expect_in_file(out, "1 groups checked, 0 problems");
    free(exported);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"backup", case_backup},
    {"backup_live", case_backup_live},
    {"offline", case_offline},
    {"tool", case_tool},
    {"tool_import_validates", case_tool_import_validates},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_ops_", cases, sizeof cases / sizeof cases[0]);
}
