/* chat_load: a thousand devices on one broker, and a reconnect storm: the
 * load test of issue 11, against a broker already running on 127.0.0.1.
 *
 *   chat_load --port P --pid PID [--devices 1000] [--groups 100] [--per-device 10]
 *             [--storm 200] [--backlog 500] [--rate 100] [--steady-ms 5000] [--settle-ms 3000]
 *             [--senders 10] [--probes 100] [--timeout-ms 600000] [--check]
 *             [--connect-only]
 *
 * Every device is a libmosquitto client (MQTT 3.1.1, clean session, client
 * id = member name dev<i>) in per-device groups of the groups g<k>: device i
 * is in groups (i + j * groups / per-device) mod groups for j < per-device,
 * so that every group has devices * per-device / groups members. Devices
 * act as the client library does (clients/include/chat_client.h): they
 * show each id of a group once and in order, holding live messages that
 * arrive ahead of a gap, and ack cumulatively (after 100 messages, 1 s
 * after the first unacked one, and at the end of each replay page). Senders
 * publish QoS 1 envelopes {"n":<n>,"body":...} where n counts the messages
 * of the group, each group from one sender, so that every id must carry n
 * == id.
 *
 * Phases, each bounded in time:
 *   1. connect every device (in batches), subscribe it to its groups;
 *   2. steady traffic at --rate messages/s over all groups (round robin),
 *      for --steady-ms: the steady window;
 *   3. the storm devices (every devices/storm-th one) disconnect, and every
 *      group moves on by --backlog messages, sent as fast as the slowest
 *      online member keeps up (never more than 50 ahead, so that no
 *      broker queue limit drops anything);
 *   4. steady traffic again, --steady-ms: the window before the storm;
 *   5. the storm: every storm device reconnects at the same moment (non-
 *      blocking connects, one pass) and catches up while the steady
 *      traffic goes on; until every storm device has shown every message
 *      stored before it reconnected: the catch-up time;
 *   6. --steady-ms more of steady traffic, everything delivered, and
 *      --settle-ms of quiet;
 * phases 3 to 6 run twice (keys of the second storm start with s2_), and in
 * the end every device must have every message of its groups.
 * Measured on --probes steady devices (not in the storm), which the poll
 * loop reads at least every millisecond whatever else it does, so that what
 * they see is the broker's doing: the longest gap between two of their live
 * messages, and the longest round trip of a ping (a QoS 1 publish to
 * load/ping, every 200 ms, until its PUBACK), in the windows of phases 2, 4
 * and 5, with the CPU the broker, this process and every other process
 * used meanwhile (in cores). The broker's resident memory (VmRSS of --pid)
 * and descriptors before any device, once all are connected, at the end of
 * phases 2, 3 and 4, its peak in phase 5 and at the end of phase 6 (after
 * a settle). Printed as key=value lines on stdout; progress on stderr.
 * --connect-only stops after phase 1: memory and descriptors per device.
 *
 * --check exits with status 1 unless no message was lost or duplicated to
 * the application, every id carried its n, no connection broke, no error
 * entry came, and the broker's resident memory after the second storm is
 * back where it was after the first, within max(4 MiB, a quarter of what
 * the storm added at its peak): a leak grows with every storm, a cache or
 * LevelDB's memtable filling up does not. It checks nothing timed.
 *
 * One thread drives every socket with poll(2) and libmosquitto's
 * mosquitto_loop_read/write/misc. The process needs a descriptor per
 * client: it raises its soft RLIMIT_NOFILE to the hard limit and refuses
 * to start when that is too low. Every loop is bounded in count or time;
 * only 127.0.0.1 is contacted.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <mosquitto.h>

#define RESPONSE_TOPIC "$CONTROL/chat/v1/response"
#define PING_TOPIC "load/ping"
#define MAX_PER_DEVICE 32
#define KEEPALIVE_S 60
#define READ_BURST 32                /* packets read from one socket per pass */
#define PROBE_EVERY_NS 1000000ll     /* probes are read at least this often */
#define MISC_EVERY_NS 500000000ull   /* keepalive bookkeeping */
#define PING_EVERY_NS 200000000ull   /* a probe's pings */
#define ACK_EVERY 100u               /* as the client library: ack after this many ... */
#define ACK_INTERVAL_NS 1000000000ll /* ... or this long after the first unacked one */
#define LAG_MAX 50u                  /* backlog: ids a group may be ahead of its slowest member */
#define SENDER_WINDOW 200u           /* QoS 1 publishes a sender leaves unacknowledged */
#define CONNECT_BATCH 100u           /* devices connecting at once in phase 1 */
#define BODY_BYTES 120u

/* ---------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------- */

struct devgroup {
    int group;          /* index into g_groups */
    uint64_t shown;     /* highest id shown, all below it shown once */
    uint64_t acked;     /* last ack sent */
    unsigned unacked;   /* shown since the last ack */
    int64_t ack_due_ns; /* when the interval ack is due; 0: none */
    uint64_t *held;     /* ids received ahead of a gap, ascending */
    size_t nheld, capheld;
};

enum role { DEVICE, SENDER };

struct client {
    struct mosquitto *mosq;
    char id[24];
    enum role role;
    int index;
    bool connected;   /* CONNACK seen, not lost since */
    bool subscribed;  /* SUBACK seen since the last connect */
    bool closed;      /* the connection ended */
    bool want_closed; /* we disconnected it */
    /* devices */
    bool storm;    /* one of the devices that disconnect and come back */
    bool probe;    /* sends pings */
    bool catching; /* in the storm, not yet caught up */
    int ngroups;
    struct devgroup dg[MAX_PER_DEVICE];
    int64_t last_live_ns;
    int ping_mid;         /* 0: none outstanding */
    int64_t ping_sent_ns; /* when that ping went */
    int64_t next_ping_ns; /* when the next goes */
    int64_t caught_ns;    /* when it had shown every message of the storm's target */
    int64_t retry_ns;     /* when to try a refused connect again; 0: none */
    bool again;           /* that connect is a reconnect */
    unsigned refusals;    /* connects refused in a row */
    /* senders */
    unsigned unacked_pubs; /* QoS 1 publishes without PUBACK */
};

struct group {
    char name[16];
    uint64_t sent;   /* messages published (n of the last) */
    uint64_t target; /* what storm devices must show to be caught up */
    int sender;      /* index into g_snd */
    int *members;    /* device indices */
    int nmembers;
    uint64_t min_online; /* lowest shown of a member that is online and caught up */
};

