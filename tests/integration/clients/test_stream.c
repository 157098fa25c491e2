/* test_stream.c: two listeners (MQTT 3.1.1 and MQTT 5) see 2,000 messages
 * exactly once and in order while the broker is killed with kill -9 and
 * restarted twice during the stream, and the sender (MQTT 5) keeps sending;
 * the sender's retries create no duplicate and lose nothing. No client
 * reports an error, a refused send or a refused listen. A last message "end"
 * closes the stream: once a listener showed it, it showed everything before
 * it (ids in order), and its acks follow. */
#include "ct.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_client.h"

#define N 2000
#define GROUP "stream"
#define PACE_MS 4

struct listener {
    const char *name;
    chat_client *c;
    pthread_mutex_t mu;
    uint64_t next_id; /* the id expected next */
    size_t got;       /* messages shown */
    int seen[N];      /* times body m<k> was shown */
    bool ended;       /* "end" was shown */
    char bad[512];    /* the first violation, "" if none */
    size_t events[8]; /* events by type */
};

static bool on_message(void *arg, const chat_client_message *m)
{
    struct listener *l = arg;
    int k = -1;

    pthread_mutex_lock(&l->mu);
    if (m->id != l->next_id)
        ct_violation(l->bad, sizeof l->bad, "%s: got id %" PRIu64 ", expected %" PRIu64, l->name,
                     m->id, l->next_id);
    if (l->ended)
        ct_violation(l->bad, sizeof l->bad, "%s: id %" PRIu64 " shown after \"end\"", l->name,
                     m->id);
    if (m->body != NULL && strcmp(m->body, "end") == 0)
        l->ended = true;
    else if (strcmp(m->group, GROUP) != 0 || m->body == NULL || sscanf(m->body, "m%d", &k) != 1 ||
             k < 0 || k >= N)
        ct_violation(l->bad, sizeof l->bad, "%s: unexpected message %s", l->name, m->json);
    else if (++l->seen[k] > 1)
        ct_violation(l->bad, sizeof l->bad, "%s: body m%d shown twice (id %" PRIu64 ")", l->name, k,
                     m->id);
    else if ((size_t)k != l->got)
        ct_violation(l->bad, sizeof l->bad, "%s: body m%d at position %zu: sent out of order",
                     l->name, k, l->got);
    l->next_id = m->id + 1;
    l->got += !l->ended;
    pthread_mutex_unlock(&l->mu);
    return true;
}

static void on_event(void *arg, const chat_client_event *ev)
{
    struct listener *l = arg;

    pthread_mutex_lock(&l->mu);
    if ((size_t)ev->type < sizeof l->events / sizeof l->events[0])
        l->events[ev->type]++;
    pthread_mutex_unlock(&l->mu);
    if (ev->type == CHAT_CLIENT_EV_ERROR || ev->type == CHAT_CLIENT_EV_SEND_REFUSED ||
        ev->type == CHAT_CLIENT_EV_LISTEN_REFUSED)
        ts_log("%s: event %d: %s", l->name, (int)ev->type, ev->reason ? ev->reason : "");
}

static bool ended(struct listener *l)
{
    bool e;

    pthread_mutex_lock(&l->mu);
    e = l->ended;
    pthread_mutex_unlock(&l->mu);
    return e;
}

/* Fails on the first violation l saw. */
static void check_clean(struct listener *l)
{
    pthread_mutex_lock(&l->mu);
    CHECK(l->bad[0] == '\0', "%s", l->bad);
    pthread_mutex_unlock(&l->mu);
}

static chat_client *client(const ts_broker *b, const char *id, int version, const char *state,
                           struct listener *l)
{
    chat_client_options o = {0};
    chat_client *c = NULL;
    chat_client_err err;

    o.port = ts_broker_port(b);
    o.client_id = id;
    o.mqtt_version = version;
    o.state_path = state;
    o.gap_timeout_ms = 1500;
    if (l != NULL) {
        o.on_message = on_message;
        o.on_event = on_event;
        o.arg = l;
    }
    err = chat_client_create(&o, &c);
    CHECK(err == CHAT_CLIENT_OK, "create %s: %s %s", id, chat_client_strerror(err),
          chat_client_reason());
    err = chat_client_connect(c, 5000);
    CHECK(err == CHAT_CLIENT_OK, "connect %s: %s %s", id, chat_client_strerror(err),
          chat_client_reason());
    return c;
}

static void start_listener(const ts_broker *b, struct listener *l, const char *name, int version)
{
    char state[512], file[64];
    uint64_t head = 99;
    chat_client_err err;

    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    l->name = name;
    l->next_id = 1;
    snprintf(file, sizeof file, "%s.state", name);
    l->c = client(b, name, version, ct_path(state, sizeof state, file), l);
    /* Joining before the stream starts makes the device start at id 1. */
    err = chat_client_join(l->c, GROUP, NULL, &head);
    CHECK(err == CHAT_CLIENT_OK && head == 0, "join: %s %s, head %" PRIu64,
          chat_client_strerror(err), chat_client_reason(), head);
    CHECK(chat_client_listen(l->c, GROUP) == CHAT_CLIENT_OK, "listen");
}

