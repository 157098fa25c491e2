/* test_kill9_catchup.c: kill -9 of the broker in the middle of a device's
 * catch-up with the client library. The device catches up on 3,000 stored
 * messages in pages of 50; the application holds message 1001 (the first
 * of page 21) until the broker has acknowledged the device's ack of 1000,
 * and the broker is killed then. After the restart the plugin resumes the
 * catch-up from that ack (its log says "from 1000"), and the application
 * sees every message exactly once, in order. A second kill -9 comes while
 * pages flow freely: the catch-up resumes from an ack between 1000 and what
 * the application had been shown, and again nothing is shown twice or
 * missed. The application holds message 2000 too until the broker is
 * killed, so that the catch-up cannot end before the second kill however
 * fast pages flow.
 *
 * The broker's handling of the ack is read in its log (log_type all):
 * "Received PUBLISH from reader (..., 'chat/kc/ack', ... (4 bytes))", the
 * only 4-digit ack before 1001 is shown, then "Sending PUBACK to reader
 * (m<id>, ...)"; the plugin's catch-ups start in its debug line "catch-up
 * of reader in kc from <cursor> to <head>". */
#include "ct.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_client.h"

#define M 3000
#define GROUP "kc"
#define PAGE 50
#define HOLD_AT 1001           /* the first message of page 21 */
#define SECOND_KILL_AFTER 2000 /* shown when the second kill comes */
#define HOLD_MAX_S 60          /* the application holds at most this long */
#define WAIT_MS 60000

struct app {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t shown; /* last id shown */
    bool holding;   /* inside on_message(HOLD_AT), waiting for release */
    bool held_once; /* HOLD_AT was held already */
    bool release;   /* the test lets on_message(HOLD_AT) return */
    bool holding2;  /* the same at SECOND_KILL_AFTER */
    bool held_twice;
    bool release2;
    char bad[512];        /* the first violation, "" if none */
    unsigned catchup;     /* CATCHUP events */
    unsigned disconnects; /* DISCONNECTED events: the library saw the broker go */
};

/* g_app.cv waits on the monotonic clock (app_init): a step of the wall
 * clock neither cuts a wait short nor stretches it. */
static struct app g_app = {.mu = PTHREAD_MUTEX_INITIALIZER};
static char g_log[512];

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void violation(const char *fmt, ...)
{
    va_list ap;

    if (g_app.bad[0] != '\0')
        return;
    va_start(ap, fmt);
    vsnprintf(g_app.bad, sizeof g_app.bad, fmt, ap);
    va_end(ap);
}

/* Makes g_app.cv, on CLOCK_MONOTONIC, before any thread uses it. */
static void app_init(void)
{
    pthread_condattr_t ca;
    CHECK(pthread_condattr_init(&ca) == 0 && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
              pthread_cond_init(&g_app.cv, &ca) == 0,
          "a condition variable on the monotonic clock");
    pthread_condattr_destroy(&ca);
}

