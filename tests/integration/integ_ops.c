/* integ_ops: issue 12, operating the plugin, against a real broker and
 * store. One case per argument:
 *
 *   figures   $SYS/broker/chat/... rise by exactly what was stored, refused,
 *             acked and created; retained, with the write latency figures
 *   admin     each admin command for an admin and the error for anyone else
 *   delete    a deletion answers at once, stops the group's catch-ups and
 *             finishes in the background; the store checks clean after
 *   expiry    device_expiry_days with the plugin's clock moved 91 days on
 *             (MOSQUITTO_CHAT_TEST_CLOCK_SHIFT): 0 keeps, 90 drops the old
 *             device and keeps the member's place
 *   backup    admin backup, then a restore: the same messages, ids and
 *             cursors, a new incarnation
 *   backup_live  a backup while a member publishes: one moment of the
 *             store, which checks clean
 *   offline   mqchat-store check on a good store, on a running broker's, on
 *             a damaged one; repair; export and import give the same group
 *
 * With CHAT_TEST_PG_PORT (scripts/test's pg stage) the broker's store is
 * PostgreSQL and every case runs against it, mqchat-store with --store
 * postgresql and the broker's connection string. Where the backends differ
 * by design the case says so: a backup of PostgreSQL is a LevelDB store,
 * restored by starting the broker on it with `store leveldb`; check may run
 * while the broker does (it reads one snapshot); the damage is a row
 * changed behind the store's back, and repair and import are refused.
 */
#include "harness.h"
#include "pg.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 10000
#define DAY_S 86400

/* ===========================================================================
 * Helpers
 * ========================================================================= */

/* Runs argv (a path) with stdin from in (NULL: /dev/null) and stdout to out
 * (NULL: /dev/null), waits at most 60 s; returns its exit status. */
static int run(const char *const *argv, const char *in, const char *out)
{
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int fi = open(in ? in : "/dev/null", O_RDONLY);
        int fo = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fi < 0 || fo < 0) {
            _exit(127);
        }
        dup2(fi, 0);
        dup2(fo, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 6000; i++) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            ASSERTF(WIFEXITED(status), "%s did not exit normally", argv[0]);
            return WEXITSTATUS(status);
        }
        ts_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    FAILF("%s %s did not finish in 60 s", argv[0], argv[1]);
}

/* mqchat-store <cmd> <db> [arg]; stdout to out. */
static int store_tool(const char *cmd, const char *db, const char *arg, const char *in,
                      const char *out)
{
    const char *argv[] = {MQCHAT_STORE_BIN, cmd, db, arg, NULL};
    return run(argv, in, out);
}

/* Whether the broker's store is PostgreSQL (CHAT_TEST_PG_PORT). */
static bool on_pg(const ts_broker *b)
{
    return ts_broker_pg_conninfo(b)[0] != '\0';
}

/* mqchat-store <cmd> on the broker's store: its directory, or with
 * PostgreSQL --store postgresql and its connection string. */
static int broker_store_tool(const ts_broker *b, const char *cmd, const char *arg, const char *in,
                             const char *out)
{
    if (on_pg(b)) {
        const char *argv[] = {MQCHAT_STORE_BIN,         "--store", "postgresql", cmd,
                              ts_broker_pg_conninfo(b), arg,       NULL};
        return run(argv, in, out);
    }
    return store_tool(cmd, ts_broker_db_path(b), arg, in, out);
}

static harness_client *user(ts_broker *b, const char *id, const char *name)
{
    harness_client_opts o = {.client_id = id, .username = name};
    return harness_client_connect_opts(b, &o);
}

/* One command (a JSON object text) and its one entry, which the caller
 * reads while resp (returned in *resp, freed by the caller) lives. */
static const cJSON *ask(harness_client *c, const char *command, cJSON **resp)
{
    char req[2048];
    snprintf(req, sizeof req, "{\"commands\":[%s]}", command);
    *resp = harness_request(c, req, WAIT_MS);
    return harness_response_only(*resp);
}

static void expect_refused(harness_client *c, const char *command, const char *group,
                           const char *error)
{
    cJSON *resp = NULL;
    const cJSON *e = ask(c, command, &resp);
    harness_expect_error(e, harness_json_str(e, "command"), group, NULL, error);
    cJSON_Delete(resp);
}

