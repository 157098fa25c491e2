/* envelope.c: envelopes and responses read from their bytes (see
 * envelope.h). Every scanner here runs on text that chat_proto_json_valid
 * accepted: tokens are well formed and containers closed, so a scan stops
 * at the end of the value it started on. */
#include "envelope.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* ---------------------------------------------------------------------------
 * Scanning strict JSON (the scanners themselves are proto/'s)
 * ------------------------------------------------------------------------- */

/* One member of an object: p at its key's '"'. Fills the key (without
 * quotes) and the value span; returns the byte after the member's ',' or at
 * the closing '}'. */
struct member {
    const char *key, *val;
    size_t key_len, val_len;
    bool key_escaped;
    bool val_escaped; /* a string value holds an escape */
    bool blanks;      /* blanks around or inside it (compact text has none) */
};

/* The first byte at or after p that is not white space: outside strings
 * only white space is below '!' in strict JSON, so compact text costs one
 * test. */
static const char *skip_ws(const char *p, const char *end)
{
    return p < end && (unsigned char)*p <= ' ' ? chat_proto_json_skip_ws(p, end) : p;
}

/* The key of the member at p: fills m's key; returns its value's first
 * byte. */
static const char *member_key(const char *p, const char *end, struct member *m)
{
    const char *k = p, *q;

    m->key_escaped = false;
    p = chat_proto_json_skip_string(p, end, &m->key_escaped);
    m->key = k + 1;
    m->key_len = (size_t)(p - k) - 2;
    q = skip_ws(p, end); /* at ':' */
    m->blanks = q != p;
    p = skip_ws(q + 1, end);
    m->blanks |= p != q + 1;
    return p;
}

/* The byte after the ',' that ends a member (p after its value) or at the
 * closing '}'. */
static const char *member_end(const char *p, const char *end, struct member *m)
{
    const char *q = skip_ws(p, end);

    m->blanks |= q != p;
    if (q < end && *q == ',') {
        p = skip_ws(q + 1, end);
        m->blanks |= p != q + 1;
        return p;
    }
    return q;
}

/* The bytes of a number or literal in valid JSON. */
static const bool in_scalar[256] = {
    ['0'] = true, ['1'] = true, ['2'] = true, ['3'] = true, ['4'] = true, ['5'] = true,
    ['6'] = true, ['7'] = true, ['8'] = true, ['9'] = true, ['-'] = true, ['+'] = true,
    ['.'] = true, ['e'] = true, ['E'] = true, ['a'] = true, ['l'] = true, ['n'] = true,
    ['r'] = true, ['s'] = true, ['t'] = true, ['u'] = true, ['f'] = true};

static const char *next_member(const char *p, const char *end, struct member *m)
{
    p = member_key(p, end, m);
    m->val = p;
    m->val_escaped = false;
    if (*p == '"') {
        p = chat_proto_json_skip_string(p, end, &m->val_escaped);
    } else if (*p == '{' || *p == '[') {
        /* A container may hold blanks: compact() finds them. */
        m->blanks = true;
        p = chat_proto_json_skip_value(p, end, 0, 0);
    } else {
        /* A number or literal (the text is valid): its bytes are digits,
         * letters and "+-.". */
        while (p < end && in_scalar[(unsigned char)*p])
            p++;
    }
    m->val_len = (size_t)(p - m->val);
    return member_end(p, end, m);
}

static bool key_is(const struct member *m, const char *key, size_t len)
{
    return m->key_len == len && memcmp(m->key, key, len) == 0;
}

/* ---------------------------------------------------------------------------
 * Envelopes
 * ------------------------------------------------------------------------- */

/* A string field: NULL when absent or not a string. */
struct field {
    const char *s;
    size_t len;
};

/* What an envelope's fields are, wherever they were read from. */
struct fields {
    uint64_t id;
    int64_t ts;
    struct field group, from, body, cid;
    uint64_t recall, edit; /* v1.2: the id this message recalls or edits, 0 none */
    bool recalled;         /* v1.2: a tombstone */
    int64_t edited;        /* v1.2: the time of its latest edit, 0 none */
    bool blanks;           /* the text may hold blanks between tokens: compact() it */
};

/* Copies the strict JSON text s[0..len) to out without the blanks between
 * tokens; returns the bytes written. */
static size_t compact(char *out, const char *s, size_t len)
{
    const char *end = s + len;
    char *o = out;

    while (s < end) {
        char c = *s;
        if (c == '"') {
            bool escaped = false;
            const char *e = chat_proto_json_skip_string(s, end, &escaped);
            memcpy(o, s, (size_t)(e - s));
            o += e - s;
            s = e;
        } else {
            if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
                *o++ = c;
            s++;
        }
    }
    return (size_t)(o - out);
}

/* Copies f into *o as a C string (or NULL when absent). */
static const char *put_field(char **o, const struct field *f)
{
    char *s = *o;

    if (f->s == NULL)
        return NULL;
    memcpy(s, f->s, f->len);
    s[f->len] = '\0';
    *o = s + f->len + 1;
    return s;
}

/* The one block of an envelope: json (text, compacted) and the fields. */
static chat_env_verdict build(const char *text, size_t len, const struct fields *f,
                              struct chat_env **out)
{
    size_t size = sizeof(struct chat_env) + len + 1 + f->group.len + 1 + f->from.len + 1 +
                  f->body.len + 1 + f->cid.len + 1;
    struct chat_env *e = malloc(size);
    char *o;

    if (e == NULL)
        return CHAT_ENV_NOMEM;
    if (f->blanks) {
        o = e->text + compact(e->text, text, len);
    } else {
        memcpy(e->text, text, len);
        o = e->text + len;
    }
    *o++ = '\0';
    memset(&e->m, 0, sizeof e->m);
    e->m.id = f->id;
    e->m.ts = f->ts;
    e->m.json = e->text;
    e->m.group = put_field(&o, &f->group);
    e->m.from = f->from.s != NULL ? put_field(&o, &f->from) : "";
    e->m.body = put_field(&o, &f->body);
    e->m.cid = put_field(&o, &f->cid);
    e->m.recall = f->recall;
    e->m.edit = f->edit;
    e->m.recalled = f->recalled;
    e->m.edited = f->edited;
    *out = e;
    return CHAT_ENV_OK;
}

/* A JSON integer of digits only (no sign, fraction or exponent) in
 * [lo, 2^53-1]; false for any other number. */
static bool plain_u64(const char *s, size_t len, uint64_t lo, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 16)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v < lo || v > ((uint64_t)1 << 53) - 1)
        return false;
    *out = v;
    return true;
}