/* The deadline ms from now, on g_app.cv's clock. */
static struct timespec until_ms(int64_t ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += (time_t)(ms / 1000);
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Called with g_app.mu held: sets *holding and waits (HOLD_MAX_S at most)
 * until the test sets *release. */
static void hold_here(bool *holding, const bool *release)
{
    struct timespec until = until_ms(HOLD_MAX_S * 1000LL);
    *holding = true;
    pthread_cond_broadcast(&g_app.cv);
    while (!*release)
        if (pthread_cond_timedwait(&g_app.cv, &g_app.mu, &until) == ETIMEDOUT)
            break;
    *holding = false;
}

/* Waits until the application holds (*holding), at most WAIT_MS. */
static void wait_holding(const bool *holding, int id)
{
    struct timespec until = until_ms(WAIT_MS);
    pthread_mutex_lock(&g_app.mu);
    while (!*holding && g_app.bad[0] == '\0')
        if (pthread_cond_timedwait(&g_app.cv, &g_app.mu, &until) == ETIMEDOUT)
            break;
    CHECK(*holding, "message %d was not shown within %d ms (shown %" PRIu64 ")", id, WAIT_MS,
          g_app.shown);
    pthread_mutex_unlock(&g_app.mu);
}

static bool on_message(void *arg, const chat_client_message *m)
{
    char want[32];

    (void)arg;
    pthread_mutex_lock(&g_app.mu);
    snprintf(want, sizeof want, "n%" PRIu64, m->id - 1);
    if (m->id != g_app.shown + 1)
        violation("shown id %" PRIu64 " after %" PRIu64, m->id, g_app.shown);
    else if (strcmp(m->group, GROUP) != 0 || m->body == NULL || strcmp(m->body, want) != 0)
        violation("id %" PRIu64 " carries %s, expected body %s", m->id, m->json, want);
    g_app.shown = m->id;
    if (m->id == HOLD_AT && !g_app.held_once) {
        g_app.held_once = true;
        hold_here(&g_app.holding, &g_app.release);
    } else if (m->id == SECOND_KILL_AFTER && !g_app.held_twice) {
        g_app.held_twice = true;
        hold_here(&g_app.holding2, &g_app.release2);
    }
    pthread_mutex_unlock(&g_app.mu);
    return true;
}

static void on_event(void *arg, const chat_client_event *ev)
{
    (void)arg;
    if (ev->type == CHAT_CLIENT_EV_CATCHUP || ev->type == CHAT_CLIENT_EV_DISCONNECTED) {
        pthread_mutex_lock(&g_app.mu);
        if (ev->type == CHAT_CLIENT_EV_CATCHUP)
            g_app.catchup++;
        else
            g_app.disconnects++;
        pthread_cond_broadcast(&g_app.cv);
        pthread_mutex_unlock(&g_app.mu);
    } else if (ev->type == CHAT_CLIENT_EV_ERROR || ev->type == CHAT_CLIENT_EV_TRUNCATED) {
        ts_log("reader: event %d: %s", (int)ev->type, ev->reason ? ev->reason : "");
    }
}

/* The connection losses the library has reported so far. */
static unsigned disconnects(void)
{
    unsigned n;
    pthread_mutex_lock(&g_app.mu);
    n = g_app.disconnects;
    pthread_mutex_unlock(&g_app.mu);
    return n;
}

/* Waits (at most WAIT_MS) until the library has reported n losses of its
 * connection: the broker is restarted only once the reader knows it went. */
static void wait_disconnects(unsigned n)
{
    struct timespec until = until_ms(WAIT_MS);
    pthread_mutex_lock(&g_app.mu);
    while (g_app.disconnects < n)
        if (pthread_cond_timedwait(&g_app.cv, &g_app.mu, &until) == ETIMEDOUT)
            break;
    CHECK(g_app.disconnects >= n, "the reader reported %u connection losses, not %u",
          g_app.disconnects, n);
    pthread_mutex_unlock(&g_app.mu);
}

static uint64_t shown(void)
{
    uint64_t n;
    pthread_mutex_lock(&g_app.mu);
    n = g_app.shown;
    pthread_mutex_unlock(&g_app.mu);
    return n;
}

/* Waits until the application has been shown at least id. */
static void wait_shown(uint64_t id)
{
    int64_t deadline = ts_now_ms() + WAIT_MS;
    while (shown() < id) {
        CHECK(ts_now_ms() < deadline, "shown %" PRIu64 " of %" PRIu64 " after %d ms", shown(), id,
              WAIT_MS);
        ts_sleep_ms(10);
    }
}

/* The broker's log from byte from on (NUL-terminated), freed by the caller. */
static char *log_from(size_t from)
{
    size_t len = 0;
    char *text = ts_read_file(g_log, &len);
    CHECK(text != NULL, "no broker log at %s", g_log);
    if (from > len)
        from = len;
    memmove(text, text + from, len - from + 1);
    return text;
}

static size_t log_size(void)
{
    size_t len = 0;
    char *text = ts_read_file(g_log, &len);
    free(text);
    return len;
}

/* Whether the broker received the reader's ack of 1000 (the only ack of
 * 4 bytes so far: nothing above 1000 was shown) from byte from on, and
 * answered it with a PUBACK, which comes after the plugin handled it. */
static bool ack_1000_answered(size_t from)
{
    char *text = log_from(from), *line, *save = NULL;
    bool answered = false;
    int mid = -1;

    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        const char *p = strstr(line, "Received PUBLISH from reader (");
        char puback[64];
        if (p != NULL && strstr(line, "'chat/" GROUP "/ack', ... (4 bytes)") != NULL &&
            (p = strstr(p, ", m")) != NULL && sscanf(p, ", m%d,", &mid) == 1)
            continue;
        snprintf(puback, sizeof puback, "Sending PUBACK to reader (m%d,", mid);
        if (mid >= 0 && strstr(line, puback) != NULL)
            answered = true;
    }
    free(text);
    return answered;
}

