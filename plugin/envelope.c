/* envelope.c: turns a published payload into the stored envelope, and reads
 * ack payloads. */
#include "plugin.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Fields the plugin owns: whatever a client puts there is overwritten, or
 * (those of a recall or an edit, protocol v1.2) dropped, so that no publish
 * passes for a change the recall and edit commands alone make. */
static bool reserved(const char *name)
{
    return name &&
           (!strcmp(name, "id") || !strcmp(name, "group") || !strcmp(name, "from") ||
            !strcmp(name, "ts") || !strcmp(name, CHAT_PROTO_FIELD_RECALL) ||
            !strcmp(name, CHAT_PROTO_FIELD_EDIT) || !strcmp(name, CHAT_PROTO_FIELD_RECALLED) ||
            !strcmp(name, CHAT_PROTO_FIELD_EDITED) || !strcmp(name, CHAT_PROTO_FIELD_EDITS));
}

/* The reason to refuse an object that holds one of the plugin's keys, or
 * cid, twice: readers disagree on which one counts (cJSON takes the first,
 * most JSON parsers the last), so one message could be indexed under one
 * cid and shown with another. NULL when there is none. */
static const char *duplicate_key(const cJSON *obj)
{
    static const char *const keys[] = {"id", "group", "from", "ts", "cid"};
    static const char *const why[] = {
        "payload has the key \"id\" more than once",
        "payload has the key \"group\" more than once",
        "payload has the key \"from\" more than once",
        "payload has the key \"ts\" more than once",
        "payload has the key \"cid\" more than once",
    };
    unsigned seen[5] = {0};
    for (const cJSON *it = obj->child; it; it = it->next) {
        for (size_t k = 0; k < 5; k++) {
            if (it->string && !strcmp(it->string, keys[k]) && seen[k]++) {
                return why[k];
            }
        }
    }
    return NULL;
}

static cJSON *envelope_head(uint64_t id, const char *group, const char *from, int64_t ts_ms)
{
    cJSON *out = cJSON_CreateObject();
    if (!out) {
        return NULL;
    }
    /* Written as integers: cJSON would print an id of 16 digits (up to
     * 2^53 - 1 is allowed) with 15 significant ones (see exact_numbers). */
    char num_id[24], num_ts[24];
    snprintf(num_id, sizeof(num_id), "%llu", (unsigned long long)id);
    snprintf(num_ts, sizeof(num_ts), "%lld", (long long)ts_ms);
    if (!cJSON_AddRawToObject(out, "id", num_id) || !cJSON_AddStringToObject(out, "group", group) ||
        !cJSON_AddStringToObject(out, "from", from) || !cJSON_AddRawToObject(out, "ts", num_ts)) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

/* U+FDD0 in UTF-8: a noncharacter, "never for interchange". */
#define NUL_STAND_IN "\xEF\xB7\x90"

/* Whether a key of the tree (\u0000 carried as NUL_STAND_IN) is one that
 * readers which end a key at its NUL take for one of the plugin's keys or
 * cid: cJSON, and so the plugin itself, the client library and mqchat, read
 * "recall\u0000" as "recall" (a forged recall of another member's message)
 * and "cid\u0000" as a second cid. Such a key is dropped as the plugin's
 * keys are, so that every reader sees the same envelope. */
static bool spells_plugin_key(const char *name)
{
    const char *nul = name ? strstr(name, NUL_STAND_IN) : NULL;
    char head[16];
    size_t n = nul ? (size_t)(nul - name) : 0;
    if (!nul || n >= sizeof(head)) {
        return false;
    }
    memcpy(head, name, n);
    head[n] = '\0';
    return reserved(head) || !strcmp(head, "cid");
}

/* Replaces every stand-in in the printed envelope (3 bytes) by the escape
 * \u0000 (6 bytes). Frees env; returns the new text or NULL. */
static char *restore_nuls(char *env)
{
    size_t n = 0, len = strlen(env);
    for (const char *p = env; (p = strstr(p, NUL_STAND_IN)) != NULL; p += 3) {
        n++;
    }
    char *out = malloc(len + 3 * n + 1);
    if (out) {
        char *o = out;
        for (const char *p = env; *p;) {
            if (!strncmp(p, NUL_STAND_IN, 3)) {
                memcpy(o, "\\u0000", 6);
                o += 6;
                p += 3;
            } else {
                *o++ = *p++;
            }
        }
        *o = '\0';
    }
    free(env);
    return out;
}

/* cJSON prints a number with 15 significant digits whenever that reads
 * back within a relative epsilon (9007199254740993 comes out as
 * 9.00719925474099e+15), and an infinity (1e400) as null. The splice
 * keeps the payload's text; so that the tree keeps the same values, its
 * numbers are printed here instead: the shortest of 15 to 17 digits that
 * reads back as the same double, infinities as 1e999. Recursion is bounded
 * by cJSON's nesting limit. Returns false when out of memory. */
static bool exact_numbers(cJSON *parent)
{
    for (cJSON *it = parent->child; it; it = it->next) {
        if (cJSON_IsArray(it) || cJSON_IsObject(it)) {
            if (!exact_numbers(it)) {
                return false;
            }
            continue;
        }
        if (!cJSON_IsNumber(it)) {
            continue;
        }
        char num[32];
        double d = it->valuedouble;
        if (isinf(d)) {
            snprintf(num, sizeof(num), "%s", d > 0 ? "1e999" : "-1e999");
        } else {
            for (int digits = 15; digits <= 17; digits++) {
                snprintf(num, sizeof(num), "%.*g", digits, d);
                if (strtod(num, NULL) == d) {
                    break;
                }
            }
        }
        cJSON *raw = cJSON_CreateRaw(num);
        if (!raw) {
            return false;
        }
        /* The key moves over; the replaced item is freed. */
        raw->string = it->string;
        it->string = NULL;
        cJSON_ReplaceItemViaPointer(parent, it, raw);
        it = raw;
    }
    return true;
}

/* Writes into a buffer sized in advance by the caller. */
struct out {
    char *p;
};

static void put(struct out *o, const char *s, size_t n)
{
    memcpy(o->p, s, n);
    o->p += n;
}

static void put_str(struct out *o, const char *s)
{
    o->p += chat_proto_json_string(o->p, s, strlen(s));
}

/* Writes v in decimal; returns the bytes written (at most 20). */
static size_t put_u64(char *buf, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) {
        buf[i] = tmp[n - 1 - i];
    }
    return n;
}

