/* replay.c: catch-up of connected devices, in pages, with a window of pages
 * in flight that each cumulative ack moves forward.
 *
 * Invariants, by name (the code cites them so):
 *   window-bound: A device never has more than replay_window pages unacked,
 *      over all its groups together (the broker silently drops what exceeds
 *      its in-flight and queue limits, so the window stays far below them).
 *   inflight-total: A device's second and later unacked pages go only while
 *      fewer than replay_inflight pages are unacked over all devices; its
 *      first never waits for the others, so no device's catch-up depends on
 *      another's acks (a client that never acks holds at most its own
 *      window). What a storm has queued in the broker and in the sockets is
 *      what a steady client's packets wait behind (docs/scaling.md).
 *   acked-sent-target: For each group being caught up: acked <= sent <=
 *      target, and the outstanding pages are exactly the pages sent whose last
 *      id > acked.
 *   connected-only: State exists only for connected devices with something
 *      to send; it is dropped on disconnect and rebuilt from the stored
 *      cursor.
 *   restart-in-window: A restart (a new subscribe or sync) sends from the
 *      cursor at once, within the window: pages already in flight count until
 *      acked or until replay_timeout, so that a client repeating subscribes
 *      cannot make the broker queue window after window of pages for it.
 *   read-each-page: Every page asks the access policy again
 *      (chat_access_decide, CHAT_DO_HISTORY): a right revoked during a
 *      catch-up stops it (within the life of a remembered read verdict).
 *   holes-reported: A hole in a group's ids (a damaged store) is reported
 *      to the device, never skipped in silence.
 *   page-shrink: A device's page_bytes only shrinks while it is connected:
 *      a page the device never acknowledges may be over its MQTT 5 Maximum
 *      Packet Size (the broker drops such a packet without telling anyone, and
 *      2.0 does not show that size to plugins), so every resend after a
 *      timeout divides it by four, down to pages of one message (1 byte: the
 *      first message of a page always goes), and each ack that moves the
 *      cursor doubles it again, up to page_bytes. One message resent alone
 *      twice in vain is reported to the device once; resending goes on, so a
 *      device that was only paused still catches up.
 *   held-while-queued: An empty request ({"commands":[]}) of a device waiting
 *      for its turn is held, and answered only once its turns have served
 *      it: a turn after which it waits no more (its window full, or nothing
 *      left to send now), or the end of its catch-up. The answer then comes
 *      after its pages on the one QoS, so it still says "nothing more is owed
 *      to you now", and an empty request is no way past the pass's budget.
 *      So a device holds answers only while queued; a device not queued is
 *      answered at once (control.c).
 *   held-bound: At most HELD_MAX answers, with HELD_BYTES of response
 *      topics and correlation data together, are held for one client; a
 *      disconnect or the plugin's cleanup frees them unsent.
 */
#include "access.h"
#include "reply.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW_MAX 64u                     /* upper bound of plugin_opt_replay_window */
#define HELD_MAX CHAT_PROTO_HELD_EMPTY_MAX /* of one client (invariant held-bound) */
#define HELD_BYTES CHAT_PROTO_HELD_EMPTY_BYTES

/* The catch-ups under way: every device with something to send
 * (invariant connected-only), and the second the timeouts were last looked at. */
struct chat_replay {
    chat_hmap *devices; /* client id -> struct chat_device */
    time_t last_timeout_scan;
    struct chat_device *head, *tail; /* the devices waiting for a turn (invariant turns) */
    size_t waiting;                  /* how many */
    uint64_t inflight;               /* pages unacked over all devices (invariant inflight-total) */
    uint64_t spent;                  /* messages paged in this pass (invariant pass-budget) ... */
    int64_t spent_us;                /* ... the thread's CPU that took (µs) ... */
    int64_t allow_us;                /* ... and what the share allows this pass */
    int64_t mark_us;                 /* thread CPU when this pass began */
    uint64_t pass_max;               /* the most any pass carried, for $SYS */
    uint64_t turns;                  /* devices that had to wait for a turn, for $SYS */
};

