/* integ_ops_manage: issue 12, operating the plugin while it runs, against a
 * real broker and store, one case per argument (ctest integ_ops_<case>):
 *
 *   figures   $SYS/broker/chat/... rise by exactly what was stored, refused,
 *             acked and created; retained, with the write latency figures
 *             and the store's size (from the store: PostgreSQL's tables)
 *   admin     each admin command for an admin and the error for anyone else
 *   delete    a deletion answers at once, stops the group's catch-ups and
 *             finishes in the background; a device's catch-up of another
 *             group, which waited behind the deleted group's pages, goes on
 *             at once; the store checks clean after
 *   expiry    device_expiry_days with the plugin's clock moved 91 days on
 *             (MOSQUITTO_CHAT_TEST_CLOCK_SHIFT): 0 keeps, 90 drops the old
 *             device and keeps the member's place
 *
 * With CHAT_TEST_PG_PORT (scripts/test's pg stage) the broker's store is
 * PostgreSQL and every case runs against it, mqchat-store with --store
 * postgresql and the broker's connection string.
 */
#include "integ_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Takes in every figure that arrives on c until name is want, or with
 * above, more than want (bounded). */
static void wait_figure_cmp(harness_client *c, struct figures *f, const char *name, int64_t want,
                            bool above)
{
    int64_t deadline = ts_now_ms() + 15000;
    const char *prefix = "$SYS/broker/chat/";
    for (;;) {
        int64_t *v = fig(f, name);
        if (v && (above ? *v > want : *v == want)) {
            return;
        }
        int64_t left = deadline - ts_now_ms();
        ASSERTF(left > 0, "figure %s is %lld, expected %s%lld", name, v ? (long long)*v : -1LL,
                above ? "more than " : "", (long long)want);
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

static void wait_figure(harness_client *c, struct figures *f, const char *name, int64_t want)
{
    wait_figure_cmp(c, f, name, want, false);
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
    ASSERT(fig(&f, "pages/sent") && fig(&f, "catchups/active"));
    /* The store's size, asked of the store: on PostgreSQL its tables (it
     * was the empty db_path directory's 0 there), on LevelDB its files. */
    wait_figure_cmp(watch, &f, "store/bytes", 0, true);
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
    ts_broker *b = ts_broker_start_users((const char *const[]){"admins alice", NULL});
    harness_client *alice = ops_user(b, "alice-cli", "alice");
    harness_client *bob = ops_user(b, "bob-phone", "bob");
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
    /* bob has read what he sent (issue 25, item 6): members shows his
     * marker at 3, and a read of #1 changes nothing; his device's cursor
     * stays at 2 (neither moves it back, nor does sending move it) */
    harness_client_publish(bob, "chat/room1/read", "1", 1);
    harness_client_publish(bob, "chat/r2", "hi", 1);
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        ops_expect_refused(bob, cmds[i][0], strstr(cmds[i][0], "\"group\"") ? "room1" : NULL,
                           cmds[i][1]);
    }

    e = ops_ask(alice, "{\"command\":\"groups\"}", &resp);
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
    e = ops_ask(alice, "{\"command\":\"groups\",\"limit\":1}", &resp);
    ASSERT(harness_json_bool(e, "more") && !strcmp(harness_json_str(e, "after"), "r2"));
    cJSON_Delete(resp);
    e = ops_ask(alice, "{\"command\":\"groups\",\"after\":\"r2\"}", &resp);
    list = cJSON_GetObjectItemCaseSensitive(e, "groups");
    ASSERT(cJSON_GetArraySize(list) == 1 && !harness_json_bool(e, "more"));
    cJSON_Delete(resp);
    ops_expect_refused(alice, "{\"command\":\"groups\",\"limit\":0}", NULL,
                       "limit must be an integer from 1 to 1000");

    e = ops_ask(alice, "{\"command\":\"members\",\"group\":\"room1\"}", &resp);
    harness_expect_ok(e, "members", "room1");
    list = cJSON_GetObjectItemCaseSensitive(e, "members");
    ASSERT(cJSON_GetArraySize(list) == 1);
    item = cJSON_GetArrayItem(list, 0);
    ASSERT(!strcmp(harness_json_str(item, "member"), "bob") && harness_json_int(item, "read") == 3);
    list = cJSON_GetObjectItemCaseSensitive(item, "devices");
    ASSERT(cJSON_GetArraySize(list) == 1);
    item = cJSON_GetArrayItem(list, 0);
    ASSERT(!strcmp(harness_json_str(item, "device"), "bob-phone") &&
           harness_json_int(item, "acked") == 2);
    cJSON_Delete(resp);
    ops_expect_refused(alice, "{\"command\":\"members\"}", NULL, "group is missing");

    ASSERT(ops_stat_of(alice, "messages/stored") == 4 && ops_stat_of(alice, "acks") == 2 &&
           ops_stat_of(alice, "groups") == 2 && ops_stat_of(alice, "store/bytes") > 0);
    ops_expect_refused(alice, "{\"command\":\"backup\"}", NULL,
                       "backups are not configured: set plugin_opt_backup_dir");
    e = ops_ask(alice, "{\"command\":\"compact\"}", &resp);
    harness_expect_ok(e, "compact", NULL);
    ASSERT(harness_json_bool(e, "started"));
    cJSON_Delete(resp);
    ASSERT(!strcmp(ops_wait_job(alice), "done"));

    e = ops_ask(alice, "{\"command\":\"delete\",\"group\":\"r2\"}", &resp);
    harness_expect_ok(e, "delete", "r2");
    ASSERT(harness_json_int(e, "head") == 1 && harness_json_bool(e, "done"));
    cJSON_Delete(resp);
    e = ops_ask(alice, "{\"command\":\"groups\",\"after\":\"\"}", &resp);
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
#define SMALL 10 /* one page */

static void case_delete(void)
{
    ts_broker *b = ts_broker_start_users((const char *const[]){"admins alice", NULL});
    harness_client *alice = ops_user(b, "alice-cli", "alice");
    harness_client *bob = ops_user(b, "bob-phone", "bob");
    harness_client *slow = ops_user(b, "slow", "carol");
    cJSON *resp = NULL;
    const cJSON *e;
    harness_msg *m;
    char body[64];

    harness_client_subscribe(slow, "chat/big", 1); /* joins; never acks */
    harness_client_subscribe(slow, "chat/small", 1);
    harness_client_set_window(bob, 200);
    for (int i = 1; i <= BIG; i++) {
        snprintf(body, sizeof body, "{\"body\":\"m%d\",\"cid\":\"c%d\"}", i, i);
        ASSERT(harness_client_publish_async(bob, "chat/big", body, 1, NULL) == 0);
    }
    for (int i = 1; i <= SMALL; i++) {
        snprintf(body, sizeof body, "{\"body\":\"s%d\",\"cid\":\"s%d\"}", i, i);
        ASSERT(harness_client_publish_async(bob, "chat/small", body, 1, NULL) == 0);
    }
    harness_ack(bob, "big", BIG, 1);
    harness_ack(bob, "small", SMALL, 1);
    /* A catch-up of slow: big's pages fill its window (4), small's waits
     * behind them. */
    harness_client_disconnect(slow);
    slow = ops_user(b, "slow", "carol");
    harness_client_subscribe(slow, "chat/big", 1);
    harness_client_subscribe(slow, "chat/small", 1);
    ASSERT(ops_stat_of(alice, "catchups/active") == 1);
    ASSERT(ops_stat_of(alice, "pages/inflight") == 4);
    e = ops_ask(alice, "{\"command\":\"delete\",\"group\":\"big\"}", &resp);
    harness_expect_ok(e, "delete", "big");
    ASSERT(harness_json_int(e, "head") == BIG && !harness_json_bool(e, "done"));
    cJSON_Delete(resp);
    /* At once: no catch-up of big, no member, nothing to fetch; small's
     * page took the window's place (it waited for ever before: no page in
     * flight, so no ack and no resend). */
    ASSERTF(ops_stat_of(alice, "pages/inflight") == 1, "%lld pages in flight after the delete",
            (long long)ops_stat_of(alice, "pages/inflight"));
    for (;;) {
        harness_page p;
        m = harness_client_receive(slow, 10000);
        ASSERTF(m != NULL, "no page of small came after big was deleted");
        if (!harness_page_parse(m, &p)) {
            harness_msg_free(m);
            continue;
        }
        bool small = strcmp(p.group, "small") == 0;
        if (small) {
            ASSERTF(p.first == 1 && p.last == SMALL, "small's page %lld..%lld", (long long)p.first,
                    (long long)p.last);
        }
        harness_page_free(&p);
        harness_msg_free(m);
        if (small) {
            break;
        }
    }
    ops_expect_refused(bob, "{\"command\":\"fetch\",\"group\":\"big\"}", "big",
                       "not a member of the group");
    for (int i = 0; i < 500 && ops_deletions(alice) != 0; i++) {
        ts_sleep_ms(20);
    }
    ASSERTF(ops_deletions(alice) == 0, "the deletion did not finish in 10 s");
    /* The group goes on after its old head. */
    harness_client_publish(bob, "chat/big", "after", 1);
    e = ops_ask(bob, "{\"command\":\"fetch\",\"group\":\"big\",\"after\":0}", &resp);
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
    ASSERTF(ops_broker_store_tool(b, "check", NULL, NULL, out) == 0,
            "the store does not check clean after a deletion");
    char *said = ts_read_file(out, NULL);
    ASSERTF(strstr(said, "2 groups checked, 0 problems") != NULL, "check said: %s", said);
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
    const cJSON *e = ops_ask(admin, cmd, &resp);
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
    ts_broker *b = ts_broker_start_users((const char *const[]){"admins alice", NULL});
    harness_client *bob = ops_user(b, "old-phone", "bob");
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
    alice = ops_user(b, "alice-cli", "alice");
    bob = ops_user(b, "new-phone", "bob");
    harness_client_subscribe(bob, "chat/room1", 1);
    ASSERT(has_device(alice, "room1", "old-phone") && has_device(alice, "room1", "new-phone"));
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_stop(b);

    /* With 90 days: the sweep (from the tick) drops old-phone only. */
    ts_broker_set_opts(b, (const char *const[]){"admins alice", "device_expiry_days 90", NULL});
    ts_broker_restart(b);
    alice = ops_user(b, "alice-cli", "alice");
    for (int i = 0; i < 500 && has_device(alice, "room1", "old-phone"); i++) {
        ts_sleep_ms(20);
    }
    ASSERTF(!has_device(alice, "room1", "old-phone"), "old-phone did not expire in 10 s");
    ASSERT(has_device(alice, "room1", "new-phone"));
    ASSERT(ops_stat_of(alice, "devices/expired") == 1);
    /* The member stays; a device that comes back starts where it was. */
    bob = ops_user(b, "old-phone", "bob");
    ASSERT(ops_synced(bob, "room1", NULL, 0) == 2);
    ASSERTF(ts_broker_log_count(b, "test hook: the plugin's clock is shifted") >= 1,
            "the clock shift was not logged");
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"figures", case_figures},
    {"admin", case_admin},
    {"delete", case_delete},
    {"expiry", case_expiry},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_ops_", cases, sizeof cases / sizeof cases[0]);
}
