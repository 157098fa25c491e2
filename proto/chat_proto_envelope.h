/* chat_proto_envelope: the shape of a stored envelope, as the plugin writes
 * every one (docs/protocol.md, The envelope), checked by whoever takes an
 * envelope that did not come from the plugin: mqchat-store import.
 *
 * The plugin writes {"id":<id>,"group":<group>,"from":<member>,"ts":<ms>
 * and then the members of the client's JSON object as they were (less
 * those four), or "body" with text that was not an object; a client's
 * "cid" stays, a string of 1 to 64 bytes, and no key of those five comes
 * twice. The check holds an envelope to all of it, with the names checked
 * by chat_proto.h's rules, so that what it accepts is an envelope the
 * plugin could have stored.
 *
 * Ownership: nothing here allocates; reasons are static strings.
 * Threading: pure functions, any thread.
 */
#ifndef CHAT_PROTO_ENVELOPE_H
#define CHAT_PROTO_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_proto.h"

/* What chat_proto_envelope_error found: copies of the fields, and where
 * the id's and the time's digits are in the text (a store's template of
 * the envelope is the text around them). */
typedef struct chat_proto_envelope {
    uint64_t id;                          /* "id": 1 to CHAT_PROTO_JSON_INT_MAX */
    uint64_t ts;                          /* "ts": ms since the epoch, 0 to the same */
    size_t id_at, id_len;                 /* the id's digits: text[id_at, id_at + id_len) */
    size_t ts_at, ts_len;                 /* the time's digits */
    char group[CHAT_PROTO_GROUP_MAX + 1]; /* decoded, NUL-terminated */
    char from[CHAT_PROTO_NAME_MAX + 1];   /* decoded */
    char cid[CHAT_PROTO_CID_MAX + 1];     /* decoded as the plugin indexes it; "" without */
    bool has_cid;
    /* The fields of a change (protocol v1.2; 0 or false without): */
    bool recalled;     /* "recalled": true, a tombstone */
    uint64_t edited;   /* "edited": when its last edit was made (ms) */
    uint64_t recall;   /* "recall": the id this message recalls */
    uint64_t edit;     /* "edit": the id this message edits */
    const char *field; /* after a refusal: the field at fault ("id", "group", "from",
                          "ts", "cid", a change's), or NULL when it is the whole envelope */
} chat_proto_envelope;

/* NULL when text[0..len) is an envelope the plugin could have stored: UTF-8,
 * strict JSON (chat_proto_json_valid), an object that begins {"id": with
 * its id in plain digits, then "group" (a valid group name), "from" (a
 * valid member name) and "ts" (plain digits), in that order and without
 * blanks, as the plugin writes them; after them no key of those four again,
 * and "cid" at most once, a string of 1 to CHAT_PROTO_CID_MAX bytes (a
 * \u0000 in it counts, and is indexed, as the plugin's U+FDD0 stand-in);
 * the fields of a change (v1.2: "recalled" true, "edited" a time,
 * "recall" and "edit" an id below the envelope's own) at most once each.
 * *out is filled as far as the check got. Otherwise the reason, e.g.
 * "group name contains one of / + # $", with out->field naming the field. */
const char *chat_proto_envelope_error(const char *text, size_t len, chat_proto_envelope *out);

/* A cid's JSON string at v (up to vend) as the plugin indexes it: 1 to
 * CHAT_PROTO_CID_MAX bytes, a \u0000 as the U+FDD0 stand-in. NULL, or
 * the reason. */
const char *chat_proto_cid_read(const char *v, const char *vend, char cid[CHAT_PROTO_CID_MAX + 1]);

#endif
