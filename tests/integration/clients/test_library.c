/* test_library.c: promises of the client library (chat_client.h) that no
 * other test exercises, through its public API only. One ctest per case
 * (argv[1], see `cases` below), each against its own broker:
 *
 *   outbox     max_outbox messages wait, the next send gets
 *              CHAT_CLIENT_ERR_FULL; once sent, the outbox takes more;
 *   halt       on_message returning false halts delivery for good, that
 *              message and every later one unshown and unacked; a new client
 *              on the same state file starts with it;
 *   callbacks  the blocking calls return CHAT_CLIENT_ERR_INVAL from a
 *              callback (no deadlock), send and listen work there;
 *   lock       the state file is locked while a client holds it: mqchat on
 *              it exits 4 (in use), and may go once the client is destroyed;
 *   held       with max_held 5, live messages ahead of a gap are dropped
 *              beyond five and come again: every id once, in order;
 *   acks       acks go every ack_every messages shown, the rest on
 *              disconnect, or after ack_interval_ms;
 *   state      the state file is written before the ack that covers it goes
 *              out: each write (write(2) and rename(2), which this program
 *              defines) looks at the broker's log, where such an ack would
 *              already be;
 *   state_fail the same when the state file cannot be written, reads
 *              (which ack too) included;
 *   commit     while the application's commit hook fails, the state file
 *              records nothing and nothing is acked; once it succeeds, both
 *              catch up.
 *
 * Waits are on events (a message shown, a cursor reached), bounded in time. */
#define _DEFAULT_SOURCE /* realpath, syscall: the state case's write(2) */
#include "ct.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "chat_client.h"

#define GROUP "lib"
#define WAIT_MS 10000
#define MAX_IDS 256

/* What a listening client saw, and how its callbacks behave. */
struct seen {
    pthread_mutex_t mu;
    uint64_t ids[MAX_IDS]; /* ids shown, in order */
    size_t n;
    uint64_t refuse_id;          /* on_message returns false for this id (0: never) */
    size_t refused;              /* times on_message returned false */
    size_t errors;               /* CHAT_CLIENT_EV_ERROR events */
    char bad[512];               /* the first violation, "" if none */
    chat_client *self;           /* the client, for the callbacks case */
    bool try_blocking;           /* on_message tries every blocking call once */
    chat_client_err blocking[8]; /* what they returned */
    chat_client_err send_rc, listen_rc;
    bool tried;
    bool commit_refuse; /* the commit hook returns false */
    size_t commits;     /* times the commit hook was called */
};

static void seen_init(struct seen *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
}

/* Every blocking call, from the dispatcher: each must refuse at once. */
static void try_blocking(struct seen *s)
{
    chat_client *c = s->self;
    chat_client_page *page = NULL;
    chat_client_group_status *list = NULL;
    size_t count = 0, refused = 0;
    uint64_t head = 0;

    s->blocking[0] = chat_client_fetch(c, GROUP, 0, 0, &page);
    s->blocking[1] = chat_client_history(c, GROUP, 0, 0, &page);
    s->blocking[2] = chat_client_unread(c, &list, &count);
    s->blocking[3] = chat_client_join(c, GROUP, NULL, &head);
    s->blocking[4] = chat_client_leave(c, "other", NULL);
    s->blocking[5] = chat_client_flush(c, 1000, &refused);
    s->blocking[6] = chat_client_connect(c, 1000);
    s->blocking[7] = chat_client_disconnect(c, 1000);
    chat_client_page_free(page);
    chat_client_unread_free(list, count);
    s->send_rc = chat_client_send(c, GROUP, "sent from a callback", NULL, 0);
    s->listen_rc = chat_client_listen(c, "lib2");
    s->tried = true;
}

static bool on_message(void *arg, const chat_client_message *m)
{
    struct seen *s = arg;
    bool take;

    pthread_mutex_lock(&s->mu);
    if (s->refused > 0)
        ct_violation(s->bad, sizeof s->bad, "id %" PRIu64 " shown after on_message returned false",
                     m->id);
    if (s->n > 0 && strcmp(m->group, GROUP) == 0 && m->id != s->ids[s->n - 1] + 1)
        ct_violation(s->bad, sizeof s->bad, "id %" PRIu64 " after %" PRIu64, m->id,
                     s->ids[s->n - 1]);
    take = m->id != s->refuse_id;
    if (!take)
        s->refused++;
    else if (s->n < MAX_IDS && strcmp(m->group, GROUP) == 0)
        s->ids[s->n++] = m->id;
    if (s->try_blocking && !s->tried)
        try_blocking(s);
    pthread_mutex_unlock(&s->mu);
    return take;
}