/* What cJSON reads of strict JSON differently from its text, or not at
 * all, sends the splice's checks to the tree: nesting deeper than this
 * (cJSON stops at 1000 levels) and numbers longer than this (cJSON reads
 * 63 bytes of one and fails on more). */
#define SCAN_DEPTH_MAX 64
#define SCAN_NUMBER_MAX 32

/* Whether the strict JSON text[0..len) holds a \u escape. Its backslashes
 * all start escapes of two bytes or six: one that is not followed by a u is
 * skipped with the byte it escapes (an escaped backslash before a u is no
 * \u escape). */
static bool has_u_escape(const char *text, size_t len)
{
    const char *end = text + len;
    for (const char *p = memchr(text, '\\', len); p && p + 1 < end;
         p = memchr(p + 2, '\\', (size_t)(end - p - 2))) {
        if (p[1] == 'u') {
            return true;
        }
        if (p + 2 >= end) {
            break;
        }
    }
    return false;
}

/* The reserved key that key[0..len) is, or -1: 0..4 id group from ts cid,
 * then the fields of a change (5..9), which are dropped like 0..3. */
#define RESERVED_KEYS 10
static int reserved_index(const char *key, size_t len)
{
    static const char *const keys[RESERVED_KEYS] = {"id",
                                                    "group",
                                                    "from",
                                                    "ts",
                                                    "cid",
                                                    CHAT_PROTO_FIELD_RECALL,
                                                    CHAT_PROTO_FIELD_EDIT,
                                                    CHAT_PROTO_FIELD_RECALLED,
                                                    CHAT_PROTO_FIELD_EDITED,
                                                    CHAT_PROTO_FIELD_EDITS};
    static const unsigned char lens[RESERVED_KEYS] = {2, 5, 4, 2, 3, 6, 4, 8, 6, 5};
    for (int k = 0; k < RESERVED_KEYS; k++) {
        if (len == lens[k] && !memcmp(key, keys[k], len)) {
            return k;
        }
    }
    return -1;
}

