/* conn: the connection's life: attempts, the pauses between them, and what
 * the application hears when it comes up, is refused or is lost.
 *
 * The dispatcher (dispatch.c) calls it on the connection's events and on
 * connect and disconnect calls, and does what the other modules must do
 * about them (resubscribe, resend, forget the connection's operations);
 * conn owns the state of the connection and the Paho handle's lifetime.
 *
 * Threading: the dispatcher thread only.
 */
#ifndef CHAT_CLIENT_CONN_H
#define CHAT_CLIENT_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "notify.h"
#include "paho.h"
#include "queue.h"

/* Where the connection stands. */
enum conn_state {
    CONN_IDLE,       /* no handle; reconnect_at says when to try, if wanted */
    CONN_CONNECTING, /* a handle is connecting */
    CONN_UP,         /* connected */
    CONN_CLOSING     /* our DISCONNECT is on its way */
};

/* What a connection works with (borrowed, read-only). */
struct chat_conn_cfg {
    chat_paho *paho;
    struct chat_queue *queue;
    struct chat_calls *calls; /* connect calls are finished here */
    const chat_notify *notify;
    int reconnect_max_s;
};

typedef struct chat_conn {
    struct chat_conn_cfg cfg;
    enum conn_state state;
    bool want;            /* connect was asked and no disconnect since */
    int64_t reconnect_at; /* CONN_IDLE and want: when to try again */
    int backoff_ms;       /* the next pause between attempts */
    int connect_timeout_ms;
    int server_reason;            /* reason code of the broker's DISCONNECT on this connection */
    char server_reason_text[256]; /* ... and its Reason String, "" if none */
    unsigned rng;                 /* rand_r state for the reconnect jitter */
} chat_conn;

/* Sets cn up, idle, with Paho's connect timeout from connect_timeout_ms
 * until a connect call says otherwise; seed starts the jitter. */
void chat_conn_init(chat_conn *cn, const struct chat_conn_cfg *cfg, int connect_timeout_ms,
                    unsigned seed);

/* A connect call (already in calls): the connection is wanted from now on;
 * an idle one tries at once, with Paho's connect timeout from timeout_ms. */
void chat_conn_want(chat_conn *cn, int timeout_ms);

/* A disconnect call: no more attempts after this connection. */
void chat_conn_unwant(chat_conn *cn);

/* Connection events of the current epoch. chat_conn_failed finishes the
 * connect calls with the reason; chat_conn_up reports
 * CHAT_CLIENT_EV_CONNECTED; chat_conn_lost (after chat_conn_close) reports
 * CHAT_CLIENT_EV_DISCONNECTED with why (may be NULL) or the broker's reason,
 * and schedules the next attempt if wanted. */
void chat_conn_failed(chat_conn *cn, int code, const char *text);
void chat_conn_up(chat_conn *cn);
void chat_conn_server_disconnect(chat_conn *cn, int code, const char *text);
void chat_conn_lost(chat_conn *cn, const char *why);

/* Starts our DISCONNECT (waiting at most timeout_ms for in-flight
 * messages): CONN_CLOSING. False when Paho refused: close at once. */
bool chat_conn_disconnect(chat_conn *cn, int timeout_ms);

/* Destroys the handle: CONN_IDLE. */
void chat_conn_close(chat_conn *cn);

/* Starts the attempt that is due, if any. */
void chat_conn_tick(chat_conn *cn, int64_t now);

/* The earlier of t and when the next attempt is due. */
int64_t chat_conn_next_wake(const chat_conn *cn, int64_t t);

#endif