struct opts {
    int port;
    long pid;
    int devices, groups, per_device, storm, senders, probes;
    unsigned backlog;
    double rate;
    unsigned steady_ms;
    unsigned settle_ms; /* after a storm, before its memory is read */
    unsigned timeout_ms;
    bool check;
    bool connect_only; /* phase 1 only: memory and descriptors per connected device */
};

/* What is measured in a window of steady traffic. */
struct window {
    int64_t start_ns, end_ns;
    double broker_cpu0, self_cpu0, all_cpu0;   /* CPU seconds at the start */
    double broker_busy, self_busy, other_busy; /* CPU over wall time, in cores */
    int64_t max_gap_ns;  /* longest gap between two live messages of a steady device */
    int64_t max_ping_ns; /* longest ping round trip */
    uint64_t pings;
    int64_t ping_sum_ns;
};

static struct opts g_o = {.devices = 1000,
                          .groups = 100,
                          .per_device = 10,
                          .storm = 200,
                          .senders = 10,
                          .probes = 100,
                          .backlog = 500,
                          .rate = 100,
                          .steady_ms = 5000,
                          .settle_ms = 3000,
                          .timeout_ms = 600000};
static struct client *g_dev;
static struct client *g_snd;
static struct group *g_groups;
static struct pollfd *g_pfd;
static struct client **g_owner;
static struct window *g_win; /* the window being measured, or NULL */
static int64_t g_deadline_ns;
static int64_t g_last_misc_ns;
static uint64_t g_sent_rr; /* round robin position of the steady traffic */
static int64_t g_rate_t0_ns;
static uint64_t g_rate_sent;
static int64_t g_last_timers_ns, g_last_min_ns, g_last_probes_ns;
static struct client **g_probes; /* the probe devices */
static struct pollfd *g_probe_pfd;
static int g_nprobes;

/* Counters of the whole run. */
static uint64_t g_shown, g_redundant, g_misnumbered, g_dup_app, g_pages, g_errors, g_lost_conn;
static uint64_t g_refused; /* connects refused at once (ECONNREFUSED), then tried again */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void note(const char *fmt, ...)
{
    static int64_t t0;
    va_list ap;
    if (t0 == 0)
        t0 = now_ns();
    fprintf(stderr, "chat_load [%7.2fs] ", (double)(now_ns() - t0) / 1e9);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "chat_load: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die("out of memory");
    return p;
}

/* Resident memory of the broker in KiB, from /proc/<pid>/status; 0 when
 * unknown. */
static long rss_kib(void)
{
    char path[64], line[256];
    long kib = 0;
    FILE *f;
    if (g_o.pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/status", g_o.pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* Open descriptors of the broker (entries of /proc/<pid>/fd); -1 when
 * unknown. */
static long broker_fds(void)
{
    char path[64];
    struct dirent *de;
    long n = 0;
    DIR *d;
    if (g_o.pid <= 0)
        return -1;
    snprintf(path, sizeof path, "/proc/%ld/fd", g_o.pid);
    if ((d = opendir(path)) == NULL)
        return -1;
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* CPU seconds (user + system, all threads) of the broker; 0 when unknown. */
static double broker_cpu(void)
{
    char path[64], buf[1024];
    unsigned long long ut = 0, st = 0;
    size_t n;
    FILE *f;
    char *p;
    if (g_o.pid <= 0)
        return 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", g_o.pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields 14 and 15, counted after the command's closing parenthesis. */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds every process of the machine has used (from /proc/stat). */
static double machine_cpu(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) != 8) {
        fclose(f);
        return 0;
    }
    fclose(f);
    /* everything but idle (3) and iowait (4) */
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static double self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---------------------------------------------------------------------------
 * Showing messages, as the client library does
 * ------------------------------------------------------------------------- */

static struct devgroup *devgroup_of(struct client *d, int group)
{
    for (int j = 0; j < d->ngroups; j++)
        if (d->dg[j].group == group)
            return &d->dg[j];
    return NULL;
}

static void send_ack(struct client *d, struct devgroup *dg)
{
    char topic[64], payload[32];
    int len;
    if (!d->connected || dg->shown == dg->acked)
        return;
    snprintf(topic, sizeof topic, "chat/%s/ack", g_groups[dg->group].name);
    len = snprintf(payload, sizeof payload, "%" PRIu64, dg->shown);
    if (mosquitto_publish(d->mosq, NULL, topic, len, payload, 1, false) == MOSQ_ERR_SUCCESS) {
        dg->acked = dg->shown;
        dg->unacked = 0;
        dg->ack_due_ns = 0;
    }
}

static void show(struct client *d, struct devgroup *dg, uint64_t id)
{
    dg->shown = id;
    g_shown++;
    if (++dg->unacked >= ACK_EVERY)
        send_ack(d, dg);
    else if (dg->ack_due_ns == 0)
        dg->ack_due_ns = now_ns() + ACK_INTERVAL_NS;
}

/* One message of group for device d, live or from a page. */
static void deliver(struct client *d, int group, uint64_t id, uint64_t n)
{
    struct devgroup *dg = devgroup_of(d, group);
    if (!dg) {
        g_errors++;
        return;
    }
    /* Message n of a group must have id n: one sender per group, on one
     * connection, at QoS 1, so the store keeps its order. */
    if (n != id)
        g_misnumbered++;
    if (id <= dg->shown) {
        g_redundant++; /* a page and a live copy of one id: dropped by id */
        return;
    }
    if (id > dg->shown + 1) {
        size_t k = 0;
        while (k < dg->nheld && dg->held[k] < id)
            k++;
        if (k < dg->nheld && dg->held[k] == id) {
            g_redundant++;
            return;
        }
        if (dg->nheld == dg->capheld) {
            size_t cap = dg->capheld ? dg->capheld * 2 : 64;
            uint64_t *h = realloc(dg->held, cap * sizeof *h);
            if (!h)
                die("out of memory");
            dg->held = h;
            dg->capheld = cap;
        }
        memmove(dg->held + k + 1, dg->held + k, (dg->nheld - k) * sizeof *dg->held);
        dg->held[k] = id;
        dg->nheld++;
        return;
    }
    show(d, dg, id);
    while (dg->nheld > 0 && dg->held[0] == dg->shown + 1) {
        show(d, dg, dg->held[0]);
        memmove(dg->held, dg->held + 1, (dg->nheld - 1) * sizeof *dg->held);
        dg->nheld--;
    }
    while (dg->nheld > 0 && dg->held[0] <= dg->shown) {
        /* cannot happen: held ids are above shown + 1 when held */
        g_dup_app++;
        memmove(dg->held, dg->held + 1, (dg->nheld - 1) * sizeof *dg->held);
        dg->nheld--;
    }
}

/* The number after "key": in a JSON text, without parsing all of it. */
static bool json_u64(const char *text, size_t len, const char *key, uint64_t *out)
{
    char pat[32];
    size_t plen = (size_t)snprintf(pat, sizeof pat, "\"%s\":", key);
    for (size_t i = 0; i + plen < len; i++) {
        if (text[i] == '"' && memcmp(text + i, pat, plen) == 0) {
            char *end = NULL;
            const char *p = text + i + plen;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (errno || end == p)
                return false;
            *out = v;
            return true;
        }
    }
    return false;
}

static int group_index(const char *name)
{
    int k;
    if (name[0] != 'g' || sscanf(name + 1, "%d", &k) != 1 || k < 0 || k >= g_o.groups)
        return -1;
    return k;
}

static void on_live(struct client *d, const struct mosquitto_message *msg)
{
    const char *name = msg->topic + 5; /* after "chat/" */
    int group = group_index(name);
    uint64_t id = 0, n = 0;
    int64_t t = now_ns();
    if (group < 0 || !json_u64(msg->payload, (size_t)msg->payloadlen, "id", &id) ||
        !json_u64(msg->payload, (size_t)msg->payloadlen, "n", &n)) {
        g_errors++;
        return;
    }
    /* Gaps are measured on the probes, which the poll loop reads at least
     * every millisecond: a gap is then the broker's, not this process's. */
    if (g_win && d->probe && t >= g_win->start_ns) {
        int64_t from = d->last_live_ns > g_win->start_ns ? d->last_live_ns : g_win->start_ns;
        if (t - from > g_win->max_gap_ns)
            g_win->max_gap_ns = t - from;
    }
    d->last_live_ns = t;
    deliver(d, group, id, n);
}

static void on_page(struct client *d, const struct mosquitto_message *msg)
{
    cJSON *root = cJSON_ParseWithLength(msg->payload, (size_t)msg->payloadlen);
    const cJSON *e, *env;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "responses"))
    {
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
        const cJSON *grp = cJSON_GetObjectItemCaseSensitive(e, "group");
        int group;
        if (cJSON_GetObjectItemCaseSensitive(e, "error") != NULL) {
            g_errors++;
            if (g_errors <= 5)
                note("%s: error entry %.*s", d->id, msg->payloadlen > 300 ? 300 : msg->payloadlen,
                     (const char *)msg->payload);
            continue;
        }
        if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, "replay") != 0 ||
            !cJSON_IsString(grp) || (group = group_index(grp->valuestring)) < 0)
            continue;
        g_pages++;
        cJSON_ArrayForEach(env, cJSON_GetObjectItemCaseSensitive(e, "messages"))
        {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(env, "id");
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(env, "n");
            if (!cJSON_IsNumber(id) || !cJSON_IsNumber(n)) {
                g_errors++;
                continue;
            }
            deliver(d, group, (uint64_t)id->valuedouble, (uint64_t)n->valuedouble);
        }
        /* The ack at the end of each page releases the plugin's window. */
        struct devgroup *dg = devgroup_of(d, group);
        if (dg)
            send_ack(d, dg);
    }
    cJSON_Delete(root);
}

