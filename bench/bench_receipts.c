/* bench_receipts: the cost of read receipts (receipts: every member of a
 * group reads every message; with --mode ack the same load of acks, which
 * push nothing, is the baseline). */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int cmd_receipts(const struct opts *o)
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
    /* PROTOCOL.md v1.2: the reads pushes reach a device that subscribed to
     * the response topic itself; without it the row measured none. */
    if (!bench_set_subscribe_all(s, RESPONSE_TOPIC, 1, 10000) ||
        !bench_set_subscribe_all(s, topic, 1, 10000)) {
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
            print_other_util(busy1 - busy0, cpu1 - cpu0, (double)(self1 - self0),
                             (double)o->dur_ms);
        }
    }
    printf("\n");
    rc = 0;
done:
    bench_set_close(s, 2000);
    free(mb);
    return rc;
}
