/* presence.c: who is online in each group (protocol v1.1, Presence), and
 * the coalesced pushes of `reads` and `presence` entries to the devices
 * subscribed to a group.
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
 * Invariants:
 *   1. A device is linked to a group at most once; a link is in its
 *      device's array and in its group's subs[link->slot]. A device has at
 *      most MAX_LINKS links; a further subscription is not counted (logged).
 *   2. A member's entry in a group counts its linked devices (devices); it
 *      is online while devices > 0.
 *   3. A member entry exists while devices > 0 or it is in the group's
 *      changed list (dirty): a state the last push did not say yet
 *      (online != announced) or a read marker that moved (read > 0).
 *   4. A group exists while it has subscribed devices: when the last one
 *      goes, nobody is left to tell, and the group, its members and any
 *      push under way go with it. So everything here is bounded by the
 *      connected clients' subscriptions and the reads of one interval.
 *   5. A group pushes at most once per receipt_interval, one message that
 *      holds every change since its last push (what exceeds PUSH_MAX bytes
 *      waits for the next one), sent to the devices subscribed while it goes
 *      out: those in subs[0, cursor) have it, those from cursor on get it
 *      in turn. Removing a device keeps that so (see subs_remove), and a
 *      device that comes meanwhile gets it too. So a push costs no copy of
 *      the group's subscribers, whatever their number.
 *   6. The work of one tick is bounded: at most SENDS_PER_TICK pushes,
 *      BYTES_PER_TICK bytes and TICK_BUDGET_US of time, over all groups in
 *      turn (a push to 10,000 devices spreads over several ticks), and a
 *      group starts its next push only once the last one went out. The
 *      broker copies each push to its client's queue at the start of its
 *      next loop pass, outside our tick: the bounds keep that pass short
 *      too (measured: docs/benchmarks.md, Receipts and presence). A pass
 *      that has nothing else to do comes 100 ms after the last one, so a
 *      push reaches about 5,000 devices a second.
 */
#include "plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINKS 1024u           /* groups one device is counted online in */
#define SENDS_PER_TICK 500u       /* pushes published per tick, over all groups */
#define BYTES_PER_TICK (2u << 20) /* ... and their bytes */
#define TICK_BUDGET_US 3000       /* ... and the time spent */
#define PUSH_MAX (1u << 20)       /* bytes of one push; the rest waits for the next */
#define LIMIT_LOG_EVERY_MS 10000  /* one log line per period about MAX_LINKS */

struct pres_group;
struct pres_device;

/* A device subscribed to a group (invariant 1). */
struct pres_link {
    struct pres_group *g;
    struct pres_device *d;
    size_t slot; /* its index in g->subs */
};

struct pres_device {
    char *id;                 /* client id: the key in devices */
    char *member;             /* whom it speaks for */
    struct pres_link **links; /* the groups it is online in */
    size_t nlinks, cap;
};

/* A member with something to say in one group (invariants 2, 3). */
struct pres_member {
    unsigned devices; /* its devices linked to the group */
    bool announced;   /* online, as the group's last push said */
    bool dirty;       /* in the group's changed list */
    uint64_t read;    /* read marker to push; 0: none */
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
    /* A push under way (invariant 5): its payload, and where it stands. */
    bool pushing;
    sbuf payload;
    size_t cursor; /* subs[0, cursor) have it */
    /* In the active list: something changed, or a push is under way. */
    bool active;
    struct pres_group *next, *prev;
};

struct chat_presence {
    chat_hmap *groups;              /* name -> struct pres_group */
    chat_hmap *devices;             /* client id -> struct pres_device */
    struct pres_group *head, *tail; /* the active groups, served in turn */
    int64_t limit_log_ms;
    uint64_t pushes, skipped; /* sent; not sent (over a client's budget) */
};

/* ===========================================================================
 * Lists and lifetimes
 * ========================================================================= */

static void active_add(struct chat_presence *ps, struct pres_group *g)
{
    if (g->active) {
        return;
    }
    g->active = true;
    g->next = NULL;
    g->prev = ps->tail;
    if (ps->tail) {
        ps->tail->next = g;
    } else {
        ps->head = g;
    }
    ps->tail = g;
}

