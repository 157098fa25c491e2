/* test_interleave.c: the library's ordering where the broker does not order.
 *
 *   A. A listener comes back to a backlog of 600 messages (pages of 7, two in
 *      flight) while three senders keep publishing live at QoS 0, 1 and 2,
 *      which Mosquitto delivers in no common order: every id is shown once,
 *      in order, and every message arrives.
 *   B. With plugin_opt_replay false nothing is pushed: the library fetches
 *      what a replay would have brought; and a state file behind the
 *      device's cursor (acked > shown) is filled by a fetch too.
 *   C. With retention_count 50 a listener that missed 200 messages is told
 *      the older ones are gone (truncated) and shows the 50 kept.
 */
#include "ct.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <MQTTAsync.h>

#include "chat_client.h"

#define MAX_BODIES 4000

struct recorder {
    const char *name;
    pthread_mutex_t mu;
    uint64_t next_id; /* expected next; 0: any first id */
    size_t got;
    uint64_t last_id;
    int seen[MAX_BODIES]; /* per body index (see body_index) */
    char bad[512];
    size_t catchups, truncated;
    uint64_t truncated_at;
};

/* "a17" -> 17, "b17" -> 1017, "c17" -> 2017, "d17" -> 3017; -1 otherwise. */
static int body_index(const char *body)
{
    int k;

    if (body == NULL || body[0] < 'a' || body[0] > 'd' || sscanf(body + 1, "%d", &k) != 1 ||
        k < 0 || k >= 1000)
        return -1;
    return (body[0] - 'a') * 1000 + k;
}

static bool on_message(void *arg, const chat_client_message *m)
{
    struct recorder *r = arg;
    int i = body_index(m->body);

    pthread_mutex_lock(&r->mu);
    if (r->next_id != 0 && m->id != r->next_id)
        ct_violation(r->bad, sizeof r->bad, "%s: id %" PRIu64 " where %" PRIu64 " was due", r->name,
                     m->id, r->next_id);
    if (i < 0)
        ct_violation(r->bad, sizeof r->bad, "%s: unexpected message %s", r->name, m->json);
    else if (++r->seen[i] > 1)
        ct_violation(r->bad, sizeof r->bad, "%s: %s shown twice", r->name, m->body);
    r->next_id = m->id + 1;
    r->last_id = m->id;
    r->got++;
    pthread_mutex_unlock(&r->mu);
    return true;
}

static void on_event(void *arg, const chat_client_event *ev)
{
    struct recorder *r = arg;

    pthread_mutex_lock(&r->mu);
    if (ev->type == CHAT_CLIENT_EV_CATCHUP)
        r->catchups++;
    if (ev->type == CHAT_CLIENT_EV_TRUNCATED) {
        r->truncated++;
        r->truncated_at = ev->id;
    }
    pthread_mutex_unlock(&r->mu);
    if (ev->type == CHAT_CLIENT_EV_ERROR || ev->type == CHAT_CLIENT_EV_SEND_REFUSED)
        ts_log("%s: %s", r->name, ev->reason ? ev->reason : "?");
}

static void recorder_init(struct recorder *r, const char *name, uint64_t next_id)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    r->name = name;
    r->next_id = next_id;
}

