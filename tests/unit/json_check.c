/* json_check.c: a strict JSON reader that writes a canonical form (see
 * json_check.h). Recursive descent over (pointer, length); the output buffer
 * grows as needed. */
#include "json_check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 4096 /* as CHAT_PROTO_JSON_DEPTH_MAX, so that fuzz_names compares them */

struct rd {
    const unsigned char *p, *end;
    char *out; /* NULL: only checking */
    size_t len, cap;
    bool oom;
};

static void emit(struct rd *r, const void *s, size_t n)
{
    if (!r->out && r->cap == 0) {
        return; /* checking only */
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap;
        while (r->len + n + 1 > cap) {
            cap *= 2;
        }
        char *o = realloc(r->out, cap);
        if (!o) {
            r->oom = true;
            return;
        }
        r->out = o;
        r->cap = cap;
    }
    memcpy(r->out + r->len, s, n);
    r->len += n;
    r->out[r->len] = '\0';
}

static void ws(struct rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\r' || *r->p == '\n')) {
        r->p++;
    }
}

static bool lit(struct rd *r, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) {
        return false;
    }
    r->p += n;
    emit(r, word, n);
    return true;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static bool hex4(struct rd *r, uint32_t *v)
{
    if (r->end - r->p < 4) {
        return false;
    }
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(r->p[i]);
        if (h < 0) {
            return false;
        }
        *v = *v << 4 | (uint32_t)h;
    }
    r->p += 4;
    return true;
}

/* Writes code point cp in the canonical form: printable ASCII but " and \
 * as itself, everything else as \uXXXX (pairs above U+FFFF). */
static void emit_cp(struct rd *r, uint32_t cp)
{
    char buf[16];
    if (cp >= 0x20 && cp < 0x7f && cp != '"' && cp != '\\') {
        buf[0] = (char)cp;
        emit(r, buf, 1);
    } else if (cp < 0x10000) {
        snprintf(buf, sizeof(buf), "\\u%04x", (unsigned)cp);
        emit(r, buf, 6);
    } else {
        cp -= 0x10000;
        snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", (unsigned)(0xd800 + (cp >> 10)),
                 (unsigned)(0xdc00 + (cp & 0x3ff)));
        emit(r, buf, 12);
    }
}

/* One UTF-8 sequence at r->p (the payloads were checked as UTF-8 before;
 * a malformed one is refused here too). */
static bool utf8(struct rd *r, uint32_t *cp)
{
    unsigned char c = *r->p;
    size_t n = c < 0x80             ? 1
               : (c & 0xe0) == 0xc0 ? 2
               : (c & 0xf0) == 0xe0 ? 3
               : (c & 0xf8) == 0xf0 ? 4
                                    : 0;
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (n == 0 || (size_t)(r->end - r->p) < n) {
        return false;
    }
    uint32_t v = n == 1 ? c : c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((r->p[i] & 0xc0) != 0x80) {
            return false;
        }
        v = v << 6 | (r->p[i] & 0x3f);
    }
    if (v < min[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
        return false;
    }
    r->p += n;
    *cp = v;
    return true;
}

static bool string(struct rd *r)
{
    if (r->p >= r->end || *r->p != '"') {
        return false;
    }
    r->p++;
    emit(r, "\"", 1);
    while (r->p < r->end && *r->p != '"') {
        uint32_t cp = 0;
        if (*r->p < 0x20) {
            return false; /* raw control characters are not JSON */
        }
        if (*r->p != '\\') {
            if (!utf8(r, &cp)) {
                return false;
            }
            emit_cp(r, cp);
            continue;
        }
        if (r->end - r->p < 2) {
            return false;
        }
        unsigned char e = r->p[1];
        r->p += 2;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            cp = e;
            break;
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'u': {
            uint32_t lo = 0;
            if (!hex4(r, &cp)) {
                return false;
            }
            /* A pair is one code point; a surrogate alone is still JSON's
             * grammar (if no text), and is written back as it came. */
            if (cp >= 0xd800 && cp <= 0xdbff && r->end - r->p >= 6 && r->p[0] == '\\' &&
                r->p[1] == 'u') {
                const unsigned char *save = r->p;
                r->p += 2;
                if (hex4(r, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else {
                    r->p = save;
                }
            }
            break;
        }
        default:
            return false;
        }
        emit_cp(r, cp);
    }
    if (r->p >= r->end) {
        return false;
    }
    r->p++;
    emit(r, "\"", 1);
    return true;
}

static bool digits(struct rd *r)
{
    const unsigned char *s = r->p;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        r->p++;
    }
    return r->p > s;
}

static bool number(struct rd *r)
{
    const unsigned char *s = r->p;
    if (r->p < r->end && *r->p == '-') {
        r->p++;
    }
    if (r->p < r->end && *r->p == '0') {
        r->p++;
    } else if (!digits(r)) {
        return false;
    }
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (!digits(r)) {
            return false;
        }
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) {
            r->p++;
        }
        if (!digits(r)) {
            return false;
        }
    }
    size_t n = (size_t)(r->p - s);
    char *tmp = malloc(n + 1);
    char buf[40];
    if (!tmp) {
        r->oom = true;
        return false;
    }
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    double d = strtod(tmp, NULL);
    free(tmp);
    if (isinf(d)) {
        snprintf(buf, sizeof(buf), "%s", d > 0 ? "inf" : "-inf");
    } else {
        snprintf(buf, sizeof(buf), "%.17g", d == 0 ? 0.0 : d);
    }
    emit(r, buf, strlen(buf));
    return true;
}

static bool value(struct rd *r, int depth);

static bool container(struct rd *r, int depth, bool object)
{
    char close = object ? '}' : ']';
    if (depth >= MAX_DEPTH) {
        return false;
    }
    r->p++;
    emit(r, object ? "{" : "[", 1);
    ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        emit(r, &close, 1);
        return true;
    }
    for (bool first = true;; first = false) {
        if (!first) {
            emit(r, ",", 1);
        }
        if (object) {
            ws(r);
            if (!string(r)) {
                return false;
            }
            ws(r);
            if (r->p >= r->end || *r->p != ':') {
                return false;
            }
            r->p++;
            emit(r, ":", 1);
        }
        if (!value(r, depth + 1)) {
            return false;
        }
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            emit(r, &close, 1);
            return true;
        }
        return false;
    }
}

/* A value with the blanks around it. */
static bool value(struct rd *r, int depth)
{
    bool ok = false;
    ws(r);
    if (r->p >= r->end) {
        return false;
    }
    switch (*r->p) {
    case '{':
        ok = container(r, depth, true);
        break;
    case '[':
        ok = container(r, depth, false);
        break;
    case '"':
        ok = string(r);
        break;
    case 't':
        ok = lit(r, "true");
        break;
    case 'f':
        ok = lit(r, "false");
        break;
    case 'n':
        ok = lit(r, "null");
        break;
    default:
        ok = number(r);
        break;
    }
    ws(r);
    return ok;
}

bool json_strict(const char *s, size_t len)
{
    struct rd r = {(const unsigned char *)s, (const unsigned char *)s + len, NULL, 0, 0, false};
    return value(&r, 0) && r.p == r.end;
}

char *json_canon(const char *s, size_t len)
{
    struct rd r = {(const unsigned char *)s, (const unsigned char *)s + len, NULL, 0, 64, false};
    r.out = malloc(r.cap);
    if (!r.out) {
        return NULL;
    }
    r.out[0] = '\0';
    if (!value(&r, 0) || r.p != r.end || r.oom) {
        free(r.out);
        return NULL;
    }
    return r.out;
}