static void active_remove(struct chat_presence *ps, struct pres_group *g)
{
    if (!g->active) {
        return;
    }
    if (g->prev) {
        g->prev->next = g->next;
    } else {
        ps->head = g->next;
    }
    if (g->next) {
        g->next->prev = g->prev;
    } else {
        ps->tail = g->prev;
    }
    g->active = false;
    g->next = g->prev = NULL;
}

static void push_clear(struct pres_group *g)
{
    sbuf_free(&g->payload);
    g->pushing = false;
    g->cursor = 0;
}

/* Takes subs[slot] out of g's array, keeping invariant 5: a device that
 * has not had the push under way never lands below the cursor. */
static void subs_remove(struct pres_group *g, size_t slot)
{
    size_t last = --g->nsubs;
    if (g->pushing && slot < g->cursor) {
        /* The freed slot is among those served: fill it with the last one
         * served, and that one's slot with the last one of all (unserved),
         * which becomes the next to serve. */
        size_t served = --g->cursor;
        g->subs[slot] = g->subs[served];
        g->subs[slot]->slot = slot;
        slot = served;
    }
    if (slot != last) {
        g->subs[slot] = g->subs[last];
        g->subs[slot]->slot = slot;
    }
}

static void group_free(void *p)
{
    struct pres_group *g = p;
    if (!g) {
        return;
    }
    chat_hmap_destroy(g->members, free);
    push_clear(g);
    for (size_t i = 0; i < g->nsubs; i++) {
        free(g->subs[i]);
    }
    free(g->subs);
    free(g->changed);
    free(g->name);
    free(g);
}

static void device_free(void *p)
{
    struct pres_device *d = p;
    if (d) {
        free(d->links);
        free(d->id);
        free(d->member);
        free(d);
    }
}

bool chat_presence_init(struct chat_plugin *pl)
{
    struct chat_presence *ps = calloc(1, sizeof(*ps));
    if (!ps || !(ps->groups = chat_hmap_create()) || !(ps->devices = chat_hmap_create())) {
        if (ps) {
            chat_hmap_destroy(ps->groups, NULL);
        }
        free(ps);
        return false;
    }
    pl->presence = ps;
    return true;
}

void chat_presence_free(struct chat_plugin *pl)
{
    struct chat_presence *ps = pl->presence;
    if (!ps) {
        return;
    }
    /* Links belong to their groups (freed there); devices only point. */
    chat_hmap_destroy(ps->groups, group_free);
    chat_hmap_destroy(ps->devices, device_free);
    free(ps);
    pl->presence = NULL;
}

static struct pres_group *group_find(struct chat_presence *ps, const char *name)
{
    return chat_hmap_get(ps->groups, name, strlen(name));
}

/* Drops a group: nobody is left subscribed (invariant 4), or it was
 * deleted. Its links leave their devices' arrays first. */
static void group_drop(struct chat_presence *ps, struct pres_group *g)
{
    for (size_t i = 0; i < g->nsubs; i++) {
        struct pres_device *d = g->subs[i]->d;
        for (size_t j = 0; j < d->nlinks; j++) {
            if (d->links[j] == g->subs[i]) {
                d->links[j] = d->links[--d->nlinks];
                break;
            }
        }
    }
    active_remove(ps, g);
    chat_hmap_remove(ps->groups, g->name, strlen(g->name));
    group_free(g);
}

/* The member's entry in g, created (offline, nothing to say) when create
 * is set; NULL when absent or out of memory. */
static struct pres_member *member_get(struct pres_group *g, const char *name, bool create)
{
    size_t len = strlen(name);
    struct pres_member *m = chat_hmap_get(g->members, name, len);
    if (m || !create) {
        return m;
    }
    m = calloc(1, sizeof(*m) + len + 1);
    if (!m) {
        return NULL;
    }
    memcpy(m->name, name, len + 1);
    if (!chat_hmap_put(g->members, name, len, m, NULL)) {
        free(m);
        return NULL;
    }
    return m;
}

/* Puts m in g's changed list (invariant 3) and g in the active list. */
static void mark(struct chat_presence *ps, struct pres_group *g, struct pres_member *m)
{
    if (!m->dirty) {
        if (g->nchanged == g->changed_cap) {
            size_t cap = g->changed_cap ? g->changed_cap * 2 : 16;
            struct pres_member **n = realloc(g->changed, cap * sizeof(*n));
            if (!n) {
                return; /* not said: the next change of m tries again */
            }
            g->changed = n;
            g->changed_cap = cap;
        }
        g->changed[g->nchanged++] = m;
        m->dirty = true;
    }
    active_add(ps, g);
}