/* The answer to an empty request, held (invariant held-while-queued): what
 * the request said to answer with. */
struct held_answer {
    struct held_answer *next;
    char *topic;       /* its MQTT 5 Response Topic, or NULL: the response topic */
    void *corr;        /* its Correlation Data, or NULL */
    uint16_t corr_len; /* bytes of corr */
    size_t bytes;      /* of topic and corr, counted in held_bytes */
};

struct replay_group {
    struct replay_group *next, *prev;
    char *group;                      /* the key of the device's groups map too */
    uint64_t acked;                   /* the device's cursor */
    uint64_t sent;                    /* highest id sent in a page */
    uint64_t target;                  /* head when the catch-up (re)started */
    uint64_t outstanding[WINDOW_MAX]; /* last ids of unacked pages, ascending */
    unsigned n_out;
    unsigned stuck; /* resends of one message alone without an ack (page-shrink) */
};

struct chat_device {
    /* The connected client: valid while the device exists, since the
     * disconnect event drops the device (invariant connected-only). */
    struct mosquitto *client;
    char *client_id; /* the key in the devices map */
    char *member;
    struct replay_group *groups; /* in round robin order */
    chat_hmap *by_name;          /* group name -> struct replay_group */
    struct replay_group *rr;     /* where the round robin over groups resumes */
    unsigned inflight;           /* sum of n_out over groups */
    /* When its cursor last moved or its pages last went (chat_now_ms, the
     * clock of the tick's now): whole seconds of time(NULL) made a resend
     * come up to a second before replay_timeout (0.4 s after a subscribe
     * with replay_timeout 1). */
    int64_t last_progress_ms;
    size_t page_bytes;                 /* invariant page-shrink */
    struct chat_device *qnext, *qprev; /* in the queue of turns ... */
    bool queued;                       /* ... when this is set */
    struct held_answer *held;          /* oldest first (invariant held-while-queued) */
    unsigned n_held;                   /* at most HELD_MAX */
    size_t held_bytes;                 /* their topics and correlation data, at most HELD_BYTES */
};

static void group_free(struct replay_group *g)
{
    if (g) {
        free(g->group);
        free(g);
    }
}

static void held_free(struct held_answer *h)
{
    if (h) {
        free(h->topic);
        free(h->corr);
        free(h);
    }
}

/* Frees d's held answers unsent (a disconnect, the plugin's cleanup). */
static void held_drop(struct chat_device *d)
{
    while (d->held) {
        struct held_answer *h = d->held;
        d->held = h->next;
        held_free(h);
    }
    d->n_held = 0;
    d->held_bytes = 0;
}

/* d's turns have served it, or its catch-up ended: each held empty request
 * gets its answer, {"responses":[]}, as control.c would have sent it, in
 * the order the requests came. */
static void held_answer(struct chat_plugin *pl, struct chat_device *d)
{
    while (d->held) {
        struct held_answer *h = d->held;
        sbuf b = {0};
        d->held = h->next;
        d->n_held--;
        d->held_bytes -= h->bytes;
        sbuf_puts(&b, "{\"responses\":[]}");
        chat_reply_send(pl, d->client_id, h->topic, h->corr, h->corr_len, &b);
        held_free(h);
    }
}

static void device_free(struct chat_device *d)
{
    if (!d) {
        return;
    }
    held_drop(d);
    while (d->groups) {
        struct replay_group *g = d->groups;
        d->groups = g->next;
        group_free(g);
    }
    chat_hmap_destroy(d->by_name, NULL);
    free(d->client_id);
    free(d->member);
    free(d);
}

static void device_free_cb(void *d)
{
    device_free(d);
}

static struct chat_device *device_find(struct chat_plugin *pl, const char *client_id)
{
    return chat_hmap_get(pl->replay->devices, client_id, strlen(client_id));
}

static struct replay_group *group_find(struct chat_device *d, const char *group)
{
    return chat_hmap_get(d->by_name, group, strlen(group));
}

