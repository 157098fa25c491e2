/* envelope.c: turns a published payload into the stored envelope, and reads
 * ack payloads. */
#include "plugin.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Fields the plugin owns: whatever a client puts there is overwritten. */
static bool reserved(const char *name)
{
    return name && (!strcmp(name, "id") || !strcmp(name, "group") || !strcmp(name, "from") ||
                    !strcmp(name, "ts"));
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

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
        p++;
    }
    return p;
}

/* p is at a '"' of valid JSON: returns the byte after the closing quote. */
static const char *skip_string(const char *p, bool *escaped)
{
    for (p++; *p != '"'; p++) {
        if (*p == '\\') {
            *escaped = true;
            p++;
        }
    }
    return p + 1;
}

/* p starts a value of valid JSON: returns the byte after it. */
static const char *skip_value(const char *p)
{
    bool escaped = false;
    if (*p == '"') {
        return skip_string(p, &escaped);
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        do {
            if (*p == '"') {
                p = skip_string(p, &escaped);
                continue;
            }
            depth += (*p == '{' || *p == '[') - (*p == '}' || *p == ']');
            p++;
        } while (depth > 0);
        return p;
    }
    while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\r' &&
           *p != '\n') {
        p++;
    }
    return p;
}

/* The envelope of the JSON object text (valid, validated by cJSON first):
 * the plugin's fields, then the object's members as they were, less the
 * reserved ones. NULL when a key holds an escape (it might spell a reserved
 * name) or out of memory: the caller then goes through the tree. */
static char *splice(const char *text, size_t len, uint64_t id, const char *group, const char *from,
                    int64_t ts_ms)
{
    size_t cap = 96 + 6 * (strlen(group) + strlen(from)) + len;
    char *buf = malloc(cap);
    if (!buf) {
        return NULL;
    }
    struct out o = {buf};
    char num[32];
    int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)id);
    put(&o, "{\"id\":", 6);
    put(&o, num, (size_t)n);
    put(&o, ",\"group\":", 9);
    put_str(&o, group);
    put(&o, ",\"from\":", 8);
    put_str(&o, from);
    put(&o, ",\"ts\":", 6);
    n = snprintf(num, sizeof(num), "%lld", (long long)ts_ms);
    put(&o, num, (size_t)n);
    const char *p = skip_ws(skip_ws(text) + 1); /* past '{' */
    while (*p == '"') {
        bool escaped = false;
        const char *member = p;
        const char *key_end = skip_string(p, &escaped);
        if (escaped) {
            free(buf);
            return NULL;
        }
        size_t key_len = (size_t)(key_end - member) - 2;
        p = skip_value(skip_ws(skip_ws(key_end) + 1)); /* past ':' */
        char key[8];
        bool drop = false;
        if (key_len < sizeof(key)) {
            memcpy(key, member + 1, key_len);
            key[key_len] = '\0';
            drop = reserved(key);
        }
        if (!drop) {
            *o.p++ = ',';
            put(&o, member, (size_t)(p - member));
        }
        p = skip_ws(p);
        if (*p == ',') {
            p = skip_ws(p + 1);
        }
    }
    put(&o, "}", 2); /* with the NUL */
    return buf;
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
        /* The common case: copy the payload's members byte for byte after
         * the plugin's fields, which is a third of the cost of printing the
         * tree again. */
        /* The splice passes bytes on unparsed, so only strict JSON may take
         * it: cJSON also reads a byte order mark, control characters as
         * blanks or raw in strings, and numbers such as 01 or -.5, which
         * the splice would drop members over or hand on to readers that
         * refuse them (a web page's JSON.parse). The tree prints them as
         * JSON. */
        if (way != CHAT_ENVELOPE_TREE && chat_proto_json_valid(text, len)) {
            *env = splice(text, len, id, group, from, ts_ms);
            if (*env || way == CHAT_ENVELOPE_SPLICE) {
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
            if (!reserved(it->string)) {
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

void chat_envelope_build(const void *payload, size_t len, const char *group, const char *from,
                         char **env, chat_envelope *tpl, char **cid, const char **why)
{
    /* With 0 for the id and the time, which split cuts out. */
    chat_envelope_build_way(CHAT_ENVELOPE_ANY, payload, len, 0, group, from, 0, env, cid, why);
    if (*env && !split(*env, tpl)) {
        free(*env);
        *env = NULL;
        *why = "internal error: the envelope has an unexpected shape";
    }
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