/* Removes link from its group (and the group when it was the last) and
 * from its device's array at index j; the member may go offline. */
static void unlink_at(struct chat_presence *ps, struct pres_device *d, size_t j)
{
    struct pres_link *l = d->links[j];
    struct pres_group *g = l->g;
    d->links[j] = d->links[--d->nlinks];
    subs_remove(g, l->slot);
    free(l);
    if (g->nsubs == 0) {
        group_drop(ps, g);
        return;
    }
    struct pres_member *m = member_get(g, d->member, false);
    if (m && m->devices > 0 && --m->devices == 0 && m->announced) {
        mark(ps, g, m);
    }
}

/* ===========================================================================
 * Events
 * ========================================================================= */

void chat_presence_subscribed(struct chat_plugin *pl, struct mosquitto *client, const char *group)
{
    struct chat_presence *ps = pl->presence;
    const char *id = mosquitto_client_id(client);
    char buf[CHAT_MEMBER_BUF];
    const char *why = NULL;
    const char *member = chat_member(pl, client, buf, &why);
    struct pres_link *l = NULL;

    if (!id || !member) {
        return;
    }
    /* Alone, our answer to the subscribe was the broker's; behind other
     * checkers it may yet be refused: count it only when the broker's own
     * checks let the client read the group, and not when they cannot be
     * asked (fail closed: it is then not seen online). */
    if (pl->cfg.acl_mode != CHAT_ACL_ALLOW && !chat_may_read(pl, client, group, &why)) {
        return;
    }
    size_t idlen = strlen(id);
    struct pres_device *d = chat_hmap_get(ps->devices, id, idlen);
    if (d) {
        for (size_t j = 0; j < d->nlinks; j++) {
            if (!strcmp(d->links[j]->g->name, group)) {
                return; /* subscribed again: nothing changes */
            }
        }
        if (d->nlinks >= MAX_LINKS) {
            int64_t now = chat_now_ms();
            if (now - ps->limit_log_ms >= LIMIT_LOG_EVERY_MS) {
                ps->limit_log_ms = now;
                mosquitto_log_printf(MOSQ_LOG_NOTICE,
                                     "mosquitto-chat: %s is subscribed to more than %u groups; "
                                     "not counting it online in %s",
                                     id, MAX_LINKS, group);
            }
            return;
        }
    } else {
        d = calloc(1, sizeof(*d));
        if (!d || !(d->id = strdup(id)) || !(d->member = strdup(member)) ||
            !chat_hmap_put(ps->devices, id, idlen, d, NULL)) {
            device_free(d);
            goto oom;
        }
    }
    struct pres_group *g = group_find(ps, group);
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g || !(g->name = strdup(group)) || !(g->members = chat_hmap_create()) ||
            !chat_hmap_put(ps->groups, group, strlen(group), g, NULL)) {
            group_free(g);
            g = NULL;
        }
    }
    struct pres_member *m = g ? member_get(g, d->member, true) : NULL;
    l = m ? calloc(1, sizeof(*l)) : NULL;
    if (l && g->nsubs == g->subs_cap) {
        size_t cap = g->subs_cap ? g->subs_cap * 2 : 8;
        struct pres_link **n = realloc(g->subs, cap * sizeof(*n));
        if (n) {
            g->subs = n;
            g->subs_cap = cap;
        }
    }
    if (l && d->nlinks == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct pres_link **n = realloc(d->links, cap * sizeof(*n));
        if (n) {
            d->links = n;
            d->cap = cap;
        }
    }
    if (!l || g->nsubs == g->subs_cap || d->nlinks == d->cap) {
        free(l);
        if (g && g->nsubs == 0) {
            group_drop(ps, g);
        }
        if (d->nlinks == 0) {
            chat_hmap_remove(ps->devices, id, idlen);
            device_free(d);
        }
        goto oom;
    }
    *l = (struct pres_link){.g = g, .d = d, .slot = g->nsubs};
    g->subs[g->nsubs++] = l;
    d->links[d->nlinks++] = l;
    if (m->devices++ == 0 && !m->announced) {
        mark(ps, g, m);
    }
    return;

oom:
    mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory: %s not counted online in %s",
                         id, group);
}

