/* presence.c: who is online in each group (protocol v1.1, Presence): the
 * broker's events that change it, and the presence command that reads it.
 * The state, its invariants and what the plugin can and cannot see of a
 * device are described in presence.h. */
#include "presence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINKS 1024u          /* groups one device is counted online in */
#define LIMIT_LOG_EVERY_MS 10000 /* one log line per period about MAX_LINKS */

/* ===========================================================================
 * Events
 * ========================================================================= */

void chat_presence_subscribed(struct chat_plugin *pl, struct mosquitto *client, const char *group)
{
    struct chat_presence *ps = pl->presence;
    const char *id = mosquitto_client_id(client);
    char member[CHAT_MEMBER_BUF];
    struct pres_link *l = NULL;
    bool fresh = false; /* d is new: in no stamp queue yet */

    if (!id || chat_member(pl, client, member)) {
        return;
    }
    /* Alone, our answer to the subscribe was the broker's; behind other
     * checkers it may yet be refused: counted only where the broker's own
     * checks let the client read the group (fail closed). */
    if (chat_access_decide(pl, client, group, CHAT_DO_ONLINE).verdict != CHAT_ALLOW) {
        return;
    }
    size_t idlen = strlen(id);
    struct pres_device *d = chat_hmap_get(ps->devices, id, idlen);
    if (d) {
        d->client = client; /* the newest connection of the client id */
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
            pres_device_free(d);
            goto oom;
        }
        d->client = client;
        fresh = true;
    }
    struct pres_group *g = pres_group_find(ps, group);
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g || !(g->name = strdup(group)) || !(g->members = chat_hmap_create()) ||
            !chat_hmap_put(ps->groups, group, strlen(group), g, NULL)) {
            pres_group_free(g);
            g = NULL;
        }
    }
    struct pres_member *m = g ? pres_member_get(g, d->member, true) : NULL;
    l = m ? calloc(1, sizeof(*l)) : NULL;
    if (l && g->nsubs == g->subs_cap) {
        size_t cap = g->subs_cap ? g->subs_cap * 2 : 8;
        struct pres_link **n = realloc(g->subs, cap * sizeof(struct pres_link *));
        if (n) {
            g->subs = n;
            g->subs_cap = cap;
        }
    }
    if (l && d->nlinks == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct pres_link **n = realloc(d->links, cap * sizeof(struct pres_link *));
        if (n) {
            d->links = n;
            d->cap = cap;
        }
    }
    if (!l || g->nsubs == g->subs_cap || d->nlinks == d->cap) {
        free(l);
        if (g && g->nsubs == 0) {
            pres_group_drop(ps, g);
        }
        if (d->nlinks == 0) {
            pres_device_drop(ps, d);
        }
        goto oom;
    }
    /* A subscribe with a catch-up (on_subscribe) has just marked the
     * device used (chat_store_cursor_start); without one, the next
     * marking of online devices does (invariant stamp-queue). */
    int64_t today = chat_now_ms() / 86400000;
    *l =
        (struct pres_link){.g = g, .d = d, .slot = g->nsubs, .stamped = pl->cfg.replay ? today : 0};
    g->subs[g->nsubs++] = l;
    d->links[d->nlinks++] = l;
    if (l->stamped != today) {
        pres_stamp_front(ps, d);
    } else if (fresh) {
        pres_stamp_back(ps, d);
    }
    if (m->devices++ == 0) {
        m->toggled = true;
        pres_mark(ps, g, m);
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
            pres_unlink_at(ps, d, j);
            break;
        }
    }
    if (d->nlinks == 0) {
        pres_device_drop(ps, d);
    }
}

void chat_presence_disconnected(struct chat_plugin *pl, const char *client_id)
{
    struct chat_presence *ps = pl->presence;
    size_t idlen = strlen(client_id);
    struct pres_device *d = chat_hmap_get(ps->devices, client_id, idlen);
    if (!d) {
        return;
    }
    while (d->nlinks > 0) {
        pres_unlink_at(ps, d, d->nlinks - 1);
    }
    pres_device_drop(ps, d);
}

