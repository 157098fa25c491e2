/* integ_sec_store: regression tests of issue 9 about the data kept, one case
 * per item (argv[1]), each against a real broker:
 *
 *   bad_block          7. a damaged table block fails its reads, not every write
 *                         (with plugin_opt_verify_store false)
 *   cid_expiry         8. a cid expires with its message
 *   retention_steps    9. retention on a long history deletes in steps
 *   incarnation        11. a crash across a reboot starts a new incarnation
 *
 * and the holes a red-team attack on those fixes found:
 *
 *   sync_no_cursors    counting unread from new client ids writes no keys
 *   corrupt_log        a damaged write-ahead log stops the store, not the messages
 *
 * and of issue 21 (safe in someone else's broker, round 2):
 *
 *   anonymous_members_expire  8. in open groups a member goes with its last
 *                                device (device expiry); a device online is
 *                                in use; closed groups keep their members
 */
#include "integ_sec.h"
#include "integ_disk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ===========================================================================
 * 7. One bad block fails its reads, not every write
 * ========================================================================= */

static void case_bad_block(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    char table[512];
    int errors = 0, read = 0;
    int64_t after = 0;
    cJSON *resp;

    /* Text that does not compress, so the damage lands in message bytes. */
    disk_publish_incompressible(alice, "chat/bad", 200, 7, WAIT_MS);
    for (int i = 0; i < 5; i++)
        harness_client_publish(alice, "chat/good", "fine", 1);
    harness_client_disconnect(alice);
    /* LevelDB writes its log into a table file when it reopens. */
    ts_broker_stop(b);
    ts_broker_restart(b);
    ts_broker_stop(b);
    disk_largest_table(b, table, sizeof table);
    disk_garble(table);
    /* The check at start would refuse the store (integ_damage): this is
     * the operator who turned it off, or damage that came while running. */
    ts_broker_set_opts(b, (const char *const[]){"verify_store false", NULL});
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    harness_client_subscribe(alice, HARNESS_RESPONSE_TOPIC, 1);
    /* Read the damaged group page by page; a page that fails is skipped. */
    while (after < 200 && read + errors < 400) {
        char req[160];
        const cJSON *e;
        snprintf(req, sizeof req,
                 "{\"commands\":[{\"command\":\"fetch\",\"group\":\"bad\",\"after\":%lld,"
                 "\"limit\":1}]}",
                 (long long)after);
        resp = harness_request(alice, req, WAIT_MS);
        e = harness_response_only(resp);
        if (cJSON_GetObjectItemCaseSensitive(e, "error") != NULL) {
            harness_expect_error(e, "fetch", "bad", NULL, "storage error");
            errors++;
            after++;
        } else {
            read++;
            after = harness_json_int(e, "last");
        }
        cJSON_Delete(resp);
    }
    ts_log("damaged group: %d messages read, %d refused", read, errors);
    ASSERTF(errors >= 1, "no read of the damaged group failed");
    ASSERTF(read >= 100, "only %d messages of the damaged group could be read", read);
    ASSERTF(ts_broker_log_count(b, "of group \"bad\"") >= 1, "no log line names the damaged keys");
    /* Writes go on, to both groups. */
    harness_client_publish(alice, "chat/good", "still fine", 1);
    harness_client_publish(alice, "chat/bad", "new message", 1);
    harness_expect_quiet(alice, "no error entry for the publishes");
    resp = harness_request(
        alice, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"good\",\"after\":5}]}", WAIT_MS);
    ASSERT(harness_json_int(harness_response_only(resp), "last") == 6);
    cJSON_Delete(resp);
    resp = harness_request(
        alice, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"bad\",\"after\":200}]}", WAIT_MS);
    ASSERT(harness_json_int(harness_response_only(resp), "last") == 201);
    cJSON_Delete(resp);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * 8. A cid expires with its message
 * ========================================================================= */

static void case_cid_expiry(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"retention_count 10", NULL});
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    char msg[64];
    cJSON *resp;
    const cJSON *msgs;

    harness_client_subscribe(alice, HARNESS_RESPONSE_TOPIC, 1);
    for (int i = 1; i <= 30; i++) {
        snprintf(msg, sizeof msg, "{\"cid\":\"c%d\",\"body\":\"m%d\"}", i, i);
        harness_client_publish(alice, "chat/room1", msg, 1);
    }
    /* c25 is still kept: a retry is recognised. c1 went with its message:
     * a retry is a new message. */
    harness_client_publish(alice, "chat/room1", "{\"cid\":\"c25\",\"body\":\"m25\"}", 1);
    harness_expect_duplicate(alice, "room1", "c25", 25, WAIT_MS);
    harness_client_publish(alice, "chat/room1", "{\"cid\":\"c1\",\"body\":\"m1 again\"}", 1);
    harness_expect_quiet(alice, "no error entry, no duplicate answer for c1");
    resp = harness_request(
        alice, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\",\"limit\":2}]}",
        WAIT_MS);
    msgs = cJSON_GetObjectItemCaseSensitive(harness_response_only(resp), "messages");
    ASSERTF(harness_json_int(harness_response_only(resp), "head") == 31,
            "head %lld, expected 31 (c25 recognised, c1 stored anew)",
            (long long)harness_json_int(harness_response_only(resp), "head"));
    ASSERT(strcmp(harness_json_str(cJSON_GetArrayItem(msgs, 0), "cid"), "c1") == 0);
    cJSON_Delete(resp);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * 9. Retention enabled on a long history works in steps
 * ========================================================================= */

