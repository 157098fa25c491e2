/* envelope (client side): envelopes read straight from the bytes that
 * brought them, and responses parsed without their messages.
 *
 * A catch-up page holds hundreds of envelopes. Parsing each into a cJSON
 * tree and printing it again to hand on_message its `json` cost ~50,000
 * instructions a message (issue 16). Here a response payload that is strict
 * JSON (chat_proto_json_valid) is cut into a skeleton, parsed by cJSON with
 * the "messages" arrays of its entries left empty, and the array spans in
 * the payload; each envelope of a span is then read by a scanner for its
 * common shape (keys without escapes, the id an integer, the strings
 * without escapes), with cJSON on that one envelope for any other shape.
 * Its `json` is the envelope's own text with the blanks between tokens
 * left out (compact JSON, as the public header promises).
 *
 * Ownership: a chat_env is one heap block, freed with free(); the skeleton
 * and span array of chat_response_cut are the caller's, freed with free().
 * Threading: pure functions, any thread.
 */
#ifndef CHAT_CLIENT_ENVELOPE_H
#define CHAT_CLIENT_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "chat_client.h"

/* One envelope held by the library: the message and its strings, which
 * point into the same block. */
struct chat_env {
    chat_client_message m;
    char text[]; /* m.json, then the other strings */
};

/* What chat_env_read made of a text. */
typedef enum chat_env_verdict {
    CHAT_ENV_OK,
    CHAT_ENV_INVALID, /* not an envelope: not an object, no id >= 1 or no string group */
    CHAT_ENV_NOMEM,
} chat_env_verdict;

/* Reads the envelope text s[0..len), which must be strict JSON
 * (chat_proto_json_valid): on CHAT_ENV_OK *out is a new chat_env (free()). */
chat_env_verdict chat_env_read(const char *s, size_t len, struct chat_env **out);

/* The same from a cJSON item (printed first): for the paths that hold a
 * tree already (answers to the application's own fetch, lenient JSON). */
chat_env_verdict chat_env_from_item(const cJSON *item, struct chat_env **out);

/* Recall and edit (protocol v1.2): the version of n that the change m (a
 * message whose recall or edit names n) makes of it, as the plugin writes
 * it: a recall's tombstone (n's id, group, from, ts and "recalled": true),
 * or an edit's fields in place of n's but id, group, from, ts and cid, with
 * "edited": m's ts and m's id added to n's "edits" list; an edit's carrier
 * that a recall of n rewrote ("recalled": true) makes the tombstone, as
 * that recall does. On CHAT_ENV_OK *out is a new chat_env (free());
 * CHAT_ENV_INVALID when the change does not apply: it names another
 * message, n is recalled, or (an edit) n's own version is later (its
 * "edited", or its "edits" names m or a later message) or n has another
 * sender (only a sender edits). */
chat_env_verdict chat_env_apply(const struct chat_env *n, const struct chat_env *m,
                                struct chat_env **out);

/* One element of a "messages" array, read where it is in the payload. */
struct chat_span_elem {
    const char *text; /* the element's bytes in the payload */
    size_t len;
    chat_env_verdict v;   /* what chat_env_read made of it */
    struct chat_env *env; /* on CHAT_ENV_OK until chat_span_next hands it on */
};

/* Where one entry's "messages" array is in the payload (text NULL if the
 * entry has none, or is not an object), and its elements, read. */
struct chat_span {
    const char *text; /* from '[' to ']' included */
    size_t len;
    struct chat_span_elem *elems; /* n of them, in order */
    size_t n;
};

/* Cuts payload[0..len) (NUL-terminated), a response {"responses":[...]}:
 * on success *root is its cJSON tree in which the "messages" array of every
 * entry without a correlationData is empty ([]): the application's own
 * requests get their answers whole. spans[i] (*n of them) is the messages
 * array of entry i as it is in payload, which outlives them, with its
 * elements read as chat_env_read does (in the same pass that finds the
 * array's end); free them with chat_spans_free. False (nothing to free)
 * when the payload is not strict JSON, any key of the root or of an entry
 * holds an escape, or memory ran out: then parse it whole. */
bool chat_response_cut(const char *payload, size_t len, cJSON **root, struct chat_span **spans,
                       size_t *n);

/* Steps through the elements of a span: from *at (0 first) hands on the
 * next element (*v, *env: the caller frees it; where it is: *elem,
 * *elem_len) and returns true; false after the last. */
bool chat_span_next(const struct chat_span *span, size_t *at, chat_env_verdict *v,
                    struct chat_env **env, const char **elem, size_t *elem_len);

/* Frees spans[0..n), the envelopes not handed on, and the array (NULL
 * accepted). */
void chat_spans_free(struct chat_span *spans, size_t n);

#endif
