/* mqchat_commands.c: what each mqchat command does and prints, and what
 * the library's callbacks tell the main thread (see mqchat.h). */
#include "mqchat.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RETRY_FIRST_MS 250     /* first pause between connect attempts (not listen) ... */
#define RETRY_MAX_MS 2000      /* ... doubling up to this */
#define PROGRESS_EVERY_MS 1000 /* catch-up progress lines at most this often */

/* listen writes messages into stdout's buffer, not one write(2) each (a
 * catch-up prints hundreds of thousands): the buffer goes out when it is
 * full, when on_message finds the last flush FLUSH_MS ago, and from the
 * main thread, which wakes every FLUSH_MS / 2 while lines wait and at exit.
 * A pipe reader so sees every line within FLUSH_MS. */
#define FLUSH_MS 100

/* One run of mqchat: the options the callbacks follow, and what they tell
 * the main thread (listen, send). The callbacks run on the library's
 * thread; the fields they share with the main thread are atomic, or under
 * read_mu. */
struct mqchat {
    /* Set before the client is created (mqchat_create), or before it
     * connects (client, in mqchat_run). */
    pthread_t main; /* the thread a callback wakes with SIGUSR1 */
    long count;     /* listen -C: stop after this many (0: never) */
    bool json;      /* --json */
    bool quiet;     /* -q: no notes on stderr */
    bool mark_read; /* listen: mark what is printed as read */
    const char *client_id;
    chat_client *client; /* for the callbacks' chat_client_read */
    /* Between the callbacks and the main thread. */
    atomic_int exit; /* >= 0: stop with this status */
    atomic_long printed;
    atomic_bool connected_once;
    atomic_bool waiting;   /* listen started while the broker could not be reached */
    atomic_bool unflushed; /* listen: lines written to stdout's buffer, not flushed yet */
    atomic_bool stopping;  /* listen is stopping: print nothing more */
    /* The callbacks' thread only. */
    int64_t last_progress; /* when the last catch-up progress line went out */
    int64_t flushed_ms;    /* when on_message last flushed */
    /* listen marks what it printed as read with one chat_client_read per
     * group every FLUSH_MS, not one per message (which cost as much as
     * printing it: a call through the library's queue); the last one
     * waiting goes from the main thread's wake-ups and at exit. The library
     * coalesces reads on the wire anyway. */
    pthread_mutex_t read_mu;
    char read_group[128 + 1]; /* of read_id: a group name is at most 128 bytes */
    uint64_t read_id;         /* printed, not marked yet (0: none) */
    int64_t read_ms;          /* when a read was last marked */
};

