/* store_text: the bounded text writers behind the store's error messages,
 * shared by every part of store/ and private to it. A writer cuts at the
 * buffer's capacity and never overruns it; names that came from the
 * network are quoted, with the bytes a log line must not carry shown as
 * '?'. No state, no locks: the syncer thread uses them too. Also the one
 * hash of short strings the store's tables use.
 */
#ifndef STORE_TEXT_H
#define STORE_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Writes fmt to out from its start, truncated to cap. */
void store_set_text(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends fmt to the NUL-terminated text in out, truncated to cap. */
void store_put_text(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends label, then the n bytes of s quoted and cleaned (see above). */
void store_put_name(char *out, size_t cap, const char *label, const char *s, size_t n);

/* Sets *errmsg (when errmsg is not NULL and *errmsg is still NULL) to a
 * malloc'd "what: why" (why NULL: "what") that the caller frees; out of memory leaves it
 * NULL. The first error of an open wins. */
void store_open_error(char **errmsg, const char *what, const char *why);

/* FNV-1a of the n bytes at p: short keys, spread enough for a hash table's
 * buckets or to tell texts apart. */
uint64_t store_hash(const char *p, size_t n);

#endif