/* The cursors the plugin's catch-ups of the reader started from, from byte
 * from of the log on; returns how many (at most cap). */
static int catchups_from(size_t from, uint64_t *cursors, int cap)
{
    char *text = log_from(from), *p = text;
    int n = 0;

    while (n < cap && (p = strstr(p, "catch-up of reader in " GROUP " from ")) != NULL) {
        unsigned long long c;
        p += strlen("catch-up of reader in " GROUP " from ");
        if (sscanf(p, "%llu", &c) == 1)
            cursors[n++] = c;
    }
    free(text);
    return n;
}

/* Waits for the first catch-up after byte from, and returns its cursor;
 * every catch-up of the same connection must start there too. */
static uint64_t resumed_from(size_t from)
{
    int64_t deadline = ts_now_ms() + WAIT_MS;
    uint64_t c[16];
    int n;

    while ((n = catchups_from(from, c, 16)) == 0) {
        CHECK(ts_now_ms() < deadline, "no catch-up in the log after the restart");
        ts_sleep_ms(20);
    }
    return c[0];
}

static void send_all(int port)
{
    chat_client_options o = {0};
    chat_client *sender = NULL;
    size_t refused = 1;
    chat_client_err err;

    o.port = port;
    o.client_id = "sender";
    err = chat_client_create(&o, &sender);
    CHECK(err == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    err = chat_client_connect(sender, 10000);
    CHECK(err == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    for (int k = 0; k < M; k++) {
        char body[32];
        snprintf(body, sizeof body, "n%d", k);
        for (int tries = 0;
             (err = chat_client_send(sender, GROUP, body, NULL, 0)) == CHAT_CLIENT_ERR_FULL &&
             tries < 1000;
             tries++)
            ts_sleep_ms(10);
        CHECK(err == CHAT_CLIENT_OK, "send: %s", chat_client_strerror(err));
    }
    err = chat_client_flush(sender, WAIT_MS, &refused);
    CHECK(err == CHAT_CLIENT_OK && refused == 0, "flush: %s, %zu refused",
          chat_client_strerror(err), refused);
    chat_client_destroy(sender);
}

static chat_client *reader(int port, const char *state)
{
    chat_client_options o = {0};
    chat_client *c = NULL;
    chat_client_err err;

    o.port = port;
    o.client_id = "reader";
    o.state_path = state;
    o.reconnect_max_s = 1;
    /* Acks only at the end of each page, so that the ack of 1000 is the
     * last one before message 1001. */
    o.ack_every = 1000000;
    o.ack_interval_ms = 600000;
    o.on_message = on_message;
    o.on_event = on_event;
    err = chat_client_create(&o, &c);
    CHECK(err == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    CHECK(chat_client_listen(c, GROUP) == CHAT_CLIENT_OK, "listen: %s", chat_client_reason());
    return c;
}

int main(void)
{
    const char *opts[] = {"page_size 50", NULL};
    char state[512];
    chat_client *c;
    ts_broker *b;
    chat_client_err err;
    uint64_t head = 0, cursor, at_kill;
    size_t from;
    int64_t deadline;
    unsigned lost;

    ct_init("clients_kill9_catchup");
    app_init();
    b = ts_broker_start(opts);
    snprintf(g_log, sizeof g_log, "%s", ts_broker_db_path(b));
    CHECK(strlen(g_log) > 3, "odd store path %s", g_log);
    snprintf(g_log + strlen(g_log) - 3, sizeof g_log - strlen(g_log) + 3, "/mosquitto.log");
    ct_path(state, sizeof state, "reader.state");

    /* The device joins, then is offline while 3,000 messages are stored. */
    c = reader(ts_broker_port(b), state);
    err = chat_client_connect(c, 10000);
    CHECK(err == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    err = chat_client_join(c, GROUP, NULL, &head);
    CHECK(err == CHAT_CLIENT_OK && head == 0, "join: %s, head %" PRIu64, chat_client_reason(),
          head);
    chat_client_destroy(c);
    send_all(ts_broker_port(b));
    ts_log("%d messages stored", M);

    /* The catch-up, held at message 1001. */
    from = log_size();
    c = reader(ts_broker_port(b), state);
    err = chat_client_connect(c, 10000);
    CHECK(err == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    wait_holding(&g_app.holding, HOLD_AT);
    CHECK(catchups_from(from, &cursor, 1) == 1 && cursor == 0, "the first catch-up did not start "
                                                               "at 0");
    /* The library acked 1000 at the end of page 20, before it showed 1001. */
    deadline = ts_now_ms() + WAIT_MS;
    while (!ack_1000_answered(from)) {
        CHECK(ts_now_ms() < deadline, "the broker did not answer the reader's ack of 1000");
        ts_sleep_ms(20);
    }
    ts_log("holding message %d; the broker acknowledged the ack of %d", HOLD_AT, HOLD_AT - 1);

    /* kill -9 in the middle of the catch-up. */
    lost = disconnects();
    ts_broker_kill(b);
    pthread_mutex_lock(&g_app.mu);
    g_app.release = true;
    pthread_cond_broadcast(&g_app.cv);
    pthread_mutex_unlock(&g_app.mu);
    from = log_size();
    wait_disconnects(lost + 1);
    ts_broker_restart(b);
    cursor = resumed_from(from);
    ts_log("after the restart the catch-up resumed from %" PRIu64, cursor);
    CHECK(cursor == HOLD_AT - 1,
          "the catch-up resumed from %" PRIu64 ", not from the device's last ack %d", cursor,
          HOLD_AT - 1);

    /* A second kill -9 while pages flow, message 2000 held. */
    wait_holding(&g_app.holding2, SECOND_KILL_AFTER);
    lost = disconnects();
    ts_broker_kill(b);
    at_kill = shown();
    pthread_mutex_lock(&g_app.mu);
    g_app.release2 = true;
    pthread_cond_broadcast(&g_app.cv);
    pthread_mutex_unlock(&g_app.mu);
    from = log_size();
    wait_disconnects(lost + 1);
    ts_broker_restart(b);
    cursor = resumed_from(from);
    ts_log("second kill with %" PRIu64 " shown; resumed from %" PRIu64, at_kill, cursor);
    CHECK(cursor >= HOLD_AT - 1 && cursor <= at_kill,
          "resumed from %" PRIu64 ": not between the first resume and the %" PRIu64 " shown",
          cursor, at_kill);

    wait_shown(M);
    /* Nothing more may come: the plugin answers the flush's request after
     * every page it queued for the reader, and the library hands the
     * application those pages before it sees the answer. */
    err = chat_client_flush(c, WAIT_MS, NULL);
    CHECK(err == CHAT_CLIENT_OK, "flush: %s", chat_client_reason());
    pthread_mutex_lock(&g_app.mu);
    CHECK(g_app.bad[0] == '\0', "%s", g_app.bad);
    CHECK(g_app.shown == M, "shown %" PRIu64 ", expected %d", g_app.shown, M);
    CHECK(g_app.catchup > 0, "no catch-up event");
    pthread_mutex_unlock(&g_app.mu);
    ts_log("%d messages shown exactly once, in order, across two kill -9", M);
    chat_client_destroy(c);
    ts_broker_destroy(b);
    return ct_pass();
}