static void group_remove(struct chat_replay *r, struct chat_device *d, struct replay_group *g)
{
    if (g->prev) {
        g->prev->next = g->next;
    } else {
        d->groups = g->next;
    }
    if (g->next) {
        g->next->prev = g->prev;
    }
    if (d->rr == g) {
        d->rr = g->next;
    }
    chat_hmap_remove(d->by_name, g->group, strlen(g->group));
    d->inflight -= g->n_out;
    r->inflight -= g->n_out;
    group_free(g);
}

static void enqueue(struct chat_replay *r, struct chat_device *d)
{
    assert(!d->queued);
    d->qnext = NULL;
    d->qprev = r->tail;
    if (r->tail) {
        r->tail->qnext = d;
    } else {
        r->head = d;
    }
    r->tail = d;
    d->queued = true;
    r->waiting++;
}

static void dequeue(struct chat_replay *r, struct chat_device *d)
{
    if (!d->queued) {
        return;
    }
    if (d->qprev) {
        d->qprev->qnext = d->qnext;
    } else {
        r->head = d->qnext;
    }
    if (d->qnext) {
        d->qnext->qprev = d->qprev;
    } else {
        r->tail = d->qprev;
    }
    d->qnext = d->qprev = NULL;
    d->queued = false;
    r->waiting--;
}

/* d's catch-up ends (all sent and acked, a stop): what it held is answered
 * (a disconnect dropped it before). */
static void device_remove(struct chat_plugin *pl, struct chat_device *d)
{
    held_answer(pl, d);
    dequeue(pl->replay, d);
    pl->replay->inflight -= d->inflight;
    chat_hmap_remove(pl->replay->devices, d->client_id, strlen(d->client_id));
    device_free(d);
}

enum send_result {
    PAGE_SENT,    /* a page went out: it holds a place in the window */
    NOTHING_LEFT, /* everything up to the target was sent */
    HOLE_SKIPPED, /* missing ids were reported and passed: try again */
    NOT_NOW       /* out of memory: the next ack or tick tries again */
};

/* A page's scan: the writer, and where the page must begin, known once
 * the store has read the group's first id (chat_store_scan_page sets it
 * before the first message). */
struct page_scan {
    struct chat_page_writer *w;
    uint64_t sent, head, first;
    bool started;
};

static int page_scan_add(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct page_scan *ps = ctx;
    if (!ps->started) {
        /* Retention may have removed ids the device never acked
         * ("truncated"); any other id missing from first to head is
         * damage. */
        ps->started = true;
        ps->w->expect = ps->sent + 1 > ps->first ? ps->sent + 1 : ps->first;
    }
    return chat_page_add(ps->w, id, data, len);
}

static enum send_result send_one_page(struct chat_plugin *pl, struct chat_device *d,
                                      struct replay_group *g);

/* Sends the next page of g, counting the CPU it took against the pass's
 * share when replay_share is on (two clock reads a page). */
static enum send_result send_page(struct chat_plugin *pl, struct chat_device *d,
                                  struct replay_group *g)
{
    if (!pl->cfg.replay_budget || !pl->cfg.replay_share) {
        return send_one_page(pl, d, g);
    }
    int64_t t0 = chat_thread_cpu_us();
    enum send_result res = send_one_page(pl, d, g);
    pl->replay->spent_us += chat_thread_cpu_us() - t0;
    return res;
}

/* Sends the next page of g. */
static enum send_result send_one_page(struct chat_plugin *pl, struct chat_device *d,
                                      struct replay_group *g)
{
    bool more = false;
    sbuf b = {0};
    struct chat_page_writer w;

