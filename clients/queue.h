/* queue: the dispatcher's inbox, and the calls that travel through it.
 *
 * Purpose: the public API and Paho's callbacks hand work to the dispatcher
 * thread only through here: events in a queue under one mutex, which the
 * dispatcher sleeps on. A call (what an API function asks) travels in an
 * event; a blocking one comes back done to the thread that waits for it.
 *
 * Ownership: an event belongs to the queue until chat_queue_pop hands it to
 * the dispatcher, which frees it with chat_event_free (not its call). A call
 * belongs to the thread that waits for it, or to the dispatcher once the
 * waiter gave up (abandoned) or when nobody waits (listen, send):
 * chat_queue_finish frees it then.
 *
 * Threading: any thread, except struct chat_calls (the calls the dispatcher
 * works on), which is the dispatcher's alone. The mutex is never held while
 * Paho or the application is called: Paho may hold its own lock while it
 * calls us.
 */
#ifndef CHAT_CLIENT_QUEUE_H
#define CHAT_CLIENT_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "chat_client.h"
#include "chat_proto.h"

#define CHAT_REASON_MAX 512 /* bytes of an error text, NUL included */

/* ---------------------------------------------------------------------------
 * Calls: what the public API asks of the dispatcher
 * ------------------------------------------------------------------------- */

enum call_op {
    CALL_CONNECT,
    CALL_DISCONNECT,
    CALL_LISTEN,
    CALL_SEND,
    CALL_FLUSH,
    CALL_REQUEST,
    CALL_READ
};

struct call {
    struct call *next; /* in the dispatcher's struct chat_calls */
    enum call_op op;
    bool waited;                      /* a thread waits for done */
    bool abandoned;                   /* the waiter gave up: the dispatcher frees the call */
    bool done;                        /* finished: err, reason and the results are set */
    int64_t deadline;                 /* monotonic ms after which the dispatcher gives up */
    int timeout_ms;                   /* CONNECT: Paho's connect timeout */
    char *group;                      /* LISTEN, SEND, REQUEST (NULL for sync), READ */
    uint64_t id;                      /* READ: read up to this id */
    char *payload;                    /* SEND: the JSON message; REQUEST: one command object */
    const char *command;              /* REQUEST: the command's name (static, or name) */
    char name[48];                    /* REQUEST: a command's name chosen by the caller */
    char cid[CHAT_PROTO_CID_MAX + 1]; /* SEND */
    chat_client_err err;
    char reason[CHAT_REASON_MAX];
    cJSON *entry; /* REQUEST: the response entry, owned by the call */
    char **texts; /* REQUEST (fetch, history): each message of the entry as the payload
                     held it (malloc'd, NUL-terminated), when it could be cut out */
    size_t *lens; /* ... their lengths */
    size_t ntexts;
    size_t refused; /* FLUSH */
};

/* A zeroed call of op, or NULL when out of memory. */
struct call *chat_call_new(enum call_op op);

/* Frees a call and what it owns. Accepts NULL. */
void chat_call_free(struct call *call);

/* ---------------------------------------------------------------------------
 * Events
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

/* A zeroed event of kind about connection epoch, or NULL. */
struct event *chat_event_new(enum ev_kind kind, uint32_t epoch);

/* Frees an event and what it owns (not call). Accepts NULL. */
void chat_event_free(struct event *ev);

/* ---------------------------------------------------------------------------
 * The queue
 * ------------------------------------------------------------------------- */

struct chat_queue {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the dispatcher sleeps on it */
    pthread_cond_t done; /* callers wait on it for their calls */
    bool ready;          /* mu and the condition variables are initialised */
    struct event *head, *tail;
    bool stopping;  /* the dispatcher must return */
    bool lost_news; /* a Paho callback could not queue (out of memory) */
};

/* Initialises q (zeroed before). Returns false when pthreads refuse. */
bool chat_queue_init(struct chat_queue *q);

/* Finishes the calls still queued with CHAT_CLIENT_ERR_CLOSED, frees the
 * events and the synchronisation. Nobody may post any more. */
void chat_queue_destroy(struct chat_queue *q);

/* Queues ev (taken) and wakes the dispatcher. */
void chat_queue_post(struct chat_queue *q, struct event *ev);

/* Notes that news was lost (an event could not be allocated). */
void chat_queue_post_lost(struct chat_queue *q);

/* Hands call to the dispatcher in an event, with deadline now +
 * timeout_ms; a waited call is waited for with chat_queue_wait. Returns
 * false when out of memory (call is not taken). */
bool chat_queue_post_call(struct chat_queue *q, struct call *call, int timeout_ms);

/* Dispatcher: waits until an event comes, the monotonic time wake passes or
 * the queue is stopped. Returns false when stopped; else *ev is the next
 * event (NULL if none) and *lost_news says whether news was lost since the
 * last pop. */
bool chat_queue_pop(struct chat_queue *q, int64_t wake, struct event **ev, bool *lost_news);

/* Makes chat_queue_pop return false from now on. */
void chat_queue_stop(struct chat_queue *q);

/* Marks call done with err and reason (may be NULL) and wakes its waiter,
 * or frees it if abandoned or unwaited. */
void chat_queue_finish(struct chat_queue *q, struct call *call, chat_client_err err,
                       const char *reason);

/* Waits until call is done or the monotonic time until passes. Returns
 * true when done (the caller reads and frees it); otherwise marks it
 * abandoned (the dispatcher frees it) and returns false. */
bool chat_queue_wait(struct chat_queue *q, struct call *call, int64_t until);

/* ---------------------------------------------------------------------------
 * Calls in progress (dispatcher only): connect, disconnect and flush calls
 * that wait for something to happen
 * ------------------------------------------------------------------------- */

struct chat_calls {
    struct call *head;
};

/* Adds call (taken). */
void chat_calls_add(struct chat_calls *l, struct call *call);

/* Removes call, which is in l. */
void chat_calls_remove(struct chat_calls *l, struct call *call);

/* True when a call of op is in l. */
bool chat_calls_any(const struct chat_calls *l, enum call_op op);

/* Finishes every call of op in l with err and why (may be NULL). */
void chat_calls_finish(struct chat_queue *q, struct chat_calls *l, enum call_op op,
                       chat_client_err err, const char *why);

/* Finishes every call in l with err. */
void chat_calls_finish_all(struct chat_queue *q, struct chat_calls *l, chat_client_err err);

#endif