enum splice_result { SPLICED, SPLICE_DECLINED, SPLICE_NOMEM };

/* The envelope of the JSON object text[0..len) (strict JSON, validated by
 * the caller): the plugin's fields, then the object's members as they were,
 * less the reserved ones, in *env (malloc'd). Declines a key that holds an
 * escape (it might spell a reserved name). With check, the caller has not
 * parsed the text with cJSON and the splice does what the tree's checks
 * would: *cid (malloc'd) is the cid's text; it declines whatever the tree
 * might read or judge otherwise (a reserved key twice, a cid that is not a
 * plain string of 1 to 64 bytes, nesting or numbers beyond the bounds
 * above), so that every refusal comes from one place, the tree's way. */
static enum splice_result splice(const char *text, size_t len, bool check, uint64_t id,
                                 const char *group, const char *from, int64_t ts_ms, char **env,
                                 char **cid)
{
    const char *end = text + len;
    const char *cid_at = NULL;
    size_t cid_len = 0;
    unsigned seen[RESERVED_KEYS] = {0};
    size_t cap = 96 + 6 * (strlen(group) + strlen(from)) + len;
    char *buf = malloc(cap);
    if (!buf) {
        return SPLICE_NOMEM;
    }
    struct out o = {buf};
    put(&o, "{\"id\":", 6);
    o.p += put_u64(o.p, id);
    put(&o, ",\"group\":", 9);
    put_str(&o, group);
    put(&o, ",\"from\":", 8);
    put_str(&o, from);
    put(&o, ",\"ts\":", 6);
    if (ts_ms < 0) {
        *o.p++ = '-';
    }
    o.p += put_u64(o.p, ts_ms < 0 ? 0 - (uint64_t)ts_ms : (uint64_t)ts_ms);
    const char *p =
        chat_proto_json_skip_ws(chat_proto_json_skip_ws(text, end) + 1, end); /* past '{' */
    while (p < end && *p == '"') {
        bool escaped = false;
        const char *member = p;
        const char *key_end = chat_proto_json_skip_string(p, end, &escaped);
        if (escaped) {
            goto declined;
        }
        const char *value =
            chat_proto_json_skip_ws(chat_proto_json_skip_ws(key_end, end) + 1, end); /* past ':' */
        p = chat_proto_json_skip_value(value, end, check ? SCAN_DEPTH_MAX : 0,
                                       check ? SCAN_NUMBER_MAX : 0);
        if (!p) {
            goto declined;
        }
        int k = reserved_index(member + 1, (size_t)(key_end - member) - 2);
        if (k < 0) {
            *o.p++ = ',';
            put(&o, member, (size_t)(p - member));
        } else if (check && seen[k]++) {
            goto declined;
        } else if (k == 4) {
            /* The cid stays in the envelope, as the client wrote it. */
            *o.p++ = ',';
            put(&o, member, (size_t)(p - member));
            cid_at = value;
            cid_len = (size_t)(p - value);
        }
        p = chat_proto_json_skip_ws(p, end);
        if (p < end && *p == ',') {
            p = chat_proto_json_skip_ws(p + 1, end);
        }
    }
    put(&o, "}", 2); /* with the NUL */
    if (check && cid_at) {
        bool escaped = false;
        if (*cid_at != '"' ||
            chat_proto_json_skip_string(cid_at, end, &escaped) != cid_at + cid_len || escaped ||
            cid_len < 3 || cid_len - 2 > CHAT_CID_MAX) {
            goto declined;
        }
        *cid = malloc(cid_len - 1);
        if (!*cid) {
            free(buf);
            return SPLICE_NOMEM;
        }
        memcpy(*cid, cid_at + 1, cid_len - 2);
        (*cid)[cid_len - 2] = '\0';
    }
    *env = buf;
    return SPLICED;

declined:
    free(buf);
    return SPLICE_DECLINED;
}

/* Whether text holds U+FDD0 as a JSON escape, whose hex digits JSON lets
 * be of either case (\uFDD0, \ufdd0, \uFdD0 ...). */
static bool has_fdd0_escape(const char *text)
{
    for (const char *p = strstr(text, "\\u"); p; p = strstr(p + 1, "\\u")) {
        if (strncasecmp(p + 2, "fdd0", 4) == 0) {
            return true;
        }
    }
    return false;
}

