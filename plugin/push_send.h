/* push_send: the sender thread of push notifications. The broker's thread
 * hands it jobs (an HTTP POST of a notification, or the GET that checks a
 * UnifiedPush endpoint at registration) and takes back results at its
 * tick; the thread does everything slow: encryption (push_crypto), DNS,
 * TCP, TLS, waiting for answers, retries. Nothing here calls the broker or
 * the store, and the broker's thread never waits for the sender: a submit
 * and a take of results each hold one mutex for a list splice.
 *
 * Why a thread and not a process: the jobs are small, their results (a
 * registration to drop, a discovery answer) go back to the broker's
 * thread, and libcurl's multi interface runs many transfers on one thread
 * without blocking; a process would add a pipe protocol and a second
 * program to install and supervise, for no isolation the bounds below do
 * not already give.
 *
 * Bounds: at most queue_max jobs held (queued, waiting to retry, or in
 * flight): a submit beyond is refused and counted dropped. At most
 * PUSH_INFLIGHT transfers at once, PUSH_PER_ORIGIN to one origin (so one
 * gateway that hangs holds a quarter of the slots, not all, while the one
 * push server most devices use gets enough at once: 32 requests of 50 ms
 * round trip are 640 notifications a second), each of at most
 * PUSH_TIMEOUT_MS (discovery: PUSH_DISCOVER_TIMEOUT_MS), a request body of
 * at most PUSH_BODY_MAX bytes and an answer (headers and body) of at most
 * PUSH_ANSWER_MAX. No redirects, http and https only, no proxy from the
 * environment, and every connection's address checked (push_url_addr_ok).
 *
 * Delivery: at most once per job. A job is retried (backoff with jitter,
 * at most PUSH_ATTEMPTS attempts) after a network error, a timeout, a 5xx
 * or 408; after 429 or 503 not sooner than its Retry-After (at most
 * PUSH_RETRY_AFTER_MAX seconds: longer, the job fails); after 413 once
 * without the message body, when the job has a lean version. 404 and 410
 * (and a Matrix gateway's "rejected" naming the job's pushkey) fail the job
 * and report the registration gone. Jobs held when the broker stops (or
 * dies) are lost: see docs/protocol.md, Push notifications.
 *
 * Ownership: push_sender_create/push_sender_destroy are a pair; a job
 * passes to the sender at submit; results pass to the caller, freed with
 * push_result_free.
 */
#ifndef CHAT_PUSH_SEND_H
#define CHAT_PUSH_SEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "push_crypto.h"
#include "push_reg.h"

#define PUSH_INFLIGHT 128
#define PUSH_PER_ORIGIN 32
#define PUSH_TIMEOUT_MS 10000
#define PUSH_CONNECT_TIMEOUT_MS 5000
#define PUSH_DISCOVER_TIMEOUT_MS 5000
#define PUSH_BODY_MAX 4096u    /* a UnifiedPush message's bound, encrypted */
#define PUSH_ANSWER_MAX 16384u /* headers and body of an answer */
#define PUSH_ATTEMPTS 4
#define PUSH_RETRY_AFTER_MAX 600 /* seconds */

enum push_job_kind {
    PUSH_JOB_NOTIFY = 0, /* POST body to url */
    PUSH_JOB_DISCOVER    /* GET url: does it answer {"unifiedpush":{"version":1}}? */
};

/* One job. The caller fills what its kind needs, every string malloc'd
 * (push_job_free frees them), and hands it to push_sender_submit. A
 * notification comes as its note and the registration's stored bytes: the
 * sender thread reads the registration and builds the request (URL, body,
 * encryption), so that the broker's thread only copies a few strings. */
struct push_job {
    enum push_job_kind kind;
    /* NOTIFY, from the broker's thread: */
    char *group, *from, *text; /* the note (text: push_body, or NULL) */
    uint64_t id, unread;
    /* Who the result concerns: */
    char *member, *device;
    char *reg; /* the registration's stored bytes (NOTIFY; and to remove only that one) */
    size_t reg_len;
    uint64_t token; /* DISCOVER: the caller's id of the pending registration */
    /* DISCOVER from the broker's thread; NOTIFY made by the sender: */
    char *url;     /* normal form (push_url_normalize) */
    bool loopback; /* url names a loopback address: connecting there is allowed */
    /* The sender's own: the request (NOTIFY) */
    char *body; /* the notification (plaintext) */
    size_t body_len;
    char *lean; /* the same without the message's text, for a 413; NULL: none */
    size_t lean_len;
    bool encrypt; /* RFC 8291 with the two keys below */
    uint8_t p256dh[PUSH_KEY_LEN];
    uint8_t auth[PUSH_AUTH_LEN];
    char *pushkey; /* Matrix: the pushkey to look for in "rejected"; NULL: not Matrix */
    char *origin;  /* of url (push_url_origin), made once */
    int attempts;
    int64_t not_before_ms;
    bool use_lean;
    struct push_job *next;
};

/* What the broker's thread learns from a job. */
enum push_result_kind {
    PUSH_RESULT_GONE = 0,  /* 404, 410 or rejected: remove the registration */
    PUSH_RESULT_DISCOVERED /* a DISCOVER job ended: ok says how */
};

struct push_result {
    enum push_result_kind kind;
    bool ok;
    int status; /* the HTTP status (0: none, a transport error) */
    uint64_t token;
    char *member, *device, *reg;
    size_t reg_len;
    char why[128]; /* for the log and the client */
    struct push_result *next;
};

/* Figures of the sender, since it started (queued: held now). */
struct push_send_stats {
    uint64_t sent, failed, dropped, queued, retried;
};

typedef struct push_sender push_sender;

/* Starts the thread, holding at most queue_max jobs, building requests
 * with opts (webhooks, push_body), which must not change or go while the
 * sender runs. NULL on failure (no memory, no thread, libcurl refused), with
 * why in err (cap bytes). curl_global_init must have run (the plugin's init
 * does it). */
push_sender *push_sender_create(size_t queue_max, const struct push_opts *opts, char *err,
                                size_t cap);

/* Stops the thread (transfers in flight are cut) and frees every job and
 * result left. Accepts NULL. */
void push_sender_destroy(push_sender *s);

/* Hands job over (the sender owns it from now, whatever it returns).
 * Returns false, having freed it and counted it dropped, when queue_max
 * jobs are held already. */
bool push_sender_submit(push_sender *s, struct push_job *job);

/* Takes every result so far, oldest first, as a list the caller frees
 * with push_result_free (one by one, or the whole list); NULL when none. */
struct push_result *push_sender_results(push_sender *s);

void push_sender_stats(push_sender *s, struct push_send_stats *out);

/* Counts a notification dropped before it reached the sender (the
 * caller's own bounds), so that the figures hold every one. */
void push_sender_count_dropped(push_sender *s);

/* Message id of group was recalled or edited: notifications of it that
 * the sender holds go out without its text (their lean version) from now
 * on, those not prepared yet at once, those waiting (to start, or to be
 * retried) when they next start; one already on the wire is not stopped.
 * The sender remembers the last PUSH_WITHDRAWN_MAX such messages. */
void push_sender_withdraw(push_sender *s, const char *group, uint64_t id);

#define PUSH_WITHDRAWN_MAX 1024u

/* Frees a job or a result and everything it owns (not its next). Accept
 * NULL. */
void push_job_free(struct push_job *job);
void push_result_free(struct push_result *r);

/* The origin of a URL in normal form, "scheme://host[:port]", copied into
 * out (cap bytes): what PUSH_PER_ORIGIN counts by. */
void push_url_origin(const char *url, char *out, size_t cap);

#endif
