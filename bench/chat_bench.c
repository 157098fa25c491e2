/* chat_bench: the load generator behind bench/run. Each subcommand does one
 * measurement against a broker already running on 127.0.0.1 and prints one
 * line of key=value pairs on stdout; bench/run starts the brokers, alternates
 * them and turns the lines into docs/benchmarks.md.
 *
 *   chat_bench port                          a free 127.0.0.1 port
 *   chat_bench wait    --port P              until the broker answers
 *   chat_bench ingest  --port P --pid PID --members M [--rate R] [--pub-port P2] ...
 *   chat_bench join    --port P --devices K --mode chat|session
 *   chat_bench fill    --port P --count N
 *   chat_bench catchup --port P --count N --mode chat|session [--pid PID]
 *   chat_bench appcatchup --port P --count N --via lib|mqchat --state FILE [--mqchat PATH]
 *   chat_bench idle    --pid PID             until the broker's CPU is quiet
 *   chat_bench quiet   [--max-busy CORES]    until the whole machine is quiet
 *   chat_bench receipts --port P --pid PID --members M --rate R --mode read|ack
 *                                            every member reads (or acks) every message
 *   chat_bench presence --port P --online N --readers K --rate R
 *                                            N raw connections online in one group
 *
 * The same commands drive plain Mosquitto and Mosquitto with the plugin:
 * both see the same topic (chat/<group>) and the same JSON payloads of about
 * 200 bytes; with the plugin, subscribers receive the stored envelope, which
 * keeps the payload's fields. Every publisher stays within a bounded window
 * ahead of its acknowledgements and of the slowest subscriber, far below
 * Mosquitto's per-client in-flight and queue limits, so that neither broker
 * drops a message while measured; every run checks that none was lost.
 *
 * Every loop is bounded in count or time; only 127.0.0.1 is ever contacted.
 */
#include "bench_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "chat_client.h"

#define RESPONSE_TOPIC "$CONTROL/chat/v1/response"
#define PAYLOAD_BYTES 200u     /* target size of a published JSON payload */
#define PUBLISH_BURST 64u      /* publishes per poll pass at most */
#define LATENCY_MAX 20000000u  /* latency samples kept at most */
#define DRAIN_TIMEOUT_MS 20000 /* after the measurement: wait for stragglers */

/* ---------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------- */

struct opts {
    int port;
    int pub_port;        /* ingest: the publisher's broker (0: port), for two brokers */
    long pid;            /* broker process, for CPU time; 0: none */
    const char *group;   /* chat/<group> */
    const char *mode;    /* chat | session */
    const char *client;  /* client id: fill's publisher (pub0), catchup's device (dev0) */
    const char *prefix;  /* client ids of join's devices: <prefix><i> */
    const char *via;     /* appcatchup: lib (an application on chat_client) | mqchat */
    const char *state;   /* appcatchup: the client library's state file */
    const char *mqchat;  /* appcatchup --via mqchat: the program */
    unsigned members;    /* ingest: online subscribers */
    unsigned devices;    /* join: devices */
    unsigned window;     /* messages ahead of the slowest subscriber / of acks */
    double rate;         /* ingest: messages per second; 0: as fast as possible */
    double max_busy;     /* quiet: cores the machine may keep busy */
    unsigned warm_ms;    /* ingest: load before the measurement */
    unsigned dur_ms;     /* ingest: measurement */
    unsigned timeout_ms; /* overall bound */
    unsigned idle_ms;    /* catchup: stop after this long without a message */
    uint64_t count;      /* fill: messages; catchup: messages expected */
    uint64_t first;      /* catchup: first id (chat) or n (session) expected */
    uint64_t seq;        /* fill: n of the first message is seq + 1 */
    unsigned online;     /* presence: raw connections online */
    unsigned readers;    /* presence: how many of them read every message */
};

static void usage(void)
{
    fprintf(
        stderr,
        "usage: chat_bench port | wait | idle | ingest | join | fill | catchup [--name value]...\n"
        "  --port P --pub-port P --pid PID --group G --mode chat|session --client ID --prefix P\n"
        "  --members M --devices K --window W --rate R --warm-ms T --dur-ms T\n"
        "  --timeout-ms T --idle-ms T --count N --first N --seq N --max-busy CORES\n"
        "  --online N --readers K --via lib|mqchat --state FILE --mqchat PATH\n");
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || !end || *end || s[0] == '-' || s[0] == '\0') {
        return false;
    }
    *v = x;
    return true;
}

