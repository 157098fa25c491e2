/* presence_state.c: the presence module's state, its lists and its
 * lifetimes, which keep invariants link-once, member-devices, member-entry
 * and group-lifetime of presence.h for presence.c
 * (the events) and presence_push.c (the pushes) alike. */
#include "presence.h"

#include <stdlib.h>
#include <string.h>

void pres_active_add(struct chat_presence *ps, struct pres_group *g)
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

void pres_active_remove(struct chat_presence *ps, struct pres_group *g)
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

/* Takes d out of the stamp queue, if it is in it. */
static void stamp_unqueue(struct chat_presence *ps, struct pres_device *d)
{
    if (d->stamp_prev) {
        d->stamp_prev->stamp_next = d->stamp_next;
    } else if (ps->stamp_head == d) {
        ps->stamp_head = d->stamp_next;
    }
    if (d->stamp_next) {
        d->stamp_next->stamp_prev = d->stamp_prev;
    } else if (ps->stamp_tail == d) {
        ps->stamp_tail = d->stamp_prev;
    }
    d->stamp_prev = d->stamp_next = NULL;
}

void pres_stamp_front(struct chat_presence *ps, struct pres_device *d)
{
    stamp_unqueue(ps, d);
    d->stamp_next = ps->stamp_head;
    if (ps->stamp_head) {
        ps->stamp_head->stamp_prev = d;
    } else {
        ps->stamp_tail = d;
    }
    ps->stamp_head = d;
}

void pres_stamp_back(struct chat_presence *ps, struct pres_device *d)
{
    stamp_unqueue(ps, d);
    d->stamp_prev = ps->stamp_tail;
    if (ps->stamp_tail) {
        ps->stamp_tail->stamp_next = d;
    } else {
        ps->stamp_head = d;
    }
    ps->stamp_tail = d;
}

void pres_device_drop(struct chat_presence *ps, struct pres_device *d)
{
    stamp_unqueue(ps, d);
    chat_hmap_remove(ps->devices, d->id, strlen(d->id));
    pres_device_free(d);
}

void pres_push_clear(struct pres_group *g)
{
    sbuf_free(&g->payload);
    g->pushing = false;
    g->cursor = 0;
}

/* Takes subs[slot] out of g's array, keeping invariant push-cursor: a device that
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

void pres_group_free(void *p)
{
    struct pres_group *g = p;
    if (!g) {
        return;
    }
    chat_hmap_destroy(g->members, free);
    pres_push_clear(g);
    for (size_t i = 0; i < g->nsubs; i++) {
        free(g->subs[i]);
    }
    free(g->subs);
    free(g->changed);
    free(g->name);
    free(g);
}

void pres_device_free(void *p)
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
    chat_hmap_destroy(ps->groups, pres_group_free);
    while (ps->dead) {
        struct pres_group *g = ps->dead;
        ps->dead = g->next;
        pres_group_free(g);
    }
    chat_hmap_destroy(ps->devices, pres_device_free);
    free(ps);
    pl->presence = NULL;
}

struct pres_group *pres_group_find(struct chat_presence *ps, const char *name)
{
    return chat_hmap_get(ps->groups, name, strlen(name));
}

/* Drops a group: nobody is left subscribed (invariant group-lifetime), or it was
 * deleted. Its links leave their devices' arrays first. */
void pres_group_drop(struct chat_presence *ps, struct pres_group *g)
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
    pres_active_remove(ps, g);
    chat_hmap_remove(ps->groups, g->name, strlen(g->name));
    pres_push_clear(g);
    for (size_t i = 0; i < g->nsubs; i++) {
        free(g->subs[i]);
    }
    g->nsubs = 0;
    g->nchanged = 0; /* the members it points to go with the group */
    g->next = ps->dead;
    ps->dead = g;
}

void pres_dead_reap(struct chat_presence *ps, size_t n)
{
    while (ps->dead && n > 0) {
        struct pres_group *g = ps->dead;
        size_t had = chat_hmap_count(g->members);
        size_t left = chat_hmap_drain(g->members, n, free);
        if (left > 0) {
            return; /* n used up */
        }
        n -= had;
        ps->dead = g->next;
        pres_group_free(g);
    }
}

/* The member's entry in g, created (offline, nothing to say) when create
 * is set; NULL when absent or out of memory. */
struct pres_member *pres_member_get(struct pres_group *g, const char *name, bool create)
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

/* Puts m in g's changed list (invariant member-entry) and g in the active list. */
void pres_mark(struct chat_presence *ps, struct pres_group *g, struct pres_member *m)
{
    if (!m->dirty) {
        if (g->nchanged == g->changed_cap) {
            size_t cap = g->changed_cap ? g->changed_cap * 2 : 16;
            struct pres_member **n = realloc(g->changed, cap * sizeof(struct pres_member *));
            if (!n) {
                return; /* not said: the next change of m tries again */
            }
            g->changed = n;
            g->changed_cap = cap;
        }
        g->changed[g->nchanged++] = m;
        m->dirty = true;
    }
    pres_active_add(ps, g);
}

/* Removes link from its group (and the group when it was the last) and
 * from its device's array at index j; the member may go offline. */
void pres_unlink_at(struct chat_presence *ps, struct pres_device *d, size_t j)
{
    struct pres_link *l = d->links[j];
    struct pres_group *g = l->g;
    d->links[j] = d->links[--d->nlinks];
    subs_remove(g, l->slot);
    free(l);
    if (g->nsubs == 0) {
        pres_group_drop(ps, g);
        return;
    }
    struct pres_member *m = pres_member_get(g, d->member, false);
    if (m && m->devices > 0 && --m->devices == 0) {
        m->toggled = true;
        pres_mark(ps, g, m);
    }
}
