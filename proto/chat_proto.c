/* chat_proto.c: the protocol's checks and its JSON string writer (see
 * chat_proto.h). */
#include "chat_proto.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Decodes one UTF-8 sequence at s (n > 0 bytes left). Returns its length, 0
 * when malformed (overlong forms, surrogates, above U+10FFFF, truncated). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t c = s[0];
    size_t len;

    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2;
        c &= 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        c &= 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        c &= 0x07;
    } else {
        return 0;
    }
    if (len > n) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            return 0;
        }
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return 0;
    }
    *cp = c;
    return len;
}

bool chat_proto_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        uint64_t w;
        /* Most text is ASCII: eight bytes at a time while none has its high
         * bit set and none is NUL. */
        if (len - i >= 8) {
            memcpy(&w, p + i, 8);
            if (!((w | ((w - ones) & ~w)) & highs)) {
                i += 8;
                continue;
            }
        }
        size_t step = utf8_next(p + i, len - i, &cp);
        if (step == 0 || cp == 0) {
            return false;
        }
        i += step;
    }
    return true;
}

const char *chat_proto_group_error(const char *name, size_t len)
{
    const unsigned char *p = (const unsigned char *)name;
    if (len == 0) {
        return "group name is empty";
    }
    if (len > CHAT_PROTO_GROUP_MAX) {
        return "group name is longer than 128 bytes";
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t step = utf8_next(p + i, len - i, &cp);
        if (step == 0) {
            return "group name is not valid UTF-8";
        }
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
            return "group name contains a control character";
        }
        if (cp == '/' || cp == '+' || cp == '#' || cp == '$') {
            return "group name contains one of / + # $";
        }
        i += step;
    }
    return NULL;
}

/* The reasons of name_error, for one kind of name. */
struct name_reasons {
    const char *empty, *too_long, *not_utf8, *control;
};

static const char *name_error(const char *name, size_t len, const struct name_reasons *why)
{
    const unsigned char *p = (const unsigned char *)name;
    if (len == 0) {
        return why->empty;
    }
    if (len > CHAT_PROTO_NAME_MAX) {
        return why->too_long;
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t step = utf8_next(p + i, len - i, &cp);
        if (step == 0) {
            return why->not_utf8;
        }
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
            return why->control;
        }
        i += step;
    }
    return NULL;
}

const char *chat_proto_member_error(const char *name, size_t len)
{
    static const struct name_reasons why = {
        "member name is empty", "member name is longer than 1024 bytes",
        "member name is not valid UTF-8", "member name contains a control character"};
    return name_error(name, len, &why);
}

const char *chat_proto_device_error(const char *name, size_t len)
{
    static const struct name_reasons why = {
        "device name is empty", "device name is longer than 1024 bytes",
        "device name is not valid UTF-8", "device name contains a control character"};
    return name_error(name, len, &why);
}

_Static_assert(CHAT_PROTO_NAME_MAX == 1024, "the reasons of name_error name the limit");

bool chat_proto_json_int(double d, uint64_t lo, uint64_t *out)
{
    if (!(d >= (double)lo && d <= (double)CHAT_PROTO_JSON_INT_MAX) || d != floor(d)) {
        return false;
    }
    *out = (uint64_t)d;
    return true;
}

/* JSON white space. The scanners below use these static forms: the
 * exported ones may be interposed in a shared object, so the compiler does
 * not inline them into the loops that run once per byte of a page. */
static inline bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static const unsigned char *json_ws(const unsigned char *p, const unsigned char *end)
{
    while (p < end && is_ws(*p)) {
        p++;
    }
    return p;
}

static const unsigned char *json_digits(const unsigned char *p, const unsigned char *end)
{
    const unsigned char *start = p;
    while (p < end && *p >= '0' && *p <= '9') {
        p++;
    }
    return p > start ? p : NULL;
}

#define ONES 0x0101010101010101u
#define HIGHS 0x8080808080808080u

/* The high bit of each byte of w that equals c (and perhaps of bytes above
 * one that does: a borrow runs upwards, so only the lowest flag is exact). */
static inline uint64_t byte_eq(uint64_t w, unsigned char c)
{
    uint64_t x = w ^ (ONES * c);
    return (x - ONES) & ~x & HIGHS;
}

/* Where to resume a byte scan of p[0..8) that mask (byte_eq's form, not 0)
 * flags: at the first flagged byte on a little-endian machine (memcpy put
 * p[0] in the low byte, and the lowest flag is exact), else at p. */
static inline const unsigned char *first_flagged(const unsigned char *p, uint64_t mask)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return p + (__builtin_ctzll(mask) >> 3);
#else
    (void)mask; /* a borrow may flag bytes before the first match */
    return p;
#endif
}

/* The first '"' or '\\' at or after p (before end), and with ctl also the
 * first control character, or end. Most of a message is plain text:
 * sixteen bytes are checked at a time with SSE2, else eight (byte_eq with
 * '"' and '\\', and "has a byte below 0x20"). ctl is a constant at every
 * call, so each caller gets its own loop without the other's test. */
