/* test_receipts.c: read receipts and presence in the client library and
 * mqchat (protocol v1.1), against a real broker (receipt_interval 200 ms):
 *
 *   - the library: a member's presence comes and goes as
 *     CHAT_CLIENT_EV_PRESENCE events, pushed read markers as
 *     CHAT_CLIENT_EV_READ; chat_client_read publishes only what was shown
 *     (a read ahead of the messages waits for them); chat_client_receipts
 *     and chat_client_presence list the group with its member count; both
 *     MQTT 3.1.1 and 5;
 *   - mqchat: listen marks what it printed as read (--no-read does not),
 *     `who` and `receipts` print who is online and "read by k of n" (and
 *     refuse an id above the head). */
#include "ct.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_client.h"

#define GROUP "room"
#define WAIT_MS 10000

/* What a client's callbacks saw. */
struct seen {
    pthread_mutex_t mu;
    uint64_t shown;      /* last id shown */
    char log[8192];      /* "+bob -bob bob:3 " ...: presence and reads, in order */
    uint64_t read_of[4]; /* latest pushed marker of alice, bob, carol, other */
};

static int who(const char *member)
{
    return strcmp(member, "alice") == 0   ? 0
           : strcmp(member, "bob") == 0   ? 1
           : strcmp(member, "carol") == 0 ? 2
                                          : 3;
}

static bool on_message(void *arg, const chat_client_message *m)
{
    struct seen *s = arg;
    pthread_mutex_lock(&s->mu);
    s->shown = m->id;
    pthread_mutex_unlock(&s->mu);
    return true;
}

static void on_event(void *arg, const chat_client_event *ev)
{
    struct seen *s = arg;
    size_t n;
    if (ev->type != CHAT_CLIENT_EV_PRESENCE && ev->type != CHAT_CLIENT_EV_READ)
        return;
    CHECK(ev->group != NULL && strcmp(ev->group, GROUP) == 0 && ev->member != NULL,
          "an event without group or member");
    pthread_mutex_lock(&s->mu);
    n = strlen(s->log);
    if (ev->type == CHAT_CLIENT_EV_PRESENCE) {
        snprintf(s->log + n, sizeof s->log - n, "%c%s ", ev->online ? '+' : '-', ev->member);
    } else {
        snprintf(s->log + n, sizeof s->log - n, "%s:%llu ", ev->member, (unsigned long long)ev->id);
        s->read_of[who(ev->member)] = ev->id;
    }
    pthread_mutex_unlock(&s->mu);
}

/* Waits until s's log contains text; fails after WAIT_MS. */
static void wait_log(struct seen *s, const char *text)
{
    int64_t deadline = ts_now_ms() + WAIT_MS;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        bool found = strstr(s->log, text) != NULL;
        pthread_mutex_unlock(&s->mu);
        if (found)
            return;
        CHECK(ts_now_ms() < deadline, "no event \"%s\" in: %s", text, s->log);
        ts_sleep_ms(10);
    }
}

static void wait_shown(struct seen *s, uint64_t id)
{
    int64_t deadline = ts_now_ms() + WAIT_MS;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        uint64_t shown = s->shown;
        pthread_mutex_unlock(&s->mu);
        if (shown >= id)
            return;
        CHECK(ts_now_ms() < deadline, "message %llu never shown (at %llu)", (unsigned long long)id,
              (unsigned long long)shown);
        ts_sleep_ms(10);
    }
}

