/* store_text: bounded error texts (see store_text.h). */
#include "store_text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void store_put_name(char *out, size_t cap, const char *label, const char *s, size_t n)
{
    store_put_text(out, cap, "%s", label);
    size_t at = strlen(out);
    if (at + 3 >= cap) {
        return;
    }
    out[at++] = '"';
    for (size_t i = 0; i < n && at + 2 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
            out[at++] = '?';
        } else {
            out[at++] = (char)c;
        }
    }
    out[at++] = '"';
    out[at] = '\0';
}

void store_put_text(char *out, size_t cap, const char *fmt, ...)
{
    size_t at = strlen(out);
    va_list ap;
    if (at + 1 >= cap) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(out + at, cap - at, fmt, ap);
    va_end(ap);
}

void store_set_text(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

void store_open_error(char **errmsg, const char *what, const char *why)
{
    if (errmsg && !*errmsg) {
        size_t n = strlen(what) + (why ? strlen(why) : 0) + 3;
        *errmsg = malloc(n);
        if (*errmsg) {
            snprintf(*errmsg, n, why ? "%s: %s" : "%s", what, why ? why : "");
        }
    }
}

uint64_t store_hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h;
}
