/* seq: the per-group ordering of the client library: it releases message ids
 * strictly one after another, drops ids already released and holds those
 * that arrive ahead of a gap.
 *
 * Ownership: a chat_seq owns the items it holds (opaque pointers, freed with
 * the free function given to chat_seq_init); chat_seq_offer always takes the
 * item, and chat_seq_pop hands one back to the caller.
 *
 * Threading: none; the client library uses one chat_seq per group, on its
 * dispatcher thread only.
 */
#ifndef CHAT_SEQ_H
#define CHAT_SEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void chat_seq_free_fn(void *item);

struct chat_seq_slot {
    uint64_t id;
    void *item;
};

typedef struct chat_seq {
    bool known;                 /* shown is valid: the baseline is set */
    uint64_t shown;             /* last id released (or the baseline) */
    struct chat_seq_slot *held; /* ids not yet releasable, ascending, unique */
    size_t n;                   /* slots used */
    size_t cap;                 /* slots allocated */
    size_t max;                 /* most slots kept; the highest ids go first */
    chat_seq_free_fn *free_item;
} chat_seq;

/* What chat_seq_offer did with an item. */
typedef enum chat_seq_verdict {
    CHAT_SEQ_HELD,    /* kept until it is due */
    CHAT_SEQ_OLD,     /* id <= shown: already released, freed */
    CHAT_SEQ_DUP,     /* the same id is held already, freed */
    CHAT_SEQ_DROPPED, /* no room (max or memory), freed; it must come again */
} chat_seq_verdict;

/* Empties s and sets its limit and free function; known is false. */
void chat_seq_init(chat_seq *s, size_t max, chat_seq_free_fn *free_item);

/* Frees every held item and the slot array; s can be reused after
 * chat_seq_init. */
void chat_seq_clear(chat_seq *s);

/* Takes item with this id (id >= 1). Before the baseline is known every id
 * is held. When max items are held the one with the highest id is dropped
 * (the new one or a held one). */
chat_seq_verdict chat_seq_offer(chat_seq *s, uint64_t id, void *item);

/* If the baseline is known and id shown+1 is held, removes it, sets shown to
 * it, stores it in *id and returns its item (the caller's now); else NULL. */
void *chat_seq_pop(chat_seq *s, uint64_t *id);

/* Undoes the chat_seq_pop that returned id and item (the item is taken
 * back): shown becomes id - 1 again. */
void chat_seq_unpop(chat_seq *s, uint64_t id, void *item);

/* Sets the baseline: shown = base, known = true; frees held ids <= base. */
void chat_seq_set_base(chat_seq *s, uint64_t base);

/* Moves shown forward to id (never back), freeing held ids <= id: the ids
 * in between are skipped (retention removed them). Requires known. */
void chat_seq_skip_to(chat_seq *s, uint64_t id);

/* The held item of id, or NULL when id is not held. The item stays s's;
 * chat_seq_replace swaps it for another. */
void *chat_seq_held(const chat_seq *s, uint64_t id);

/* Replaces the held item of id (which must be held) by item, freeing the
 * old one. */
void chat_seq_replace(chat_seq *s, uint64_t id, void *item);

/* Lowest held id, 0 if none. */
uint64_t chat_seq_first_held(const chat_seq *s);

/* Highest held id, 0 if none. */
uint64_t chat_seq_last_held(const chat_seq *s);

#endif