static void on_event(void *arg, const chat_client_event *ev)
{
    struct seen *s = arg;

    pthread_mutex_lock(&s->mu);
    if (ev->type == CHAT_CLIENT_EV_ERROR)
        s->errors++;
    if (ev->type == CHAT_CLIENT_EV_SEND_REFUSED || ev->type == CHAT_CLIENT_EV_LISTEN_REFUSED)
        ct_violation(s->bad, sizeof s->bad, "event %d: %s", (int)ev->type,
                     ev->reason ? ev->reason : "");
    pthread_mutex_unlock(&s->mu);
}

/* Waits until s has shown n messages (or refused one, if refusal); fails on
 * a violation or after WAIT_MS. */
static void wait_shown(struct seen *s, size_t n, bool refusal)
{
    int64_t deadline = ts_now_ms() + WAIT_MS;

    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < 100000 && s->bad[0] == '\0' && s->n < n && !(refusal && s->refused > 0) &&
                    ts_now_ms() < deadline;
         i++) {
        pthread_mutex_unlock(&s->mu);
        ts_sleep_ms(5);
        pthread_mutex_lock(&s->mu);
    }
    CHECK(s->bad[0] == '\0', "%s", s->bad);
    CHECK(s->n >= n || (refusal && s->refused > 0), "%zu of %zu messages shown within %d ms", s->n,
          n, WAIT_MS);
    pthread_mutex_unlock(&s->mu);
}

static chat_client *open_client(const ts_broker *b, const char *id, const char *state,
                                struct seen *s, chat_client_options *extra)
{
    chat_client_options o = extra != NULL ? *extra : (chat_client_options){0};
    chat_client *c = NULL;
    char path[512];
    chat_client_err err;

    o.port = b != NULL ? ts_broker_port(b) : 1;
    o.client_id = id;
    if (state != NULL)
        o.state_path = ct_path(path, sizeof path, state);
    if (s != NULL) {
        o.on_message = on_message;
        o.on_event = on_event;
        o.arg = s;
    }
    err = chat_client_create(&o, &c);
    CHECK(err == CHAT_CLIENT_OK, "create %s: %s %s", id, chat_client_strerror(err),
          chat_client_reason());
    if (s != NULL)
        s->self = c;
    if (b != NULL) {
        err = chat_client_connect(c, WAIT_MS);
        CHECK(err == CHAT_CLIENT_OK, "connect %s: %s %s", id, chat_client_strerror(err),
              chat_client_reason());
    }
    return c;
}

/* A listener of GROUP, which it joins (at the group's head). */
static chat_client *listener(const ts_broker *b, const char *id, const char *state, struct seen *s,
                             chat_client_options *extra)
{
    chat_client *c = open_client(b, id, state, s, extra);
    uint64_t head = 0;

    CHECK(chat_client_join(c, GROUP, NULL, &head) == CHAT_CLIENT_OK, "join: %s",
          chat_client_reason());
    CHECK(chat_client_listen(c, GROUP) == CHAT_CLIENT_OK, "listen: %s", chat_client_reason());
    return c;
}

/* Sends n messages to group and waits until the broker took them all. */
static void send_n(chat_client *c, const char *group, int n)
{
    size_t refused = 1;

    for (int k = 0; k < n; k++) {
        char body[32];
        snprintf(body, sizeof body, "m%d", k);
        CHECK(chat_client_send(c, group, body, NULL, 0) == CHAT_CLIENT_OK, "send %d", k);
    }
    CHECK(chat_client_flush(c, WAIT_MS, &refused) == CHAT_CLIENT_OK && refused == 0,
          "flush: %s, %zu refused", chat_client_reason(), refused);
}

/* The device's cursor in GROUP, as sync reports it to c. */
static uint64_t acked_of(chat_client *c)
{
    chat_client_group_status *list = NULL;
    size_t n = 0;
    uint64_t acked = UINT64_MAX;

    CHECK(chat_client_unread(c, &list, &n) == CHAT_CLIENT_OK, "unread: %s", chat_client_reason());
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].group, GROUP) == 0)
            acked = list[i].acked;
    chat_client_unread_free(list, n);
    CHECK(acked != UINT64_MAX, "unread does not list %s", GROUP);
    return acked;
}

