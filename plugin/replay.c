/* replay.c: catch-up of connected devices, in pages, with a window of pages
 * in flight that each cumulative ack moves forward.
 *
 * Invariants:
 *   1. A device never has more than replay_window pages unacked, over all
 *      its groups together (the broker silently drops what exceeds its
 *      in-flight and queue limits, so the window stays far below them).
 *   2. For each group being caught up: acked <= sent <= target, and the
 *      outstanding pages are exactly the pages sent whose last id > acked.
 *   3. State exists only for connected devices with something to send; it is
 *      dropped on disconnect and rebuilt from the stored cursor.
 */
#include "plugin.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_MAX 64u /* upper bound of plugin_opt_replay_window */

struct replay_group {
    struct replay_group *next;
    char *group;
    uint64_t acked;                   /* the device's cursor */
    uint64_t sent;                    /* highest id sent in a page */
    uint64_t target;                  /* head when the catch-up (re)started */
    uint64_t outstanding[WINDOW_MAX]; /* last ids of unacked pages, ascending */
    unsigned n_out;
};

struct chat_device {
    struct chat_device *next;
    char *client_id;
    char *member;
    struct replay_group *groups;
    struct replay_group *rr; /* where the round robin over groups resumes */
    unsigned inflight;       /* sum of n_out over groups */
    time_t last_progress;
};

static void group_free(struct replay_group *g)
{
    if (g) {
        free(g->group);
        free(g);
    }
}

static void device_free(struct chat_device *d)
{
    if (!d) {
        return;
    }
    while (d->groups) {
        struct replay_group *g = d->groups;
        d->groups = g->next;
        group_free(g);
    }
    free(d->client_id);
    free(d->member);
    free(d);
}

static struct chat_device *device_find(struct chat_plugin *pl, const char *client_id,
                                       struct chat_device ***link)
{
    struct chat_device **pp = &pl->devices;
    for (; *pp; pp = &(*pp)->next) {
        if (!strcmp((*pp)->client_id, client_id)) {
            if (link) {
                *link = pp;
            }
            return *pp;
        }
    }
    return NULL;
}

static struct replay_group *group_find(struct chat_device *d, const char *group,
                                       struct replay_group ***link)
{
    struct replay_group **pp = &d->groups;
    for (; *pp; pp = &(*pp)->next) {
        if (!strcmp((*pp)->group, group)) {
            if (link) {
                *link = pp;
            }
            return *pp;
        }
    }
    return NULL;
}

static void group_remove(struct chat_device *d, struct replay_group **link)
{
    struct replay_group *g = *link;
    *link = g->next;
    if (d->rr == g) {
        d->rr = g->next;
    }
    d->inflight -= g->n_out;
    group_free(g);
}

static void device_remove(struct chat_device **link)
{
    struct chat_device *d = *link;
    *link = d->next;
    device_free(d);
}

/* Writes one page entry into an sbuf as its messages come, so that a replay
 * splices envelopes straight from the store's iterator into the response. */
struct page_writer {
    sbuf *b;
    uint64_t first, last;
    size_t count;
};

static void page_begin(struct page_writer *w, sbuf *b, const char *command, const char *group)
{
    w->b = b;
    w->first = w->last = 0;
    w->count = 0;
    sbuf_puts(b, "{\"command\":");
    sbuf_json_str(b, command);
    sbuf_puts(b, ",\"group\":");
    sbuf_json_str(b, group);
    sbuf_puts(b, ",\"messages\":[");
}

static int page_add(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct page_writer *w = ctx;
    if (w->count++) {
        sbuf_add(w->b, ",", 1);
    } else {
        w->first = id;
    }
    w->last = id;
    sbuf_add(w->b, data, len);
    return w->b->failed ? 1 : 0;
}

/* bounds: write first/last (a forward page); a history page, listed newest
 * first, carries only "more". */