    if (g->sent >= g->target) {
        return NOTHING_LEFT;
    }
    struct chat_decision dec = chat_access_decide(pl, d->client, g->group, CHAT_DO_HISTORY);
    if (dec.verdict != CHAT_ALLOW) {
        chat_reply_replay_error(pl, d->client_id, g->group, 0, dec.why);
        g->sent = g->target = g->acked;
        return NOTHING_LEFT;
    }
    size_t limit = pl->cfg.page_size;
    if (g->target - g->sent < limit) {
        limit = (size_t)(g->target - g->sent);
    }
    sbuf_puts(&b, "{\"responses\":[");
    chat_page_begin(&w, &b, "replay", g->group, NULL);
    /* The head, the first id and the page in one call: one round trip on
     * PostgreSQL. */
    struct page_scan ps = {&w, g->sent, 0, 1, false};
    chat_err rc = chat_store_scan_page(pl->store, g->group, g->sent, limit, d->page_bytes,
                                       page_scan_add, &ps, &more, &ps.head, &ps.first);
    if (b.failed) {
        sbuf_free(&b);
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory paging %s to %s",
                             g->group, d->client_id);
        return NOT_NOW;
    }
    if (rc != CHAT_OK && !w.hole_from) {
        /* A damaged stretch of the store: say so, skip nothing. */
        sbuf_free(&b);
        chat_log_store_error(pl, rc, "replay of %s to %s", g->group, d->client_id);
        chat_reply_replay_error(pl, d->client_id, g->group, g->sent + 1,
                                "storage error: this part of the history cannot be read");
        g->sent = g->target;
        return NOTHING_LEFT;
    }
    if (w.count == 0 && !w.hole_from) {
        sbuf_free(&b);
        g->sent = g->target;
        return NOTHING_LEFT;
    }
    enum send_result res = HOLE_SKIPPED;
    if (w.count > 0) {
        bool truncated = w.first > g->sent + 1;
        chat_page_end(&w, ps.head, w.last < ps.head, truncated, true,
                      chat_store_incarnation(pl->store));
        sbuf_puts(&b, "]}");
        chat_send(pl, d->client_id, &b);
        g->sent = w.last;
        assert(g->n_out < WINDOW_MAX && d->inflight < pl->cfg.replay_window);
        g->outstanding[g->n_out++] = w.last;
        d->inflight++;
        pl->replay->inflight++;
        pl->stats.pages++;
        pl->replay->spent += w.count;
        res = PAGE_SENT;
    } else {
        sbuf_free(&b);
    }
    if (w.hole_from) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "messages %llu to %llu are missing from the store (damaged): ack past them to "
                 "go on",
                 (unsigned long long)w.hole_from, (unsigned long long)w.hole_to);
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: group %s: %s", g->group, msg);
        chat_reply_replay_error(pl, d->client_id, g->group, w.hole_from, msg);
        g->sent = w.hole_to;
    }
    return res;
}

enum pump_result {
    DEVICE_FREED, /* nothing left: the device was freed */
    DEVICE_WAITS, /* its window is full, or nothing can go now: an ack or timeout moves it */
    DEVICE_MORE   /* it has room and (maybe) more to send: it needs another turn */
};

static bool budget_spent(const struct chat_plugin *pl)
{
    const struct chat_replay *r = pl->replay;
    return pl->cfg.replay_budget && r->spent >= pl->cfg.replay_budget && r->spent_us >= r->allow_us;
}

/* d may send a page now: its window has room, and it has nothing in flight
 * or the pages in flight over all devices leave room (invariant
 * inflight-total). */
static bool has_room(const struct chat_plugin *pl, const struct chat_device *d)
{
    return d->inflight < pl->cfg.replay_window && (d->inflight == 0 || !pl->cfg.replay_inflight ||
                                                   pl->replay->inflight < pl->cfg.replay_inflight);
}

/* Fills the device's window, up to max_pages pages and, with bounded, while
 * the pass's budget lasts (invariant pass-budget), taking groups in turn so
 * that one long backlog does not hold back the others. */