void chat_envelope_build_way(enum chat_envelope_way way, const void *payload, size_t len,
                             uint64_t id, const char *group, const char *from, int64_t ts_ms,
                             char **env, char **cid, const char **why)
{
    cJSON *in = NULL, *out = NULL;
    char *text = NULL, *parsed = NULL;

    *env = NULL;
    *cid = NULL;
    *why = NULL;
    if (len > 0 && !chat_proto_utf8_valid(payload, len)) {
        *why = "payload is neither a JSON object nor UTF-8 text";
        return;
    }
    /* The common case, a JSON object of plain members, is spliced without
     * cJSON's tree: its allocations and parse were most of the plugin's
     * cost per publish. The splice passes bytes on unparsed, so only strict
     * JSON may take it: cJSON also reads a byte order mark, control
     * characters as blanks or raw in strings, and numbers such as 01 or
     * -.5, which the splice would drop members over or hand on to readers
     * that refuse them (a web page's JSON.parse). The tree prints them as
     * JSON. A \u escape goes the tree's way too (\u0000, U+FDD0 and lone
     * surrogates need it), as does any refusal. */
    bool strict = false;
    if (way != CHAT_ENVELOPE_TREE) {
        const char *s = chat_proto_json_skip_ws(payload, (const char *)payload + len);
        strict =
            s < (const char *)payload + len && *s == '{' && chat_proto_json_valid(payload, len);
        if (strict && !has_u_escape(payload, len)) {
            enum splice_result r = splice(payload, len, true, id, group, from, ts_ms, env, cid);
            if (r != SPLICE_DECLINED) {
                *why = r == SPLICE_NOMEM ? "out of memory" : NULL;
                return;
            }
        }
        if (way == CHAT_ENVELOPE_SPLICE) {
            return;
        }
    }
    text = malloc(len + 1);
    if (!text) {
        *why = "out of memory";
        return;
    }
    if (len) {
        memcpy(text, payload, len);
    }
    text[len] = '\0';

    out = envelope_head(id, group, from, ts_ms);
    if (!out) {
        *why = "out of memory";
        goto done;
    }
    /* text holds no NUL (UTF-8 validation refuses it), so it ends the parse. */
    /* cJSON decodes \u0000 into a NUL that cuts its string short. Carry it
     * through as the noncharacter U+FDD0 instead, and turn that back into
     * \u0000 after printing; a payload that holds U+FDD0 itself keeps its
     * \u0000 as is only when it has none. */
    size_t nuls = chat_nul_escapes(text, len, NULL);
    if (nuls && (strstr(text, NUL_STAND_IN) || has_fdd0_escape(text))) {
        *why = "payload holds both \\u0000 and U+FDD0";
        goto done;
    }
    if (nuls) {
        /* Rewrite a copy: text that is not a JSON object is kept verbatim. */
        parsed = strdup(text);
        if (!parsed) {
            *why = "out of memory";
            goto done;
        }
        chat_nul_escapes(parsed, len, "FDD0");
    }
    in = cJSON_ParseWithOpts(parsed ? parsed : text, NULL, true);
    if (cJSON_IsObject(in) && (*why = duplicate_key(in)) != NULL) {
        goto done;
    }
    if (cJSON_IsObject(in)) {
        cJSON *c = cJSON_GetObjectItemCaseSensitive(in, "cid");
        if (c) {
            size_t clen = cJSON_IsString(c) ? strlen(c->valuestring) : 0;
            if (!cJSON_IsString(c) || clen == 0 || clen > CHAT_CID_MAX) {
                *why = "cid must be a string of 1 to 64 bytes";
                goto done;
            }
            *cid = strdup(c->valuestring);
            if (!*cid) {
                *why = "out of memory";
                goto done;
            }
        }
        /* Members the fast way could not check: their bytes still go as
         * they are where they are strict JSON and no key is escaped. */
        if (strict) {
            char *unused = NULL;
            enum splice_result r = splice(text, len, false, id, group, from, ts_ms, env, &unused);
            if (r != SPLICE_DECLINED) {
                *why = r == SPLICE_NOMEM ? "out of memory" : NULL;
                goto done;
            }
        }
        if (!exact_numbers(in)) {
            *why = "out of memory";
            goto done;
        }
        cJSON *it = in->child;
        while (it) {
            cJSON *next = it->next;
            if (!reserved(it->string) && !(nuls && spells_plugin_key(it->string))) {
                cJSON_DetachItemViaPointer(in, it);
                if (!cJSON_AddItemToObject(out, it->string, it)) {
                    cJSON_Delete(it);
                    *why = "out of memory";
                    goto done;
                }
            }
            it = next;
        }
    } else if (!cJSON_AddStringToObject(out, "body", text)) {
        *why = "out of memory";
        goto done;
    }
    *env = cJSON_PrintUnformatted(out);
    if (!*env) {
        *why = "out of memory";
    } else if (nuls && cJSON_IsObject(in)) {
        *env = restore_nuls(*env);
        if (!*env) {
            *why = "out of memory";
        }
    }

done:
    if (*why) {
        free(*env);
        *env = NULL;
    }
    cJSON_Delete(in);
    cJSON_Delete(out);
    free(parsed);
    free(text);
}