static void case_retention_steps(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    harness_client *pinger;
    harness_ticket t;
    int64_t worst = 0, start;
    const int total = 30000;
    bool trimmed = false;

    harness_client_set_window(alice, 200);
    for (int i = 0; i < total; i++)
        ASSERT(harness_client_publish_async(alice, "chat/long", "old", 1, &t) == 0);
    harness_client_wait_acked(alice, t, 30000);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    ts_broker_set_opts(b, (const char *const[]){"retention_count 10", NULL});
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    pinger = harness_client_connect(b, "pinger", NULL);
    start = ts_now_ms();
    harness_client_publish(alice, "chat/long", "new", 1);
    worst = ts_now_ms() - start; /* the publish that crossed the limit */
    /* The publish deleted one step; the ticks delete the rest, while other
     * clients keep being served. */
    while (ts_now_ms() - start < 30000 && !trimmed) {
        int64_t t0 = ts_now_ms(), rtt;
        cJSON *resp = harness_request(
            pinger, "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}", WAIT_MS);
        cJSON_Delete(resp);
        rtt = ts_now_ms() - t0;
        worst = rtt > worst ? rtt : worst;
        resp = harness_request(
            alice, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"long\",\"after\":0}]}",
            WAIT_MS);
        trimmed = harness_json_int(harness_response_only(resp), "first") == total + 1 - 9;
        cJSON_Delete(resp);
    }
    ts_log("retention of %d messages done in %lld ms; longest publish or request round "
           "trip meanwhile %lld ms",
           total, (long long)(ts_now_ms() - start), (long long)worst);
    printf("MEASURE retention of %d messages: longest round trip meanwhile %lld ms\n", total,
           (long long)worst);
    ASSERTF(trimmed, "retention did not reach the last 10 messages");
    harness_client_disconnect(alice);
    harness_client_disconnect(pinger);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * 11. After a power loss, a new incarnation
 * ========================================================================= */

static char *sync_incarnation(harness_client *c)
{
    cJSON *resp =
        harness_request(c, "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}", WAIT_MS);
    const char *inc = harness_json_str(harness_response_only(resp), "incarnation");
    char *copy = strdup(inc);
    ASSERT(copy != NULL && strlen(copy) == 32);
    cJSON_Delete(resp);
    return copy;
}

static void case_incarnation(void)
{
    ts_broker *b;
    harness_client *alice;
    char *first, *after_crash, *after_reboot, *after_clean;

    setenv("MOSQUITTO_CHAT_TEST_BOOT_ID", "boot-one", 1);
    b = ts_broker_start(NULL);
    alice = harness_client_connect(b, "alice", NULL);
    harness_client_publish(alice, "chat/room1", "one", 1);
    first = sync_incarnation(alice);
    harness_client_destroy(alice);
    /* A crash of the broker alone loses nothing: same incarnation. */
    ts_broker_kill(b);
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    after_crash = sync_incarnation(alice);
    ASSERTF(strcmp(first, after_crash) == 0, "a broker crash changed the incarnation");
    harness_client_destroy(alice);
    /* A crash and a reboot may have lost unsynced writes: a new one. */
    ts_broker_kill(b);
    setenv("MOSQUITTO_CHAT_TEST_BOOT_ID", "boot-two", 1);
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    after_reboot = sync_incarnation(alice);
    ASSERTF(strcmp(first, after_reboot) != 0, "a crash across a reboot kept the incarnation");
    ASSERTF(ts_broker_log_count(b, "was not closed cleanly") == 1,
            "no log line about the new incarnation");
    harness_client_disconnect(alice);
    /* A clean stop keeps it, whatever the boot. */
    ts_broker_stop(b);
    setenv("MOSQUITTO_CHAT_TEST_BOOT_ID", "boot-three", 1);
    ts_broker_restart(b);
    alice = harness_client_connect(b, "alice", NULL);
    after_clean = sync_incarnation(alice);
    ASSERT(strcmp(after_reboot, after_clean) == 0);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
    unsetenv("MOSQUITTO_CHAT_TEST_BOOT_ID");
    free(first);
    free(after_crash);
    free(after_reboot);
    free(after_clean);
}

/* ===========================================================================
 * Red team: unread counts from new client ids, a damaged log
 * ========================================================================= */

/* Counting unread messages from ever new client ids leaves no keys. */
static void case_sync_no_cursors(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *c = harness_client_connect(b, "ann-0", "ann");
    const char **topics = calloc(300, sizeof *topics);
    uint64_t before, after;

    ASSERT(topics != NULL);
    for (int i = 0; i < 300; i++) {
        char *tp = malloc(24);
        ASSERT(tp != NULL);
        snprintf(tp, 24, "chat/g%03d", i);
        topics[i] = tp;
    }
    for (int i = 0; i < 300; i += 100)
        harness_client_subscribe_many(c, 100, topics + i, 0);
    harness_client_disconnect(c);
    before = ts_dir_bytes(ts_broker_db_path(b));
    for (int k = 1; k <= 20; k++) {
        char id[32];
        cJSON *resp;
        snprintf(id, sizeof id, "ann-%d", k);
        c = harness_client_connect(b, id, "ann");
        resp =
            harness_request(c, "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}", WAIT_MS);
        ASSERT(harness_sync_find(harness_response_only(resp), "g299", NULL, NULL, NULL));
        cJSON_Delete(resp);
        harness_client_disconnect(c);
    }
    after = ts_dir_bytes(ts_broker_db_path(b));
    ts_log("20 client ids counting 300 groups: store %llu -> %llu bytes",
           (unsigned long long)before, (unsigned long long)after);
    ASSERTF(after - before < 64 * 1024, "the store grew by %llu bytes",
            (unsigned long long)(after - before));
    for (int i = 0; i < 300; i++)
        free((void *)topics[i]);
    free(topics);
    ts_broker_destroy(b);
}

/* A damaged write-ahead log: LevelDB would drop the damaged block and the
 * acknowledged messages in it, and give their ids again. The store refuses
 * to open instead, and the broker says why. */
static void case_corrupt_log(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = harness_client_connect(b, "alice", NULL);
    char path[600] = "";
    int rc;

    for (int i = 0; i < 30; i++)
        harness_client_publish(alice, "chat/room1", "{\"body\":\"acknowledged and kept\"}", 1);
    harness_client_destroy(alice);
    ts_broker_kill(b); /* the messages are in the log only */
    ASSERTF(ts_find_file(ts_broker_db_path(b), ".log", false, path, sizeof path),
            "no write-ahead log in the store");
    {
        size_t len = 0;
        char *bytes = ts_read_file(path, &len);
        ASSERT(bytes != NULL && len > 1000);
        bytes[len / 2] = (char)~bytes[len / 2];
        ts_write_file(path, bytes, len);
        free(bytes);
    }
    rc = ts_broker_try_restart(b);
    ASSERTF(rc != 0, "the broker started on a damaged store");
    ASSERTF(ts_broker_log_count(b, "cannot open store") >= 1 &&
                ts_broker_log_count(b, "Corruption") >= 1,
            "no log line naming the store and the damage");
    ts_broker_destroy(b);
}

/* ===========================================================================
 * main
 * ========================================================================= */

/* ===========================================================================
 * Issue 21, 8. Members of anonymous devices are not kept for ever
 * ========================================================================= */

#define DAY_S 86400L

/* Waits (at most 10 s) until the broker's log holds needle. */
static void wait_log(const ts_broker *b, const char *needle)
{
    for (int i = 0; i < 500 && ts_broker_log_count(b, needle) == 0; i++) {
        ts_sleep_ms(20);
    }
    ASSERTF(ts_broker_log_count(b, needle) > 0, "the broker did not log \"%s\" in 10 s", needle);
}

/* The members of group as `receipts` answers c: their number, and whether
 * one of them is named (or, when names_verified, "~"-named) after id. */
static int64_t receipts_members(harness_client *c, const char *group, const char *id, bool *listed)
{
    char req[160];
    snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"receipts\",\"group\":\"%s\"}]}",
             group);
    cJSON *resp = harness_request(c, req, WAIT_MS);
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "receipts", group);
    const cJSON *reads = cJSON_GetObjectItemCaseSensitive(e, "reads");
    int64_t n = harness_json_int(e, "members");
    const cJSON *r;
    *listed = false;
    cJSON_ArrayForEach(r, reads)
    {
        *listed = *listed || strstr(r->string, id) != NULL;
    }
    ASSERTF(cJSON_GetArraySize(reads) == n, "receipts lists %d members of %lld",
            cJSON_GetArraySize(reads), (long long)n);
    cJSON_Delete(resp);
    return n;
}

