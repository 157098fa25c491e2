/* test_multi.c: several brokers, one chat (issue 15). A PostgreSQL cluster
 * of the test's own (tests/pg/pgcluster.sh) and two Mosquitto brokers with
 * the plugin on it (plugin_opt_store postgresql), driven by the client
 * library. One case per run, named by argv[1]:
 *
 *   live        Alice on A, Bob on B: Bob gets Alice's messages live with
 *               dense ids; Bob's second device, new on A, catches up from
 *               the cursor Bob's first device left on B; a cid retry sent
 *               to B after the first send on A is stored once.
 *   concurrent  two senders on two brokers, 5,000 messages each, at once:
 *               ids 1..10,000 without gap or duplicate; a member on each
 *               broker gets all of them, once, in order.
 *   kill9       kill -9 of broker A mid-stream: every message A acknowledged
 *               is in the log; A's clients reconnect to B and resume.
 *   failover    the primary stopped and its synchronous standby promoted
 *               mid-stream: no acknowledged message lost, no id reused,
 *               publishes resume after the brokers reconnect.
 *   outage      the database stopped under a broker for half a minute and
 *               started again: the broker's output holds a handful of
 *               lines, not one per retry (store/include/chat_quiet.h), a
 *               "still down" line per connection counting the attempts,
 *               which pg_backoff bounds (at most 2 s apart, at least
 *               1 s), a "back" line per connection; the broker's log holds
 *               a few of the plugin's store errors, not one per refused
 *               publish, and its own "back" line; publishes are stored
 *               again.
 */
#include "ct.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_client.h"

#define MAX_MSGS 12000
#define LIVE_MS 30000 /* a message sent on one broker reaches the other's listener */

/* What a listening device got. */
struct listener {
    const char *name;
    chat_client *c;
    pthread_mutex_t mu;
    uint64_t next_id;    /* the id expected next (0: whatever comes first) */
    uint64_t first_id;   /* the first id shown */
    size_t got;          /* messages shown */
    int64_t last_ms;     /* when the last one was shown */
    int last_of[2];      /* the last sequence number of each sender (s0, s1) */
    unsigned char *seen; /* times each (sender, number) was shown */
    char bad[512];       /* the first violation, "" if none */
    size_t catchups;     /* CATCHUP events */
    int64_t lat_sum;     /* sum over live messages of (shown - ts) */
};

static char g_conninfo[256];