static void page_end(struct page_writer *w, uint64_t head, bool more, bool truncated, bool bounds)
{
    sbuf *b = w->b;
    sbuf_add(b, "]", 1);
    if (w->count && bounds) {
        sbuf_puts(b, ",\"first\":");
        sbuf_u64(b, w->first);
        sbuf_puts(b, ",\"last\":");
        sbuf_u64(b, w->last);
    }
    sbuf_puts(b, ",\"head\":");
    sbuf_u64(b, head);
    sbuf_puts(b, more ? ",\"more\":true" : ",\"more\":false");
    if (truncated) {
        sbuf_puts(b, ",\"truncated\":true");
    }
    sbuf_add(b, "}", 1);
}

void chat_page_entry(sbuf *b, const char *command, const char *group, const chat_page *page,
                     uint64_t head, bool more, bool truncated, bool bounds)
{
    struct page_writer w;
    page_begin(&w, b, command, group);
    for (size_t i = 0; i < page->count; i++) {
        page_add(&w, page->msgs[i].id, page->msgs[i].data, page->msgs[i].len);
    }
    page_end(&w, head, more, truncated, bounds);
}

/* Sends the next page of g. Returns false when there is nothing left to
 * send (or the store failed, which the log says). */
static bool send_page(struct chat_plugin *pl, struct chat_device *d, struct replay_group *g)
{
    uint64_t head = 0;
    bool more = false;
    sbuf b = {0};
    struct page_writer w;

    if (g->sent >= g->target) {
        return false;
    }
    size_t limit = pl->cfg.page_size;
    if (g->target - g->sent < limit) {
        limit = (size_t)(g->target - g->sent);
    }
    sbuf_puts(&b, "{\"responses\":[");
    page_begin(&w, &b, "replay", g->group);
    chat_err rc = chat_store_head(pl->store, g->group, &head);
    if (rc == CHAT_OK) {
        rc = chat_store_scan_forward(pl->store, g->group, g->sent, limit, pl->cfg.page_bytes,
                                     page_add, &w, &more);
    }
    if (rc != CHAT_OK || w.count == 0) {
        if (rc != CHAT_OK) {
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: replay of %s to %s: %s", g->group,
                                 d->client_id, chat_strerror(rc));
        }
        sbuf_free(&b);
        g->sent = g->target;
        return false;
    }
    /* A gap before the page's first id means retention removed messages
     * the device never acked. */
    bool truncated = w.first > g->sent + 1;
    page_end(&w, head, w.last < head, truncated, true);
    sbuf_puts(&b, "]}");
    chat_send(pl, d->client_id, &b);

    g->sent = w.last;
    assert(g->n_out < WINDOW_MAX && d->inflight < pl->cfg.replay_window);
    g->outstanding[g->n_out++] = w.last;
    d->inflight++;
    return true;
}

/* Fills the device's window, taking groups in turn so that one long backlog
 * does not hold back the others. Returns true when the device had nothing
 * left and was freed. */
static bool pump(struct chat_plugin *pl, struct chat_device **link)
{
    struct chat_device *d = *link;
    unsigned idle = 0;
    unsigned ngroups = 0;
    for (struct replay_group *g = d->groups; g; g = g->next) {
        ngroups++;
    }
    while (d->inflight < pl->cfg.replay_window && d->groups && idle < ngroups) {
        struct replay_group *g = d->rr ? d->rr : d->groups;
        d->rr = g->next;
        if (send_page(pl, d, g)) {
            idle = 0;
        } else {
            idle++;
        }
    }
    /* Drop groups that are fully sent and acked; drop the device when none
     * is left. */
    struct replay_group **gl = &d->groups;
    while (*gl) {
        if ((*gl)->sent >= (*gl)->target && (*gl)->n_out == 0) {
            group_remove(d, gl);
        } else {
            gl = &(*gl)->next;
        }
    }
    if (!d->groups) {
        device_remove(link);
        return true;
    }
    return false;
}

