/* chat_proto_envelope.c: the check of a stored envelope's shape (see
 * chat_proto_envelope.h). */
#include "chat_proto_envelope.h"

#include <string.h>

/* U+FDD0 in UTF-8: what the plugin indexes a cid's \u0000 as (it carries
 * a NUL through cJSON as this noncharacter: plugin/envelope.c). */
#define NUL_STAND_IN "\xEF\xB7\x90"

/* Room to decode a name: one byte more than any valid name, so that a
 * name too long is told as such. */
#define NAME_BUF (CHAT_PROTO_NAME_MAX + 2)

/* Takes the literal lit at *p; false (and *p unmoved) when the text
 * differs. */
static bool take(const char **p, const char *end, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(end - *p) < n || memcmp(*p, lit, n) != 0) {
        return false;
    }
    *p += n;
    return true;
}

/* Plain digits at *p, as the plugin prints an id or a time: no sign,
 * fraction or exponent, no leading zero (but 0 itself), at most
 * CHAT_PROTO_JSON_INT_MAX. Moves *p past them. */
static bool take_int(const char **p, const char *end, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    while (*p < end && **p >= '0' && **p <= '9' && *p - s < 17) {
        x = x * 10 + (uint64_t)(**p - '0');
        (*p)++;
    }
    bool follows = *p < end && (**p == ',' || **p == '}');
    if (*p == s || (*s == '0' && *p - s > 1) || !follows || x > CHAT_PROTO_JSON_INT_MAX) {
        return false;
    }
    *v = x;
    return true;
}

/* One of the names the plugin writes after the id: its key as printed, and
 * the rule of its value. */
struct name_field {
    const char *lead; /* ,"group": */
    const char *field;
    const char *missing;    /* the reason when the envelope does not go on with lead */
    const char *not_string; /* ... when its value is not a string */
    const char *not_utf8;   /* ... when it does not decode (a lone surrogate) */
    const char *(*check)(const char *name, size_t len); /* bounds it to its copy's room */
};

static const struct name_field group_field = {
    ",\"group\":",
    "group",
    "envelope has no \"group\" after its id",
    "envelope \"group\" must be a string",
    "group name is not valid UTF-8",
    chat_proto_group_error,
};

static const struct name_field from_field = {
    ",\"from\":",
    "from",
    "envelope has no \"from\" after its group",
    "envelope \"from\" must be a string",
    "member name is not valid UTF-8",
    chat_proto_member_error,
};

/* Takes f's member at *p into dest (room for what f->check accepts):
 * NULL, or the reason. */
static const char *take_name(const char **p, const char *end, const struct name_field *f,
                             char *dest)
{
    char buf[NAME_BUF] = "";
    bool escaped = false;
    if (!take(p, end, f->lead)) {
        return f->missing;
    }
    if (*p >= end || **p != '"') {
        return f->not_string;
    }
    const char *s = *p;
    *p = chat_proto_json_skip_string(s, end, &escaped);
    size_t n = chat_proto_json_unescape(s, *p, buf, sizeof(buf));
    if (n == SIZE_MAX) {
        /* too long for buf (the check says so from the length alone), or
         * a lone surrogate */
        return (size_t)(*p - s) >= sizeof(buf) ? f->check(buf, sizeof(buf)) : f->not_utf8;
    }
    const char *why = f->check(buf, n);
    if (!why) {
        memcpy(dest, buf, n + 1);
    }
    return why;
}

const char *chat_proto_cid_read(const char *v, const char *vend, char cid[CHAT_PROTO_CID_MAX + 1])
{
    static const char *const bad = "cid must be a string of 1 to 64 bytes";
    char buf[NAME_BUF];
    size_t n = *v == '"' ? chat_proto_json_unescape(v, vend, buf, sizeof(buf)) : SIZE_MAX;
    size_t nuls = 0, at = 0;
    for (size_t i = 0; n != SIZE_MAX && i < n; i++) {
        nuls += buf[i] == '\0';
    }
    if (n == SIZE_MAX || n == 0 || n + 2 * nuls > CHAT_PROTO_CID_MAX) {
        return bad;
    }
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == '\0') {
            memcpy(cid + at, NUL_STAND_IN, 3);
            at += 3;
        } else {
            cid[at++] = buf[i];
        }
    }
    cid[at] = '\0';
    return NULL;
}

/* A "cid": a string of 1 to CHAT_PROTO_CID_MAX bytes, as the plugin
 * indexes it. */
static const char *check_cid(const char *v, const char *vend, chat_proto_envelope *out)
{
    const char *why = chat_proto_cid_read(v, vend, out->cid);
    out->has_cid = why == NULL;
    return why;
}