/* A figure of `stats` (an admin's). */
static int64_t stat_of(harness_client *admin, const char *figure)
{
    cJSON *resp = NULL;
    const cJSON *e = ask(admin, "{\"command\":\"stats\"}", &resp);
    harness_expect_ok(e, "stats", NULL);
    int64_t v = harness_json_int(cJSON_GetObjectItemCaseSensitive(e, "figures"), figure);
    cJSON_Delete(resp);
    return v;
}

/* The deletions the tick has yet to finish (`stats`). */
static int64_t deletions(harness_client *admin)
{
    cJSON *resp = NULL;
    const cJSON *e = ask(admin, "{\"command\":\"stats\"}", &resp);
    int64_t v = harness_json_int(e, "deletions");
    cJSON_Delete(resp);
    return v;
}

/* Waits (bounded) until the store job of `stats` is no longer running;
 * returns its state ("done", "failed"). */
static const char *wait_job(harness_client *admin)
{
    static char state[32];
    for (int i = 0; i < 500; i++) {
        cJSON *resp = NULL;
        const cJSON *e = ask(admin, "{\"command\":\"stats\"}", &resp);
        const cJSON *job = cJSON_GetObjectItemCaseSensitive(e, "job");
        snprintf(state, sizeof state, "%s", harness_json_str(job, "state"));
        cJSON_Delete(resp);
        if (strcmp(state, "running") != 0) {
            return state;
        }
        ts_sleep_ms(20);
    }
    FAILF("the store job did not end in 10 s");
}

/* The device's sync entry for group: its acked, and the incarnation. */
static int64_t synced(harness_client *c, const char *group, char *inc, size_t inc_size)
{
    cJSON *resp = NULL;
    int64_t acked = -1;
    const cJSON *e = ask(c, "{\"command\":\"sync\",\"replay\":false}", &resp);
    harness_expect_ok(e, "sync", NULL);
    ASSERTF(harness_sync_find(e, group, NULL, &acked, NULL), "%s not in sync", group);
    if (inc) {
        snprintf(inc, inc_size, "%s", harness_json_str(e, "incarnation"));
    }
    cJSON_Delete(resp);
    return acked;
}

/* ===========================================================================
 * figures
 * ========================================================================= */

#define FIG_MAX 16
struct figures {
    char name[FIG_MAX][40];
    int64_t value[FIG_MAX];
    bool retained[FIG_MAX];
    int n;
};

static int64_t *fig(struct figures *f, const char *name)
{
    for (int i = 0; i < f->n; i++) {
        if (!strcmp(f->name[i], name)) {
            return &f->value[i];
        }
    }
    return NULL;
}

/* Takes in every figure that arrives on c until name is want (bounded). */
static void wait_figure(harness_client *c, struct figures *f, const char *name, int64_t want)
{
    int64_t deadline = ts_now_ms() + 15000;
    const char *prefix = "$SYS/broker/chat/";
    for (;;) {
        int64_t *v = fig(f, name);
        if (v && *v == want) {
            return;
        }
        int64_t left = deadline - ts_now_ms();
        ASSERTF(left > 0, "figure %s is %lld, expected %lld", name, v ? (long long)*v : -1LL,
                (long long)want);
        harness_msg *m = harness_client_receive(c, (int)left);
        if (!m) {
            continue;
        }
        ASSERTF(!strncmp(m->topic, prefix, strlen(prefix)), "unexpected topic %s", m->topic);
        const char *n = m->topic + strlen(prefix);
        int64_t *slot = fig(f, n);
        if (!slot) {
            ASSERT(f->n < FIG_MAX);
            snprintf(f->name[f->n], sizeof f->name[0], "%s", n);
            f->retained[f->n] = m->retained;
            slot = &f->value[f->n++];
        }
        char *end = NULL;
        *slot = strtoll(m->payload, &end, 10);
        ASSERTF(m->len > 0 && *end == '\0', "figure %s is not a number: %s", n, m->payload);
        harness_msg_free(m);
    }
}

