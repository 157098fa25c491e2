/* chat_proto: the wire format of mosquitto-chat, defined once and compiled
 * into the plugin, the client library and the tests (as Mosquitto compiles
 * lib/utf8_mosq.c and lib/util_topic.c into both broker and library): the
 * fixed topics, the limits, the checks of names and UTF-8 with their error
 * strings, the JSON integer rule, the JSON string writer and reader, and
 * (chat_proto_envelope.h) the shape of a stored envelope.
 *
 * Ownership: nothing here allocates; strings returned are static.
 * Threading: every function is pure and may run on any thread.
 */
#ifndef CHAT_PROTO_H
#define CHAT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Requests go to CHAT_PROTO_CONTROL_TOPIC; answers and replay pages come on
 * CHAT_PROTO_RESPONSE_TOPIC; nothing under CHAT_PROTO_CONTROL_PREFIX is ever
 * delivered by the broker. Group topics are <prefix>/<group>,
 * <prefix>/<group>/ack and (v1.1) <prefix>/<group>/read, the prefix
 * CHAT_PROTO_DEFAULT_PREFIX unless the broker's plugin_opt_topic_prefix
 * says otherwise. */
#define CHAT_PROTO_CONTROL_PREFIX "$CONTROL/chat/"
#define CHAT_PROTO_CONTROL_TOPIC "$CONTROL/chat/v1"
#define CHAT_PROTO_RESPONSE_TOPIC "$CONTROL/chat/v1/response"
#define CHAT_PROTO_DEFAULT_PREFIX "chat"
#define CHAT_PROTO_ACK_SUFFIX "/ack"
#define CHAT_PROTO_READ_SUFFIX "/read"

#define CHAT_PROTO_GROUP_MAX 128u         /* bytes in a group name */
#define CHAT_PROTO_CID_MAX 64u            /* bytes in a cid */
#define CHAT_PROTO_NAME_MAX 1024u         /* bytes in a member name or client id */
#define CHAT_PROTO_COMMANDS_MAX 1000      /* commands in one request */
#define CHAT_PROTO_REQUEST_MAX (1u << 20) /* bytes in one request */
#define CHAT_PROTO_LIST_MAX 1000          /* receipts, presence: entries per answer */

/* v1.2, recall and edit: the fields the plugin writes in a changed message
 * N and in the message M that carries the change. They are the plugin's
 * alone: a publish that holds them has them dropped, as id, group, from
 * and ts are overwritten. */
#define CHAT_PROTO_FIELD_RECALL "recall"     /* M: the id it recalls */
#define CHAT_PROTO_FIELD_EDIT "edit"         /* M: the id it edits */
#define CHAT_PROTO_FIELD_RECALLED "recalled" /* N: true, its tombstone */
#define CHAT_PROTO_FIELD_EDITED "edited"     /* N: the time of its latest edit (M's ts) */
#define CHAT_PROTO_FIELD_EDITS "edits"       /* N: the ids of the Ms that edited it */

/* The most edits of one message: a recall rewrites every message that
 * carried one (so that none of the recalled texts stays stored), in one
 * write, so this bounds a recall's work. */
#define CHAT_PROTO_EDITS_MAX 20u

/* The errors of the recall and edit commands (besides the group errors of
 * history and the field errors every command has). */
#define CHAT_PROTO_ERR_NO_MESSAGE "no such message"
#define CHAT_PROTO_ERR_RECALL_SENDER "only its sender may recall this message"
#define CHAT_PROTO_ERR_EDIT_SENDER "only its sender may edit this message"
#define CHAT_PROTO_ERR_RECALL_LATE "too late to recall"
#define CHAT_PROTO_ERR_EDIT_LATE "too late to edit"
#define CHAT_PROTO_ERR_RECALLED "already recalled"
#define CHAT_PROTO_ERR_CHANGE_FINAL "a recall or edit cannot be changed"
#define CHAT_PROTO_ERR_EDITS_MAX "too many edits of this message"

/* An empty request ({"commands":[]}) of a device waiting for its catch-up's
 * turn is answered once that turn has served it; at most
 * CHAT_PROTO_HELD_EMPTY_MAX of one client wait so (and CHAT_PROTO_HELD_EMPTY_BYTES
 * of their properties), a further one is refused
 * at once with CHAT_PROTO_ERR_EMPTY_HELD (command "request"). */
#define CHAT_PROTO_HELD_EMPTY_MAX 16u
/* ... and their response topics and correlation data, which the broker keeps
 * until the answers go, at most this many bytes together (16 requests with
 * the largest properties a packet may carry would be 2 MiB per client). */
#define CHAT_PROTO_HELD_EMPTY_BYTES 16384u
#define CHAT_PROTO_ERR_EMPTY_HELD                                                                  \
    "an empty request of this client already waits for its catch-up's turn: wait for its answer"