/* A string value without escapes: its bytes into *f. False when it holds
 * an escape (cJSON decodes those). A value that is not a string leaves *f
 * absent. */
static bool plain_string(const struct member *m, struct field *f)
{
    if (m->val[0] != '"')
        return true;
    if (m->val_escaped)
        return false;
    f->s = m->val + 1;
    f->len = m->val_len - 2;
    return true;
}

/* The common shape, for the object at s (before end): returns the byte
 * after it, or NULL when cJSON must read it (an escape in a key or in a
 * field's string, an id or ts that is not a plain integer). Duplicate keys
 * count at their first occurrence, as in cJSON. */
static const char *scan(const char *s, const char *end, struct fields *f, bool *is_env)
{
    const char *p = s;
    bool seen_id = false, seen_ts = false, seen_group = false, seen_from = false, seen_body = false,
         seen_cid = false, seen_change = false;
    struct member m;

    memset(f, 0, sizeof *f);
    *is_env = false;
    p = skip_ws(p + 1, end); /* past '{' */
    f->blanks = p != s + 1;
    while (p < end && *p == '"') {
        p = next_member(p, end, &m);
        if (m.key_escaped)
            return NULL;
        f->blanks |= m.blanks;
        if (key_is(&m, "id", 2) && !seen_id) {
            seen_id = true;
            if (m.val[0] == '-' || (m.val[0] >= '0' && m.val[0] <= '9')) {
                if (!plain_u64(m.val, m.val_len, 1, &f->id))
                    return NULL;
            }
        } else if (key_is(&m, "ts", 2) && !seen_ts) {
            uint64_t ts;
            seen_ts = true;
            if (m.val[0] == '-' || (m.val[0] >= '0' && m.val[0] <= '9')) {
                if (!plain_u64(m.val, m.val_len, 0, &ts))
                    return NULL;
                f->ts = (int64_t)ts;
            }
        } else if (key_is(&m, "group", 5) && !seen_group) {
            seen_group = true;
            if (!plain_string(&m, &f->group))
                return NULL;
        } else if (key_is(&m, "from", 4) && !seen_from) {
            seen_from = true;
            if (!plain_string(&m, &f->from))
                return NULL;
        } else if (key_is(&m, "body", 4) && !seen_body) {
            seen_body = true;
            if (!plain_string(&m, &f->body))
                return NULL;
        } else if (key_is(&m, "cid", 3) && !seen_cid) {
            seen_cid = true;
            if (!plain_string(&m, &f->cid))
                return NULL;
        } else if (key_is(&m, "recall", 6) || key_is(&m, "edit", 4) || key_is(&m, "edited", 6) ||
                   key_is(&m, "recalled", 8)) {
            /* The plugin writes one of them, once: anything else is read
             * the tree's way. */
            uint64_t v = 0;
            if (seen_change)
                return NULL;
            seen_change = true;
            bool edited = key_is(&m, "edited", 6);
            if (key_is(&m, "recalled", 8)) {
                f->recalled = m.val_len == 4 && memcmp(m.val, "true", 4) == 0;
            } else if (!plain_u64(m.val, m.val_len, edited ? 0 : 1, &v)) {
                return NULL;
            } else if (edited) {
                f->edited = (int64_t)v;
            } else if (key_is(&m, "recall", 6)) {
                f->recall = v;
            } else {
                f->edit = v;
            }
        }
    }
    *is_env = f->id >= 1 && f->group.s != NULL;
    return p < end ? p + 1 : end; /* past '}' */
}