static enum pump_result pump(struct chat_plugin *pl, struct chat_device *d, unsigned max_pages,
                             bool bounded)
{
    unsigned idle = 0, sent = 0;
    unsigned ngroups = (unsigned)chat_hmap_count(d->by_name);
    while (has_room(pl, d) && d->groups && idle < ngroups) {
        if (sent == max_pages || (bounded && budget_spent(pl))) {
            return DEVICE_MORE;
        }
        struct replay_group *g = d->rr ? d->rr : d->groups;
        enum send_result res = send_page(pl, d, g);
        if (res == NOT_NOW) {
            break;
        }
        if (res == HOLE_SKIPPED) {
            continue; /* the same group again, past the hole */
        }
        d->rr = g->next;
        if (res == PAGE_SENT) {
            idle = 0;
            sent++;
        } else if (g->n_out == 0) {
            /* Fully sent and acked: done. Only a group's own ack or its turn
             * here can finish it, so no walk over every group is needed. */
            group_remove(pl->replay, d, g);
            ngroups--;
        } else {
            idle++;
        }
    }
    if (!d->groups) {
        device_remove(pl, d);
        return DEVICE_FREED;
    }
    return DEVICE_WAITS;
}

/* The budget holds only where a pass has an end that the plugin sees: the
 * broker's tick. Without ticks (2.0.11 with per_listener_settings true)
 * pages go as they did before the budget, or a waiting device would wait
 * for the next client event. */
static bool budgeted(const struct chat_plugin *pl)
{
    return pl->cfg.replay_budget > 0 && chat_tick_seen(pl);
}

/* d has window room (an ack, a start, a stop, a timeout): pages go now
 * while the budget lasts and nobody waits, else d waits for its turn
 * (invariant turns). */
static void kick(struct chat_plugin *pl, struct chat_device *d)
{
    struct chat_replay *r = pl->replay;
    if (!budgeted(pl)) {
        (void)pump(pl, d, UINT_MAX, false);
        return;
    }
    if (d->queued) {
        return; /* its turn comes */
    }
    if (r->head || budget_spent(pl) || pump(pl, d, UINT_MAX, true) == DEVICE_MORE) {
        enqueue(r, d);
        r->turns++;
    }
}

const char *chat_replay_hold_empty(struct chat_plugin *pl, const struct mosquitto *client,
                                   const char *topic, const void *corr, uint16_t corr_len,
                                   bool *held)
{
    const char *client_id = mosquitto_client_id(client);
    struct chat_device *d = client_id ? device_find(pl, client_id) : NULL;
    struct held_answer *h = NULL, **tail;

    *held = false;
    if (!d || !d->queued) {
        return NULL; /* nothing owed now beyond what was sent: answer at once */
    }
    size_t bytes = (topic ? strlen(topic) : 0) + (corr ? corr_len : 0);
    if (d->n_held >= HELD_MAX || bytes > HELD_BYTES - d->held_bytes) {
        return CHAT_PROTO_ERR_EMPTY_HELD;
    }
    if (!(h = calloc(1, sizeof(*h))) || (topic && !(h->topic = strdup(topic))) ||
        (corr && !(h->corr = malloc(corr_len ? corr_len : 1)))) {
        held_free(h);
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory holding an answer to %s",
                             client_id);
        return "out of memory";
    }
    if (corr) {
        memcpy(h->corr, corr, corr_len);
        h->corr_len = corr_len;
    }
    h->bytes = bytes;
    for (tail = &d->held; *tail; tail = &(*tail)->next) {
    }
    *tail = h;
    d->n_held++;
    d->held_bytes += bytes;
    *held = true;
    return NULL;
}

void chat_replay_held_drop(struct chat_plugin *pl, const char *client_id)
{
    struct chat_device *d = device_find(pl, client_id);
    if (d) {
        held_drop(d);
    }
}

/* A new pass: its budget goes to the devices waiting, one page a turn, from
 * the front of the queue (invariant turns). Bounded: a turn that sends a
 * page spends at least one message of the budget, and the others are at
 * most one per device waiting when the pass began. */