static void case_figures(void)
{
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"max_payload 64", NULL},
                           .lines = (const char *const[]){"sys_interval 1", NULL}};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client *watch = harness_client_connect(b, "watch", NULL);
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    struct figures f = {0};
    char big[101];

    harness_client_subscribe(watch, "$SYS/broker/chat/#", 0);
    wait_figure(watch, &f, "messages/stored", 0);
    wait_figure(watch, &f, "messages/refused", 0);
    wait_figure(watch, &f, "groups", 0);
    for (int i = 0; i < 5; i++) {
        harness_client_publish(alice, "chat/room1", "hello", 1);
    }
    harness_client_publish(alice, "chat/room2", "one", 1);
    harness_client_publish(alice, "chat/room2", "two", 1);
    memset(big, 'x', 100);
    big[100] = '\0';
    harness_client_publish(alice, "chat/room1", big, 1);
    harness_client_publish(alice, "chat/room3", big, 1);
    harness_client_publish(alice, "chat/room1/x/y", "stray", 1);
    harness_ack(alice, "room1", 3, 1);
    wait_figure(watch, &f, "messages/stored", 7);
    wait_figure(watch, &f, "messages/refused", 3);
    wait_figure(watch, &f, "groups", 2);
    wait_figure(watch, &f, "acks", 1);
    ASSERT(fig(&f, "store/write/p50_us") && fig(&f, "store/write/p99_us"));
    ASSERT(fig(&f, "store/bytes") && fig(&f, "pages/sent") && fig(&f, "catchups/active"));
    ASSERT(*fig(&f, "store/write/p50_us") <= *fig(&f, "store/write/p99_us"));
    /* Retained like the broker's own: a new subscriber gets them at once. */
    harness_client *late = harness_client_connect(b, "late", NULL);
    struct figures g = {0};
    harness_client_subscribe(late, "$SYS/broker/chat/messages/stored", 0);
    wait_figure(late, &g, "messages/stored", 7);
    ASSERTF(g.retained[0], "messages/stored was not retained");
    ts_log("figures: stored 7, refused 3, groups 2, acks 1, p50 %lld us, p99 %lld us",
           (long long)*fig(&f, "store/write/p50_us"), (long long)*fig(&f, "store/write/p99_us"));
    harness_client_disconnect(late);
    harness_client_disconnect(watch);
    harness_client_destroy(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * admin
 * ========================================================================= */

static void case_admin(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"admins alice", NULL});
    harness_client *alice = user(b, "alice-cli", "alice");
    harness_client *bob = user(b, "bob-phone", "bob");
    static const char *const cmds[][2] = {
        {"{\"command\":\"groups\"}", "only an admin may groups"},
        {"{\"command\":\"members\",\"group\":\"room1\"}", "only an admin may members"},
        {"{\"command\":\"stats\"}", "only an admin may stats"},
        {"{\"command\":\"delete\",\"group\":\"room1\"}", "only an admin may delete"},
        {"{\"command\":\"compact\"}", "only an admin may compact"},
        {"{\"command\":\"backup\"}", "only an admin may backup"},
    };
    cJSON *resp = NULL;
    const cJSON *e, *list, *item;

    for (int i = 0; i < 3; i++) {
        harness_client_publish(bob, "chat/room1", "hi", 1);
    }
    harness_ack(bob, "room1", 2, 1);
    /* bob has read #1 (protocol v1.1): members shows his marker, and his
     * device's cursor stays at 2 (a read moves it forward only) */
    harness_client_publish(bob, "chat/room1/read", "1", 1);
    harness_client_publish(bob, "chat/r2", "hi", 1);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        expect_refused(bob, cmds[i][0], strstr(cmds[i][0], "\"group\"") ? "room1" : NULL,
                       cmds[i][1]);
    }

    e = ask(alice, "{\"command\":\"groups\"}", &resp);
    harness_expect_ok(e, "groups", NULL);
    list = cJSON_GetObjectItemCaseSensitive(e, "groups");
    ASSERT(cJSON_GetArraySize(list) == 2 && !harness_json_bool(e, "more"));
    item = cJSON_GetArrayItem(list, 0); /* shorter names first */
    ASSERT(!strcmp(harness_json_str(item, "group"), "r2"));
    item = cJSON_GetArrayItem(list, 1);
    ASSERT(!strcmp(harness_json_str(item, "group"), "room1"));
    ASSERT(harness_json_int(item, "head") == 3 && harness_json_int(item, "first") == 1 &&
           harness_json_int(item, "members") == 1);
    cJSON_Delete(resp);
    e = ask(alice, "{\"command\":\"groups\",\"limit\":1}", &resp);
    ASSERT(harness_json_bool(e, "more") && !strcmp(harness_json_str(e, "after"), "r2"));
    cJSON_Delete(resp);
    e = ask(alice, "{\"command\":\"groups\",\"after\":\"r2\"}", &resp);
    list = cJSON_GetObjectItemCaseSensitive(e, "groups");
    ASSERT(cJSON_GetArraySize(list) == 1 && !harness_json_bool(e, "more"));
    cJSON_Delete(resp);
    expect_refused(alice, "{\"command\":\"groups\",\"limit\":0}", NULL,
                   "limit must be an integer from 1 to 1000");

    e = ask(alice, "{\"command\":\"members\",\"group\":\"room1\"}", &resp);
    harness_expect_ok(e, "members", "room1");
    list = cJSON_GetObjectItemCaseSensitive(e, "members");
    ASSERT(cJSON_GetArraySize(list) == 1);
    item = cJSON_GetArrayItem(list, 0);
    ASSERT(!strcmp(harness_json_str(item, "member"), "bob") && harness_json_int(item, "read") == 1);
    list = cJSON_GetObjectItemCaseSensitive(item, "devices");
    ASSERT(cJSON_GetArraySize(list) == 1);
    item = cJSON_GetArrayItem(list, 0);
    ASSERT(!strcmp(harness_json_str(item, "device"), "bob-phone") &&
           harness_json_int(item, "acked") == 2);
    cJSON_Delete(resp);
    expect_refused(alice, "{\"command\":\"members\"}", NULL, "group is missing");

    ASSERT(stat_of(alice, "messages/stored") == 4 && stat_of(alice, "acks") == 2 &&
           stat_of(alice, "groups") == 2);
    expect_refused(alice, "{\"command\":\"backup\"}", NULL,
                   "backups are not configured: set plugin_opt_backup_dir");
    e = ask(alice, "{\"command\":\"compact\"}", &resp);
    harness_expect_ok(e, "compact", NULL);
    ASSERT(harness_json_bool(e, "started"));
    cJSON_Delete(resp);
    ASSERT(!strcmp(wait_job(alice), "done"));

    e = ask(alice, "{\"command\":\"delete\",\"group\":\"r2\"}", &resp);
    harness_expect_ok(e, "delete", "r2");
    ASSERT(harness_json_int(e, "head") == 1 && harness_json_bool(e, "done"));
    cJSON_Delete(resp);
    e = ask(alice, "{\"command\":\"groups\",\"after\":\"\"}", &resp);
    item = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "groups"), 0);
    ASSERT(!strcmp(harness_json_str(item, "group"), "r2") && harness_json_int(item, "first") == 2 &&
           harness_json_int(item, "members") == 0);
    cJSON_Delete(resp);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * delete
 * ========================================================================= */