static chat_client *make(const ts_broker *b, const char *id, const char *user, int version,
                         struct seen *s, bool listen)
{
    chat_client_options o = {0};
    chat_client *c = NULL;
    o.port = ts_broker_port(b);
    o.client_id = id;
    o.username = user;
    o.password = user; /* as the broker knows test users (ts_broker_conf.users) */
    o.mqtt_version = version;
    o.ack_interval_ms = 200;
    o.on_message = on_message;
    o.on_event = on_event;
    o.arg = s;
    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    if (listen)
        CHECK(chat_client_listen(c, GROUP) == CHAT_CLIENT_OK, "listen: %s", chat_client_reason());
    CHECK(chat_client_connect(c, WAIT_MS) == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    return c;
}

/* receipts as "name:id ..." and the member count. */
static void expect_receipts(chat_client *c, const char *want, uint64_t want_members)
{
    chat_client_read_marker *list = NULL;
    size_t n = 0;
    uint64_t members = 0;
    char got[512] = "";
    chat_client_err err = chat_client_receipts(c, GROUP, &list, &n, &members);
    CHECK(err == CHAT_CLIENT_OK, "receipts: %s %s", chat_client_strerror(err),
          chat_client_reason());
    for (size_t i = 0; i < n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s:%llu", i ? " " : "",
                 list[i].member, (unsigned long long)list[i].id);
    chat_client_receipts_free(list, n);
    CHECK(strcmp(got, want) == 0 && members == want_members,
          "receipts \"%s\" of %llu, want "
          "\"%s\" of %llu",
          got, (unsigned long long)members, want, (unsigned long long)want_members);
}

static void expect_online(chat_client *c, const char *want, uint64_t want_members)
{
    char **online = NULL;
    size_t n = 0;
    uint64_t members = 0;
    char got[512] = "";
    chat_client_err err = chat_client_presence(c, GROUP, &online, &n, &members);
    CHECK(err == CHAT_CLIENT_OK, "presence: %s %s", chat_client_strerror(err),
          chat_client_reason());
    for (size_t i = 0; i < n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? " " : "", online[i]);
    chat_client_presence_free(online, n);
    CHECK(strcmp(got, want) == 0 && members == want_members,
          "online \"%s\" of %llu, want \"%s\" of %llu", got, (unsigned long long)members, want,
          (unsigned long long)want_members);
}

static void library(const ts_broker *b, int version)
{
    struct seen sa, sb;
    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    pthread_mutex_init(&sa.mu, NULL);
    pthread_mutex_init(&sb.mu, NULL);
    char ida[32], idb[32];
    snprintf(ida, sizeof ida, "alice-%d", version);
    snprintf(idb, sizeof idb, "bob-%d", version);

    chat_client *alice = make(b, ida, "alice", version, &sa, true);
    wait_log(&sa, "+alice ");
    chat_client *bob = make(b, idb, "bob", version, &sb, true);
    wait_log(&sa, "+bob ");
    expect_online(alice, "alice bob", 2);

    for (int i = 0; i < 3; i++)
        CHECK(chat_client_send(alice, GROUP, "hi", NULL, 0) == CHAT_CLIENT_OK, "send");
    CHECK(chat_client_flush(alice, WAIT_MS, NULL) == CHAT_CLIENT_OK, "flush");
    uint64_t base = 0;
    {
        /* the head before this round (the group lives across both versions) */
        chat_client_page *p = NULL;
        CHECK(chat_client_history(bob, GROUP, 0, 1, &p) == CHAT_CLIENT_OK, "history");
        base = p->head - 3;
        chat_client_page_free(p);
    }
    wait_shown(&sb, base + 3);
    /* ahead of what was shown: only what was shown goes out (it acks) */
    CHECK(chat_client_read(bob, GROUP, base + 2) == CHAT_CLIENT_OK, "read");
    char text[64];
    snprintf(text, sizeof text, "bob:%llu ", (unsigned long long)(base + 2));
    wait_log(&sa, text);
    CHECK(chat_client_read(bob, GROUP, base + 100) == CHAT_CLIENT_OK, "read ahead");
    snprintf(text, sizeof text, "bob:%llu ", (unsigned long long)(base + 3));
    wait_log(&sa, text);
    CHECK(sa.read_of[1] == base + 3, "bob's marker pushed as %llu, shown %llu",
          (unsigned long long)sa.read_of[1], (unsigned long long)(base + 3));
    /* alice reads on her side: bob hears it */
    wait_shown(&sa, base + 3);
    CHECK(chat_client_read(alice, GROUP, base + 1) == CHAT_CLIENT_OK, "read");
    snprintf(text, sizeof text, "alice:%llu ", (unsigned long long)(base + 1));
    wait_log(&sb, text);
    snprintf(text, sizeof text, "alice:%llu bob:%llu", (unsigned long long)(base + 1),
             (unsigned long long)(base + 3));
    expect_receipts(bob, text, 2);

    /* bob goes: alice hears it */
    chat_client_destroy(bob);
    wait_log(&sa, "-bob ");
    expect_online(alice, "alice", 2);
    chat_client_destroy(alice);
    ts_log("MQTT %d: presence and read events, receipts and presence lists", version);
}

/* ===========================================================================
 * mqchat
 * ========================================================================= */

static char g_out[512], g_err[512];
static char *g_stdout;

static void mqchat(int expect, ...)
{
    char *argv[32] = {(char *)MQCHAT_BIN};
    int argc = 1;
    va_list ap;
    va_start(ap, expect);
    for (const char *a; argc < 30 && (a = va_arg(ap, const char *)) != NULL;)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    unlink(g_out);
    unlink(g_err);
    int status = ts_run(argv, NULL, g_out, g_err, 30000);
    free(g_stdout);
    g_stdout = ts_read_file(g_out, NULL);
    char *err = ts_read_file(g_err, NULL);
    CHECK(status == expect, "%s: exit %d, expected %d; stdout:\n%s\nstderr:\n%s", argv[argc - 2],
          status, expect, g_stdout ? g_stdout : "", err ? err : "");
    free(err);
    if (g_stdout == NULL)
        g_stdout = strdup("");
}

static void expect_out(const char *text)
{
    CHECK(strstr(g_stdout, text) != NULL, "stdout lacks \"%s\":\n%s", text, g_stdout);
}

static void cli(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker *b = ts_broker_start(opts);
    char port[16], state[512], out[512], err[512];
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    ct_path(g_out, sizeof g_out, "mqchat.out");
    ct_path(g_err, sizeof g_err, "mqchat.err");

    mqchat(0, "-p", port, "-u", "carol", "join", GROUP, NULL);
    mqchat(0, "-p", port, "-u", "bob", "join", GROUP, NULL);
    mqchat(0, "-p", port, "-u", "alice", "send", GROUP, "one", "two", NULL);
    mqchat(0, "-p", port, "-u", "alice", "send", GROUP, "three", NULL);
    mqchat(0, "-p", port, "-u", "carol", "receipts", GROUP, NULL);
    expect_out("room #2: read by 0 of 3");
    expect_out("bob    has read nothing");

    /* bob listens (and prints 2 messages, so reads them); meanwhile who
     * sees him online */
    ct_path(state, sizeof state, "bob.state");
    char *argv[] = {(char *)MQCHAT_BIN, "-p",  port,     "-u",  "bob",
                    "--state",          state, "listen", GROUP, NULL};
    pid_t pid = ts_spawn(argv, NULL, NULL, ct_path(out, sizeof out, "listen.out"),
                         ct_path(err, sizeof err, "listen.err"));
    int64_t deadline = ts_now_ms() + WAIT_MS;
    for (;;) {
        mqchat(0, "-p", port, "-u", "carol", "receipts", GROUP, NULL);
        if (strstr(g_stdout, "bob    read up to #2") != NULL)
            break;
        CHECK(ts_now_ms() < deadline, "bob's listen did not mark #2 read:\n%s", g_stdout);
        ts_sleep_ms(100);
    }
    expect_out("room #2: read by 1 of 3");
    mqchat(0, "-p", port, "-u", "carol", "receipts", GROUP, "1", NULL);
    expect_out("room #1: read by 1 of 3");
    /* an id above the head names no message: said, exit 2 (a bad argument) */
    mqchat(2, "-p", port, "-u", "carol", "receipts", GROUP, "9", NULL);
    CHECK(strstr(g_stdout, "read by") == NULL, "receipts of #9 printed: %s", g_stdout);
    char *said = ts_read_file(g_err, NULL);
    CHECK(said && strstr(said, "room has no message #9 (its newest is #2)") != NULL,
          "receipts of #9 said: %s", said ? said : "");
    free(said);
    mqchat(0, "-p", port, "-u", "carol", "who", GROUP, NULL);
    expect_out("room: 1 of 3 members online: bob");
    ts_signal(pid, SIGTERM);
    CHECK(ts_wait(pid, WAIT_MS) == 0, "listen ended badly");
    mqchat(0, "-p", port, "-u", "carol", "who", GROUP, NULL);
    expect_out("room: 0 of 3 members online\n");

    /* --no-read: printed, not read */
    mqchat(0, "-p", port, "-u", "alice", "send", GROUP, "four", NULL);
    mqchat(0, "-p", port, "-u", "carol", "--state", ct_path(state, sizeof state, "carol.state"),
           "--no-read", "-W", "20", "-C", "1", "listen", GROUP, NULL);
    mqchat(0, "-p", port, "-u", "carol", "receipts", GROUP, NULL);
    expect_out("carol  has read nothing");
    expect_out("room #3: read by 0 of 3");
    /* a non-member is refused, learns nothing */
    mqchat(3, "-p", port, "-u", "eve", "who", GROUP, NULL);
    mqchat(3, "-p", port, "-u", "eve", "receipts", GROUP, NULL);
    CHECK(strstr(g_stdout, "of") == NULL, "eve was told something: %s", g_stdout);
    free(g_stdout);
    g_stdout = NULL;
    ts_broker_destroy(b);
    ts_log("mqchat: listen reads what it prints, who and receipts");
}

int main(void)
{
    ct_init("clients_receipts");
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker *b = ts_broker_start(opts);
    library(b, 4);
    library(b, 5);
    ts_broker_destroy(b);
    cli();
    return ct_pass();
}