static void serve_turns(struct chat_plugin *pl)
{
    struct chat_replay *r = pl->replay;
    if (r->spent > r->pass_max) {
        r->pass_max = r->spent;
    }
    if (pl->cfg.replay_budget && pl->cfg.replay_share && (r->head || r->spent)) {
        /* The rest of the pass that ends here: its CPU less the pages'. */
        int64_t now = chat_thread_cpu_us();
        int64_t other = r->mark_us ? now - r->mark_us - r->spent_us : 0;
        r->allow_us = other > 0 ? other * (int64_t)pl->cfg.replay_share / 100 : 0;
        r->mark_us = now;
    } else {
        /* No catch-up: no clock read a pass; the first pass of the next one
         * has the budget alone. */
        r->allow_us = 0;
        r->mark_us = 0;
    }
    r->spent = 0;
    r->spent_us = 0;
    size_t idle_left = r->waiting;
    while (r->head && !budget_spent(pl) && idle_left > 0) {
        struct chat_device *d = r->head;
        uint64_t before = r->spent;
        dequeue(r, d);
        enum pump_result res = pump(pl, d, 1, true);
        if (res == DEVICE_MORE) {
            enqueue(r, d);
        } else if (res == DEVICE_WAITS) {
            held_answer(pl, d); /* it waits no more (invariant held-while-queued) */
        }
        if (r->spent == before) {
            idle_left--;
        }
    }
}

static struct chat_device *device_new(struct chat_plugin *pl, struct mosquitto *client,
                                      const char *client_id, const char *member)
{
    struct chat_device *d = calloc(1, sizeof(*d));
    if (!d || !(d->client_id = strdup(client_id)) || !(d->member = strdup(member)) ||
        !(d->by_name = chat_hmap_create()) ||
        !chat_hmap_put(pl->replay->devices, client_id, strlen(client_id), d, NULL)) {
        device_free(d);
        return NULL;
    }
    d->page_bytes = pl->cfg.page_bytes;
    d->client = client;
    return d;
}

void chat_replay_start(struct chat_plugin *pl, struct mosquitto *client, const char *group)
{
    const char *client_id = mosquitto_client_id(client);
    char member[CHAT_MEMBER_BUF];
    uint64_t cursor = 0, head = 0;
    bool found = false;

    if (!client_id || chat_member(pl, client, member)) {
        return;
    }
    /* the cursor and the head in one call: one round trip on PostgreSQL */
    chat_err rc =
        chat_store_cursor_open(pl->store, group, member, client_id, &cursor, &found, &head);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "catch-up of %s in %s", client_id, group);
        chat_relay_follow(pl, group, 0);
        return;
    }
    /* Live from the head on, caught up to it: nothing falls in between. */
    chat_relay_follow(pl, group, head);
    struct chat_device *d = device_find(pl, client_id);
    if (!found || head <= cursor) {
        if (d) {
            chat_replay_stop(pl, client_id, group);
        }
        return;
    }
    struct chat_decision dec = chat_access_decide(pl, client, group, CHAT_DO_HISTORY);
    if (dec.verdict != CHAT_ALLOW) {
        if (d) {
            chat_replay_stop(pl, client_id, group);
        }
        chat_reply_replay_error(pl, client_id, group, 0, dec.why);
        return;
    }
    if (!d && !(d = device_new(pl, client, client_id, member))) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory");
        return;
    }
    struct replay_group *g = group_find(d, group);
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g || !(g->group = strdup(group)) ||
            !chat_hmap_put(d->by_name, g->group, strlen(g->group), g, NULL)) {
            group_free(g);
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory");
            if (!d->groups) {
                device_remove(pl, d);
            }
            return;
        }
        g->next = d->groups;
        if (d->groups) {
            d->groups->prev = g;
        }
        d->groups = g;
    }
    /* A new subscribe or sync restarts from the cursor at once, within the
     * window (invariant restart-in-window). */
    d->client = client;
    g->acked = cursor;
    if (g->n_out == 0) {
        g->sent = cursor;
    }
    g->target = head > g->target ? head : g->target;
    d->last_progress_ms = chat_now_ms();
    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: catch-up of %s in %s from %llu to %llu",
                         client_id, group, (unsigned long long)cursor, (unsigned long long)head);
    kick(pl, d);
}

