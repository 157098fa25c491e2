/* paho: the client library's glue to Paho MQTTAsync: one MQTTAsync handle
 * per connection, callbacks that only copy what Paho hands over into events
 * for the dispatcher (queue.h), and the operations the dispatcher starts,
 * with the ones whose completion matters tracked by token.
 *
 * Why a handle per connection rather than Paho's automatic reconnect: Paho
 * keeps commands it had not written yet across a reconnect and sends them
 * first, while it fails the ones in flight, so a sender's messages would be
 * stored out of order and requests sent twice; it also retries only on a
 * 3-second tick. Destroying the handle when its connection ends drops
 * everything of that connection at once (the tracked operations too); the
 * other modules resend what is unacknowledged, in order, on the next one.
 *
 * Epochs: each handle gets the next epoch, and so does its closing; every
 * event carries the epoch of the handle it is about, so news from a finished
 * connection is recognised (chat_paho_epoch is the current one).
 *
 * Threading: the functions run on the dispatcher thread (and in create and
 * destroy when it does not run). Paho runs the callbacks on its threads
 * holding its own lock; they only post to the queue and never call Paho.
 * MQTTAsync_destroy takes Paho's lock, so no callback of a handle runs after
 * its destroy returned.
 */
#ifndef CHAT_CLIENT_PAHO_H
#define CHAT_CLIENT_PAHO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <MQTTAsync.h>

#include "queue.h"

/* An operation whose completion matters, and to whom: EV_DONE brings its
 * token back, chat_paho_take the rest. */
enum chat_op_kind { CHAT_OP_MESSAGE, CHAT_OP_ACK, CHAT_OP_SUBSCRIBE, CHAT_OP_READ };

struct chat_op {
    int token;
    enum chat_op_kind kind;
    uint64_t ref; /* CHAT_OP_MESSAGE: the outbox entry's seq; CHAT_OP_READ: the id */
    void *ptr;    /* CHAT_OP_ACK, CHAT_OP_SUBSCRIBE, CHAT_OP_READ: the group */
};

struct chat_paho_ctx; /* the context of one handle's callbacks */

/* How to connect (borrowed from the client, read-only). */
struct chat_paho_cfg {
    struct chat_queue *queue; /* where the callbacks post */
    const char *uri;          /* tcp://host:port */
    const char *client_id;
    const char *username; /* or NULL */
    const char *password; /* or NULL */
    int version;          /* 4 or 5 */
    int keepalive_s;
};

typedef struct chat_paho {
    struct chat_paho_cfg cfg;
    MQTTAsync mqtt;            /* the current handle, or NULL */
    struct chat_paho_ctx *ctx; /* its callbacks' context */
    uint32_t epoch;            /* the current handle's, or the last closed one's */
    bool up;                   /* the dispatcher saw the current handle connect */
    struct chat_op *ops;       /* tracked operations of the current handle */
    size_t nops, cap_ops;
} chat_paho;

/* Sets p up, without a handle. */
void chat_paho_init(chat_paho *p, const struct chat_paho_cfg *cfg);

/* Creates the next handle (a new epoch) and starts connecting, Paho's
 * connect timeout from timeout_ms. Returns Paho's code; on failure the
 * caller still calls chat_paho_close. */
int chat_paho_open(chat_paho *p, int timeout_ms);

/* Records whether the current handle may carry publishes and subscribes:
 * true once EV_CONNECTED came, false again when our DISCONNECT starts (and
 * at close). */
void chat_paho_set_up(chat_paho *p, bool up);

/* What chat_paho_set_up said last: the other modules send only then. */
bool chat_paho_up(const chat_paho *p);

/* True when Paho says the current handle is connected. */
bool chat_paho_connected(const chat_paho *p);

/* The epoch of the current handle; events of other epochs are stale. */
uint32_t chat_paho_epoch(const chat_paho *p);

/* Destroys the current handle, if any (its pending callbacks run first,
 * queueing events of its epoch), forgets its tracked operations and moves
 * to a new epoch. */
void chat_paho_close(chat_paho *p);

/* Frees what p owns (after close). */
void chat_paho_free(chat_paho *p);

/* Starts a DISCONNECT that waits at most timeout_ms for in-flight messages;
 * EV_DISCONNECTED follows. Paho's code. */
int chat_paho_disconnect(chat_paho *p, int timeout_ms);

/* Publishes len bytes to topic. With track (NULL: untracked), EV_DONE
 * reports its completion and chat_paho_take gives track back. Returns
 * Paho's code (MQTTASYNC_DISCONNECTED without a handle). */
int chat_paho_publish(chat_paho *p, const char *topic, const void *payload, size_t len, int qos,
                      const struct chat_op *track);

/* Subscribes to topic; EV_DONE reports the SUBACK of track. */
int chat_paho_subscribe(chat_paho *p, const char *topic, int qos, const struct chat_op *track);

/* Removes the tracked operation with token into *out; false if none (not
 * tracked, or of a closed handle). */
bool chat_paho_take(chat_paho *p, int token, struct chat_op *out);

#endif