static bool parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.group = "bench",
                       .mode = "chat",
                       .client = NULL,
                       .prefix = "dev",
                       .via = "lib",
                       .mqchat = "mqchat",
                       .members = 1,
                       .devices = 1,
                       .window = 100,
                       .warm_ms = 300,
                       .dur_ms = 1000,
                       .timeout_ms = 60000,
                       .idle_ms = 2000,
                       .count = 1000,
                       .first = 1,
                       .max_busy = 0.2};
    for (int i = 2; i < argc; i += 2) {
        const char *name = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u = 0;
        if (!val) {
            fprintf(stderr, "chat_bench: %s needs a value\n", name);
            return false;
        }
        bool num = parse_u64(val, &u);
        if (!strcmp(name, "--group")) {
            o->group = val;
        } else if (!strcmp(name, "--mode")) {
            o->mode = val;
        } else if (!strcmp(name, "--client")) {
            o->client = val;
        } else if (!strcmp(name, "--prefix")) {
            o->prefix = val;
        } else if (!strcmp(name, "--via")) {
            o->via = val;
        } else if (!strcmp(name, "--state")) {
            o->state = val;
        } else if (!strcmp(name, "--mqchat")) {
            o->mqchat = val;
        } else if (!strcmp(name, "--rate") || !strcmp(name, "--max-busy")) {
            char *end = NULL;
            double d = strtod(val, &end);
            if (!end || *end || d < 0) {
                fprintf(stderr, "chat_bench: bad %s %s\n", name, val);
                return false;
            }
            *(!strcmp(name, "--rate") ? &o->rate : &o->max_busy) = d;
        } else if (!num) {
            fprintf(stderr, "chat_bench: %s wants a number, not %s\n", name, val);
            return false;
        } else if (!strcmp(name, "--port") && u > 0 && u < 65536) {
            o->port = (int)u;
        } else if (!strcmp(name, "--pub-port") && u > 0 && u < 65536) {
            o->pub_port = (int)u;
        } else if (!strcmp(name, "--pid")) {
            o->pid = (long)u;
        } else if (!strcmp(name, "--members") && u <= BENCH_SET_MAX - 1) {
            o->members = (unsigned)u;
        } else if (!strcmp(name, "--devices") && u >= 1 && u <= BENCH_SET_MAX) {
            o->devices = (unsigned)u;
        } else if (!strcmp(name, "--window") && u >= 1 && u <= 900) {
            o->window = (unsigned)u;
        } else if (!strcmp(name, "--warm-ms") && u <= 600000) {
            o->warm_ms = (unsigned)u;
        } else if (!strcmp(name, "--dur-ms") && u >= 1 && u <= 600000) {
            o->dur_ms = (unsigned)u;
        } else if (!strcmp(name, "--timeout-ms") && u >= 1 && u <= 3600000) {
            o->timeout_ms = (unsigned)u;
        } else if (!strcmp(name, "--idle-ms") && u >= 1 && u <= 600000) {
            o->idle_ms = (unsigned)u;
        } else if (!strcmp(name, "--count") && u <= 100000000) {
            o->count = u;
        } else if (!strcmp(name, "--first") && u >= 1) {
            o->first = u;
        } else if (!strcmp(name, "--seq")) {
            o->seq = u;
        } else if (!strcmp(name, "--online") && u >= 2 && u <= 60000) {
            o->online = (unsigned)u;
        } else if (!strcmp(name, "--readers") && u <= 60000) {
            o->readers = (unsigned)u;
        } else {
            fprintf(stderr, "chat_bench: unknown option or value out of range: %s %s\n", name, val);
            return false;
        }
    }
    if (strcmp(o->via, "lib") != 0 && strcmp(o->via, "mqchat") != 0) {
        fprintf(stderr, "chat_bench: --via is lib or mqchat\n");
        return false;
    }
    if (strcmp(o->mode, "chat") != 0 && strcmp(o->mode, "session") != 0 &&
        strcmp(o->mode, "read") != 0 && strcmp(o->mode, "ack") != 0) {
        fprintf(stderr, "chat_bench: --mode is chat or session (receipts: read or ack)\n");
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------- */

static double ms_since(uint64_t t0)
{
    return (double)(bench_now_ns() - t0) / 1e6;
}

/* CPU time (user + system, all threads) of process pid in microseconds. */
static bool proc_cpu_us(long pid, uint64_t *us)
{
    char path[64], buf[1024];
    unsigned long ut = 0, st = 0;

    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) {
        return false;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: fields start after
     * the last ')'. utime and stime are fields 14 and 15. */
    const char *p = strrchr(buf, ')');
    if (!p ||
        sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) {
        return false;
    }
    long tck = sysconf(_SC_CLK_TCK);
    *us = (uint64_t)(ut + st) * 1000000ull / (uint64_t)(tck > 0 ? tck : 100);
    return true;
}

/* CPU time all processes of the machine spent busy (user, nice, system,
 * irq, softirq, steal), in microseconds, from /proc/stat. */
static bool machine_busy_us(uint64_t *us)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f) {
        return false;
    }
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8) {
        return false;
    }
    long tck = sysconf(_SC_CLK_TCK);
    /* idle (3) and iowait (4) are not busy */
    *us = (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * 1000000ull / (uint64_t)(tck > 0 ? tck : 100);
    return true;
}

/* Our own CPU time in microseconds. */
static uint64_t self_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_utime.tv_sec * 1000000ull + (uint64_t)ru.ru_utime.tv_usec +
           (uint64_t)ru.ru_stime.tv_sec * 1000000ull + (uint64_t)ru.ru_stime.tv_usec;
}

/* Makes the client message ids of this process unlike those of any other
 * run against the same store: the plugin drops a (group, from, cid) it has
 * already stored, by design. */
static uint64_t g_run_token;

/* Builds a JSON payload of PAYLOAD_BYTES bytes carrying a client message id,
 * the sequence number n, the send time t (ns, monotonic) and a body of
 * pseudo-random lowercase words, which snappy cannot shrink much: stored
 * sizes are not flattered by a body of repeated bytes. Returns its length.
 * buf holds at least PAYLOAD_BYTES + 1 bytes. */
static size_t make_payload(char *buf, const char *client, uint64_t n, uint64_t t)
{
    int h = snprintf(buf, PAYLOAD_BYTES + 1,
                     "{\"cid\":\"%s-%" PRIx64 "-%" PRIu64 "\",\"n\":%" PRIu64 ",\"t\":%" PRIu64
                     ",\"body\":\"",
                     client, g_run_token, n, n, t);
    size_t len = h > 0 ? (size_t)h : 0;
    uint64_t x = n * 0x9e3779b97f4a7c15ull + 1; /* xorshift64, seeded by n */
    while (len < PAYLOAD_BYTES - 2) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned r = (unsigned)(x % 32);
        buf[len++] = r < 26 ? (char)('a' + r) : ' ';
    }
    buf[len++] = '"';
    buf[len++] = '}';
    buf[len] = '\0';
    return len;
}

/* Finds key (quoted, with its colon: "\"n\":") in a JSON text of len bytes
 * and reads the unsigned number after it. A bounded scan, cheap enough for a subscriber that must
 * keep up with the broker; the payloads are ours, so keys do not occur in values. */
static bool scan_u64(const char *s, size_t len, const char *key, uint64_t *v)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen < len; i++) {
        if (s[i] == key[0] && !memcmp(s + i, key, klen)) {
            const char *p = s + i + klen;
            uint64_t x = 0;
            size_t k = 0;
            while (i + klen + k < len && p[k] >= '0' && p[k] <= '9' && k < 20) {
                x = x * 10 + (uint64_t)(p[k] - '0');
                k++;
            }
            if (k == 0) {
                return false;
            }
            *v = x;
            return true;
        }
    }
    return false;
}

/* The plugin's pushes (protocol v1.1: reads and presence) come on the
 * response topic to every device subscribed to a group: the measurements
 * other than receipts' and presence's leave them aside. */
#define PUSH_READS "{\"responses\":[{\"command\":\"reads\""
#define PUSH_PRESENCE "{\"responses\":[{\"command\":\"presence\""