/* ---------------------------------------------------------------------------
 * libmosquitto callbacks
 * ------------------------------------------------------------------------- */

static void subscribe_device(struct client *d)
{
    char *topics[MAX_PER_DEVICE + 1];
    char names[MAX_PER_DEVICE][40];
    topics[0] = (char *)RESPONSE_TOPIC;
    for (int j = 0; j < d->ngroups; j++) {
        snprintf(names[j], sizeof names[j], "chat/%s", g_groups[d->dg[j].group].name);
        topics[j + 1] = names[j];
    }
    /* A subscribe to a group makes the device a member the first time, and
     * starts its catch-up from its cursor every time. */
    if (mosquitto_subscribe_multiple(d->mosq, NULL, d->ngroups + 1, topics, 1, 0, NULL) !=
        MOSQ_ERR_SUCCESS)
        die("%s: subscribe failed", d->id);
}

static void cb_connect(struct mosquitto *mosq, void *obj, int rc)
{
    struct client *c = obj;
    (void)mosq;
    if (rc != 0) {
        note("%s: CONNACK %d (%s)", c->id, rc, mosquitto_connack_string(rc));
        c->closed = true;
        return;
    }
    c->connected = true;
    c->subscribed = false;
    if (c->role == DEVICE)
        subscribe_device(c);
}

static void cb_disconnect(struct mosquitto *mosq, void *obj, int rc)
{
    struct client *c = obj;
    (void)mosq;
    (void)rc;
    if (!c->want_closed)
        g_lost_conn++;
    c->connected = false;
    c->closed = true;
    c->ping_mid = 0;
}

static void cb_subscribe(struct mosquitto *mosq, void *obj, int mid, int count, const int *granted)
{
    struct client *c = obj;
    (void)mosq;
    (void)mid;
    for (int i = 0; i < count; i++)
        if (granted[i] > 2)
            die("%s: a subscription was refused", c->id);
    c->subscribed = true;
}

static void cb_publish(struct mosquitto *mosq, void *obj, int mid)
{
    struct client *c = obj;
    (void)mosq;
    if (c->role == SENDER) {
        if (c->unacked_pubs > 0)
            c->unacked_pubs--;
        return;
    }
    if (c->ping_mid != 0 && mid == c->ping_mid) {
        int64_t rtt = now_ns() - c->ping_sent_ns;
        c->ping_mid = 0;
        if (g_win && c->ping_sent_ns >= g_win->start_ns) {
            if (rtt > g_win->max_ping_ns)
                g_win->max_ping_ns = rtt;
            g_win->pings++;
            g_win->ping_sum_ns += rtt;
        }
    }
}

static void cb_message(struct mosquitto *mosq, void *obj, const struct mosquitto_message *msg)
{
    struct client *c = obj;
    (void)mosq;
    if (c->role != DEVICE)
        return;
    if (strncmp(msg->topic, "chat/", 5) == 0)
        on_live(c, msg);
    else if (strcmp(msg->topic, RESPONSE_TOPIC) == 0)
        on_page(c, msg);
}

/* ---------------------------------------------------------------------------
 * Clients and the poll loop
 * ------------------------------------------------------------------------- */

