/* integ_faults: what an operator fears about the disk, against the real
 * broker with its store on a small tmpfs the test mounts (root only, as in
 * CI; elsewhere the test says why and exits 77, skipped):
 *
 *   disk_full   the store's disk fills up: publishes are refused with
 *               "storage error" (0x87 to MQTT 5), nobody is disconnected,
 *               reads go on, nothing stored is damaged; when the disk has
 *               room again, publishing resumes by itself, with the next id
 *   full_start  a disk already full at start: the broker runs without the
 *               store (a publish and a subscribe are refused, 0x87, the
 *               subscribe's entry naming its group) and opens it once the
 *               disk has room; the refused subscriber then subscribes again
 *
 * and the write errors that do not mend themselves, made in a running
 * broker's store and found by a compaction (the admin command `compact`),
 * whose failure LevelDB keeps as its background error:
 *
 *   write_io       the store's directory becomes read-only (the broker runs
 *                  as nobody, so that the permission counts), LevelDB cannot
 *                  create the compaction's table: publishes are refused with
 *                  "storage error", reads go on, the log says why, and it
 *                  stays so once the directory is writable again, until a
 *                  restart; then nothing stored is missing and ids go on
 *   write_corrupt  a block of a table is garbled under the running broker;
 *                  the compaction's checksum check finds it: the same, and
 *                  the messages outside the damaged block still read
 */
#include "integ_disk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAIT_MS 5000

static char g_mount[512];

static void unmount(void);

#define MOUNT_MS 10000 /* mount and umount of a small tmpfs */

/* Mounts a tmpfs of that size on dir; returns the exit status of mount (0:
 * mounted). */
static int mount_tmpfs(const char *dir, const char *size)
{
    char opt[64];
    char *argv[] = {"mount", "-t", "tmpfs", "-o", opt, "tmpfs", (char *)dir, NULL};
    int status;

    snprintf(opt, sizeof opt, "size=%s", size);
    if ((status = ts_run(argv, NULL, NULL, NULL, MOUNT_MS)) != 0)
        return status;
    snprintf(g_mount, sizeof g_mount, "%s", dir);
    /* Unmounted however the test ends: a failure exits at once. */
    atexit(unmount);
    ts_on_fail(unmount);
    return 0;
}

static void remount(const char *opts)
{
    char opt[128];
    char *argv[] = {"mount", "-o", opt, g_mount, NULL};

    snprintf(opt, sizeof opt, "remount,%s", opts);
    ASSERTF(ts_run(argv, NULL, NULL, "/dev/stderr", MOUNT_MS) == 0, "cannot remount %s with %s",
            g_mount, opts);
}

static void unmount(void)
{
    char *argv[] = {"umount", g_mount, NULL};

    if (g_mount[0]) {
        if (ts_run(argv, NULL, NULL, "/dev/stderr", MOUNT_MS) != 0)
            ts_log("cannot unmount %s", g_mount);
        g_mount[0] = '\0';
    }
}

static harness_client *connect5(ts_broker *b, const char *id)
{
    harness_client_opts o = {.client_id = id, .mqtt_version = 5};
    harness_client *c = harness_client_connect_opts(b, &o);
    harness_client_subscribe(c, HARNESS_RESPONSE_TOPIC, 1);
    return c;
}

/* Every id 1..head is there once, in order, with its own body. */
static void expect_intact(harness_client *c, int64_t head)
{
    harness_expect_store(c, "room1", head);
}

/* A device catches up on every message while the disk is full: its acks
 * cannot be stored ("storage error", ignored here) but move its pages on. */
static void catch_up_while_full(harness_client *c, int64_t head)
{
    int64_t next = 1, deadline = ts_now_ms() + 30000;
    harness_client_subscribe(c, HARNESS_RESPONSE_TOPIC, 0);
    harness_client_subscribe(c, "chat/room1", 0);
    while (next <= head) {
        harness_msg *m = harness_client_receive(c, WAIT_MS);
        cJSON *resp;
        const cJSON *e;
        ASSERTF(m != NULL && ts_now_ms() < deadline, "catch-up stopped at %lld of %lld",
                (long long)next, (long long)head);
        resp = harness_json_object(m);
        e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "responses"), 0);
        if (e != NULL && strcmp(harness_json_str(e, "command"), "replay") == 0) {
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
            const cJSON *env;
            cJSON_ArrayForEach(env, msgs)
            {
                ASSERTF(harness_json_int(env, "id") == next, "id %lld, expected %lld",
                        (long long)harness_json_int(env, "id"), (long long)next);
                next++;
            }
            harness_ack(c, "room1", next - 1, 0);
        } else if (e == NULL || strcmp(harness_json_str(e, "command"), "ack") != 0) {
            FAILF("unexpected message during the catch-up: %s", m->payload);
        }
        cJSON_Delete(resp);
        harness_msg_free(m);
    }
    ts_log("a device caught up on %lld messages while the disk was full", (long long)head);
}

