/* fanout.c: which stored messages the broker has fanned out to subscribers,
 * so that a retry of one (its cid stored already) is not delivered live a
 * second time, while one that never went out live still does.
 *
 * When the broker fans a publish out (src/handle_publish.c and subs.c of
 * 2.0.11 to 2.1.2): QoS 0 and 1 right after the message event, in the same
 * call; QoS 2 when the PUBREL comes, on the client's next packet or never
 * (a clean session that ends first). Each subscriber's delivery asks the
 * read check (subs__send), which the plugin sees (chat.c, on_read): the
 * first read check of a stored envelope says it went out. A message with no
 * subscriber at all, or one the broker refused after the event (over the
 * client's incoming quota), never meets one.
 *
 * So a message is "not out yet" from its append until the first read check
 * of its envelope: QoS 2 ones go into a set at once; QoS 0 and 1 ones are
 * kept as the last stored message, which enters the set only if the next
 * stored message (or a retry of it) finds it still not out (its fan-out, if
 * any, happened in between). The set holds FANOUT_MAX messages; the oldest
 * leave it first, and a retry of a message no longer in it is taken as
 * fanned out (nothing twice; those subscribers catch it up by id).
 *
 * A retry of a message not out yet carries the envelope: the first copy may
 * never go out (refused over the quota, its session gone). But the first
 * copy may also be a QoS 2 publish whose PUBREL is still to come, and a
 * client that retries under a new packet id on the same session then has
 * two copies released (the broker matches retransmissions by packet id
 * only). So a message with copies stays in the set, marked, and remembers
 * the payload of the copy whose fan-out came first (the broker hands every
 * subscriber's read check of one copy the same payload, the one the message
 * event set, and two live copies never share an address): the read checks
 * of any other copy are refused (copies-once). Each subscriber gets one
 * copy live, whichever the broker releases first.
 *
 * Ownership: struct chat_fanout is this module's, created by
 * chat_fanout_init and freed by chat_fanout_free. Broker's thread only. */
#include "plugin.h"

#include <stdlib.h>
#include <string.h>

#define FANOUT_MAX 4096 /* messages remembered as not out yet */

/* A key of the set: the group's bytes, a NUL, the id big-endian. */
#define FANOUT_KEY_MAX (CHAT_GROUP_MAX + 1 + 8)

/* A message of the set: its key, and its copies. */
struct fanout_key {
    size_t len;
    char b[FANOUT_KEY_MAX];
    bool copies;       /* a retry carried it too (chat_fanout_retry) */
    const void *owner; /* copies: the payload of the copy that went out, NULL before */
};

struct chat_fanout {
    chat_hmap *set;          /* key -> its slot of ring */
    struct fanout_key *ring; /* the keys in insertion order, FANOUT_MAX of them */
    size_t next;             /* the ring's slot for the next key */
    /* The last QoS 0 or 1 message stored, until the next one. */
    char last_group[CHAT_GROUP_MAX + 1];
    uint64_t last_id; /* 0: none */
    bool last_out;
};

static void make_key(struct fanout_key *k, const char *group, uint64_t id)
{
    size_t glen = strnlen(group, CHAT_GROUP_MAX);
    memcpy(k->b, group, glen);
    k->b[glen] = '\0';
    for (int i = 0; i < 8; i++) {
        k->b[glen + 1 + (size_t)i] = (char)(unsigned char)(id >> (56 - 8 * i));
    }
    k->len = glen + 9;
}

bool chat_fanout_init(struct chat_plugin *pl)
{
    struct chat_fanout *f = calloc(1, sizeof(*f));
    if (!f) {
        return false;
    }
    f->set = chat_hmap_create();
    f->ring = calloc(FANOUT_MAX, sizeof(*f->ring));
    if (!f->set || !f->ring) {
        chat_hmap_destroy(f->set, NULL);
        free(f->ring);
        free(f);
        return false;
    }
    pl->fanout = f;
    return true;
}

void chat_fanout_free(struct chat_plugin *pl)
{
    struct chat_fanout *f = pl->fanout;
    if (!f) {
        return;
    }
    chat_hmap_destroy(f->set, NULL);
    free(f->ring);
    free(f);
    pl->fanout = NULL;
}

/* Puts (group, id) in the set, making room by forgetting the oldest;
 * returns its slot, or NULL when out of memory (the message then counts
 * as fanned out: nothing twice). */
static struct fanout_key *set_add(struct chat_fanout *f, const char *group, uint64_t id)
{
    struct fanout_key *slot = &f->ring[f->next];
    if (slot->len) {
        chat_hmap_remove(f->set, slot->b, slot->len);
    }
    make_key(slot, group, id);
    slot->copies = false;
    slot->owner = NULL;
    f->next = (f->next + 1) % FANOUT_MAX;
    if (!chat_hmap_put(f->set, slot->b, slot->len, slot, NULL)) {
        slot->len = 0;
        return NULL;
    }
    return slot;
}

static struct fanout_key *set_get(struct chat_fanout *f, const char *group, uint64_t id)
{
    struct fanout_key k;
    if (chat_hmap_count(f->set) == 0) {
        return NULL;
    }
    make_key(&k, group, id);
    return chat_hmap_get(f->set, k.b, k.len);
}

static bool is_last(const struct chat_fanout *f, const char *group, uint64_t id)
{
    return f->last_id == id && !strcmp(f->last_group, group);
}

void chat_fanout_stored(struct chat_plugin *pl, const char *group, uint64_t id, int qos)
{
    struct chat_fanout *f = pl->fanout;
    if (!f) {
        return;
    }
    /* The last QoS 0/1 message's fan-out, if any, is over by now. */
    if (f->last_id && !f->last_out) {
        set_add(f, f->last_group, f->last_id);
    }
    f->last_id = 0;
    if (qos == 2) {
        set_add(f, group, id);
        return;
    }
    size_t glen = strnlen(group, CHAT_GROUP_MAX);
    memcpy(f->last_group, group, glen);
    f->last_group[glen] = '\0';
    f->last_id = id;
    f->last_out = false;
}

bool chat_fanout_seen(struct chat_plugin *pl, const char *group, uint64_t id, const void *payload)
{
    struct chat_fanout *f = pl->fanout;
    if (!f) {
        return true;
    }
    if (is_last(f, group, id)) {
        f->last_out = true;
        return true;
    }
    struct fanout_key *slot = set_get(f, group, id);
    if (!slot) {
        return true;
    }
    if (!slot->copies) {
        /* out; a retry from now on carries nothing */
        chat_hmap_remove(f->set, slot->b, slot->len);
        slot->len = 0;
        return true;
    }
    /* copies-once */
    if (!slot->owner) {
        slot->owner = payload;
    }
    return slot->owner == payload;
}

bool chat_fanout_retry(struct chat_plugin *pl, const char *group, uint64_t id)
{
    struct chat_fanout *f = pl->fanout;
    if (!f) {
        return false;
    }
    struct fanout_key *slot = NULL;
    if (is_last(f, group, id)) {
        if (f->last_out) {
            return false;
        }
        /* its fan-out, if any, is over: from now on the set tracks it */
        f->last_id = 0;
        slot = set_add(f, group, id);
    } else {
        slot = set_get(f, group, id);
    }
    if (!slot || slot->owner) {
        return false;
    }
    slot->copies = true;
    return true;
}