static void client_init(struct client *c, enum role role, int index)
{
    c->role = role;
    c->index = index;
    snprintf(c->id, sizeof c->id, role == DEVICE ? "dev%04d" : "loadsnd%02d", index);
    c->mosq = mosquitto_new(c->id, true, c);
    if (!c->mosq)
        die("mosquitto_new(%s) failed", c->id);
    mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V311);
    mosquitto_int_option(c->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    /* Our own windows bound what is in flight. */
    mosquitto_int_option(c->mosq, MOSQ_OPT_SEND_MAXIMUM, 65535);
    mosquitto_connect_callback_set(c->mosq, cb_connect);
    mosquitto_disconnect_callback_set(c->mosq, cb_disconnect);
    mosquitto_subscribe_callback_set(c->mosq, cb_subscribe);
    mosquitto_publish_callback_set(c->mosq, cb_publish);
    mosquitto_message_callback_set(c->mosq, cb_message);
}

/* Starts a non-blocking connect: the CONNECT goes out when the socket is
 * writable, in the poll loop. A connect refused at once (on loopback the
 * kernel may answer a burst of connects with a reset) is tried again
 * 100 ms later, as a device would, at most 50 times in a row. */
static void client_connect(struct client *c, bool again)
{
    int rc;
    c->closed = false;
    c->want_closed = false;
    c->connected = false;
    c->retry_ns = 0;
    c->again = again;
    rc = again ? mosquitto_reconnect_async(c->mosq)
               : mosquitto_connect_async(c->mosq, "127.0.0.1", g_o.port, KEEPALIVE_S);
    if (rc == MOSQ_ERR_ERRNO && errno == ECONNREFUSED && c->refusals < 50) {
        c->refusals++;
        g_refused++;
        c->retry_ns = now_ns() + 100000000ll;
        return;
    }
    if (rc != MOSQ_ERR_SUCCESS)
        die("%s: connect to 127.0.0.1:%d: %s", c->id, g_o.port,
            rc == MOSQ_ERR_ERRNO ? strerror(errno) : mosquitto_strerror(rc));
    c->refusals = 0;
}

static void read_burst(struct client *c)
{
    for (int i = 0; i < READ_BURST; i++) {
        errno = 0;
        int rc = mosquitto_loop_read(c->mosq, 1);
        if (rc != MOSQ_ERR_SUCCESS) {
            if (!c->want_closed && !c->closed)
                note("%s: connection lost: %s", c->id, mosquitto_strerror(rc));
            if (!c->want_closed && !c->closed)
                g_lost_conn++;
            c->connected = false;
            c->closed = true;
            return;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || mosquitto_socket(c->mosq) < 0)
            return;
    }
}

static void add_fd(size_t *n, struct client *c)
{
    int fd = mosquitto_socket(c->mosq);
    if (fd < 0)
        return;
    g_pfd[*n].fd = fd;
    g_pfd[*n].events = POLLIN;
    if (mosquitto_want_write(c->mosq))
        g_pfd[*n].events |= POLLOUT;
    g_pfd[*n].revents = 0;
    g_owner[(*n)++] = c;
}

/* Due acks, pings and keepalives of every client; at most every 5 ms. */
static void timers(int64_t t)
{
    if (t - g_last_timers_ns < 5000000)
        return;
    g_last_timers_ns = t;
    bool misc = t - g_last_misc_ns > (int64_t)MISC_EVERY_NS;
    if (misc)
        g_last_misc_ns = t;
    for (int i = 0; i < g_o.devices; i++) {
        struct client *d = &g_dev[i];
        if (d->retry_ns != 0 && t >= d->retry_ns)
            client_connect(d, d->again);
        if (!d->connected)
            continue;
        for (int j = 0; j < d->ngroups; j++)
            if (d->dg[j].ack_due_ns != 0 && t >= d->dg[j].ack_due_ns)
                send_ack(d, &d->dg[j]);
        if (d->probe && d->subscribed && d->ping_mid == 0 && t >= d->next_ping_ns) {
            int mid = 0;
            if (mosquitto_publish(d->mosq, &mid, PING_TOPIC, 4, "ping", 1, false) ==
                MOSQ_ERR_SUCCESS) {
                d->ping_mid = mid;
                d->ping_sent_ns = t;
            }
            d->next_ping_ns = t + (int64_t)PING_EVERY_NS;
        }
        if (misc)
            mosquitto_loop_misc(d->mosq);
    }
    for (int s = 0; s < g_o.senders; s++) {
        if (g_snd[s].retry_ns != 0 && t >= g_snd[s].retry_ns)
            client_connect(&g_snd[s], g_snd[s].again);
        if (misc && g_snd[s].connected)
            mosquitto_loop_misc(g_snd[s].mosq);
    }
}

static void handle(struct client *c, short ev)
{
    if (ev & (POLLIN | POLLERR | POLLHUP))
        read_burst(c);
    /* Acks and pages queued by callbacks go out now, not a pass later. */
    if (mosquitto_socket(c->mosq) >= 0 && ((ev & POLLOUT) || mosquitto_want_write(c->mosq))) {
        int rc = mosquitto_loop_write(c->mosq, 1);
        if (rc != MOSQ_ERR_SUCCESS && !c->want_closed && !c->closed) {
            note("%s: write: %s", c->id, mosquitto_strerror(rc));
            g_lost_conn++;
            c->closed = true;
            c->connected = false;
        }
    }
}

/* Reads the probes now if they waited a millisecond: a pass over every
 * socket of a storm can take far longer, and a ping or a live gap would
 * measure this process instead of the broker. */
static void service_probes(void)
{
    int64_t t = now_ns();
    int n = 0;
    if (t - g_last_probes_ns < PROBE_EVERY_NS)
        return;
    g_last_probes_ns = t;
    for (int i = 0; i < g_nprobes; i++) {
        int fd = mosquitto_socket(g_probes[i]->mosq);
        g_probe_pfd[i].fd = fd; /* a negative fd is ignored by poll */
        g_probe_pfd[i].events = POLLIN;
        if (fd >= 0 && mosquitto_want_write(g_probes[i]->mosq))
            g_probe_pfd[i].events |= POLLOUT;
        g_probe_pfd[i].revents = 0;
        n += fd >= 0;
    }
    if (n == 0 || poll(g_probe_pfd, (nfds_t)g_nprobes, 0) <= 0)
        return;
    for (int i = 0; i < g_nprobes; i++)
        if (g_probe_pfd[i].fd >= 0 && g_probe_pfd[i].revents)
            handle(g_probes[i], g_probe_pfd[i].revents);
}