static ts_broker *start_on_tmpfs(const char *size, const char *const *opts)
{
    ts_broker_conf conf = {.plugin_opts = opts};
    ts_broker *b;
    int status;

    if (geteuid() != 0)
        ts_skip("mounting a tmpfs needs root (CI runs as root)");
    b = ts_broker_create(&conf);
    if ((status = mount_tmpfs(ts_broker_db_path(b), size)) != 0) {
        ts_broker_destroy(b);
        ts_skip("cannot mount a tmpfs here (mount: exit status %d)", status);
    }
    return b;
}

static void case_disk_full(void)
{
    ts_broker *b = start_on_tmpfs("3m", NULL);
    harness_client *alice, *bob;
    int stored, next;
    cJSON *resp;

    ts_broker_launch(b);
    alice = connect5(b, "alice");
    bob = harness_client_connect(b, "bob", NULL);
    harness_client_subscribe(bob, "chat/room1", 1);
    harness_client_disconnect(bob);
    stored = disk_publish_until_refused(alice, 1, WAIT_MS);
    ts_log("the disk filled up after %d messages", stored);
    ASSERT(stored > 10);
    ASSERT(!harness_client_is_lost(alice));
    /* Reads go on: history, fetch, and a catch-up of a device. */
    expect_intact(alice, stored);
    bob = harness_client_connect(b, "bob", NULL);
    catch_up_while_full(bob, stored);
    /* Room again: publishing resumes by itself, with the next id. */
    remount("size=64m");
    next = disk_publish_until_accepted(alice, stored + 1, false, 20000, WAIT_MS);
    resp = harness_request(
        alice, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\",\"limit\":1}]}",
        WAIT_MS);
    ASSERTF(harness_json_int(harness_response_only(resp), "head") == stored + 1,
            "head %lld after the disk had room, expected %d",
            (long long)harness_json_int(harness_response_only(resp), "head"), stored + 1);
    cJSON_Delete(resp);
    ts_log("publishing resumed with id %d (message %d)", stored + 1, next);
    /* bob reads it all once more (alice's answer budget went on the first
     * read: see docs/protocol.md, Bounds), once the answers to his acks of
     * the full disk are in. */
    for (int i = 0; i < 10000; i++) {
        harness_msg *m = harness_client_receive(bob, 300);
        if (m == NULL)
            break;
        /* The live message 1419, or an ack's error entry. */
        ASSERTF(strcmp(m->topic, "chat/room1") == 0 ||
                    strstr(m->payload, "\"command\":\"ack\"") != NULL,
                "unexpected %s", m->payload);
        harness_msg_free(m);
    }
    expect_intact(bob, stored + 1);
    ASSERT(ts_broker_log_count(b, "publishing resumes") == 1);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_stop(b);
    unmount();
    ts_broker_destroy(b);
}

