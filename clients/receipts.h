/* receipts: read markers and presence on the client side (protocol v1.1):
 * the reads the application marks (chat_client_read), coalesced per group
 * and published on <prefix>/<group>/read, and the `reads` and `presence`
 * entries the plugin pushes for the subscribed groups, handed to the
 * application as events.
 *
 * Invariants per group, by name:
 *   read-not-past-shown: read_done <= read_want, and nothing above
 *      read_want is published; for a listened group nothing above what was
 *      shown either (the read acks the device: its cursor must not pass what
 *      the application saw, see delivery.h, state-before-ack).
 *   read-interval: A read is published at once when none went out in the
 *      last interval_ms, else when that interval is over: at most one per
 *      interval per group, like acks.
 *   read-resent: After a reconnect, a read the broker did not acknowledge
 *      goes again (reads are idempotent: the marker only moves forward).
 *
 * Threading: the dispatcher thread only.
 */
#ifndef CHAT_CLIENT_RECEIPTS_H
#define CHAT_CLIENT_RECEIPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "group.h"
#include "notify.h"
#include "paho.h"

/* What the receipts work with (borrowed, read-only). */
struct chat_receipts_cfg {
    chat_groups *groups;
    chat_paho *paho;
    const chat_notify *notify;
    const char *prefix; /* the topic prefix */
    int interval_ms;    /* ack_interval_ms: reads per group at most this often */
    bool state;         /* a state file: reads of listened groups wait for it */
};

typedef struct chat_receipts {
    struct chat_receipts_cfg cfg;
    size_t inflight; /* reads published and not yet acknowledged by the broker */
} chat_receipts;

void chat_receipts_init(chat_receipts *r, const struct chat_receipts_cfg *cfg);

/* The application read g up to id: publishes it now or when due. */
void chat_receipts_want(chat_receipts *r, struct chat_group *g, uint64_t id);

/* Publishes the reads that are due (the interval is over, or what was
 * held back until shown is shown now). */
void chat_receipts_tick(chat_receipts *r, int64_t now);

/* The earlier of t and when the next read is due. */
int64_t chat_receipts_next_wake(const chat_receipts *r, int64_t t);

/* Publishes every pending read at once (before a disconnect). */
void chat_receipts_flush(chat_receipts *r);

/* A tracked read of g up to id finished (ok: the broker took it). */
void chat_receipts_done(chat_receipts *r, struct chat_group *g, uint64_t id, bool ok);

/* The connection ended: nothing is in flight, and what was not
 * acknowledged goes again on the next one (read-resent). */
void chat_receipts_connection_ended(chat_receipts *r);

/* A pushed entry (command "reads" or "presence", no correlationData):
 * one CHAT_CLIENT_EV_READ per marker, one CHAT_CLIENT_EV_PRESENCE per name
 * that came or went. */
void chat_receipts_push(const chat_receipts *r, const cJSON *entry);

#endif
