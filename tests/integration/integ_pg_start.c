/* integ_pg_start: a broker whose PostgreSQL store cannot be opened when it
 * starts (docs/postgresql.md, failure modes). A cluster of the test's own
 * (tests/pg/pgcluster.sh) and a real broker with plugin_opt_store
 * postgresql. One case per run, named by argv[1]:
 *
 *   down       the cluster is stopped when the broker starts: the broker
 *              runs (a client connects), says once that it runs without its
 *              store; a QoS 1 publish is refused with "storage error" (0x87
 *              to MQTT 5) and so is a subscribe (its SUBACK 0x87, and the
 *              entry "storage error": membership cannot be read); once the cluster
 *              starts, the store opens by itself within the backoff's bound
 *              ("open: publishing resumes" once), a publish is stored with
 *              id 1 and delivered, and the relay of other brokers' messages
 *              runs (a second broker's publish reaches a subscriber here)
 *   readonly   the database is read-only when the broker starts
 *              (default_transaction_read_only): the same, until it takes
 *              writes again
 *   permanent  what retrying would not mend still stops the broker at start
 *              with one clear line: a database that does not exist, and a
 *              schema of another version
 *   sigterm    SIGTERM while the store is retried (the cluster down): the
 *              broker exits at once, with status 0 (and, in the sanitizer
 *              run, no report)
 *   hang       the same while an attempt hangs: a server that takes the
 *              connection and never answers (connect_timeout=2): the broker
 *              exits within that timeout
 */
#include "harness.h"
#include "pg.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 5000
/* The store opens at most this long after the database answers: a backoff
 * delay (2 s at most), one attempt, and a tick; with room for a slow CI. */
#define OPEN_MS 15000

#define RUNNING_WITHOUT "running without it until the database answers"
#define RESUMES "open: publishing resumes"

static char g_conninfo[256];
static char g_conninfo_opt[300];

/* A cluster with a database "chat", and the broker options naming it. */
static ts_pg *start_pg(void)
{
    ts_pg *pg = ts_pg_start(false);
    ts_pg_createdb(pg, "chat");
    snprintf(g_conninfo, sizeof g_conninfo, "host=127.0.0.1 port=%d user=postgres dbname=chat",
             ts_pg_port(pg));
    snprintf(g_conninfo_opt, sizeof g_conninfo_opt, "pg_conninfo %s", g_conninfo);
    return pg;
}

static ts_broker *create_broker(const char *conninfo_opt)
{
    const char *opts[] = {"store postgresql", conninfo_opt, NULL};
    ts_broker_conf conf = {.plugin_opts = opts};
    return ts_broker_create(&conf);
}

static harness_client *connect5(ts_broker *b, const char *id)
{
    harness_client_opts o = {.client_id = id, .mqtt_version = 5};
    harness_client *c = harness_client_connect_opts(b, &o);
    harness_client_subscribe(c, HARNESS_RESPONSE_TOPIC, 1);
    return c;
}

/* The one entry of the next response on c is command's "storage error". */
static void expect_storage_error(harness_client *c, const char *command)
{
    cJSON *resp = harness_client_response(c, WAIT_MS);
    const cJSON *e = harness_response_only(resp);
    ASSERTF(strcmp(harness_json_str(e, "command"), command) == 0, "command \"%s\", not %s",
            harness_json_str(e, "command"), command);
    ASSERTF(strcmp(harness_json_str(e, "error"), "storage error") == 0, "error \"%s\"",
            harness_json_str(e, "error"));
    cJSON_Delete(resp);
}

/* The next message on c's chat/room1 is the envelope of id with body. */
static void expect_delivered(harness_client *c, int64_t id, const char *body)
{
    harness_msg *m = harness_client_receive(c, WAIT_MS);
    ASSERTF(m != NULL, "%s: no delivery of id %lld", harness_client_id(c), (long long)id);
    ASSERTF(strcmp(m->topic, "chat/room1") == 0, "delivery on %s", m->topic);
    cJSON *env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == id, "delivered id %lld, expected %lld",
            (long long)harness_json_int(env, "id"), (long long)id);
    ASSERTF(strcmp(harness_json_str(env, "body"), body) == 0, "body \"%s\"",
            harness_json_str(env, "body"));
    cJSON_Delete(env);
    harness_msg_free(m);
}