static void note(const struct mqchat *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note(const struct mqchat *m, const char *fmt, ...)
{
    va_list ap;

    if (m->quiet)
        return;
    fputs("mqchat: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* "s" after a count other than 1. */
static const char *plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Asks the main thread to stop with status (the first request wins). */
static void stop_main(struct mqchat *m, int status)
{
    int expected = -1;

    if (atomic_compare_exchange_strong(&m->exit, &expected, status))
        pthread_kill(m->main, SIGUSR1);
}

/* ===========================================================================
 * Output
 * ========================================================================= */

/* A line put together before it goes to stdout in one fwrite (a catch-up
 * prints hundreds of thousands: stdio's per-call cost was most of it). */
struct line {
    char buf[2048];
    size_t n;
};

/* Appends s[0..len) to l, writing l out first when it is full (to stdout,
 * whose lock the caller holds). */
static void line_put(struct line *l, const void *s, size_t len)
{
    if (l->n + len > sizeof l->buf) {
        (void)fwrite(l->buf, 1, l->n, stdout); /* ferror() tells, in print_message */
        l->n = 0;
        if (len > sizeof l->buf) {
            (void)fwrite(s, 1, len, stdout);
            return;
        }
    }
    memcpy(l->buf + l->n, s, len);
    l->n += len;
}

static void line_str(struct line *l, const char *s)
{
    line_put(l, s, strlen(s));
}

/* The first byte at or after p (before end) that cannot go to a terminal
 * as it is (a control character other than tab, or DEL), or end; eight
 * bytes at a time while none of them is one. */
static const unsigned char *plain_text(const unsigned char *p, const unsigned char *end)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;

    while (end - p >= 8) {
        uint64_t w, del;
        memcpy(&w, p, 8);
        del = w ^ (ones * 0x7F);
        if ((((w - ones * 0x20) & ~w) | ((del - ones) & ~del)) & highs)
            break;
        p += 8;
    }
    while (p < end && (*p == '\t' || (*p >= 0x20 && *p != 0x7F)))
        p++;
    return p;
}

/* Appends "#<id>". */
static void line_id(struct line *l, uint64_t v)
{
    char num[24];
    size_t k = sizeof num;
    unsigned long long id = (unsigned long long)v;

    do
        num[--k] = (char)('0' + id % 10);
    while ((id /= 10) != 0);
    line_put(l, "#", 1);
    line_put(l, num + k, sizeof num - k);
}

/* Appends text from another person: control characters never reach the
 * terminal raw, and a line break indents the next line. */
static void line_text(struct line *l, const char *text)
{
    const unsigned char *p = (const unsigned char *)text, *end = p + strlen(text);
    while (p < end) {
        const unsigned char *run = p;
        p = plain_text(p, end);
        line_put(l, run, (size_t)(p - run));
        if (p == end)
            break;
        if (*p == '\n')
            line_put(l, "\n    ", 5);
        else
            line_put(l, "?", 1);
        p++;
    }
}

/* Writes l and a newline to stdout, whose lock the caller holds. */
static bool line_out(struct line *l)
{
    line_put(l, "\n", 1);
    (void)fwrite(l->buf, 1, l->n, stdout);
    funlockfile(stdout);
    return !ferror(stdout);
}

/* Starts a line "[group #id] " under stdout's lock: whole lines, so that a
 * flush from the main thread falls between messages. */
static void line_begin(struct line *l, const char *group, uint64_t id)
{
    l->n = 0;
    flockfile(stdout);
    line_put(l, "[", 1);
    line_str(l, group);
    line_put(l, " ", 1);
    line_id(l, id);
    line_put(l, "] ", 2);
}

/* Prints one message as "[group #id] from: body" (or its JSON), and what
 * recall and edit (v1.2) made of it: "[room1 #9] alice: (recalled)",
 * "[room1 #10] alice: text (edited)", and the messages that carry them as
 * "[room1 #12] alice recalled #9" and "[room1 #13] alice edited #10: text"
 * ("alice edited #10: (recalled)" once a recall of #10 took the text back).
 * Returns false when stdout failed. */
static bool print_message(const chat_client_message *m, bool json)
{
    const char *text = m->body != NULL ? m->body : m->json;
    struct line l;

    if (json) {
        l.n = 0;
        flockfile(stdout);
        line_str(&l, m->json);
        return line_out(&l);
    }
    line_begin(&l, m->group, m->id);
    line_str(&l, m->from);
    if (m->recall != 0 || m->edit != 0) {
        line_str(&l, m->recall != 0 ? " recalled " : " edited ");
        line_id(&l, m->recall != 0 ? m->recall : m->edit);
        if (m->edit != 0) {
            line_put(&l, ": ", 2);
            if (m->recalled)
                line_str(&l, "(recalled)");
            else
                line_text(&l, text);
        }
        return line_out(&l);
    }
    line_put(&l, ": ", 2);
    if (m->recalled) {
        line_str(&l, "(recalled)");
    } else {
        line_text(&l, text);
        if (m->edited != 0)
            line_str(&l, " (edited)");
    }
    return line_out(&l);
}

/* A change as listen shows it, when it comes: "[room1 #12] alice recalled
 * #9", or #10 again in its new version, "[room1 #10] alice: text (edited)"
 * (a terminal cannot change a line already printed). Returns false when
 * stdout failed. */
static bool print_change(const chat_client_change *ch)
{
    struct line l;

    if (ch->type == CHAT_CLIENT_RECALLED) {
        line_begin(&l, ch->group, ch->by);
        line_str(&l, ch->member);
        line_str(&l, " recalled ");
        line_id(&l, ch->id);
        return line_out(&l);
    }
    line_begin(&l, ch->group, ch->id);
    line_str(&l, ch->member);
    line_put(&l, ": ", 2);
    line_text(&l, ch->body != NULL ? ch->body : ch->json);
    line_str(&l, " (edited)");
    return line_out(&l);
}

/* Marks the read waiting, if any; m->read_mu held. */
static void read_waiting_locked(struct mqchat *m, int64_t now)
{
    if (m->read_id != 0 && m->client != NULL)
        (void)chat_client_read(m->client, m->read_group, m->read_id);
    m->read_id = 0;
    m->read_ms = now;
}

/* Records that id of group was printed (dispatcher thread). */
static void mark_read(struct mqchat *m, const char *group, uint64_t id, int64_t now)
{
    size_t len = strlen(group);

    if (len >= sizeof m->read_group)
        return; /* not a group name the library would have shown */
    pthread_mutex_lock(&m->read_mu);
    if (m->read_id != 0 && strcmp(m->read_group, group) != 0)
        read_waiting_locked(m, m->read_ms);
    memcpy(m->read_group, group, len + 1);
    m->read_id = id;
    if (now - m->read_ms >= FLUSH_MS)
        read_waiting_locked(m, now);
    pthread_mutex_unlock(&m->read_mu);
}

/* Marks the read waiting, if any (main thread). */
static void read_waiting(struct mqchat *m)
{
    pthread_mutex_lock(&m->read_mu);
    read_waiting_locked(m, now_ms());
    pthread_mutex_unlock(&m->read_mu);
}

/* Flushes stdout; false when it failed. */
static bool flush_stdout(struct mqchat *m)
{
    atomic_store(&m->unflushed, false);
    return fflush(stdout) == 0 && !ferror(stdout);
}

/* The library is about to record as shown what on_message printed: it must
 * be out of stdout's buffer first, or a kill -9 would lose lines the state
 * file claims (and the next start would skip them). */
bool mqchat_on_commit(void *arg)
{
    struct mqchat *m = arg;

    /* Always fflush, not only when m->unflushed: the main thread clears the
     * flag before its own fflush, which may still be writing; fflush waits
     * for it under stdout's lock (and costs nothing when all is out). */
    if (flush_stdout(m))
        return true;
    fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
    stop_main(m, EXIT_UNREACHABLE);
    return false;
}

/* listen: a recall or edit is printed as it comes (print_change), just
 * before its message reaches mqchat_on_message, which then prints nothing
 * more for it (but counts it, and marks it read, as any message). */
void mqchat_on_change(void *arg, const chat_client_change *ch)
{
    struct mqchat *m = arg;

    if (m->json || (m->count > 0 && atomic_load(&m->printed) >= m->count))
        return; /* --json prints the message itself */
    atomic_store(&m->unflushed, true);
    if (!print_change(ch)) {
        fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
        stop_main(m, EXIT_UNREACHABLE);
    }
}

bool mqchat_on_message(void *arg, const chat_client_message *msg)
{
    struct mqchat *m = arg;
    int64_t now;
    bool shown_as_change = !m->json && (msg->recall != 0 || msg->edit != 0);

    if (m->count > 0 && atomic_load(&m->printed) >= m->count)
        return false; /* -C reached: leave the rest unshown */
    /* Stopped (a signal, -W): a catch-up must not keep us printing; the
     * rest stays unacked and comes after the next start. */
    if (atomic_load(&m->stopping))
        return false;
    atomic_store(&m->unflushed, true);
    now = now_ms();
    if ((!shown_as_change && !print_message(msg, m->json)) ||
        (now - m->flushed_ms >= FLUSH_MS && !flush_stdout(m))) {
        fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
        stop_main(m, EXIT_UNREACHABLE);
        return false;
    }
    if (now - m->flushed_ms >= FLUSH_MS)
        m->flushed_ms = now;
    /* Printed is read. */
    if (m->mark_read)
        mark_read(m, msg->group, msg->id, now);
    if (atomic_fetch_add(&m->printed, 1) + 1 == m->count)
        stop_main(m, 0);
    return true;
}

void mqchat_on_event(void *arg, const chat_client_event *ev)
{
    struct mqchat *m = arg;
    int64_t now;

    switch (ev->type) {
    case CHAT_CLIENT_EV_CONNECTED:
        if (atomic_load(&m->connected_once))
            note(m, "connected again");
        else if (atomic_load(&m->waiting))
            note(m, "connected");
        atomic_store(&m->connected_once, true);
        break;
    case CHAT_CLIENT_EV_DISCONNECTED:
        if (ev->code == 0x8E) /* MQTT 5: Session taken over */
            fprintf(stderr,
                    "mqchat: another client connected with the client id '%s' and took over "
                    "this connection; reconnecting (give each device its own -i)\n",
                    m->client_id);
        else
            note(m, "connection lost%s%s; reconnecting", ev->reason ? ": " : "",
                 ev->reason ? ev->reason : "");
        break;
    case CHAT_CLIENT_EV_CATCHUP:
        /* Only long catch-ups (more than a page) get progress lines. */
        now = now_ms();
        if (ev->id >= ev->head) {
            if (ev->pages > 1)
                note(m, "%s: caught up at #%llu (%llu message%s, %llu pages)", ev->group,
                     (unsigned long long)ev->id, (unsigned long long)ev->messages,
                     plural(ev->messages), (unsigned long long)ev->pages);
        } else if (now - m->last_progress >= PROGRESS_EVERY_MS) {
            m->last_progress = now;
            note(m, "%s: catching up: %llu page%s, %llu message%s so far, %llu remaining",
                 ev->group, (unsigned long long)ev->pages, plural(ev->pages),
                 (unsigned long long)ev->messages, plural(ev->messages),
                 (unsigned long long)(ev->head - ev->id));
        }
        break;
    case CHAT_CLIENT_EV_SEND_REFUSED:
        fprintf(stderr, "mqchat: %s: message%s%s refused: %s\n", ev->group ? ev->group : "?",
                ev->cid ? " " : "", ev->cid ? ev->cid : "", ev->reason ? ev->reason : "?");
        break;
    case CHAT_CLIENT_EV_LISTEN_REFUSED:
        fprintf(stderr, "mqchat: %s: cannot listen: %s\n", ev->group ? ev->group : "?",
                ev->reason ? ev->reason : "?");
        stop_main(m, EXIT_REFUSED);
        break;
    case CHAT_CLIENT_EV_TRUNCATED:
        note(m, "%s: messages before #%llu were removed by retention before you saw them",
             ev->group, (unsigned long long)ev->id);
        break;
    case CHAT_CLIENT_EV_ERROR:
        fprintf(stderr, "mqchat: %s%s%s\n", ev->group ? ev->group : "", ev->group ? ": " : "",
                ev->reason ? ev->reason : "error");
        break;
    case CHAT_CLIENT_EV_PRESENCE:
        note(m, "%s: %s is %s", ev->group, ev->member, ev->online ? "online" : "offline");
        break;
    case CHAT_CLIENT_EV_READ:
        break; /* mqchat receipts shows them on demand */
    case CHAT_CLIENT_EV_PUSH_DROPPED:
        fprintf(stderr, "mqchat: this device's push registration was dropped: %s\n",
                ev->reason ? ev->reason : "?");
        break;
    }
}

/* ===========================================================================
 * Commands
 * ========================================================================= */

static int cmd_send(chat_client *c, const struct opts *o, int wait_ms)
{
    const char *group = o->args[0];
    chat_client_err err = CHAT_CLIENT_OK;
    size_t refused = 0, sent = 0;

    if (o->lines) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, stdin)) >= 0) {
            if (n > 0 && line[n - 1] == '\n')
                line[--n] = '\0';
            if (n == 0)
                continue; /* an empty line is no message */
            err = chat_client_send(c, group, line, NULL, 0);
            if (err == CHAT_CLIENT_ERR_FULL) {
                size_t r = 0;
                if ((err = chat_client_flush(c, wait_ms, &r)) == CHAT_CLIENT_OK) {
                    refused += r;
                    err = chat_client_send(c, group, line, NULL, 0);
                }
            }
            if (err != CHAT_CLIENT_OK)
                break;
            sent++;
        }
        free(line);
        if (err == CHAT_CLIENT_OK && ferror(stdin)) {
            fprintf(stderr, "mqchat: reading stdin: %s\n", strerror(errno));
            return EXIT_UNREACHABLE;
        }
    } else {
        size_t len = 0;
        char *text;
        for (int i = 1; i < o->nargs; i++)
            len += strlen(o->args[i]) + 1;
        if ((text = malloc(len + 1)) == NULL)
            return mqchat_failed("send", CHAT_CLIENT_ERR_NOMEM);
        text[0] = '\0';
        for (int i = 1; i < o->nargs; i++) {
            if (i > 1)
                strcat(text, " ");
            strcat(text, o->args[i]);
        }
        err = chat_client_send(c, group, text, NULL, 0);
        free(text);
        sent = 1;
    }
    if (err != CHAT_CLIENT_OK)
        return mqchat_failed("send", err);
    size_t r = 0;
    if ((err = chat_client_flush(c, wait_ms, &r)) != CHAT_CLIENT_OK)
        return mqchat_failed("send (waiting for the broker)", err);
    refused += r;
    if (refused > 0) {
        fprintf(stderr, "mqchat: %zu of %zu message(s) refused\n", refused, sent);
        return EXIT_REFUSED;
    }
    return 0;
}

