/* delivery: messages of the listened groups to the application, each id
 * once and in order per group, whether it came live, in a replay page or by
 * a fetch; the state file that remembers what was shown; the acks that tell
 * the plugin; and the subscriptions that bring the messages.
 *
 * Invariants, by name (see also seq.c):
 *   in-order: on_message gets an id of group g only if it is shown(g) + 1;
 *      shown(g) only grows, except when the server's history was replaced
 *      (chat_group_rebase), which is reported.
 *   state-before-ack: The state file records only messages shown
 *      (on_message returned), and is written before any ack covering them is
 *      published, so the plugin's cursor never passes the state file and a
 *      restart misses nothing. It is written at most STATE_FLUSH_MS after a
 *      message is shown, before every ack (every page, every ack_every
 *      messages), and when the dispatcher stops; a process killed between two
 *      writes shows the messages since the last one again. Should the cursor
 *      pass the file anyway (a lost state file, a power loss), `sync` reports
 *      acked > shown and a fetch from shown fills the difference: messages may
 *      show twice then, never go missing.
 *   baseline-first: A group's baseline (the id after which it starts) comes
 *      from the state file or from the plugin (`sync`'s acked, or an earlier
 *      replay page's first - 1): until then everything is held, nothing shown.
 *   halt-stops: Once on_message refused a message, nothing more is shown
 *      (halted).
 *
 * Threading: the dispatcher thread only.
 */
#ifndef CHAT_CLIENT_DELIVERY_H
#define CHAT_CLIENT_DELIVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "chat_client.h"
#include "envelope.h"
#include "group.h"
#include "notify.h"
#include "paho.h"
#include "state.h"

/* What delivery works with (borrowed, read-only). */
struct chat_delivery_cfg {
    chat_groups *groups;
    chat_paho *paho;
    const chat_notify *notify;
    chat_state *state;  /* or NULL: no state file */
    const char *prefix; /* the topic prefix */
    chat_client_message_fn *on_message;
    chat_client_commit_fn *on_commit; /* or NULL; set before the first connect */
    void *arg;
    size_t ack_every;
    int ack_interval_ms;
    int listen_qos;
};

typedef struct chat_delivery {
    struct chat_delivery_cfg cfg;
    bool halted;          /* on_message refused a message: deliver nothing more */
    size_t acks_inflight; /* acks published and not yet acknowledged by the broker */
    int64_t last_state_error_ms;
    int64_t state_due;    /* when the state file must be written next; 0: it is up to date */
    char incarnation[65]; /* of the server's store, as last seen (also in the state file) */
} chat_delivery;

void chat_delivery_init(chat_delivery *d, const struct chat_delivery_cfg *cfg);

/* Subscribes to g's topic (when connected). */
void chat_delivery_subscribe(chat_delivery *d, struct chat_group *g);

/* The connection is up: every listened group subscribes again (which starts
 * its catch-up) and its acks start over. */
void chat_delivery_connected(chat_delivery *d);

/* The connection ended: no ack or fetch is outstanding on it any more. */
void chat_delivery_connection_ended(chat_delivery *d);

/* Publishes the highest gap-free id of g as its cumulative ack (when
 * connected). */
void chat_delivery_ack(chat_delivery *d, struct chat_group *g);

/* Acks every group that showed more than it acked (before a disconnect). */
void chat_delivery_ack_all(chat_delivery *d);

/* A tracked ack finished. */
void chat_delivery_ack_done(chat_delivery *d);

/* Hands every message of g that is due to the application, in order. */
void chat_delivery_ready(chat_delivery *d, struct chat_group *g);

/* Records id as shown for g in the state (written within STATE_FLUSH_MS,
 * or before the next ack; errors reported, at most one event per period). */
void chat_delivery_record(chat_delivery *d, struct chat_group *g, uint64_t id);

/* Writes the state file now if it lags behind what was shown. */
void chat_delivery_flush(chat_delivery *d);

/* Applies a replay page or a fetch answer (entry) of g. Its messages are
 * read from msgs, their text in the payload, if msgs->text is set
 * (chat_response_cut), else from the entry's "messages" array. Returns the
 * entry's `more`. */
bool chat_delivery_page(chat_delivery *d, struct chat_group *g, const cJSON *entry,
                        const struct chat_span *msgs, bool replay);

/* Reports CHAT_CLIENT_EV_CATCHUP for g if a catch-up runs. */
void chat_delivery_catchup(chat_delivery *d, struct chat_group *g);

/* A live message on <prefix>/<name>. */
void chat_delivery_live(chat_delivery *d, const char *name, const char *payload, size_t len);

/* Records the incarnation of the server's store; true when it differs from
 * the one known before (the ids held may now name other messages). */
bool chat_delivery_incarnation(chat_delivery *d, const char *incarnation);

/* Sends the acks that are due and writes the state file when due. */
void chat_delivery_tick(chat_delivery *d, int64_t now);

/* The earlier of t and when the next ack or state write is due. */
int64_t chat_delivery_next_wake(const chat_delivery *d, int64_t t);

#endif
