/* push_reg: one push registration: the push command's fields and their
 * checks, the operator's options they are checked against, the form the
 * store keeps (JSON text, which the store does not read), and the bodies
 * of the notifications each kind is sent. Pure functions over their
 * arguments: no broker, no store, no threads; the broker's thread calls
 * them (push.c, push_cmd.c), and the unit tests.
 *
 * Ownership: a returned body or stored form is malloc'd (free()); struct
 * push_reg holds its strings inline.
 */
#ifndef CHAT_PUSH_REG_H
#define CHAT_PUSH_REG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_proto.h"
#include "push_crypto.h"
#include "push_url.h"

struct cJSON;

enum push_kind {
    PUSH_KIND_NONE = 0,
    PUSH_KIND_UNIFIEDPUSH, /* an endpoint URL, optionally RFC 8291 keys */
    PUSH_KIND_MATRIX,      /* a Matrix push gateway's notify URL, app_id, pushkey */
    PUSH_KIND_WEBHOOK      /* one of the operator's webhooks, by name */
};

/* An operator's webhook (plugin_opt_push_webhooks name=url). */
struct push_webhook {
    char *name;
    char *url; /* normal form */
    bool loopback;
};

/* The operator's options (plugin_opt_push_*). */
struct push_opts {
    char **allow; /* URL prefixes in normal form, NULL-terminated; NULL: push off */
    struct push_webhook *hooks;
    size_t nhooks;
    unsigned delay_ms;    /* push_delay */
    unsigned interval_ms; /* push_interval */
    bool body;            /* push_body */
};

struct push_reg {
    enum push_kind kind;
    char url[PUSH_URL_MAX + 1]; /* the endpoint or gateway URL in normal form; webhook: "" */
    bool loopback;              /* url names a loopback address */
    bool encrypted;             /* unifiedpush with keys */
    uint8_t p256dh[PUSH_KEY_LEN];
    uint8_t auth[PUSH_AUTH_LEN];
    char p256dh_text[96]; /* as given, base64url */
    char auth_text[32];
    char app_id[CHAT_PROTO_PUSH_APP_ID_MAX + 1];
    char pushkey[CHAT_PROTO_PUSH_PUSHKEY_MAX + 1];
    char name[CHAT_PROTO_PUSH_WEBHOOK_MAX + 1];
};

/* "unifiedpush", "matrix", "webhook", "none". */
const char *push_kind_name(enum push_kind kind);

/* Reads the push command c into *reg. *query is set for a command without
 * "kind" (it asks for the device's registration); kind "none" asks for its
 * removal (reg->kind PUSH_KIND_NONE). Returns NULL, or the error string of
 * the answer ("endpoint not allowed", "bad push registration: <why>").
 * o says what is allowed (o->allow not NULL: push is on). */
const char *push_reg_from_command(const struct cJSON *c, const struct push_opts *o,
                                  struct push_reg *reg, bool *query);

/* The stored form of reg, *len bytes (at most CHAT_STORE_PUSH_MAX), or
 * NULL when out of memory. */
char *push_reg_encode(const struct push_reg *reg, size_t *len);

/* Reads a stored form back (len bytes, not NUL-terminated). False for
 * bytes this code did not write. */
bool push_reg_decode(const char *bytes, size_t len, struct push_reg *reg);

/* The URL a registration posts to, and whether it is loopback: its own,
 * or its webhook's from o; NULL when the webhook is no longer configured. */
const char *push_reg_target(const struct push_reg *reg, const struct push_opts *o, bool *loopback);

/* What a notification says. */
struct push_note {
    const char *group;
    uint64_t id; /* the newest message notified of */
    const char *from;
    uint64_t unread;
    const char *text; /* the message's body, or NULL (push_body false, or none) */
    const char *member, *device;
};

/* The text of a notification body may hold at most this many bytes (cut
 * at a character boundary, with "truncated": true). */
#define PUSH_NOTE_TEXT_MAX 1000u

/* The body posted to a UnifiedPush endpoint or a webhook:
 * {"group","id","from","unread"[,"body"[,"truncated"]]}, and for a webhook
 * (who set) "member" and "device" too; *len bytes. with_text false leaves
 * the message's text out (the lean body of a retry after 413). NULL when
 * out of memory or when the result would pass max bytes. */
char *push_note_json(const struct push_note *n, bool with_text, bool who, size_t max, size_t *len);

/* The Matrix Push Gateway API v1 notify body for reg:
 * {"notification":{"event_id":"<group>/<id>","room_id":<group>,
 * "room_name":<group>,"type":
 * "m.room.message","sender":<from>,"prio":"high","counts":{"unread":N},
 * "devices":[{"app_id","pushkey"}][,"content":{"msgtype":"m.text",
 * "body"}]}}, as push_note_json. */
char *push_note_matrix(const struct push_note *n, bool with_text, const struct push_reg *reg,
                       size_t max, size_t *len);

#endif