void chat_presence_unsubscribed(struct chat_plugin *pl, const char *client_id, const char *group)
{
    struct chat_presence *ps = pl->presence;
    size_t idlen = strlen(client_id);
    struct pres_device *d = chat_hmap_get(ps->devices, client_id, idlen);
    if (!d) {
        return;
    }
    for (size_t j = 0; j < d->nlinks; j++) {
        if (!strcmp(d->links[j]->g->name, group)) {
            unlink_at(ps, d, j);
            break;
        }
    }
    if (d->nlinks == 0) {
        chat_hmap_remove(ps->devices, client_id, idlen);
        device_free(d);
    }
}

void chat_presence_disconnected(struct chat_plugin *pl, const char *client_id)
{
    struct chat_presence *ps = pl->presence;
    size_t idlen = strlen(client_id);
    struct pres_device *d = chat_hmap_remove(ps->devices, client_id, idlen);
    if (!d) {
        return;
    }
    while (d->nlinks > 0) {
        unlink_at(ps, d, d->nlinks - 1);
    }
    device_free(d);
}

void chat_presence_left(struct chat_plugin *pl, const char *member, const char *group)
{
    struct chat_presence *ps = pl->presence;
    struct pres_group *g = group_find(ps, group);
    size_t i = g ? g->nsubs : 0;

    /* Its devices stay subscribed at the broker, but a non-member is
     * pushed nothing and counts for nobody. Down from the end: unlinking
     * moves the last link, already seen, into the freed slot. */
    while (i > 0) {
        struct pres_device *d = g->subs[--i]->d;
        if (strcmp(d->member, member) != 0) {
            continue;
        }
        bool last = g->nsubs == 1;
        for (size_t j = 0; j < d->nlinks; j++) {
            if (d->links[j]->g == g) {
                unlink_at(ps, d, j);
                break;
            }
        }
        if (d->nlinks == 0) {
            chat_hmap_remove(ps->devices, d->id, strlen(d->id));
            device_free(d);
        }
        if (last) {
            break; /* the group went with its last device */
        }
    }
}

void chat_presence_forget_group(struct chat_plugin *pl, const char *group)
{
    struct chat_presence *ps = pl->presence;
    struct pres_group *g = group_find(ps, group);
    if (!g) {
        return;
    }
    /* Collect the devices first: dropping the group empties their arrays. */
    size_t n = g->nsubs;
    struct pres_device **ds = malloc((n ? n : 1) * sizeof(*ds));
    for (size_t i = 0; ds && i < n; i++) {
        ds[i] = g->subs[i]->d;
    }
    group_drop(ps, g);
    for (size_t i = 0; ds && i < n; i++) {
        if (ds[i]->nlinks == 0) {
            chat_hmap_remove(ps->devices, ds[i]->id, strlen(ds[i]->id));
            device_free(ds[i]);
        }
    }
    free(ds);
}

void chat_presence_read(struct chat_plugin *pl, const char *group, const char *member,
                        uint64_t read)
{
    struct chat_presence *ps = pl->presence;
    struct pres_group *g = group_find(ps, group);
    if (!g) {
        return; /* nobody subscribed: nobody to tell */
    }
    struct pres_member *m = member_get(g, member, true);
    if (!m) {
        return;
    }
    if (read > m->read) {
        m->read = read;
    }
    mark(ps, g, m);
}

/* ===========================================================================
 * The presence command
 * ========================================================================= */

struct online_list {
    const char *after;
    const char **names;
    size_t n, cap;
    bool failed;
};