/* Waits (bounded) until the device's cursor is at least id; returns it. */
static uint64_t wait_acked(chat_client *c, uint64_t id)
{
    int64_t deadline = ts_now_ms() + WAIT_MS;
    uint64_t acked = acked_of(c);

    for (int i = 0; i < 1000 && acked < id && ts_now_ms() < deadline; i++) {
        ts_sleep_ms(20);
        acked = acked_of(c);
    }
    CHECK(acked >= id, "the cursor is at %" PRIu64 ", %" PRIu64 " expected", acked, id);
    return acked;
}

/* The last id shown of GROUP as the state file records it (0: none). */
static uint64_t state_says(const char *state)
{
    char path[512], *text, *line;
    unsigned long long id = 0;

    text = ts_read_file(ct_path(path, sizeof path, state), NULL);
    if (text == NULL)
        return 0;
    line = strstr(text, " " GROUP "\n");
    if (line != NULL) {
        while (line > text && line[-1] != '\n')
            line--;
        CHECK(sscanf(line, "%llu", &id) == 1, "state file line: %.80s", line);
    }
    free(text);
    return id;
}

/* ===========================================================================
 * Cases
 * ========================================================================= */

static void case_outbox(ts_broker *b)
{
    chat_client_options o = {.max_outbox = 3};
    chat_client *c = open_client(NULL, "outbox", NULL, NULL, &o);
    chat_client_page *page = NULL;
    size_t refused = 1;

    /* Not connected: nothing leaves the outbox. */
    for (int k = 0; k < 3; k++)
        CHECK(chat_client_send(c, GROUP, "waits", NULL, 0) == CHAT_CLIENT_OK, "send %d", k);
    CHECK(chat_client_send(c, GROUP, "one too many", NULL, 0) == CHAT_CLIENT_ERR_FULL,
          "a fourth send with max_outbox 3 was not refused with CHAT_CLIENT_ERR_FULL");
    chat_client_destroy(c);
    /* Connected: flushed, the outbox takes more. */
    c = open_client(b, "outbox", NULL, NULL, &o);
    send_n(c, GROUP, 3);
    CHECK(chat_client_send(c, GROUP, "fourth", NULL, 0) == CHAT_CLIENT_OK, "send after a flush");
    CHECK(chat_client_flush(c, WAIT_MS, &refused) == CHAT_CLIENT_OK && refused == 0, "flush");
    CHECK(chat_client_join(c, GROUP, NULL, NULL) == CHAT_CLIENT_OK, "join");
    CHECK(chat_client_history(c, GROUP, 0, 0, &page) == CHAT_CLIENT_OK, "history: %s",
          chat_client_reason());
    CHECK(page->count == 4 && page->head == 4, "%zu messages stored, head %" PRIu64, page->count,
          page->head);
    chat_client_page_free(page);
    chat_client_destroy(c);
}

static void case_halt(ts_broker *b)
{
    struct seen s, again;
    chat_client *c;
    chat_client_page *page = NULL;

    seen_init(&s);
    s.refuse_id = 3;
    c = listener(b, "halt", "halt.state", &s, NULL);
    send_n(c, GROUP, 5); /* its sends go on */
    wait_shown(&s, 2, true);
    /* A fetch answered after the flush: 4 and 5 had arrived, and went
     * through the dispatcher, before it returned. */
    CHECK(chat_client_fetch(c, GROUP, 0, 0, &page) == CHAT_CLIENT_OK && page->count == 5, "fetch");
    chat_client_page_free(page);
    pthread_mutex_lock(&s.mu);
    CHECK(s.bad[0] == '\0', "%s", s.bad);
    CHECK(s.n == 2 && s.refused == 1, "%zu shown, %zu refused: expected 1 and 2 shown, 3 refused",
          s.n, s.refused);
    pthread_mutex_unlock(&s.mu);
    CHECK(chat_client_disconnect(c, WAIT_MS) == CHAT_CLIENT_OK, "disconnect");
    CHECK(state_says("halt.state") == 2, "the state file says %" PRIu64 ", 2 expected",
          state_says("halt.state"));
    chat_client_destroy(c);
    /* The cursor stayed at what was shown; a new client starts with 3. */
    seen_init(&again);
    c = open_client(b, "halt", "halt.state", &again, NULL);
    CHECK(acked_of(c) <= 2, "the cursor passed 2: %" PRIu64, acked_of(c));
    CHECK(chat_client_listen(c, GROUP) == CHAT_CLIENT_OK, "listen");
    wait_shown(&again, 3, false);
    CHECK(again.n == 3 && again.ids[0] == 3 && again.ids[2] == 5, "after the restart: %zu shown",
          again.n);
    chat_client_destroy(c);
}