void chat_replay_acked(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                       uint64_t acked)
{
    const char *client_id = mosquitto_client_id(client);
    struct chat_device *d = client_id ? device_find(pl, client_id) : NULL;
    struct replay_group *g = d ? group_find(d, group) : NULL;
    if (!g || acked <= g->acked) {
        return;
    }
    d->client = client;
    g->acked = acked;
    if (g->sent < acked) {
        g->sent = acked; /* live messages acked beyond the pages sent */
    }
    unsigned keep = 0;
    for (unsigned i = 0; i < g->n_out; i++) {
        if (g->outstanding[i] > acked) {
            g->outstanding[keep++] = g->outstanding[i];
        }
    }
    d->inflight -= g->n_out - keep;
    pl->replay->inflight -= g->n_out - keep;
    g->n_out = keep;
    d->last_progress_ms = chat_now_ms();
    g->stuck = 0;
    if (d->page_bytes < pl->cfg.page_bytes) {
        d->page_bytes =
            d->page_bytes * 2 < pl->cfg.page_bytes ? d->page_bytes * 2 : pl->cfg.page_bytes;
    }
    kick(pl, d);
}

/* Stops the catch-up of d in group (NULL: all). The places its pages held
 * in the window go to the device's other groups at once: one that waits
 * with nothing in flight would otherwise wait for ever, since only an ack
 * of its own or a timeout of pages in flight sends more. */
static void stop_device(struct chat_plugin *pl, struct chat_device *d, const char *group)
{
    struct replay_group *g = group ? group_find(d, group) : NULL;
    if (g) {
        group_remove(pl->replay, d, g);
    }
    if (!group || !d->groups) {
        device_remove(pl, d);
    } else if (g) {
        kick(pl, d);
    }
}

void chat_replay_stop(struct chat_plugin *pl, const char *client_id, const char *group)
{
    struct chat_device *d = device_find(pl, client_id);
    if (d) {
        stop_device(pl, d, group);
    }
}

/* The devices of member (NULL: any) catching up on group, collected (up to
 * STOP_BATCH a walk) before any is stopped: stopping one may change the map. */
#define STOP_BATCH 64
struct collect {
    const char *member;
    const char *group;
    struct chat_device *found[STOP_BATCH];
    size_t n;
};

static bool collect_member(void *ctx, const void *key, size_t len, void *val)
{
    struct collect *c = ctx;
    struct chat_device *d = val;
    (void)key;
    (void)len;
    if (c->n < STOP_BATCH && (!c->member || !strcmp(d->member, c->member)) &&
        group_find(d, c->group)) {
        c->found[c->n++] = d;
    }
    return false;
}

void chat_replay_stop_member(struct chat_plugin *pl, const char *member, const char *group)
{
    struct collect c = {.member = member, .group = group};
    do {
        /* A device stopped no longer has the group: each walk finds others. */
        c.n = 0;
        chat_hmap_foreach(pl->replay->devices, collect_member, &c);
        for (size_t i = 0; i < c.n; i++) {
            stop_device(pl, c.found[i], group);
        }
    } while (c.n == STOP_BATCH);
}

/* Through stop_device, so that a device left with other groups is kicked:
 * the places the deleted group's pages held in its window go to them, which
 * would otherwise wait for ever (nothing in flight: no ack, no resend; the
 * hostile review of 2026-12-05 found a device's other groups stalled until
 * a sync when the deletion removed the group without a kick). */
void chat_replay_stop_group(struct chat_plugin *pl, const char *group)
{
    chat_replay_stop_member(pl, NULL, group);
}

static bool count_active_cb(void *ctx, const void *key, size_t len, void *val)
{
    unsigned *n = ctx;
    const struct chat_device *d = val;
    (void)key;
    (void)len;
    *n += d->inflight > 0;
    return false;
}

unsigned chat_replay_active(struct chat_plugin *pl)
{
    unsigned n = 0;
    chat_hmap_foreach(pl->replay->devices, count_active_cb, &n);
    return n;
}

