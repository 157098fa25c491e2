/* bench_client: many libmosquitto clients on one thread, driven by poll(2)
 * (see bench_client.h). */
#include "bench_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READ_BURST 256             /* packets read from one socket per poll pass */
#define MISC_EVERY_NS 500000000ull /* keepalive bookkeeping, twice a second */
#define KEEPALIVE_S 60

struct bench_set {
    bench_client *clients[BENCH_SET_MAX];
    size_t count;
    struct pollfd pfd[BENCH_SET_MAX];
    size_t owner[BENCH_SET_MAX]; /* pfd[k] belongs to clients[owner[k]] */
    uint64_t last_misc;
};

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int bench_lib_init(void)
{
    return mosquitto_lib_init();
}

void bench_lib_cleanup(void)
{
    mosquitto_lib_cleanup();
}

/* ---------------------------------------------------------------------------
 * libmosquitto callbacks: record what happened in the client, call the
 * caller's hook.
 * ------------------------------------------------------------------------- */

static void cb_connect(struct mosquitto *mosq, void *obj, int rc)
{
    bench_client *c = obj;
    (void)mosq;
    c->connack = rc;
    c->connected = rc == 0;
}

static void cb_disconnect(struct mosquitto *mosq, void *obj, int rc)
{
    bench_client *c = obj;
    (void)mosq;
    (void)rc;
    c->connected = false;
    c->closed = true;
}

static void cb_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted)
{
    bench_client *c = obj;
    (void)mosq;
    (void)mid;
    for (int i = 0; i < count; i++) {
        if (granted[i] > 2) {
            c->sub_refused = true;
        }
    }
    c->subacked = true;
}

static void cb_publish(struct mosquitto *mosq, void *obj, int mid)
{
    bench_client *c = obj;
    (void)mosq;
    c->pubacks++;
    if (c->on_pub) {
        c->on_pub(c, mid);
    }
}

static void cb_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *msg)
{
    bench_client *c = obj;
    (void)mosq;
    c->msgs++;
    if (c->on_msg) {
        c->on_msg(c, msg);
    }
}

/* ---------------------------------------------------------------------------
 * Sets
 * ------------------------------------------------------------------------- */

bench_set *bench_set_create(void)
{
    bench_set *s = calloc(1, sizeof(*s));
    if (s) {
        s->last_misc = bench_now_ns();
    }
    return s;
}

void bench_set_destroy(bench_set *s)
{
    if (!s) {
        return;
    }
    for (size_t i = 0; i < s->count; i++) {
        bench_client *c = s->clients[i];
        if (mosquitto_socket(c->mosq) >= 0) {
            mosquitto_disconnect(c->mosq);
        }
        mosquitto_destroy(c->mosq);
        free(c);
    }
    free(s);
}

bench_client *bench_set_add(bench_set *s, const char *id, bool clean, int port, void *ctx)
{
    bench_client *c = NULL;
    int rc;

    if (s->count == BENCH_SET_MAX) {
        fprintf(stderr, "chat_bench: more than %u clients in one set\n", BENCH_SET_MAX);
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        fprintf(stderr, "chat_bench: out of memory\n");
        return NULL;
    }
    snprintf(c->id, sizeof(c->id), "%s", id);
    c->ctx = ctx;
    c->connack = -1;
    c->mosq = mosquitto_new(c->id, clean, c);
    if (!c->mosq) {
        fprintf(stderr, "chat_bench: mosquitto_new(%s) failed\n", id);
        goto fail;
    }
    mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    mosquitto_int_option(c->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    /* Our own windows bound what is in flight; the library must not hold
     * publishes back below them. */
    mosquitto_int_option(c->mosq, MOSQ_OPT_SEND_MAXIMUM, 1000);
    mosquitto_connect_callback_set(c->mosq, cb_connect);
    mosquitto_disconnect_callback_set(c->mosq, cb_disconnect);
    mosquitto_subscribe_callback_set(c->mosq, cb_subscribe);
    mosquitto_publish_callback_set(c->mosq, cb_publish);
    mosquitto_message_callback_set(c->mosq, cb_message);
    rc = mosquitto_connect(c->mosq, "127.0.0.1", port, KEEPALIVE_S);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "chat_bench: connect %s to 127.0.0.1:%d: %s\n", id, port,
                rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
        goto fail;
    }
    s->clients[s->count++] = c;
    return c;

fail:
    if (c->mosq) {
        mosquitto_destroy(c->mosq);
    }
    free(c);
    return NULL;
}

size_t bench_set_count(const bench_set *s)
{
    return s->count;
}

bench_client *bench_set_get(bench_set *s, size_t i)
{
    return i < s->count ? s->clients[i] : NULL;
}

/* Reads what one socket has, packet by packet, until it would block. */
static bool read_burst(bench_client *c)
{
    for (int i = 0; i < READ_BURST; i++) {
        errno = 0;
        int rc = mosquitto_loop_read(c->mosq, 1);
        if (rc != MOSQ_ERR_SUCCESS) {
            if (!c->closed) {
                fprintf(stderr, "chat_bench: client %s: %s\n", c->id, mosquitto_strerror(rc));
            }
            c->closed = true;
            c->connected = false;
            return false;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || mosquitto_socket(c->mosq) < 0) {
            break;
        }
    }
    return true;
}

