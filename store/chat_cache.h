/* chat_cache: a bounded in-memory map from store keys to the small records
 * (heads, cursors, memberships) the broker's thread reads on every publish
 * and every delivery; private to store/. A record is two numbers: the value
 * and an extra one (a cursor's last use, a membership's generation; 0 when
 * the record has none).
 *
 * It remembers absence too ("not found"), since most read checks of a
 * delivery ask about members that exist and most cid lookups about cids that
 * do not. When it holds max_entries it forgets everything and starts over:
 * a cache, not a second store, so correctness never depends on it.
 *
 * Memory: its slots (48 bytes each) grow with the entries, to twice
 * max_entries slots when full; while they double, the old half stays
 * beside the new slots until moved over, a few slots at each put. No call
 * walks every entry (see chat_cache.c).
 *
 * Ownership: keys are copied in; chat_cache_destroy frees everything.
 * Threading: none; the store's one thread owns it.
 *
 * Right only while one process writes the store: the LevelDB backend keeps
 * it exact for its own writes (leveldb/ldb_db.h lists what relies on it). A
 * backend shared by several processes must not use it as it is.
 */
#ifndef CHAT_CACHE_H
#define CHAT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct chat_cache chat_cache;

/* Returns a new empty cache, or NULL on out of memory. */
chat_cache *chat_cache_create(size_t max_entries);

/* Frees the cache and its keys. Accepts NULL. */
void chat_cache_destroy(chat_cache *c);

/* Looks key up. Returns false when the cache knows nothing of it; else sets
 * *found (the store holds the key or not) and, when found, *value and
 * *extra. */
bool chat_cache_get(const chat_cache *c, const char *key, size_t len, bool *found, uint64_t *value,
                    uint64_t *extra);

/* Records that key holds (value, extra) (found) or is absent (!found). Out
 * of memory just leaves the key unknown. */
void chat_cache_put(chat_cache *c, const char *key, size_t len, bool found, uint64_t value,
                    uint64_t extra);

#endif
