/* bench_presence: thousands of devices online in one group and the pushes
 * that reach them (presence), on raw MQTT 3.1.1 sockets under one epoll,
 * since libmosquitto clients (bench_client) need a poll(2) slot each. */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------
 * presence: N raw MQTT 3.1.1 connections (no libmosquitto: one epoll over
 * thousands of sockets) subscribed to one group, K of them reading one
 * more message each --rate times a second; the messages (--count) were
 * stored before the others came online, so that nothing but the pushes
 * reaches the N devices (a chat message's fan-out to N subscribers is the
 * broker's own work, with or without the plugin). A probe pings the broker
 * throughout: the longest round trip is the longest the broker's loop
 * stalled, while they came online (ramp), while the reads were pushed
 * (measure) and while they left (leave).
 * ------------------------------------------------------------------------- */

#define RAW_HEAD 256u /* bytes of a packet's body kept for a look */

struct raw {
    int fd;
    bool reader;
    bool connacked, subacked;
    /* the packet being read */
    int stage; /* 0: type byte, 1: remaining length, 2: body */
    unsigned char type;
    size_t remaining; /* body bytes still to read */
    size_t body_len;
    unsigned shift;
    unsigned char head[RAW_HEAD];
    size_t head_len;
    uint64_t read;   /* highest id read */
    uint64_t pushes; /* pushes received while measuring */
    uint64_t push_bytes;
    uint64_t pingresps;
};

struct pr_run {
    const struct opts *o;
    struct raw *c;
    unsigned n;
    bool measuring;
    char read_topic[160];
    uint64_t write_drops;
    uint64_t reads;
    uint64_t ping_sent_ns; /* 0: no ping out */
    uint64_t *rtt;         /* ping round trips, ns */
    size_t nrtt, caprtt;
    uint64_t rtt_max;      /* the longest since the last phase began */
    uint64_t last_push_ns; /* when the last push arrived, measuring or not */
};

static bool raw_write(struct pr_run *r, struct raw *c, const unsigned char *p, size_t n)
{
    ssize_t w = write(c->fd, p, n);
    if (w != (ssize_t)n) {
        r->write_drops++;
        return false;
    }
    return true;
}

/* A PUBLISH at QoS 0 of payload to topic. */
static bool raw_publish(struct pr_run *r, struct raw *c, const char *topic, const char *payload)
{
    unsigned char p[512];
    size_t tl = strlen(topic), pl = strlen(payload), rem = 2 + tl + pl, n = 0;
    if (rem + 5 > sizeof(p)) {
        return false;
    }
    p[n++] = 0x30;
    do {
        unsigned char b = rem & 0x7f;
        rem >>= 7;
        p[n++] = rem ? (unsigned char)(b | 0x80) : b;
    } while (rem);
    p[n++] = (unsigned char)(tl >> 8);
    p[n++] = (unsigned char)(tl & 0xff);
    memcpy(p + n, topic, tl);
    n += tl;
    memcpy(p + n, payload, pl);
    n += pl;
    return raw_write(r, c, p, n);
}

/* One whole packet (its first RAW_HEAD body bytes in c->head). */
static void raw_packet(struct pr_run *r, struct raw *c)
{
    unsigned t = c->type >> 4;
    if (t == 2) {
        c->connacked = true;
    } else if (t == 9) {
        c->subacked = true;
    } else if (t == 13) {
        c->pingresps++;
        if (r->ping_sent_ns) {
            uint64_t d = bench_now_ns() - r->ping_sent_ns;
            if (r->nrtt == r->caprtt) {
                size_t cap = r->caprtt ? r->caprtt * 2 : 1024;
                uint64_t *nr = realloc(r->rtt, cap * sizeof(*nr));
                if (nr) {
                    r->rtt = nr;
                    r->caprtt = cap;
                }
            }
            if (r->nrtt < r->caprtt) {
                r->rtt[r->nrtt++] = d;
            }
            r->rtt_max = d > r->rtt_max ? d : r->rtt_max;
            r->ping_sent_ns = 0;
        }
    } else if (t == 3 && c->head_len >= 2) {
        size_t tl = ((size_t)c->head[0] << 8) | c->head[1];
        const char *topic = (const char *)c->head + 2;
        if (2 + tl > c->head_len) {
            return;
        }
        const char *pl = topic + tl;
        size_t plen = c->head_len - 2 - tl;
        if (tl == strlen(RESPONSE_TOPIC) && !memcmp(topic, RESPONSE_TOPIC, tl)) {
            if (is_push(pl, plen)) {
                r->last_push_ns = bench_now_ns();
            }
            if (r->measuring && is_push(pl, plen)) {
                c->pushes++;
                c->push_bytes += c->body_len;
            }
            return;
        }
    }
}

/* Reads what c's socket holds; false when it closed. */
static bool raw_read(struct pr_run *r, struct raw *c)
{
    unsigned char buf[65536];
    for (int rounds = 0; rounds < 64; rounds++) {
        ssize_t n = read(c->fd, buf, sizeof(buf));
        if (n == 0) {
            return false;
        }
        if (n < 0) {
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
        }
        for (ssize_t i = 0; i < n;) {
            if (c->stage == 0) {
                c->type = buf[i++];
                c->stage = 1;
                c->body_len = 0;
                c->shift = 0;
                c->head_len = 0;
            } else if (c->stage == 1) {
                c->body_len |= (size_t)(buf[i] & 0x7f) << c->shift;
                c->shift += 7;
                if (!(buf[i++] & 0x80) || c->shift > 21) {
                    c->remaining = c->body_len;
                    c->stage = 2;
                }
            }
            if (c->stage == 2) {
                size_t take = (size_t)(n - i) < c->remaining ? (size_t)(n - i) : c->remaining;
                if (c->head_len < RAW_HEAD) {
                    size_t keep = RAW_HEAD - c->head_len < take ? RAW_HEAD - c->head_len : take;
                    memcpy(c->head + c->head_len, buf + i, keep);
                    c->head_len += keep;
                }
                i += (ssize_t)take;
                c->remaining -= take;
                if (c->remaining == 0) {
                    raw_packet(r, c);
                    c->stage = 0;
                }
            }
        }
    }
    return true;
}

/* Connects raw client c as client id id, keep-alive 10 minutes, and sends
 * CONNECT (and SUBSCRIBE to topic, QoS 0, when topic is not NULL). */
static bool raw_open(struct pr_run *r, struct raw *c, int ep, const char *id, const char *topic)
{
    struct sockaddr_in a = {0};
    unsigned char p[512];
    size_t n = 0, il = strlen(id);
    int one = 1;

    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) {
        perror("chat_bench: socket");
        return false;
    }
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)r->o->port);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        perror("chat_bench: connect");
        return false;
    }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    p[n++] = 0x10;
    p[n++] = (unsigned char)(10 + 2 + il);
    memcpy(p + n, "\0\4MQTT\4\2\2\130", 10); /* clean session, keep-alive 600 s */
    n += 10;
    p[n++] = (unsigned char)(il >> 8);
    p[n++] = (unsigned char)(il & 0xff);
    memcpy(p + n, id, il);
    n += il;
    if (topic) {
        /* The group, and the response topic: pushes go only to a device
         * subscribed there (protocol v1.2), as a client on the library is. */
        const char *filters[2] = {topic, RESPONSE_TOPIC};
        size_t tl = strlen(topic), rl = strlen(RESPONSE_TOPIC);
        if (2 + (2 + tl + 1) + (2 + rl + 1) > 127) {
            fprintf(stderr, "chat_bench: group name too long for a one-byte length\n");
            return false;
        }
        p[n++] = 0x82;
        p[n++] = (unsigned char)(2 + (2 + tl + 1) + (2 + rl + 1));
        p[n++] = 0;
        p[n++] = 1;
        for (size_t f = 0; f < 2; f++) {
            size_t fl = strlen(filters[f]);
            p[n++] = (unsigned char)(fl >> 8);
            p[n++] = (unsigned char)(fl & 0xff);
            memcpy(p + n, filters[f], fl);
            n += fl;
            p[n++] = 0;
        }
    }
    if (!raw_write(r, c, p, n)) {
        return false;
    }
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) == 0;
}

