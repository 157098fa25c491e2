/* store_backend: what every backend's handle shares (see store_backend.h). */
#include "store_backend.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t realtime_ms(void *ctx)
{
    struct timespec ts;
    (void)ctx;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void store_base_init(chat_store *st, const chat_store_ops *ops)
{
    st->ops = ops;
    st->clock = realtime_ms;
    st->clock_ctx = NULL;
    st->recovered = false;
    st->incarnation[0] = '\0';
    st->last_err[0] = '\0';
    st->job = NULL;
}

void store_set_clock(chat_store *st, chat_clock_fn fn, void *ctx)
{
    st->clock = fn ? fn : realtime_ms;
    st->clock_ctx = fn ? ctx : NULL;
}

char *store_dup_bytes(const char *p, size_t len)
{
    char *out = malloc(len + 1);
    if (out) {
        if (len) {
            memcpy(out, p, len);
        }
        out[len] = '\0';
    }
    return out;
}

/* Writes v in decimal into buf (20 bytes at least); returns the bytes
 * written. */
static size_t decimal(char *buf, uint64_t v)
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

chat_err store_envelope_fill(const chat_envelope *env, uint64_t id, int64_t ts, chat_appended *out)
{
    char nid[24], nts[24];
    /* Not snprintf: once per stored message, it cost more than the copy. */
    size_t lid = decimal(nid, id);
    size_t lts = ts < 0 ? 1 + decimal(nts + 1, 0 - (uint64_t)ts) : decimal(nts, (uint64_t)ts);
    if (ts < 0) {
        nts[0] = '-';
    }
    size_t len = env->head_len + lid + env->mid_len + lts + env->tail_len;
    char *p = malloc(len + 1);
    if (!p) {
        return CHAT_ENOMEM;
    }
    char *o = p;
    /* memcpy of a NULL part of length 0 is undefined: skip empty parts. */
    if (env->head_len) {
        memcpy(o, env->head, env->head_len);
        o += env->head_len;
    }
    memcpy(o, nid, lid);
    o += lid;
    if (env->mid_len) {
        memcpy(o, env->mid, env->mid_len);
        o += env->mid_len;
    }
    memcpy(o, nts, lts);
    o += lts;
    if (env->tail_len) {
        memcpy(o, env->tail, env->tail_len);
        o += env->tail_len;
    }
    *o = '\0';
    out->env = p;
    out->len = len;
    return CHAT_OK;
}

chat_err store_version_fill(const chat_change *ch, int64_t ts, uint64_t id, char **out, size_t *len)
{
    char nts[24], nid[24];
    size_t lts = 0, lid = 0;
    if (ch->stamp) {
        lts = ts < 0 ? 1 + decimal(nts + 1, 0 - (uint64_t)ts) : decimal(nts, (uint64_t)ts);
        if (ts < 0) {
            nts[0] = '-';
        }
    }
    bool with_id = ch->stamp && ch->stamp_id;
    if (with_id) {
        lid = decimal(nid, id);
    }
    size_t n =
        ch->before_len + (ch->stamp ? lts + ch->after_len : 0) + (with_id ? lid + ch->last_len : 0);
    char *p = malloc(n + 1);
    if (!p) {
        return CHAT_ENOMEM;
    }
    char *o = p;
    if (ch->before_len) {
        memcpy(o, ch->before, ch->before_len);
        o += ch->before_len;
    }
    if (ch->stamp) {
        memcpy(o, nts, lts);
        o += lts;
        if (ch->after_len) {
            memcpy(o, ch->after, ch->after_len);
            o += ch->after_len;
        }
    }
    if (with_id) {
        memcpy(o, nid, lid);
        o += lid;
        if (ch->last_len) {
            memcpy(o, ch->last, ch->last_len);
            o += ch->last_len;
        }
    }
    *o = '\0';
    *out = p;
    *len = n;
    return CHAT_OK;
}

chat_err store_unsupported(chat_store *st, const char *what)
{
    snprintf(st->last_err, sizeof(st->last_err), "%s is not offered by the %s store", what,
             st->ops->name);
    return CHAT_EINVAL;
}

int store_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    int rc = pthread_attr_init(&attr);
    if (rc != 0) {
        return rc;
    }
    rc = pthread_attr_setstacksize(&attr, STORE_THREAD_STACK);
    if (rc == 0) {
        rc = pthread_create(t, &attr, fn, arg);
    }
    pthread_attr_destroy(&attr);
    return rc;
}