static bool is_push(const char *p, size_t len)
{
    return p &&
           ((len >= sizeof(PUSH_READS) - 1 && !memcmp(p, PUSH_READS, sizeof(PUSH_READS) - 1)) ||
            (len >= sizeof(PUSH_PRESENCE) - 1 &&
             !memcmp(p, PUSH_PRESENCE, sizeof(PUSH_PRESENCE) - 1)));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n sorted values. */
static uint64_t quantile(const uint64_t *v, size_t n, double q)
{
    if (n == 0) {
        return 0;
    }
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* ---------------------------------------------------------------------------
 * port, wait
 * ------------------------------------------------------------------------- */

static int cmd_port(void)
{
    struct sockaddr_in a = {0};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        perror("chat_bench: socket");
        return 1;
    }
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        perror("chat_bench: bind 127.0.0.1:0");
        close(fd);
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    close(fd);
    return 0;
}

/* True if something accepts TCP connections on 127.0.0.1:port. */
static bool tcp_probe(int port)
{
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return false;
    }
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

static int cmd_wait(const struct opts *o)
{
    uint64_t end = bench_now_ns() + (uint64_t)o->timeout_ms * 1000000ull;
    for (unsigned attempt = 0; attempt < 100000 && bench_now_ns() < end; attempt++) {
        /* Poll the port quietly; once it accepts, the broker must answer MQTT. */
        if (tcp_probe(o->port)) {
            bench_set *s = bench_set_create();
            char id[32];
            snprintf(id, sizeof(id), "bench-wait-%u", attempt);
            bool ok =
                s && bench_set_add(s, id, true, o->port, NULL) && bench_set_wait_connected(s, 2000);
            if (ok) {
                bench_set_disconnect_all(s, 1000);
            }
            bench_set_destroy(s);
            if (ok) {
                printf("ready=1\n");
                return 0;
            }
        }
        struct timespec ts = {0, 20000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "chat_bench: no broker answered on 127.0.0.1:%d\n", o->port);
    return 1;
}

/* Waits until process pid has used at most one clock tick of CPU in each of
 * three consecutive 200 ms windows (LevelDB finishing a compaction after the
 * store was opened, say), or timeout_ms passed. */
static int cmd_idle(const struct opts *o)
{
    uint64_t begin = bench_now_ns(), prev = 0, now = 0;
    uint64_t tick_us =
        1000000ull / (uint64_t)(sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100);
    unsigned quiet = 0;

    if (!proc_cpu_us(o->pid, &prev)) {
        fprintf(stderr, "chat_bench: no process %ld\n", o->pid);
        return 1;
    }
    while (quiet < 3 && ms_since(begin) < o->timeout_ms) {
        struct timespec ts = {0, 200000000L};
        nanosleep(&ts, NULL);
        if (!proc_cpu_us(o->pid, &now)) {
            return 1;
        }
        quiet = now - prev <= tick_us ? quiet + 1 : 0;
        prev = now;
    }
    printf("idle=%d waited_ms=%.0f\n", quiet >= 3, ms_since(begin));
    return 0;
}

/* Waits until the machine as a whole kept at most max_busy cores busy in
 * each of two consecutive 250 ms windows, or timeout_ms passed: other work
 * on a shared machine would otherwise land inside a measurement. */
static int cmd_quiet(const struct opts *o)
{
    uint64_t begin = bench_now_ns(), prev = 0, now = 0;
    unsigned quiet = 0;
    double busy = 0;

    if (!machine_busy_us(&prev)) {
        return 1;
    }
    while (quiet < 2 && ms_since(begin) < o->timeout_ms) {
        struct timespec ts = {0, 250000000L};
        nanosleep(&ts, NULL);
        if (!machine_busy_us(&now)) {
            return 1;
        }
        busy = (double)(now - prev) / 250000.0;
        quiet = busy <= o->max_busy ? quiet + 1 : 0;
        prev = now;
    }
    printf("quiet=%d waited_ms=%.0f busy=%.2f\n", quiet >= 2, ms_since(begin), busy);
    return 0;
}

/* ---------------------------------------------------------------------------
 * ingest: one publisher, M online subscribers, QoS 1
 * ------------------------------------------------------------------------- */

struct sub_state {
    uint64_t next;     /* n expected next */
    uint64_t got;      /* messages received */
    uint64_t disorder; /* messages that were not the next expected */
};

struct ingest {
    const struct opts *o;
    struct sub_state *subs;
    bool measuring;
    uint64_t t0, t1;
    uint64_t *lat; /* latency samples in ns, during the measurement */
    size_t nlat, caplat;
    bool lat_overflow;
};

static struct ingest *g_ingest; /* the one run of this process, for callbacks */

static void ingest_on_msg(bench_client *c, const struct mosquitto_message *m)
{
    struct ingest *in = g_ingest;
    struct sub_state *st = c->ctx;
    uint64_t n = 0, t = 0, now = bench_now_ns();
    const char *p = m->payload;
    size_t len = (size_t)m->payloadlen;

    if (!strcmp(m->topic, RESPONSE_TOPIC)) {
        return; /* a push about the group's members */
    }
    st->got++;
    if (!p || !scan_u64(p, len, "\"n\":", &n)) {
        st->disorder++;
        return;
    }
    if (n == st->next) {
        st->next++;
    } else {
        st->disorder++;
        if (n > st->next) {
            st->next = n + 1;
        }
    }
    if (in->measuring && in->o->rate > 0 && scan_u64(p, len, "\"t\":", &t) && now >= t) {
        if (in->nlat == in->caplat) {
            size_t ncap = in->caplat ? in->caplat * 2 : 65536;
            uint64_t *nl = ncap <= LATENCY_MAX ? realloc(in->lat, ncap * sizeof(*nl)) : NULL;
            if (!nl) {
                in->lat_overflow = true;
                return;
            }
            in->lat = nl;
            in->caplat = ncap;
        }
        in->lat[in->nlat++] = now - t;
    }
}

static uint64_t sum_got(const struct ingest *in, unsigned m)
{
    uint64_t s = 0;
    for (unsigned i = 0; i < m; i++) {
        s += in->subs[i].got;
    }
    return s;
}

static uint64_t min_got(const struct ingest *in, unsigned m, uint64_t dflt)
{
    uint64_t v = dflt;
    for (unsigned i = 0; i < m; i++) {
        if (in->subs[i].got < v) {
            v = in->subs[i].got;
        }
    }
    return v;
}

static int cmd_ingest(const struct opts *o)
{
    struct ingest in = {.o = o};
    bench_set *s = NULL;
    bench_client *pub = NULL;
    char topic[256], payload[PAYLOAD_BYTES + 1];
    unsigned m = o->members;
    uint64_t published = 0, acked0 = 0, acked1 = 0, got0 = 0, got1 = 0;
    uint64_t cpu0 = 0, cpu1 = 0, self0 = 0, self1 = 0, busy0 = 0, busy1 = 0;
    bool cpu_ok = o->pid > 0, busy_ok = true;
    int rc = 1;

    g_ingest = &in;
    snprintf(topic, sizeof(topic), "chat/%s", o->group);
    in.subs = calloc(m ? m : 1, sizeof(*in.subs));
    s = bench_set_create();
    if (!in.subs || !s) {
        fprintf(stderr, "chat_bench: out of memory\n");
        goto done;
    }
    for (unsigned i = 0; i < m; i++) {
        char id[64];
        snprintf(id, sizeof(id), "sub%u", i);
        in.subs[i].next = 1;
        bench_client *c = bench_set_add(s, id, true, o->port, &in.subs[i]);
        if (!c) {
            goto done;
        }
        c->on_msg = ingest_on_msg;
    }
    if (!bench_set_wait_connected(s, 5000)) {
        goto done;
    }
    for (unsigned i = 0; i < m; i++) {
        if (!bench_client_subscribe(bench_set_get(s, i), topic, 1)) {
            goto done;
        }
    }
    if (m && !bench_set_wait_subacked(s, 5000)) {
        goto done;
    }
    pub = bench_set_add(s, "pub0", true, o->pub_port ? o->pub_port : o->port, NULL);
    if (!pub || !bench_set_wait_connected(s, 5000)) {
        goto done;
    }

    uint64_t begin = bench_now_ns();
    uint64_t t0 = begin + (uint64_t)o->warm_ms * 1000000ull;
    uint64_t t1 = t0 + (uint64_t)o->dur_ms * 1000000ull;
    double gap_ns = o->rate > 0 ? 1e9 / o->rate : 0;
    bool started = false;
    for (uint64_t pass = 0; pass < 100000000ull; pass++) {
        uint64_t now = bench_now_ns();
        if (!started && now >= t0) {
            started = true;
            in.measuring = true;
            acked0 = pub->pubacks;
            got0 = sum_got(&in, m);
            self0 = self_cpu_us();
            cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu0);
            busy_ok = machine_busy_us(&busy0);
        }
        if (now >= t1) {
            in.measuring = false;
            acked1 = pub->pubacks;
            got1 = sum_got(&in, m);
            self1 = self_cpu_us();
            cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu1);
            busy_ok = busy_ok && machine_busy_us(&busy1);
            break;
        }
        /* Publish while both windows allow and, at a fixed rate, while the
         * schedule says so. The payload carries the scheduled send time, so
         * that a broker falling behind shows in the latency. */
        uint64_t floor = min_got(&in, m, pub->pubacks);
        unsigned sent = 0;
        uint64_t wait_ns = 1000000;
        for (; sent < PUBLISH_BURST; sent++) {
            if (published - pub->pubacks >= o->window || published - floor >= o->window) {
                break;
            }
            uint64_t t = now;
            if (gap_ns > 0) {
                uint64_t due = begin + (uint64_t)((double)published * gap_ns);
                if (due > now) {
                    wait_ns = due - now;
                    break;
                }
                t = due;
            }
            size_t len = make_payload(payload, "pub0", published + 1, t);
            if (!bench_client_publish(pub, topic, payload, len, 1)) {
                goto done;
            }
            published++;
        }
        int r = bench_set_poll(s, 0);
        if (r < 0) {
            goto done;
        }
        if (r == 0 && sent < PUBLISH_BURST) {
            /* Nothing to read and nothing we may send: wait a little, less
             * than the gap to the next scheduled message. */
            if (gap_ns > 0 && wait_ns < 1000000) {
                struct timespec ts = {0, (long)(wait_ns > 20000 ? wait_ns - 10000 : 0)};
                if (ts.tv_nsec > 0) {
                    nanosleep(&ts, NULL);
                }
            } else if (bench_set_poll(s, 1) < 0) {
                goto done;
            }
        }
    }

    /* Let every subscriber receive what was published, then check it all came. */
    uint64_t drain_end = bench_now_ns() + (uint64_t)DRAIN_TIMEOUT_MS * 1000000ull;
    while (bench_now_ns() < drain_end &&
           (pub->pubacks < published || min_got(&in, m, published) < published)) {
        if (bench_set_poll(s, 5) < 0) {
            goto done;
        }
    }
    uint64_t lost = 0, disorder = 0;
    for (unsigned i = 0; i < m; i++) {
        lost += published > in.subs[i].got ? published - in.subs[i].got : 0;
        disorder += in.subs[i].disorder;
    }

    double dt = (double)o->dur_ms / 1e3;
    double in_rate = (double)(acked1 - acked0) / dt;
    double deliv_rate = (double)(got1 - got0) / dt;
    uint64_t msgs = acked1 - acked0;
    printf("members=%u published=%" PRIu64 " in_rate=%.0f deliv_rate=%.0f lost=%" PRIu64
           " disorder=%" PRIu64 " bench_util=%.2f",
           m, published, in_rate, deliv_rate, lost + (pub->pubacks < published), disorder,
           (double)(self1 - self0) / 1e6 / dt);
    if (cpu_ok && msgs) {
        printf(" cpu_us_per_msg=%.2f broker_util=%.2f", (double)(cpu1 - cpu0) / (double)msgs,
               (double)(cpu1 - cpu0) / 1e6 / dt);
        if (busy_ok) {
            /* What the rest of the machine kept busy meanwhile, in cores. */
            double other =
                ((double)(busy1 - busy0) - (double)(cpu1 - cpu0) - (double)(self1 - self0)) / 1e6 /
                dt;
            printf(" other_util=%.2f", other > 0 ? other : 0.0);
        }
    }
    if (o->rate > 0) {
        qsort(in.lat, in.nlat, sizeof(*in.lat), cmp_u64);
        printf(" target_rate=%.0f p50_us=%.0f p99_us=%.0f samples=%zu%s", o->rate,
               (double)quantile(in.lat, in.nlat, 0.50) / 1e3,
               (double)quantile(in.lat, in.nlat, 0.99) / 1e3, in.nlat,
               in.lat_overflow ? " samples_capped=1" : "");
    }
    printf("\n");
    rc = 0;

done:
    if (s) {
        bench_set_disconnect_all(s, 2000);
    }
    bench_set_destroy(s);
    free(in.subs);
    free(in.lat);
    return rc;
}