static size_t got(struct recorder *r)
{
    size_t n;

    pthread_mutex_lock(&r->mu);
    n = r->got;
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* Waits (at most timeout_ms) until r has n messages; fails on a violation. */
static void wait_got(struct recorder *r, size_t n, int timeout_ms)
{
    int64_t deadline = ts_now_ms() + timeout_ms;

    while (got(r) < n && ts_now_ms() < deadline)
        ts_sleep_ms(20);
    pthread_mutex_lock(&r->mu);
    CHECK(r->bad[0] == '\0', "%s", r->bad);
    CHECK(r->got >= n, "%s: %zu of %zu messages after %d ms (last id %" PRIu64 ")", r->name, r->got,
          n, timeout_ms, r->last_id);
    pthread_mutex_unlock(&r->mu);
}

static void send_text(chat_client *c, const char *group, char letter, int k);
static void flush(chat_client *c);

/* Ends a phase without waiting for time to pass: s sends one last message
 * ("d0") to group, and r, which has n messages, must show it next. Since the
 * library shows a group's ids in order, r then showed everything before it,
 * and anything shown twice or out of order was seen. */
static void last_message(struct recorder *r, size_t n, chat_client *s, const char *group)
{
    send_text(s, group, 'd', 0);
    flush(s);
    wait_got(r, n + 1, 30000);
    pthread_mutex_lock(&r->mu);
    CHECK(r->got == n + 1 && r->seen[3000] == 1, "%s: %zu messages, the last one shown %d times",
          r->name, r->got, r->seen[3000]);
    pthread_mutex_unlock(&r->mu);
}

static chat_client *open_client(const ts_broker *b, const char *id, int version,
                                const char *state_name, struct recorder *r, int send_qos)
{
    chat_client_options o = {0};
    chat_client *c = NULL;
    char state[512];
    chat_client_err err;

    o.port = ts_broker_port(b);
    o.client_id = id;
    o.mqtt_version = version;
    o.send_qos = send_qos;
    o.gap_timeout_ms = 500;
    if (state_name != NULL)
        o.state_path = ct_path(state, sizeof state, state_name);
    if (r != NULL) {
        o.on_message = on_message;
        o.on_event = on_event;
        o.arg = r;
    }
    err = chat_client_create(&o, &c);
    CHECK(err == CHAT_CLIENT_OK, "create %s: %s", id, chat_client_reason());
    err = chat_client_connect(c, 10000);
    CHECK(err == CHAT_CLIENT_OK, "connect %s: %s", id, chat_client_reason());
    return c;
}

static void join(chat_client *c, const char *group)
{
    uint64_t head = 0;
    chat_client_err err = chat_client_join(c, group, NULL, &head);

    CHECK(err == CHAT_CLIENT_OK, "join %s: %s %s", group, chat_client_strerror(err),
          chat_client_reason());
}

static void send_text(chat_client *c, const char *group, char letter, int k)
{
    char body[32];
    chat_client_err err;

    snprintf(body, sizeof body, "%c%d", letter, k);
    err = chat_client_send(c, group, body, NULL, 0);
    CHECK(err == CHAT_CLIENT_OK, "send %s: %s", body, chat_client_strerror(err));
}

static void flush(chat_client *c)
{
    size_t refused = 1;
    chat_client_err err = chat_client_flush(c, 30000, &refused);

    CHECK(err == CHAT_CLIENT_OK && refused == 0, "flush: %s %s", chat_client_strerror(err),
          chat_client_reason());
}

/* ---------------------------------------------------------------------------
 * A raw Paho publisher at QoS 0, which the library never is
 * ------------------------------------------------------------------------- */

static MQTTAsync raw_open(const ts_broker *b)
{
    MQTTAsync h;
    MQTTAsync_connectOptions o = MQTTAsync_connectOptions_initializer;
    char uri[64];
    int64_t deadline;

    snprintf(uri, sizeof uri, "tcp://127.0.0.1:%d", ts_broker_port(b));
    CHECK(MQTTAsync_create(&h, uri, "raw0", MQTTCLIENT_PERSISTENCE_NONE, NULL) == MQTTASYNC_SUCCESS,
          "MQTTAsync_create");
    o.cleansession = 1;
    CHECK(MQTTAsync_connect(h, &o) == MQTTASYNC_SUCCESS, "MQTTAsync_connect");
    deadline = ts_now_ms() + 10000;
    while (!MQTTAsync_isConnected(h) && ts_now_ms() < deadline)
        ts_sleep_ms(10);
    CHECK(MQTTAsync_isConnected(h), "raw publisher not connected");
    return h;
}

static void raw_send(MQTTAsync h, const char *group, char letter, int k)
{
    MQTTAsync_message m = MQTTAsync_message_initializer;
    char topic[160], body[32];
    int rc;

    snprintf(topic, sizeof topic, "chat/%s", group);
    snprintf(body, sizeof body, "%c%d", letter, k);
    m.payload = body;
    m.payloadlen = (int)strlen(body);
    m.qos = 0;
    rc = MQTTAsync_sendMessage(h, topic, &m, NULL);
    CHECK(rc == MQTTASYNC_SUCCESS, "raw publish: %s", MQTTAsync_strerror(rc));
}

/* ---------------------------------------------------------------------------
 * Phases
 * ------------------------------------------------------------------------- */

static void phase_a(void)
{
    const char *opts[] = {"page_size 7", "replay_window 2", NULL};
    ts_broker *b = ts_broker_start(opts);
    struct recorder *r = calloc(1, sizeof *r);
    chat_client *l, *s1, *s2;
    MQTTAsync raw;

    CHECK(r != NULL, "out of memory");
    recorder_init(r, "A", 1);
    s1 = open_client(b, "s1", 4, NULL, NULL, 1);
    s2 = open_client(b, "s2", 5, NULL, NULL, 2);
    raw = raw_open(b);
    /* The listener's device exists (cursor 0) but is away. */
    l = open_client(b, "listener", 4, "a.state", r, 0);
    join(l, "mix");
    chat_client_destroy(l);
    for (int k = 0; k < 200; k++) {
        send_text(s1, "mix", 'a', k);
        send_text(s2, "mix", 'b', k);
        raw_send(raw, "mix", 'c', k);
    }
    flush(s1);
    flush(s2);
    ts_log("A: 600 messages wait; the listener comes back while 600 more come live");
    l = open_client(b, "listener", 4, "a.state", r, 0);
    CHECK(chat_client_listen(l, "mix") == CHAT_CLIENT_OK, "listen");
    for (int k = 200; k < 400; k++) {
        send_text(s1, "mix", 'a', k);
        send_text(s2, "mix", 'b', k);
        raw_send(raw, "mix", 'c', k);
        if (k % 10 == 0)
            ts_sleep_ms(5);
    }
    flush(s1);
    flush(s2);
    wait_got(r, 1200, 60000);
    last_message(r, 1200, s1, "mix");
    for (int i = 0; i < 3000; i++)
        CHECK(r->seen[i] == ((i % 1000) < 400), "A: message %c%d seen %d times", 'a' + i / 1000,
              i % 1000, r->seen[i]);
    CHECK(r->catchups >= 10, "A: only %zu catch-up events for 86 pages", r->catchups);
    ts_log("A: 1200 messages once, in order (%zu catch-up events)", r->catchups);
    MQTTAsync_disconnect(raw, NULL);
    MQTTAsync_destroy(&raw);
    chat_client_destroy(l);
    chat_client_destroy(s1);
    chat_client_destroy(s2);
    ts_broker_destroy(b);
    free(r);
}

static void phase_b(void)
{
    const char *opts[] = {"replay false", NULL};
    ts_broker *b = ts_broker_start(opts);
    struct recorder *r = calloc(1, sizeof *r);
    chat_client *l, *s;
    char path[512];

    CHECK(r != NULL, "out of memory");
    recorder_init(r, "B", 1);
    s = open_client(b, "s", 5, NULL, NULL, 1);
    l = open_client(b, "puller", 5, "b.state", r, 0);
    join(l, "pull");
    chat_client_destroy(l);
    for (int k = 0; k < 150; k++)
        send_text(s, "pull", 'a', k);
    flush(s);
    l = open_client(b, "puller", 5, "b.state", r, 0);
    CHECK(chat_client_listen(l, "pull") == CHAT_CLIENT_OK, "listen");
    for (int k = 0; k < 50; k++)
        send_text(s, "pull", 'b', k);
    flush(s);
    wait_got(r, 200, 30000);
    ts_log("B: 200 messages pulled with fetch, once, in order");
    chat_client_destroy(l);

    /* A state file behind the cursor: the cursor says 200 were acked. */
    ts_write_text(ct_path(path, sizeof path, "b.state"), "150 pull\n");
    recorder_init(r, "B2", 151);
    l = open_client(b, "puller", 5, "b.state", r, 0);
    CHECK(chat_client_listen(l, "pull") == CHAT_CLIENT_OK, "listen");
    wait_got(r, 50, 30000);
    last_message(r, 50, s, "pull");
    CHECK(r->last_id == 201, "B2: last id %" PRIu64, r->last_id);
    ts_log("B: a stale state file (150, cursor 200) showed 151..200 again, once");
    chat_client_destroy(l);
    chat_client_destroy(s);
    ts_broker_destroy(b);
    free(r);
}

static void phase_c(void)
{
    const char *opts[] = {"retention_count 50", "page_size 20", NULL};
    ts_broker *b = ts_broker_start(opts);
    struct recorder *r = calloc(1, sizeof *r);
    chat_client *l, *s;

    CHECK(r != NULL, "out of memory");
    recorder_init(r, "C", 151);
    s = open_client(b, "s", 4, NULL, NULL, 1);
    l = open_client(b, "late", 4, "c.state", r, 0);
    join(l, "short");
    chat_client_destroy(l);
    for (int k = 0; k < 200; k++)
        send_text(s, "short", 'a', k);
    flush(s);
    l = open_client(b, "late", 4, "c.state", r, 0);
    CHECK(chat_client_listen(l, "short") == CHAT_CLIENT_OK, "listen");
    wait_got(r, 50, 30000);
    last_message(r, 50, s, "short");
    CHECK(r->last_id == 201, "C: last id %" PRIu64, r->last_id);
    CHECK(r->truncated == 1 && r->truncated_at == 151, "C: %zu truncated events, at %" PRIu64,
          r->truncated, r->truncated_at);
    ts_log("C: 150 removed by retention reported as truncated, 151..201 shown");
    chat_client_destroy(l);
    chat_client_destroy(s);
    ts_broker_destroy(b);
    free(r);
}

int main(void)
{
    ct_init("clients_interleave");
    phase_a();
    phase_b();
    phase_c();
    return ct_pass();
}