/* Pages were lost or the device stalled: send again from the cursor, in
 * smaller pages (invariant page-shrink); d may be freed. */
static void resend(struct chat_plugin *pl, struct chat_device *d, int64_t now_ms)
{
    bool single = d->page_bytes == 1;
    d->page_bytes = d->page_bytes >= 2048 ? d->page_bytes / 4 : 1;
    for (struct replay_group *g = d->groups; g; g = g->next) {
        if (single && g->n_out > 0 && ++g->stuck == 2) {
            char why[200];
            uint64_t id = g->acked + 1;
            snprintf(why, sizeof(why),
                     "message %llu was sent alone %u times without an ack: it may be larger than "
                     "this client accepts (MQTT 5 Maximum Packet Size); fetch it or ack past it",
                     (unsigned long long)id, g->stuck);
            chat_reply_replay_error(pl, d->client_id, g->group, id, why);
        }
        g->sent = g->acked;
        g->n_out = 0;
    }
    pl->replay->inflight -= d->inflight;
    d->inflight = 0;
    mosquitto_log_printf(MOSQ_LOG_INFO,
                         "mosquitto-chat: no ack from %s for %u s, resending from its cursor "
                         "in pages of at most %zu bytes",
                         d->client_id, pl->cfg.replay_timeout, d->page_bytes);
    d->last_progress_ms = now_ms;
    kick(pl, d);
}

struct tick_ctx {
    struct chat_plugin *pl;
    int64_t now_ms;
    struct chat_device **due;
    size_t n, cap;
};

static bool collect_due(void *ctx, const void *key, size_t len, void *val)
{
    struct tick_ctx *t = ctx;
    struct chat_device *d = val;
    (void)key;
    (void)len;
    if (d->inflight == 0 ||
        t->now_ms - d->last_progress_ms < (int64_t)t->pl->cfg.replay_timeout * 1000) {
        return false;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
        struct chat_device **n = realloc(t->due, cap * sizeof(*n));
        if (!n) {
            return false; /* the next scan takes it */
        }
        t->due = n;
        t->cap = cap;
    }
    t->due[t->n++] = d;
    return false;
}

void chat_replay_tick(struct chat_plugin *pl, int64_t now_ms)
{
    serve_turns(pl);
    time_t now = (time_t)(now_ms / 1000);
    if (now == pl->replay->last_timeout_scan) {
        return;
    }
    pl->replay->last_timeout_scan = now;
    /* Collect first: resending changes the map. Scanned once a second, a
     * resend comes between replay_timeout and a second after it, never
     * before. */
    struct tick_ctx t = {pl, now_ms, NULL, 0, 0};
    chat_hmap_foreach(pl->replay->devices, collect_due, &t);
    for (size_t i = 0; i < t.n; i++) {
        resend(pl, t.due[i], t.now_ms);
    }
    free(t.due);
}

size_t chat_replay_devices(const struct chat_plugin *pl)
{
    return chat_hmap_count(pl->replay->devices);
}

size_t chat_replay_waiting(const struct chat_plugin *pl)
{
    return pl->replay->waiting;
}

uint64_t chat_replay_turns(const struct chat_plugin *pl)
{
    return pl->replay->turns;
}

uint64_t chat_replay_pass_max(const struct chat_plugin *pl)
{
    return pl->replay->pass_max;
}

uint64_t chat_replay_inflight(const struct chat_plugin *pl)
{
    return pl->replay->inflight;
}

bool chat_replay_init(struct chat_plugin *pl)
{
    struct chat_replay *r = calloc(1, sizeof(*r));
    if (!r || !(r->devices = chat_hmap_create())) {
        free(r);
        return false;
    }
    pl->replay = r;
    return true;
}

void chat_replay_free(struct chat_plugin *pl)
{
    if (pl->replay) {
        chat_hmap_destroy(pl->replay->devices, device_free_cb);
    }
    free(pl->replay);
    pl->replay = NULL;
}