static inline const unsigned char *string_run(const unsigned char *p, const unsigned char *end,
                                              bool ctl)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  low = _mm_set1_epi8(0x1f);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash));
        if (ctl) {
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_min_epu8(x, low), x));
        }
        int mask = _mm_movemask_epi8(hit);
        if (mask) {
            return p + __builtin_ctz((unsigned)mask);
        }
        p += 16;
    }
#endif
    while (end - p >= 8) {
        uint64_t w, mask;
        memcpy(&w, p, 8);
        mask = byte_eq(w, '"') | byte_eq(w, '\\');
        if (ctl) {
            mask |= (w - ONES * 0x20) & ~w & HIGHS;
        }
        if (mask) {
            p = first_flagged(p, mask);
            break;
        }
        p += 8;
    }
    while (p < end && (!ctl || *p >= 0x20) && *p != '"' && *p != '\\') {
        p++;
    }
    return p;
}

/* Plain string text up to a '"', a '\\' or a control character: the
 * validator's scan. */
static const unsigned char *plain_run(const unsigned char *p, const unsigned char *end)
{
    return string_run(p, end, true);
}

/* Up to the first '"' or '\\': the scan of text already validated. */
static const unsigned char *quote_or_escape(const unsigned char *p, const unsigned char *end)
{
    return string_run(p, end, false);
}

/* The byte after the JSON token at p (a string, number or literal), or NULL
 * when none starts there. */
static const unsigned char *json_scalar(const unsigned char *p, const unsigned char *end)
{
    static const char *const words[] = {"true", "false", "null"};
    if (*p == '"') {
        for (p++; p < end && *p != '"'; p++) {
            p = plain_run(p, end);
            if (p == end || *p == '"') {
                break;
            }
            if (*p < 0x20) {
                return NULL;
            }
            if (*p != '\\') {
                continue;
            }
            if (++p == end) {
                return NULL;
            }
            if (*p == 'u') {
                for (int i = 0; i < 4; i++) {
                    if (++p == end || !isxdigit(*p)) {
                        return NULL;
                    }
                }
            } else if (!strchr("\"\\/bfnrt", *p) || *p == '\0') {
                return NULL;
            }
        }
        return p < end ? p + 1 : NULL;
    }
    if (*p == 't' || *p == 'f' || *p == 'n') {
        for (size_t i = 0; i < 3; i++) {
            size_t n = strlen(words[i]);
            if ((size_t)(end - p) >= n && !memcmp(p, words[i], n)) {
                return p + n;
            }
        }
        return NULL;
    }
    if (p < end && *p == '-') {
        p++;
    }
    if (p < end && *p == '0') {
        p++;
    } else if (!(p = json_digits(p, end))) {
        return NULL;
    }
    if (p < end && *p == '.' && !(p = json_digits(p + 1, end))) {
        return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        p = json_digits(p, end);
    }
    return p;
}

bool chat_proto_json_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    unsigned char in_object[CHAT_PROTO_JSON_DEPTH_MAX / 8] = {0}; /* a bit per open level */
    size_t depth = 0;
    enum { VALUE, KEY, AFTER } want = VALUE;

    while (p) {
        p = json_ws(p, end);
        if (want == AFTER) {
            bool obj = depth && (in_object[(depth - 1) / 8] >> ((depth - 1) % 8) & 1);
            if (depth == 0) {
                return p == end;
            }
            if (p < end && *p == ',') {
                p++;
                want = obj ? KEY : VALUE;
            } else if (p < end && *p == (obj ? '}' : ']')) {
                p++;
                depth--;
            } else {
                return false;
            }
            continue;
        }
        if (p == end) {
            return false;
        }
        if (want == KEY) {
            p = *p == '"' ? json_scalar(p, end) : NULL;
            p = p ? json_ws(p, end) : NULL;
            if (!p || p == end || *p != ':') {
                return false;
            }
            p++;
            want = VALUE;
            continue;
        }
        if (*p == '{' || *p == '[') {
            bool obj = *p == '{';
            if (depth == CHAT_PROTO_JSON_DEPTH_MAX) {
                return false;
            }
            in_object[depth / 8] = (unsigned char)((in_object[depth / 8] & ~(1u << depth % 8)) |
                                                   (unsigned)obj << depth % 8);
            depth++;
            p = json_ws(p + 1, end);
            if (p < end && *p == (obj ? '}' : ']')) {
                p++;
                depth--;
                want = AFTER;
            } else {
                want = obj ? KEY : VALUE;
            }
            continue;
        }
        p = json_scalar(p, end);
        want = AFTER;
    }
    return false;
}

size_t chat_proto_json_string(char *out, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    char *o = out;
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            break;
        }
        if (esc) {
            *o++ = esc[0];
            *o++ = esc[1];
        } else if (c < 0x20) {
            *o++ = '\\';
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 0xf];
        } else {
            *o++ = (char)c;
        }
    }
    *o++ = '"';
    return (size_t)(o - out);
}

bool chat_proto_json_is_ws(char c)
{
    return is_ws((unsigned char)c);
}

