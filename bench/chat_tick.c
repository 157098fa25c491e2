/* chat_tick: the plugin's tick with tens of thousands of devices online in
 * one group, below the broker: the plugin's own modules on a real store,
 * driven through the stubbed broker API of tests/unit (plugin_stubs.h), as
 * the broker would drive them. bench/run uses it where one process cannot
 * hold the connections (50,000 online needs 50,000 descriptors in the broker
 * and as many in the load generator); the real broker's figures at 10,000
 * come from chat_bench presence.
 *
 * What it does, each phase timed with the thread's CPU clock:
 *   1. --online N devices (client ids u00000..., one member each, MQTT 5,
 *      clean start) subscribe to chat/<group> and to the response topic
 *      through chat_on_acl, the broker's subscribe check: open groups make
 *      each a member, with a cursor;
 *   2. ticks run until the pushes of everyone coming online went out;
 *   3. --readers K of them move their read marker --rate times a second for
 *      --dur-ms, ticks between (a pass every --pass-us of wall time, as a
 *      busy broker's loop turns);
 *   4. all disconnect, one event each, and the ticks run until done.
 * The stub's publish copies each push as the broker's queue does (malloc
 * and memcpy); its record of them is cleared between ticks, outside the
 * timing.
 *
 * Output: one key=value line (see the printf at the end). Threading: one
 * thread. */
#include "plugin.h"
#include "plugin_fixture.h"
#include "plugin_stubs.h"
#include "push.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t clock_us(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "VmRSS:", 6)) {
            kib = strtol(line + 6, NULL, 10);
        }
    }
    if (f) {
        fclose(f);
    }
    return kib;
}

struct run {
    struct plugin_fixture fx;
    struct mosquitto *clients;
    char (*ids)[16];
    unsigned n;
    int64_t tick_max_us; /* the longest tick (CPU) of the phase */
    int64_t tick_sum_us;
    uint64_t ticks;
    uint64_t pushes; /* publishes made by the ticks of the phase */
    unsigned pass_us;
};

/* One tick, timed; what it published is counted and forgotten. */
static void tick(struct run *r)
{
    int64_t a = clock_us(CLOCK_THREAD_CPUTIME_ID);
    chat_tick_from_broker(&r->fx.pl);
    int64_t took = clock_us(CLOCK_THREAD_CPUTIME_ID) - a;
    r->tick_max_us = took > r->tick_max_us ? took : r->tick_max_us;
    r->tick_sum_us += took;
    r->ticks++;
    r->pushes += stub_publish_count();
    stub_publishes_clear();
    if (r->pass_us) {
        struct timespec ts = {0, (long)r->pass_us * 1000};
        nanosleep(&ts, NULL);
    }
}

static void phase_start(struct run *r)
{
    r->tick_max_us = r->tick_sum_us = 0;
    r->ticks = r->pushes = 0;
}

/* Ticks until no push went out for quiet_ms (at most max_ms). */
static void settle(struct run *r, int64_t quiet_ms, int64_t max_ms)
{
    int64_t start = clock_us(CLOCK_MONOTONIC), last = start;
    while (clock_us(CLOCK_MONOTONIC) - start < max_ms * 1000) {
        uint64_t before = r->pushes;
        tick(r);
        int64_t now = clock_us(CLOCK_MONOTONIC);
        if (r->pushes != before) {
            last = now;
        } else if (now - last >= quiet_ms * 1000) {
            break;
        }
    }
}

static int acl(struct run *r, unsigned i, const char *topic, int access)
{
    struct mosquitto_evt_acl_check ev = {0};
    ev.client = &r->clients[i];
    ev.topic = topic;
    ev.access = access;
    return chat_on_acl(&r->fx.pl, &ev);
}

/* What the broker's disconnect event does (plugin.c, client_gone), for a
 * clean session that ends. */
static void gone(struct run *r, unsigned i)
{
    struct chat_plugin *pl = &r->fx.pl;
    const char *id = r->ids[i];
    chat_replay_stop(pl, id, NULL);
    chat_presence_disconnected(pl, id);
    chat_push_disconnected(pl, id);
    chat_verdict_forget_client(pl, id);
    chat_broker_forget_client(pl, id);
    chat_peer_disconnected(pl, &r->clients[i], CHAT_GONE_ENDED);
}

static void usage(void)
{
    fprintf(stderr, "usage: chat_tick [--online N] [--readers K] [--rate R] [--dur-ms D] "
                    "[--pass-us U] [--group G]\n");
}

