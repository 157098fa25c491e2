/* client.h: private header of the client library: the chat_client object
 * shared by the public API (chat_client.c), the dispatcher thread
 * (dispatch.c), the Paho glue (paho.c) and the protocol helpers (proto.c).
 *
 * Threading: fields under "shared" are guarded by mu; fields under
 * "dispatcher" belong to the dispatcher thread alone (and to
 * chat_client_create before it starts, and chat_client_destroy after it
 * stopped). Nobody calls Paho while holding mu: Paho may hold its own lock
 * while it calls us, and our callbacks take mu.
 *
 * Ownership: an event belongs to the queue until the dispatcher pops it; a
 * call belongs to the thread that waits for it, or to the dispatcher once the
 * waiter gave up (abandoned) or when nobody waits (sends).
 */
#ifndef CHAT_CLIENT_INTERNAL_H
#define CHAT_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <MQTTAsync.h>
#include <cjson/cJSON.h>

#include "chat_client.h"
#include "chat_proto.h"
#include "seq.h"
#include "state.h"

#define CHAT_CONTROL_TOPIC CHAT_PROTO_CONTROL_TOPIC
#define CHAT_RESPONSE_TOPIC CHAT_PROTO_RESPONSE_TOPIC
#define CHAT_GROUP_MAX CHAT_PROTO_GROUP_MAX
#define CHAT_CID_MAX CHAT_PROTO_CID_MAX
#define REASON_MAX 512 /* bytes of an error text, NUL included */

/* ---------------------------------------------------------------------------
 * Calls: what the public API asks of the dispatcher
 * ------------------------------------------------------------------------- */

enum call_op { CALL_CONNECT, CALL_DISCONNECT, CALL_LISTEN, CALL_SEND, CALL_FLUSH, CALL_REQUEST };

struct call {
    struct call *next; /* in the dispatcher's list of calls it works on */
    enum call_op op;
    bool waited;                /* a thread waits for done */
    bool abandoned;             /* the waiter gave up: the dispatcher frees the call */
    bool done;                  /* finished: err, reason and the results are set */
    int64_t deadline;           /* monotonic ms after which the dispatcher gives up */
    int timeout_ms;             /* CONNECT: Paho's connect timeout; DISCONNECT: ack wait */
    char *group;                /* LISTEN, SEND, REQUEST (NULL for sync) */
    char *payload;              /* SEND: the JSON message; REQUEST: one command object */
    const char *command;        /* REQUEST: the command's name (a static string) */
    char cid[CHAT_CID_MAX + 1]; /* SEND */
    bool barrier_sent;          /* FLUSH: the outbox drained and the barrier went out */
    chat_client_err err;
    char reason[REASON_MAX];
    cJSON *entry;   /* REQUEST: the response entry, owned by the call */
    size_t refused; /* FLUSH */
};

/* Frees a call and what it owns. Accepts NULL. */
void chat_call_free(struct call *call);

/* ---------------------------------------------------------------------------
 * Events: the dispatcher's queue
 * ------------------------------------------------------------------------- */

enum ev_kind {
    EV_CALL,              /* call: from the API */
    EV_MESSAGE,           /* Paho: topic, payload */
    EV_CONNECTED,         /* Paho: the connect of epoch succeeded */
    EV_CONNECT_FAILED,    /* Paho: the connect of epoch failed: code, text */
    EV_SERVER_DISCONNECT, /* Paho: the broker's DISCONNECT (MQTT 5) on epoch: code, text */
    EV_CONN_LOST,         /* Paho: the connection of epoch broke */
    EV_DISCONNECTED,      /* Paho: our DISCONNECT of epoch went out (or failed) */
    EV_DONE               /* Paho: the publish or subscribe token of epoch finished: ok, code */
};

struct event {
    struct event *next;
    enum ev_kind kind;
    uint32_t epoch;    /* the connection it is about (not EV_CALL) */
    struct call *call; /* EV_CALL */
    char *topic;       /* EV_MESSAGE */
    char *payload;     /* EV_MESSAGE: len bytes plus a NUL */
    size_t len;
    int token;  /* EV_DONE */
    bool ok;    /* EV_DONE */
    int code;   /* EV_DONE: Paho code or MQTT 5 reason; EV_CONNECT_FAILED; EV_SERVER_DISCONNECT */
    char *text; /* EV_CONNECT_FAILED, EV_CONN_LOST: Paho's message; EV_SERVER_DISCONNECT: the
                   broker's Reason String; or NULL */
};

/* Frees an event and what it owns (not call). Accepts NULL. */
void chat_event_free(struct event *ev);

/* ---------------------------------------------------------------------------
 * Dispatcher state
 * ------------------------------------------------------------------------- */

/* The context of one MQTTAsync handle's callbacks (paho.c). */
struct chat_conn {
    struct chat_client *c;
    uint32_t epoch;
};

