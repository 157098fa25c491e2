/* sbuf: a growable byte buffer for building responses, whose pages splice
 * stored envelopes in as they are instead of parsing and printing them again.
 *
 * Ownership: the buffer owns its bytes until sbuf_take hands them over
 * (allocated with mosquitto_malloc, ready for mosquitto_broker_publish).
 * After an allocation failure every append is ignored and sbuf_take returns
 * NULL, so callers check once at the end.
 */
#ifndef CHAT_SBUF_H
#define CHAT_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sbuf {
    char *data;
    size_t len;
    size_t cap;
    bool failed;
} sbuf;

void sbuf_add(sbuf *b, const char *s, size_t n);
void sbuf_puts(sbuf *b, const char *s);
void sbuf_u64(sbuf *b, uint64_t v);

/* Appends s as a quoted JSON string. */
void sbuf_json_str(sbuf *b, const char *s);

/* Returns the NUL-terminated bytes (mosquitto_malloc'd; caller frees with
 * mosquitto_free or hands them to the broker) and empties b; NULL after an
 * allocation failure. */
char *sbuf_take(sbuf *b, size_t *len);

/* Frees whatever b still holds. */
void sbuf_free(sbuf *b);

#endif