static void case_full_start(void)
{
    ts_broker *b = start_on_tmpfs("256k", NULL);
    harness_client *alice, *bob;
    char path[600], of[620];
    char *dd[] = {"dd", "if=/dev/zero", of, "bs=4k", NULL};

    /* Fill it to the last byte: dd fails when the disk is full, as meant. */
    snprintf(of, sizeof of, "of=%s/filler", ts_broker_db_path(b));
    (void)ts_run(dd, NULL, NULL, NULL, MOUNT_MS);
    ts_broker_launch(b);
    ASSERT(ts_broker_log_count(b, "running without it") == 1);
    alice = connect5(b, "alice");
    ASSERTF(disk_publish_n(alice, 1) == 0x87, "a publish without a store was accepted");
    disk_expect_storage_error(alice, WAIT_MS);
    /* Whether bob may read room1 is the store's to say: his subscribe is
     * refused as a whole, its entry naming the group. */
    bob = connect5(b, "bob");
    int rc = harness_client_try_subscribe(bob, "chat/room1", 1);
    ASSERTF(rc == 0x87, "a subscribe without a store got reason 0x%x", (unsigned)rc);
    cJSON *resp = harness_client_response(bob, WAIT_MS);
    harness_expect_error(harness_response_only(resp), "subscribe", "room1", NULL, "storage error");
    cJSON_Delete(resp);
    snprintf(path, sizeof path, "%s/filler", ts_broker_db_path(b));
    ASSERT(unlink(path) == 0);
    remount("size=64m");
    disk_publish_until_accepted(alice, 2, false, 20000, WAIT_MS);
    expect_intact(alice, 1);
    /* A refused subscribe is not remembered: bob subscribes again and
     * reads what comes next. */
    harness_client_subscribe(bob, "chat/room1", 1);
    harness_barrier(bob);
    rc = disk_publish_n(alice, 3);
    ASSERTF(rc == 0 || rc == 0x10, "the publish after the store opened: reason 0x%x", (unsigned)rc);
    harness_msg *m = harness_client_receive(bob, WAIT_MS);
    ASSERTF(m != NULL, "bob: no delivery once the store opened");
    ASSERTF(strcmp(m->topic, "chat/room1") == 0, "bob: a delivery on %s", m->topic);
    harness_msg_free(m);
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    unmount();
    ts_broker_destroy(b);
}

/* ===========================================================================
 * Write errors that stay: an I/O error and damage found by a compaction
 * ========================================================================= */

#define BIG 200 /* messages of about 2 KB in "bad": tables of 400 KB */
#define SMALL 5 /* messages in "good" (keys after "bad") */

static harness_client *admin5(ts_broker *b)
{
    harness_client_opts o = {.client_id = "alice", .username = "alice", .mqtt_version = 5};
    harness_client *c = harness_client_connect_opts(b, &o);
    harness_client_subscribe(c, HARNESS_RESPONSE_TOPIC, 1);
    return c;
}

/* Stores BIG incompressible messages in "bad" and SMALL in "good", then
 * restarts the broker, so that they are in a table file (LevelDB writes its
 * log into one when it opens). */
static void fill_tables(ts_broker *b)
{
    harness_client *alice = admin5(b);

    disk_publish_incompressible(alice, "chat/bad", BIG, 11, WAIT_MS);
    for (int i = 0; i < SMALL; i++)
        harness_client_publish(alice, "chat/good", "{\"body\":\"fine\"}", 1);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    ts_broker_restart(b);
}

/* Asks for a compaction, waits (at most 10 s) until the job has ended and
 * expects it to have failed, the log saying why. */
static void compact(ts_broker *b, harness_client *alice)
{
    cJSON *resp = harness_request(alice, "{\"commands\":[{\"command\":\"compact\"}]}", WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "compact", NULL);
    cJSON_Delete(resp);
    for (int i = 0; i < 500; i++) {
        const cJSON *job;
        bool running;
        resp = harness_request(alice, "{\"commands\":[{\"command\":\"stats\"}]}", WAIT_MS);
        job = cJSON_GetObjectItemCaseSensitive(harness_response_only(resp), "job");
        running = strcmp(harness_json_str(job, "state"), "running") == 0;
        if (!running) {
            ASSERTF(strcmp(harness_json_str(job, "state"), "failed") == 0,
                    "the compaction's job ended \"%s\"", harness_json_str(job, "state"));
            cJSON_Delete(resp);
            /* The tick logs the job's end. */
            for (int k = 0; k < 100 && ts_broker_log_count(b, "compaction failed") == 0; k++)
                ts_sleep_ms(50);
            ASSERT(ts_broker_log_count(b, "compaction failed") == 1);
            return;
        }
        cJSON_Delete(resp);
        ts_sleep_ms(20);
    }
    FAILF("the compaction did not end in 10 s");
}

/* Publishes to group until one is refused (LevelDB reports its background
 * error to the first write after the compaction failed; the plugin's own
 * cursor writes may meet it first); returns the messages accepted. */
