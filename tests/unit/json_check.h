/* json_check: a strict JSON reader (RFC 8259) for the tests and fuzzers,
 * written apart from cJSON and from the plugin's code so that it can judge
 * both: what the plugin sends must be JSON that any parser reads (a web
 * page's JSON.parse included), and two envelopes are the same when they
 * read as the same values.
 *
 * Ownership: json_canon returns malloc'd text (free it). Threading: none.
 */
#ifndef CHAT_JSON_CHECK_H
#define CHAT_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* True when s[0..len) is one JSON value, strictly: RFC 8259 grammar (only
 * space, tab, CR and LF between tokens; no raw control characters in
 * strings; numbers without leading zeros, '+', or a bare '.'), valid
 * UTF-8, nested at most 4096 deep (CHAT_PROTO_JSON_DEPTH_MAX). An escaped
 * surrogate alone (\ud800) is grammatical JSON and passes. */
bool json_strict(const char *s, size_t len);

/* The canonical text of strict JSON s[0..len), or NULL when it is not: no
 * blanks, members in their order (duplicates kept), each string decoded
 * and written again one way (so "\u0041", "A" and "\u0000" are told apart
 * correctly), each number as the double it reads as ("%.17g"; -0 as 0,
 * out of range as "inf" or "-inf"). Two texts read as the same values when
 * their canonical texts are equal. malloc'd: free it. */
char *json_canon(const char *s, size_t len);

#endif