/* ---------------------------------------------------------------------------
 * join: devices that subscribe once and go offline
 * ------------------------------------------------------------------------- */

static int cmd_join(const struct opts *o)
{
    bench_set *s = bench_set_create();
    char topic[256];
    bool clean = !strcmp(o->mode, "chat");
    int rc = 1;

    snprintf(topic, sizeof(topic), "chat/%s", o->group);
    if (!s) {
        return 1;
    }
    for (unsigned i = 0; i < o->devices; i++) {
        char id[64];
        snprintf(id, sizeof(id), "%s%u", o->prefix, i);
        if (!bench_set_add(s, id, clean, o->port, NULL)) {
            goto done;
        }
    }
    if (!bench_set_wait_connected(s, 10000)) {
        goto done;
    }
    for (unsigned i = 0; i < o->devices; i++) {
        if (!bench_client_subscribe(bench_set_get(s, i), topic, 1)) {
            goto done;
        }
    }
    if (!bench_set_wait_subacked(s, 10000)) {
        goto done;
    }
    if (!bench_set_disconnect_all(s, 10000)) {
        goto done;
    }
    printf("joined=%u\n", o->devices);
    rc = 0;
done:
    bench_set_destroy(s);
    return rc;
}

/* ---------------------------------------------------------------------------
 * fill: one publisher, nobody online
 * ------------------------------------------------------------------------- */