/* Connects, trying again for up to wait_ms while the broker cannot be
 * reached (it may be starting, or restarting); a refusal ends the wait.
 * Returns 0, or the exit status after saying why. */
static int connect_wait(const struct mqchat *m, chat_client *c, int wait_ms)
{
    int64_t deadline = now_ms() + wait_ms;
    int pause = RETRY_FIRST_MS;
    char why[512] = "";

    for (int attempt = 1;; attempt++) {
        int64_t left = deadline - now_ms();
        chat_client_err err = chat_client_connect(c, left > 0 ? (int)left : 1);
        struct timespec ts;

        if (err == CHAT_CLIENT_OK)
            return 0;
        if (err != CHAT_CLIENT_ERR_CONNECT && err != CHAT_CLIENT_ERR_TIMEOUT)
            return mqchat_failed("cannot connect", err);
        /* The last attempt may be cut by the deadline: name the real cause. */
        if (err == CHAT_CLIENT_ERR_CONNECT || why[0] == '\0')
            snprintf(why, sizeof why, "%s", chat_client_reason());
        left = deadline - now_ms();
        if (left <= 0) {
            fprintf(stderr, "mqchat: cannot connect within %d s (%d attempts): %s\n",
                    (wait_ms + 999) / 1000, attempt, why);
            return EXIT_UNREACHABLE;
        }
        if (attempt == 1)
            note(m, "%s; trying again for up to %lld s", why, (long long)(left + 999) / 1000);
        left = left < pause ? left : pause;
        ts.tv_sec = (time_t)(left / 1000);
        ts.tv_nsec = (long)(left % 1000) * 1000000L;
        nanosleep(&ts, NULL);
        pause = pause * 2 < RETRY_MAX_MS ? pause * 2 : RETRY_MAX_MS;
    }
}