#define BIG 3000

static void case_delete(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"admins alice", NULL});
    harness_client *alice = user(b, "alice-cli", "alice");
    harness_client *bob = user(b, "bob-phone", "bob");
    harness_client *slow = user(b, "slow", "carol");
    cJSON *resp = NULL;
    const cJSON *e;
    harness_msg *m;
    char body[64];

    harness_client_subscribe(slow, "chat/big", 1); /* joins; never acks */
    harness_client_set_window(bob, 200);
    for (int i = 1; i <= BIG; i++) {
        snprintf(body, sizeof body, "{\"body\":\"m%d\",\"cid\":\"c%d\"}", i, i);
        ASSERT(harness_client_publish_async(bob, "chat/big", body, 1, NULL) == 0);
    }
    harness_ack(bob, "big", BIG, 1);
    /* A catch-up of slow: pages in flight. */
    harness_client_disconnect(slow);
    slow = user(b, "slow", "carol");
    harness_client_subscribe(slow, "chat/big", 1);
    ASSERT(stat_of(alice, "catchups/active") == 1);
    e = ask(alice, "{\"command\":\"delete\",\"group\":\"big\"}", &resp);
    harness_expect_ok(e, "delete", "big");
    ASSERT(harness_json_int(e, "head") == BIG && !harness_json_bool(e, "done"));
    cJSON_Delete(resp);
    /* At once: no catch-up, no member, nothing to fetch. */
    ASSERT(stat_of(alice, "catchups/active") == 0);
    expect_refused(bob, "{\"command\":\"fetch\",\"group\":\"big\"}", "big",
                   "not a member of the group");
    for (int i = 0; i < 500 && deletions(alice) != 0; i++) {
        ts_sleep_ms(20);
    }
    ASSERTF(deletions(alice) == 0, "the deletion did not finish in 10 s");
    /* The group goes on after its old head. */
    harness_client_publish(bob, "chat/big", "after", 1);
    e = ask(bob, "{\"command\":\"fetch\",\"group\":\"big\",\"after\":0}", &resp);
    ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages")) == 1 &&
           harness_json_int(e, "first") == BIG + 1);
    cJSON_Delete(resp);
    while ((m = harness_client_receive(slow, 0)) != NULL) {
        harness_msg_free(m);
    }
    harness_client_destroy(slow);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_stop(b);
    char out[600];
    snprintf(out, sizeof out, "%s/check.out", ts_broker_dir(b));
    ASSERTF(broker_store_tool(b, "check", NULL, NULL, out) == 0,
            "the store does not check clean after a deletion");
    char *said = ts_read_file(out, NULL);
    ASSERTF(strstr(said, "1 groups checked, 0 problems") != NULL, "check said: %s", said);
    free(said);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * expiry
 * ========================================================================= */