static void case_callbacks(ts_broker *b)
{
    static const char *const names[] = {"fetch", "history", "unread",  "join",
                                        "leave", "flush",   "connect", "disconnect"};
    struct seen s;
    chat_client *c;

    seen_init(&s);
    s.try_blocking = true;
    c = listener(b, "cb", NULL, &s, NULL);
    send_n(c, GROUP, 1);
    /* The message sent from the callback comes back to the listener. */
    wait_shown(&s, 2, false);
    pthread_mutex_lock(&s.mu);
    CHECK(s.tried, "the callback did not run");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        CHECK(s.blocking[i] == CHAT_CLIENT_ERR_INVAL,
              "chat_client_%s from a callback returned %s, expected CHAT_CLIENT_ERR_INVAL",
              names[i], chat_client_strerror(s.blocking[i]));
    CHECK(s.send_rc == CHAT_CLIENT_OK && s.listen_rc == CHAT_CLIENT_OK,
          "send (%s) or listen (%s) from a callback failed", chat_client_strerror(s.send_rc),
          chat_client_strerror(s.listen_rc));
    pthread_mutex_unlock(&s.mu);
    /* Still connected and working from the application's thread. */
    CHECK(acked_of(c) <= 2, "unread after the callbacks");
    chat_client_destroy(c);
}

/* mqchat listen on the state file, as device "locked", until it printed
 * one message (at most WAIT_MS); returns its pid. */
static pid_t mqchat_listen(const ts_broker *b)
{
    char port[16], path[512], out[512];
    char *argv[] = {
        (char *)MQCHAT_BIN, "-p",  port, "-i", "locked", "--state", path, "-C", "1", "-W", "10",
        "listen",           GROUP, NULL};

    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    ct_path(path, sizeof path, "locked.state");
    return ts_spawn(argv, NULL, NULL, ct_path(out, sizeof out, "mqchat.out"), out);
}

static void case_lock(ts_broker *b)
{
    chat_client *c = open_client(NULL, "locked", "locked.state", NULL, NULL);
    int status = ts_wait(mqchat_listen(b), WAIT_MS);
    chat_client *sender;
    pid_t pid;

    CHECK(status == 4, "mqchat on a state file the library holds: exit %d, expected 4 (in use)",
          status);
    chat_client_destroy(c);
    sender = open_client(b, "lock-sender", NULL, NULL, NULL);
    /* Released: mqchat takes the device and prints what comes. */
    pid = mqchat_listen(b);
    status = -1;
    for (int64_t deadline = ts_now_ms() + WAIT_MS;
         !ts_ended(pid, &status) && ts_now_ms() < deadline;) {
        send_n(sender, GROUP, 1);
        ts_sleep_ms(50);
    }
    CHECK(status == 0, "mqchat on the state file after chat_client_destroy: exit %d", status);
    chat_client_destroy(sender);
}

/* mqchat sends n messages (one per line) to GROUP, from another process: a
 * second client in this one would slow the test down. */
static void mqchat_send(const ts_broker *b, int n, int from)
{
    char port[16], in[512], out[512], *text = malloc((size_t)n * 16 + 1);
    char *argv[] = {(char *)MQCHAT_BIN, "-p", port, "-i", "held-sender", "send", "-l", GROUP, NULL};
    size_t off = 0;

    CHECK(text != NULL, "out of memory");
    for (int k = 0; k < n; k++)
        off += (size_t)snprintf(text + off, 16, "m%d\n", from + k);
    ts_write_text(ct_path(in, sizeof in, "lines.txt"), text);
    free(text);
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    CHECK(ts_run(argv, in, ct_path(out, sizeof out, "send.out"), out, WAIT_MS) == 0,
          "mqchat send failed");
}