/* Plain digits in [v, vend), as the plugin prints ids and times. */
static bool plain_int(const char *v, const char *vend, uint64_t *x)
{
    const char *p = v;
    return take_int(&p, vend + 1, x) && p == vend;
}

/* A tombstone's mark (protocol v1.2, recall): true. */
static const char *check_recalled(const char *v, const char *vend, chat_proto_envelope *out)
{
    if ((size_t)(vend - v) != 4 || memcmp(v, "true", 4) != 0) {
        return "recalled must be true";
    }
    out->recalled = true;
    return NULL;
}

/* An edited version's time (v1.2, edit): ms, as "ts". */
static const char *check_edited(const char *v, const char *vend, chat_proto_envelope *out)
{
    return plain_int(v, vend, &out->edited)
               ? NULL
               : "edited must be an integer from 0 to 9007199254740991";
}

/* The id a recall or an edit names: an earlier message, checked against
 * the envelope's own id once it is read (chat_proto_envelope_error). */
static const char *check_recall(const char *v, const char *vend, chat_proto_envelope *out)
{
    return plain_int(v, vend, &out->recall) && out->recall > 0
               ? NULL
               : "recall must be an integer from 1 to 9007199254740991";
}

static const char *check_edit(const char *v, const char *vend, chat_proto_envelope *out)
{
    return plain_int(v, vend, &out->edit) && out->edit > 0
               ? NULL
               : "edit must be an integer from 1 to 9007199254740991";
}

/* An edited version's list of the messages that carried its edits (v1.2,
 * recall-complete): [id,...] as the plugin prints it, plain ids from 1,
 * at most CHAT_PROTO_EDITS_MAX of them. */
static const char *check_edits(const char *v, const char *vend, chat_proto_envelope *out)
{
    static const char why[] = "edits must be a list of 1 to 20 message ids";
    const char *p = v + 1;
    unsigned n = 0;
    (void)out;
    _Static_assert(CHAT_PROTO_EDITS_MAX == 20, "the reason names the bound");
    if (vend - v < 3 || *v != '[' || vend[-1] != ']') {
        return why;
    }
    while (p < vend) {
        const char *s = p;
        uint64_t id = 0;
        while (p < vend && *p >= '0' && *p <= '9' && p - s < 17) {
            id = id * 10 + (uint64_t)(*p - '0');
            p++;
        }
        if (p == s || *s == '0' || id > CHAT_PROTO_JSON_INT_MAX || ++n > CHAT_PROTO_EDITS_MAX ||
            p == vend || (*p != ',' && *p != ']') || (*p == ']' && p + 1 != vend)) {
            return why;
        }
        p++;
    }
    return NULL;
}

/* The keys of the plugin's own four fields, which come once, first. */
static const struct {
    const char *key, *twice;
} own_fields[] = {
    {"id", "envelope has the key \"id\" more than once"},
    {"group", "envelope has the key \"group\" more than once"},
    {"from", "envelope has the key \"from\" more than once"},
    {"ts", "envelope has the key \"ts\" more than once"},
};

/* The fields after those four that a reader checks, each at most once: a
 * field a later version of the envelope adds (a tombstone's "recalled",
 * an edit's "edited") is one line here, with its check. */
static const struct later_field {
    const char *key;
    const char *twice;
    const char *(*check)(const char *v, const char *vend, chat_proto_envelope *out);
} later_fields[] = {
    {"cid", "envelope has the key \"cid\" more than once", check_cid},
    {"recalled", "envelope has the key \"recalled\" more than once", check_recalled},
    {"edited", "envelope has the key \"edited\" more than once", check_edited},
    {"recall", "envelope has the key \"recall\" more than once", check_recall},
    {"edit", "envelope has the key \"edit\" more than once", check_edit},
    {"edits", "envelope has the key \"edits\" more than once", check_edits},
};

#define LATER_FIELDS (sizeof(later_fields) / sizeof(later_fields[0]))

/* Whether the JSON string [s, e) holds the escape \u0000 (its backslashes
 * each start an escape: "\\u0000" is none). */
static bool has_nul_escape(const char *s, const char *e)
{
    for (const char *p = s; p + 1 < e; p++) {
        if (*p != '\\') {
            continue;
        }
        if (p[1] == 'u' && e - p >= 6 && !memcmp(p + 2, "0000", 4)) {
            return true;
        }
        p++; /* the escaped character */
    }
    return false;
}