static int cmd_fill(const struct opts *o)
{
    bench_set *s = bench_set_create();
    char topic[256], payload[PAYLOAD_BYTES + 1];
    uint64_t published = 0;
    int rc = 1;

    snprintf(topic, sizeof(topic), "chat/%s", o->group);
    if (!s) {
        return 1;
    }
    const char *id = o->client ? o->client : "pub0";
    bench_client *pub = bench_set_add(s, id, true, o->port, NULL);
    if (!pub || !bench_set_wait_connected(s, 5000)) {
        goto done;
    }
    uint64_t begin = bench_now_ns();
    uint64_t end = begin + (uint64_t)o->timeout_ms * 1000000ull;
    while (pub->pubacks < o->count) {
        if (bench_now_ns() > end) {
            fprintf(stderr, "chat_bench: fill: %" PRIu64 " of %" PRIu64 " acknowledged in %u ms\n",
                    pub->pubacks, o->count, o->timeout_ms);
            goto done;
        }
        for (unsigned k = 0;
             k < PUBLISH_BURST && published < o->count && published - pub->pubacks < o->window;
             k++) {
            size_t len = make_payload(payload, id, o->seq + published + 1, bench_now_ns());
            if (!bench_client_publish(pub, topic, payload, len, 1)) {
                goto done;
            }
            published++;
        }
        if (bench_set_poll(s, 1) < 0) {
            goto done;
        }
    }
    double ms = ms_since(begin);
    printf("published=%" PRIu64 " elapsed_ms=%.1f rate=%.0f\n", published, ms,
           (double)published / (ms / 1e3));
    rc = 0;
done:
    if (s) {
        bench_set_disconnect_all(s, 2000);
    }
    bench_set_destroy(s);
    return rc;
}

/* ---------------------------------------------------------------------------
 * catchup: one device comes back and takes what it missed
 * ------------------------------------------------------------------------- */

struct catchup {
    const struct opts *o;
    char ack_topic[256];
    uint64_t next;   /* id (chat) or n (session) expected next */
    uint64_t unique; /* messages handled, each once */
    uint64_t dups, gaps, pages, bytes;
    uint64_t last_msg; /* when the last message arrived */
    uint64_t t_done;   /* when the expected count was reached */
    bool bad;          /* an error response or unparsable message */
};

static void take_id(struct catchup *cu, uint64_t id)
{
    if (id < cu->next) {
        cu->dups++;
        return;
    }
    if (id > cu->next) {
        cu->gaps += id - cu->next;
    }
    cu->next = id + 1;
    cu->unique++;
    if (cu->unique == cu->o->count && !cu->t_done) {
        cu->t_done = bench_now_ns();
    }
}

/* A replay page (or an error) on the response topic: parse it as a client
 * would, take every message, ack the page's last id. */
static void catchup_page(bench_client *c, struct catchup *cu, const struct mosquitto_message *m)
{
    cJSON *root = cJSON_ParseWithLength(m->payload, (size_t)m->payloadlen);
    cJSON *entry = NULL;
    cJSON *responses = root ? cJSON_GetObjectItemCaseSensitive(root, "responses") : NULL;
    if (!cJSON_IsArray(responses)) {
        fprintf(stderr, "chat_bench: unparsable response: %.200s\n", (const char *)m->payload);
        cu->bad = true;
        goto done;
    }
    cJSON_ArrayForEach(entry, responses)
    {
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(entry, "error");
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
        const cJSON *last = cJSON_GetObjectItemCaseSensitive(entry, "last");
        const cJSON *msg = NULL;
        if (err) {
            fprintf(stderr, "chat_bench: error response: %.300s\n", (const char *)m->payload);
            cu->bad = true;
            continue;
        }
        if (!cJSON_IsArray(msgs)) {
            continue;
        }
        cu->pages++;
        cJSON_ArrayForEach(msg, msgs)
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
            if (!cJSON_IsNumber(id) || id->valuedouble < 1) {
                cu->bad = true;
                continue;
            }
            take_id(cu, (uint64_t)id->valuedouble);
        }
        if (cJSON_IsNumber(last)) {
            char ack[32];
            int n = snprintf(ack, sizeof(ack), "%" PRIu64, (uint64_t)last->valuedouble);
            bench_client_publish(c, cu->ack_topic, ack, (size_t)n, 1);
        }
    }
done:
    cJSON_Delete(root);
}

static struct catchup *g_catchup;

static void catchup_on_msg(bench_client *c, const struct mosquitto_message *m)
{
    struct catchup *cu = g_catchup;
    if (!strcmp(m->topic, RESPONSE_TOPIC) && is_push(m->payload, (size_t)m->payloadlen)) {
        return;
    }
    cu->last_msg = bench_now_ns();
    cu->bytes += (uint64_t)m->payloadlen;
    if (!strcmp(m->topic, RESPONSE_TOPIC)) {
        catchup_page(c, cu, m);
        return;
    }
    /* A message on chat/<group>: the envelope (chat) or our payload
     * (session). Parse it as a client would. */
    cJSON *root = cJSON_ParseWithLength(m->payload, (size_t)m->payloadlen);
    const cJSON *id =
        cJSON_GetObjectItemCaseSensitive(root, strcmp(cu->o->mode, "chat") ? "n" : "id");
    if (cJSON_IsNumber(id) && id->valuedouble >= 1) {
        take_id(cu, (uint64_t)id->valuedouble);
    } else {
        cu->bad = true;
    }
    cJSON_Delete(root);
}