static bool collect_online(void *ctx, const void *key, size_t len, void *val)
{
    struct online_list *o = ctx;
    struct pres_member *m = val;
    (void)key;
    (void)len;
    if (m->devices == 0 || (o->after && strcmp(m->name, o->after) <= 0)) {
        return false;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        const char **n = realloc(o->names, cap * sizeof(*n));
        if (!n) {
            o->failed = true;
            return false;
        }
        o->names = n;
        o->cap = cap;
    }
    o->names[o->n++] = m->name;
    return false;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *chat_presence_answer(struct chat_plugin *pl, struct mosquitto *client,
                                 const char *group, const char *after, size_t limit, sbuf *b,
                                 size_t cap)
{
    const char *why = NULL;
    uint64_t members = 0;
    struct online_list o = {.after = after && after[0] ? after : NULL};
    struct pres_group *g = group_find(pl->presence, group);

    /* As receipts: nobody else learns who is online, nor the count. */
    if (!chat_admit(pl, client, group, false, &why) || !chat_may_read(pl, client, group, &why)) {
        return why;
    }
    chat_err rc = chat_store_member_count(pl->store, group, &members);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "member count of %s", group);
        return "storage error";
    }
    if (g) {
        chat_hmap_foreach(g->members, collect_online, &o);
    }
    if (o.failed) {
        free(o.names);
        return "out of memory";
    }
    /* In name order, so that "after" pages through them as receipts do. */
    if (o.n > 1) {
        qsort(o.names, o.n, sizeof(*o.names), by_name);
    }
    sbuf_puts(b, ",\"online\":[");
    size_t i = 0;
    for (; i < o.n && i < limit; i++) {
        size_t len = strlen(o.names[i]);
        if (b->len + CHAT_PROTO_JSON_STRING_MAX(len) + 256 > cap) {
            break;
        }
        sbuf_puts(b, i ? "," : "");
        sbuf_json_str(b, o.names[i]);
    }
    sbuf_puts(b, "],\"members\":");
    sbuf_u64(b, members);
    if (i < o.n && i > 0) {
        sbuf_puts(b, ",\"more\":true,\"after\":");
        sbuf_json_str(b, o.names[i - 1]);
    } else {
        sbuf_puts(b, ",\"more\":false");
    }
    free(o.names);
    return NULL;
}

/* ===========================================================================
 * Pushes
 * ========================================================================= */

/* What one tick may still do (invariant 6). */
struct budget {
    unsigned sends;
    size_t bytes;
    int64_t deadline_us;
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static bool budget_left(struct budget *bu)
{
    if (bu->sends >= SENDS_PER_TICK || bu->bytes >= BYTES_PER_TICK) {
        return false;
    }
    /* The clock costs a system call's worth: ask it every 32 sends. */
    return bu->sends % 32 != 0 || mono_us() < bu->deadline_us;
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
        m->read = 0;
    }
    if (online != m->announced) {
        sbuf *list = online ? on : off;
        sbuf_puts(list, list->len ? "," : "");
        sbuf_json_str(list, m->name);
        m->announced = online;
    }
    return true;
}

/* Builds g's next push from its changed list (invariant 5), to go out from
 * the first subscriber on. Leaves nothing under way when there is nothing
 * to say or no memory. */
static void push_build(struct pres_group *g)
{
    sbuf reads = {0}, on = {0}, off = {0};
    size_t used = 0;

    for (; used < g->nchanged; used++) {
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
    memmove(g->changed, g->changed + used, (g->nchanged - used) * sizeof(*g->changed));
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
            push_clear(g);
        } else {
            g->pushing = true;
            g->cursor = 0;
        }
    }
    sbuf_free(&reads);
    sbuf_free(&on);
    sbuf_free(&off);
}

/* Sends g's push under way to as many devices as bu allows. */
static void push_send(struct chat_plugin *pl, struct pres_group *g, struct budget *bu)
{
    struct chat_presence *ps = pl->presence;
    while (g->cursor < g->nsubs && budget_left(bu)) {
        const char *id = g->subs[g->cursor++]->d->id;
        bu->sends++;
        bu->bytes += g->payload.len;
        if (chat_push(pl, id, g->payload.data, g->payload.len)) {
            ps->pushes++;
        } else {
            ps->skipped++;
        }
    }
    if (g->cursor >= g->nsubs) {
        push_clear(g);
    }
}

void chat_presence_tick(struct chat_plugin *pl, int64_t now_ms)
{
    struct chat_presence *ps = pl->presence;
    struct budget bu = {0, 0, mono_us() + TICK_BUDGET_US};
    size_t n = 0;

    for (struct pres_group *g = ps->head; g; g = g->next) {
        n++;
    }
    /* Each active group once, in turn: served from the head, then moved to
     * the tail, so that the next tick begins where this one stopped. */
    for (size_t i = 0; i < n && ps->head && budget_left(&bu); i++) {
        struct pres_group *g = ps->head;
        active_remove(ps, g);
        if (!g->pushing && g->nchanged > 0 &&
            now_ms - g->last_push_ms >= (int64_t)pl->cfg.receipt_interval) {
            g->last_push_ms = now_ms;
            push_build(g);
        }
        if (g->pushing) {
            push_send(pl, g, &bu);
        }
        if (g->pushing || g->nchanged > 0) {
            active_add(ps, g);
        }
    }
}