static int cmd_listen(struct mqchat *m, chat_client *c, const struct opts *o, sigset_t *sigs,
                      int wait_ms)
{
    int64_t deadline = o->wait_s > 0 ? now_ms() + (int64_t)o->wait_s * 1000 : 0;
    int status = 0;
    chat_client_err err;

    /* Listened groups are subscribed on every connect, the first included. */
    for (int i = 0; i < o->nargs; i++) {
        if ((err = chat_client_listen(c, o->args[i])) != CHAT_CLIENT_OK)
            return mqchat_failed("listen", err);
    }
    /* A listener started with the broker (at boot) waits for it: the
     * library keeps trying in the background, each attempt bounded by
     * wait_ms, until we stop. */
    err = chat_client_connect(c, wait_ms);
    if (err == CHAT_CLIENT_ERR_CONNECT || err == CHAT_CLIENT_ERR_TIMEOUT) {
        atomic_store(&m->waiting, true);
        note(m, "%s; waiting for the broker (Ctrl-C to stop)", chat_client_reason());
    } else if (err != CHAT_CLIENT_OK) {
        return mqchat_failed("cannot connect", err);
    }
    /* Wait for a signal: Ctrl-C, kill, or a callback's SIGUSR1; flush
     * waiting lines every FLUSH_MS / 2 meanwhile. */
    for (;;) {
        int sig;
        int64_t left = FLUSH_MS / 2;
        struct timespec ts;
        if (atomic_load(&m->unflushed) && !flush_stdout(m)) {
            fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
            status = EXIT_UNREACHABLE;
            break;
        }
        read_waiting(m);
        if (deadline > 0) {
            int64_t until = deadline - now_ms();
            if (until <= 0)
                break;
            left = until < left ? until : left;
        }
        ts.tv_sec = (time_t)(left / 1000);
        ts.tv_nsec = (long)(left % 1000) * 1000000L;
        sig = sigtimedwait(sigs, NULL, &ts);
        if (sig < 0) /* EAGAIN: the timeout; EINTR */
            continue;
        if (sig == SIGUSR1 && atomic_load(&m->exit) < 0)
            continue;
        break;
    }
    atomic_store(&m->stopping, true);
    if (atomic_load(&m->exit) >= 0)
        status = atomic_load(&m->exit);
    if (status == 0 && !atomic_load(&m->connected_once)) {
        fprintf(stderr, "mqchat: stopped before the broker could be reached\n");
        status = EXIT_UNREACHABLE;
    }
    if (!flush_stdout(m) && status == 0) {
        fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
        status = EXIT_UNREACHABLE;
    }
    read_waiting(m);
    return status;
}