/* Splits an envelope printed with 0 for the id and the time into the
 * store's template around those two zeros. Both ways of printing put the
 * plugin's fields first, in this order, and the group and sender are JSON
 * strings, in which a '"' is always escaped: the first ,"ts": is the
 * plugin's own. */
static bool split(const char *text, chat_envelope *tpl)
{
    static const char id_key[] = "{\"id\":0,";
    static const char ts_key[] = ",\"ts\":0";
    if (strncmp(text, id_key, sizeof(id_key) - 1) != 0) {
        return false;
    }
    const char *ts = strstr(text + sizeof(id_key) - 2, ts_key);
    if (!ts) {
        return false;
    }
    tpl->head = text;
    tpl->head_len = sizeof(id_key) - 3; /* {"id": */
    tpl->mid = text + sizeof(id_key) - 2;
    tpl->mid_len = (size_t)(ts + sizeof(ts_key) - 2 - tpl->mid); /* ,"group":...,"ts": */
    tpl->tail = ts + sizeof(ts_key) - 1;
    tpl->tail_len = strlen(tpl->tail);
    return true;
}

const char *chat_envelope_build(const void *payload, size_t len, const char *group,
                                const char *from, char **env, chat_envelope *tpl, char **cid)
{
    const char *why = NULL;
    /* With 0 for the id and the time, which split cuts out. */
    chat_envelope_build_way(CHAT_ENVELOPE_ANY, payload, len, 0, group, from, 0, env, cid, &why);
    if (*env && !split(*env, tpl)) {
        free(*env);
        *env = NULL;
        why = "internal error: the envelope has an unexpected shape";
    }
    /* ANY always has a reason when it builds nothing (only SPLICE may not). */
    return *env ? NULL : why ? why : "internal error: no envelope was built";
}