/* One pass: wait at most timeout_ms for socket activity and handle it. */
static void pass(int timeout_ms)
{
    size_t n = 0;
    for (int i = 0; i < g_o.devices; i++)
        add_fd(&n, &g_dev[i]);
    for (int s = 0; s < g_o.senders; s++)
        add_fd(&n, &g_snd[s]);
    int r = n ? poll(g_pfd, n, timeout_ms) : 0;
    if (n == 0 && timeout_ms > 0) {
        struct timespec ts = {0, (long)timeout_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (r < 0 && errno != EINTR)
        die("poll: %s", strerror(errno));
    for (size_t k = 0; r > 0 && k < n; k++) {
        if (g_pfd[k].revents && !g_owner[k]->probe)
            handle(g_owner[k], g_pfd[k].revents);
        service_probes();
    }
    g_last_probes_ns = 0;
    service_probes();
    timers(now_ns());
    if (now_ns() > g_deadline_ns)
        die("timed out after %u ms (--timeout-ms)", g_o.timeout_ms);
}

/* ---------------------------------------------------------------------------
 * Senders
 * ------------------------------------------------------------------------- */

static bool publish_to(int group)
{
    struct group *g = &g_groups[group];
    struct client *s = &g_snd[g->sender];
    char topic[40], payload[BODY_BYTES + 96];
    int len;
    if (!s->connected || s->unacked_pubs >= SENDER_WINDOW || g->sent - g->min_online >= LAG_MAX)
        return false;
    snprintf(topic, sizeof topic, "chat/%s", g->name);
    len = snprintf(payload, sizeof payload, "{\"n\":%" PRIu64 ",\"body\":\"%0*d\"}", g->sent + 1,
                   (int)BODY_BYTES, 0);
    if (mosquitto_publish(s->mosq, NULL, topic, len, payload, 1, false) != MOSQ_ERR_SUCCESS)
        return false;
    g->sent++;
    s->unacked_pubs++;
    return true;
}

/* The lowest shown id of each group over its online members that are not
 * catching up: how far the senders may run ahead. */
static void update_min_online(void)
{
    int64_t t = now_ns();
    if (t - g_last_min_ns < 5000000)
        return;
    g_last_min_ns = t;
    for (int k = 0; k < g_o.groups; k++) {
        struct group *g = &g_groups[k];
        uint64_t lo = g->sent;
        for (int m = 0; m < g->nmembers; m++) {
            struct client *d = &g_dev[g->members[m]];
            struct devgroup *dg;
            if (!d->connected || d->catching || (dg = devgroup_of(d, k)) == NULL)
                continue;
            if (dg->shown < lo)
                lo = dg->shown;
        }
        g->min_online = lo;
    }
}

/* Steady traffic: keeps the total published near rate x elapsed time since
 * the traffic (re)started, round robin over the groups. */
static void steady_send(int64_t t)
{
    uint64_t due = (uint64_t)((double)(t - g_rate_t0_ns) / 1e9 * g_o.rate);
    for (int tries = 0; g_rate_sent < due && tries < g_o.groups; tries++) {
        int group = (int)(g_sent_rr++ % (uint64_t)g_o.groups);
        if (publish_to(group))
            g_rate_sent++;
    }
}

static void steady_restart(void)
{
    g_rate_t0_ns = now_ns();
    g_rate_sent = 0;
}

/* Runs passes with steady traffic for ms milliseconds. */
static void steady_for(unsigned ms)
{
    int64_t end = now_ns() + (int64_t)ms * 1000000;
    steady_restart();
    for (uint64_t i = 0; now_ns() < end && i < 100000000ull; i++) {
        update_min_online();
        steady_send(now_ns());
        pass(5);
    }
}

/* Every group moves on by n messages, as fast as its members keep up. */
static void backlog_send(unsigned n)
{
    uint64_t want[1024];
    bool done = false;
    for (int k = 0; k < g_o.groups; k++)
        want[k] = g_groups[k].sent + n;
    for (uint64_t i = 0; !done && i < 100000000ull; i++) {
        update_min_online();
        done = true;
        for (int k = 0; k < g_o.groups; k++) {
            for (int b = 0; b < 16 && g_groups[k].sent < want[k]; b++)
                if (!publish_to(k))
                    break;
            done = done && g_groups[k].sent >= want[k];
        }
        pass(done ? 0 : 2);
    }
}

/* ---------------------------------------------------------------------------
 * Waits
 * ------------------------------------------------------------------------- */

static bool all_connected(int from, int to, bool subscribed)
{
    for (int i = from; i < to; i++)
        if (!g_dev[i].connected || (subscribed && !g_dev[i].subscribed))
            return false;
    return true;
}

/* Whether device d has shown every message up to each group's target (or,
 * with sent, up to every message published). */
static bool caught_up(const struct client *d, bool sent)
{
    for (int j = 0; j < d->ngroups; j++) {
        const struct group *g = &g_groups[d->dg[j].group];
        if (d->dg[j].shown < (sent ? g->sent : g->target))
            return false;
    }
    return true;
}

static bool senders_acked(void)
{
    for (int s = 0; s < g_o.senders; s++)
        if (g_snd[s].unacked_pubs > 0)
            return false;
    return true;
}

/* Waits (passes, no new traffic) until every online device has shown
 * everything published and every sender's publish was acknowledged. */
static void drain(const char *what)
{
    for (uint64_t i = 0; i < 100000000ull; i++) {
        bool done = senders_acked();
        for (int k = 0; done && k < g_o.devices; k++)
            done = !g_dev[k].connected || caught_up(&g_dev[k], true);
        if (done)
            return;
        pass(5);
    }
    die("%s: not drained", what);
}

/* ---------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: chat_load --port P --pid PID [--devices N] [--groups G] [--per-device K]\n"
        "                 [--storm S] [--backlog B] [--rate R] [--steady-ms T] [--settle-ms T]\n"
        "                 [--senders N]\n"
        "                 [--probes N] [--timeout-ms T] [--check] [--connect-only]\n");
    exit(2);
}

static void parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check")) {
            g_o.check = true;
            continue;
        }
        if (!strcmp(a, "--connect-only")) {
            g_o.connect_only = true;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--port"))
            g_o.port = atoi(v);
        else if (!strcmp(a, "--pid"))
            g_o.pid = atol(v);
        else if (!strcmp(a, "--devices"))
            g_o.devices = atoi(v);
        else if (!strcmp(a, "--groups"))
            g_o.groups = atoi(v);
        else if (!strcmp(a, "--per-device"))
            g_o.per_device = atoi(v);
        else if (!strcmp(a, "--storm"))
            g_o.storm = atoi(v);
        else if (!strcmp(a, "--backlog"))
            g_o.backlog = (unsigned)atoi(v);
        else if (!strcmp(a, "--rate"))
            g_o.rate = atof(v);
        else if (!strcmp(a, "--steady-ms"))
            g_o.steady_ms = (unsigned)atoi(v);
        else if (!strcmp(a, "--settle-ms"))
            g_o.settle_ms = (unsigned)atoi(v);
        else if (!strcmp(a, "--senders"))
            g_o.senders = atoi(v);
        else if (!strcmp(a, "--probes"))
            g_o.probes = atoi(v);
        else if (!strcmp(a, "--timeout-ms"))
            g_o.timeout_ms = (unsigned)atoi(v);
        else
            usage();
    }
    if (g_o.port <= 0 || g_o.devices < 1 || g_o.devices > 100000 || g_o.groups < 1 ||
        g_o.groups > 1024 || g_o.per_device < 1 || g_o.per_device > MAX_PER_DEVICE ||
        g_o.per_device > g_o.groups || g_o.storm < 0 || g_o.storm >= g_o.devices ||
        g_o.senders < 1 || g_o.senders > g_o.groups || g_o.rate <= 0 || g_o.probes < 0)
        usage();
}

/* One descriptor per client and a few more: raise the soft limit to the
 * hard one, or refuse. */
static void need_fds(void)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)(g_o.devices + g_o.senders + 64);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        die("getrlimit: %s", strerror(errno));
    if (rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < need)
            die("%lu file descriptors needed, the limit is %lu: raise it (ulimit -n)",
                (unsigned long)need, (unsigned long)rl.rlim_cur);
    }
}

