/* bench.h: private to chat_bench, the load generator behind bench/run
 * (chat_bench.c has the command lines). Its files, each calling only those
 * listed after it:
 *   chat_bench.c      the options, main and the dispatch to a subcommand
 *   bench_wait.c      port, wait, idle, quiet: what bench/run asks between runs
 *   bench_ingest.c    ingest, join, fill: the live load, and filling the store
 *   bench_catchup.c   catchup, appcatchup: a device taking what it missed
 *   bench_receipts.c  receipts: every member reading every message
 *   bench_presence.c  presence: thousands online, on raw sockets
 *   bench_push.c      push: offline members with push registrations, a sink
 *   bench_payload.c   the payloads published, and the scans that read them
 *   bench_measure.c   CPU times and quantiles
 *   bench_client.c    many libmosquitto clients on one thread (bench_client.h)
 *
 * Output: every subcommand prints one line of key=value pairs on stdout,
 * which bench/run parses by name: a key renamed or dropped is a change of
 * bench/run too. Errors go to stderr; a subcommand returns the process's
 * exit status (0 measured, 1 failed, 2 bad usage).
 *
 * Threading: one thread, but for the client library's own in appcatchup
 * --via lib and push's sink thread; every loop is bounded in count or time; only 127.0.0.1 is
 * contacted. */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_client.h"

#define RESPONSE_TOPIC "$CONTROL/chat/v1/response"
#define PAYLOAD_BYTES 200u     /* target size of a published JSON payload */
#define PUBLISH_BURST 64u      /* publishes per poll pass at most */
#define DRAIN_TIMEOUT_MS 20000 /* after the measurement: wait for stragglers */

/* The command line's options, read once by chat_bench.c; each subcommand
 * reads those it needs (see usage()). */
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
    unsigned registered; /* push: members offline with a registration */
    unsigned groups;     /* push: groups each of them is in */
    int sink_port;       /* push: the loopback push sink's port */
    bool hang;           /* push: the sink never answers a notification */
    bool push_on;        /* push: register the members (the broker has push_allow) */
};

/* ---------------------------------------------------------------------------
 * Subcommands: each measures once, prints its key=value line and returns
 * the exit status.
 * ------------------------------------------------------------------------- */

int cmd_port(void);
int cmd_wait(const struct opts *o);
int cmd_idle(const struct opts *o);
int cmd_quiet(const struct opts *o);
int cmd_ingest(const struct opts *o);
int cmd_join(const struct opts *o);
int cmd_fill(const struct opts *o);
int cmd_catchup(const struct opts *o);
int cmd_appcatchup(const struct opts *o);
int cmd_receipts(const struct opts *o);
int cmd_presence(const struct opts *o);
int cmd_push(const struct opts *o);

/* ---------------------------------------------------------------------------
 * bench_payload.c
 * ------------------------------------------------------------------------- */

/* Draws this process's run token, which makes the client message ids of
 * this run unlike those of any other against the same store (the plugin
 * drops a (group, from, cid) it has already stored, by design). Call once,
 * before the first make_payload. */
void bench_payload_init(void);

/* Writes into buf (at least PAYLOAD_BYTES + 1 bytes) a JSON payload of
 * PAYLOAD_BYTES bytes carrying a client message id made of client, the run
 * token and n, the sequence number n, the send time t (ns, monotonic) and
 * a body; NUL-terminated. Returns its length. */
size_t make_payload(char *buf, const char *client, uint64_t n, uint64_t t);

/* Finds key (quoted, with its colon: "\"n\":") in the JSON text s of len
 * bytes (not NUL-terminated) and reads the unsigned number after it into
 * *v. False when the key or the number is missing. */
bool scan_u64(const char *s, size_t len, const char *key, uint64_t *v);

/* True when p (len bytes, may be NULL) is one of the plugin's pushes
 * (protocol v1.1: reads and presence), which come on the response topic to
 * every device subscribed to a group: the measurements other than
 * receipts' and presence's leave them aside. */
bool is_push(const char *p, size_t len);

/* ---------------------------------------------------------------------------
 * bench_measure.c
 * ------------------------------------------------------------------------- */

/* Milliseconds since t0 (a bench_now_ns time). */
double ms_since(uint64_t t0);

/* CPU time (user + system, all threads) of process pid in microseconds;
 * false when there is no such process. */
bool proc_cpu_us(long pid, uint64_t *us);

/* Resident memory (VmRSS) of process pid in KiB; 0 when there is no such
 * process or no pid (0). */
long proc_rss_kib(long pid);

/* CPU time all processes of the machine spent busy (user, nice, system,
 * irq, softirq, steal), in microseconds, from /proc/stat. */
bool machine_busy_us(uint64_t *us);

/* Our own CPU time (every thread) in microseconds. */
uint64_t self_cpu_us(void);

/* Prints " other_util=U": the cores the rest of the machine kept busy over
 * wall_ms, from what the machine (busy_us), the broker (broker_us) and we
 * (self_us) spent in that time, in microseconds; never below 0. */
void print_other_util(uint64_t busy_us, uint64_t broker_us, double self_us, double wall_ms);

/* qsort's comparison of two uint64_t. */
int cmp_u64(const void *a, const void *b);

/* The q-quantile (0..1) of n sorted values; 0 when n is 0. */
uint64_t quantile(const uint64_t *v, size_t n, double q);

#endif
