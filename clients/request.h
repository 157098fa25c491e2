/* request: the requests outstanding on $CONTROL/chat/v1, each with one
 * command, and the answers they wait for.
 *
 * Invariant: every sending of a request carries a correlationData never
 * used before, which the plugin says back in the command's entry (answer,
 * page or error alike, docs/protocol.md "Requests"): an entry answers the
 * sent request with that correlationData, or nothing, over MQTT 3.1.1 and 5
 * alike. Entries without one (refused publishes, subscribes and acks,
 * replay pages) answer no request. A request whose answer does not come is
 * given up: a caller's at its deadline, an internal one after
 * request_timeout_ms. When the connection ends, callers' requests wait to
 * be sent again and internal ones are dropped.
 *
 * Ownership: a request owns its strings and snapshot; its call belongs to
 * the thread waiting for it until finished (queue.h). A request taken out of
 * the list (chat_requests_take_expired, chat_requests_unlink) is the
 * caller's, freed with chat_request_free.
 *
 * Threading: the dispatcher thread only.
 */
#ifndef CHAT_CLIENT_REQUEST_H
#define CHAT_CLIENT_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "group.h"
#include "notify.h"
#include "paho.h"
#include "queue.h"

enum req_kind {
    REQ_SYNC,    /* internal: the sync after a connect or listen */
    REQ_GAP,     /* internal: a fetch to fill a gap of group */
    REQ_USER,    /* a call's request */
    REQ_BARRIER, /* a flush's ping */
    REQ_PROBE    /* internal: a ping after a refused SUBACK of group */
};

struct chat_request {
    struct chat_request *next;
    enum req_kind kind;
    const char *command;            /* the command's name, said back in its entry (command_buf) */
    char command_buf[48];           /* a copy of it: a call's name lives only as long as the call */
    char *group;                    /* the group the command names, or NULL */
    char *cmd;                      /* the command object, without correlationData */
    char corr[48];                  /* the correlationData of its last sending */
    struct call *call;              /* REQ_USER, REQ_BARRIER; NULL once finished */
    struct chat_group **snap_group; /* REQ_SYNC: known groups when it was sent ... */
    uint64_t *snap_shown;           /* ... and their shown then */
    size_t nsnap;
    bool sent; /* published on the current connection */
    int64_t sent_ms;
};

/* What the requests work with (borrowed, read-only). */
struct chat_requests_cfg {
    chat_paho *paho;
    struct chat_queue *queue;
    const chat_notify *notify;
    chat_groups *groups;
    const char *corr_prefix; /* random, per client object */
    int timeout_ms;          /* request_timeout_ms: internal requests are given up after it */
};

typedef struct chat_requests {
    struct chat_requests_cfg cfg;
    struct chat_request *head, *tail; /* outstanding */
    uint64_t seq;                     /* sendings so far */
} chat_requests;

void chat_requests_init(chat_requests *rq, const struct chat_requests_cfg *cfg);

/* Creates a request for one command (cmd, a JSON object text named
 * command; group may be NULL), appends it and sends it if connected.
 * Returns NULL when out of memory. */
struct chat_request *chat_requests_new(chat_requests *rq, enum req_kind kind, const char *command,
                                       const char *group, const char *cmd, struct call *call);

/* A request whose answer alone matters (REQ_BARRIER, REQ_PROBE): the
 * plugin answers it after the error entries of everything that came before
 * it. NULL when out of memory. */
struct chat_request *chat_requests_ping(chat_requests *rq, enum req_kind kind, const char *group,
                                        struct call *call);

/* Sends `sync` without replay for cursors and heads, remembering what each
 * known group had shown (when connected; errors reported). */
void chat_requests_sync(chat_requests *rq);

/* Fetches the messages after g's shown (a gap no replay filled); g is
 * fetching while it is outstanding. */
void chat_requests_gap_fetch(chat_requests *rq, struct chat_group *g);

/* What g had shown when sync request r was sent (0 if unknown then). */
uint64_t chat_request_shown_when_sent(const struct chat_request *r, const struct chat_group *g);

/* The sent request whose correlationData is corr, or NULL. */
struct chat_request *chat_requests_find(const chat_requests *rq, const char *corr);

/* Takes r out of the list (the caller's now). */
void chat_requests_unlink(chat_requests *rq, struct chat_request *r);

/* Frees a request taken out of the list. Accepts NULL. */
void chat_request_free(struct chat_request *r);

/* The connection is up: sends the requests waiting for it. */
void chat_requests_connected(chat_requests *rq);

/* The connection ended: callers' requests wait to be sent again, except a
 * flush's, whose call goes back to calls (it waits for the outbox first);
 * internal ones are dropped. */
void chat_requests_connection_ended(chat_requests *rq, struct chat_calls *calls);

/* Finishes the requests whose caller's deadline passed with a timeout (a
 * late answer then matches nothing). */
void chat_requests_expire_calls(chat_requests *rq, int64_t now);

/* Takes out one internal request unanswered for request_timeout_ms (its
 * answer was lost), or returns NULL. */
struct chat_request *chat_requests_take_expired(chat_requests *rq, int64_t now);

/* Drops every request, finishing their calls with CHAT_CLIENT_ERR_CLOSED. */
void chat_requests_free(chat_requests *rq);

#endif