/* A publish or subscribe whose completion matters, by Paho token, on the
 * current connection. */
enum pend_kind { PEND_MESSAGE, PEND_ACK, PEND_SUBSCRIBE };

struct pend {
    int token;
    enum pend_kind kind;
    uint64_t ref;    /* PEND_MESSAGE: the outbox entry's seq */
    struct group *g; /* PEND_ACK, PEND_SUBSCRIBE */
};

/* A group the client listens to or has state for (never freed before the
 * client). */
struct group {
    struct group *next;
    char *name;
    bool listening;      /* the application listens: subscribe on every connect */
    bool subscribed;     /* granted on the current connection */
    chat_seq seq;        /* shown, and messages held ahead of a gap */
    uint64_t head;       /* highest id known to exist */
    uint64_t min_first;  /* before the baseline: lowest replay `first` seen, 0 none */
    uint64_t acked;      /* highest ack published on this connection */
    size_t unacked;      /* messages shown since the last ack */
    int64_t ack_due;     /* when the pending ack must go (ms), 0: none */
    int64_t progress_ms; /* when shown last moved or the wait last restarted */
    bool fetching;       /* a gap fetch is outstanding */
    bool catching_up;    /* a catch-up runs: counting pages and messages */
    char *refusal;       /* the plugin's reason for refusing the subscription */
    uint64_t cu_pages;   /* pages and fetches applied in this catch-up */
    uint64_t cu_msgs;    /* messages shown in this catch-up */
};

/* A message sent and not yet acknowledged by the broker. */
struct outmsg {
    struct outmsg *next;
    uint64_t seq; /* identifies it in c->pend */
    char *group;
    char *topic;   /* <prefix>/<group> */
    char *payload; /* the JSON object with its cid */
    char cid[CHAT_CID_MAX + 1];
    uint32_t sent_epoch; /* the connection it was last published on */
    bool pending;        /* published on the current connection, unanswered */
};

enum req_kind {
    REQ_SYNC,    /* internal: the sync after a connect or listen */
    REQ_GAP,     /* internal: a fetch to fill a gap of group */
    REQ_USER,    /* a call's request */
    REQ_BARRIER, /* a flush's ping */
    REQ_PROBE    /* internal: a ping after a refused SUBACK of group */
};

/* A request on $CONTROL/chat/v1 with one command, whose entry in the answer
 * says its correlationData back. */
struct request {
    struct request *next;
    enum req_kind kind;
    const char *command;       /* the command's name, said back in its entry */
    char *group;               /* the group the command names, or NULL */
    char *cmd;                 /* the command object, without correlationData */
    char corr[48];             /* the correlationData of its last sending */
    struct call *call;         /* REQ_USER, REQ_BARRIER; NULL once finished */
    struct group **snap_group; /* REQ_SYNC: listened groups when it was sent ... */
    uint64_t *snap_shown;      /* ... and their shown then */
    size_t nsnap;
    bool sent; /* published on the current connection */
    int64_t sent_ms;
};

/* Where the connection stands. */
enum conn_state {
    CS_IDLE,       /* no handle; reconnect_at says when to try, if wanted */
    CS_CONNECTING, /* a handle is connecting */
    CS_UP,         /* connected */
    CS_CLOSING     /* our DISCONNECT is on its way */
};

struct chat_client {
    /* Options (copied; read-only after create). */
    char *host;
    char *client_id;
    char *username;
    char *password;
    char *prefix;
    char *state_path;
    char *uri; /* tcp://host:port */
    int port;
    int mqtt_version;
    int keepalive_s;
    int reconnect_max_s;
    int send_qos;
    int listen_qos;
    size_t ack_every;
    int ack_interval_ms;
    int gap_timeout_ms;
    int request_timeout_ms;
    size_t max_outbox;
    size_t max_held;
    chat_client_message_fn *on_message;
    chat_client_event_fn *on_event;
    void *arg;

    pthread_t thread; /* the dispatcher */
    bool thread_started;
    bool sync_ready;     /* mu, wake and done are initialised */
    char cid_prefix[24]; /* random, per client object */

    /* Shared, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the dispatcher sleeps on it */
    pthread_cond_t done; /* callers wait on it for their calls */
    struct event *ev_head, *ev_tail;
    uint64_t cid_counter;
    size_t outbox_len; /* sends accepted and not yet finished */
    bool stopping;     /* destroy: the dispatcher must return */
    bool lost_news;    /* a Paho callback could not queue (out of memory) */