/* Push registrations (v1.2): the bounds of the push command's fields. */
#define CHAT_PROTO_PUSH_URL_MAX 1000u    /* bytes of an endpoint or gateway URL */
#define CHAT_PROTO_PUSH_APP_ID_MAX 64u   /* Matrix: bytes of an app_id */
#define CHAT_PROTO_PUSH_PUSHKEY_MAX 512u /* Matrix: bytes of a pushkey */
#define CHAT_PROTO_PUSH_WEBHOOK_MAX 64u  /* bytes of a webhook's name */
#define CHAT_PROTO_PUSH_DEVICES_MAX 16u  /* devices of one member with a registration */

/* The largest integer a JSON number carries exactly through a double, and
 * so the largest id, cursor or limit of the protocol: 2^53 - 1. */
#define CHAT_PROTO_JSON_INT_MAX 9007199254740991ull

/* True when s[0..len) is well-formed UTF-8 (no overlong forms, surrogates
 * or code points above U+10FFFF) without a NUL. */
bool chat_proto_utf8_valid(const char *s, size_t len);

/* NULL when name[0..len) is a valid group name: 1..128 bytes of UTF-8 with
 * none of / + # $ and no control characters (U+0000..U+001F,
 * U+007F..U+009F). Otherwise the protocol's error string, e.g. "group name
 * contains one of / + # $". */
const char *chat_proto_group_error(const char *name, size_t len);

/* NULL when name[0..len) can name a member: 1..CHAT_PROTO_NAME_MAX bytes
 * of UTF-8 with no control character (U+0000..U+001F, U+007F..U+009F), as
 * Mosquitto takes a username or a client id (its UTF-8 check refuses
 * control characters), the "~" the plugin puts before a client id where
 * usernames are verified included. Otherwise the reason: "member name is
 * empty", "member name is longer than 1024 bytes", "member name is not
 * valid UTF-8", "member name contains a control character". */
const char *chat_proto_member_error(const char *name, size_t len);

/* The same rule for a device (a client id): "device name is empty" ... */
const char *chat_proto_device_error(const char *name, size_t len);

/* True when d is an integer from lo to CHAT_PROTO_JSON_INT_MAX; stores it
 * in *out. */
bool chat_proto_json_int(double d, uint64_t lo, uint64_t *out);

/* True when s[0..len) is one JSON value by the grammar of RFC 8259 and
 * nothing else: only space, tab, CR and LF between tokens, no raw control
 * character in a string, numbers without a leading zero, '+' or a bare
 * '.'. Nested at most CHAT_PROTO_JSON_DEPTH_MAX deep. Checks the grammar
 * only: UTF-8 is chat_proto_utf8_valid's, and an escape such as \ud800
 * passes. Lenient parsers (cJSON) read more than this; what the plugin
 * passes on unparsed must be this. */
#define CHAT_PROTO_JSON_DEPTH_MAX 4096u
bool chat_proto_json_valid(const char *s, size_t len);

/* Scanners of text that chat_proto_json_valid accepted (the plugin's splice
 * of a payload, the client library's cut of a page), bounded by end. */
bool chat_proto_json_is_ws(char c);
/* The first byte at or after p that is not JSON white space. */
const char *chat_proto_json_skip_ws(const char *p, const char *end);
/* p is at a '"': returns the byte after the closing quote, and sets
 * *escaped when the string holds a backslash. */
const char *chat_proto_json_skip_string(const char *p, const char *end, bool *escaped);
/* p starts a value: returns the byte after it, or NULL when p is at end or,
 * where the bound is not 0, the value nests deeper than depth_max or holds
 * a number or literal longer than number_max bytes. */
const char *chat_proto_json_skip_value(const char *p, const char *end, unsigned depth_max,
                                       size_t number_max);

/* Decodes the JSON string at p (its opening '"', in text that
 * chat_proto_json_valid accepted), up to end, into out: its UTF-8 with the
 * escapes resolved and a NUL after it. Returns the bytes written, the NUL
 * not counted, or SIZE_MAX when they and the NUL do not fit in cap bytes
 * or an escape is a lone surrogate. A \u0000 becomes a NUL byte inside
 * out, which the name checks above refuse. */
size_t chat_proto_json_unescape(const char *p, const char *end, char *out, size_t cap);

/* In the JSON object at obj (text chat_proto_json_valid accepted, up to
 * end), the value of its first member whose key is key as written (a key
 * spelt with escapes is not matched): its first byte, and in *value_end the
 * byte after it; NULL when there is no such member. */
const char *chat_proto_json_member(const char *obj, const char *end, const char *key,
                                   const char **value_end);

/* The bytes chat_proto_json_string writes for len bytes of text, at most:
 * every byte may become a six-byte \u00XX escape, plus the two quotes. */
#define CHAT_PROTO_JSON_STRING_MAX(len) (6 * (size_t)(len) + 2)

/* Writes s[0..len) as a quoted JSON string into out, which has room for
 * CHAT_PROTO_JSON_STRING_MAX(len) bytes, and returns the bytes written
 * (no NUL is added). " and \ are escaped with a backslash, \b \f \n \r \t
 * by their short forms, every other byte below 0x20 as \u00XX; other
 * bytes, UTF-8 included, go as they are. */
size_t chat_proto_json_string(char *out, const char *s, size_t len);

#endif
