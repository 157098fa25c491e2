/* pg_watch: the LISTEN thread of the PostgreSQL backend (see pg_watch.h). */
#include "pg_watch.h"
#include "pg_backoff.h"
#include "store_text.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Messages queued for the broker's thread at most: past it the thread
 * stops reading (the notifications still count) until the queue drains. */
#define QUEUE_MAX 20000u
/* Groups followed at most (a follow beyond it fails with CHAT_ENOMEM):
 * the groups of a broker's subscribers, each a few dozen bytes. */
#define FOLLOW_MAX 200000u
/* The thread's longest sleep with nothing to do: the wake pipe and the
 * listener's socket end it sooner. */
#define IDLE_MS 1000

/* A followed group. */
struct fgroup {
    struct fgroup *next;      /* in its bucket */
    struct fgroup *next_work; /* in the work list, when on it */
    bool on_work;
    bool known;       /* seen is set (else: read the head) */
    bool catchup;     /* read every id above seen (a follow, a reconnect) */
    uint64_t seen;    /* every id up to it is handled: fed, or this broker's own */
    uint64_t want;    /* the highest id another broker notified */
    uint64_t own_max; /* the highest id this broker notified */
    char name[];
};

/* A message for the broker's thread. */
struct item {
    struct item *next;
    uint64_t id;
    size_t len;
    char *group; /* points into data, after the envelope */
    char data[];
};

struct pg_watch {
    pg *st; /* conninfo, sync, origin, the member cache's generation: read only */
    pthread_t thread;
    pthread_mutex_t mu;
    int wake[2]; /* a byte written to wake[1] ends the thread's poll */
    /* under mu: */
    bool stop;
    bool want_writer;
    PGconn *writer;           /* made, not yet taken */
    pg_backoff wback;         /* the writer's reconnects: lost on the broker's thread */
    int64_t writer_at;        /* no writer attempt before this (pg_mono_ms) */
    uint64_t writer_attempts; /* made since the start (pg_watch_writer_attempts) */
    struct fgroup **buckets;
    size_t nbuckets, count;
    struct fgroup *work; /* groups with something to read */
    struct item *q_head, *q_tail;
    size_t queued;
    /* the thread's own: */
    PGconn *lconn;
    chat_quiet log;    /* the listener's outages */
    pg_backoff lback;  /* the listener's reconnects */
    int64_t listen_at; /* no listener attempt before this (pg_mono_ms) */
};

static uint64_t hash(const char *s)
{
    return store_hash(s, strlen(s));
}

static void wake(struct pg_watch *w)
{
    char c = 1;
    ssize_t n = write(w->wake[1], &c, 1);
    (void)n; /* a full pipe wakes the thread already */
}

/* Under mu. */
static struct fgroup *find(struct pg_watch *w, const char *name)
{
    for (struct fgroup *g = w->buckets[hash(name) % w->nbuckets]; g; g = g->next) {
        if (!strcmp(g->name, name)) {
            return g;
        }
    }
    return NULL;
}

/* Under mu: puts g on the work list. */
static void add_work(struct pg_watch *w, struct fgroup *g)
{
    if (!g->on_work) {
        g->on_work = true;
        g->next_work = w->work;
        w->work = g;
    }
}

static void grow(struct pg_watch *w)
{
    size_t n = w->nbuckets * 2;
    struct fgroup **b = calloc(n, sizeof(struct fgroup *));
    if (!b) {
        return; /* longer chains, still right */
    }
    for (size_t i = 0; i < w->nbuckets; i++) {
        while (w->buckets[i]) {
            struct fgroup *g = w->buckets[i];
            w->buckets[i] = g->next;
            g->next = b[hash(g->name) % n];
            b[hash(g->name) % n] = g;
        }
    }
    free(w->buckets);
    w->buckets = b;
    w->nbuckets = n;
}