static struct field str_field(const cJSON *obj, const char *key)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, key);
    struct field f = {NULL, 0};

    if (cJSON_IsString(s)) {
        f.s = s->valuestring;
        f.len = strlen(s->valuestring);
    }
    return f;
}

/* Any other shape: the fields as cJSON reads them (chat_envelope_view). */
static chat_env_verdict read_tree(const char *s, size_t len, struct chat_env **out)
{
    cJSON *env = cJSON_ParseWithLength(s, len);
    chat_client_message m;
    struct fields f;
    chat_env_verdict v = CHAT_ENV_INVALID;

    if (chat_envelope_view(env, "", &m)) {
        memset(&f, 0, sizeof f);
        f.blanks = true;
        f.id = m.id;
        f.ts = m.ts;
        f.group = str_field(env, "group");
        f.from = str_field(env, "from");
        f.body = str_field(env, "body");
        f.cid = str_field(env, "cid");
        f.recall = m.recall;
        f.edit = m.edit;
        f.recalled = m.recalled;
        f.edited = m.edited;
        v = build(s, len, &f, out);
    }
    cJSON_Delete(env);
    return v;
}

/* Reads the value at p (strict JSON, before end) as an envelope; *next is
 * the byte after the value. */
static chat_env_verdict read_at(const char *p, const char *end, struct chat_env **out,
                                const char **next)
{
    struct fields f;
    bool is_env;
    const char *e;

    *out = NULL;
    if (*p != '{') {
        *next = chat_proto_json_skip_value(p, end, 0, 0);
        return CHAT_ENV_INVALID;
    }
    if ((e = scan(p, end, &f, &is_env)) == NULL) {
        *next = chat_proto_json_skip_value(p, end, 0, 0);
        return read_tree(p, (size_t)(*next - p), out);
    }
    *next = e;
    return is_env ? build(p, (size_t)(e - p), &f, out) : CHAT_ENV_INVALID;
}