static int cmd_catchup(const struct opts *o)
{
    struct catchup cu = {.o = o, .next = o->first};
    bench_set *s = bench_set_create();
    bool chat = !strcmp(o->mode, "chat");
    char topic[256];
    uint64_t cpu0 = 0, cpu1 = 0;
    bool cpu_ok = o->pid > 0;
    int rc = 1;

    g_catchup = &cu;
    snprintf(topic, sizeof(topic), "chat/%s", o->group);
    snprintf(cu.ack_topic, sizeof(cu.ack_topic), "chat/%s/ack", o->group);
    if (!s) {
        return 1;
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu0);
    uint64_t self0 = self_cpu_us(), busy0 = 0, busy1 = 0;
    bool busy_ok = machine_busy_us(&busy0);
    /* A persistent session gets its queue as soon as it connects: the clock
     * starts before the CONNECT. A chat device starts its catch-up with its
     * subscribe. */
    uint64_t t_start = bench_now_ns();
    bench_client *dev = bench_set_add(s, o->client ? o->client : "dev0", chat, o->port, NULL);
    if (!dev) {
        goto done;
    }
    dev->on_msg = catchup_on_msg;
    if (!bench_set_wait_connected(s, 5000)) {
        goto done;
    }
    if (chat) {
        t_start = bench_now_ns();
        if (!bench_client_subscribe(dev, topic, 1)) {
            goto done;
        }
    }
    cu.last_msg = bench_now_ns();
    uint64_t end = t_start + (uint64_t)o->timeout_ms * 1000000ull;
    for (uint64_t pass = 0; pass < 1000000000ull && !cu.t_done; pass++) {
        uint64_t now = bench_now_ns();
        if (now > end || now - cu.last_msg > (uint64_t)o->idle_ms * 1000000ull) {
            break;
        }
        if (bench_set_poll(s, 5) < 0) {
            goto done;
        }
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu1);
    uint64_t self1 = self_cpu_us();
    busy_ok = busy_ok && machine_busy_us(&busy1);
    double run_ms = ms_since(t_start);
    /* Without the whole count, the run ended on the idle or overall bound:
     * its time is that of the last message handled. */
    uint64_t t_end = cu.t_done ? cu.t_done : cu.last_msg;
    double ms = (double)(t_end - t_start) / 1e6;
    printf("received=%" PRIu64 " complete=%d dups=%" PRIu64 " gaps=%" PRIu64 " pages=%" PRIu64
           " bytes=%" PRIu64 " elapsed_ms=%.1f rate=%.0f bad=%d",
           cu.unique, cu.unique >= o->count, cu.dups, cu.gaps, cu.pages, cu.bytes, ms,
           ms > 0 ? (double)cu.unique / (ms / 1e3) : 0.0, cu.bad);
    if (ms > 0) {
        printf(" bench_util=%.2f", (double)(self1 - self0) / 1e3 / ms);
    }
    if (cpu_ok && cu.unique) {
        printf(" cpu_us_per_msg=%.2f", (double)(cpu1 - cpu0) / (double)cu.unique);
        if (ms > 0) {
            printf(" broker_util=%.2f", (double)(cpu1 - cpu0) / 1e3 / ms);
        }
        if (busy_ok && run_ms > 0) {
            double other =
                ((double)(busy1 - busy0) - (double)(cpu1 - cpu0) - (double)(self1 - self0)) / 1e3 /
                run_ms;
            printf(" other_util=%.2f", other > 0 ? other : 0.0);
        }
    }
    printf("\n");
    rc = 0;
done:
    if (s) {
        bench_set_disconnect_all(s, 2000);
    }
    bench_set_destroy(s);
    return rc;
}

/* ---------------------------------------------------------------------------
 * receipts: M members online in one group (clients of libmosquitto), every
 * one reading (--mode read) or acking (--mode ack, the baseline) every
 * message the first one publishes at --rate; counts the pushes each member
 * receives and the broker's CPU per read
 * ------------------------------------------------------------------------- */

struct rc_member {
    uint64_t read;   /* highest id read (or acked) */
    uint64_t msgs;   /* chat messages received */
    uint64_t pushes; /* pushes received while measuring */
    uint64_t reads;  /* reads published while measuring */
};

struct rc_run {
    bool measuring;
    char topic[256]; /* chat/<group>/read or /ack */
};

static struct rc_run g_rc;

static void rc_on_msg(bench_client *c, const struct mosquitto_message *m)
{
    struct rc_member *mb = c->ctx;
    const char *p = m->payload;
    size_t len = (size_t)m->payloadlen;
    uint64_t id = 0;
    char buf[24];

    if (!strcmp(m->topic, RESPONSE_TOPIC)) {
        if (g_rc.measuring && is_push(p, len)) {
            mb->pushes++;
        }
        return;
    }
    if (!p || len < 8 || memcmp(p, "{\"id\":", 6) != 0 || !scan_u64(p, len, "\"id\":", &id)) {
        return;
    }
    mb->msgs++;
    if (id <= mb->read) {
        return;
    }
    mb->read = id;
    snprintf(buf, sizeof(buf), "%" PRIu64, id);
    if (bench_client_publish(c, g_rc.topic, buf, strlen(buf), 1) && g_rc.measuring) {
        mb->reads++;
    }
}