int main(int argc, char **argv)
{
    struct run r = {.n = 10000, .pass_us = 1000};
    unsigned readers = 100, rate = 5, dur_ms = 5000;
    const char *group = "big";
    int rc = 1;

    /* options come in pairs: name, value */
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (!strcmp(argv[i], "--online")) {
            r.n = (unsigned)strtoul(v, NULL, 10);
        } else if (!strcmp(argv[i], "--readers")) {
            readers = (unsigned)strtoul(v, NULL, 10);
        } else if (!strcmp(argv[i], "--rate")) {
            rate = (unsigned)strtoul(v, NULL, 10);
        } else if (!strcmp(argv[i], "--dur-ms")) {
            dur_ms = (unsigned)strtoul(v, NULL, 10);
        } else if (!strcmp(argv[i], "--pass-us")) {
            r.pass_us = (unsigned)strtoul(v, NULL, 10);
        } else if (!strcmp(argv[i], "--group")) {
            group = v;
        } else {
            usage();
            return 2;
        }
    }
    if (r.n < 2 || r.n > 1000000 || readers >= r.n || rate == 0) {
        usage();
        return 2;
    }
    static const char *const opts[] = {"fsync=none", NULL};
    if (!plugin_fixture_open(&r.fx, opts)) {
        return 1;
    }
    r.clients = calloc(r.n, sizeof(*r.clients));
    r.ids = calloc(r.n, sizeof(*r.ids));
    if (!r.clients || !r.ids) {
        goto done;
    }
    char topic[256];
    snprintf(topic, sizeof(topic), "chat/%s", group);
    /* The messages the readers read, stored before anyone is online. */
    for (unsigned i = 0; i < 1000; i++) {
        if (plugin_append(r.fx.pl.store, group, "u00000", 200, NULL) != CHAT_OK) {
            fprintf(stderr, "chat_tick: cannot store the messages\n");
            goto done;
        }
    }
    long rss0 = rss_kib();

    /* 1. Everybody comes online. */
    int64_t t0 = clock_us(CLOCK_THREAD_CPUTIME_ID), sub_max = 0;
    for (unsigned i = 0; i < r.n; i++) {
        snprintf(r.ids[i], sizeof(r.ids[i]), "u%05u", i);
        r.clients[i] = plugin_client(r.ids[i], NULL);
        int64_t a = clock_us(CLOCK_THREAD_CPUTIME_ID);
        if (acl(&r, i, topic, MOSQ_ACL_SUBSCRIBE) != MOSQ_ERR_SUCCESS ||
            acl(&r, i, CHAT_RESPONSE_TOPIC, MOSQ_ACL_SUBSCRIBE) != MOSQ_ERR_SUCCESS) {
            fprintf(stderr, "chat_tick: subscribe %u refused\n", i);
            goto done;
        }
        a = clock_us(CLOCK_THREAD_CPUTIME_ID) - a;
        sub_max = a > sub_max ? a : sub_max;
        stub_publishes_clear(); /* what a subscribe answers (its catch-up) */
        if (i % 100 == 99) {
            tick(&r); /* the broker's loop turns while they come */
        }
    }
    int64_t sub_us = clock_us(CLOCK_THREAD_CPUTIME_ID) - t0;
    long rss1 = rss_kib();
    settle(&r, 2000, 120000);
    int64_t ramp_max = r.tick_max_us;
    uint64_t ramp_pushes = r.pushes, ramp_ticks = r.ticks;
    int64_t ramp_sum = r.tick_sum_us;

    /* 3. Readers read. */
    phase_start(&r);
    int64_t m0 = clock_us(CLOCK_MONOTONIC), step = 0;
    while (clock_us(CLOCK_MONOTONIC) - m0 < (int64_t)dur_ms * 1000) {
        int64_t due = m0 + step * 1000000 / rate;
        if (clock_us(CLOCK_MONOTONIC) >= due && step < 1000) {
            step++;
            char id[24];
            int len = snprintf(id, sizeof(id), "%" PRId64, step);
            char rt[300];
            snprintf(rt, sizeof(rt), "chat/%s/read", group);
            for (unsigned j = 1; j <= readers; j++) {
                struct mosquitto_evt_message ev = {0};
                ev.client = &r.clients[j];
                ev.topic = rt;
                ev.payload = id;
                ev.payloadlen = (uint32_t)len;
                ev.qos = 1;
                if (chat_read_publish(&r.fx.pl, &ev, group) != NULL) {
                    fprintf(stderr, "chat_tick: a read was refused\n");
                    goto done;
                }
            }
        }
        tick(&r);
    }
    settle(&r, 1500, 60000);
    int64_t read_max = r.tick_max_us;
    double read_pushes_s = (double)r.pushes / r.n / (dur_ms / 1e3);

    /* 4. Everybody leaves. */
    phase_start(&r);
    int64_t l0 = clock_us(CLOCK_THREAD_CPUTIME_ID), leave_max = 0;
    for (unsigned i = 0; i < r.n; i++) {
        int64_t a = clock_us(CLOCK_THREAD_CPUTIME_ID);
        gone(&r, i);
        a = clock_us(CLOCK_THREAD_CPUTIME_ID) - a;
        leave_max = a > leave_max ? a : leave_max;
        if (i % 100 == 99) {
            tick(&r);
        }
    }
    int64_t leave_us = clock_us(CLOCK_THREAD_CPUTIME_ID) - l0;
    settle(&r, 500, 60000);

    int64_t all_max = ramp_max > read_max ? ramp_max : read_max;
    all_max = r.tick_max_us > all_max ? r.tick_max_us : all_max;
    printf("online=%u tick_cpu_ms=%.3f subscribe_us_mean=%.1f subscribe_us_max=%" PRId64
           " plugin_kib_per_online=%.2f ramp_ticks=%" PRIu64 " ramp_pushes=%" PRIu64
           " ramp_us_per_push=%.2f tick_cpu_ms_ramp=%.3f tick_cpu_ms_reading=%.3f "
           "reading_pushes_per_member_s=%.2f leave_us_mean=%.1f leave_us_max=%" PRId64
           " tick_cpu_ms_leaving=%.3f\n",
           r.n, all_max / 1e3, (double)sub_us / r.n, sub_max, (double)(rss1 - rss0) / r.n,
           ramp_ticks, ramp_pushes, ramp_pushes ? (double)ramp_sum / (double)ramp_pushes : 0.0,
           ramp_max / 1e3, read_max / 1e3, read_pushes_s, (double)leave_us / r.n, leave_max,
           r.tick_max_us / 1e3);
    rc = 0;
done:
    plugin_fixture_close(&r.fx);
    free(r.clients);
    free(r.ids);
    return rc;
}