static void check_listener(struct listener *l)
{
    chat_client_group_status *list = NULL;
    size_t n = 0;
    int64_t deadline = ts_now_ms() + 10000;
    chat_client_err err;

    check_clean(l);
    pthread_mutex_lock(&l->mu);
    CHECK(l->got == N && l->next_id == N + 2, "%s: %zu messages, next id %" PRIu64, l->name, l->got,
          l->next_id);
    for (int k = 0; k < N; k++)
        CHECK(l->seen[k] == 1, "%s: m%d shown %d times", l->name, k, l->seen[k]);
    ts_log("%s: %zu messages exactly once, in order; %zu reconnects, %zu catch-up pages", l->name,
           l->got, l->events[CHAT_CLIENT_EV_CONNECTED] - 1, l->events[CHAT_CLIENT_EV_CATCHUP]);
    CHECK(l->events[CHAT_CLIENT_EV_CONNECTED] >= 3, "%s: expected 2 reconnects", l->name);
    pthread_mutex_unlock(&l->mu);
    /* Acked in time (ack_interval_ms): the device's cursor reaches the head,
     * "end" included. */
    for (int i = 0; i < 1000; i++) {
        err = chat_client_unread(l->c, &list, &n);
        CHECK(err == CHAT_CLIENT_OK, "unread: %s %s", chat_client_strerror(err),
              chat_client_reason());
        CHECK(n == 1 && list[0].head == N + 1, "%s: unread lists %zu groups, head %" PRIu64,
              l->name, n, n ? list[0].head : 0);
        if (list[0].unread == 0 || ts_now_ms() > deadline)
            break;
        chat_client_unread_free(list, n);
        ts_sleep_ms(100);
    }
    CHECK(list[0].unread == 0, "%s: %" PRIu64 " unread 10 s after the last message", l->name,
          list[0].unread);
    chat_client_unread_free(list, n);
}

static size_t connects(struct listener *l)
{
    size_t n;

    pthread_mutex_lock(&l->mu);
    n = l->events[CHAT_CLIENT_EV_CONNECTED];
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* True once every client has connected at least n times. */
static bool all_connected(struct listener **ls, size_t count, size_t n)
{
    for (size_t i = 0; i < count; i++)
        if (connects(ls[i]) < n)
            return false;
    return true;
}

int main(void)
{
    ts_broker *b;
    struct listener *l3 = calloc(1, sizeof *l3), *l5 = calloc(1, sizeof *l5);
    struct listener *ls = calloc(1, sizeof *ls);
    struct listener *all[3] = {l3, l5, ls};
    chat_client *sender;
    size_t refused = 99;
    chat_client_err err;
    int64_t deadline, restart_at = 0;
    int kills = 0;
    char state[512], *text;

    ct_init("clients_stream");
    CHECK(l3 != NULL && l5 != NULL && ls != NULL, "out of memory");
    b = ts_broker_start(NULL);
    start_listener(b, l3, "listener311", 4);
    start_listener(b, l5, "listener5", 5);
    pthread_mutex_init(&ls->mu, NULL);
    ls->name = "sender";
    sender = client(b, "sender", 5, NULL, ls);
    ts_log("listeners and sender connected");

    /* Kill the broker at message 300, and again once every client came
     * back (Paho retries every 1-6 s), sending all along; before the last
     * 300 messages the sender waits for that, so both kills fall inside the
     * stream. */
    deadline = ts_now_ms() + 60000;
    for (int k = 0; k < N && ts_now_ms() < deadline;) {
        char body[32];
        bool may_kill =
            (kills == 0 && k >= 300) || (kills == 1 && restart_at == 0 && all_connected(all, 3, 2));
        if (may_kill) {
            ts_broker_kill(b);
            kills++;
            restart_at = ts_now_ms() + 300;
        }
        if (restart_at != 0 && ts_now_ms() >= restart_at) {
            ts_broker_restart(b);
            restart_at = 0;
        }
        if (kills < 2 && k >= N - 300) {
            ts_sleep_ms(20); /* wait for the clients before the second kill */
            continue;
        }
        snprintf(body, sizeof body, "m%d", k);
        err = chat_client_send(sender, GROUP, body, NULL, 0);
        CHECK(err == CHAT_CLIENT_OK, "send m%d: %s", k, chat_client_strerror(err));
        k++;
        ts_sleep_ms(PACE_MS);
    }
    CHECK(kills == 2 && restart_at == 0, "the broker was killed %d times", kills);
    ts_log("sent %d messages; flushing", N);
    err = chat_client_flush(sender, 60000, &refused);
    CHECK(err == CHAT_CLIENT_OK && refused == 0, "flush: %s %s, %zu refused",
          chat_client_strerror(err), chat_client_reason(), refused);

    check_clean(ls);
    /* "end" after everything: a listener that shows it showed the rest. */
    err = chat_client_send(sender, GROUP, "end", NULL, 0);
    CHECK(err == CHAT_CLIENT_OK, "send end: %s", chat_client_strerror(err));
    err = chat_client_flush(sender, 10000, &refused);
    CHECK(err == CHAT_CLIENT_OK && refused == 0, "flush end: %s", chat_client_strerror(err));
    deadline = ts_now_ms() + 60000;
    while ((!ended(l3) || !ended(l5)) && ts_now_ms() < deadline)
        ts_sleep_ms(50);
    CHECK(ended(l3) && ended(l5), "\"end\" not shown within 60 s (listener311 %d, listener5 %d)",
          ended(l3), ended(l5));
    check_listener(l3);
    check_listener(l5);
    CHECK(connects(ls) >= 3, "the sender connected %zu times", connects(ls));
    check_clean(ls);

    chat_client_destroy(sender);
    chat_client_destroy(l3->c);
    chat_client_destroy(l5->c);
    /* The state file says what was shown. */
    text = ts_read_file(ct_path(state, sizeof state, "listener311.state"), NULL);
    CHECK(text != NULL && strstr(text, "\n2001 " GROUP "\n") != NULL, "state file: %s",
          text ? text : "(missing)");
    free(text);
    ts_broker_destroy(b);
    free(l3);
    free(l5);
    free(ls);
    return ct_pass();
}