static int cmd_receipts(const struct opts *o)
{
    bench_set *s = bench_set_create();
    struct rc_member *mb = calloc(o->members ? o->members : 1, sizeof(*mb));
    unsigned m = o->members;
    char topic[256], payload[PAYLOAD_BYTES + 1];
    uint64_t published = 0, pub0 = 0, pub1 = 0, cpu0 = 0, cpu1 = 0, self0 = 0, self1 = 0;
    uint64_t busy0 = 0, busy1 = 0;
    bool cpu_ok = o->pid > 0, busy_ok = true, reading = !strcmp(o->mode, "read");
    int rc = 1;

    if (!s || !mb || m < 2) {
        fprintf(stderr, "chat_bench: receipts needs --members 2 or more\n");
        goto done;
    }
    snprintf(topic, sizeof(topic), "chat/%s", o->group);
    snprintf(g_rc.topic, sizeof(g_rc.topic), "chat/%s/%s", o->group, reading ? "read" : "ack");
    for (unsigned i = 0; i < m; i++) {
        char id[32];
        snprintf(id, sizeof(id), "m%03u", i);
        bench_client *c = bench_set_add(s, id, true, o->port, &mb[i]);
        if (!c) {
            goto done;
        }
        c->on_msg = rc_on_msg;
    }
    if (!bench_set_wait_connected(s, 10000)) {
        goto done;
    }
    for (unsigned i = 0; i < m; i++) {
        if (!bench_client_subscribe(bench_set_get(s, i), topic, 1)) {
            goto done;
        }
    }
    if (!bench_set_wait_subacked(s, 10000)) {
        goto done;
    }
    bench_client *pub = bench_set_get(s, 0);
    uint64_t begin = bench_now_ns();
    uint64_t t0 = begin + (uint64_t)o->warm_ms * 1000000ull;
    uint64_t t1 = t0 + (uint64_t)o->dur_ms * 1000000ull;
    double gap_ns = 1e9 / (o->rate > 0 ? o->rate : 10);
    for (uint64_t pass = 0; pass < 100000000ull; pass++) {
        uint64_t now = bench_now_ns();
        if (!g_rc.measuring && now >= t0 && now < t1) {
            g_rc.measuring = true;
            pub0 = published;
            self0 = self_cpu_us();
            cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu0);
            busy_ok = machine_busy_us(&busy0);
        }
        if (now >= t1) {
            g_rc.measuring = false;
            pub1 = published;
            self1 = self_cpu_us();
            cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu1);
            busy_ok = busy_ok && machine_busy_us(&busy1);
            break;
        }
        /* On schedule, and never more than a window ahead of the slowest
         * member. */
        uint64_t slowest = UINT64_MAX;
        for (unsigned i = 0; i < m; i++) {
            slowest = mb[i].msgs < slowest ? mb[i].msgs : slowest;
        }
        uint64_t due = begin + (uint64_t)((double)published * gap_ns);
        if (now >= due && published - slowest < o->window) {
            size_t len = make_payload(payload, "m000", published + 1, now);
            if (!bench_client_publish(pub, topic, payload, len, 1)) {
                goto done;
            }
            published++;
        }
        if (bench_set_poll(s, 1) < 0) {
            goto done;
        }
    }
    /* The stragglers: every member gets every message. */
    uint64_t drain_end = bench_now_ns() + (uint64_t)DRAIN_TIMEOUT_MS * 1000000ull;
    for (uint64_t pass = 0; pass < 10000000ull && bench_now_ns() < drain_end; pass++) {
        uint64_t slowest = UINT64_MAX;
        for (unsigned i = 0; i < m; i++) {
            slowest = mb[i].msgs < slowest ? mb[i].msgs : slowest;
        }
        if (slowest >= published) {
            break;
        }
        if (bench_set_poll(s, 5) < 0) {
            goto done;
        }
    }
    uint64_t reads = 0, pushes = 0, lost = 0;
    for (unsigned i = 0; i < m; i++) {
        reads += mb[i].reads;
        pushes += mb[i].pushes;
        lost += mb[i].msgs < published ? published - mb[i].msgs : 0;
    }
    double sec = o->dur_ms / 1e3;
    double reads_s = (double)reads / sec;
    printf("members=%u mode=%s published=%" PRIu64 " reads=%" PRIu64 " reads_per_s=%.0f "
           "pushes_per_member_s=%.2f naive_per_member_s=%.0f lost=%" PRIu64,
           m, o->mode, pub1 - pub0, reads, reads_s, (double)pushes / m / sec,
           reads_s * (double)(m - 1) / (double)m, lost);
    printf(" bench_util=%.2f", (double)(self1 - self0) / 1e3 / o->dur_ms);
    if (cpu_ok && reads > 0) {
        printf(" cpu_us_per_read=%.2f broker_util=%.2f", (double)(cpu1 - cpu0) / (double)reads,
               (double)(cpu1 - cpu0) / 1e3 / o->dur_ms);
        if (busy_ok) {
            double other =
                ((double)(busy1 - busy0) - (double)(cpu1 - cpu0) - (double)(self1 - self0)) / 1e3 /
                o->dur_ms;
            printf(" other_util=%.2f", other > 0 ? other : 0.0);
        }
    }
    printf("\n");
    rc = 0;
done:
    if (s) {
        bench_set_disconnect_all(s, 2000);
    }
    bench_set_destroy(s);
    free(mb);
    return rc;
}

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
        size_t tl = strlen(topic);
        p[n++] = 0x82;
        p[n++] = (unsigned char)(2 + 2 + tl + 1);
        p[n++] = 0;
        p[n++] = 1;
        p[n++] = (unsigned char)(tl >> 8);
        p[n++] = (unsigned char)(tl & 0xff);
        memcpy(p + n, topic, tl);
        n += tl;
        p[n++] = 0;
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

static int cmd_presence(const struct opts *o)
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

/* ---------------------------------------------------------------------------
 * appcatchup: the same catch-up into an application on the client library
 * (--via lib: on_message counts and checks ids, as the thinnest application
 * would) or into `mqchat listen -C N` (--via mqchat: its output read from a
 * pipe, every line's id checked). Both keep the library's state file.
 * ------------------------------------------------------------------------- */

struct app {
    uint64_t count;
    _Atomic uint64_t next;   /* the id expected next */
    _Atomic uint64_t unique; /* messages taken in order */
    _Atomic uint64_t t_done; /* when the count was reached (ns) */
    _Atomic uint64_t last;   /* when the last message came (ns) */
    atomic_bool bad;
};

static bool app_on_message(void *arg, const chat_client_message *m)
{
    struct app *a = arg;
    uint64_t now = bench_now_ns();
    atomic_store(&a->last, now);
    if (m->id != atomic_load(&a->next)) {
        atomic_store(&a->bad, true);
        return true;
    }
    atomic_store(&a->next, m->id + 1);
    if (atomic_fetch_add(&a->unique, 1) + 1 == a->count) {
        atomic_store(&a->t_done, now);
    }
    return true;
}

/* Reads mqchat's lines "[group #id] from: body" from fd until count lines,
 * EOF or the deadline; checks the ids. */
static void app_read_lines(int fd, struct app *a, uint64_t deadline, uint64_t idle_ns)
{
    static char buf[1 << 16];
    bool at_start = true;
    uint64_t id = 0;
    int in_id = 0; /* 0: before '#', 1: reading digits, 2: done */
    for (uint64_t pass = 0; pass < 100000000ull; pass++) {
        uint64_t now = bench_now_ns();
        if (now > deadline || now - atomic_load(&a->last) > idle_ns ||
            atomic_load(&a->unique) >= a->count) {
            return;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0) {
            continue;
        }
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) {
            return;
        }
        atomic_store(&a->last, bench_now_ns());
        for (ssize_t i = 0; i < n; i++) {
            char ch = buf[i];
            if (at_start) {
                at_start = false;
                in_id = 0;
                id = 0;
            }
            if (ch == '\n') {
                if (in_id == 0 || id != atomic_load(&a->next)) {
                    atomic_store(&a->bad, true);
                } else {
                    atomic_store(&a->next, id + 1);
                    if (atomic_fetch_add(&a->unique, 1) + 1 == a->count) {
                        atomic_store(&a->t_done, bench_now_ns());
                    }
                }
                at_start = true;
            } else if (in_id == 0 && ch == '#') {
                in_id = 1;
            } else if (in_id == 1) {
                if (ch >= '0' && ch <= '9') {
                    id = id * 10 + (uint64_t)(ch - '0');
                } else {
                    in_id = 2;
                }
            }
        }
    }
}