static void setup(void)
{
    int spacing = g_o.groups / g_o.per_device;
    g_dev = xcalloc((size_t)g_o.devices, sizeof *g_dev);
    g_snd = xcalloc((size_t)g_o.senders, sizeof *g_snd);
    g_groups = xcalloc((size_t)g_o.groups, sizeof *g_groups);
    g_pfd = xcalloc((size_t)(g_o.devices + g_o.senders), sizeof *g_pfd);
    g_owner = xcalloc((size_t)(g_o.devices + g_o.senders), sizeof *g_owner);
    for (int k = 0; k < g_o.groups; k++) {
        snprintf(g_groups[k].name, sizeof g_groups[k].name, "g%03d", k);
        g_groups[k].sender = k % g_o.senders;
        g_groups[k].members = xcalloc((size_t)g_o.devices, sizeof(int));
    }
    for (int i = 0; i < g_o.devices; i++) {
        struct client *d = &g_dev[i];
        client_init(d, DEVICE, i);
        d->ngroups = g_o.per_device;
        for (int j = 0; j < d->ngroups; j++) {
            int k = (i + j * (spacing > 0 ? spacing : 1)) % g_o.groups;
            d->dg[j].group = k;
            g_groups[k].members[g_groups[k].nmembers++] = i;
        }
        /* Every (devices / storm)-th device is in the storm. */
        d->storm = g_o.storm > 0 && i % (g_o.devices / g_o.storm) == 0 &&
                   i / (g_o.devices / g_o.storm) < g_o.storm;
    }
    g_probes = xcalloc((size_t)g_o.probes, sizeof *g_probes);
    g_probe_pfd = xcalloc((size_t)g_o.probes, sizeof *g_probe_pfd);
    /* Probes spread over the steady devices. */
    for (int i = 0, step = 0; i < g_o.devices && g_nprobes < g_o.probes; i++) {
        if (g_dev[i].storm ||
            step++ % ((g_o.devices - g_o.storm) / (g_o.probes ? g_o.probes : 1) + 1) != 0)
            continue;
        g_dev[i].probe = true;
        g_probes[g_nprobes++] = &g_dev[i];
    }
    for (int s = 0; s < g_o.senders; s++)
        client_init(&g_snd[s], SENDER, s);
}

static void print_window(const char *name, const struct window *w)
{
    printf("%s_ms=%.0f\n", name, (double)(w->end_ns - w->start_ns) / 1e6);
    printf("%s_max_live_gap_ms=%.1f\n", name, (double)w->max_gap_ns / 1e6);
    printf("%s_max_ping_ms=%.1f\n", name, (double)w->max_ping_ns / 1e6);
    printf("%s_mean_ping_ms=%.2f\n", name,
           w->pings ? (double)w->ping_sum_ns / (double)w->pings / 1e6 : 0.0);
    printf("%s_pings=%" PRIu64 "\n", name, w->pings);
    printf("%s_broker_busy=%.2f\n%s_load_busy=%.2f\n%s_other_busy=%.2f\n", name, w->broker_busy,
           name, w->self_busy, name, w->other_busy);
}

/* Starts measuring a window: every probe's gap counts from now. */
static void window_start(struct window *w)
{
    memset(w, 0, sizeof *w);
    w->start_ns = now_ns();
    w->broker_cpu0 = broker_cpu();
    w->self_cpu0 = self_cpu();
    w->all_cpu0 = machine_cpu();
    g_win = w;
}

static void window_end(struct window *w)
{
    int64_t t = now_ns();
    /* A device that got nothing since the last message has a gap too. */
    for (int i = 0; i < g_nprobes; i++) {
        const struct client *d = g_probes[i];
        int64_t from = d->last_live_ns > w->start_ns ? d->last_live_ns : w->start_ns;
        if (t - from > w->max_gap_ns)
            w->max_gap_ns = t - from;
    }
    w->end_ns = t;
    w->broker_busy = (broker_cpu() - w->broker_cpu0) / ((double)(t - w->start_ns) / 1e9);
    w->self_busy = (self_cpu() - w->self_cpu0) / ((double)(t - w->start_ns) / 1e9);
    w->other_busy = (machine_cpu() - w->all_cpu0) / ((double)(t - w->start_ns) / 1e9) -
                    w->broker_busy - w->self_busy;
    if (w->other_busy < 0)
        w->other_busy = 0;
    g_win = NULL;
}

