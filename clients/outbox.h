/* outbox: the messages sent and not yet acknowledged by the broker, and
 * their admission from the application's threads (max_outbox, fresh cids).
 *
 * Invariant: an entry leaves the outbox only when the broker acknowledged
 * it (or refused it): after a reconnect everything left is sent again, with
 * the same cid, in the original order. At most MAX_INFLIGHT entries wait
 * for their PUBACK at once.
 *
 * Threading: chat_outbox_admit and chat_outbox_release may run on any
 * thread (atomics); everything else on the dispatcher thread.
 */
#ifndef CHAT_CLIENT_OUTBOX_H
#define CHAT_CLIENT_OUTBOX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_proto.h"
#include "notify.h"
#include "paho.h"

/* A message sent and not yet acknowledged by the broker. */
struct outmsg {
    struct outmsg *next;
    uint64_t seq; /* identifies it in its tracked publish */
    char *group;
    char *topic;   /* <prefix>/<group> */
    char *payload; /* the JSON object with its cid */
    char cid[CHAT_PROTO_CID_MAX + 1];
    uint32_t sent_epoch; /* the connection it was last published on */
    bool pending;        /* published on the current connection, unanswered */
};

/* What an outbox works with (borrowed, read-only). */
struct chat_outbox_cfg {
    chat_paho *paho;
    const chat_notify *notify;
    const char *prefix;     /* the topic prefix */
    const char *cid_prefix; /* random, per client object */
    size_t max;             /* max_outbox */
    int qos;                /* send_qos */
};

typedef struct chat_outbox {
    struct chat_outbox_cfg cfg;

    /* Any thread. */
    atomic_size_t admitted;    /* sends admitted and not yet finished */
    atomic_uint_fast64_t cids; /* cids made so far */

    /* Dispatcher. */
    struct outmsg *head, *tail;
    size_t inflight; /* entries pending on this connection */
    uint64_t seq;
    size_t refused; /* refused sends since the last chat_outbox_take_refused */
} chat_outbox;

void chat_outbox_init(chat_outbox *ob, const struct chat_outbox_cfg *cfg);

/* Any thread: admits one more send unless max are waiting (false). An empty
 * cid gets a fresh one, "<cid_prefix>-<counter>". */
bool chat_outbox_admit(chat_outbox *ob, char cid[CHAT_PROTO_CID_MAX + 1]);

/* Any thread: undoes an admission whose send did not reach the outbox. */
void chat_outbox_release(chat_outbox *ob);

/* Appends an admitted message: group and payload (a JSON object with cid in
 * it) are taken, also on failure. Returns false when out of memory (the
 * admission is released and the failure reported). */
bool chat_outbox_add(chat_outbox *ob, char *group, char *payload, const char *cid);

/* Publishes entries not yet sent on this connection, in order, while fewer
 * than MAX_INFLIGHT wait. */
void chat_outbox_pump(chat_outbox *ob);

/* The tracked publish of entry seq finished (ok, or code: Paho's or the
 * broker's reason); more entries go out. */
void chat_outbox_done(chat_outbox *ob, uint64_t seq, bool ok, int code);

/* The connection ended: pending entries go again on the next one. */
void chat_outbox_connection_ended(chat_outbox *ob);

/* True when no message waits. */
bool chat_outbox_empty(const chat_outbox *ob);

/* Counts a refusal the plugin reported in an error entry (MQTT 3.1.1). */
void chat_outbox_count_refused(chat_outbox *ob);

/* The refusals counted since the last call (a flush's result). */
size_t chat_outbox_take_refused(chat_outbox *ob);

/* Frees every entry (after the dispatcher stopped). */
void chat_outbox_free(chat_outbox *ob);

#endif