chat_err pg_follow(chat_store *cs, const char *group, uint64_t after)
{
    struct pg_watch *w = pg_of(cs)->watch;
    chat_err rc = CHAT_OK;
    pthread_mutex_lock(&w->mu);
    struct fgroup *g = find(w, group);
    if (!g) {
        size_t len = strlen(group);
        g = w->count < FOLLOW_MAX && len <= CHAT_STORE_MAX_NAME ? calloc(1, sizeof(*g) + len + 1)
                                                                : NULL;
        if (!g) {
            rc = len > CHAT_STORE_MAX_NAME ? CHAT_EINVAL : CHAT_ENOMEM;
        } else {
            memcpy(g->name, group, len + 1);
            g->known = after != 0;
            g->seen = after;
            /* read at once what was stored since `after`: a message
             * committed between the caller's reading of the head and this
             * call is then not missed */
            g->catchup = after != 0;
            size_t b = hash(group) % w->nbuckets;
            g->next = w->buckets[b];
            w->buckets[b] = g;
            if (++w->count > 2 * w->nbuckets) {
                grow(w);
            }
            add_work(w, g);
            wake(w);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

size_t pg_feed(chat_store *cs, size_t max, chat_feed_fn fn, void *ctx)
{
    struct pg_watch *w = pg_of(cs)->watch;
    struct item *list = NULL;
    size_t n = 0;
    pthread_mutex_lock(&w->mu);
    bool any = w->q_head != NULL;
    pthread_mutex_unlock(&w->mu);
    /* The broker delivers what it is handed through its read check, which
     * asks the writer (memberships: no cache while the listener is away,
     * as it is in a failover). Without a writer that check refuses every
     * delivery, fail closed, and the message would reach this broker's
     * subscribers only by catch-up: it waits here for the writer instead. */
    if (!any || !pg_writer_ready(pg_of(cs))) {
        return 0;
    }
    pthread_mutex_lock(&w->mu);
    bool was_full = w->queued >= QUEUE_MAX;
    list = w->q_head;
    struct item *last = NULL;
    for (struct item *it = w->q_head; it && n < max; it = it->next) {
        last = it;
        n++;
    }
    if (last) {
        w->q_head = last->next;
        last->next = NULL;
        if (!w->q_head) {
            w->q_tail = NULL;
        }
        w->queued -= n;
    } else {
        list = NULL;
    }
    if (was_full && w->queued < QUEUE_MAX) {
        wake(w);
    }
    pthread_mutex_unlock(&w->mu);
    while (list) {
        struct item *it = list;
        list = it->next;
        fn(ctx, it->group, it->id, it->data, it->len);
        free(it);
    }
    return n;
}

/* Under mu: the writer is gone (lost, or never handed over): the thread
 * makes the next attempt when the backoff says, at once after a success. */
static void want_writer(struct pg_watch *w)
{
    if (!w->want_writer) {
        w->want_writer = true;
        w->writer_at = pg_mono_ms() + pg_backoff_next(&w->wback);
        wake(w);
    }
}

PGconn *pg_watch_take_writer(pg *st)
{
    struct pg_watch *w = st->watch;
    pthread_mutex_lock(&w->mu);
    PGconn *c = w->writer;
    w->writer = NULL;
    if (!c) {
        want_writer(w);
    }
    pthread_mutex_unlock(&w->mu);
    return c;
}

void pg_watch_want_writer(pg *st)
{
    struct pg_watch *w = st->watch;
    pthread_mutex_lock(&w->mu);
    want_writer(w);
    pthread_mutex_unlock(&w->mu);
}

uint64_t pg_watch_writer_attempts(pg *st)
{
    struct pg_watch *w = st->watch;
    pthread_mutex_lock(&w->mu);
    uint64_t n = w->writer_attempts;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* ------------------------------------------------------------------------
 * The thread
 * --------------------------------------------------------------------- */

/* A notification on the message channel: origin/id/group. */
static void on_message_note(struct pg_watch *w, const char *payload)
{
    char *end = NULL;
    errno = 0;
    long long origin = strtoll(payload, &end, 10);
    if (errno || *end != '/') {
        return;
    }
    unsigned long long id = strtoull(end + 1, &end, 10);
    if (errno || *end != '/') {
        return;
    }
    const char *group = end + 1;
    pthread_mutex_lock(&w->mu);
    struct fgroup *g = find(w, group);
    if (g && origin == w->st->origin) {
        if (id > g->own_max) {
            g->own_max = id;
        }
        if (!g->on_work && g->known && id > g->seen) {
            g->seen = id;
        }
    } else if (g) {
        if (id > g->want) {
            g->want = id;
        }
        if (!g->known || id > g->seen) {
            add_work(w, g);
        }
    }
    pthread_mutex_unlock(&w->mu);
}

static void drain_notifications(struct pg_watch *w)
{
    PGnotify *n;
    while ((n = PQnotifies(w->lconn)) != NULL) {
        if (!strcmp(n->relname, PG_CHANNEL_MSG)) {
            on_message_note(w, n->extra);
        } else if (!strcmp(n->relname, PG_CHANNEL_INVAL) &&
                   n->be_pid != atomic_load(&w->st->writer_pid)) {
            /* not the writer's own: its ops updated the cache (pg_db.h) */
            atomic_fetch_add(&w->st->member_gen, 1);
        }
        PQfreemem(n);
    }
}

static void drop_listener(struct pg_watch *w)
{
    if (w->lconn) {
        PQfinish(w->lconn);
        w->lconn = NULL;
    }
    /* Invalidations may be missed from now on: no cache. */
    atomic_store(&w->st->member_live, false);
    atomic_fetch_add(&w->st->member_gen, 1);
}

/* The listener was lost, or an attempt failed: the next attempt when the
 * backoff says. */
static void listener_failed(struct pg_watch *w)
{
    w->listen_at = pg_mono_ms() + pg_backoff_next(&w->lback);
}

static bool connect_listener(struct pg_watch *w)
{
    char err[CHAT_STORE_ERROR_MAX];
    w->lconn = pg_connect(w->st->conninfo, w->st->sync, true, err, sizeof(err));
    if (!w->lconn) {
        chat_quiet_fail(&w->log, "PostgreSQL listener: %s", err);
        return false;
    }
    PGresult *res = PQexec(w->lconn, "LISTEN " PG_CHANNEL_MSG "; LISTEN " PG_CHANNEL_INVAL);
    bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (!ok) {
        err[0] = '\0';
        pg_put_message(err, sizeof(err), PQerrorMessage(w->lconn));
        chat_quiet_fail(&w->log, "PostgreSQL listener: LISTEN: %s", err);
        drop_listener(w);
        return false;
    }
    /* Not back yet: the listener is back (its log, its backoff reset) once
     * a round of its work went through (watch_main), or a failing query
     * after each connect would log an outage and a "back" line, and
     * reconnect at once, every time. */
    /* Listening from here on: whatever committed before is read below. */
    atomic_fetch_add(&w->st->member_gen, 1);
    atomic_store(&w->st->member_live, true);
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->nbuckets; i++) {
        for (struct fgroup *g = w->buckets[i]; g; g = g->next) {
            g->catchup = true;
            add_work(w, g);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return true;
}

/* Queues one fetched message; under mu. */
static bool enqueue(struct pg_watch *w, const char *group, uint64_t id, const char *env, size_t len)
{
    size_t glen = strlen(group);
    struct item *it = malloc(sizeof(*it) + len + 1 + glen + 1);
    if (!it) {
        return false;
    }
    it->next = NULL;
    it->id = id;
    it->len = len;
    memcpy(it->data, env, len);
    it->data[len] = '\0';
    it->group = it->data + len + 1;
    memcpy(it->group, group, glen + 1);
    if (w->q_tail) {
        w->q_tail->next = it;
    } else {
        w->q_head = it;
    }
    w->q_tail = it;
    w->queued++;
    return true;
}

/* Reads what one group needs: its head when not known, else the ids other
 * brokers stored above seen (up to want, or all with catchup). Returns
 * false on a database error (the listener is dropped). */
static bool work_group(struct pg_watch *w, struct fgroup *g)
{
    char err[CHAT_STORE_ERROR_MAX], b1[24], b2[24], b3[24];
    char name[CHAT_STORE_MAX_NAME + 1];

    pthread_mutex_lock(&w->mu);
    bool known = g->known, catchup = g->catchup;
    uint64_t seen = g->seen, want = g->want;
    snprintf(name, sizeof(name), "%s", g->name);
    g->catchup = false;
    pthread_mutex_unlock(&w->mu);

    if (!known) {
        const char *p[1] = {name};
        PGresult *res = pg_call_on(w->lconn, PG_STMT_FOLLOW_HEAD, p, err, sizeof(err));
        if (!res) {
            chat_quiet_fail(&w->log, "PostgreSQL listener: %s", err);
            return false;
        }
        uint64_t head = (uint64_t)pg_i64(res, 0, 0);
        PQclear(res);
        pthread_mutex_lock(&w->mu);
        g->known = true;
        if (head > g->seen) {
            g->seen = head;
        }
        pthread_mutex_unlock(&w->mu);
        return true;
    }
    uint64_t upto = catchup ? (uint64_t)INT64_MAX : want;
    uint64_t last = seen;
    for (;;) {
        const char *p[4] = {name, pg_u64(b1, last), pg_u64(b2, upto), pg_i64s(b3, w->st->origin)};
        PGresult *res = pg_call_on(w->lconn, PG_STMT_FOLLOW_FETCH, p, err, sizeof(err));
        if (!res) {
            chat_quiet_fail(&w->log, "PostgreSQL listener: %s", err);
            pthread_mutex_lock(&w->mu);
            g->catchup = g->catchup || catchup;
            pthread_mutex_unlock(&w->mu);
            return false;
        }
        int rows = PQntuples(res);
        pthread_mutex_lock(&w->mu);
        for (int r = 0; r < rows; r++) {
            uint64_t id = (uint64_t)pg_i64(res, r, 0);
            if (!enqueue(w, name, id, PQgetvalue(res, r, 1), (size_t)PQgetlength(res, r, 1))) {
                break; /* out of memory: the next notification tries again */
            }
            last = id;
        }
        pthread_mutex_unlock(&w->mu);
        PQclear(res);
        if (rows < 500) {
            break;
        }
    }
    pthread_mutex_lock(&w->mu);
    uint64_t done = catchup ? last : upto;
    if (g->own_max > done) {
        done = g->own_max;
    }
    if (done > g->seen) {
        g->seen = done;
    }
    if (g->want > g->seen) {
        add_work(w, g);
    }
    pthread_mutex_unlock(&w->mu);
    return true;
}

/* Works through the work list while the queue has room. */
static bool work(struct pg_watch *w)
{
    for (;;) {
        pthread_mutex_lock(&w->mu);
        struct fgroup *g = w->queued < QUEUE_MAX ? w->work : NULL;
        if (g) {
            w->work = g->next_work;
            g->on_work = false;
        }
        bool stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (!g || stop) {
            return true;
        }
        if (!work_group(w, g)) {
            pthread_mutex_lock(&w->mu);
            add_work(w, g);
            pthread_mutex_unlock(&w->mu);
            return false;
        }
        /* Notifications that arrived meanwhile move the work on. */
        if (PQconsumeInput(w->lconn)) {
            drain_notifications(w);
        }
    }
}

/* One attempt at a writer: a connection to a server that takes writes.
 * One to a read-only server (a standby not yet promoted, or the old
 * primary turned standby behind a load balancer) is a failed attempt: as
 * the writer it would fail every publish until it broke. */
static void make_writer(struct pg_watch *w)
{
    char err[CHAT_STORE_ERROR_MAX];
    pthread_mutex_lock(&w->mu);
    w->writer_attempts++;
    pthread_mutex_unlock(&w->mu);
    /* checked before the statements are prepared: a standby turned away
     * costs one round trip at most, not one per statement */
    PGconn *c = pg_connect(w->st->conninfo, w->st->sync, false, err, sizeof(err));
    if (c && (!pg_check_writable(c, err, sizeof(err)) || !pg_prepare(c, err, sizeof(err)))) {
        PQfinish(c);
        c = NULL;
    }
    if (!c) {
        chat_quiet_fail(&w->st->writer_log, "PostgreSQL writer: %s", err);
        pthread_mutex_lock(&w->mu);
        w->writer_at = pg_mono_ms() + pg_backoff_next(&w->wback);
        pthread_mutex_unlock(&w->mu);
        return;
    }
    chat_quiet_ok(&w->st->writer_log);
    pthread_mutex_lock(&w->mu);
    if (w->writer) {
        PQfinish(w->writer);
    }
    w->writer = c;
    w->want_writer = false;
    pg_backoff_reset(&w->wback);
    pthread_mutex_unlock(&w->mu);
}

/* How long the thread may sleep: until the next attempt due, at most
 * IDLE_MS. */
static int sleep_ms(struct pg_watch *w, bool want, int64_t writer_at)
{
    int64_t now = pg_mono_ms(), ms = IDLE_MS;
    if (want && writer_at - now < ms) {
        ms = writer_at - now;
    }
    if (!w->lconn && w->listen_at - now < ms) {
        ms = w->listen_at - now;
    }
    return ms < 0 ? 0 : (int)ms;
}

static void *watch_main(void *arg)
{
    struct pg_watch *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        bool stop = w->stop, want = w->want_writer && !w->writer;
        int64_t writer_at = w->writer_at;
        bool full = w->queued >= QUEUE_MAX, has_work = w->work != NULL;
        pthread_mutex_unlock(&w->mu);
        if (stop) {
            break;
        }
        if (want && pg_mono_ms() >= writer_at) {
            make_writer(w);
            pthread_mutex_lock(&w->mu);
            want = w->want_writer && !w->writer;
            writer_at = w->writer_at;
            pthread_mutex_unlock(&w->mu);
        }
        if (!w->lconn && pg_mono_ms() >= w->listen_at && !connect_listener(w)) {
            listener_failed(w);
        }
        if (w->lconn && has_work && !full && !work(w)) {
            drop_listener(w);
            listener_failed(w);
        }
        if (w->lconn) {
            /* connected, and its work (if any) went through */
            chat_quiet_ok(&w->log);
            pg_backoff_reset(&w->lback);
        }
        struct pollfd p[2] = {{w->wake[0], POLLIN, 0},
                              {w->lconn ? PQsocket(w->lconn) : -1, POLLIN, 0}};
        /* Until the next attempt the backoff allows (pg_backoff.h), not in a
         * loop; a wake (a lost writer, a follow) or a notification sooner. */
        int n = poll(p, 2, sleep_ms(w, want, writer_at));
        if (n > 0 && (p[0].revents & POLLIN)) {
            char buf[64];
            while (read(w->wake[0], buf, sizeof(buf)) > 0) {
            }
        }
        if (w->lconn) {
            if (!PQconsumeInput(w->lconn)) {
                char err[CHAT_STORE_ERROR_MAX];
                err[0] = '\0';
                pg_put_message(err, sizeof(err), PQerrorMessage(w->lconn));
                chat_quiet_fail(&w->log, "PostgreSQL listener lost: %s", err);
                drop_listener(w);
                listener_failed(w);
                continue;
            }
            drain_notifications(w);
        }
    }
    drop_listener(w);
    return NULL;
}

chat_err pg_watch_start(pg *st)
{
    struct pg_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        return CHAT_ENOMEM;
    }
    w->st = st;
    chat_quiet_init(&w->log, "PostgreSQL listener", NULL, NULL, NULL);
    /* seeded by the handle's random origin: brokers draw apart */
    pg_backoff_init(&w->wback, (uint64_t)st->origin);
    pg_backoff_init(&w->lback, (uint64_t)st->origin ^ 0x5bd1e995u);
    w->nbuckets = 1024;
    w->buckets = calloc(w->nbuckets, sizeof(struct fgroup *));
    if (!w->buckets || pipe(w->wake) != 0) {
        chat_quiet_destroy(&w->log);
        free(w->buckets);
        free(w);
        return CHAT_ENOMEM;
    }
    fcntl(w->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(w->wake[1], F_SETFL, O_NONBLOCK);
    fcntl(w->wake[0], F_SETFD, FD_CLOEXEC);
    fcntl(w->wake[1], F_SETFD, FD_CLOEXEC);
    pthread_mutex_init(&w->mu, NULL);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        chat_quiet_destroy(&w->log);
        close(w->wake[0]);
        close(w->wake[1]);
        free(w->buckets);
        free(w);
        return CHAT_ENOMEM;
    }
    st->watch = w;
    return CHAT_OK;
}

void pg_watch_stop(pg *st)
{
    struct pg_watch *w = st->watch;
    if (!w) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    wake(w);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    if (w->writer) {
        PQfinish(w->writer);
    }
    for (size_t i = 0; i < w->nbuckets; i++) {
        while (w->buckets[i]) {
            struct fgroup *g = w->buckets[i];
            w->buckets[i] = g->next;
            free(g);
        }
    }
    while (w->q_head) {
        struct item *it = w->q_head;
        w->q_head = it->next;
        free(it);
    }
    free(w->buckets);
    close(w->wake[0]);
    close(w->wake[1]);
    pthread_mutex_destroy(&w->mu);
    chat_quiet_destroy(&w->log);
    free(w);
    st->watch = NULL;
}
