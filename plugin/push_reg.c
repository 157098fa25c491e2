/* push_reg: a registration's fields, checks and stored form, and the
 * notification bodies (see push_reg.h). */
#include "push_reg.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *push_kind_name(enum push_kind kind)
{
    switch (kind) {
    case PUSH_KIND_UNIFIEDPUSH:
        return "unifiedpush";
    case PUSH_KIND_MATRIX:
        return "matrix";
    case PUSH_KIND_WEBHOOK:
        return "webhook";
    default:
        return "none";
    }
}

/* ===========================================================================
 * The command's fields
 * ========================================================================= */

/* c's string field name, of 1..max bytes of UTF-8 without control
 * characters, or NULL (with *why set when it is there but bad, or missing
 * and required). */
static const char *text_field(const cJSON *c, const char *name, size_t max, bool required,
                              const char **why)
{
    static char reason[160];
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, name);
    if (!f) {
        if (required) {
            snprintf(reason, sizeof(reason), "bad push registration: %s is missing", name);
            *why = reason;
        }
        return NULL;
    }
    size_t n = cJSON_IsString(f) ? strlen(f->valuestring) : 0;
    bool ok = n > 0 && n <= max && chat_proto_utf8_valid(f->valuestring, n);
    for (size_t i = 0; ok && i < n; i++) {
        ok = (unsigned char)f->valuestring[i] >= 0x20 && f->valuestring[i] != 0x7f;
    }
    if (!ok) {
        snprintf(reason, sizeof(reason),
                 "bad push registration: %s must be a string of 1 to %zu bytes without control "
                 "characters",
                 name, max);
        *why = reason;
        return NULL;
    }
    return f->valuestring;
}

/* The keys of an encrypted UnifiedPush (Web Push) registration. */
static const char *read_keys(const cJSON *c, struct push_reg *reg)
{
    const char *why = NULL;
    const char *p = text_field(c, "p256dh", sizeof(reg->p256dh_text) - 1, false, &why);
    const char *a = why ? NULL : text_field(c, "auth", sizeof(reg->auth_text) - 1, false, &why);
    size_t n = 0;
    if (why) {
        return why;
    }
    if (!p && !a) {
        return NULL; /* plaintext notifications */
    }
    if (!p || !a) {
        return "bad push registration: p256dh and auth come together";
    }
    if (!push_b64url_decode(p, reg->p256dh, PUSH_KEY_LEN, &n) || n != PUSH_KEY_LEN ||
        !push_crypto_key_valid(reg->p256dh)) {
        return "bad push registration: p256dh must be a P-256 public key (65 bytes, "
               "uncompressed) in base64url";
    }
    if (!push_b64url_decode(a, reg->auth, PUSH_AUTH_LEN, &n) || n != PUSH_AUTH_LEN) {
        return "bad push registration: auth must be 16 bytes in base64url";
    }
    snprintf(reg->p256dh_text, sizeof(reg->p256dh_text), "%s", p);
    snprintf(reg->auth_text, sizeof(reg->auth_text), "%s", a);
    reg->encrypted = true;
    return NULL;
}

/* A URL a client names: its normal form in reg->url, within push_allow. */
static const char *read_url(const cJSON *c, const char *name, const struct push_opts *o,
                            struct push_reg *reg)
{
    static char reason[200];
    const char *why = NULL;
    const char *url = text_field(c, name, CHAT_PROTO_PUSH_URL_MAX, true, &why);
    if (!url) {
        return why;
    }
    why = push_url_normalize(url, reg->url, &reg->loopback);
    if (why) {
        snprintf(reason, sizeof(reason), "bad push registration: %s", why);
        return reason;
    }
    return push_url_allowed(o->allow, reg->url) ? NULL : "endpoint not allowed";
}

/* The fields each kind allows: anything else is refused, so that a
 * client's typo ("pushKey") is an error, not a registration that never
 * works. A device field in particular: a device registers itself only. */
static const char *only_fields(const cJSON *c, const char *const *allowed)
{
    static char reason[160];
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, c)
    {
        bool ok = !strcmp(f->string, "command") || !strcmp(f->string, "kind") ||
                  !strcmp(f->string, "correlationData");
        for (const char *const *a = allowed; !ok && *a; a++) {
            ok = !strcmp(f->string, *a);
        }
        if (!ok) {
            if (!strcmp(f->string, "device") || !strcmp(f->string, "member")) {
                return "bad push registration: a device registers itself only (no device or "
                       "member field)";
            }
            snprintf(reason, sizeof(reason), "bad push registration: unknown field %.64s",
                     f->string);
            return reason;
        }
    }
    return NULL;
}