void chat_presence_left(struct chat_plugin *pl, const char *member, const char *group)
{
    struct chat_presence *ps = pl->presence;
    struct pres_group *g = pres_group_find(ps, group);
    size_t i = g ? g->nsubs : 0;
    struct pres_member *m = g ? pres_member_get(g, member, false) : NULL;

    /* Leaving deletes the marker: one who joins again starts at 0, and
     * its reads from there are news again (chat_presence_read). */
    if (m) {
        m->read = 0;
        m->pushed = 0;
    }
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
                pres_unlink_at(ps, d, j);
                break;
            }
        }
        if (d->nlinks == 0) {
            pres_device_drop(ps, d);
        }
        if (last) {
            break; /* the group went with its last device */
        }
    }
}

void chat_presence_forget_group(struct chat_plugin *pl, const char *group)
{
    struct chat_presence *ps = pl->presence;
    struct pres_group *g = pres_group_find(ps, group);
    if (!g) {
        return;
    }
    /* Collect the devices first: dropping the group empties their arrays. */
    size_t n = g->nsubs;
    struct pres_device **ds = malloc((n ? n : 1) * sizeof(struct pres_device *));
    for (size_t i = 0; ds && i < n; i++) {
        ds[i] = g->subs[i]->d;
    }
    pres_group_drop(ps, g);
    for (size_t i = 0; ds && i < n; i++) {
        if (ds[i]->nlinks == 0) {
            pres_device_drop(ps, ds[i]);
        }
    }
    free(ds);
}

bool chat_presence_online(struct chat_plugin *pl, const char *group, const char *member)
{
    struct pres_group *g = pres_group_find(pl->presence, group);
    struct pres_member *m = g ? pres_member_get(g, member, false) : NULL;
    return m && m->devices > 0;
}

void chat_presence_read(struct chat_plugin *pl, const char *group, const char *member,
                        uint64_t read)
{
    struct chat_presence *ps = pl->presence;
    struct pres_group *g = pres_group_find(ps, group);
    if (!g) {
        return; /* nobody subscribed: nobody to tell */
    }
    struct pres_member *m = pres_member_get(g, member, true);
    if (!m) {
        return;
    }
    if (read <= m->read || read <= m->pushed) {
        return; /* to be told, or told already */
    }
    m->read = read;
    pres_mark(ps, g, m);
}

/* ===========================================================================
 * Online devices are in use (device expiry)
 * ========================================================================= */

/* Whether every link of d was marked used on day. */
static bool all_stamped(const struct pres_device *d, int64_t day)
{
    for (size_t j = 0; j < d->nlinks; j++) {
        if (d->links[j]->stamped != day) {
            return false;
        }
    }
    return true;
}

bool chat_presence_stamp(struct chat_plugin *pl, int64_t deadline_ms)
{
    struct chat_presence *ps = pl->presence;
    int64_t day = chat_now_ms() / 86400000;
    size_t n = 0;
    struct pres_device *d;

    /* invariant stamp-queue: the first device found done ends the day's work */
    while ((d = ps->stamp_head) != NULL && !all_stamped(d, day)) {
        for (size_t j = 0; j < d->nlinks; j++) {
            struct pres_link *l = d->links[j];
            uint64_t id = 0;
            bool found = false;
            if (l->stamped == day) {
                continue;
            }
            if (n > 0 && chat_now_ms() >= deadline_ms) {
                ps->stamped += n;
                return false;
            }
            /* As a subscribe marks it: a device that lost its cursor (a
             * subscribe without a catch-up, replay false) gets one where
             * its catch-up would start. A failure is logged and not tried
             * again before tomorrow: the sweep fails on such a store too. */
            chat_err rc =
                chat_store_cursor_start(pl->store, l->g->name, d->member, d->id, &id, &found);
            if (rc != CHAT_OK) {
                chat_log_store_error(pl, rc, "marking %s used in %s", d->id, l->g->name);
            }
            l->stamped = day;
            n++;
        }
        pres_stamp_back(ps, d);
    }
    ps->stamped += n;
    if (ps->stamped > 0) {
        mosquitto_log_printf(MOSQ_LOG_DEBUG,
                             "mosquitto-chat: device expiry: %zu devices online in a group "
                             "marked used",
                             ps->stamped);
        ps->stamped = 0;
    }
    return true;
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
    struct pres_group *g = pres_group_find(pl->presence, group);

    /* As receipts: nobody else learns who is online, nor the count. */
    if ((why = chat_access_list(pl, client, group, &members)) != NULL) {
        return why;
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