/* With replay false (cases[]): nothing fills a gap but the library's fetch. */
static void case_held(ts_broker *pull)
{
    chat_client_options o = {.max_held = 5, .gap_timeout_ms = 500};
    struct seen s;
    chat_client *c;

    seen_init(&s);
    c = listener(pull, "held", NULL, &s, &o);
    CHECK(chat_client_disconnect(c, WAIT_MS) == CHAT_CLIENT_OK, "disconnect");
    mqchat_send(pull, 20, 0);
    /* Back with a gap of 20 (nothing is pushed with replay false) and 30
     * live messages ahead of it: five are held, the rest come again. */
    CHECK(chat_client_connect(c, WAIT_MS) == CHAT_CLIENT_OK, "connect");
    mqchat_send(pull, 30, 20);
    wait_shown(&s, 50, false);
    pthread_mutex_lock(&s.mu);
    for (size_t i = 0; i < s.n; i++)
        CHECK(s.ids[i] == i + 1, "message %zu shown has id %" PRIu64, i, s.ids[i]);
    CHECK(s.n == 50, "%zu shown", s.n);
    ts_log("50 shown once, in order, with max_held 5 (%zu error events: drops reported)", s.errors);
    pthread_mutex_unlock(&s.mu);
    chat_client_destroy(c);
}

static void case_acks(ts_broker *b)
{
    chat_client_options every = {.ack_every = 10, .ack_interval_ms = 600000};
    chat_client_options interval = {.ack_every = 1000, .ack_interval_ms = 200};
    struct seen s;
    chat_client *c;

    /* Every ten shown: after 25 (its own), the cursor is at 20 (the
     * interval is ten minutes); the disconnect sends the rest. */
    seen_init(&s);
    c = listener(b, "acks", NULL, &s, &every);
    send_n(c, GROUP, 25);
    wait_shown(&s, 25, false);
    ts_log("25 shown");
    CHECK(acked_of(c) == 20, "after 25 shown with ack_every 10: cursor %" PRIu64, acked_of(c));
    CHECK(chat_client_disconnect(c, WAIT_MS) == CHAT_CLIENT_OK, "disconnect");
    ts_log("disconnected");
    CHECK(chat_client_connect(c, WAIT_MS) == CHAT_CLIENT_OK, "connect");
    ts_log("connected");
    CHECK(acked_of(c) == 25, "after the disconnect: cursor %" PRIu64, acked_of(c));
    chat_client_destroy(c);
    /* After the interval, fewer than ack_every go too. */
    seen_init(&s);
    c = listener(b, "acks2", NULL, &s, &interval);
    send_n(c, GROUP, 5);
    wait_shown(&s, 5, false);
    wait_acked(c, 30);
    chat_client_destroy(c);
}

/* The state case watches the library's writes of the state file: the
 * library appends to the file with write(2) and replaces it whole with
 * rename(2), both of which this program defines (they come before libc's),
 * so that each write can look at the broker before it happens. */
static struct {
    const ts_broker *b;  /* the broker whose log shows the acks */
    char path[512];      /* the state file watched ("" : none) */
    char real[PATH_MAX]; /* its directory resolved, and its name */
    int writes;          /* writes of GROUP's line seen */
    uint64_t last;       /* the id the last of them recorded */
    char bad[256];       /* the first ack seen ahead of its write */
} g_watch;

#define WATCH_ID "statewatch"
#define WATCH_PAUSE_MS 30 /* an ack sent ahead of its write reaches the log by then */

/* Acks of GROUP from WATCH_ID the broker has received so far. */
static long acks_received(void)
{
    char log[600], *text, *p;
    long n = 0;

    snprintf(log, sizeof log, "%s/mosquitto.log", ts_broker_dir(g_watch.b));
    text = ts_read_file(log, NULL);
    for (p = text; p != NULL && (p = strstr(p, "Received PUBLISH from " WATCH_ID " (")) != NULL;
         p++) {
        const char *eol = strchr(p, '\n');
        const char *topic = strstr(p, "'chat/" GROUP "/ack'");
        n += topic != NULL && (eol == NULL || topic < eol);
    }
    free(text);
    return n;
}

/* A write of text (the whole file, or lines appended) is about to reach
 * the state file: the ack of the id it records for GROUP must not have
 * reached the broker yet, when that id is new (the file is rewritten in
 * its short form, saying the same, when the client closes). */
