/* load_pinger.c: a client apart from the load, timing the broker's answers.
 *
 * chat_load's probes share one thread with the thousand devices, and during
 * a storm that thread parses a million messages with one core: what a probe
 * measures then is partly this process's own delay. The pinger is a child
 * process with its own connection (client id load-pinger) that sends a QoS 1
 * publish to PING_TOPIC every PINGER_EVERY_NS and times its PUBACK, one at a
 * time. It asks for SCHED_FIFO (as `chrt -f 10`) so that the scheduler does
 * not make it wait behind the load generator; where it may not, it runs at
 * normal priority and says so (pinger_rt=0). Its samples go to memory shared
 * with the parent, which reads them per window at the end (pinger_print):
 * like the probes' pings, a ping counts in the window it was sent in, and one
 * still unanswered at the window's end counts with its age then.
 *
 * Bounded: PINGER_SAMPLES samples (then it stops sending), a connect that
 * gives up after PINGER_CONNECT_TRIES tries, and it dies with its parent
 * (PR_SET_PDEATHSIG) or on pinger_stop. Only 127.0.0.1 is contacted. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS (Linux, as prctl) */
#include "load.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* 100 pings a second: a storm of 3 s then gives 300 round trips, so that
 * their p99 is a percentile and not the one worst pass (at 20 a second it
 * was the largest of about 60). */
#define PINGER_EVERY_NS 10000000ll
#define PINGER_SAMPLES 131072u /* 21 minutes of pings */
#define PINGER_CONNECT_TRIES 100u

struct pinger_shared {
    int rt;        /* 1: it runs under SCHED_FIFO */
    int connected; /* 1: it got its CONNACK */
    uint64_t n;    /* samples written (atomic) */
    struct {
        int64_t sent_ns;
        int64_t rtt_ns; /* -1 while unanswered (atomic) */
    } s[PINGER_SAMPLES];
};

static struct pinger_shared *g_sh;
static pid_t g_pid;

/* The child's own state. */
static int g_mid;
static uint64_t g_open = UINT64_MAX; /* the sample waiting for its PUBACK */

static void on_publish(struct mosquitto *m, void *obj, int mid)
{
    (void)m;
    (void)obj;
    if (g_open != UINT64_MAX && mid == g_mid) {
        __atomic_store_n(&g_sh->s[g_open].rtt_ns, now_ns() - g_sh->s[g_open].sent_ns,
                         __ATOMIC_RELEASE);
        g_open = UINT64_MAX;
    }
}

static void on_connect(struct mosquitto *m, void *obj, int rc)
{
    (void)m;
    (void)obj;
    if (rc == 0)
        __atomic_store_n(&g_sh->connected, 1, __ATOMIC_RELEASE);
}

static void child(int port)
{
    struct sched_param sp = {.sched_priority = 10};
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    g_sh->rt = sched_setscheduler(0, SCHED_FIFO, &sp) == 0;
    struct mosquitto *m = mosquitto_new("load-pinger", true, NULL);
    if (!m)
        _exit(1);
    mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1);
    mosquitto_publish_callback_set(m, on_publish);
    mosquitto_connect_callback_set(m, on_connect);
    unsigned tries = 0;
    while (mosquitto_connect(m, "127.0.0.1", port, KEEPALIVE_S) != MOSQ_ERR_SUCCESS) {
        if (++tries >= PINGER_CONNECT_TRIES)
            _exit(1);
        struct timespec nap = {0, 10000000L};
        nanosleep(&nap, NULL);
    }
    int64_t next = now_ns();
    for (;;) {
        int64_t t = now_ns();
        if (t >= next) {
            next = t + PINGER_EVERY_NS;
            uint64_t i = g_sh->n;
            if (g_open == UINT64_MAX && i < PINGER_SAMPLES &&
                __atomic_load_n(&g_sh->connected, __ATOMIC_ACQUIRE)) {
                g_sh->s[i].sent_ns = t;
                g_sh->s[i].rtt_ns = -1;
                __atomic_store_n(&g_sh->n, i + 1, __ATOMIC_RELEASE);
                g_open = i;
                if (mosquitto_publish(m, &g_mid, PING_TOPIC, 4, "ping", 1, false) !=
                    MOSQ_ERR_SUCCESS)
                    g_open = UINT64_MAX; /* stays open: counted with its age */
            }
        }
        int64_t wait_ms = (next - now_ns()) / 1000000;
        int rc = mosquitto_loop(m, (int)(wait_ms < 1 ? 1 : wait_ms), 1);
        if (rc != MOSQ_ERR_SUCCESS && rc != MOSQ_ERR_NO_CONN)
            _exit(rc == MOSQ_ERR_CONN_LOST ? 0 : 1); /* the broker went away: the run ended */
        if (rc == MOSQ_ERR_NO_CONN)
            _exit(0);
    }
}

void pinger_start(int port)
{
    g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) {
        g_sh = NULL;
        note("pinger: mmap failed; no independent pings");
        return;
    }
    fflush(NULL);
    g_pid = fork();
    if (g_pid == 0)
        child(port);
    if (g_pid < 0) {
        note("pinger: fork failed; no independent pings");
        g_pid = 0;
    }
}

void pinger_stop(void)
{
    if (g_pid > 0) {
        kill(g_pid, SIGKILL);
        waitpid(g_pid, NULL, 0);
        g_pid = 0;
    }
}

/* Prints NAME_ind_pings, _ind_p99_ping_ms and _ind_max_ping_ms for the
 * pinger's pings sent in [start, end); with --ping-log, appends each of
 * them there as "NAME microseconds", so that bench/run can take one
 * percentile over the pings of every round: a storm of 2 s holds about 200
 * pings, whose p99 is their second or third largest. */
void pinger_print(const char *name, int64_t start, int64_t end)
{
    if (!g_sh)
        return;
    FILE *log = NULL;
    if (g_o.ping_log && !(log = fopen(g_o.ping_log, "a")))
        die("--ping-log %s: %s", g_o.ping_log, strerror(errno));
    struct samples v = {0};
    uint64_t n = __atomic_load_n(&g_sh->n, __ATOMIC_ACQUIRE), k = 0;
    int64_t max = 0;
    for (uint64_t i = 0; i < n; i++) {
        int64_t sent = g_sh->s[i].sent_ns;
        int64_t rtt = __atomic_load_n(&g_sh->s[i].rtt_ns, __ATOMIC_ACQUIRE);
        if (sent < start || sent >= end)
            continue;
        int64_t x = rtt < 0 || sent + rtt > end ? end - sent : rtt;
        samples_add(&v, x);
        if (log)
            fprintf(log, "%s %" PRId64 "\n", name, x / 1000);
        max = x > max ? x : max;
        k++;
    }
    printf("%s_ind_pings=%" PRIu64 "\n", name, k);
    printf("%s_ind_p99_ping_ms=%.2f\n", name, (double)samples_quantile(&v, 0.99) / 1e6);
    printf("%s_ind_max_ping_ms=%.2f\n", name, (double)max / 1e6);
    samples_free(&v);
    if (log && fclose(log) != 0)
        die("--ping-log %s: %s", g_o.ping_log, strerror(errno));
}

int pinger_rt(void)
{
    return g_sh ? g_sh->rt : 0;
}