chat_env_verdict chat_env_read(const char *s, size_t len, struct chat_env **out)
{
    const char *end = s + len, *p = chat_proto_json_skip_ws(s, end), *next;

    *out = NULL;
    if (p == end)
        return CHAT_ENV_INVALID;
    return read_at(p, end, out, &next);
}

chat_env_verdict chat_env_from_item(const cJSON *item, struct chat_env **out)
{
    char *text;
    chat_env_verdict v;

    *out = NULL;
    if (!cJSON_IsObject(item))
        return CHAT_ENV_INVALID;
    if ((text = cJSON_PrintUnformatted(item)) == NULL)
        return CHAT_ENV_NOMEM;
    /* cJSON prints what it parsed as strict JSON, but read it as any text. */
    v = chat_proto_json_valid(text, strlen(text)) ? chat_env_read(text, strlen(text), out)
                                                  : read_tree(text, strlen(text), out);
    cJSON_free(text);
    return v;
}

/* ---------------------------------------------------------------------------
 * Responses
 * ------------------------------------------------------------------------- */

/* The "responses" array's entries: their messages spans, and whether each
 * may be emptied in the skeleton. */
struct cut {
    struct chat_span *spans;
    bool *blank;
    size_t n, cap;
};

static bool cut_add(struct cut *c)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 4;
        struct chat_span *spans = realloc(c->spans, cap * sizeof *spans);
        bool *blank;
        if (spans == NULL)
            return false;
        c->spans = spans;
        if ((blank = realloc(c->blank, cap * sizeof *blank)) == NULL)
            return false;
        c->blank = blank;
        c->cap = cap;
    }
    memset(&c->spans[c->n], 0, sizeof c->spans[c->n]);
    c->blank[c->n] = true;
    c->n++;
    return true;
}

/* Appends an element read from the page to span; false when out of
 * memory (env, if any, is freed). */
static bool span_add(struct chat_span *span, size_t *cap, const char *text, size_t len,
                     chat_env_verdict v, struct chat_env *env)
{
    if (span->n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 128;
        struct chat_span_elem *e = realloc(span->elems, ncap * sizeof *e);
        if (e == NULL) {
            free(env);
            return false;
        }
        span->elems = e;
        *cap = ncap;
    }
    span->elems[span->n].text = text;
    span->elems[span->n].len = len;
    span->elems[span->n].v = v;
    span->elems[span->n].env = env;
    span->n++;
    return true;
}

/* Reads the elements of the array at p (its '[') into span: returns the
 * byte after its ']', or NULL when out of memory. The array's end is where
 * the reading stops: the page is not scanned once more to find it. */
static const char *read_elems(const char *p, const char *end, struct chat_span *span)
{
    size_t cap = 0;

    span->text = p;
    for (p = skip_ws(p + 1, end); p < end && *p != ']';) {
        const char *elem = p;
        struct chat_env *env;
        chat_env_verdict v = read_at(p, end, &env, &p);
        if (!span_add(span, &cap, elem, (size_t)(p - elem), v, env))
            return NULL;
        p = skip_ws(p, end);
        if (p < end && *p == ',')
            p = skip_ws(p + 1, end);
    }
    p = p < end ? p + 1 : end; /* past ']' */
    span->len = (size_t)(p - span->text);
    return p;
}

/* One entry (p at its first byte): its messages, read. Returns the byte
 * after the entry, or NULL when a key holds an escape or memory ran out. */