/* key (a decoded key's first bytes, cut at its first NUL or at the
 * buffer's end, zero-filled) as a reader that ends a key at its NUL sees
 * it: the field of the plugin it names, or NULL. */
static const char *cut_key(const char *key)
{
    for (size_t i = 0; i < sizeof(own_fields) / sizeof(own_fields[0]); i++) {
        if (!strcmp(key, own_fields[i].key)) {
            return own_fields[i].key;
        }
    }
    for (size_t i = 0; i < LATER_FIELDS; i++) {
        if (!strcmp(key, later_fields[i].key)) {
            return later_fields[i].key;
        }
    }
    return NULL;
}

/* The members after "ts", from p (at its ',' or the closing '}'). */
static const char *check_later(const char *p, const char *end, chat_proto_envelope *out)
{
    bool seen[LATER_FIELDS] = {false};
    while (p < end && *p == ',') {
        const char *why = NULL;
        bool escaped = false;
        char key[16];
        const char *k = chat_proto_json_skip_ws(p + 1, end);
        const char *kend = chat_proto_json_skip_string(k, end, &escaped);
        const char *v = chat_proto_json_skip_ws(chat_proto_json_skip_ws(kend, end) + 1, end);
        const char *vend = chat_proto_json_skip_value(v, end, 0, 0);
        /* a key spelt with escapes is the key they spell (the plugin's
         * reader decodes keys); one with a \u0000 in it is what readers
         * that end a key at its NUL take it for (cJSON: the plugin, the
         * client library), which the plugin never stores when that is one
         * of these (plugin/envelope.c drops it) */
        memset(key, 0, sizeof(key));
        size_t n = chat_proto_json_unescape(k, kend, key, sizeof(key));
        bool named = n != SIZE_MAX && strlen(key) == n;
        if (!vend) {
            return "envelope is not a JSON object";
        }
        if (!named && has_nul_escape(k, kend) && (why = cut_key(key)) != NULL) {
            out->field = why;
            return "a key holds \\u0000 after this name: readers that end a key at a NUL take it "
                   "for this field";
        }
        for (size_t i = 0; named && i < sizeof(own_fields) / sizeof(own_fields[0]); i++) {
            if (!strcmp(key, own_fields[i].key)) {
                out->field = own_fields[i].key;
                return own_fields[i].twice;
            }
        }
        for (size_t i = 0; named && i < LATER_FIELDS; i++) {
            if (strcmp(key, later_fields[i].key) != 0) {
                continue;
            }
            out->field = later_fields[i].key;
            why = seen[i] ? later_fields[i].twice : later_fields[i].check(v, vend, out);
            if (why) {
                return why;
            }
            seen[i] = true;
            out->field = NULL;
        }
        p = chat_proto_json_skip_ws(vend, end);
    }
    return p < end && *p == '}' ? NULL : "envelope is not a JSON object";
}

const char *chat_proto_envelope_error(const char *text, size_t len, chat_proto_envelope *out)
{
    const char *p = text, *end = text + len, *why = NULL;

    memset(out, 0, sizeof(*out));
    if (!chat_proto_utf8_valid(text, len)) {
        return "envelope is not valid UTF-8";
    }
    if (!chat_proto_json_valid(text, len) || len == 0 || text[0] != '{') {
        return "envelope is not a JSON object";
    }
    out->field = "id";
    if (!take(&p, end, "{\"id\":")) {
        return "envelope does not begin with {\"id\":";
    }
    out->id_at = (size_t)(p - text);
    if (!take_int(&p, end, &out->id) || out->id == 0) {
        return "envelope id must be an integer from 1 to 9007199254740991";
    }
    out->id_len = (size_t)(p - text) - out->id_at;
    out->field = "group";
    if ((why = take_name(&p, end, &group_field, out->group)) != NULL) {
        return why;
    }
    out->field = "from";
    if ((why = take_name(&p, end, &from_field, out->from)) != NULL) {
        return why;
    }
    out->field = "ts";
    if (!take(&p, end, ",\"ts\":")) {
        return "envelope has no \"ts\" after its sender";
    }
    out->ts_at = (size_t)(p - text);
    if (!take_int(&p, end, &out->ts)) {
        return "envelope ts must be an integer from 0 to 9007199254740991";
    }
    out->ts_len = (size_t)(p - text) - out->ts_at;
    out->field = NULL;
    if ((why = check_later(p, end, out)) != NULL) {
        return why;
    }
    if ((out->recall && out->recall >= out->id) || (out->edit && out->edit >= out->id)) {
        out->field = out->recall ? "recall" : "edit";
        return "a recall or an edit names an earlier message id";
    }
    return NULL;
}