static int cmd_appcatchup(const struct opts *o)
{
    struct app a = {.count = o->count};
    atomic_init(&a.next, o->first);
    atomic_init(&a.unique, 0);
    atomic_init(&a.t_done, 0);
    atomic_init(&a.bad, false);
    const char *client = o->client ? o->client : "dev0";
    uint64_t cpu0 = 0, cpu1 = 0, app0 = 0, busy0 = 0, busy1 = 0;
    bool cpu_ok = o->pid > 0, app_ok = true;
    chat_client *c = NULL;
    pid_t child = -1;
    int rc = 1, fds[2] = {-1, -1};

    if (!o->state) {
        fprintf(stderr, "chat_bench: appcatchup needs --state\n");
        return 2;
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu0);
    bool busy_ok = machine_busy_us(&busy0);
    uint64_t self0 = self_cpu_us();
    /* Both start the clock before the client exists: the application's
     * start is part of what a user waits for (a few ms of 100,000 messages). */
    uint64_t t_start = bench_now_ns();
    atomic_init(&a.last, t_start);
    uint64_t deadline = t_start + (uint64_t)o->timeout_ms * 1000000ull;
    uint64_t idle_ns = (uint64_t)o->idle_ms * 1000000ull;
    if (!strcmp(o->via, "lib")) {
        chat_client_options co = {0};
        co.port = o->port;
        co.client_id = client;
        co.state_path = o->state;
        co.on_message = app_on_message;
        co.arg = &a;
        chat_client_err err = chat_client_create(&co, &c);
        if (err == CHAT_CLIENT_OK) {
            err = chat_client_connect(c, 5000);
        }
        if (err == CHAT_CLIENT_OK) {
            err = chat_client_listen(c, o->group);
        }
        if (err != CHAT_CLIENT_OK) {
            fprintf(stderr, "chat_bench: chat_client: %s (%s)\n", chat_client_strerror(err),
                    chat_client_reason());
            goto done;
        }
        for (uint64_t i = 0; i < 100000000ull && !atomic_load(&a.t_done); i++) {
            uint64_t now = bench_now_ns();
            if (now > deadline || now - atomic_load(&a.last) > idle_ns) {
                break;
            }
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    } else {
        char port[16], count[32];
        snprintf(port, sizeof(port), "%d", o->port);
        snprintf(count, sizeof(count), "%" PRIu64, o->count);
        if (pipe(fds) != 0) {
            goto done;
        }
        child = fork();
        if (child < 0) {
            goto done;
        }
        if (child == 0) {
            dup2(fds[1], STDOUT_FILENO);
            close(fds[0]);
            close(fds[1]);
            execl(o->mqchat, o->mqchat, "-p", port, "-i", client, "--state", o->state, "-C", count,
                  "listen", o->group, (char *)NULL);
            _exit(127);
        }
        close(fds[1]);
        fds[1] = -1;
        app_read_lines(fds[0], &a, deadline, idle_ns);
        app_ok = proc_cpu_us((long)child, &app0);
    }
    cpu_ok = cpu_ok && proc_cpu_us(o->pid, &cpu1);
    busy_ok = busy_ok && machine_busy_us(&busy1);
    uint64_t self1 = self_cpu_us();
    double run_ms = ms_since(t_start);
    uint64_t t_end = atomic_load(&a.t_done) ? atomic_load(&a.t_done) : atomic_load(&a.last);
    double ms = (double)(t_end - t_start) / 1e6;
    uint64_t unique = atomic_load(&a.unique);
    /* The application's CPU: ours (the library's threads run in this
     * process), or mqchat's, plus the reading of its output. */
    double app_us = (double)(self1 - self0) + (app_ok ? (double)app0 : 0.0);
    printf("received=%" PRIu64 " complete=%d elapsed_ms=%.1f rate=%.0f bad=%d", unique,
           unique >= o->count, ms, ms > 0 ? (double)unique / (ms / 1e3) : 0.0,
           (int)atomic_load(&a.bad));
    if (ms > 0) {
        printf(" bench_util=%.2f", app_us / 1e3 / ms);
    }
    if (unique) {
        printf(" client_us_per_msg=%.2f", app_us / (double)unique);
    }
    if (cpu_ok && unique) {
        printf(" cpu_us_per_msg=%.2f", (double)(cpu1 - cpu0) / (double)unique);
        if (ms > 0) {
            printf(" broker_util=%.2f", (double)(cpu1 - cpu0) / 1e3 / ms);
        }
        if (busy_ok && run_ms > 0) {
            double other =
                ((double)(busy1 - busy0) - (double)(cpu1 - cpu0) - app_us) / 1e3 / run_ms;
            printf(" other_util=%.2f", other > 0 ? other : 0.0);
        }
    }
    printf("\n");
    rc = 0;
done:
    if (c) {
        chat_client_destroy(c);
    }
    if (child > 0) {
        int st = 0;
        kill(child, SIGTERM);
        for (int i = 0; i < 200 && waitpid(child, &st, WNOHANG) == 0; i++) {
            struct timespec ts = {0, 25000000};
            nanosleep(&ts, NULL);
        }
        if (waitpid(child, &st, WNOHANG) == 0) {
            kill(child, SIGKILL);
            waitpid(child, &st, 0);
        }
    }
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = 2;

    if (argc < 2) {
        usage();
        return 2;
    }
    if (!parse_opts(argc, argv, &o)) {
        usage();
        return 2;
    }
    if (!strcmp(argv[1], "port")) {
        return cmd_port();
    }
    if (!strcmp(argv[1], "idle")) {
        return o.pid > 0 ? cmd_idle(&o) : 2;
    }
    if (!strcmp(argv[1], "quiet")) {
        return cmd_quiet(&o);
    }
    if (!o.port) {
        fprintf(stderr, "chat_bench: --port is required\n");
        return 2;
    }
    g_run_token = (bench_now_ns() ^ ((uint64_t)getpid() << 40)) & 0xffffffffffffull;
    bench_lib_init();
    if (!strcmp(argv[1], "wait")) {
        rc = cmd_wait(&o);
    } else if (!strcmp(argv[1], "ingest")) {
        rc = cmd_ingest(&o);
    } else if (!strcmp(argv[1], "join")) {
        rc = cmd_join(&o);
    } else if (!strcmp(argv[1], "fill")) {
        rc = cmd_fill(&o);
    } else if (!strcmp(argv[1], "catchup")) {
        rc = cmd_catchup(&o);
    } else if (!strcmp(argv[1], "appcatchup")) {
        rc = cmd_appcatchup(&o);
    } else if (!strcmp(argv[1], "receipts")) {
        rc = cmd_receipts(&o);
    } else if (!strcmp(argv[1], "presence")) {
        rc = cmd_presence(&o);
    } else {
        usage();
    }
    bench_lib_cleanup();
    fflush(stdout);
    return rc;
}