static const char *cut_entry(const char *p, const char *end, struct cut *c)
{
    struct member m;
    size_t i = c->n - 1;

    if (*p != '{')
        return chat_proto_json_skip_value(p, end, 0, 0);
    p = skip_ws(p + 1, end);
    while (p < end && *p == '"') {
        const char *v = member_key(p, end, &m);
        if (m.key_escaped)
            return NULL;
        if (key_is(&m, "messages", 8) && c->spans[i].text == NULL && *v == '[') {
            if ((p = read_elems(v, end, &c->spans[i])) == NULL)
                return NULL;
            p = member_end(p, end, &m);
            continue;
        }
        p = next_member(p, end, &m);
        if (key_is(&m, "correlationData", 15))
            c->blank[i] = false;
    }
    return p < end ? p + 1 : end; /* past '}' */
}

/* The entries of the "responses" array at p (its '['): returns the byte
 * after its ']', or NULL as cut_entry. */
static const char *cut_entries(const char *p, const char *end, struct cut *c)
{
    for (p = skip_ws(p + 1, end); p < end && *p != ']';) {
        if (!cut_add(c) || (p = cut_entry(p, end, c)) == NULL)
            return NULL;
        p = skip_ws(p, end);
        if (p < end && *p == ',')
            p = skip_ws(p + 1, end);
    }
    return p < end ? p + 1 : end; /* past ']' */
}

/* The root object: the entries of its first "responses" array, walked
 * where they are (a page is scanned once here, in its "messages"). */
static bool cut_root(const char *s, size_t len, struct cut *c)
{
    const char *end = s + len, *p = skip_ws(s, end);
    struct member m;
    bool seen = false;

    if (p == end || *p != '{')
        return false;
    p = skip_ws(p + 1, end);
    while (p < end && *p == '"') {
        const char *v = member_key(p, end, &m);
        if (m.key_escaped)
            return false;
        if (!key_is(&m, "responses", 9) || seen) {
            p = next_member(p, end, &m);
            continue;
        }
        seen = true;
        if (*v != '[' || (p = cut_entries(v, end, c)) == NULL)
            return false;
        p = member_end(p, end, &m);
    }
    return seen;
}

bool chat_response_cut(const char *payload, size_t len, cJSON **root, struct chat_span **spans,
                       size_t *n)
{
    struct cut c = {0};
    char *skel = NULL, *o;
    const char *p = payload;

    *root = NULL;
    *spans = NULL;
    *n = 0;
    if (!chat_proto_json_valid(payload, len) || !cut_root(payload, len, &c) ||
        (skel = malloc(len + 1)) == NULL)
        goto fail;
    o = skel;
    for (size_t i = 0; i < c.n; i++) {
        if (c.spans[i].text == NULL || !c.blank[i])
            continue;
        memcpy(o, p, (size_t)(c.spans[i].text - p));
        o += c.spans[i].text - p;
        *o++ = '['; /* the array left empty for cJSON */
        *o++ = ']';
        p = c.spans[i].text + c.spans[i].len;
    }
    memcpy(o, p, (size_t)(payload + len - p));
    o += payload + len - p;
    if ((*root = cJSON_ParseWithLength(skel, (size_t)(o - skel))) == NULL)
        goto fail;
    free(skel);
    free(c.blank);
    *spans = c.spans;
    *n = c.n;
    return true;

fail:
    free(skel);
    chat_spans_free(c.spans, c.n);
    free(c.blank);
    return false;
}

bool chat_span_next(const struct chat_span *span, size_t *at, chat_env_verdict *v,
                    struct chat_env **env, const char **elem, size_t *elem_len)
{
    struct chat_span_elem *e;

    if (*at >= span->n)
        return false;
    e = &span->elems[(*at)++];
    *v = e->v;
    *env = e->env;
    e->env = NULL; /* the caller's now */
    *elem = e->text;
    *elem_len = e->len;
    return true;
}

void chat_spans_free(struct chat_span *spans, size_t n)
{
    if (spans == NULL)
        return;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < spans[i].n; k++)
            free(spans[i].elems[k].env);
        free(spans[i].elems);
    }
    free(spans);
}

/* ---------------------------------------------------------------------------
 * Changes (protocol v1.2)
 * ------------------------------------------------------------------------- */