/* Handles socket activity for up to timeout_ms; false when a socket closed. */
static bool raw_poll(struct pr_run *r, int ep, int timeout_ms)
{
    struct epoll_event evs[256];
    int k = epoll_wait(ep, evs, 256, timeout_ms);
    for (int i = 0; i < k; i++) {
        if (!raw_read(r, evs[i].data.ptr)) {
            fprintf(stderr, "chat_bench: a connection closed\n");
            return false;
        }
    }
    return k >= 0 || errno == EINTR;
}

/* Polls, pinging the broker with the probe (the last client) every 20 ms. */
static bool raw_pump(struct pr_run *r, int ep, struct raw *probe, uint64_t until_ns)
{
    static const unsigned char ping[2] = {0xc0, 0x00};
    static uint64_t last_ping;
    for (uint64_t pass = 0; pass < 100000000ull; pass++) {
        uint64_t now = bench_now_ns();
        if (now >= until_ns) {
            return true;
        }
        if (!r->ping_sent_ns && now - last_ping >= 20000000ull) {
            last_ping = now;
            if (raw_write(r, probe, ping, sizeof(ping))) {
                r->ping_sent_ns = now;
            }
        }
        if (!raw_poll(r, ep, 1)) {
            return false;
        }
    }
    return true;
}