static void violation(struct listener *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void violation(struct listener *l, const char *fmt, ...)
{
    va_list ap;

    if (l->bad[0] != '\0')
        return;
    va_start(ap, fmt);
    vsnprintf(l->bad, sizeof l->bad, fmt, ap);
    va_end(ap);
}

/* Bodies are "s<sender>-<k>": sender 0 or 1, k from 0. */
static bool on_message(void *arg, const chat_client_message *m)
{
    struct listener *l = arg;
    int s = -1, k = -1;

    pthread_mutex_lock(&l->mu);
    if (l->next_id != 0 && m->id != l->next_id)
        violation(l, "%s: got id %" PRIu64 ", expected %" PRIu64, l->name, m->id, l->next_id);
    if (l->got == 0)
        l->first_id = m->id;
    if (m->body == NULL || sscanf(m->body, "s%d-%d", &s, &k) != 2 || s < 0 || s > 1 || k < 0 ||
        k >= MAX_MSGS / 2)
        violation(l, "%s: unexpected message %s", l->name, m->json);
    else if (++l->seen[s * (MAX_MSGS / 2) + k] > 1)
        violation(l, "%s: %s shown twice (id %" PRIu64 ")", l->name, m->body, m->id);
    else if (k <= l->last_of[s])
        violation(l, "%s: %s after s%d-%d: out of the sender's order", l->name, m->body, s,
                  l->last_of[s]);
    else
        l->last_of[s] = k;
    l->next_id = m->id + 1;
    l->got++;
    l->last_ms = ts_now_ms();
    pthread_mutex_unlock(&l->mu);
    return true;
}

static void on_event(void *arg, const chat_client_event *ev)
{
    struct listener *l = arg;

    if (ev->type == CHAT_CLIENT_EV_CATCHUP) {
        pthread_mutex_lock(&l->mu);
        l->catchups++;
        pthread_mutex_unlock(&l->mu);
    }
    if (ev->type == CHAT_CLIENT_EV_ERROR || ev->type == CHAT_CLIENT_EV_LISTEN_REFUSED)
        ts_log("%s: event %d: %s", l->name, (int)ev->type, ev->reason ? ev->reason : "");
}

static size_t got(struct listener *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->got;
    pthread_mutex_unlock(&l->mu);
    return n;
}

static chat_client *client(const ts_broker *b, const char *id, const char *user, struct listener *l)
{
    chat_client_options o = {0};
    chat_client *c = NULL;
    chat_client_err err;

    o.port = ts_broker_port(b);
    o.client_id = id;
    o.username = user;
    o.password = user; /* as the broker knows test users (ts_broker_conf.users) */
    o.mqtt_version = 5;
    o.gap_timeout_ms = 1500;
    o.reconnect_max_s = 1;
    o.max_outbox = MAX_MSGS;
    char state[512], file[96];
    if (l != NULL) {
        /* what the device showed survives a move to another broker */
        snprintf(file, sizeof file, "%s.state", id);
        o.state_path = ct_path(state, sizeof state, file);
        o.on_message = on_message;
        o.on_event = on_event;
        o.arg = l;
    }
    err = chat_client_create(&o, &c);
    CHECK(err == CHAT_CLIENT_OK, "create %s: %s %s", id, chat_client_strerror(err),
          chat_client_reason());
    err = chat_client_connect(c, 10000);
    CHECK(err == CHAT_CLIENT_OK, "connect %s: %s %s", id, chat_client_strerror(err),
          chat_client_reason());
    return c;
}

static struct listener *listener_new(const char *name)
{
    struct listener *l = calloc(1, sizeof *l);

    CHECK(l != NULL && (l->seen = calloc(MAX_MSGS, 1)) != NULL, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    l->name = name;
    l->last_of[0] = l->last_of[1] = -1;
    return l;
}

static void listener_free(struct listener *l)
{
    if (l == NULL)
        return;
    chat_client_destroy(l->c);
    free(l->seen);
    free(l);
}

/* Listens to group on b as device id of member user. */
static void listen_on(struct listener *l, const ts_broker *b, const char *id, const char *user,
                      const char *group)
{
    l->c = client(b, id, user, l);
    CHECK(chat_client_join(l->c, group, NULL, NULL) == CHAT_CLIENT_OK, "join %s: %s", group,
          chat_client_reason());
    CHECK(chat_client_listen(l->c, group) == CHAT_CLIENT_OK, "listen");
}

/* Waits until l has n messages, at most ms; returns whether it has. */
static bool wait_got(struct listener *l, size_t n, int ms)
{
    int64_t deadline = ts_now_ms() + ms;
    while (got(l) < n && ts_now_ms() < deadline)
        ts_sleep_ms(20);
    return got(l) >= n;
}

/* Nothing more may come to l: the plugin answers the request of a flush
 * after every message it queued for l's device, and the library hands
 * those to on_message before it takes the answer. */
static void drained(struct listener *l)
{
    chat_client_err err = chat_client_flush(l->c, 30000, NULL);
    CHECK(err == CHAT_CLIENT_OK, "%s: flush: %s %s", l->name, chat_client_strerror(err),
          chat_client_reason());
}

static void check_clean(struct listener *l)
{
    pthread_mutex_lock(&l->mu);
    CHECK(l->bad[0] == '\0', "%s", l->bad);
    pthread_mutex_unlock(&l->mu);
}

/* The newest count messages of group as history reads them on b. */
static chat_client_page *history(chat_client *c, const char *group, uint64_t before, size_t limit)
{
    chat_client_page *p = NULL;
    chat_client_err err = chat_client_history(c, group, before, limit, &p);
    CHECK(err == CHAT_CLIENT_OK, "history: %s %s", chat_client_strerror(err), chat_client_reason());
    return p;
}

/* Reads every message of group through c: ids must be 1..head without a
 * gap or a repeat. Returns the head; *bodies (when not NULL) gets a copy of
 * each body, by id (index id - 1), freed by the caller. */
static uint64_t read_log(chat_client *c, const char *group, char ***bodies)
{
    uint64_t before = 0, head = 0, expect = 0;
    char **b = NULL;

    for (int pages = 0; pages < 1000; pages++) {
        chat_client_page *p = history(c, group, before, 500);
        if (head == 0) {
            head = p->head;
            expect = head;
            b = calloc(head + 1, sizeof *b);
            CHECK(b != NULL, "out of memory");
        }
        for (size_t i = 0; i < p->count; i++) {
            const chat_client_message *m = &p->messages[i];
            CHECK(m->id == expect, "history: id %" PRIu64 " where %" PRIu64 " was due", m->id,
                  expect);
            b[m->id - 1] = strdup(m->body ? m->body : "");
            expect--;
        }
        bool more = p->more && p->count > 0;
        before = p->count > 0 ? p->messages[p->count - 1].id : 0;
        chat_client_page_free(p);
        if (!more)
            break;
    }
    CHECK(expect == 0, "history ended at %" PRIu64 ", not at 1", expect + 1);
    if (bodies != NULL) {
        *bodies = b;
    } else {
        for (uint64_t i = 0; i < head; i++)
            free(b[i]);
        free(b);
    }
    return head;
}

static void free_bodies(char **b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        free(b[i]);
    free(b);
}

/* A broker on the test's database. */
static ts_broker *broker(const char *fsync)
{
    char conninfo[320], sync[32];
    snprintf(conninfo, sizeof conninfo, "pg_conninfo %s", g_conninfo);
    snprintf(sync, sizeof sync, "fsync %s", fsync);
    return ts_broker_start((const char *const[]){"store postgresql", conninfo, sync, NULL});
}

/* ---------------------------------------------------------------------------
 * live: dense ids across brokers, a shared cursor, a cid retry
 * ------------------------------------------------------------------------- */

static void case_live(void)
{
    ts_pg *pg = ts_pg_start(false);
    const int n = 100;

    snprintf(g_conninfo, sizeof g_conninfo, "host=127.0.0.1 port=%d user=postgres dbname=chat",
             ts_pg_port(pg));
    ts_pg_createdb(pg, "chat");
    ts_broker *a = broker("none"), *b = broker("none");
    struct listener *bob = listener_new("bob on B");
    listen_on(bob, b, "bob-phone", "bob", "room");
    bob->next_id = 1;
    chat_client *alice = client(a, "alice-laptop", "alice", NULL);

    /* Live: each message reaches B while Alice is still sending (before
     * her next one). LIVE_MS bounds the wait, not the speed, which
     * bench/multi measures. */
    int64_t worst = 0;
    for (int k = 0; k < n; k++) {
        char body[32];
        snprintf(body, sizeof body, "s0-%d", k);
        int64_t t0 = ts_now_ms();
        CHECK(chat_client_send(alice, "room", body, NULL, 0) == CHAT_CLIENT_OK, "send");
        CHECK(wait_got(bob, (size_t)k + 1, LIVE_MS), "bob got %zu of %d within %d ms of sending",
              got(bob), k + 1, LIVE_MS);
        if (ts_now_ms() - t0 > worst)
            worst = ts_now_ms() - t0;
    }
    check_clean(bob);
    CHECK(bob->first_id == 1 && bob->next_id == (uint64_t)n + 1, "ids %" PRIu64 "..%" PRIu64,
          bob->first_id, bob->next_id - 1);
    ts_log("bob on B got %d messages from A live, ids 1..%d, slowest %" PRId64 " ms", n, n, worst);

    /* Bob's phone acked everything on B and goes; more is said; Bob's
     * second device, new, connects to A: it starts at the most advanced
     * cursor of Bob's devices (written on B) and catches up from there. */
    CHECK(chat_client_disconnect(bob->c, 5000) == CHAT_CLIENT_OK, "disconnect");
    for (int k = n; k < 2 * n; k++) {
        char body[32];
        snprintf(body, sizeof body, "s0-%d", k);
        CHECK(chat_client_send(alice, "room", body, NULL, 0) == CHAT_CLIENT_OK, "send");
    }
    CHECK(chat_client_flush(alice, 20000, NULL) == CHAT_CLIENT_OK, "flush");
    struct listener *tablet = listener_new("bob's tablet on A");
    tablet->next_id = (uint64_t)n + 1;
    tablet->last_of[0] = n - 1;
    tablet->c = client(a, "bob-tablet", "bob", tablet);
    CHECK(chat_client_listen(tablet->c, "room") == CHAT_CLIENT_OK, "listen");
    CHECK(wait_got(tablet, (size_t)n, 20000), "bob's tablet on A has %zu of %d", got(tablet), n);
    drained(tablet);
    check_clean(tablet);
    CHECK(got(tablet) == (size_t)n && tablet->first_id == (uint64_t)n + 1 && tablet->catchups > 0,
          "tablet: %zu messages from id %" PRIu64 ", %zu catch-ups", got(tablet), tablet->first_id,
          tablet->catchups);
    ts_log("bob's second device on A caught up from the cursor bob left on B: ids %d..%d", n + 1,
           2 * n);
    listener_free(tablet);

    /* A retry of a cid, sent to B after the first send on A: stored once,
     * B answers with the first id. */
    chat_client *alice_b = client(b, "alice-phone", "alice", NULL);
    CHECK(chat_client_send_json(alice, "room", "{\"cid\":\"retry-1\",\"body\":\"s0-900\"}", NULL,
                                0) == CHAT_CLIENT_OK,
          "send");
    CHECK(chat_client_flush(alice, 10000, NULL) == CHAT_CLIENT_OK, "flush");
    size_t refused = 9;
    CHECK(chat_client_send_json(alice_b, "room", "{\"cid\":\"retry-1\",\"body\":\"s0-900\"}", NULL,
                                0) == CHAT_CLIENT_OK,
          "send");
    CHECK(chat_client_flush(alice_b, 10000, &refused) == CHAT_CLIENT_OK && refused == 0, "flush");
    char **bodies = NULL;
    uint64_t head = read_log(alice_b, "room", &bodies);
    CHECK(head == 2 * (uint64_t)n + 1, "head %" PRIu64 " after the retry, not %d", head, 2 * n + 1);
    CHECK(strcmp(bodies[head - 1], "s0-900") == 0, "last body %s", bodies[head - 1]);
    free_bodies(bodies, head);
    ts_log("the cid retried on B was stored once (id %" PRIu64 ")", head);

    chat_client_destroy(alice_b);
    chat_client_destroy(alice);
    listener_free(bob);
    ts_broker_destroy(a);
    ts_broker_destroy(b);
    ts_pg_destroy(pg);
}

/* ---------------------------------------------------------------------------
 * concurrent: two senders on two brokers into one group
 * ------------------------------------------------------------------------- */

struct sender {
    chat_client *c;
    int index, count;
    const char *group;
};

static void *send_all(void *arg)
{
    struct sender *s = arg;
    for (int k = 0; k < s->count; k++) {
        char body[32];
        snprintf(body, sizeof body, "s%d-%d", s->index, k);
        chat_client_err err;
        /* the outbox holds them all; a full one waits for acks */
        while ((err = chat_client_send(s->c, s->group, body, NULL, 0)) == CHAT_CLIENT_ERR_FULL)
            ts_sleep_ms(5);
        if (err != CHAT_CLIENT_OK)
            return (void *)1;
    }
    return NULL;
}

static void case_concurrent(void)
{
    ts_pg *pg = ts_pg_start(false);
    const int each = 5000;

    snprintf(g_conninfo, sizeof g_conninfo, "host=127.0.0.1 port=%d user=postgres dbname=chat",
             ts_pg_port(pg));
    ts_pg_createdb(pg, "chat");
    ts_broker *a = broker("none"), *b = broker("none");
    struct listener *la = listener_new("dave on A"), *lb = listener_new("erin on B");
    listen_on(la, a, "dave-1", "dave", "busy");
    listen_on(lb, b, "erin-1", "erin", "busy");
    la->next_id = lb->next_id = 1;
    struct sender s0 = {client(a, "alice-1", "alice", NULL), 0, each, "busy"};
    struct sender s1 = {client(b, "carol-1", "carol", NULL), 1, each, "busy"};
    pthread_t t0, t1;
    void *r0, *r1;

    int64_t start = ts_now_ms();
    CHECK(pthread_create(&t0, NULL, send_all, &s0) == 0 &&
              pthread_create(&t1, NULL, send_all, &s1) == 0,
          "threads");
    pthread_join(t0, &r0);
    pthread_join(t1, &r1);
    CHECK(r0 == NULL && r1 == NULL, "a send failed");
    size_t refused0 = 9, refused1 = 9;
    CHECK(chat_client_flush(s0.c, 120000, &refused0) == CHAT_CLIENT_OK && refused0 == 0,
          "flush alice: %zu refused", refused0);
    CHECK(chat_client_flush(s1.c, 120000, &refused1) == CHAT_CLIENT_OK && refused1 == 0,
          "flush carol: %zu refused", refused1);
    int64_t stored = ts_now_ms() - start;
    CHECK(wait_got(la, 2 * (size_t)each, 60000) && wait_got(lb, 2 * (size_t)each, 60000),
          "listeners have %zu and %zu of %d", got(la), got(lb), 2 * each);
    drained(la);
    drained(lb);
    check_clean(la);
    check_clean(lb);
    CHECK(got(la) == 2 * (size_t)each && got(lb) == 2 * (size_t)each, "%zu and %zu", got(la),
          got(lb));
    for (int i = 0; i < 2 * each; i++) {
        int at = (i / each) * (MAX_MSGS / 2) + i % each;
        CHECK(la->seen[at] == 1 && lb->seen[at] == 1, "s%d-%d seen %d and %d times", i / each,
              i % each, la->seen[at], lb->seen[at]);
    }
    ts_log("%d messages from two brokers stored in %" PRId64 " ms; both listeners got all, once, "
           "in order",
           2 * each, stored);
    /* The log itself: ids 1..10,000, each body once. */
    char **bodies = NULL;
    uint64_t head = read_log(s0.c, "busy", &bodies);
    CHECK(head == 2 * (uint64_t)each, "head %" PRIu64, head);
    unsigned char *once = calloc(2 * (size_t)each, 1);
    CHECK(once != NULL, "out of memory");
    for (uint64_t i = 0; i < head; i++) {
        int s = -1, k = -1;
        CHECK(sscanf(bodies[i], "s%d-%d", &s, &k) == 2 && s >= 0 && s <= 1 && k >= 0 && k < each,
              "id %" PRIu64 ": %s", i + 1, bodies[i]);
        CHECK(once[s * each + k]++ == 0, "%s stored twice", bodies[i]);
    }
    free(once);
    free_bodies(bodies, head);
    ts_log("the log holds ids 1..%" PRIu64 ", no gap, no duplicate", head);

    chat_client_destroy(s0.c);
    chat_client_destroy(s1.c);
    listener_free(la);
    listener_free(lb);
    ts_broker_destroy(a);
    ts_broker_destroy(b);
    ts_pg_destroy(pg);
}

/* ---------------------------------------------------------------------------
 * kill9 and failover: a sender that counts what the broker acknowledged
 * ------------------------------------------------------------------------- */

/* Sends s<index>-<k> with cid c<k> and waits for the broker's answer:
 * returns true once acknowledged (stored), false when refused or not
 * answered in time (the caller retries the same cid). */
static bool send_acked(chat_client *c, const char *group, int k, int timeout_ms)
{
    char json[96];
    size_t refused = 9;
    snprintf(json, sizeof json, "{\"cid\":\"c%d\",\"body\":\"s0-%d\"}", k, k);
    if (chat_client_send_json(c, group, json, NULL, 0) != CHAT_CLIENT_OK)
        return false;
    return chat_client_flush(c, timeout_ms, &refused) == CHAT_CLIENT_OK && refused == 0;
}

/* Every acknowledged message (acked[k]) is in the log exactly once, and the
 * log holds nothing else than the messages sent. */
static void check_acked(chat_client *c, const char *group, const bool *acked, int sent)
{
    char **bodies = NULL;
    uint64_t head = read_log(c, group, &bodies);
    int *times = calloc((size_t)sent + 1, sizeof *times);
    CHECK(times != NULL, "out of memory");
    for (uint64_t i = 0; i < head; i++) {
        int s = -1, k = -1;
        CHECK(sscanf(bodies[i], "s%d-%d", &s, &k) == 2 && s == 0 && k >= 0 && k < sent,
              "id %" PRIu64 ": %s", i + 1, bodies[i]);
        CHECK(times[k]++ == 0, "%s stored twice", bodies[i]);
    }
    int lost = 0;
    for (int k = 0; k < sent; k++)
        lost += acked[k] && times[k] == 0;
    CHECK(lost == 0, "%d acknowledged messages are not in the log", lost);
    ts_log("the log holds ids 1..%" PRIu64 ": every acknowledged message once", head);
    free(times);
    free_bodies(bodies, head);
}

static void case_kill9(void)
{
    ts_pg *pg = ts_pg_start(false);
    const int n = 600;
    bool *acked = calloc(n, sizeof *acked);

    CHECK(acked != NULL, "out of memory");
    snprintf(g_conninfo, sizeof g_conninfo, "host=127.0.0.1 port=%d user=postgres dbname=chat",
             ts_pg_port(pg));
    ts_pg_createdb(pg, "chat");
    ts_broker *a = broker("none"), *b = broker("none");
    /* dave listens on A (and must move), erin on B */
    struct listener *la = listener_new("dave on A"), *lb = listener_new("erin on B");
    listen_on(la, a, "dave-1", "dave", "k9");
    listen_on(lb, b, "erin-1", "erin", "k9");
    la->next_id = lb->next_id = 1;
    chat_client *alice = client(a, "alice-1", "alice", NULL);

    int k = 0, on_b_from = -1;
    for (int tries = 0; k < n && tries < 4 * n; tries++) {
        if (k == n / 2 && on_b_from < 0) {
            ts_broker_kill(a);
            /* what a load balancer does: the next connection goes to B */
            chat_client_destroy(alice);
            alice = client(b, "alice-1", "alice", NULL);
            chat_client_destroy(la->c);
            la->c = client(b, "dave-1", "dave", la);
            CHECK(chat_client_listen(la->c, "k9") == CHAT_CLIENT_OK, "listen");
            on_b_from = k;
        }
        if (send_acked(alice, "k9", k, 5000))
            acked[k++] = true;
    }
    CHECK(k == n, "only %d of %d messages were acknowledged", k, n);
    ts_log("A killed after %d acknowledged messages; the sender and dave resumed on B", on_b_from);
    CHECK(wait_got(la, n, 30000) && wait_got(lb, n, 30000), "dave %zu, erin %zu of %d", got(la),
          got(lb), n);
    drained(la);
    drained(lb);
    check_clean(la);
    check_clean(lb);
    check_acked(alice, "k9", acked, n);

    chat_client_destroy(alice);
    listener_free(la);
    listener_free(lb);
    ts_broker_destroy(a);
    ts_broker_destroy(b);
    ts_pg_destroy(pg);
    free(acked);
}

static void case_failover(void)
{
    ts_pg *primary = ts_pg_start(true);
    ts_pg *standby = ts_pg_standby(primary);
    const int n = 400;
    bool *acked = calloc(n, sizeof *acked);

    CHECK(acked != NULL, "out of memory");
    /* Both hosts; libpq takes whichever accepts writes. */
    snprintf(g_conninfo, sizeof g_conninfo,
             "host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres "
             "target_session_attrs=read-write connect_timeout=2",
             ts_pg_port(primary), ts_pg_port(standby));
    ts_broker *a = broker("batch"), *b = broker("batch");
    struct listener *lb = listener_new("erin on B");
    listen_on(lb, b, "erin-1", "erin", "fo");
    lb->next_id = 1;
    chat_client *alice = client(a, "alice-1", "alice", NULL);

    int k = 0, refusals = 0;
    bool failed_over = false;
    int64_t deadline = ts_now_ms() + 120000;
    while (k < n && ts_now_ms() < deadline) {
        if (k == n / 2 && !failed_over) {
            ts_pg_stop(primary, "fast");
            ts_pg_promote(standby);
            failed_over = true;
            ts_log("primary stopped, standby promoted after %d acknowledged messages", k);
        }
        if (send_acked(alice, "fo", k, 5000)) {
            acked[k++] = true;
        } else {
            refusals++;
            ts_sleep_ms(100);
        }
    }
    CHECK(k == n, "only %d of %d messages were acknowledged", k, n);
    ts_log("publishes resumed after %d refusals (storage error while no primary)", refusals);
    CHECK(wait_got(lb, n, 30000), "erin %zu of %d", got(lb), n);
    drained(lb);
    check_clean(lb);
    check_acked(alice, "fo", acked, n);

    chat_client_destroy(alice);
    listener_free(lb);
    ts_broker_destroy(a);
    ts_broker_destroy(b);
    ts_pg_destroy(standby);
    ts_pg_destroy(primary);
    free(acked);
}

/* ---------------------------------------------------------------------------
 * outage: the log of a database down under a broker
 * ------------------------------------------------------------------------- */

/* Waits (at most ms) until count lines of the file at path hold needle. */
static void wait_lines(const char *path, const char *needle, long count, int ms)
{
    int64_t deadline = ts_now_ms() + ms;
    while (ts_count_lines(path, needle) < count) {
        CHECK(ts_now_ms() < deadline, "%s: no \"%s\" within %d ms", path, needle, ms);
        ts_sleep_ms(50);
    }
}

/* The number after `before`, itself after needle, in the first line of
 * path holding both (-1: none). */
static long number_in(const char *path, const char *needle, const char *before)
{
    char line[1024];
    long v = -1;
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "open %s", path);
    for (int i = 0; i < 100000 && v < 0 && fgets(line, sizeof line, f) != NULL; i++) {
        const char *at = strstr(line, needle);
        at = at != NULL ? strstr(at, before) : NULL;
        if (at != NULL)
            v = strtol(at + strlen(before), NULL, 10);
    }
    fclose(f);
    return v;
}

static void case_outage(void)
{
    ts_pg *pg = ts_pg_start(false);
    char out[600];

    snprintf(g_conninfo, sizeof g_conninfo, "host=127.0.0.1 port=%d user=postgres dbname=chat",
             ts_pg_port(pg));
    ts_pg_createdb(pg, "chat");
    /* batch: the schema the broker made and the first message survive the
     * immediate stop (fsync none may lose the last commits, schema too) */
    ts_broker *a = broker("batch");
    /* The plugin's store writes its PostgreSQL lines on the broker's
     * stderr (store/include/chat_quiet.h), which the harness keeps here. */
    snprintf(out, sizeof out, "%s/broker.out", ts_broker_dir(a));
    chat_client *alice = client(a, "alice-1", "alice", NULL);
    CHECK(chat_client_join(alice, "out", NULL, NULL) == CHAT_CLIENT_OK, "join: %s",
          chat_client_reason());
    CHECK(send_acked(alice, "out", 0, 10000), "a publish before the outage");
    long before = ts_count_lines(out, ""), log_before = ts_broker_log_count(a, "mosquitto-chat:");

    ts_pg_stop(pg, "immediate");
    int64_t t0 = ts_now_ms();
    /* The listener finds it at once; the writer at its next call, which a
     * publish makes (refused: storage error). */
    CHECK(!send_acked(alice, "out", 1, 10000), "a publish was acknowledged with PostgreSQL down");
    wait_lines(out, "PostgreSQL listener lost", 1, 30000);
    wait_lines(out, "PostgreSQL writer lost", 1, 30000);
    /* The outage lasts until each connection said it is still down: 30 s
     * (CHAT_QUIET_EVERY_MS) of retries at pg_backoff's pace. */
    wait_lines(out, "PostgreSQL listener still down", 1, 90000);
    wait_lines(out, "PostgreSQL writer still down", 1, 90000);
    long lines = ts_count_lines(out, "") - before;
    long l_attempts = number_in(out, "listener still down", " s: ");
    long w_attempts = number_in(out, "writer still down", " s: ");
    long logged = ts_broker_log_count(a, "mosquitto-chat:") - log_before;
    ts_log("%.1f s down: %ld lines on the broker's output (listener %ld attempts, writer %ld), "
           "%ld mosquitto-chat lines in its log",
           (double)(ts_now_ms() - t0) / 1000.0, lines, l_attempts, w_attempts, logged);
    /* The retries did go on, at pg_backoff's pace: the line comes at the
     * first failure 30 s after the last line, within 32 s of the loss;
     * with the loss itself counted, 5 + (30000 - 3750) / 2000 = 18 at
     * least by the timing (15 here: a connection attempt takes time too)
     * and 1 + 5 + (32000 - 1875) / 1000 = 36 at most (the 250 ms pace made
     * about 120). What they logged is the first failure, a changed text or
     * two, and the "still down" line, per connection; libpq adds its
     * notices of the shutdown ("terminating connection"), one per
     * connection. */
    CHECK(l_attempts >= 15 && w_attempts >= 15 && l_attempts <= 36 && w_attempts <= 36,
          "attempts: listener %ld, writer %ld (pg_backoff: 18-36 in 30-32 s)", l_attempts,
          w_attempts);
    CHECK(lines <= 14, "%ld lines on the broker's output over a %.1f s outage", lines,
          (double)(ts_now_ms() - t0) / 1000.0);
    /* The plugin's own store errors, kept short as the store's own
     * (chat_quiet.h): the refused publish and the figures every
     * sys_interval (10 s) each once in full, nothing a second. */
    CHECK(logged <= 12, "%ld mosquitto-chat lines in the broker's log over the outage", logged);

    ts_pg_restart(pg);
    wait_lines(out, "PostgreSQL listener back after", 1, 30000);
    wait_lines(out, "PostgreSQL writer back after", 1, 30000);
    /* Coming back adds the back lines and the texts of a starting server
     * ("starting up", "not yet accepting connections"), each once per
     * connection: the retries went on meanwhile. */
    long all = ts_count_lines(out, "") - before;
    ts_log("%ld lines on the broker's output from the stop to both back lines", all);
    CHECK(all <= 20, "%ld lines on the broker's output from the stop to both back lines", all);
    bool stored = false;
    for (int k = 2; k < 12 && !stored; k++)
        stored = send_acked(alice, "out", k, 10000);
    CHECK(stored, "no publish stored after PostgreSQL came back");
    /* and the plugin's "back" line, from its next tick */
    int64_t back_by = ts_now_ms() + 10000;
    while (ts_broker_log_count(a, "PostgreSQL store back after") < 1) {
        CHECK(ts_now_ms() < back_by, "no \"PostgreSQL store back after\" in the broker's log");
        ts_sleep_ms(50);
    }
    ts_log("both connections back; publishes stored again");

    chat_client_destroy(alice);
    ts_broker_destroy(a);
    ts_pg_destroy(pg);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        void (*run)(void);
    } cases[] = {
        {"live", case_live},         {"concurrent", case_concurrent}, {"kill9", case_kill9},
        {"failover", case_failover}, {"outage", case_outage},
    };
    char name[64];

    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            snprintf(name, sizeof name, "clients_multi_%s", argv[1]);
            ct_init(name);
            cases[i].run();
            return ct_pass();
        }
    }
    fprintf(stderr, "usage: %s live|concurrent|kill9|failover|outage\n", argv[0]);
    return 2;
}