    /* Dispatcher (and destroy, after the dispatcher stopped). */
    MQTTAsync mqtt;         /* the current connection's handle, or NULL */
    struct chat_conn *conn; /* its callbacks' context */
    uint32_t epoch;         /* connection attempts so far: the current one's */
    enum conn_state cs;
    bool want;            /* connect was asked and no disconnect since */
    bool ever_up;         /* connected at least once since the connect call */
    int64_t reconnect_at; /* CS_IDLE and want: when to try again */
    int backoff_ms;       /* the next pause between attempts */
    int connect_timeout_ms;
    int server_reason;            /* reason code of the broker's DISCONNECT on this connection */
    char server_reason_text[256]; /* ... and its Reason String, "" if none */
    unsigned rng;                 /* rand_r state for the reconnect jitter */
    chat_state *state;
    char incarnation[65]; /* of the server's store, as last seen (also in the state file) */
    struct group *groups;
    struct outmsg *out_head, *out_tail;
    size_t inflight; /* outbox entries pending on this connection */
    uint64_t out_seq;
    struct pend *pend; /* tracked operations of this connection */
    size_t npend, cap_pend;
    struct request *req_head, *req_tail; /* outstanding, by correlationData */
    uint64_t req_seq;
    size_t acks_inflight;
    struct call *calls;   /* connect, disconnect and flush calls in progress */
    size_t refused_count; /* refused sends since the last flush */
    int64_t last_state_error_ms;
    bool halted; /* on_message refused a message: deliver nothing more */
};

/* ---------------------------------------------------------------------------
 * Shared helpers
 * ------------------------------------------------------------------------- */

/* Monotonic milliseconds. */
int64_t chat_now_ms(void);

/* Queues ev for the dispatcher and wakes it (mu must not be held). */
void chat_post(chat_client *c, struct event *ev);

/* Marks call done with err and reason (may be NULL) and wakes its waiter, or
 * frees it if abandoned or unwaited. */
void chat_call_finish(chat_client *c, struct call *call, chat_client_err err, const char *reason);

/* dispatch.c: the dispatcher thread's body; arg is the chat_client. */
void *chat_dispatch_main(void *arg);

/* dispatch.c: sets up a group per state file entry (before the dispatcher
 * starts). Returns CHAT_CLIENT_ERR_NOMEM or OK. */
chat_client_err chat_dispatch_load(chat_client *c);

/* dispatch.c: frees what the dispatcher owns (after it stopped). */
void chat_dispatch_free(chat_client *c);

/* paho.c: creates the handle of connection epoch and starts connecting
 * (Paho's connect timeout from timeout_ms). Returns Paho's code; on failure
 * the caller still calls chat_paho_close. */
int chat_paho_open(chat_client *c, uint32_t epoch, int timeout_ms);

/* paho.c: destroys the current handle, if any (its pending callbacks run
 * first, queueing events of its epoch). */
void chat_paho_close(chat_client *c);

/* paho.c: starts a DISCONNECT that waits at most timeout_ms for in-flight
 * messages; EV_DISCONNECTED follows. Paho's code. */
int chat_paho_disconnect(chat_client *c, int timeout_ms);

/* paho.c: publishes len bytes to topic. With track, EV_DONE reports the
 * completion of *token. Returns Paho's code (MQTTASYNC_DISCONNECTED without
 * a handle). */
int chat_paho_publish(chat_client *c, const char *topic, const void *payload, size_t len, int qos,
                      bool track, int *token);

/* paho.c: subscribes to topic; EV_DONE reports *token's SUBACK. */
int chat_paho_subscribe(chat_client *c, const char *topic, int qos, int *token);

/* proto.c: the integer item as a uint64 in [lo, 2^53-1] (the protocol's
 * JSON integers); false if it is missing, not a number or not such an
 * integer. */
bool chat_json_u64(const cJSON *item, uint64_t lo, uint64_t *out);

/* proto.c: fills m from an envelope object (strings owned by env; json must
 * be its printed form). Returns false when it is not a valid envelope. */
bool chat_envelope_view(const cJSON *env, const char *json, chat_client_message *m);

/* proto.c: a JSON object text being written, field by field, from
 * chat_obj o = {0}; every string goes through chat_proto_json_string. A
 * failed allocation stops the writing; chat_obj_end reports it. */
typedef struct chat_obj {
    char *text;
    size_t len, cap;
    bool failed;
} chat_obj;

/* proto.c: add "key": value (a string, an integer, true or false). */
void chat_obj_str(chat_obj *o, const char *key, const char *value);
void chat_obj_u64(chat_obj *o, const char *key, uint64_t value);
void chat_obj_bool(chat_obj *o, const char *key, bool value);

/* proto.c: closes the object and returns its text (heap memory, freed with
 * free()), or NULL when out of memory; o is empty again either way. */
char *chat_obj_end(chat_obj *o);

/* proto.c: the request {"commands":[command + "correlationData": corr]}
 * for one command object text (as chat_obj_end wrote it); heap memory freed
 * with free(), or NULL when out of memory. */
char *chat_request_text(const char *command, const char *corr);

#endif
