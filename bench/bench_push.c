/* bench_push: the cost of push notifications (push: a registered members
 * offline in g groups, one message a second to each group; the broker's CPU
 * per message, the notifications a second that reach a loopback HTTP sink,
 * and the publisher's PUBACK latency, with push on, off, or to a gateway
 * that never answers). The sink is this process's own thread: a UnifiedPush
 * server that answers the discovery GET and counts POSTs (answering 201,
 * or, with --hang 1, never). */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SINK_CONNS 64
#define SINK_BUF 16384
#define SETUP_BATCH 40u /* members registered at once: the plugin checks 64 at most */

/* RFC 8291's example device: a valid P-256 key and auth secret, so that
 * every notification is encrypted as a real one (nobody decrypts here). */
#define UA_PUBLIC                                                                                  \
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
#define UA_AUTH "BTBZMqHH6r4Tts7J_aSIgg"

/* ---------------------------------------------------------------------------
 * The sink
 * ------------------------------------------------------------------------- */

struct sink_conn {
    int fd;
    char buf[SINK_BUF];
    size_t have;
};

struct sink {
    int fd;
    bool hang;
    atomic_bool stop;
    atomic_uint_fast64_t posts, gets;
    pthread_t thread;
    struct sink_conn conns[SINK_CONNS];
};