static bool has_device(harness_client *admin, const char *group, const char *device)
{
    char cmd[128];
    cJSON *resp = NULL;
    bool found = false;
    const cJSON *m, *d;
    snprintf(cmd, sizeof cmd, "{\"command\":\"members\",\"group\":\"%s\"}", group);
    const cJSON *e = ask(admin, cmd, &resp);
    harness_expect_ok(e, "members", group);
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(e, "members"))
    {
        cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(m, "devices"))
        {
            found = found || !strcmp(harness_json_str(d, "device"), device);
        }
    }
    cJSON_Delete(resp);
    return found;
}

static void case_expiry(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"admins alice", NULL});
    harness_client *bob = user(b, "old-phone", "bob");
    harness_client *alice;

    harness_client_subscribe(bob, "chat/room1", 1);
    harness_client_publish(bob, "chat/room1", "one", 1);
    harness_client_publish(bob, "chat/room1", "two", 1);
    harness_ack(bob, "room1", 2, 1);
    harness_client_disconnect(bob);
    ts_broker_stop(b);

    /* 91 days later, with expiry off: the old device stays. */
    ts_broker_shift_clock(b, 91L * DAY_S);
    ts_broker_set_opts(b, (const char *const[]){"admins alice", "device_expiry_days 0", NULL});
    ts_broker_restart(b);
    alice = user(b, "alice-cli", "alice");
    bob = user(b, "new-phone", "bob");
    harness_client_subscribe(bob, "chat/room1", 1);
    ASSERT(has_device(alice, "room1", "old-phone") && has_device(alice, "room1", "new-phone"));
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_stop(b);

    /* With 90 days: the sweep (from the tick) drops old-phone only. */
    ts_broker_set_opts(b, (const char *const[]){"admins alice", "device_expiry_days 90", NULL});
    ts_broker_restart(b);
    alice = user(b, "alice-cli", "alice");
    for (int i = 0; i < 500 && has_device(alice, "room1", "old-phone"); i++) {
        ts_sleep_ms(20);
    }
    ASSERTF(!has_device(alice, "room1", "old-phone"), "old-phone did not expire in 10 s");
    ASSERT(has_device(alice, "room1", "new-phone"));
    ASSERT(stat_of(alice, "devices/expired") == 1);
    /* The member stays; a device that comes back starts where it was. */
    bob = user(b, "old-phone", "bob");
    ASSERT(synced(bob, "room1", NULL, 0) == 2);
    ASSERTF(ts_broker_log_count(b, "test hook: the plugin's clock is shifted") >= 1,
            "the clock shift was not logged");
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * backup
 * ========================================================================= */