const char *push_reg_from_command(const cJSON *c, const struct push_opts *o, struct push_reg *reg,
                                  bool *query)
{
    static const char *const up_fields[] = {"endpoint", "p256dh", "auth", NULL};
    static const char *const mx_fields[] = {"url", "app_id", "pushkey", NULL};
    static const char *const wh_fields[] = {"name", NULL};
    static const char *const no_fields[] = {NULL};
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(c, "kind");
    const char *why = NULL;

    memset(reg, 0, sizeof(*reg));
    *query = kind == NULL;
    if (!kind) {
        return only_fields(c, no_fields);
    }
    if (!cJSON_IsString(kind)) {
        return "bad push registration: kind must be unifiedpush, matrix, webhook or none";
    }
    if (!strcmp(kind->valuestring, "none")) {
        reg->kind = PUSH_KIND_NONE;
        return only_fields(c, no_fields);
    }
    if (!strcmp(kind->valuestring, "unifiedpush")) {
        reg->kind = PUSH_KIND_UNIFIEDPUSH;
        if ((why = only_fields(c, up_fields)) || (why = read_keys(c, reg))) {
            return why;
        }
        return read_url(c, "endpoint", o, reg);
    }
    if (!strcmp(kind->valuestring, "matrix")) {
        reg->kind = PUSH_KIND_MATRIX;
        const char *app = NULL, *key = NULL;
        if ((why = only_fields(c, mx_fields)) ||
            !(app = text_field(c, "app_id", CHAT_PROTO_PUSH_APP_ID_MAX, true, &why)) ||
            !(key = text_field(c, "pushkey", CHAT_PROTO_PUSH_PUSHKEY_MAX, true, &why))) {
            return why;
        }
        snprintf(reg->app_id, sizeof(reg->app_id), "%s", app);
        snprintf(reg->pushkey, sizeof(reg->pushkey), "%s", key);
        return read_url(c, "url", o, reg);
    }
    if (!strcmp(kind->valuestring, "webhook")) {
        reg->kind = PUSH_KIND_WEBHOOK;
        const char *name = NULL;
        if ((why = only_fields(c, wh_fields)) ||
            !(name = text_field(c, "name", CHAT_PROTO_PUSH_WEBHOOK_MAX, true, &why))) {
            return why;
        }
        for (size_t i = 0; i < o->nhooks; i++) {
            if (!strcmp(o->hooks[i].name, name)) {
                snprintf(reg->name, sizeof(reg->name), "%s", name);
                return NULL;
            }
        }
        return "bad push registration: no such webhook (see the operator's push_webhooks)";
    }
    return "bad push registration: kind must be unifiedpush, matrix, webhook or none";
}

const char *push_reg_target(const struct push_reg *reg, const struct push_opts *o, bool *loopback)
{
    if (reg->kind != PUSH_KIND_WEBHOOK) {
        *loopback = reg->loopback;
        return reg->url;
    }
    for (size_t i = 0; i < o->nhooks; i++) {
        if (!strcmp(o->hooks[i].name, reg->name)) {
            *loopback = o->hooks[i].loopback;
            return o->hooks[i].url;
        }
    }
    return NULL;
}

/* ===========================================================================
 * The stored form
 * ========================================================================= */

char *push_reg_encode(const struct push_reg *reg, size_t *len)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "kind", push_kind_name(reg->kind));
    switch (reg->kind) {
    case PUSH_KIND_UNIFIEDPUSH:
        ok = ok && cJSON_AddStringToObject(o, "endpoint", reg->url);
        if (reg->encrypted) {
            ok = ok && cJSON_AddStringToObject(o, "p256dh", reg->p256dh_text) &&
                 cJSON_AddStringToObject(o, "auth", reg->auth_text);
        }
        break;
    case PUSH_KIND_MATRIX:
        ok = ok && cJSON_AddStringToObject(o, "url", reg->url) &&
             cJSON_AddStringToObject(o, "app_id", reg->app_id) &&
             cJSON_AddStringToObject(o, "pushkey", reg->pushkey);
        break;
    case PUSH_KIND_WEBHOOK:
        ok = ok && cJSON_AddStringToObject(o, "name", reg->name);
        break;
    default:
        ok = false;
        break;
    }
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (text) {
        *len = strlen(text);
    }
    return text;
}

static bool copy_field(const cJSON *o, const char *name, char *out, size_t cap)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(f) || strlen(f->valuestring) >= cap) {
        return false;
    }
    memcpy(out, f->valuestring, strlen(f->valuestring) + 1);
    return true;
}

