/* sbuf.c: growable buffer for response JSON (see sbuf.h). */
#include "sbuf.h"

#include "chat_proto.h"
#include "mosq.h"

#include <stdio.h>
#include <string.h>

static bool reserve(sbuf *b, size_t extra)
{
    if (b->failed) {
        return false;
    }
    if (b->len + extra + 1 <= b->cap) {
        return true;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        cap *= 2;
    }
    char *n = mosquitto_realloc(b->data, cap);
    if (!n) {
        b->failed = true;
        return false;
    }
    b->data = n;
    b->cap = cap;
    return true;
}

void sbuf_add(sbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) {
        return;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sbuf_puts(sbuf *b, const char *s)
{
    sbuf_add(b, s, strlen(s));
}

void sbuf_u64(sbuf *b, uint64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
    sbuf_add(b, tmp, (size_t)n);
}

void sbuf_json_str(sbuf *b, const char *s)
{
    size_t len = strlen(s);
    if (!reserve(b, CHAT_PROTO_JSON_STRING_MAX(len))) {
        return;
    }
    b->len += chat_proto_json_string(b->data + b->len, s, len);
    b->data[b->len] = '\0';
}

char *sbuf_take(sbuf *b, size_t *len)
{
    if (b->failed || !reserve(b, 0)) {
        sbuf_free(b);
        return NULL;
    }
    char *out = b->data;
    out[b->len] = '\0'; /* a buffer never appended to has no NUL yet */
    if (len) {
        *len = b->len;
    }
    b->data = NULL;
    b->len = b->cap = 0;
    return out;
}

void sbuf_free(sbuf *b)
{
    mosquitto_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}
