/* presence_push.c: the coalesced pushes of `reads` and `presence` entries
 * to the devices subscribed to a group, sent from the tick within a bounded
 * amount of work (invariants push-cursor and tick-bound of presence.h). */
#include "presence.h"
#include "chat_mono.h"
#include "reply.h"

#include <stdlib.h>
#include <string.h>

#define SENDS_PER_TICK 500u       /* pushes published per tick, over all groups */
#define BYTES_PER_TICK (2u << 20) /* ... and their bytes */
#define TICK_BUDGET_US 3000       /* ... and the time spent */
#define PUSH_MAX (1u << 20)       /* bytes of one push; the rest waits for the next */
/* Members one push says, and members written into pushes per tick: with
 * 50,000 devices coming online together a push of every name took 45-70 ms
 * to build, in one tick. */
#define PUSH_NAMES 16384u
#define NAMES_PER_TICK PUSH_NAMES
#define DEAD_PER_TICK 4096u /* members of dropped groups freed per tick */

/* What one tick may still do (invariant tick-bound). */
struct budget {
    unsigned sends;
    size_t bytes;
    size_t names;
    bool built; /* a push was built since the clock was last read */
    int64_t deadline_us;
};

static bool budget_left(struct budget *bu)
{
    if (bu->sends >= SENDS_PER_TICK || bu->bytes >= BYTES_PER_TICK || bu->names >= NAMES_PER_TICK) {
        return false;
    }
    /* Ask the clock every 32 sends, and after a build. */
    if (bu->sends % 32 != 0 && !bu->built) {
        return true;
    }
    bu->built = false;
    return chat_mono_us() < bu->deadline_us;
}

/* Appends one member's changes to the entries being built; false (and
 * nothing written) when the push is full. */
static bool say(struct pres_member *m, sbuf *reads, sbuf *on, sbuf *off)
{
    size_t room = CHAT_PROTO_JSON_STRING_MAX(strlen(m->name)) + 32;
    bool online = m->devices > 0;
    if (reads->len + on->len + off->len + room > PUSH_MAX) {
        return false;
    }
    if (m->read > 0) {
        sbuf_puts(reads, reads->len ? "," : "");
        sbuf_json_str(reads, m->name);
        sbuf_add(reads, ":", 1);
        sbuf_u64(reads, m->read);
        m->pushed = m->read;
        m->read = 0;
    }
    if (online != m->announced || m->toggled) {
        sbuf *list = online ? on : off;
        sbuf_puts(list, list->len ? "," : "");
        sbuf_json_str(list, m->name);
        m->announced = online;
        m->toggled = false;
    }
    return true;
}

/* Builds g's next push from its changed list (invariant push-cursor), to go out from
 * the first subscriber on. Leaves nothing under way when there is nothing
 * to say or no memory. Returns the members it took from the list. */
static size_t push_build(struct pres_group *g)
{
    sbuf reads = {0}, on = {0}, off = {0};
    size_t used = 0;

    for (; used < g->nchanged && used < PUSH_NAMES; used++) {
        struct pres_member *m = g->changed[used];
        if (!say(m, &reads, &on, &off)) {
            break;
        }
        m->dirty = false;
        if (m->devices == 0 && !m->announced && m->read == 0) {
            chat_hmap_remove(g->members, m->name, strlen(m->name));
            free(m);
        }
    }
    /* What did not fit waits, in order, for the next push. */
    memmove(g->changed, g->changed + used, (g->nchanged - used) * sizeof(struct pres_member *));
    g->nchanged -= used;
    if (reads.len || on.len || off.len) {
        sbuf *p = &g->payload;
        sbuf_puts(p, "{\"responses\":[");
        if (reads.len) {
            sbuf_puts(p, "{\"command\":\"reads\",\"group\":");
            sbuf_json_str(p, g->name);
            sbuf_puts(p, ",\"reads\":{");
            sbuf_add(p, reads.data, reads.len);
            sbuf_puts(p, "}}");
        }
        if (on.len || off.len) {
            sbuf_puts(p, reads.len ? ",{\"command\":\"presence\",\"group\":"
                                   : "{\"command\":\"presence\",\"group\":");
            sbuf_json_str(p, g->name);
            sbuf_puts(p, ",\"online\":[");
            sbuf_add(p, on.data ? on.data : "", on.len);
            sbuf_puts(p, "],\"offline\":[");
            sbuf_add(p, off.data ? off.data : "", off.len);
            sbuf_puts(p, "]}");
        }
        sbuf_puts(p, "]}");
        if (p->failed || reads.failed || on.failed || off.failed) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: out of memory: a push of %s is lost", g->name);
            pres_push_clear(g);
        } else {
            g->pushing = true;
            g->cursor = 0;
        }
    }
    sbuf_free(&reads);
    sbuf_free(&on);
    sbuf_free(&off);
    return used;
}

/* Sends g's push under way to as many devices as bu allows. */
static void push_send(struct chat_plugin *pl, struct pres_group *g, struct budget *bu)
{
    struct chat_presence *ps = pl->presence;
    while (g->cursor < g->nsubs && budget_left(bu)) {
        const struct pres_device *d = g->subs[g->cursor++]->d;
        /* PROTOCOL.md v1.2: pushes only to a device that subscribed to the
         * response topic; and none to a device the broker would no longer
         * let read the group (a right taken away since it subscribed: the
         * verdict is remembered per device, asked again when it may have
         * changed). */
        if (!chat_peer_pushes(pl, d->id) ||
            chat_access_decide(pl, d->client, g->name, CHAT_DO_PUSH).verdict != CHAT_ALLOW) {
            ps->skipped++;
            bu->sends++; /* work of the tick too */
            continue;
        }
        const char *id = d->id;
        bu->sends++;
        bu->bytes += g->payload.len;
        if (chat_push(pl, id, g->payload.data, g->payload.len)) {
            ps->pushes++;
        } else {
            ps->skipped++;
        }
    }
    if (g->cursor >= g->nsubs) {
        pres_push_clear(g);
    }
}

void chat_presence_tick(struct chat_plugin *pl, int64_t now_ms)
{
    struct chat_presence *ps = pl->presence;
    struct budget bu = {0, 0, 0, false, chat_mono_us() + TICK_BUDGET_US};
    size_t n = 0;

    pres_dead_reap(ps, DEAD_PER_TICK);

    for (struct pres_group *g = ps->head; g; g = g->next) {
        n++;
    }
    /* Each active group once, in turn: served from the head, then moved to
     * the tail, so that the next tick begins where this one stopped. */
    for (size_t i = 0; i < n && ps->head && budget_left(&bu); i++) {
        struct pres_group *g = ps->head;
        pres_active_remove(ps, g);
        if (!g->pushing && g->nchanged > 0 &&
            now_ms - g->last_push_ms >= (int64_t)pl->cfg.receipt_interval) {
            g->last_push_ms = now_ms;
            bu.names += push_build(g);
            bu.built = true;
        }
        if (g->pushing) {
            push_send(pl, g, &bu);
        }
        if (g->pushing || g->nchanged > 0) {
            pres_active_add(ps, g);
        }
    }
}