static void case_down(void)
{
    ts_pg *pg = start_pg();
    ts_pg_stop(pg, "fast");
    ts_broker *b = create_broker(g_conninfo_opt);
    ts_broker_launch(b); /* fails the test unless the broker runs */
    ASSERT(ts_broker_log_count(b, RUNNING_WITHOUT) == 1);
    ASSERT(ts_broker_log_count(b, "cannot connect to PostgreSQL") >= 1);
    harness_client *alice = connect5(b, "alice");
    harness_client *bob = connect5(b, "bob");

    /* Everything that needs the store is refused, as on a disk full at
     * start: a publish, and the catch-up of a subscribe. */
    const char *msg = "{\"cid\":\"c-1\",\"body\":\"hello\"}";
    int rc = harness_client_publish_bytes(alice, "chat/room1", msg, strlen(msg), 1, NULL);
    ASSERTF(rc == 0x87, "a publish without a store got reason 0x%x", (unsigned)rc);
    expect_storage_error(alice, "publish");
    /* The subscription is refused too: whether bob may read room1 is
     * the store's to say. */
    rc = harness_client_try_subscribe(bob, "chat/room1", 1);
    ASSERTF(rc == 0x87, "a subscribe without a store got reason 0x%x", (unsigned)rc);
    expect_storage_error(bob, "subscribe");
    ASSERT(ts_broker_log_count(b, RESUMES) == 0);

    /* The database answers: the store opens by itself. */
    ts_pg_restart(pg);
    int64_t t0 = ts_now_ms();
    ts_broker_wait_log(b, RESUMES, 1, OPEN_MS);
    ts_log("the store opened %lld ms after the database started", (long long)(ts_now_ms() - t0));
    /* A refused subscribe is not remembered: bob subscribes again. */
    harness_client_subscribe(bob, "chat/room1", 1);
    harness_barrier(bob);
    msg = "{\"cid\":\"c-2\",\"body\":\"back\"}";
    rc = harness_client_publish_bytes(alice, "chat/room1", msg, strlen(msg), 1, NULL);
    ASSERTF(rc == 0, "the publish after the store opened got reason 0x%x", (unsigned)rc);
    expect_delivered(bob, 1, "back");
    harness_expect_store(alice, "room1", 1);

    /* What a start does once the store is open ran too: the relay of a
     * shared store, which brings a second broker's messages here. */
    ts_broker *b2 = create_broker(g_conninfo_opt);
    ts_broker_launch(b2);
    ASSERT(ts_broker_log_count(b2, RUNNING_WITHOUT) == 0);
    harness_client *carol = connect5(b2, "carol");
    msg = "{\"cid\":\"c-3\",\"body\":\"from b2\"}";
    rc = harness_client_publish_bytes(carol, "chat/room1", msg, strlen(msg), 1, NULL);
    ASSERTF(rc == 0 || rc == 0x10, "the publish on the second broker got reason 0x%x",
            (unsigned)rc);
    expect_delivered(bob, 2, "from b2");

    ASSERT(ts_broker_log_count(b, RESUMES) == 1);
    ASSERT(ts_broker_log_count(b, RUNNING_WITHOUT) == 1);
    harness_client_disconnect(carol);
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_destroy(b2);
    ts_broker_destroy(b);
    ts_pg_destroy(pg);
}

/* Runs SQL in the cluster's database postgres (what database chat itself
 * may not take). */
static void sql_admin(const ts_pg *pg, const char *text)
{
    char ci[128];
    snprintf(ci, sizeof ci, "host=127.0.0.1 port=%d user=postgres dbname=postgres", ts_pg_port(pg));
    ts_pg_run((const char *const[]){"sql", ci, text, NULL}, NULL);
}

static void case_readonly(void)
{
    ts_pg *pg = start_pg();
    sql_admin(pg, "ALTER DATABASE chat SET default_transaction_read_only = on");
    ts_broker *b = create_broker(g_conninfo_opt);
    ts_broker_launch(b);
    ASSERT(ts_broker_log_count(b, RUNNING_WITHOUT) == 1);
    ASSERT(ts_broker_log_count(b, "cannot write to PostgreSQL") >= 1);
    harness_client *alice = connect5(b, "alice");
    const char *msg = "{\"cid\":\"c-1\",\"body\":\"hello\"}";
    int rc = harness_client_publish_bytes(alice, "chat/room1", msg, strlen(msg), 1, NULL);
    ASSERTF(rc == 0x87, "a publish without a store got reason 0x%x", (unsigned)rc);
    expect_storage_error(alice, "publish");

    sql_admin(pg, "ALTER DATABASE chat RESET default_transaction_read_only");
    ts_broker_wait_log(b, RESUMES, 1, OPEN_MS);
    msg = "{\"cid\":\"c-2\",\"body\":\"writable\"}";
    rc = harness_client_publish_bytes(alice, "chat/room1", msg, strlen(msg), 1, NULL);
    ASSERTF(rc == 0 || rc == 0x10, "the publish after the store opened got reason 0x%x",
            (unsigned)rc);
    harness_expect_store(alice, "room1", 1);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
    ts_pg_destroy(pg);
}