bool push_reg_decode(const char *bytes, size_t len, struct push_reg *reg)
{
    cJSON *o = cJSON_ParseWithLength(bytes, len);
    char kind[16];
    size_t n = 0;
    bool ok = o && copy_field(o, "kind", kind, sizeof(kind));

    memset(reg, 0, sizeof(*reg));
    if (ok && !strcmp(kind, "unifiedpush")) {
        reg->kind = PUSH_KIND_UNIFIEDPUSH;
        ok = copy_field(o, "endpoint", reg->url, sizeof(reg->url));
        if (ok && cJSON_GetObjectItemCaseSensitive(o, "p256dh")) {
            ok = copy_field(o, "p256dh", reg->p256dh_text, sizeof(reg->p256dh_text)) &&
                 copy_field(o, "auth", reg->auth_text, sizeof(reg->auth_text)) &&
                 push_b64url_decode(reg->p256dh_text, reg->p256dh, PUSH_KEY_LEN, &n) &&
                 n == PUSH_KEY_LEN &&
                 push_b64url_decode(reg->auth_text, reg->auth, PUSH_AUTH_LEN, &n) &&
                 n == PUSH_AUTH_LEN;
            reg->encrypted = ok;
        }
    } else if (ok && !strcmp(kind, "matrix")) {
        reg->kind = PUSH_KIND_MATRIX;
        ok = copy_field(o, "url", reg->url, sizeof(reg->url)) &&
             copy_field(o, "app_id", reg->app_id, sizeof(reg->app_id)) &&
             copy_field(o, "pushkey", reg->pushkey, sizeof(reg->pushkey));
    } else if (ok && !strcmp(kind, "webhook")) {
        reg->kind = PUSH_KIND_WEBHOOK;
        ok = copy_field(o, "name", reg->name, sizeof(reg->name));
    } else {
        ok = false;
    }
    if (ok && reg->kind != PUSH_KIND_WEBHOOK) {
        /* the stored URL was normal already; this recovers loopback */
        char again[PUSH_URL_MAX + 1];
        ok =
            push_url_normalize(reg->url, again, &reg->loopback) == NULL && !strcmp(again, reg->url);
    }
    cJSON_Delete(o);
    return ok;
}

/* ===========================================================================
 * Notification bodies
 * ========================================================================= */

/* The first max bytes of text at most, cut before a UTF-8 continuation
 * byte; *cut says whether anything was left out. A malloc'd copy. */
static char *clip(const char *text, size_t max, bool *cut)
{
    size_t n = strlen(text);
    *cut = n > max;
    if (*cut) {
        n = max;
        while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80) {
            n--;
        }
    }
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, text, n);
        out[n] = '\0';
    }
    return out;
}

/* Prints o, and frees it: NULL when it is larger than max. */
static char *print_bounded(cJSON *o, bool ok, size_t max, size_t *len)
{
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (text && strlen(text) > max) {
        cJSON_free(text);
        text = NULL;
    }
    if (text) {
        *len = strlen(text);
    }
    return text;
}

char *push_note_json(const struct push_note *n, bool with_text, bool who, size_t max, size_t *len)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "group", n->group) &&
              cJSON_AddNumberToObject(o, "id", (double)n->id) &&
              cJSON_AddStringToObject(o, "from", n->from) &&
              cJSON_AddNumberToObject(o, "unread", (double)n->unread);
    if (ok && who) {
        ok = cJSON_AddStringToObject(o, "member", n->member) &&
             cJSON_AddStringToObject(o, "device", n->device);
    }
    if (ok && with_text && n->text) {
        bool cut = false;
        char *t = clip(n->text, PUSH_NOTE_TEXT_MAX, &cut);
        ok = t && cJSON_AddStringToObject(o, "body", t) &&
             (!cut || cJSON_AddTrueToObject(o, "truncated"));
        free(t);
    }
    return print_bounded(o, ok, max, len);
}

char *push_note_matrix(const struct push_note *n, bool with_text, const struct push_reg *reg,
                       size_t max, size_t *len)
{
    char event[CHAT_PROTO_GROUP_MAX + 32];
    cJSON *root = cJSON_CreateObject();
    cJSON *note = root ? cJSON_AddObjectToObject(root, "notification") : NULL;
    cJSON *counts = note ? cJSON_AddObjectToObject(note, "counts") : NULL;
    cJSON *devices = note ? cJSON_AddArrayToObject(note, "devices") : NULL;
    cJSON *dev = cJSON_CreateObject();

    snprintf(event, sizeof(event), "%s/%llu", n->group, (unsigned long long)n->id);
    bool ok = counts && devices && dev && cJSON_AddItemToArray(devices, dev);
    if (!ok) {
        cJSON_Delete(dev);
    }
    ok = ok && cJSON_AddStringToObject(note, "event_id", event) &&
         cJSON_AddStringToObject(note, "room_id", n->group) &&
         cJSON_AddStringToObject(note, "room_name", n->group) &&
         cJSON_AddStringToObject(note, "type", "m.room.message") &&
         cJSON_AddStringToObject(note, "sender", n->from) &&
         cJSON_AddStringToObject(note, "prio", "high") &&
         cJSON_AddNumberToObject(counts, "unread", (double)n->unread) &&
         cJSON_AddStringToObject(dev, "app_id", reg->app_id) &&
         cJSON_AddStringToObject(dev, "pushkey", reg->pushkey);
    if (ok && with_text && n->text) {
        bool cut = false;
        char *t = clip(n->text, PUSH_NOTE_TEXT_MAX, &cut);
        cJSON *content = cJSON_AddObjectToObject(note, "content");
        ok = t && content && cJSON_AddStringToObject(content, "msgtype", "m.text") &&
             cJSON_AddStringToObject(content, "body", t);
        free(t);
    }
    return print_bounded(root, ok, max, len);
}