static void case_backup(void)
{
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins alice", NULL},
                           .after =
                               (const char *const[]){"plugin_opt_backup_dir @DIR@/backups", NULL}};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client *alice = user(b, "alice-cli", "alice");
    harness_client *bob = user(b, "bob-phone", "bob");
    harness_client *carol = user(b, "carol-phone", "carol");
    char body[64], path[600], db[600], before[64], after[64];
    cJSON *resp = NULL;
    const cJSON *e;

    harness_client_subscribe(carol, "chat/room1", 1);
    for (int i = 1; i <= 20; i++) {
        snprintf(body, sizeof body, "{\"body\":\"m%d\",\"cid\":\"c%d\"}", i, i);
        harness_client_publish(bob, "chat/room1", body, 1);
    }
    harness_ack(carol, "room1", 7, 1);
    ASSERT(synced(carol, "room1", before, sizeof before) == 7);
    e = ask(alice, "{\"command\":\"backup\"}", &resp);
    harness_expect_ok(e, "backup", NULL);
    snprintf(path, sizeof path, "%s", harness_json_str(e, "path"));
    ASSERTF(!strncmp(path, ts_broker_dir(b), strlen(ts_broker_dir(b))),
            "backup outside backup_dir: %s", path);
    cJSON_Delete(resp);
    ASSERT(!strcmp(wait_job(alice), "done"));
    /* After the backup: not in it. */
    for (int i = 21; i <= 25; i++) {
        harness_client_publish(bob, "chat/room1", "later", 1);
    }
    harness_ack(carol, "room1", 25, 1);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    harness_client_disconnect(carol);
    ts_broker_stop(b);

    ASSERTF(store_tool("check", path, NULL, NULL, NULL) == 0, "the backup does not check clean");
    /* Restore: the backup becomes the store. A PostgreSQL store's backup
     * is a LevelDB store too (pg_job.h): the broker starts on it. */
    snprintf(db, sizeof db, "%s", ts_broker_db_path(b));
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mv '%s' '%s'", db, path, db);
    ASSERT(system(cmd) == 0);
    if (on_pg(b)) {
        ts_log("the PostgreSQL store's backup restored into a broker on LevelDB");
        ts_broker_set_opts(b, (const char *const[]){"admins alice", "store leveldb", NULL});
    }
    ts_broker_restart(b);
    bob = user(b, "bob-phone", "bob");
    carol = user(b, "carol-phone", "carol");
    harness_expect_store(bob, "room1", 20);
    ASSERT(synced(carol, "room1", after, sizeof after) == 7);
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
                           .after =
                               (const char *const[]){"plugin_opt_backup_dir @DIR@/backups", NULL}};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client *alice = user(b, "alice-cli", "alice");
    harness_client *bob = user(b, "bob-phone", "bob");
    harness_ticket last = {0};
    char body[64], path[600], out[700];
    cJSON *resp = NULL;

    harness_client_set_window(bob, 200);
    for (int i = 1; i <= LIVE; i++) {
        snprintf(body, sizeof body, "{\"body\":\"m%d\",\"cid\":\"c%d\"}", i, i);
        ASSERT(harness_client_publish_async(bob, "chat/room1", body, 1, &last) == 0);
        if (i == LIVE / 3) {
            /* at least LIVE / 3 - 200 are stored: the rest of the window */
            const cJSON *e = ask(alice, "{\"command\":\"backup\"}", &resp);
            harness_expect_ok(e, "backup", NULL);
            snprintf(path, sizeof path, "%s", harness_json_str(e, "path"));
            cJSON_Delete(resp);
        }
    }
    ASSERT(!strcmp(wait_job(alice), "done"));
    harness_client_wait_acked(bob, last, 30000);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_stop(b);

    /* Dense ids up to a head that is the highest id stored: no message read
     * after the head was, none missing below it. */
    snprintf(out, sizeof out, "%s/check.out", ts_broker_dir(b));
    ASSERTF(store_tool("check", path, NULL, NULL, out) == 0, "the backup does not check clean");
    snprintf(out, sizeof out, "%s/room1.jsonl", ts_broker_dir(b));
    ASSERT(store_tool("export", path, "room1", NULL, out) == 0);
    char *text = ts_read_file(out, NULL);
    const char *h = strstr(text, "\"head\":");
    long long head = h ? strtoll(h + 7, NULL, 10) : -1;
    ASSERTF(head >= LIVE / 3 - 200 && head <= LIVE, "the backup's head is %lld", head);
    free(text);
    ASSERT(broker_store_tool(b, "check", NULL, NULL, NULL) == 0);
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
    ASSERT(broker_store_tool(b, "check", NULL, NULL, out) == 1);
    expect_checked(out, "group room2: messages 5 to 5 are missing");
    expect_checked(out, "group room1: the cursor of alice/alice is 99, above head 1");
    expect_checked(out, "group room1: the cursor of alice/alice (99) is above the maximum cursor");
    expect_checked(out, "group room1: first (40) is above head + 1 (2)");
    expect_checked(out, "2 groups checked, 5 problems");
    ASSERT(broker_store_tool(b, "repair", NULL, NULL, NULL) == 1);
    ASSERT(broker_store_tool(b, "import", NULL, jsonl, NULL) == 1);
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
    ASSERT(synced(alice, "room1", before, sizeof before) == 1);
    snprintf(out, sizeof out, "%s/check.out", ts_broker_dir(b));
    if (on_pg(b)) {
        /* A database: check reads one snapshot while the broker runs. */
        ASSERT(broker_store_tool(b, "check", NULL, NULL, out) == 0);
        expect_checked(out, "2 groups checked, 0 problems");
    } else {
        /* While the broker runs, the tool is refused. */
        ASSERT(store_tool("check", db, NULL, NULL, NULL) == 1);
    }
    harness_client_disconnect(alice);
    ts_broker_stop(b);

    ASSERT(broker_store_tool(b, "check", NULL, NULL, out) == 0);
    expect_checked(out, "2 groups checked, 0 problems");

    /* export, import into a new store, export again: the same lines. */
    snprintf(in, sizeof in, "%s/room1.jsonl", ts_broker_dir(b));
    snprintf(copy, sizeof copy, "%s/copy", ts_broker_dir(b));
    snprintf(out2, sizeof out2, "%s/room1-copy.jsonl", ts_broker_dir(b));
    ASSERT(broker_store_tool(b, "export", "room1", NULL, in) == 0);
    ASSERT(store_tool("import", copy, NULL, in, NULL) == 0);
    ASSERT(store_tool("import", copy, NULL, in, NULL) == 1); /* the group is there */
    ASSERT(store_tool("export", copy, "room1", NULL, out2) == 0);
    char *a = ts_read_file(in, NULL), *c = ts_read_file(out2, NULL);
    const char *la = strchr(a, '\n'), *lc = strchr(c, '\n');
    ASSERT(la && lc && !strcmp(la, lc)); /* all but the group line (its incarnation) */
    ASSERT(strstr(a, "\"type\":\"cursor\",\"member\":\"alice\",\"device\":\"alice\",\"acked\":1"));
    free(a);
    free(c);
    ASSERT(store_tool("check", copy, NULL, NULL, NULL) == 0);
    if (on_pg(b)) {
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
    ASSERT(store_tool("check", db, NULL, NULL, out) == 1);
    ASSERT(store_tool("repair", db, NULL, NULL, out) == 0);
    ASSERT(store_tool("check", db, NULL, NULL, out) == 0);
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    synced(alice, "room1", after, sizeof after);
    ASSERTF(strcmp(before, after) != 0, "a repaired store keeps its incarnation");
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {
        {"figures", case_figures}, {"admin", case_admin},   {"delete", case_delete},
        {"expiry", case_expiry},   {"backup", case_backup}, {"backup_live", case_backup_live},
        {"offline", case_offline},
    };
    if (argc != 2) {
        fprintf(stderr, "usage: integ_ops <case>\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!strcmp(argv[1], cases[i].name)) {
            char name[64];
            snprintf(name, sizeof name, "integ_ops_%s", argv[1]);
            ts_init(name);
            cases[i].fn();
            return ts_pass();
        }
    }
    fprintf(stderr, "integ_ops: no case %s\n", argv[1]);
    return 2;
}
