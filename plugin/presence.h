/* presence.h: the private header of the presence module: who is online in
 * each group (protocol v1.1, Presence), and the coalesced pushes of `reads`
 * and `presence` entries to the devices subscribed to a group. Its state and
 * the invariants that state keeps are shared by three files, each calling
 * only those after it:
 *   presence.c        the broker's events, and the presence command
 *   presence_push.c   the pushes, from the tick (invariants push-cursor and tick-bound)
 *   presence_state.c  the state's lists and lifetimes (invariants link-once,
 *                     member-devices, member-entry and group-lifetime)
 * The rest of the plugin sees only the chat_presence_* functions of
 * plugin.h.
 *
 * What the plugin sees in Mosquitto 2.0 (no connect event reaches a
 * plugin before 2.1): the subscriptions to <prefix>/<group> it is asked
 * about, unsubscribes, and disconnects (clean, keep-alive timeouts,
 * takeovers: each ends in the broker's disconnect event). A member is
 * online in a group while one of its devices holds such a subscription
 * that the broker allowed. Everything here is memory only and rebuilt from
 * those events: after a broker restart everybody is offline until they
 * subscribe again. A persistent session that comes back without
 * subscribing again is not seen (the broker keeps its subscriptions and
 * tells no plugin): it shows as online from its next subscribe.
 *
 * Invariants, by name (the code cites them so):
 *   link-once: A device is linked to a group at most once; a link is in its
 *      device's array and in its group's subs[link->slot]. A device has at
 *      most MAX_LINKS links; a further subscription is not counted (logged).
 *   member-devices: A member's entry in a group counts its linked devices
 *      (devices); it is online while devices > 0.
 *   member-entry: A member entry exists while devices > 0 or it is in the
 *      group's changed list (dirty): a state the last push did not say yet
 *      (online != announced), a state that changed and changed back since it
 *      (toggled: an answer to `presence` in between may have shown the other
 *      one, so the push says the state again), or a read marker that moved
 *      (read > 0). An entry remembers the marker its last push said
 *      (pushed): a read at or below it is no news. A freed entry forgets it,
 *      so a member with no device in the group may have the same marker
 *      pushed once more: the bound on entries comes first.
 *   group-lifetime: A group exists while it has subscribed devices: when
 *      the last one goes, nobody is left to tell, and the group, its members
 *      and any push under way go with it (its members freed by the ticks
 *      that follow, DEAD_PER_TICK at a time: freeing the 50,000 members of
 *      a group at once held the broker's thread 40 ms, in the disconnect
 *      event). So everything here is bounded by the connected clients'
 *      subscriptions and the reads of one interval.
 *   push-cursor: A group pushes at most once per receipt_interval, one
 *      message that holds every change since its last push (what exceeds
 *      PUSH_MAX bytes or PUSH_NAMES members waits for the next one), sent to
 *      the devices subscribed while it goes out: those in subs[0, cursor)
 *      have it, those from cursor on get it in turn. Removing a device keeps
 *      that so (see subs_remove), and a device that comes meanwhile gets it
 *      too. So a push costs no copy of the group's subscribers, whatever
 *      their number.
 *   stamp-queue: Every device is in the stamp queue, and a device one of
 *      whose links was not marked used today (link->stamped, the UTC day)
 *      comes before every device whose links all were: a new device, or
 *      one with a new link, goes to the front, and chat_presence_stamp
 *      sends a device to the back once it has marked all its links. So the
 *      marking of a day stops at the first device it finds done, and costs
 *      one store call per device and group a day, whatever the number of
 *      ticks.
 *   tick-bound: The work of one tick is bounded: at most SENDS_PER_TICK
 *      pushes, BYTES_PER_TICK bytes and TICK_BUDGET_US of time, over all
 *      groups in turn (a push to 10,000 devices spreads over several ticks),
 *      and NAMES_PER_TICK members written into pushes being built; a group
 *      starts its next push only once the last one went out. The
 *      broker copies each push to its client's queue at the start of its next
 *      loop pass, outside our tick: the bounds keep that pass short too
 *      (measured: docs/benchmarks.md, Receipts and presence). A pass that has
 *      nothing else to do comes 100 ms after the last one, so a push reaches
 *      about 5,000 devices a second.
 */
#ifndef CHAT_PRESENCE_H
#define CHAT_PRESENCE_H

#include "access.h"

struct pres_group;
struct pres_device;

/* A device subscribed to a group (invariant link-once). */
struct pres_link {
    struct pres_group *g;
    struct pres_device *d;
    size_t slot;     /* its index in g->subs */
    int64_t stamped; /* the UTC day its device was last marked used in g (stamp-queue) */
};