static int publish_until_refused(harness_client *c, const char *group)
{
    char topic[64];
    snprintf(topic, sizeof topic, "chat/%s", group);
    for (int n = 0; n < 50; n++) {
        int rc = harness_client_publish_bytes(c, topic, "{\"body\":\"after\"}", 16, 1, NULL);
        if (rc == 0x87) {
            disk_expect_storage_error(c, WAIT_MS);
            return n;
        }
        ASSERTF(rc == 0 || rc == 0x10, "publish: reason 0x%x", (unsigned)rc);
        ts_sleep_ms(100);
    }
    FAILF("publishes were still accepted after the store's write error");
}

/* Publishes are refused (and say so), again after the chores had the time
 * to reopen a store that could mend (they do not, for this error). */
static void expect_refused_for_good(harness_client *c, const char *group)
{
    char topic[64];
    snprintf(topic, sizeof topic, "chat/%s", group);
    for (int i = 0; i < 3; i++) {
        int rc = harness_client_publish_bytes(c, topic, "{\"body\":\"x\"}", 12, 1, NULL);
        ASSERTF(rc == 0x87, "publish %d after the write error: reason 0x%x", i, (unsigned)rc);
        disk_expect_storage_error(c, WAIT_MS);
        ts_sleep_ms(1500);
    }
}

static void case_write_io(void)
{
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins alice", NULL},
                           .users = ts_test_users,
                           .run_as = "nobody"};
    ts_broker *b;
    harness_client *alice;
    int accepted;

    if (geteuid() != 0)
        ts_skip("needs root: the broker runs as nobody");
    b = ts_broker_start_conf(&conf);
    fill_tables(b);
    alice = admin5(b);
    ASSERT(chmod(ts_broker_db_path(b), 0555) == 0);
    compact(b, alice);
    accepted = publish_until_refused(alice, "good");
    ts_log("the compaction failed; %d publish(es) accepted before the refusal", accepted);
    ASSERT(!harness_client_is_lost(alice));
    /* Reads go on. */
    harness_expect_store(alice, "bad", BIG);
    harness_expect_store(alice, "good", SMALL + accepted);
    ASSERTF(ts_broker_log_count(b, "Permission denied") >= 1, "the log does not say why");
    ASSERT(ts_broker_log_count(b, "until the broker restarts") == 1);
    /* Not a full disk: writable again, it stays refused until a restart. */
    ASSERT(chmod(ts_broker_db_path(b), 0755) == 0);
    expect_refused_for_good(alice, "good");
    ASSERT(ts_broker_log_count(b, "publishing resumes") == 0);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    ts_broker_restart(b);
    alice = admin5(b);
    harness_expect_store(alice, "bad", BIG);
    harness_expect_store(alice, "good", SMALL + accepted);
    {
        int rc =
            harness_client_publish_bytes(alice, "chat/good", "{\"body\":\"again\"}", 16, 1, NULL);
        ASSERTF(rc == 0 || rc == 0x10, "publish after the restart: reason 0x%x", (unsigned)rc);
    }
    harness_expect_store(alice, "good", SMALL + accepted + 1);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

static void case_write_corrupt(void)
{
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins alice", NULL},
                           .users = ts_test_users};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client *alice;
    char table[512];
    int accepted;

    fill_tables(b);
    disk_largest_table(b, table, sizeof table);
    /* In place, under the running broker: LevelDB maps its tables, and
     * has read no block of "bad" since the restart. */
    disk_garble(table);
    alice = admin5(b);
    compact(b, alice);
    accepted = publish_until_refused(alice, "good");
    ASSERT(!harness_client_is_lost(alice));
    ASSERTF(ts_broker_log_count(b, "Corruption") >= 1, "the log does not say why");
    ASSERT(ts_broker_log_count(b, "until the broker restarts") == 1);
    /* Reads go on, outside the damaged block. */
    harness_expect_store(alice, "good", SMALL + accepted);
    expect_refused_for_good(alice, "good");
    harness_client_disconnect(alice);
    /* The failed compaction kept its input: the check at start still finds
     * the damage, and refuses the store until it is repaired. */
    ts_broker_stop(b);
    ASSERTF(ts_broker_try_restart(b) != 0, "the broker started on the damaged store");
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"disk_full", case_disk_full},
    {"full_start", case_full_start},
    {"write_io", case_write_io},
    {"write_corrupt", case_write_corrupt},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_fault_", cases, sizeof cases / sizeof cases[0]);
}
