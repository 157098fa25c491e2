/* group: the groups a client listens to or has state for, each with what
 * the other modules keep about it: its sequencer (seq.h) and head for
 * delivery, its ack and gap timers, its catch-up counters.
 *
 * Ownership: a group lives as long as the client (other modules keep
 * pointers to it); chat_groups_free frees them all. A group is plain data
 * shared by the modules of the dispatcher thread: delivery moves its
 * sequencer, head, acks and catch-up; request and response its fetching and
 * refusal; the dispatcher its listening.
 *
 * Threading: the dispatcher thread only (and chat_client_create and
 * destroy when it does not run).
 */
#ifndef CHAT_CLIENT_GROUP_H
#define CHAT_CLIENT_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_client.h"
#include "seq.h"
#include "state.h"

struct chat_group {
    struct chat_group *next;
    char *name;
    bool listening;      /* the application listens: subscribe on every connect */
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
    uint64_t recorded;   /* with a state file: how far the cursor may go (what the file holds,
                            or the server's cursor at a baseline) */
    uint64_t read_want;  /* the highest id the application read (chat_client_read) */
    uint64_t read_sent;  /* the highest read published on this connection */
    uint64_t read_done;  /* the highest read the broker acknowledged */
    int64_t read_last;   /* when a read of this group was last published (ms) */
};

typedef struct chat_groups {
    struct chat_group *head;
    size_t max_held; /* the max_held option: messages held ahead of a gap */
} chat_groups;

/* The group named name, or NULL. */
struct chat_group *chat_groups_find(const chat_groups *gs, const char *name);

/* The group named name, created if new (nothing known: everything is held
 * until a baseline); NULL when out of memory. */
struct chat_group *chat_groups_get(chat_groups *gs, const char *name);

/* Sets up a group per state file entry, its baseline the id recorded.
 * Returns CHAT_CLIENT_ERR_NOMEM or OK. */
chat_client_err chat_groups_load(chat_groups *gs, const chat_state *st);

/* Frees every group. */
void chat_groups_free(chat_groups *gs);

/* A listened group known well enough to be behind: ids above shown exist. */
bool chat_group_behind(const struct chat_group *g);

/* Notes that ids up to head exist; a gap that opens now starts its clock. */
void chat_group_raise_head(struct chat_group *g, uint64_t head);

/* Forgets what g held and starts it over after base (its history was
 * replaced). */
void chat_group_rebase(chat_groups *gs, struct chat_group *g, uint64_t base);

#endif
