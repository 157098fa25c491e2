/* dispatch: the client object, made of the library's modules, and its
 * dispatcher thread, which turns what Paho receives and what the API asks
 * into work for them.
 *
 * Design. Paho's callbacks and the public API only queue events (queue.h);
 * this one thread pops them and is the only one to touch the modules'
 * state, to call Paho (besides create and destroy) and to call the
 * application. So the ordering logic needs no locks, and nothing the
 * application or the state file does can stall Paho's thread. Each module
 * owns its part of the state (its sub-struct here); the dispatcher does what
 * one event means for several of them (a connect resubscribes, syncs and
 * resends), and only it, chat_client.c and api.c see the whole object.
 *
 * Calls flow one way (no file calls back into one that calls it):
 *   chat_client.c, commands.c -> api.c -> queue.c
 *   chat_client.c -> dispatch.c (the thread) and every module's init
 *   dispatch.c -> response.c -> request.c, delivery.c, outbox.c, receipts.c
 *   dispatch.c -> conn.c; request.c, delivery.c, outbox.c, receipts.c, conn.c -> paho.c
 *   paho.c -> queue.c -> clock.c
 * and below them all: group.c (-> seq.c, state.c), proto.c, notify.c,
 * clock.c, which call nothing of the library.
 *
 * Threading: fields marked "shared" are safe from any thread (their module
 * says how); the rest belong to the dispatcher thread, and to
 * chat_client_create before it starts and chat_client_destroy after it
 * stopped.
 */
#ifndef CHAT_CLIENT_DISPATCH_H
#define CHAT_CLIENT_DISPATCH_H

#include <pthread.h>
#include <stdbool.h>

#include "chat_client.h"
#include "conn.h"
#include "delivery.h"
#include "group.h"
#include "notify.h"
#include "outbox.h"
#include "paho.h"
#include "queue.h"
#include "receipts.h"
#include "request.h"
#include "response.h"
#include "state.h"

struct chat_client {
    /* Options (copied; read-only after create). */
    char *host;
    char *client_id;
    char *username;
    char *password;
    char *prefix;
    char *state_path;
    char *uri; /* tcp://host:port */
    int request_timeout_ms;
    int gap_timeout_ms;
    char rand_prefix[24]; /* 16 random hex digits, per client object: cids, correlationData */

    pthread_t thread; /* the dispatcher */
    bool thread_started;

    struct chat_queue queue; /* shared: the way in for the API and Paho */
    chat_outbox outbox;      /* admission shared; the rest the dispatcher's */
    chat_notify notify;
    chat_paho paho;
    chat_conn conn;
    chat_state *state; /* or NULL */
    chat_groups groups;
    chat_delivery delivery;
    chat_receipts receipts;
    chat_requests requests;
    chat_responses responses;
    struct chat_calls calls; /* connect, disconnect and flush calls in progress */
};

/* The dispatcher thread's body; arg is the chat_client. */
void *chat_dispatch_main(void *arg);

/* Frees what the dispatcher owns (after it stopped, or before it started),
 * finishing the calls still in progress with CHAT_CLIENT_ERR_CLOSED. */
void chat_dispatch_free(chat_client *c);

#endif