static void sink_write(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) {
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

/* Handles every whole request in c's buffer. */
static void sink_requests(struct sink *k, struct sink_conn *c)
{
    for (;;) {
        char *end = NULL;
        for (size_t i = 0; i + 4 <= c->have; i++) {
            if (!memcmp(c->buf + i, "\r\n\r\n", 4)) {
                end = c->buf + i;
                break;
            }
        }
        if (!end) {
            return;
        }
        size_t head = (size_t)(end - c->buf) + 4, body = 0;
        *end = '\0';
        for (char *h = strstr(c->buf, "\r\n"); h; h = strstr(h + 2, "\r\n")) {
            if (!strncasecmp(h + 2, "Content-Length:", 15)) {
                body = strtoul(h + 17, NULL, 10);
            }
        }
        if (head + body > c->have) {
            *end = '\r';
            return; /* the body has not all come */
        }
        if (!strncmp(c->buf, "GET ", 4)) {
            atomic_fetch_add(&k->gets, 1);
            static const char up[] = "{\"unifiedpush\":{\"version\":1}}";
            char head[160];
            snprintf(head, sizeof(head),
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                     "%zu\r\n\r\n%s",
                     sizeof(up) - 1, up);
            sink_write(c->fd, head);
        } else {
            atomic_fetch_add(&k->posts, 1);
            if (!k->hang) {
                sink_write(c->fd, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n");
            }
        }
        memmove(c->buf, c->buf + head + body, c->have - head - body);
        c->have -= head + body;
    }
}

static void *sink_run(void *arg)
{
    struct sink *k = arg;
    struct pollfd p[SINK_CONNS + 1];
    while (!atomic_load(&k->stop)) {
        p[0] = (struct pollfd){.fd = k->fd, .events = POLLIN};
        for (int i = 0; i < SINK_CONNS; i++) {
            p[i + 1] = (struct pollfd){.fd = k->conns[i].fd, .events = POLLIN};
        }
        if (poll(p, SINK_CONNS + 1, 100) <= 0) {
            continue;
        }
        if (p[0].revents & POLLIN) {
            int fd = accept(k->fd, NULL, NULL);
            int slot = -1;
            for (int i = 0; fd >= 0 && i < SINK_CONNS && slot < 0; i++) {
                slot = k->conns[i].fd < 0 ? i : -1;
            }
            if (slot >= 0) {
                k->conns[slot].fd = fd;
                k->conns[slot].have = 0;
            } else if (fd >= 0) {
                close(fd);
            }
        }
        for (int i = 0; i < SINK_CONNS; i++) {
            struct sink_conn *c = &k->conns[i];
            if (c->fd < 0 || !(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            if (c->have == sizeof(c->buf)) {
                c->have = 0; /* a hung sink drops what it holds */
            }
            ssize_t r = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, 0);
            if (r <= 0) {
                close(c->fd);
                c->fd = -1;
                continue;
            }
            c->have += (size_t)r;
            sink_requests(k, c);
        }
    }
    return NULL;
}

static bool sink_start(struct sink *k, int port, bool hang)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    k->hang = hang;
    for (int i = 0; i < SINK_CONNS; i++) {
        k->conns[i].fd = -1;
    }
    k->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (k->fd < 0 || setsockopt(k->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(k->fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(k->fd, 64) != 0) {
        fprintf(stderr, "chat_bench: push sink on 127.0.0.1:%d: %s\n", port, strerror(errno));
        return false;
    }
    return pthread_create(&k->thread, NULL, sink_run, k) == 0;
}

static void sink_stop(struct sink *k)
{
    atomic_store(&k->stop, true);
    pthread_join(k->thread, NULL);
    for (int i = 0; i < SINK_CONNS; i++) {
        if (k->conns[i].fd >= 0) {
            close(k->conns[i].fd);
        }
    }
    close(k->fd);
}

/* ---------------------------------------------------------------------------
 * Setup: members join every group and (push on) register, then go offline
 * ------------------------------------------------------------------------- */

struct setup_member {
    bool answered;
    bool registered;
    bool retry; /* refused for now: the broker's discovery checks at their rate */
};

static void setup_on_msg(bench_client *c, const struct mosquitto_message *m)
{
    struct setup_member *sm = c->ctx;
    const char *p = m->payload;
    if (strcmp(m->topic, RESPONSE_TOPIC) != 0 || !p || !strstr(p, "\"responses\"") ||
        is_push(p, (size_t)m->payloadlen)) {
        return;
    }
    sm->answered = true;
    sm->registered = strstr(p, "\"registered\":true") != NULL;
    sm->retry = !sm->registered && strstr(p, "retry in a few seconds") != NULL;
}

/* The push command of member number m, registering its endpoint. */
static size_t push_command(char *buf, size_t cap, int sink_port, unsigned m)
{
    return (size_t)snprintf(buf, cap,
                            "{\"command\":\"push\",\"kind\":\"unifiedpush\","
                            "\"endpoint\":\"http://127.0.0.1:%d/up/%u\",\"p256dh\":\"%s\","
                            "\"auth\":\"%s\"}",
                            sink_port, m, UA_PUBLIC, UA_AUTH);
}

/* Waits (at most 30 s) until each of the n members of s has its answer. */
static bool wait_answers(bench_set *s, struct setup_member *sm, unsigned n, unsigned first)
{
    uint64_t t0 = bench_now_ns();
    for (;;) {
        bool all = true;
        for (unsigned i = 0; i < n; i++) {
            all = all && sm[i].answered;
        }
        if (all) {
            return true;
        }
        if (ms_since(t0) > 30000) {
            fprintf(stderr, "chat_bench: push: members %u.. not answered in 30 s\n", first);
            return false;
        }
        bench_set_poll(s, 50);
    }
}

static bool setup(const struct opts *o, unsigned groups, unsigned members, int sink_port, bool push)
{
    for (unsigned first = 0; first < members; first += SETUP_BATCH) {
        unsigned n = members - first < SETUP_BATCH ? members - first : SETUP_BATCH;
        struct setup_member sm[SETUP_BATCH] = {{0}};
        bench_set *s = bench_set_create();
        bool ok = s != NULL;
        for (unsigned i = 0; ok && i < n; i++) {
            char id[32];
            snprintf(id, sizeof(id), "m%05u", first + i);
            bench_client *c = bench_set_add(s, id, true, o->port, &sm[i]);
            ok = c != NULL;
            if (c) {
                c->on_msg = setup_on_msg;
            }
        }
        ok = ok && bench_set_wait_connected(s, 10000);
        for (unsigned i = 0; ok && i < n; i++) {
            char req[1024];
            size_t len = (size_t)snprintf(req, sizeof(req), "{\"commands\":[");
            for (unsigned g = 0; g < groups; g++) {
                len += (size_t)snprintf(req + len, sizeof(req) - len,
                                        "%s{\"command\":\"join\",\"group\":\"%s%u\"}", g ? "," : "",
                                        o->group, g);
            }
            if (push) {
                req[len++] = ',';
                len += push_command(req + len, sizeof(req) - len, sink_port, first + i);
            }
            snprintf(req + len, sizeof(req) - len, "]}");
            ok = bench_client_publish(bench_set_get(s, i), "$CONTROL/chat/v1", req, strlen(req), 1);
        }
        ok = ok && wait_answers(s, sm, n, first);
        /* Refused for now (the broker starts its discovery checks at a
         * bounded rate): again, a second later, at most 60 times. */
        for (unsigned attempt = 0; ok && push && attempt < 60; attempt++) {
            bool again = false;
            for (unsigned i = 0; i < n; i++) {
                again = again || sm[i].retry;
            }
            if (!again) {
                break;
            }
            bench_set_poll(s, 1000);
            for (unsigned i = 0; ok && i < n; i++) {
                if (sm[i].retry) {
                    char req[1024] = "{\"commands\":[";
                    size_t len = strlen(req);
                    len += push_command(req + len, sizeof(req) - len - 2, sink_port, first + i);
                    snprintf(req + len, sizeof(req) - len, "]}");
                    sm[i].answered = sm[i].retry = false;
                    ok = bench_client_publish(bench_set_get(s, i), "$CONTROL/chat/v1", req,
                                              strlen(req), 1);
                }
            }
            ok = ok && wait_answers(s, sm, n, first);
        }
        for (unsigned i = 0; ok && push && i < n; i++) {
            if (!sm[i].registered) {
                fprintf(stderr, "chat_bench: push: member %u was not registered\n", first + i);
                ok = false;
            }
        }
        bench_set_close(s, 5000);
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * The measurement
 * ------------------------------------------------------------------------- */

/* CPU of the broker's main thread (tid = pid) in microseconds. */
static bool main_thread_cpu_us(long pid, uint64_t *us)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/stat", pid, pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return false;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    /* after the command's ")": state, then fields 4..13, utime (14), stime (15) */
    if (!p ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) {
        return false;
    }
    *us = (ut + st) * 1000000ull / (unsigned long long)sysconf(_SC_CLK_TCK);
    return true;
}

#define LAT_MAX 100000

struct pub_state {
    uint64_t sent_ns[65536]; /* by mid */
    uint64_t *lat;
    size_t nlat;
    bool measuring;
};

static struct pub_state *g_ps;

static void pub_on_pub(bench_client *c, int mid)
{
    (void)c;
    if (g_ps->measuring && g_ps->nlat < LAT_MAX && g_ps->sent_ns[mid & 0xffff]) {
        g_ps->lat[g_ps->nlat++] = (bench_now_ns() - g_ps->sent_ns[mid & 0xffff]) / 1000;
    }
    g_ps->sent_ns[mid & 0xffff] = 0;
}

int cmd_push(const struct opts *o)
{
    struct sink k = {0};
    struct pub_state *ps = calloc(1, sizeof(*ps));
    bench_set *s = NULL;
    unsigned groups = o->groups ? o->groups : 10, members = o->registered;
    bool push = o->push_on, sink = false;
    char payload[PAYLOAD_BYTES + 1];
    uint64_t cpu0 = 0, cpu1 = 0, main0 = 0, main1 = 0, posts0 = 0, posts1 = 0, sent = 0;
    uint64_t busy0 = 0, busy1 = 0, self0 = 0, self1 = 0;
    int rc = 1;

    if (!ps || !(ps->lat = calloc(LAT_MAX, sizeof(uint64_t))) || members == 0 || !o->sink_port ||
        o->pid <= 0) {
        fprintf(stderr, "chat_bench: push needs --registered N, --sink-port and --pid\n");
        goto done;
    }
    g_ps = ps;
    if (!(sink = sink_start(&k, o->sink_port, o->hang)) ||
        !setup(o, groups, members, o->sink_port, push)) {
        goto done;
    }
    s = bench_set_create();
    bench_client *pub = s ? bench_set_add(s, "push-pub", true, o->port, NULL) : NULL;
    if (!pub || !bench_set_wait_connected(s, 10000)) {
        goto done;
    }
    pub->on_pub = pub_on_pub;
    /* one message a second (--rate) to each group, spread evenly */
    double rate = (o->rate > 0 ? o->rate : 1.0) * groups;
    uint64_t gap_ns = (uint64_t)(1e9 / rate), start = bench_now_ns();
    uint64_t total_ns = ((uint64_t)o->warm_ms + o->dur_ms) * 1000000ull;
    uint64_t n = 0;
    bool cpu_ok = true;
    while (bench_now_ns() - start < total_ns) {
        uint64_t now = bench_now_ns();
        if (!ps->measuring && now - start >= (uint64_t)o->warm_ms * 1000000ull) {
            ps->measuring = true;
            cpu_ok = proc_cpu_us(o->pid, &cpu0) && main_thread_cpu_us(o->pid, &main0) &&
                     machine_busy_us(&busy0);
            self0 = self_cpu_us();
            posts0 = atomic_load(&k.posts);
            sent = 0;
        }
        if (now - start >= n * gap_ns) {
            char topic[128];
            int mid = 0;
            snprintf(topic, sizeof(topic), "chat/%s%" PRIu64, o->group, n % groups);
            size_t len = make_payload(payload, "push-pub", n, now);
            if (mosquitto_publish(pub->mosq, &mid, topic, (int)len, payload, 1, false) !=
                MOSQ_ERR_SUCCESS) {
                fprintf(stderr, "chat_bench: push: publish failed\n");
                goto done;
            }
            ps->sent_ns[mid & 0xffff] = now;
            n++;
            sent += ps->measuring;
        }
        uint64_t next = start + n * gap_ns,
                 left = next > bench_now_ns() ? next - bench_now_ns() : 0;
        bench_set_poll(s, (int)(left / 1000000 > 50 ? 50 : left / 1000000));
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu1) && main_thread_cpu_us(o->pid, &main1) &&
             machine_busy_us(&busy1);
    self1 = self_cpu_us();
    posts1 = atomic_load(&k.posts);
    if (!cpu_ok || sent == 0) {
        fprintf(stderr, "chat_bench: push: no broker CPU figures, or nothing sent\n");
        goto done;
    }
    qsort(ps->lat, ps->nlat, sizeof(uint64_t), cmp_u64);
    double secs = o->dur_ms / 1000.0;
    printf("messages=%" PRIu64 " posts=%" PRIu64 " notes_per_s=%.1f cpu_us_per_msg=%.1f "
           "main_cpu_us_per_msg=%.1f pub_p50_us=%" PRIu64 " pub_p99_us=%" PRIu64
           " registrations=%u groups=%u",
           sent, posts1 - posts0, (double)(posts1 - posts0) / secs,
           (double)(cpu1 - cpu0) / (double)sent, (double)(main1 - main0) / (double)sent,
           quantile(ps->lat, ps->nlat, 0.5), quantile(ps->lat, ps->nlat, 0.99), push ? members : 0,
           groups);
    print_other_util(busy1 - busy0, cpu1 - cpu0, (double)(self1 - self0), o->dur_ms);
    printf("\n");
    rc = 0;

done:
    bench_set_close(s, 5000);
    if (sink) {
        sink_stop(&k);
    }
    if (ps) {
        free(ps->lat);
    }
    free(ps);
    return rc;
}