bool chat_ack_parse(const void *payload, size_t len, uint64_t *id)
{
    const char *p = payload;
    size_t i = 0, end = len;
    uint64_t v = 0;

    /* Tolerate the newline a shell or a line-oriented client appends. */
    while (i < end && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) {
        i++;
    }
    while (end > i &&
           (p[end - 1] == ' ' || p[end - 1] == '\t' || p[end - 1] == '\r' || p[end - 1] == '\n')) {
        end--;
    }
    if (i == end || end - i > 19) {
        return false;
    }
    for (; i < end; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *id = v;
    return true;
}

char *chat_payload_cid(const void *payload, size_t len, size_t max_len)
{
    char *cid = NULL;
    if (len == 0 || len > max_len || !chat_proto_utf8_valid(payload, len)) {
        return NULL;
    }
    cJSON *in = cJSON_ParseWithLength(payload, len);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(in, "cid");
    if (cJSON_IsObject(in) && cJSON_IsString(c) && strlen(c->valuestring) <= CHAT_CID_MAX) {
        cid = strdup(c->valuestring);
    }
    cJSON_Delete(in);
    return cid;
}

/* ------------------------------------------------------------------------
 * Changes (protocol v1.2): recall and edit
 * --------------------------------------------------------------------- */

/* The id item holds (an integer from 1 to 2^53 - 1), else 0. */
static uint64_t json_id(const cJSON *item)
{
    if (!cJSON_IsNumber(item) || !(item->valuedouble >= 1) ||
        item->valuedouble > (double)CHAT_PROTO_JSON_INT_MAX ||
        item->valuedouble != floor(item->valuedouble)) {
        return 0;
    }
    return (uint64_t)item->valuedouble;
}

const char *chat_envelope_facts(const char *env, size_t len, struct chat_envelope_facts *f)
{
    const char *why = NULL;
    memset(f, 0, sizeof(*f));
    cJSON *o = cJSON_ParseWithLength(env, len);
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(o, "from");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(o, "ts");
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(o, "cid");
    if (!cJSON_IsObject(o) || !cJSON_IsString(from) || !cJSON_IsNumber(ts) ||
        strlen(from->valuestring) >= sizeof(f->from) ||
        (cid && (!cJSON_IsString(cid) || strlen(cid->valuestring) > CHAT_CID_MAX))) {
        why = "the stored message is not an envelope of this plugin";
        goto done;
    }
    strcpy(f->from, from->valuestring);
    f->ts = (int64_t)ts->valuedouble;
    if (cid) {
        strcpy(f->cid, cid->valuestring);
        f->has_cid = true;
    }
    f->recalled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, CHAT_PROTO_FIELD_RECALLED));
    const cJSON *edit = cJSON_GetObjectItemCaseSensitive(o, CHAT_PROTO_FIELD_EDIT);
    f->change = cJSON_GetObjectItemCaseSensitive(o, CHAT_PROTO_FIELD_RECALL) != NULL || edit;
    f->edit_of = json_id(edit);
    /* The messages that carried its edits (recall-complete), as this
     * plugin lists them: ids only, each once. Whatever else a list holds
     * (a message stored by an older broker) names nothing; the recall
     * checks each id against what it names anyway. */
    const cJSON *edits = cJSON_GetObjectItemCaseSensitive(o, CHAT_PROTO_FIELD_EDITS);
    for (const cJSON *it = cJSON_IsArray(edits) ? edits->child : NULL; it; it = it->next) {
        uint64_t m = json_id(it);
        bool seen = m == 0;
        for (size_t i = 0; i < f->nedits && !seen; i++) {
            seen = f->edits[i] == m;
        }
        if (seen) {
            continue;
        }
        if (f->nedits == CHAT_PROTO_EDITS_MAX) {
            f->edits_over = true;
            break;
        }
        f->edits[f->nedits++] = m;
    }

done:
    cJSON_Delete(o);
    return why;
}

/* The keys of an edit command that are not fields of the message: the
 * command's own, and those the plugin owns (reserved). */
static bool not_a_field(const char *name)
{
    return !name || reserved(name) || !strcmp(name, "cid") || !strcmp(name, "command") ||
           !strcmp(name, "correlationData");
}

/* Appends ,"key":value for every field of an edit command c to b, with
 * numbers as exact_numbers prints them. Returns NULL or why not. */
static const char *put_fields(sbuf *b, const cJSON *c, size_t max)
{
    const char *why = NULL;
    cJSON *dup = cJSON_Duplicate(c, true);
    size_t start = b->len, n = 0;
    if (!dup || !exact_numbers(dup)) {
        cJSON_Delete(dup);
        return "out of memory";
    }
    for (const cJSON *it = dup->child; it && !why; it = it->next) {
        if (not_a_field(it->string)) {
            continue;
        }
        /* One key twice would read differently in different readers. */
        for (const cJSON *prev = dup->child; prev != it; prev = prev->next) {
            if (prev->string && !strcmp(prev->string, it->string)) {
                why = "edit has a field more than once";
            }
        }
        char *v = cJSON_PrintUnformatted(it);
        if (!v) {
            why = "out of memory";
            break;
        }
        sbuf_add(b, ",", 1);
        sbuf_json_str(b, it->string);
        sbuf_add(b, ":", 1);
        sbuf_puts(b, v);
        cJSON_free(v);
        n++;
        if (b->len - start > max) {
            why = "edit is larger than max_payload";
        }
    }
    cJSON_Delete(dup);
    return why ? why : n == 0 ? "edit has no new fields" : NULL;
}