struct pres_device {
    char *id;                 /* client id: the key in devices */
    struct mosquitto *client; /* its connection (the device goes with its disconnect) */
    char *member;             /* whom it speaks for */
    struct pres_link **links; /* the groups it is online in */
    size_t nlinks, cap;
    struct pres_device *stamp_prev, *stamp_next; /* the stamp queue (stamp-queue) */
};

/* A member with something to say in one group (member-devices,
 * member-entry). */
struct pres_member {
    unsigned devices; /* its devices linked to the group */
    bool announced;   /* online, as the group's last push said */
    bool toggled;     /* went online or offline since the last push */
    bool dirty;       /* in the group's changed list */
    uint64_t read;    /* read marker to push; 0: none */
    uint64_t pushed;  /* the marker the last push said (invariant member-entry) */
    char name[];
};

struct pres_group {
    char *name;              /* the key in groups */
    chat_hmap *members;      /* member name -> struct pres_member */
    struct pres_link **subs; /* devices subscribed */
    size_t nsubs, subs_cap;
    struct pres_member **changed; /* dirty members, in the order they changed */
    size_t nchanged, changed_cap;
    int64_t last_push_ms; /* when the last push was built (0: never) */
    /* A push under way (invariant push-cursor): its payload, and where it stands. */
    bool pushing;
    sbuf payload;
    size_t cursor; /* subs[0, cursor) have it */
    /* In the active list: something changed, or a push is under way. */
    bool active;
    struct pres_group *next, *prev;
};

struct chat_presence {
    chat_hmap *groups;                           /* name -> struct pres_group */
    chat_hmap *devices;                          /* client id -> struct pres_device */
    struct pres_group *head, *tail;              /* the active groups, served in turn */
    struct pres_group *dead;                     /* dropped, their members freed by the ticks */
    struct pres_device *stamp_head, *stamp_tail; /* every device (stamp-queue) */
    size_t stamped;                              /* links marked used by this day's marking */
    int64_t limit_log_ms;
    uint64_t pushes, skipped; /* sent; not sent (over a client's budget) */
};

/* presence_state.c: lists and lifetimes. Every function here runs on the
 * broker's thread, as all of the plugin does. */

/* Puts g at the tail of the active list (nothing when it is there). */
void pres_active_add(struct chat_presence *ps, struct pres_group *g);

/* Takes g out of the active list (nothing when it is not there). */
void pres_active_remove(struct chat_presence *ps, struct pres_group *g);

/* Frees g's push under way, if any: nothing is being pushed afterwards. */
void pres_push_clear(struct pres_group *g);

/* Frees a group with its members, links and push (a chat_hmap destructor:
 * it does not take the group out of any map or list); accepts NULL. */
void pres_group_free(void *p);

/* Frees a device (a chat_hmap destructor: its links belong to their
 * groups and are not freed); accepts NULL. */
void pres_device_free(void *p);

/* Puts d at the front of the stamp queue (taking it out of where it was,
 * if it was in it), or at the back (invariant stamp-queue). */
void pres_stamp_front(struct chat_presence *ps, struct pres_device *d);
void pres_stamp_back(struct chat_presence *ps, struct pres_device *d);

/* Takes d out of the devices and the stamp queue, and frees it (its links
 * are gone already). */
void pres_device_drop(struct chat_presence *ps, struct pres_device *d);

/* The group named name, or NULL when nobody there is subscribed. */
struct pres_group *pres_group_find(struct chat_presence *ps, const char *name);

/* Drops g from the maps and lists (invariant group-lifetime); its links
 * leave their devices' arrays first, so that a device may be left with
 * none (the caller frees it then). Its members are freed by
 * pres_dead_reap. */
void pres_group_drop(struct chat_presence *ps, struct pres_group *g);

/* Frees up to n members of dropped groups, and each group once it has none
 * left (from the tick). */
void pres_dead_reap(struct chat_presence *ps, size_t n);

/* The member's entry in g, created (offline, nothing to say) when create
 * is set; NULL when absent or out of memory. Owned by g. */
struct pres_member *pres_member_get(struct pres_group *g, const char *name, bool create);

/* Puts m in g's changed list (invariant member-entry) and g in the active list. Out of
 * memory, m is not listed: its next change tries again. */
void pres_mark(struct chat_presence *ps, struct pres_group *g, struct pres_member *m);

/* Removes d's link at index j from its group (and the group when it was
 * the last: invariant group-lifetime) and from d's array; the member may go offline.
 * d itself stays, possibly without links. */
void pres_unlink_at(struct chat_presence *ps, struct pres_device *d, size_t j);

#endif