static void print_page_oldest_first(chat_client_message **msgs, size_t n, bool json)
{
    for (size_t i = n; i > 0; i--)
        print_message(msgs[i - 1], json);
}

static int cmd_history(chat_client *c, const struct opts *o)
{
    const char *group = o->args[0];
    chat_client_page **pages = NULL;
    chat_client_message **msgs = NULL;
    size_t npages = 0, n = 0, want = (size_t)o->history_n;
    uint64_t before = 0;
    int status = 0;

    /* Pages come newest first; collect, then print oldest first. */
    for (size_t round = 0; n < want && round < want; round++) {
        chat_client_page *p = NULL, **np;
        chat_client_message **nm;
        chat_client_err err = chat_client_history(c, group, before, want - n, &p);
        if (err != CHAT_CLIENT_OK) {
            status = mqchat_failed("history", err);
            break;
        }
        /* NOLINTBEGIN(bugprone-sizeof-expression): arrays of pointers */
        if ((np = realloc(pages, (npages + 1) * sizeof *pages)) == NULL ||
            (nm = realloc(msgs, (n + p->count) * sizeof *msgs + 1)) == NULL) {
            /* NOLINTEND(bugprone-sizeof-expression) */
            if (np != NULL)
                pages = np;
            chat_client_page_free(p);
            status = mqchat_failed("history", CHAT_CLIENT_ERR_NOMEM);
            break;
        }
        pages = np;
        msgs = nm;
        pages[npages++] = p;
        for (size_t i = 0; i < p->count && n < want; i++)
            msgs[n++] = &p->messages[i];
        if (p->count == 0 || !p->more)
            break;
        before = p->messages[p->count - 1].id;
    }
    if (status == 0)
        print_page_oldest_first(msgs, n, o->json);
    for (size_t i = 0; i < npages; i++)
        chat_client_page_free(pages[i]);
    free(pages);
    free(msgs);
    if (status == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "mqchat: cannot write to stdout: %s\n", strerror(errno));
        return EXIT_UNREACHABLE;
    }
    return status;
}