/* The plugin's four fields of an envelope: {"id":id,"group":..,"from":..,"ts":ts */
static void put_head(sbuf *b, uint64_t id, const char *group, const char *from, int64_t ts)
{
    char num[24];
    sbuf_puts(b, "{\"id\":");
    sbuf_u64(b, id);
    sbuf_puts(b, ",\"group\":");
    sbuf_json_str(b, group);
    sbuf_puts(b, ",\"from\":");
    sbuf_json_str(b, from);
    sbuf_puts(b, ",\"ts\":");
    snprintf(num, sizeof(num), "%lld", (long long)ts);
    sbuf_puts(b, num);
}

char *chat_envelope_carrier_tombstone(const struct chat_envelope_facts *f, const char *group,
                                      uint64_t id, uint64_t n, size_t *len)
{
    sbuf b = {0};
    put_head(&b, id, group, f->from, f->ts);
    sbuf_puts(&b, ",\"" CHAT_PROTO_FIELD_EDIT "\":");
    sbuf_u64(&b, n);
    sbuf_puts(&b, ",\"" CHAT_PROTO_FIELD_RECALLED "\":true}");
    return sbuf_take(&b, len);
}

const char *chat_envelope_change(const struct chat_envelope_facts *f, const char *group,
                                 const char *by, uint64_t id, const struct cJSON *fields,
                                 size_t max, chat_change *ch, char **buf)
{
    sbuf b = {0};
    size_t at[7]; /* where each part starts; at[5] is the end, at[6] N's list's end */
    const char *why = NULL;

    *buf = NULL;
    /* N's new version: its own fields, then (edit) the new ones and the
     * time, or (recall) the tombstone's mark alone. */
    at[0] = 0;
    put_head(&b, id, group, f->from, f->ts);
    if (!fields) {
        sbuf_puts(&b, ",\"" CHAT_PROTO_FIELD_RECALLED "\":true}");
    } else {
        if (f->has_cid) {
            sbuf_puts(&b, ",\"cid\":");
            sbuf_json_str(&b, f->cid);
        }
        if ((why = put_fields(&b, fields, max)) != NULL) {
            goto fail;
        }
        sbuf_puts(&b, ",\"" CHAT_PROTO_FIELD_EDITED "\":");
    }
    at[1] = b.len;
    /* The edit's list of the messages that carried N's edits, M last (the
     * store's id hole), which a recall rewrites (recall-complete). */
    if (fields) {
        sbuf_puts(&b, ",\"" CHAT_PROTO_FIELD_EDITS "\":[");
        for (size_t i = 0; i < f->nedits; i++) {
            sbuf_u64(&b, f->edits[i]);
            sbuf_add(&b, ",", 1);
        }
    }
    at[6] = b.len;
    if (fields) {
        sbuf_puts(&b, "]}");
    }
    /* M: the plugin's fields with the store's two holes (id, ts), then
     * what it changes. */
    at[2] = b.len;
    sbuf_puts(&b, "{\"id\":");
    at[3] = b.len;
    sbuf_puts(&b, ",\"group\":");
    sbuf_json_str(&b, group);
    sbuf_puts(&b, ",\"from\":");
    sbuf_json_str(&b, by);
    sbuf_puts(&b, ",\"ts\":");
    at[4] = b.len;
    sbuf_puts(&b, fields ? ",\"" CHAT_PROTO_FIELD_EDIT "\":" : ",\"" CHAT_PROTO_FIELD_RECALL "\":");
    sbuf_u64(&b, id);
    if (fields && (why = put_fields(&b, fields, max)) != NULL) {
        goto fail;
    }
    sbuf_puts(&b, "}");
    at[5] = b.len;
    size_t len = 0;
    char *p = sbuf_take(&b, &len);
    if (!p) {
        return "out of memory";
    }
    ch->id = id;
    ch->before = p;
    ch->before_len = at[1];
    ch->stamp = fields != NULL;
    ch->after = p + at[1];
    ch->after_len = at[6] - at[1];
    ch->stamp_id = fields != NULL;
    ch->last = p + at[6];
    ch->last_len = at[2] - at[6];
    ch->msg.head = p + at[2];
    ch->msg.head_len = at[3] - at[2];
    ch->msg.mid = p + at[3];
    ch->msg.mid_len = at[4] - at[3];
    ch->msg.tail = p + at[4];
    ch->msg.tail_len = at[5] - at[4];
    *buf = p;
    return NULL;

fail:
    sbuf_free(&b);
    return why;
}
