/* load.h: what the files of chat_load share: the options, the devices,
 * senders and groups of the run, the windows measured, and the functions
 * each file offers the others. chat_load is one process with one thread
 * (see chat_load.c for what it does); its state is global, owned by
 * chat_load.c, which sets it up in main before anything else runs. Calls
 * flow one way:
 *   chat_load.c    options, setup, the phases, the report and --check
 *   load_storm.c   traffic, waits, measured windows, the storm (phases 3-6)
 *   load_device.c  devices showing messages as the client library does,
 *                  libmosquitto's callbacks, the poll loop
 *   load_sys.c     the clock, logging, and what /proc says of the broker */
#ifndef CHAT_LOAD_H
#define CHAT_LOAD_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    int storms; /* phases 3 to 6, once or twice */
    unsigned backlog;
    double rate;
    unsigned steady_ms;
    unsigned window_ms;       /* phase 2, the steady window (0: steady_ms) */
    unsigned settle_ms;       /* after a storm, before its memory is read */
    unsigned storm_spread_ms; /* phase 5: reconnects spread evenly over this (0: one pass) */
    unsigned timeout_ms;
    const char *ping_log; /* the pinger's round trips, one per line, appended (NULL: none) */
    bool check;
    bool connect_only; /* phase 1 only: memory and descriptors per connected device */
    bool plain;        /* plain Mosquitto: persistent sessions, n as the id, no acks */
};

/* Values kept for a quantile (a growing array; samples_add dies when out
 * of memory). */
struct samples {
    int64_t *v;
    size_t n, cap;
};

/* What is measured in a window of steady traffic. */
struct window {
    int64_t start_ns, end_ns;
    double broker_cpu0, self_cpu0, all_cpu0;   /* CPU seconds at the start */
    double broker_busy, self_busy, other_busy; /* CPU over wall time, in cores */
    int64_t max_gap_ns;  /* longest gap between two live messages of a steady device */
    int64_t max_ping_ns; /* longest ping round trip (an open ping: its age at the end) */
    uint64_t pings;      /* pings sent in the window: answered, or open at its end */
    uint64_t pings_open; /* of those, unanswered at the end (counted with their age) */
    int64_t ping_sum_ns;
    struct samples ping_ns, gap_ns; /* every round trip and live gap, for the p99 */
};

/* What one storm (phases 3 to 6) measured. */
struct storm {
    struct window before, during;
    long rss_offline, rss_before, rss_peak, rss_after; /* KiB */
    int64_t catchup_ns, median_ns, max_ns;             /* all, and per device */
    int64_t start_ns, subscribed_ns; /* the storm began; its last device got its SUBACK */
    uint64_t messages;               /* shown by the storm devices */
};

/* The run's state (chat_load.c). */
extern struct opts g_o;
extern struct client *g_dev;     /* g_o.devices devices */
extern struct client *g_snd;     /* g_o.senders senders */
extern struct group *g_groups;   /* g_o.groups groups */
extern struct pollfd *g_pfd;     /* one per client, for pass() */
extern struct client **g_owner;  /* the client of each g_pfd entry */
extern struct window *g_win;     /* the window being measured, or NULL */
extern int64_t g_deadline_ns;    /* pass() gives up (die) after it */
extern struct client **g_probes; /* the probe devices */
extern struct pollfd *g_probe_pfd;
extern int g_nprobes;

/* Counters of the whole run. */
extern uint64_t g_shown, g_redundant, g_misnumbered, g_dup_app, g_pages, g_errors, g_lost_conn;
extern uint64_t g_refused; /* connects refused at once (ECONNREFUSED), then tried again */

/* load_pinger.c: a child process with its own connection that times the
 * broker's PUBACKs apart from this process's load (see the file). */
void pinger_start(int port);
void pinger_stop(void);
void pinger_print(const char *name, int64_t start, int64_t end);
int pinger_rt(void);

/* load_sys.c */

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t now_ns(void);

/* A progress line on stderr, stamped with the time since the first. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints the reason on stderr and exits with status 2. */
_Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* calloc that dies when out of memory (n 0 allocates one element). */
void *xcalloc(size_t n, size_t size);

/* Appends x to s; the q-th quantile (q in 0..1, nearest rank) of s, 0 when
 * empty (sorts s); frees s's values. */
void samples_add(struct samples *s, int64_t x);
int64_t samples_quantile(struct samples *s, double q);
void samples_free(struct samples *s);

/* The broker's (--pid) resident memory in KiB (0: unknown), its open
 * descriptors (-1: unknown), its CPU seconds (0: unknown); the CPU seconds
 * every process of the machine, and this one, used. */
long rss_kib(void);
long broker_fds(void);
double broker_cpu(void);
double machine_cpu(void);
double self_cpu(void);

/* load_device.c */

/* Device d's state for group (an index into g_groups), NULL when d is not
 * in it. */
struct devgroup *devgroup_of(struct client *d, int group);

/* Creates c's libmosquitto client (MQTT 3.1.1, clean session; a device
 * with --plain: a persistent session) as device or sender number index,
 * with its callbacks; dies on failure. */
void client_init(struct client *c, enum role role, int index);

/* Starts a non-blocking connect (again: a reconnect); the CONNECT goes out
 * in the poll loop. A connect refused at once is retried by the loop. */
void client_connect(struct client *c, bool again);

/* One pass of the poll loop: waits at most timeout_ms for activity on any
 * client and handles it, with the due acks, pings and keepalives; dies
 * past g_deadline_ns. */
void pass(int timeout_ms);

/* load_storm.c */

/* Whether devices [from, to) are connected (and, with subscribed, have
 * their SUBACK). */
bool all_connected(int from, int to, bool subscribed);

/* Runs passes with steady traffic (--rate) for ms milliseconds. */
void steady_for(unsigned ms);

/* Runs passes without new traffic until every online device has shown
 * everything published and every publish was acknowledged; dies, naming
 * what, when that does not come. */
void drain(const char *what);

/* Starts measuring w (zeroed here): probes' gaps and pings count from now;
 * window_end closes it, counts the pings still unanswered (window_ping,
 * with their age) and works out the CPU figures. */
void window_start(struct window *w);
void window_end(struct window *w);

/* Counts one ping sent in w that took (or, unanswered at w's end, has
 * taken so far) ns: in the max, the mean and the samples of the p99. */
void window_ping(struct window *w, int64_t ns);

/* Storm n (phases 3 to 6) into *r; caught_at: room for g_o.devices
 * catch-up times, scratch. */
void run_storm(int n, struct storm *r, int64_t *caught_at);

#endif