/* What one storm (phases 3 to 6) measured. */
struct storm {
    struct window before, during;
    long rss_offline, rss_before, rss_peak, rss_after; /* KiB */
    int64_t catchup_ns, median_ns, max_ns;             /* all, and per device */
    uint64_t messages;                                 /* shown by the storm devices */
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Phases 3 to 6: the storm devices leave, the groups move on, they come
 * back at once and catch up; then steady traffic and a settle. */
static void run_storm(int n, struct storm *r, int64_t *caught_at)
{
    int stormers = 0, caught = 0;
    uint64_t shown0 = 0, shown1 = 0;
    int64_t t0;

    memset(r, 0, sizeof *r);
    for (int i = 0; i < g_o.devices; i++) {
        if (!g_dev[i].storm)
            continue;
        g_dev[i].want_closed = true;
        mosquitto_disconnect(g_dev[i].mosq);
        stormers++;
    }
    for (uint64_t i = 0; i < 100000000ull; i++) {
        bool gone = true;
        for (int k = 0; k < g_o.devices && gone; k++)
            gone = !g_dev[k].storm || mosquitto_socket(g_dev[k].mosq) < 0;
        if (gone)
            break;
        pass(5);
    }
    for (int i = 0; i < g_o.devices; i++)
        if (g_dev[i].storm)
            g_dev[i].connected = false;
    backlog_send(g_o.backlog);
    drain("backlog");
    r->rss_offline = rss_kib();
    for (int k = 0; k < g_o.groups; k++)
        g_groups[k].target = g_groups[k].sent;
    note("storm %d: %d devices offline; every group moved on by %u messages; broker %ld KiB", n,
         stormers, g_o.backlog, r->rss_offline);

    /* 4. Steady traffic before the storm. */
    window_start(&r->before);
    steady_for(g_o.steady_ms);
    window_end(&r->before);
    r->rss_before = rss_kib();

    /* 5. Every storm device reconnects at once. */
    for (int i = 0; i < g_o.devices; i++)
        if (g_dev[i].storm)
            for (int j = 0; j < g_dev[i].ngroups; j++)
                shown0 += g_dev[i].dg[j].shown;
    window_start(&r->during);
    t0 = now_ns();
    for (int i = 0; i < g_o.devices; i++) {
        if (!g_dev[i].storm)
            continue;
        g_dev[i].catching = true;
        client_connect(&g_dev[i], true);
    }
    steady_restart();
    for (uint64_t i = 0; caught < stormers && i < 100000000ull; i++) {
        int64_t t;
        long rss;
        update_min_online();
        steady_send(now_ns());
        pass(2);
        t = now_ns();
        for (int k = 0; k < g_o.devices; k++) {
            struct client *d = &g_dev[k];
            if (d->catching && caught_up(d, false)) {
                d->catching = false;
                d->caught_ns = t;
                caught_at[caught++] = t - t0;
            }
        }
        if ((i & 15) == 0 && (rss = rss_kib()) > r->rss_peak)
            r->rss_peak = rss;
    }
    r->catchup_ns = now_ns() - t0;
    window_end(&r->during);
    if ((rss_kib()) > r->rss_peak)
        r->rss_peak = rss_kib();
    for (int i = 0; i < g_o.devices; i++)
        if (g_dev[i].storm)
            for (int j = 0; j < g_dev[i].ngroups; j++)
                shown1 += g_dev[i].dg[j].shown;
    r->messages = shown1 - shown0;
    qsort(caught_at, (size_t)caught, sizeof *caught_at, cmp_i64);
    r->median_ns = caught ? caught_at[caught / 2] : 0;
    r->max_ns = caught ? caught_at[caught - 1] : 0;
    note("storm %d: %d devices caught up on %" PRIu64 " messages in %.2f s; longest live gap "
         "%.0f ms, longest ping %.1f ms; broker peak %ld KiB",
         n, stormers, r->messages, (double)r->catchup_ns / 1e9, (double)r->during.max_gap_ns / 1e6,
         (double)r->during.max_ping_ns / 1e6, r->rss_peak);

    /* 6. Steady traffic after, everything delivered, and a settle. */
    steady_for(g_o.steady_ms);
    drain("after the storm");
    {
        int64_t end = now_ns() + (int64_t)g_o.settle_ms * 1000000;
        for (uint64_t i = 0; now_ns() < end && i < 100000000ull; i++)
            pass(10);
    }
    r->rss_after = rss_kib();
    note("storm %d: broker %ld KiB after it settled", n, r->rss_after);
}

static void print_storm(const char *prefix, const struct storm *r)
{
    char name[64];
    printf("%sstorm_messages=%" PRIu64 "\n%scatchup_s=%.3f\n", prefix, r->messages, prefix,
           (double)r->catchup_ns / 1e9);
    printf("%scatchup_device_median_s=%.3f\n%scatchup_device_max_s=%.3f\n", prefix,
           (double)r->median_ns / 1e9, prefix, (double)r->max_ns / 1e9);
    snprintf(name, sizeof name, "%sbefore_storm", prefix);
    print_window(name, &r->before);
    snprintf(name, sizeof name, "%sstorm", prefix);
    print_window(name, &r->during);
    printf("%srss_offline_kib=%ld\n%srss_before_storm_kib=%ld\n%srss_storm_peak_kib=%ld\n"
           "%srss_after_kib=%ld\n",
           prefix, r->rss_offline, prefix, r->rss_before, prefix, r->rss_peak, prefix,
           r->rss_after);
}

int main(int argc, char **argv)
{
    struct window steady;
    struct storm storms[2];
    long rss_idle, rss_connected, fds_idle, fds_connected, rss_steady;
    int64_t t0;
    int stormers = 0;
    uint64_t lost = 0, missing_dg = 0;
    int64_t *caught_at;

    parse(argc, argv);
    need_fds();
    if (g_o.per_device * g_o.devices / g_o.groups < 1)
        die("too few devices for the groups");
    mosquitto_lib_init();
    setup();
    for (int i = 0; i < g_o.devices; i++)
        stormers += g_dev[i].storm;
    t0 = now_ns();
    g_deadline_ns = t0 + (int64_t)g_o.timeout_ms * 1000000;
    rss_idle = rss_kib();
    fds_idle = broker_fds();

    /* 1. Devices connect in batches (the broker's listen backlog is 100)
     * and subscribe; senders connect. */
    for (int from = 0; from < g_o.devices; from += (int)CONNECT_BATCH) {
        int to = from + (int)CONNECT_BATCH < g_o.devices ? from + (int)CONNECT_BATCH : g_o.devices;
        for (int i = from; i < to; i++)
            client_connect(&g_dev[i], false);
        for (uint64_t i = 0; !all_connected(from, to, true) && i < 100000000ull; i++)
            pass(5);
    }
    for (int s = 0; s < g_o.senders; s++)
        client_connect(&g_snd[s], false);
    for (bool up = false; !up;) {
        up = true;
        for (int s = 0; s < g_o.senders; s++)
            up = up && g_snd[s].connected;
        pass(5);
    }
    rss_connected = rss_kib();
    fds_connected = broker_fds();
    note("%d devices connected and subscribed in %.1f s; broker %ld KiB (%ld KiB before), %ld "
         "descriptors",
         g_o.devices, (double)(now_ns() - t0) / 1e9, rss_connected, rss_idle, fds_connected);
    if (g_o.connect_only) {
        /* Settled: what the broker holds per connected, subscribed device. */
        for (int i = 0; i < 200; i++)
            pass(5);
        rss_connected = rss_kib();
        printf("devices=%d\nper_device=%d\nbroker_fds_idle=%ld\nbroker_fds_connected=%ld\n"
               "rss_idle_kib=%ld\nrss_connected_kib=%ld\nrss_per_device_kib=%.1f\n",
               g_o.devices, g_o.per_device, fds_idle, fds_connected, rss_idle, rss_connected,
               (double)(rss_connected - rss_idle) / g_o.devices);
        return 0;
    }

    /* 2. Steady traffic: the steady window. */
    window_start(&steady);
    steady_for(g_o.steady_ms);
    window_end(&steady);
    drain("steady traffic");
    rss_steady = rss_kib();
    note("steady window: longest live gap %.0f ms, longest ping %.1f ms; broker %ld KiB",
         (double)steady.max_gap_ns / 1e6, (double)steady.max_ping_ns / 1e6, rss_steady);

    /* 3-6, twice: the second storm's memory must end where the first's did. */
    caught_at = xcalloc((size_t)g_o.devices, sizeof *caught_at);
    for (int n = 0; n < 2; n++)
        run_storm(n + 1, &storms[n], caught_at);

    for (int i = 0; i < g_o.devices; i++) {
        for (int j = 0; j < g_dev[i].ngroups; j++) {
            const struct devgroup *dg = &g_dev[i].dg[j];
            uint64_t want = g_groups[dg->group].sent;
            if (dg->shown < want) {
                lost += want - dg->shown;
                missing_dg++;
            }
        }
    }
    uint64_t published = 0;
    for (int k = 0; k < g_o.groups; k++)
        published += g_groups[k].sent;
    printf("devices=%d\ngroups=%d\nper_device=%d\nmembers_per_group=%d\nstorm=%d\n", g_o.devices,
           g_o.groups, g_o.per_device, g_o.devices * g_o.per_device / g_o.groups, stormers);
    printf("backlog=%u\nrate=%.0f\npublished=%" PRIu64 "\nshown=%" PRIu64 "\n", g_o.backlog,
           g_o.rate, published, g_shown);
    printf("lost=%" PRIu64 "\nlost_device_groups=%" PRIu64 "\nduplicated=%" PRIu64
           "\nmisnumbered=%" PRIu64 "\n",
           lost, missing_dg, g_dup_app, g_misnumbered);
    printf("redundant_dropped_by_id=%" PRIu64 "\npages=%" PRIu64 "\nerror_entries=%" PRIu64
           "\nconnections_lost=%" PRIu64 "\n",
           g_redundant, g_pages, g_errors, g_lost_conn);
    printf("connects_refused_and_retried=%" PRIu64 "\n", g_refused);
    print_window("steady", &steady);
    print_storm("", &storms[0]);
    print_storm("s2_", &storms[1]);
    printf("broker_fds_idle=%ld\nbroker_fds_connected=%ld\n", fds_idle, fds_connected);
    printf("rss_idle_kib=%ld\nrss_connected_kib=%ld\nrss_steady_kib=%ld\n", rss_idle, rss_connected,
           rss_steady);
    printf("run_s=%.1f\n", (double)(now_ns() - t0) / 1e9);
    fflush(stdout);

    bool ok = true;
    if (g_o.check) {
        /* A leak grows with every storm; a cache or a memtable that filled
         * up does not. The second storm ends where the first did, within a
         * quarter of what a storm adds at its peak (4 MiB at least). */
        long growth = storms[1].rss_peak - storms[1].rss_before, slack = growth / 4;
        if (slack < 4096)
            slack = 4096;
        if (lost || g_dup_app || g_misnumbered || g_errors || g_lost_conn) {
            fprintf(stderr,
                    "chat_load: FAIL: lost %" PRIu64 ", duplicated %" PRIu64
                    ", misnumbered %" PRIu64 ", error entries %" PRIu64
                    ", connections lost %" PRIu64 "\n",
                    lost, g_dup_app, g_misnumbered, g_errors, g_lost_conn);
            ok = false;
        }
        if (g_o.pid > 0 && storms[1].rss_after > storms[0].rss_after + slack) {
            fprintf(stderr,
                    "chat_load: FAIL: broker memory %ld KiB after the second storm, %ld KiB "
                    "after the first (peak %ld KiB)\n",
                    storms[1].rss_after, storms[0].rss_after, storms[1].rss_peak);
            ok = false;
        }
    }
    for (int i = 0; i < g_o.devices; i++) {
        g_dev[i].want_closed = true;
        if (mosquitto_socket(g_dev[i].mosq) >= 0)
            mosquitto_disconnect(g_dev[i].mosq);
    }
    for (int s = 0; s < g_o.senders; s++) {
        g_snd[s].want_closed = true;
        if (mosquitto_socket(g_snd[s].mosq) >= 0)
            mosquitto_disconnect(g_snd[s].mosq);
    }
    for (int i = 0; i < 200; i++)
        pass(5);
    for (int i = 0; i < g_o.devices; i++) {
        for (int j = 0; j < g_dev[i].ngroups; j++)
            free(g_dev[i].dg[j].held);
        mosquitto_destroy(g_dev[i].mosq);
    }
    for (int s = 0; s < g_o.senders; s++)
        mosquitto_destroy(g_snd[s].mosq);
    for (int k = 0; k < g_o.groups; k++)
        free(g_groups[k].members);
    free(caught_at);
    free(g_dev);
    free(g_snd);
    free(g_groups);
    free(g_pfd);
    free(g_owner);
    free(g_probes);
    free(g_probe_pfd);
    mosquitto_lib_cleanup();
    return ok ? 0 : 1;
}