static int cmd_unread(chat_client *c)
{
    chat_client_group_status *list = NULL;
    size_t n = 0;
    chat_client_err err = chat_client_unread(c, &list, &n);

    if (err != CHAT_CLIENT_OK)
        return mqchat_failed("unread", err);
    if (n == 0)
        printf("no groups yet: join one with 'mqchat join <group>', or by sending to or "
               "listening to an open group\n");
    for (size_t i = 0; i < n; i++)
        printf("%s: %llu unread (head #%llu)\n", list[i].group, (unsigned long long)list[i].unread,
               (unsigned long long)list[i].head);
    chat_client_unread_free(list, n);
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

static int cmd_membership(chat_client *c, const struct opts *o, bool join)
{
    uint64_t head = 0;
    chat_client_err err = join ? chat_client_join(c, o->args[0], NULL, &head)
                               : chat_client_leave(c, o->args[0], NULL);

    if (err != CHAT_CLIENT_OK)
        return mqchat_failed(join ? "join" : "leave", err);
    if (join)
        printf("joined %s (head #%llu)\n", o->args[0], (unsigned long long)head);
    else
        printf("left %s\n", o->args[0]);
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

/* recall and edit of one's own message (v1.2). */
static int cmd_change(chat_client *c, const struct opts *o, bool recall)
{
    uint64_t id = (uint64_t)strtoull(o->args[1], NULL, 10), by = 0;
    char *text = NULL;
    chat_client_err err;

    if (recall) {
        err = chat_client_recall(c, o->args[0], id, &by);
    } else {
        /* The words after the id, joined by spaces, as send does. */
        size_t len = 1;
        for (int i = 2; i < o->nargs; i++)
            len += strlen(o->args[i]) + 1;
        if ((text = calloc(1, len)) == NULL)
            return mqchat_failed("edit", CHAT_CLIENT_ERR_NOMEM);
        for (int i = 2; i < o->nargs; i++) {
            if (i > 2)
                strcat(text, " ");
            strcat(text, o->args[i]);
        }
        err = chat_client_edit(c, o->args[0], id, text, NULL, &by);
        free(text);
    }
    if (err != CHAT_CLIENT_OK)
        return mqchat_failed(recall ? "recall" : "edit", err);
    printf("%s %s #%llu (#%llu)\n", recall ? "recalled" : "edited", o->args[0],
           (unsigned long long)id, (unsigned long long)by);
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

/* who: the members online now. */
static int cmd_who(chat_client *c, const struct opts *o)
{
    char **online = NULL;
    size_t n = 0;
    uint64_t members = 0;
    chat_client_err err = chat_client_presence(c, o->args[0], &online, &n, &members);

    if (err != CHAT_CLIENT_OK)
        return mqchat_failed("who", err);
    printf("%s: %zu of %llu member%s online%s", o->args[0], n, (unsigned long long)members,
           members == 1 ? "" : "s", n > 0 ? ": " : "\n");
    for (size_t i = 0; i < n; i++)
        printf("%s%s", online[i], i + 1 < n ? ", " : "\n");
    chat_client_presence_free(online, n);
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

/* receipts: each member's read marker, then "read by k of n" for one
 * message (the newest when no id is given). An id above the group's head
 * names no message: a bad argument, said on stderr, not "read by 0". */
static int cmd_receipts(chat_client *c, const struct opts *o)
{
    const char *group = o->args[0];
    chat_client_read_marker *list = NULL;
    chat_client_page *p = NULL;
    size_t n = 0, k = 0, width = 0;
    uint64_t members = 0, id = 0, head = 0;
    chat_client_err err;

    if ((err = chat_client_history(c, group, 0, 1, &p)) != CHAT_CLIENT_OK)
        return mqchat_failed("receipts", err);
    head = p->head;
    chat_client_page_free(p);
    id = o->nargs == 2 ? strtoull(o->args[1], NULL, 10) : head;
    if (id > head) {
        fprintf(stderr, "mqchat: receipts: %s has no message #%llu (its newest is #%llu)\n", group,
                (unsigned long long)id, (unsigned long long)head);
        return EXIT_USAGE;
    }
    if ((err = chat_client_receipts(c, group, &list, &n, &members)) != CHAT_CLIENT_OK)
        return mqchat_failed("receipts", err);
    for (size_t i = 0; i < n; i++)
        width = strlen(list[i].member) > width ? strlen(list[i].member) : width;
    for (size_t i = 0; i < n; i++) {
        if (list[i].id > 0)
            printf("%-*s  read up to #%llu\n", (int)width, list[i].member,
                   (unsigned long long)list[i].id);
        else
            printf("%-*s  has read nothing\n", (int)width, list[i].member);
        k += id > 0 && list[i].id >= id;
    }
    if (id == 0)
        printf("%s: no messages yet\n", group);
    else
        printf("%s #%llu: read by %zu of %llu\n", group, (unsigned long long)id, k,
               (unsigned long long)members);
    chat_client_receipts_free(list, n);
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

/* push register|remove|status: this device's push registration. */
static int cmd_push(const struct mqchat *m, chat_client *c, const struct opts *o)
{
    const char *sub = o->args[0];
    chat_client_err err = CHAT_CLIENT_OK;

    if (strcmp(sub, "register") == 0) {
        chat_client_push reg = {.kind = o->args[1]};
        if (strcmp(reg.kind, "unifiedpush") == 0) {
            reg.endpoint = o->args[2];
            reg.p256dh = o->nargs == 5 ? o->args[3] : NULL;
            reg.auth = o->nargs == 5 ? o->args[4] : NULL;
        } else if (strcmp(reg.kind, "matrix") == 0) {
            reg.url = o->args[2];
            reg.app_id = o->args[3];
            reg.pushkey = o->args[4];
        } else {
            reg.name = o->args[2];
        }
        if ((err = chat_client_push_register(c, &reg)) != CHAT_CLIENT_OK)
            return mqchat_failed("push register", err);
        printf("%s: registered for %s push\n", m->client_id, reg.kind);
    } else if (strcmp(sub, "remove") == 0) {
        if ((err = chat_client_push_remove(c)) != CHAT_CLIENT_OK)
            return mqchat_failed("push remove", err);
        printf("%s: no push registration\n", m->client_id);
    } else {
        bool registered = false;
        char *answer = NULL;
        if ((err = chat_client_push_status(c, &registered, &answer)) != CHAT_CLIENT_OK)
            return mqchat_failed("push status", err);
        if (m->json) {
            printf("%s\n", answer);
        } else if (!registered) {
            printf("%s: no push registration\n", m->client_id);
        } else {
            cJSON *e = cJSON_Parse(answer);
            const cJSON *kind = cJSON_GetObjectItemCaseSensitive(e, "kind");
            static const char *const fields[] = {"endpoint", "url", "app_id", "pushkey", "name"};
            printf("%s: %s", m->client_id, cJSON_IsString(kind) ? kind->valuestring : "?");
            for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
                const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, fields[i]);
                if (cJSON_IsString(f))
                    printf(" %s=%s", fields[i], f->valuestring);
            }
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "encrypted")))
                printf(" (encrypted)");
            putchar('\n');
            cJSON_Delete(e);
        }
        chat_client_free(answer);
    }
    return fflush(stdout) == 0 ? 0 : EXIT_UNREACHABLE;
}