static void watch_write(const char *text)
{
    const char *line = NULL;
    unsigned long long id = 0;

    /* The last line of GROUP: an appended line overrides an earlier one. */
    for (const char *p = text; (p = strstr(p, " " GROUP "\n")) != NULL; p++)
        line = p;
    while (line != NULL && line > text && line[-1] != '\n')
        line--;
    if (line != NULL && sscanf(line, "%llu", &id) == 1 && id > g_watch.last) {
        long acks;
        g_watch.writes++;
        g_watch.last = id;
        ts_sleep_ms(WATCH_PAUSE_MS);
        /* ack_every 1: the ack of id is the id-th; it must wait for this. */
        acks = acks_received();
        if (acks >= (long)id && g_watch.bad[0] == '\0')
            snprintf(g_watch.bad, sizeof g_watch.bad,
                     "the broker had %ld acks while the state file was being written for id "
                     "%llu",
                     acks, id);
    }
}

int rename(const char *from, const char *to)
{
    if (g_watch.path[0] != '\0' && strcmp(to, g_watch.path) == 0) {
        char *text = ts_read_file(from, NULL);
        if (text != NULL)
            watch_write(text);
        free(text);
    }
    return renameat(AT_FDCWD, from, AT_FDCWD, to);
}

/* Is fd open on the watched state file? */
static bool watched_fd(int fd)
{
    char link[64], target[PATH_MAX];
    ssize_t k;

    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    k = readlink(link, target, sizeof target - 1);
    if (k <= 0)
        return false;
    target[k] = '\0';
    return strcmp(target, g_watch.real) == 0;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (g_watch.path[0] != '\0' && n > 0 && n < 4096 && watched_fd(fd)) {
        char text[4096];
        memcpy(text, buf, n);
        text[n] = '\0';
        watch_write(text);
    }
    return syscall(SYS_write, fd, buf, n);
}

static void case_state(ts_broker *b)
{
    chat_client_options o = {.ack_every = 1};
    struct seen s;
    chat_client *c;

    seen_init(&s);
    g_watch.b = b;
    ct_path(g_watch.path, sizeof g_watch.path, "watch.state");
    {
        char dir[PATH_MAX];
        CHECK(realpath(ct_path(dir, sizeof dir, "."), g_watch.real) != NULL, "realpath");
        strncat(g_watch.real, "/watch.state", sizeof g_watch.real - strlen(g_watch.real) - 1);
    }
    c = listener(b, WATCH_ID, "watch.state", &s, &o);
    send_n(c, GROUP, 10);
    wait_shown(&s, 10, false);
    wait_acked(c, 10);
    chat_client_destroy(c);
    g_watch.path[0] = '\0';
    CHECK(g_watch.bad[0] == '\0', "%s", g_watch.bad);
    CHECK(g_watch.writes >= 10, "%d writes of the state file watched, 10 expected", g_watch.writes);
    CHECK(state_says("watch.state") == 10, "the state file says %" PRIu64,
          state_says("watch.state"));
}

/* The state file cannot be written any more (replaced by a directory, which
 * no rename replaces, even as root): what is shown from then on must not be
 * acked, or the device's cursor passes what the file says. */
static void case_state_fail(ts_broker *b)
{
    chat_client_options o = {.ack_every = 1};
    char path[512], inside[600];
    struct seen s;
    chat_client *c;

    seen_init(&s);
    c = listener(b, "statefail", "statefail.state", &s, &o);
    send_n(c, GROUP, 3);
    wait_shown(&s, 3, false);
    wait_acked(c, 3);
    ct_path(path, sizeof path, "statefail.state");
    CHECK(unlink(path) == 0 && mkdir(path, 0700) == 0, "cannot replace %s by a directory", path);
    snprintf(inside, sizeof inside, "%s/keep", path);
    ts_write_text(inside, "not a state file\n");
    send_n(c, GROUP, 3);
    wait_shown(&s, 6, false);
    /* A read also acks the device: it must wait for the file too. The
     * library's thread takes the read, then the disconnect, which sends
     * whatever acks and reads are due before its DISCONNECT; the broker
     * handles one connection's packets in order. So any ack the library
     * would send has been applied when the reconnect reads the cursor. */
    CHECK(chat_client_read(c, GROUP, 6) == CHAT_CLIENT_OK, "read: %s", chat_client_reason());
    CHECK(chat_client_disconnect(c, WAIT_MS) == CHAT_CLIENT_OK, "disconnect");
    CHECK(chat_client_connect(c, WAIT_MS) == CHAT_CLIENT_OK, "connect");
    CHECK(acked_of(c) == 3,
          "the cursor is at %" PRIu64 " though the state file could not record past 3",
          acked_of(c));
    pthread_mutex_lock(&s.mu);
    CHECK(s.errors >= 1, "no error event for the state file");
    pthread_mutex_unlock(&s.mu);
    chat_client_destroy(c);
}

