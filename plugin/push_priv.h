/* push_priv.h: the push module's state, shared by push.c and push_cmd.c
 * (see push.h for the module's files and who calls whom). Everything here
 * is the broker's thread's; the sender thread has its own (push_send.c).
 *
 * Design note: what the broker's thread does for notifications.
 *   - Per stored message (chat_push_stored): one lookup of the group's
 *     entry and at most one string copy and one heap insertion: constant
 *     work, whatever the group's size (issue 23 measures groups of 10,000).
 *   - The entry keeps the window of messages not walked yet: the newest
 *     (id, from) and the newest by another sender, so that a member who
 *     sent the newest hears of the one before it, and nobody of their own.
 *   - At the tick, a group whose entry is due (push_delay after its first
 *     message, or when a member it deferred may be notified again) is
 *     walked: a page of its members at a time (chat_store_push_members
 *     hands over only those with registrations, in one statement on
 *     PostgreSQL), at most WALK_MEMBERS members and TICK_BUDGET_US per
 *     tick over all groups, one group at a time. Members are decided
 *     whole, never half of one's devices in one tick and half in the next.
 *   - A member is notified when it has a registration, no device online in
 *     the group (presence), a message in the window (or one deferred) not
 *     its own, something unread, and no notification of the group within
 *     push_interval; else, when only the interval stands in the way, the
 *     message waits in the member's mark and the group is due again when
 *     the interval ends.
 * Invariants:
 *   1. A group entry is in the heap (in_heap) exactly when it has a due
 *      time and is not being walked; the walk's end puts it back or frees
 *      it (nothing left to do).
 *   2. A mark is in the marks list (in_list) exactly while it has no
 *      pending message; the list is in order of last_ms, so the tick frees
 *      marks from its head once their interval is over. A mark with a
 *      pending message leaves the list and is freed by the walk that ends
 *      its wait, or by the group's end (cleanup).
 *   3. At most one walk is under way; its group is `walking`.
 */
#ifndef CHAT_PUSH_PRIV_H
#define CHAT_PUSH_PRIV_H

#include "push.h"
#include "push_reg.h"
#include "push_send.h"

/* One group with notifications to decide (invariant 1). */
struct pgroup {
    char *name;
    /* The window: messages stored since the last walk began. */
    uint64_t new_id, other_id; /* 0: none */
    char *new_from, *other_from;
    int64_t first_ms;    /* when the window's first message came; 0: empty */
    int64_t deferred_ms; /* when a deferred member may be notified; 0: none */
    int64_t due_ms;
    size_t heap_at;
    bool in_heap;
    bool walking;
};

/* One (member, group) notified recently (invariant 2). */
struct pmark {
    int64_t last_ms;     /* when it was last notified */
    uint64_t pending_id; /* a message waiting for the interval's end; 0: none */
    char *pending_from;  /* its sender (its text is read when it goes: it may have been
                            recalled or edited meanwhile) */
    bool in_list;
    struct pmark *prev, *next;
    size_t klen;
    char key[]; /* member NUL group */
};

/* A registration waiting for its endpoint's check (push_cmd.c). */
struct push_pending {
    uint64_t token;
    char *member, *device;
    char *corr; /* the command's correlationData, for its entry; NULL: none */
    struct push_reg reg;
    /* The held answer (chat_push_hold): every other entry, and the place of
     * this one. */
    bool held;
    sbuf out;
    size_t at;
    char *topic;     /* MQTT 5 Response Topic; NULL: the response topic */
    void *corr_prop; /* MQTT 5 Correlation Data */
    uint16_t corr_len;
    bool gone; /* the client disconnected: the answer goes nowhere */
    struct push_pending *next;
};

/* The walk under way (invariant 3). */
struct pwalk {
    struct pgroup *g; /* NULL: none */
    char after[CHAT_STORE_MAX_NAME + 1];
    uint64_t new_id, other_id, head;
    char *new_from, *other_from;
    char *new_text, *other_text; /* push_body: the messages' text (chat_push_changed
                                    reads it again) */
    uint64_t pending_id;         /* push_body: the deferred message whose text is read */
    char *pending_text;          /* ... its text, NULL: none */
    int64_t deferred_ms;         /* the earliest deferred member; 0: none */
    /* The member being decided and what it gets (its registrations come one
     * after another). */
    char member[CHAT_STORE_MAX_NAME + 1];
    bool notify;
    struct push_note note;
    char *note_text, *note_from; /* owned copies, when the note is a deferred one */
};

struct chat_push {
    struct push_opts opts;
    push_sender *sender;
    chat_hmap *groups; /* name -> struct pgroup */
    struct pgroup **heap;
    size_t nheap, heap_cap;
    struct pwalk walk;
    chat_hmap *marks; /* member NUL group -> struct pmark */
    struct pmark *mhead, *mtail;
    uint64_t removed; /* registrations removed after 404/410/rejected */
    int64_t drop_log_ms;
    /* The sweep of registrations whose device is gone. */
    bool sweeping;
    int64_t next_sweep_ms;
    char sweep_resume[CHAT_STORE_RESUME_MAX];
    /* push_cmd.c */
    struct push_pending *pending;
    size_t npending;
    uint64_t next_token;
    double discover_tokens; /* discovery GETs that may start now (DISCOVER_RATE) */
    int64_t discover_ms;    /* when they were last counted up; 0: never */
};

/* push_cmd.c */

/* A DISCOVER job ended (r): stores the registration when the endpoint
 * answered as a push server, and sends the held answer. */
void push_cmd_discovered(struct chat_plugin *pl, const struct push_result *r);

/* Frees every pending registration (cleanup). */
void push_cmd_free(struct chat_push *ps);

#endif