struct mqchat *mqchat_create(const struct opts *o, bool listen, const char *client_id)
{
    struct mqchat *m = calloc(1, sizeof *m);

    if (m == NULL)
        return NULL;
    if (pthread_mutex_init(&m->read_mu, NULL) != 0) {
        free(m);
        return NULL;
    }
    m->json = o->json;
    m->quiet = o->quiet;
    m->count = listen ? o->count : 0;
    m->mark_read = listen && !o->no_read;
    m->client_id = client_id;
    m->main = pthread_self();
    atomic_init(&m->exit, -1);
    atomic_init(&m->printed, 0);
    atomic_init(&m->connected_once, false);
    atomic_init(&m->waiting, false);
    atomic_init(&m->unflushed, false);
    atomic_init(&m->stopping, false);
    return m;
}

void mqchat_destroy(struct mqchat *m)
{
    if (m == NULL)
        return;
    pthread_mutex_destroy(&m->read_mu);
    free(m);
}

int mqchat_run(struct mqchat *m, chat_client *c, const struct opts *o, sigset_t *sigs, int wait_ms)
{
    bool listen = strcmp(o->command, "listen") == 0;
    chat_client_err err;
    int status;

    m->client = c;
    if (listen) {
        status = cmd_listen(m, c, o, sigs, wait_ms);
    } else if ((status = connect_wait(m, c, wait_ms)) != 0) {
        return status == EXIT_USAGE ? EXIT_UNREACHABLE : status;
    } else if (strcmp(o->command, "send") == 0) {
        status = cmd_send(c, o, wait_ms);
    } else if (strcmp(o->command, "history") == 0) {
        status = cmd_history(c, o);
    } else if (strcmp(o->command, "unread") == 0) {
        status = cmd_unread(c);
    } else if (strcmp(o->command, "who") == 0) {
        status = cmd_who(c, o);
    } else if (strcmp(o->command, "receipts") == 0) {
        status = cmd_receipts(c, o);
    } else if (strcmp(o->command, "admin") == 0) {
        status = mqchat_admin(c, o, wait_ms);
    } else if (strcmp(o->command, "recall") == 0 || strcmp(o->command, "edit") == 0) {
        status = cmd_change(c, o, o->command[0] == 'r');
    } else if (strcmp(o->command, "push") == 0) {
        status = cmd_push(m, c, o);
    } else {
        status = cmd_membership(c, o, strcmp(o->command, "join") == 0);
    }
    /* Acks what was shown, so the next start resumes right after it. */
    err = chat_client_disconnect(c, wait_ms);
    if (err != CHAT_CLIENT_OK && status == 0 && !listen)
        status = mqchat_failed("disconnect", err);
    return status;
}
