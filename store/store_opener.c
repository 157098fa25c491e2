/* store_opener: an open retried in a thread of its own, until it succeeds
 * or its owner stops it (chat_store.h, "The opener").
 *
 * Invariants, kept under mu:
 *   1. store is set once, by the thread, which then ends; take moves it out.
 *   2. stop is set once, by the owner; the thread makes no attempt after
 *      it sees it, and a backoff wait ends at once when it is set (cv).
 *   3. the thread is joined exactly once, by take (after a store) or stop. */
#include "chat_store.h"
#include "pg_backoff.h"
#include "store_text.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct chat_store_opener {
    pthread_t thread;
    bool joined;        /* the thread has been joined (invariant 3) */
    pthread_mutex_t mu; /* over everything below */
    pthread_cond_t cv;  /* signalled when stop is set */
    bool stop;          /* the owner stops the opener */
    chat_store *store;  /* opened, not yet taken */
    uint64_t failures;  /* attempts that failed */
    char last[CHAT_STORE_ERROR_MAX];
    char *path; /* copies of what to open */
    char *backend;
    char *boot_id;
    chat_store_opts opts; /* its strings point at the copies above */
    pg_backoff back;
};

static char *dup_or_null(const char *s, bool *ok)
{
    char *d = s ? strdup(s) : NULL;
    if (s && !d) {
        *ok = false;
    }
    return d;
}

static void opener_free(chat_store_opener *op)
{
    free(op->path);
    free(op->backend);
    free(op->boot_id);
    free(op);
}

/* Waits ms, or until stop is set; returns whether to go on. Called with mu
 * held. */
static bool wait_ms(chat_store_opener *op, int64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!op->stop) {
        if (pthread_cond_timedwait(&op->cv, &op->mu, &until) == ETIMEDOUT) {
            break;
        }
    }
    return !op->stop;
}

static void *opener_main(void *arg)
{
    chat_store_opener *op = arg;
    pthread_mutex_lock(&op->mu);
    while (wait_ms(op, pg_backoff_next(&op->back))) {
        pthread_mutex_unlock(&op->mu);
        chat_store *st = NULL;
        char *errmsg = NULL;
        chat_err rc = chat_store_open_opts(op->path, &op->opts, &st, &errmsg);
        pthread_mutex_lock(&op->mu);
        if (rc == CHAT_OK) {
            op->store = st;
            break;
        }
        op->failures++;
        store_set_text(op->last, sizeof(op->last), "%s", errmsg ? errmsg : chat_strerror(rc));
        free(errmsg);
    }
    pthread_mutex_unlock(&op->mu);
    return NULL;
}

chat_err chat_store_opener_start(const char *path, const chat_store_opts *opts,
                                 chat_store_opener **out)
{
    bool ok = true;
    if (!path || !opts || !out) {
        return CHAT_EINVAL;
    }
    chat_store_opener *op = calloc(1, sizeof(*op));
    if (!op) {
        return CHAT_ENOMEM;
    }
    op->path = dup_or_null(path, &ok);
    op->backend = dup_or_null(opts->backend, &ok);
    op->boot_id = dup_or_null(opts->boot_id, &ok);
    if (!ok) {
        goto fail;
    }
    op->opts = *opts;
    op->opts.backend = op->backend;
    op->opts.boot_id = op->boot_id;
    op->opts.verify = false;
    /* Brokers that started together draw apart: seeded by the process and
     * the clock. */
    pg_backoff_init(&op->back, (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL));
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        goto fail;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int crc = pthread_cond_init(&op->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (crc != 0) {
        goto fail;
    }
    if (pthread_mutex_init(&op->mu, NULL) != 0) {
        pthread_cond_destroy(&op->cv);
        goto fail;
    }
    if (pthread_create(&op->thread, NULL, opener_main, op) != 0) {
        pthread_mutex_destroy(&op->mu);
        pthread_cond_destroy(&op->cv);
        goto fail;
    }
    *out = op;
    return CHAT_OK;

fail:
    opener_free(op);
    return CHAT_ENOMEM;
}

chat_store *chat_store_opener_take(chat_store_opener *op, uint64_t *failures, char *last,
                                   size_t cap)
{
    chat_store *st;
    if (!op) {
        return NULL;
    }
    pthread_mutex_lock(&op->mu);
    st = op->store;
    op->store = NULL;
    if (failures) {
        *failures = op->failures;
        store_set_text(last, cap, "%s", op->last);
    }
    pthread_mutex_unlock(&op->mu);
    if (st && !op->joined) {
        /* The thread set the store and is ending: this join is short. */
        pthread_join(op->thread, NULL);
        op->joined = true;
    }
    return st;
}

void chat_store_opener_stop(chat_store_opener *op)
{
    if (!op) {
        return;
    }
    pthread_mutex_lock(&op->mu);
    op->stop = true;
    pthread_cond_signal(&op->cv);
    pthread_mutex_unlock(&op->mu);
    if (!op->joined) {
        pthread_join(op->thread, NULL);
    }
    chat_store_close(op->store);
    pthread_mutex_destroy(&op->mu);
    pthread_cond_destroy(&op->cv);
    opener_free(op);
}