static void case_permanent(void)
{
    ts_pg *pg = start_pg();
    char opt[300];

    /* A database that does not exist: the server answers and refuses it,
     * which only an operator mends (docs/postgresql.md). */
    snprintf(opt, sizeof opt, "pg_conninfo host=127.0.0.1 port=%d user=postgres dbname=nosuchdb",
             ts_pg_port(pg));
    ts_broker *b = create_broker(opt);
    ASSERTF(ts_broker_try_launch(b) != 0, "the broker started on a database that does not exist");
    ASSERT(ts_broker_log_count(b, "cannot open store \"in PostgreSQL\": cannot connect to "
                                  "PostgreSQL:") == 1);
    ASSERT(ts_broker_log_count(b, "nosuchdb") >= 1);
    ASSERT(ts_broker_log_count(b, RUNNING_WITHOUT) == 0);
    ts_broker_destroy(b);

    /* A schema of another version. */
    b = create_broker(g_conninfo_opt);
    ts_broker_launch(b);
    ts_broker_stop(b);
    ts_pg_run((const char *const[]){"sql", g_conninfo,
                                    "UPDATE chat_meta SET value = '999' WHERE name = 'schema'",
                                    NULL},
              NULL);
    ASSERTF(ts_broker_try_restart(b) != 0, "the broker started on a schema of another version");
    ASSERT(ts_broker_log_count(b, "schema has another version") == 1);
    ASSERT(ts_broker_log_count(b, RUNNING_WITHOUT) == 0);
    ts_broker_destroy(b);
    ts_pg_destroy(pg);
}

/* SIGTERM while the opener retries: ts_broker_stop fails the test unless
 * the broker exits with status 0 (no sanitizer report); within limit_ms. */
static void stop_within(ts_broker *b, int64_t limit_ms)
{
    int64_t t0 = ts_now_ms();
    ts_broker_stop(b);
    int64_t took = ts_now_ms() - t0;
    ts_log("the broker exited %lld ms after SIGTERM", (long long)took);
    ASSERTF(took < limit_ms, "the broker took %lld ms to exit (at most %lld)", (long long)took,
            (long long)limit_ms);
}

static void case_sigterm(void)
{
    ts_pg *pg = start_pg();
    ts_pg_stop(pg, "fast");
    ts_broker *b = create_broker(g_conninfo_opt);
    ts_broker_launch(b);
    ASSERT(ts_broker_log_count(b, RUNNING_WITHOUT) == 1);
    /* The opener's own attempts have failed (logged as an outage's). */
    ts_broker_wait_log(b, "opening the store: cannot connect to PostgreSQL", 1, WAIT_MS);
    harness_client *alice = connect5(b, "alice");
    harness_client_disconnect(alice);
    stop_within(b, 3000);
    ts_broker_destroy(b);
    ts_pg_destroy(pg);
}

static void case_hang(void)
{
    /* A listening socket that never accepts: the kernel completes the TCP
     * handshake, and libpq waits for an answer to its startup packet. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    char opt[300];

    ASSERT(s >= 0);
    ASSERT(bind(s, (struct sockaddr *)&a, sizeof a) == 0);
    ASSERT(listen(s, 128) == 0);
    ASSERT(getsockname(s, (struct sockaddr *)&a, &alen) == 0);
    snprintf(opt, sizeof opt,
             "pg_conninfo host=127.0.0.1 port=%d user=postgres dbname=chat connect_timeout=2",
             ntohs(a.sin_port));
    ts_broker *b = create_broker(opt);
    ts_broker_launch(b); /* after one attempt of 2 s on the broker's thread */
    ASSERT(ts_broker_log_count(b, RUNNING_WITHOUT) == 1);
    harness_client *alice = connect5(b, "alice");
    const char *msg = "{\"cid\":\"c-1\",\"body\":\"hello\"}";
    int rc = harness_client_publish_bytes(alice, "chat/room1", msg, strlen(msg), 1, NULL);
    ASSERTF(rc == 0x87, "a publish without a store got reason 0x%x", (unsigned)rc);
    expect_storage_error(alice, "publish");
    harness_client_disconnect(alice);
    /* An attempt of the opener is (most likely) waiting now: the cleanup
     * waits for it, at most connect_timeout. */
    stop_within(b, 4500);
    ts_broker_destroy(b);
    close(s);
}

static const ts_case cases[] = {
    {"down", case_down},       {"readonly", case_readonly}, {"permanent", case_permanent},
    {"sigterm", case_sigterm}, {"hang", case_hang},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_pg_start_", cases, sizeof cases / sizeof cases[0]);
}