const char *chat_proto_json_skip_ws(const char *p, const char *end)
{
    return (const char *)json_ws((const unsigned char *)p, (const unsigned char *)end);
}

/* chat_proto_json_skip_string on unsigned bytes. */
static const unsigned char *skip_string(const unsigned char *p, const unsigned char *end,
                                        bool *escaped)
{
    for (p++; p < end;) {
        p = quote_or_escape(p, end);
        if (p == end) {
            break;
        }
        if (*p == '"') {
            return p + 1;
        }
        *escaped = true;
        p = end - p > 2 ? p + 2 : end; /* past the escaped character, which may be a '"' */
    }
    return end;
}

const char *chat_proto_json_skip_string(const char *p, const char *end, bool *escaped)
{
    return (const char *)skip_string((const unsigned char *)p, (const unsigned char *)end, escaped);
}

/* The bytes that end a number or literal in valid JSON. */
static const bool scalar_end[256] = {[','] = true,  ['}'] = true,  [']'] = true, [' '] = true,
                                     ['\t'] = true, ['\r'] = true, ['\n'] = true};

const char *chat_proto_json_skip_value(const char *s, const char *e, unsigned depth_max,
                                       size_t number_max)
{
    const unsigned char *p = (const unsigned char *)s, *end = (const unsigned char *)e;
    bool escaped = false;
    unsigned depth = 0;
    if (p >= end) {
        return NULL;
    }
    do {
        const unsigned char *start = p;
        if (*p == '"') {
            p = skip_string(p, end, &escaped);
            continue;
        }
        if (*p == '{' || *p == '[') {
            if (++depth > depth_max && depth_max) {
                return NULL;
            }
        } else if (*p == '}' || *p == ']') {
            depth--;
        } else if (*p == '-' || (*p >= '0' && *p <= '9') || *p == 't' || *p == 'f' || *p == 'n') {
            while (p < end && !scalar_end[*p]) {
                p++;
            }
            if (number_max && (size_t)(p - start) > number_max) {
                return NULL;
            }
            continue;
        }
        p++;
    } while (depth > 0 && p < end);
    return (const char *)p;
}

/* The value of the four hex digits at p, or -1. */
static long hex4(const unsigned char *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int c = p[i], d = c >= '0' && c <= '9'   ? c - '0'
                          : c >= 'a' && c <= 'f' ? c - 'a' + 10
                          : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                 : -1;
        if (d < 0) {
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

/* Writes code point cp as UTF-8 at o; returns the bytes written. */
static size_t utf8_put(unsigned char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t chat_proto_json_unescape(const char *s, const char *e, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s + 1, *end = (const unsigned char *)e;
    unsigned char *o = (unsigned char *)out;
    size_t n = 0;

    while (p < end && *p != '"') {
        unsigned char buf[4];
        size_t len = 1;
        if (*p != '\\') {
            buf[0] = *p++;
        } else if (end - p < 2) {
            return SIZE_MAX;
        } else if (p[1] != 'u') {
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *at = memchr(from, p[1], sizeof(from) - 1);
            if (!at) {
                return SIZE_MAX;
            }
            buf[0] = (unsigned char)to[at - from];
            p += 2;
        } else {
            long hi = end - p >= 6 ? hex4(p + 2) : -1;
            p += 6;
            if (hi < 0 || (hi >= 0xDC00 && hi <= 0xDFFF)) {
                return SIZE_MAX; /* a low surrogate alone */
            }
            uint32_t cp = (uint32_t)hi;
            if (hi >= 0xD800 && hi <= 0xDBFF) {
                long lo = end - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    return SIZE_MAX; /* a high surrogate alone */
                }
                cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                p += 6;
            }
            len = utf8_put(buf, cp);
        }
        if (n + len >= cap) {
            return SIZE_MAX;
        }
        memcpy(o + n, buf, len);
        n += len;
    }
    if (p >= end) {
        return SIZE_MAX;
    }
    o[n] = '\0';
    return n;
}

const char *chat_proto_json_member(const char *obj, const char *end, const char *key,
                                   const char **value_end)
{
    size_t klen = strlen(key);
    const char *p = chat_proto_json_skip_ws(obj, end);
    if (p >= end || *p != '{') {
        return NULL;
    }
    p = chat_proto_json_skip_ws(p + 1, end);
    while (p < end && *p == '"') {
        bool escaped = false;
        const char *k = p;
        const char *kend = chat_proto_json_skip_string(p, end, &escaped);
        const char *v = chat_proto_json_skip_ws(chat_proto_json_skip_ws(kend, end) + 1, end);
        const char *vend = chat_proto_json_skip_value(v, end, 0, 0);
        if (!vend) {
            return NULL;
        }
        if (!escaped && (size_t)(kend - k) == klen + 2 && memcmp(k + 1, key, klen) == 0) {
            *value_end = vend;
            return v;
        }
        p = chat_proto_json_skip_ws(vend, end);
        if (p < end && *p == ',') {
            p = chat_proto_json_skip_ws(p + 1, end);
        }
    }
    return NULL;
}