static void case_anonymous_members_expire(void)
{
    /* Open groups on a broker without usernames (the tests' default):
     * every client id that uses room1 becomes a member. */
    ts_broker *b = ts_broker_start(NULL);
    /* Closed groups need usernames the broker verifies: a password_file
     * with old-1 (its name as password). */
    ts_broker_conf closed_conf = {.users = (const char *const[]){"old-1", NULL}};
    ts_broker *closed = ts_broker_start_conf(&closed_conf);
    harness_client *old = harness_client_connect(b, "old-1", NULL);
    harness_client *sensor = harness_client_connect(b, "sensor-1", NULL);
    harness_client *idle = harness_client_connect(b, "idle-1", NULL);
    harness_client *c;
    bool listed = false;

    harness_client_subscribe(old, "chat/room1", 1);
    harness_client_publish(old, "chat/room1", "one", 1);
    harness_ack(old, "room1", 1, 1);
    /* publishing joins too: a sensor that never subscribes */
    harness_client_publish(sensor, "chat/room1", "21.5", 1);
    harness_client_subscribe(idle, "chat/room1", 1);
    ASSERT(receipts_members(idle, "room1", "sensor-1", &listed) == 3 && listed);
    harness_client_disconnect(old);
    harness_client_disconnect(sensor);
    harness_client_disconnect(idle);
    ts_broker_stop(b);
    c = harness_client_connect(closed, "old-1", "old-1");
    harness_client_subscribe(c, "chat/room1", 1);
    harness_client_disconnect(c);
    ts_broker_stop(closed);

    /* 60 days on, without catch-ups: idle-1 subscribes (with replay false
     * that marks nothing) and stays, idle. Being online is a use: the
     * plugin marks it used. */
    ts_broker_shift_clock(b, 60 * DAY_S);
    ts_broker_set_opts(b, (const char *const[]){"replay false", NULL});
    ts_broker_restart(b);
    idle = harness_client_connect(b, "idle-1", NULL);
    harness_client_subscribe(idle, "chat/room1", 1);
    wait_log(b, "devices online in a group marked used");
    harness_client_disconnect(idle);
    ts_broker_stop(b);

    /* 91 days after the first run: the sweep takes old-1 and sensor-1,
     * their cursors and their memberships; idle-1, used on day 60, stays. */
    ts_broker_shift_clock(b, 91 * DAY_S);
    ts_broker_set_opts(b, NULL);
    ts_broker_restart(b);
    wait_log(b, "dropped 2 device cursors and 2 members (open groups");
    idle = harness_client_connect(b, "idle-1", NULL);
    ASSERT(receipts_members(idle, "room1", "idle-1", &listed) == 1 && listed);

    /* old-1 comes back and joins again by subscribing: a new member, from
     * the head on (nothing of its old membership is left), live again. */
    old = harness_client_connect(b, "old-1", NULL);
    harness_client_subscribe(old, "chat/room1", 1);
    ASSERT(receipts_members(idle, "room1", "old-1", &listed) == 2 && listed);
    harness_client_publish(idle, "chat/room1", "three", 1);
    harness_msg *m = harness_client_receive(old, WAIT_MS);
    ASSERTF(m && strstr(m->payload, "\"id\":3,") != NULL, "old-1 got %s",
            m ? m->payload : "nothing");
    harness_msg_free(m);
    harness_client_disconnect(old);
    harness_client_disconnect(idle);

    /* Closed groups: an admin put the members there; the sweep drops the
     * cursor and keeps the member. */
    ts_broker_shift_clock(closed, 91 * DAY_S);
    ts_broker_set_opts(closed, (const char *const[]){"open_groups false", NULL});
    ts_broker_restart(closed);
    wait_log(closed, "dropped 1 device cursors and 0 members (closed groups");
    c = harness_client_connect(closed, "old-1", "old-1");
    ASSERT(receipts_members(c, "room1", "old-1", &listed) == 1 && listed);
    harness_client_disconnect(c);
    ts_log("open groups: 2 of 3 members went with their devices, one online stayed; closed "
           "groups kept theirs");
    ts_broker_destroy(closed);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"bad_block", case_bad_block},
    {"cid_expiry", case_cid_expiry},
    {"retention_steps", case_retention_steps},
    {"incarnation", case_incarnation},
    {"sync_no_cursors", case_sync_no_cursors},
    {"corrupt_log", case_corrupt_log},
    {"anonymous_members_expire", case_anonymous_members_expire},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_sec_", cases, sizeof cases / sizeof cases[0]);
}