int bench_set_poll(bench_set *s, int timeout_ms)
{
    size_t n = 0;
    bool ok = true;

    for (size_t i = 0; i < s->count; i++) {
        int fd = mosquitto_socket(s->clients[i]->mosq);
        if (fd < 0) {
            continue;
        }
        s->pfd[n].fd = fd;
        s->pfd[n].events = POLLIN;
        if (mosquitto_want_write(s->clients[i]->mosq)) {
            s->pfd[n].events |= POLLOUT;
        }
        s->pfd[n].revents = 0;
        s->owner[n++] = i;
    }
    if (n == 0) {
        struct timespec ts = {0, (long)timeout_ms * 1000000L};
        nanosleep(&ts, NULL);
        return 0;
    }
    int r = poll(s->pfd, n, timeout_ms);
    if (r < 0) {
        if (errno == EINTR) {
            return 0;
        }
        perror("chat_bench: poll");
        return -1;
    }
    for (size_t k = 0; r > 0 && k < n; k++) {
        bench_client *c = s->clients[s->owner[k]];
        short ev = s->pfd[k].revents;
        if (ev & (POLLIN | POLLERR | POLLHUP)) {
            ok = read_burst(c) && ok;
        }
        /* Acks and pages queued by callbacks go out now, not a poll later. */
        if (mosquitto_socket(c->mosq) >= 0 && ((ev & POLLOUT) || mosquitto_want_write(c->mosq))) {
            int rc = mosquitto_loop_write(c->mosq, 1);
            if (rc != MOSQ_ERR_SUCCESS && !c->closed) {
                fprintf(stderr, "chat_bench: client %s: write: %s\n", c->id,
                        mosquitto_strerror(rc));
                c->closed = true;
                ok = false;
            }
        }
    }
    uint64_t now = bench_now_ns();
    if (now - s->last_misc > MISC_EVERY_NS) {
        s->last_misc = now;
        for (size_t i = 0; i < s->count; i++) {
            if (mosquitto_socket(s->clients[i]->mosq) >= 0) {
                mosquitto_loop_misc(s->clients[i]->mosq);
            }
        }
    }
    return ok ? r : -1;
}

/* Polls until pred(s) holds; false on timeout or a failed connection. */
static bool wait_for(bench_set *s, bool (*pred)(bench_set *), int timeout_ms, const char *what)
{
    uint64_t end = bench_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (!pred(s)) {
        if (bench_now_ns() > end) {
            fprintf(stderr, "chat_bench: timed out after %d ms waiting for %s\n", timeout_ms, what);
            return false;
        }
        if (bench_set_poll(s, 10) < 0) {
            return false;
        }
    }
    return true;
}

static bool all_connected(bench_set *s)
{
    for (size_t i = 0; i < s->count; i++) {
        if (!s->clients[i]->connected) {
            return false;
        }
    }
    return true;
}

bool bench_set_wait_connected(bench_set *s, int timeout_ms)
{
    if (!wait_for(s, all_connected, timeout_ms, "CONNACKs")) {
        return false;
    }
    return true;
}

bool bench_client_subscribe(bench_client *c, const char *filter, int qos)
{
    c->subacked = false;
    c->sub_refused = false;
    int rc = mosquitto_subscribe(c->mosq, NULL, filter, qos);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "chat_bench: %s subscribe %s: %s\n", c->id, filter, mosquitto_strerror(rc));
        return false;
    }
    return true;
}

static bool all_subacked(bench_set *s)
{
    for (size_t i = 0; i < s->count; i++) {
        if (!s->clients[i]->subacked) {
            return false;
        }
    }
    return true;
}

bool bench_set_wait_subacked(bench_set *s, int timeout_ms)
{
    if (!wait_for(s, all_subacked, timeout_ms, "SUBACKs")) {
        return false;
    }
    for (size_t i = 0; i < s->count; i++) {
        if (s->clients[i]->sub_refused) {
            fprintf(stderr, "chat_bench: subscription of %s refused\n", s->clients[i]->id);
            return false;
        }
    }
    return true;
}

bool bench_set_subscribe_all(bench_set *s, const char *filter, int qos, int timeout_ms)
{
    if (s->count == 0) {
        return true;
    }
    for (size_t i = 0; i < s->count; i++) {
        if (!bench_client_subscribe(s->clients[i], filter, qos)) {
            return false;
        }
    }
    return bench_set_wait_subacked(s, timeout_ms);
}

bool bench_client_publish(bench_client *c, const char *topic, const void *payload, size_t len,
                          int qos)
{
    int rc = mosquitto_publish(c->mosq, NULL, topic, (int)len, payload, qos, false);
    if (rc != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "chat_bench: %s publish to %s: %s\n", c->id, topic, mosquitto_strerror(rc));
        return false;
    }
    return true;
}

static bool all_closed(bench_set *s)
{
    for (size_t i = 0; i < s->count; i++) {
        if (mosquitto_socket(s->clients[i]->mosq) >= 0) {
            return false;
        }
    }
    return true;
}

bool bench_set_disconnect_all(bench_set *s, int timeout_ms)
{
    for (size_t i = 0; i < s->count; i++) {
        bench_client *c = s->clients[i];
        c->closed = true; /* from here on a closing socket is expected */
        if (mosquitto_socket(c->mosq) >= 0) {
            mosquitto_disconnect(c->mosq);
        }
    }
    return wait_for(s, all_closed, timeout_ms, "disconnects");
}

void bench_set_close(bench_set *s, int timeout_ms)
{
    if (s) {
        bench_set_disconnect_all(s, timeout_ms);
    }
    bench_set_destroy(s);
}