int cmd_presence(const struct opts *o)
{
    struct pr_run r = {.o = o, .n = o->online};
    struct rlimit rl;
    char topic[160], id[32], buf[24];
    unsigned n = o->online;
    int ep = epoll_create1(0), rc = 1;
    uint64_t t_conn = 0, max_ramp = 0, max_measure = 0, max_leave = 0;

    /* A socket per connection, and the probe: raise the soft limit. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (n < 2 || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < n + 64) {
        fprintf(stderr, "chat_bench: --online %u needs %u open files, the limit is %llu\n", n,
                n + 64, (unsigned long long)rl.rlim_cur);
        return 1;
    }
    r.c = calloc(n + 1, sizeof(*r.c));
    if (!r.c || ep < 0) {
        goto done;
    }
    snprintf(topic, sizeof(topic), "chat/%s", o->group);
    snprintf(r.read_topic, sizeof(r.read_topic), "chat/%s/read", o->group);
    struct raw *probe = &r.c[n];
    if (!raw_open(&r, probe, ep, "probe", NULL)) {
        goto done;
    }
    /* The messages first, from client 0 (a member, online from here on). */
    if (!raw_open(&r, &r.c[0], ep, "u00000", topic)) {
        goto done;
    }
    for (uint64_t i = 0; i < o->count; i++) {
        if (!raw_publish(&r, &r.c[0], topic, "{\"body\":\"hello\"}") ||
            !raw_pump(&r, ep, probe, bench_now_ns() + 1000000ull)) {
            goto done;
        }
    }
    /* The others in batches (a listen backlog is finite); 1..readers read. */
    uint64_t t0 = bench_now_ns();
    r.rtt_max = 0;
    for (unsigned i = 1; i < n; i += 100) {
        for (unsigned j = i; j < n && j < i + 100; j++) {
            snprintf(id, sizeof(id), "u%05u", j);
            r.c[j].reader = j <= o->readers;
            if (!raw_open(&r, &r.c[j], ep, id, topic)) {
                goto done;
            }
        }
        uint64_t until = bench_now_ns() + (uint64_t)o->timeout_ms * 1000000ull;
        for (unsigned j = i; j < n && j < i + 100; j++) {
            while (!r.c[j].subacked) {
                if (bench_now_ns() > until ||
                    !raw_pump(&r, ep, probe, bench_now_ns() + 5000000ull)) {
                    fprintf(stderr, "chat_bench: client %u not subscribed in time\n", j);
                    goto done;
                }
            }
        }
    }
    t_conn = bench_now_ns() - t0;
    /* The presence pushes of the ramp go out (until none came for 2 s, at
     * most warm_ms); then the reads. */
    uint64_t settle_end = bench_now_ns() + (uint64_t)o->warm_ms * 1000000ull;
    r.last_push_ns = bench_now_ns();
    while (bench_now_ns() < settle_end && bench_now_ns() - r.last_push_ns < 2000000000ull) {
        if (!raw_pump(&r, ep, probe, bench_now_ns() + 100000000ull)) {
            goto done;
        }
    }
    uint64_t settle_ns = bench_now_ns() - t0 - t_conn;
    max_ramp = r.rtt_max;
    r.rtt_max = 0;
    r.measuring = true;
    uint64_t m0 = bench_now_ns(), m1 = m0 + (uint64_t)o->dur_ms * 1000000ull;
    double gap_ns = 1e9 / (o->rate > 0 ? o->rate : 1);
    uint64_t step = 0;
    while (bench_now_ns() < m1) {
        uint64_t due = m0 + (uint64_t)((double)step * gap_ns);
        if (bench_now_ns() >= due && step < o->count) {
            step++;
            snprintf(buf, sizeof(buf), "%" PRIu64, step);
            for (unsigned j = 1; j <= o->readers && j < n; j++) {
                if (raw_publish(&r, &r.c[j], r.read_topic, buf)) {
                    r.reads++;
                }
            }
        }
        if (!raw_pump(&r, ep, probe, bench_now_ns() + 2000000ull)) {
            goto done;
        }
    }
    r.measuring = false;
    max_measure = r.rtt_max;
    r.rtt_max = 0;
    /* Everybody leaves, but the probe: the offline pushes go to the rest. */
    uint64_t pushes = 0, bytes = 0;
    for (unsigned i = 0; i < n; i++) {
        pushes += r.c[i].pushes;
        bytes += r.c[i].push_bytes;
    }
    for (unsigned i = 0; i < n; i++) {
        epoll_ctl(ep, EPOLL_CTL_DEL, r.c[i].fd, NULL);
        close(r.c[i].fd);
        r.c[i].fd = -1;
    }
    if (!raw_pump(&r, ep, probe, bench_now_ns() + 3000000000ull)) {
        goto done;
    }
    max_leave = r.rtt_max;
    qsort(r.rtt, r.nrtt, sizeof(*r.rtt), cmp_u64);
    double sec = o->dur_ms / 1e3;
    printf("online=%u readers=%u connect_ms=%.0f settle_ms=%.0f reads=%" PRIu64
           " pushes_per_member_s=%.2f push_bytes_per_member_s=%.0f pings=%zu "
           "ping_p50_ms=%.2f ping_p99_ms=%.2f ping_max_ramp_ms=%.1f ping_max_measure_ms=%.1f "
           "ping_max_leave_ms=%.1f write_drops=%" PRIu64 "\n",
           n, o->readers, (double)t_conn / 1e6, (double)settle_ns / 1e6, r.reads,
           (double)pushes / n / sec, (double)bytes / n / sec, r.nrtt,
           (double)quantile(r.rtt, r.nrtt, 0.5) / 1e6, (double)quantile(r.rtt, r.nrtt, 0.99) / 1e6,
           (double)max_ramp / 1e6, (double)max_measure / 1e6, (double)max_leave / 1e6,
           r.write_drops);
    rc = 0;
done:
    for (unsigned i = 0; r.c && i <= n; i++) {
        if (r.c[i].fd > 0) {
            close(r.c[i].fd);
        }
    }
    free(r.c);
    free(r.rtt);
    if (ep >= 0) {
        close(ep);
    }
    return rc;
}