static bool on_commit(void *arg)
{
    struct seen *s = arg;
    bool ok;

    pthread_mutex_lock(&s->mu);
    s->commits++;
    ok = !s->commit_refuse;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* The application buffers what it is given (mqchat listen's stdout) and
 * cannot make it durable: the library must not record or ack it. */
static void case_commit(ts_broker *b)
{
    chat_client_options o = {.ack_every = 1, .ack_interval_ms = 100};
    char path[512];
    struct seen s;
    chat_client *c = NULL;
    uint64_t head = 0;
    size_t commits = 0;

    seen_init(&s);
    s.commit_refuse = true;
    o.port = ts_broker_port(b);
    o.client_id = "commit";
    o.state_path = ct_path(path, sizeof path, "commit.state");
    o.on_message = on_message;
    o.on_event = on_event;
    o.arg = &s;
    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    s.self = c;
    CHECK(chat_client_set_commit(c, on_commit) == CHAT_CLIENT_OK, "set_commit");
    CHECK(chat_client_connect(c, WAIT_MS) == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    CHECK(chat_client_join(c, GROUP, NULL, &head) == CHAT_CLIENT_OK && head == 0, "join: %s",
          chat_client_reason());
    CHECK(chat_client_listen(c, GROUP) == CHAT_CLIENT_OK, "listen: %s", chat_client_reason());
    send_n(c, GROUP, 3);
    wait_shown(&s, 3, false);
    for (int i = 0; i < 500 && commits < 2; i++) {
        ts_sleep_ms(20);
        pthread_mutex_lock(&s.mu);
        commits = s.commits;
        pthread_mutex_unlock(&s.mu);
    }
    CHECK(commits >= 2, "the commit hook was called %zu times, not retried", commits);
    CHECK(state_says("commit.state") == 0, "the state file records %" PRIu64 " uncommitted",
          state_says("commit.state"));
    CHECK(acked_of(c) == 0, "the cursor is at %" PRIu64 " though nothing was committed",
          acked_of(c));
    pthread_mutex_lock(&s.mu);
    CHECK(s.errors >= 1, "no error event for the failed commit");
    s.commit_refuse = false;
    pthread_mutex_unlock(&s.mu);
    wait_acked(c, 3);
    CHECK(state_says("commit.state") == 3, "the state file records %" PRIu64 ", not 3",
          state_says("commit.state"));
    chat_client_destroy(c);
}

/* ===========================================================================
 * main
 * ========================================================================= */

typedef struct test_case {
    const char *name;
    void (*fn)(ts_broker *b);
    const char *const *opts; /* the broker's plugin options */
} test_case;

static const char *const pull_opts[] = {"replay false", NULL};

static const test_case cases[] = {
    {"outbox", case_outbox, NULL},       {"halt", case_halt, NULL},
    {"callbacks", case_callbacks, NULL}, {"lock", case_lock, NULL},
    {"held", case_held, pull_opts},      {"acks", case_acks, NULL},
    {"state", case_state, NULL},         {"state_fail", case_state_fail, NULL},
    {"commit", case_commit, NULL},
};

int main(int argc, char **argv)
{
    char name[64];

    for (size_t i = 0; argc > 1 && i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            ts_broker *b;
            snprintf(name, sizeof name, "clients_library_%s", cases[i].name);
            ct_init(name);
            b = ts_broker_start(cases[i].opts);
            cases[i].fn(b);
            ts_broker_destroy(b);
            return ct_pass();
        }
    }
    fprintf(stderr, "usage: %s <case>; cases:", argv[0]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        fprintf(stderr, " %s", cases[i].name);
    fputc('\n', stderr);
    return 2;
}
