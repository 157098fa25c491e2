/* seq.c: per-group release of message ids in order, exactly once.
 *
 * Invariants, by name:
 *   held-sorted: held[0..n) is sorted by id, strictly ascending, and n <=
 *      max.
 *   held-above-shown: Once known, every held id is > shown + 1 between
 *      calls, or == shown + 1 until chat_seq_pop takes it: nothing <= shown is
 *      ever held.
 *   shown-grows: shown only grows while known.
 */
#include "seq.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

void chat_seq_init(chat_seq *s, size_t max, chat_seq_free_fn *free_item)
{
    memset(s, 0, sizeof *s);
    s->max = max > 0 ? max : 1;
    s->free_item = free_item;
}

void chat_seq_clear(chat_seq *s)
{
    for (size_t i = 0; i < s->n; i++)
        s->free_item(s->held[i].item);
    free(s->held);
    s->held = NULL;
    s->n = 0;
    s->cap = 0;
}

/* Index of the first slot with an id >= id. */
static size_t lower_bound(const chat_seq *s, uint64_t id)
{
    size_t lo = 0, hi = s->n;

    /* Live messages mostly arrive in order: try the end first. */
    if (s->n == 0 || s->held[s->n - 1].id < id)
        return s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->held[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Removes the slots [0, k), freeing their items. */
static void drop_front(chat_seq *s, size_t k)
{
    if (k == 0)
        return; /* held may be NULL: no memmove on it */
    for (size_t i = 0; i < k; i++)
        s->free_item(s->held[i].item);
    memmove(s->held, s->held + k, (s->n - k) * sizeof *s->held);
    s->n -= k;
}

chat_seq_verdict chat_seq_offer(chat_seq *s, uint64_t id, void *item)
{
    size_t at;

    if (s->known && id <= s->shown) {
        s->free_item(item);
        return CHAT_SEQ_OLD;
    }
    at = lower_bound(s, id);
    if (at < s->n && s->held[at].id == id) {
        s->free_item(item);
        return CHAT_SEQ_DUP;
    }
    if (s->n == s->max) {
        /* Full: keep the lowest ids, which are due first. */
        if (at == s->n) {
            s->free_item(item);
            return CHAT_SEQ_DROPPED;
        }
        s->free_item(s->held[s->n - 1].item);
        s->n--;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct chat_seq_slot *h;
        if (cap > s->max)
            cap = s->max;
        h = realloc(s->held, cap * sizeof *h);
        if (h == NULL) {
            s->free_item(item);
            return CHAT_SEQ_DROPPED;
        }
        s->held = h;
        s->cap = cap;
    }
    memmove(s->held + at + 1, s->held + at, (s->n - at) * sizeof *s->held);
    s->held[at].id = id;
    s->held[at].item = item;
    s->n++;
    return CHAT_SEQ_HELD;
}

void *chat_seq_pop(chat_seq *s, uint64_t *id)
{
    void *item;

    if (!s->known || s->n == 0 || s->held[0].id != s->shown + 1)
        return NULL;
    assert(s->shown < UINT64_MAX);
    item = s->held[0].item;
    *id = s->held[0].id;
    s->shown = *id;
    memmove(s->held, s->held + 1, (s->n - 1) * sizeof *s->held);
    s->n--;
    return item;
}

void chat_seq_unpop(chat_seq *s, uint64_t id, void *item)
{
    assert(s->known && id == s->shown && id > 0);
    s->shown = id - 1;
    (void)chat_seq_offer(s, id, item); /* lands first: nothing held is <= id */
}

void chat_seq_set_base(chat_seq *s, uint64_t base)
{
    s->known = true;
    s->shown = base;
    drop_front(s, lower_bound(s, base + 1));
}

void chat_seq_skip_to(chat_seq *s, uint64_t id)
{
    assert(s->known);
    if (id <= s->shown)
        return;
    s->shown = id;
    drop_front(s, lower_bound(s, id + 1));
}

uint64_t chat_seq_first_held(const chat_seq *s)
{
    return s->n ? s->held[0].id : 0;
}

uint64_t chat_seq_last_held(const chat_seq *s)
{
    return s->n ? s->held[s->n - 1].id : 0;
}