/* Copies field key of from to to, if from has it; false when out of
 * memory. */
static bool copy_field(cJSON *to, const cJSON *from, const char *key)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(from, key);
    cJSON *d;

    if (f == NULL)
        return true;
    if ((d = cJSON_Duplicate(f, true)) == NULL)
        return false;
    return cJSON_AddItemToObject(to, key, d);
}

static bool plugin_field(const char *key)
{
    static const char *const keys[] = {"id",     "group", "from",     "ts",     "cid",
                                       "recall", "edit",  "recalled", "edited", "edits"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

/* Whether the "edits" list of old names m or a later message: old is
 * the version m made, or a later one. */
static bool lists_edit(const cJSON *old, uint64_t m)
{
    const cJSON *it = NULL;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(old, "edits"))
    {
        if (cJSON_IsNumber(it) && it->valuedouble >= (double)m)
            return true;
    }
    return false;
}

/* Puts into nw the "edits" list of old (the messages that carried its
 * edits) with m after them, as the plugin lists them in an edited version.
 * Returns false when memory runs out. */
static bool add_edit(cJSON *nw, const cJSON *old, uint64_t m)
{
    const cJSON *was = cJSON_GetObjectItemCaseSensitive(old, "edits");
    cJSON *list = cJSON_IsArray(was) ? cJSON_Duplicate(was, true) : cJSON_CreateArray();
    cJSON *id = cJSON_CreateNumber((double)m);
    if (list == NULL || id == NULL || !cJSON_AddItemToArray(list, id)) {
        cJSON_Delete(id);
        cJSON_Delete(list);
        return false;
    }
    if (!cJSON_AddItemToObject(nw, "edits", list)) {
        cJSON_Delete(list);
        return false;
    }
    return true;
}

chat_env_verdict chat_env_apply(const struct chat_env *n, const struct chat_env *m,
                                struct chat_env **out)
{
    cJSON *old = NULL, *chg = NULL, *nw = NULL;
    chat_env_verdict v = CHAT_ENV_NOMEM;
    char ts[24];

    /* An edit's carrier that a recall of n rewrote ("recalled": true) says
     * n is recalled: it applies as the recall does. */
    bool recall = m->m.recall != 0 || (m->m.edit != 0 && m->m.recalled);
    *out = NULL;
    if ((m->m.recall != n->m.id && m->m.edit != n->m.id) || n->m.recalled ||
        (m->m.edit != 0 && strcmp(n->m.from, m->m.from) != 0) ||
        (m->m.edit != 0 && !recall && n->m.edited > m->m.ts))
        return CHAT_ENV_INVALID;
    old = cJSON_Parse(n->m.json);
    chg = cJSON_Parse(m->m.json);
    nw = cJSON_CreateObject();
    if (old == NULL || chg == NULL || nw == NULL || !copy_field(nw, old, "id") ||
        !copy_field(nw, old, "group") || !copy_field(nw, old, "from") || !copy_field(nw, old, "ts"))
        goto done;
    if (recall) {
        if (cJSON_AddTrueToObject(nw, "recalled") == NULL)
            goto done;
    } else {
        if (lists_edit(old, m->m.id)) {
            v = CHAT_ENV_INVALID; /* n is this edit's version, or a later one's */
            goto done;
        }
        if (!copy_field(nw, old, "cid"))
            goto done;
        for (const cJSON *f = chg->child; f != NULL; f = f->next) {
            if (f->string == NULL || plugin_field(f->string))
                continue;
            if (!copy_field(nw, chg, f->string))
                goto done;
        }
        snprintf(ts, sizeof ts, "%lld", (long long)m->m.ts);
        if (cJSON_AddRawToObject(nw, "edited", ts) == NULL || !add_edit(nw, old, m->m.id))
            goto done;
    }
    v = chat_env_from_item(nw, out);

done:
    cJSON_Delete(old);
    cJSON_Delete(chg);
    cJSON_Delete(nw);
    return v;
}
