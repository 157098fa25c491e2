/* hmap: a hash map from byte-string keys to pointers, for the plugin's
 * per-connection state (devices being caught up, subscriptions awaiting the
 * broker's read check, answer budgets), which the broker's thread looks up
 * on every subscribe, ack and delivery: a lookup costs one hash and a short
 * chain walk however many clients are connected.
 *
 * Ownership: the map copies keys; values stay the caller's (the map never
 * frees them, except through the free function given to chat_hmap_destroy).
 *
 * Threading: none; the broker's thread only.
 */
#ifndef CHAT_HMAP_H
#define CHAT_HMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct chat_hmap chat_hmap;

/* An empty map, or NULL when out of memory. Free it with chat_hmap_destroy. */
chat_hmap *chat_hmap_create(void);

/* Frees the map, calling free_val (when not NULL) on every value. Accepts
 * NULL. */
void chat_hmap_destroy(chat_hmap *m, void (*free_val)(void *));

/* The value under key[0..len), or NULL. */
void *chat_hmap_get(const chat_hmap *m, const void *key, size_t len);

/* Sets key to val, replacing any value there (returned in *old when old is
 * not NULL, else forgotten). Returns false when out of memory (nothing
 * changed). */
bool chat_hmap_put(chat_hmap *m, const void *key, size_t len, void *val, void **old);

/* Removes key and returns its value, or NULL when absent. */
void *chat_hmap_remove(chat_hmap *m, const void *key, size_t len);

size_t chat_hmap_count(const chat_hmap *m);

/* Removes up to n entries, calling free_val (when not NULL) on each value,
 * and returns how many are left: a map too large to free in one go (a
 * group of 50,000 members) goes in slices, then chat_hmap_destroy. */
size_t chat_hmap_drain(chat_hmap *m, size_t n, void (*free_val)(void *));

/* Calls fn once per entry, in no particular order. When fn returns true the
 * entry is removed from the map (fn then owns, or has freed, its value);
 * fn must not otherwise change the map. */
typedef bool (*chat_hmap_fn)(void *ctx, const void *key, size_t len, void *val);
void chat_hmap_foreach(chat_hmap *m, chat_hmap_fn fn, void *ctx);

#endif