void chat_replay_start(struct chat_plugin *pl, const struct mosquitto *client, const char *group)
{
    const char *client_id = mosquitto_client_id(client);
    const char *member = chat_member_of(client);
    struct chat_device **link = NULL;
    uint64_t cursor = 0, head = 0;
    bool found = false;

    if (!client_id || !member) {
        return;
    }
    chat_err rc = chat_store_cursor_start(pl->store, group, member, client_id, &cursor, &found);
    if (rc == CHAT_OK) {
        rc = chat_store_head(pl->store, group, &head);
    }
    if (rc != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: catch-up of %s in %s: %s", client_id,
                             group, chat_strerror(rc));
        return;
    }
    struct chat_device *d = device_find(pl, client_id, &link);
    if (!found || head <= cursor) {
        if (d) {
            chat_replay_stop(pl, client_id, group);
        }
        return;
    }
    if (!d) {
        d = calloc(1, sizeof(*d));
        if (!d || !(d->client_id = strdup(client_id)) || !(d->member = strdup(member))) {
            device_free(d);
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory");
            return;
        }
        d->next = pl->devices;
        pl->devices = d;
        link = &pl->devices;
    }
    struct replay_group *g = group_find(d, group, NULL);
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g || !(g->group = strdup(group))) {
            group_free(g);
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory");
            if (!d->groups) {
                device_remove(link);
            }
            return;
        }
        g->next = d->groups;
        d->groups = g;
    }
    /* A new subscribe or sync restarts from the cursor at once. */
    d->inflight -= g->n_out;
    g->n_out = 0;
    g->acked = cursor;
    g->sent = cursor;
    g->target = head;
    d->last_progress = time(NULL);
    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: catch-up of %s in %s from %llu to %llu",
                         client_id, group, (unsigned long long)cursor, (unsigned long long)head);
    (void)pump(pl, link);
}

void chat_replay_acked(struct chat_plugin *pl, const char *client_id, const char *group,
                       uint64_t acked)
{
    struct chat_device **link = NULL;
    struct chat_device *d = device_find(pl, client_id, &link);
    struct replay_group *g = d ? group_find(d, group, NULL) : NULL;
    if (!g || acked <= g->acked) {
        return;
    }
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
    g->n_out = keep;
    d->last_progress = time(NULL);
    (void)pump(pl, link);
}

void chat_replay_stop(struct chat_plugin *pl, const char *client_id, const char *group)
{
    struct chat_device **link = NULL;
    struct chat_device *d = device_find(pl, client_id, &link);
    if (!d) {
        return;
    }
    if (!group) {
        device_remove(link);
        return;
    }
    struct replay_group **gl = NULL;
    if (group_find(d, group, &gl)) {
        group_remove(d, gl);
    }
    if (!d->groups) {
        device_remove(link);
    }
}

void chat_replay_stop_member(struct chat_plugin *pl, const char *member, const char *group)
{
    struct chat_device **link = &pl->devices;
    while (*link) {
        struct chat_device *d = *link;
        struct replay_group **gl = NULL;
        if (!strcmp(d->member, member) && group_find(d, group, &gl)) {
            group_remove(d, gl);
            if (!d->groups) {
                device_remove(link);
                continue;
            }
        }
        link = &d->next;
    }
}

void chat_replay_tick(struct chat_plugin *pl, time_t now)
{
    if (now == pl->last_timeout_scan) {
        return;
    }
    pl->last_timeout_scan = now;
    struct chat_device **link = &pl->devices;
    while (*link) {
        struct chat_device *d = *link;
        if (d->inflight == 0 || now - d->last_progress < (time_t)pl->cfg.replay_timeout) {
            link = &d->next;
            continue;
        }
        /* Pages were lost or the device stalled: send again from the cursor. */
        mosquitto_log_printf(MOSQ_LOG_INFO,
                             "mosquitto-chat: no ack from %s for %u s, resending from its cursor",
                             d->client_id, pl->cfg.replay_timeout);
        for (struct replay_group *g = d->groups; g; g = g->next) {
            g->sent = g->acked;
            g->n_out = 0;
        }
        d->inflight = 0;
        d->last_progress = now;
        if (!pump(pl, link)) {
            link = &d->next;
        }
    }
}

void chat_replay_free_all(struct chat_plugin *pl)
{
    while (pl->devices) {
        device_remove(&pl->devices);
    }
}
