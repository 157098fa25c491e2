/* bench_client: many libmosquitto clients driven by one thread with poll(2),
 * for the load generator (chat_bench).
 *
 * A bench_set owns up to BENCH_SET_MAX clients. Every client is a
 * libmosquitto handle used without its own thread: bench_set_poll waits on
 * all their sockets at once and lets libmosquitto read, write and call back.
 * TCP_NODELAY is set on every client, so that no small packet (an ack, a
 * PUBACK) waits on Nagle's algorithm.
 *
 * Ownership: bench_set_create/bench_set_destroy; a set destroys its clients.
 * Callbacks receive the client and its ctx; libmosquitto owns the message
 * passed to on_message (copy what you keep).
 *
 * Threading: none; everything runs on the caller's thread. Every wait is
 * bounded by a timeout in milliseconds.
 */
#ifndef BENCH_CLIENT_H
#define BENCH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mosquitto.h>

/* Clients in one set: the ingest scenario's largest group (1,000 members
 * online, or 900 offline joined before) and its publisher. Every client is
 * a file descriptor: the caller raises ulimit -n. */
#define BENCH_SET_MAX 2048u

typedef struct bench_client bench_client;
typedef void (*bench_msg_fn)(bench_client *c, const struct mosquitto_message *msg);
typedef void (*bench_pub_fn)(bench_client *c, int mid);

struct bench_client {
    struct mosquitto *mosq;
    char id[64];
    void *ctx;           /* caller's data */
    bench_msg_fn on_msg; /* a message arrived (may be NULL) */
    bench_pub_fn on_pub; /* a QoS 1 publish was acknowledged (may be NULL) */
    bool connected;      /* CONNACK with success seen and not lost since */
    int connack;         /* last CONNACK return code, -1 before any */
    bool subacked;       /* SUBACK seen since the last bench_client_subscribe */
    bool sub_refused;    /* that SUBACK refused a filter */
    bool closed;         /* the connection ended (by us or the broker) */
    uint64_t pubacks;    /* QoS 1 publishes acknowledged */
    uint64_t msgs;       /* messages received */
};

typedef struct bench_set bench_set;

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);

/* Initialises libmosquitto once per process; pair with bench_lib_cleanup. */
int bench_lib_init(void);
void bench_lib_cleanup(void);

/* Creates an empty set; NULL when out of memory. Free with bench_set_destroy. */
bench_set *bench_set_create(void);

/* Disconnects (without waiting) and frees every client, then the set. Accepts NULL. */
void bench_set_destroy(bench_set *s);

/* Adds a client with MQTT client id `id` (clean session or not) and starts
 * connecting it to 127.0.0.1:port (the TCP connect and CONNECT are sent at
 * once; the CONNACK arrives through bench_set_poll). Returns the client,
 * owned by the set, or NULL after printing why. */
bench_client *bench_set_add(bench_set *s, const char *id, bool clean, int port, void *ctx);

/* Clients in the set, and the i-th one. */
size_t bench_set_count(const bench_set *s);
bench_client *bench_set_get(bench_set *s, size_t i);

/* Waits up to timeout_ms for socket activity and handles it: reads every
 * packet waiting, flushes pending writes, runs keepalive. Returns the number
 * of sockets that had activity, or -1 when a client's connection failed (its
 * `closed` is set) or poll itself failed. */
int bench_set_poll(bench_set *s, int timeout_ms);

/* Polls until every client is connected (true) or timeout_ms passed, a
 * connection was refused or lost (false, after printing why). */
bool bench_set_wait_connected(bench_set *s, int timeout_ms);

/* Subscribes c to filter at qos; bench_set_wait_subacked waits for the SUBACK
 * of every client that subscribed. */
bool bench_client_subscribe(bench_client *c, const char *filter, int qos);
bool bench_set_wait_subacked(bench_set *s, int timeout_ms);

/* Publishes len bytes of payload to topic. Returns false after printing why. */
bool bench_client_publish(bench_client *c, const char *topic, const void *payload, size_t len,
                          int qos);

/* Subscribes every client now in s to filter at qos and waits up to
 * timeout_ms for their SUBACKs. True at once when s has no client. */
bool bench_set_subscribe_all(bench_set *s, const char *filter, int qos, int timeout_ms);

/* Sends DISCONNECT on every client and polls until all sockets are closed
 * or timeout_ms passed. Returns true when all closed. */
bool bench_set_disconnect_all(bench_set *s, int timeout_ms);

/* The end of a measurement: bench_set_disconnect_all, then
 * bench_set_destroy. Accepts NULL. */
void bench_set_close(bench_set *s, int timeout_ms);

#endif
