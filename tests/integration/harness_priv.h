/* harness_priv.h: what the files of the harness share and the tests must not
 * see: the client's state (owned by harness_client.c, which creates and frees
 * it; harness_io.c sends and receives through it) and a few helpers. */
#ifndef CHAT_HARNESS_PRIV_H
#define CHAT_HARNESS_PRIV_H

#include "harness.h"

#include <pthread.h>
#include <time.h>

#include <MQTTClient.h>

#define CLIENT_TIMEOUT_MS 10000 /* connect, subscribe, ack and room waits */
#define MAX_WAKEUPS 1000000     /* bound on condition-variable loops */
#define TOKENS 65536            /* Paho delivery tokens are 16-bit packet ids */

/* A Paho client and what its callbacks queued for the test's thread. */
struct harness_client {
    MQTTClient mc;                 /* the Paho handle */
    char id[256];                  /* client id */
    pthread_mutex_t mu;            /* guards everything below */
    pthread_cond_t cv;             /* signalled on every change below */
    harness_msg *head, *tail;      /* received messages, oldest first */
    bool lost;                     /* the connection was lost */
    bool oom;                      /* a message was dropped for lack of memory */
    char cause[256];               /* Paho's reason for the loss, if any */
    uint32_t *sent;                /* [TOKENS] QoS 1/2 publishes per token */
    uint32_t *done;                /* [TOKENS] acknowledgements per token */
    int inflight;                  /* QoS 1/2 publishes not yet acknowledged */
    int window;                    /* most inflight allowed */
    int version;                   /* 4: MQTT 3.1.1, 5: MQTT 5 */
    uint8_t *reason;               /* [TOKENS] MQTT 5: reason code of the last ack per token */
    bool dropping;                 /* destroyed or being disconnected: on_message frees and
                                      drops what still arrives */
    bool hands_off;                /* MQTT 3.1.1 being disconnected: on_message must not even
                                      read a message (see settle_deliveries) */
    bool pushes;                   /* keep pushed entries (harness_client_opts.pushes) */
    bool persistent;               /* the session outlives the connection */
    char **filters;                /* filters subscribed (granted), for settle_deliveries */
    size_t nfilters;               /* ... and how many */
    struct harness_client *buried; /* graveyard link */
};

/* Paho's description of rc, or of a CONNACK return code (1..5). Static. */
const char *harness_paho_strerror(int rc);

/* A ts_now_ms() deadline on the condition variables' clock
 * (CLOCK_MONOTONIC). */
struct timespec harness_deadline_ts(int64_t deadline_ms);

/* Fails the test, showing the JSON the complaint is about: what, then key
 * (may be NULL), then the JSON. */
_Noreturn void harness_fail_json(const cJSON *json, const char *what, const char *key);

#endif
