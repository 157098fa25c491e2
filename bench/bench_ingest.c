/* bench_ingest: the live load (ingest: one publisher, M subscribers online,
 * throughput, latency and CPU) and the store's preparation for the catch-up
 * and storage scenarios (join: devices that subscribe once and leave; fill:
 * messages nobody is online for). */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LATENCY_MAX 20000000u /* latency samples kept at most */

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

int cmd_ingest(const struct opts *o)
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
    /* The broker's memory before the members connect and once they are
     * online (bench/run: KiB per online device). */
    long rss_idle = proc_rss_kib(o->pid), rss_online = 0;
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
    /* A thousand members connect and join one by one on a shared machine. */
    int setup_ms = 5000 + 20 * (int)m;
    if (!bench_set_wait_connected(s, setup_ms)) {
        goto done;
    }
    if (!bench_set_subscribe_all(s, topic, 1, setup_ms)) {
        goto done;
    }
    pub = bench_set_add(s, "pub0", true, o->pub_port ? o->pub_port : o->port, NULL);
    if (!pub || !bench_set_wait_connected(s, 5000)) {
        goto done;
    }
    rss_online = proc_rss_kib(o->pid);

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
            print_other_util(busy1 - busy0, cpu1 - cpu0, (double)(self1 - self0),
                             (double)o->dur_ms);
        }
    }
    if (rss_idle > 0 && rss_online > 0) {
        printf(" rss_idle_kb=%ld rss_online_kb=%ld", rss_idle, rss_online);
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
    bench_set_close(s, 2000);
    free(in.subs);
    free(in.lat);
    return rc;
}

/* ---------------------------------------------------------------------------
 * join: devices that subscribe once and go offline
 * ------------------------------------------------------------------------- */

int cmd_join(const struct opts *o)
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
    int setup_ms = 10000 + 20 * (int)o->devices;
    if (!bench_set_wait_connected(s, setup_ms)) {
        goto done;
    }
    /* The broker's side of every subscribe (on PostgreSQL, its round
     * trips on the broker's thread), from the first SUBSCRIBE sent to the
     * last SUBACK. */
    uint64_t begin = bench_now_ns();
    if (!bench_set_subscribe_all(s, topic, 1,
                                 setup_ms > (int)o->timeout_ms ? setup_ms : (int)o->timeout_ms)) {
        goto done;
    }
    uint64_t took_us = (bench_now_ns() - begin) / 1000;
    if (!bench_set_disconnect_all(s, setup_ms)) {
        goto done;
    }
    printf("joined=%u subscribe_us=%" PRIu64 "\n", o->devices, took_us);
    rc = 0;
done:
    bench_set_destroy(s);
    return rc;
}

/* ---------------------------------------------------------------------------
 * fill: one publisher, nobody online
 * ------------------------------------------------------------------------- */

int cmd_fill(const struct opts *o)
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
    bench_set_close(s, 2000);
    return rc;
}
