/* test_connect.c: the connection as a new user meets it. mqchat -W retries
 * the connection for up to -W seconds (send) or until stopped (listen), so a
 * command started with the broker does not fail while the broker comes up;
 * a broker that refuses the connection ends it at once (exit 3); a second
 * listen of one device exits 4 and leaves the first alone; unread without
 * groups says so. And the library hands the application the reason code of
 * the broker's DISCONNECT (MQTT 5), the one thing that tells "another client
 * took my client id" (0x8E) from a network failure. */
#include "ct.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_client.h"

#define MAX_ARGS 32

static char *g_stdout, *g_stderr; /* of the last run or finish */

/* mqchat's argv from a NULL-terminated list of arguments. */
static void make_argv(char **argv, const char *const *args)
{
    int argc = 1;

    argv[0] = (char *)MQCHAT_BIN;
    for (; argc < MAX_ARGS && args[argc - 1] != NULL; argc++)
        argv[argc] = (char *)args[argc - 1];
    argv[argc] = NULL;
}

static void slurp(const char *out, const char *err)
{
    free(g_stdout);
    free(g_stderr);
    g_stdout = ts_read_file(out, NULL);
    g_stderr = ts_read_file(err, NULL);
    if (g_stdout == NULL)
        g_stdout = strdup("");
    if (g_stderr == NULL)
        g_stderr = strdup("");
}

/* Runs mqchat with the arguments to its end (at most 30 s) and returns its
 * exit status; its output is in g_stdout and g_stderr. */
#define run(...) run_args((const char *const[]){__VA_ARGS__, NULL})

static int run_args(const char *const *args)
{
    char *argv[MAX_ARGS + 1];
    make_argv(argv, args);
    return ct_run_output(argv, NULL, 30000, &g_stdout, &g_stderr);
}

/* Starts mqchat in the background, its output in <name>.out and .err. */
#define start(name, ...) start_args(name, (const char *const[]){__VA_ARGS__, NULL})

static void output_paths(const char *name, char *out, char *err, size_t size)
{
    char file[128];

    snprintf(file, sizeof file, "%s.out", name);
    ct_path(out, size, file);
    snprintf(file, sizeof file, "%s.err", name);
    ct_path(err, size, file);
}

static pid_t start_args(const char *name, const char *const *args)
{
    char *argv[MAX_ARGS + 1], out[512], err[512];

    make_argv(argv, args);
    output_paths(name, out, err, sizeof out);
    return ts_spawn(argv, NULL, NULL, out, err);
}

/* Waits for a background mqchat started as name; returns its status, its
 * output in g_stdout and g_stderr. */
static int finish(const char *name, pid_t pid, int timeout_ms)
{
    char out[512], err[512];
    int status = ts_wait(pid, timeout_ms);

    output_paths(name, out, err, sizeof out);
    slurp(out, err);
    return status;
}

/* Waits (at most 20 s) until the stderr of the background mqchat started as
 * name says text: it got that far. Fails if it ended before. */
static void wait_said(const char *name, pid_t pid, const char *text)
{
    char out[512], err[512];
    int64_t deadline = ts_now_ms() + 20000;
    int status = 0;

    output_paths(name, out, err, sizeof out);
    for (;;) {
        char *said = ts_read_file(err, NULL);
        bool found = said != NULL && strstr(said, text) != NULL;
        free(said);
        if (found)
            return;
        CHECK(!ts_ended(pid, &status), "%s ended (status %d) before it said \"%s\"", name, status,
              text);
        CHECK(ts_now_ms() < deadline, "%s did not say \"%s\" within 20 s", name, text);
        ts_sleep_ms(20);
    }
}

static void expect(const char *what, const char *text, const char *in)
{
    CHECK(strstr(in, text) != NULL, "%s lacks \"%s\":\n%s", what, text, in);
}

/* Waits (at most 20 s) until user's unread lists group: its listener has
 * subscribed, i.e. connected and joined. */
static void wait_member(const char *port, const char *user, const char *group)
{
    char line[160];
    int64_t deadline = ts_now_ms() + 20000;

    snprintf(line, sizeof line, "%s: ", group);
    while (ts_now_ms() < deadline) {
        if (run("-p", port, "-u", user, "-W", "5", "unread") == 0 && strstr(g_stdout, line) != NULL)
            return;
        ts_sleep_ms(200);
    }
    FAIL("%s's listener did not join %s within 20 s", user, group);
}

/* send -W waits for a broker that comes up within -W, and gives up after. */
static void send_waits(ts_broker *b, const char *port)
{
    int64_t t0;
    pid_t pid;
    int status;

    ts_broker_stop(b);
    t0 = ts_now_ms();
    pid = start("send", "-p", port, "-i", "alice", "-W", "8", "send", "room", "sent while down");
    /* Its first attempt failed, and it is still trying when the broker
     * comes up. */
    wait_said("send", pid, "trying again for up to");
    CHECK(!ts_ended(pid, &status), "send -W 8 gave up (status %d) at once", status);
    ts_broker_restart(b);
    status = finish("send", pid, 20000);
    CHECK(status == 0, "send -W 8 with the broker down at its start: status %d\n%s", status,
          g_stderr);
    CHECK(run("-p", port, "-i", "alice", "history", "room") == 0, "history: %s", g_stderr);
    expect("history", "[room #1] alice: sent while down", g_stdout);
    ts_log("send -W 8: waited %lld ms for the broker, then sent", (long long)(ts_now_ms() - t0));

    ts_broker_stop(b);
    t0 = ts_now_ms();
    status = run("-p", port, "-i", "alice", "-W", "2", "send", "room", "never");
    CHECK(status == 1, "send -W 2 with the broker down: status %d, expected 1", status);
    CHECK(ts_now_ms() - t0 >= 1500 && ts_now_ms() - t0 < 10000, "send -W 2 gave up after %lld ms",
          (long long)(ts_now_ms() - t0));
    expect("stderr", "cannot connect within 2 s", g_stderr);
    ts_log("send -W 2 with the broker down: exit 1 after %lld ms", (long long)(ts_now_ms() - t0));
    ts_broker_restart(b);
}

/* listen started before the broker waits for it, however long. */
static void listen_waits(ts_broker *b, const char *port)
{
    char state[512];
    pid_t pid;
    int status;

    ct_path(state, sizeof state, "bob.state");
    ts_broker_stop(b);
    pid = start("listen", "-p", port, "-u", "bob", "--state", state, "-W", "60", "-C", "1",
                "listen", "room");
    wait_said("listen", pid, "waiting for the broker");
    CHECK(!ts_ended(pid, &status), "listen ended (status %d) while the broker was down", status);
    ts_broker_restart(b);
    wait_member(port, "bob", "room");
    CHECK(run("-p", port, "-i", "alice", "send", "room", "welcome back") == 0, "send: %s",
          g_stderr);
    status = finish("listen", pid, 20000);
    CHECK(status == 0, "listen: status %d\n%s", status, g_stderr);
    CHECK(strcmp(g_stdout, "[room #2] alice: welcome back\n") == 0, "listen printed:\n%s",
          g_stdout);
    expect("listen's stderr", "waiting for the broker", g_stderr);
    expect("listen's stderr", "mqchat: connected", g_stderr);
    ts_log("listen started before the broker: waited, connected, printed, exit 0");
}

/* A second listen of the same device: exit 4, the first carries on. */
static void second_listen(const char *port)
{
    char state[512];
    pid_t first;
    int status;

    ct_path(state, sizeof state, "carol.state");
    first = start("carol", "-p", port, "-u", "carol", "--state", state, "-W", "60", "-C", "1",
                  "listen", "room");
    wait_member(port, "carol", "room");
    status = run("-p", port, "-u", "carol", "--state", state, "listen", "room");
    CHECK(status == 4, "second listen of one device: status %d, expected 4\n%s", status, g_stderr);
    expect("stderr", "is already listening", g_stderr);
    CHECK(run("-p", port, "-i", "alice", "send", "room", "still there?") == 0, "send: %s",
          g_stderr);
    status = finish("carol", first, 20000);
    CHECK(status == 0 && strstr(g_stdout, "alice: still there?") != NULL,
          "the first listener (status %d) printed:\n%s", status, g_stdout);
    ts_log("second listen of a device: exit 4; the first carried on");
}

static void no_groups(const char *port)
{
    CHECK(run("-p", port, "-u", "dave", "unread") == 0, "unread: %s", g_stderr);
    expect("unread", "no groups yet", g_stdout);
    ts_log("unread without groups: \"%.*s\"", (int)strcspn(g_stdout, "\n"), g_stdout);
}

/* A broker that refuses the connection ends the wait at once: exit 3. */
static void refused(void)
{
    ts_broker_conf conf = {.no_anonymous = true};
    ts_broker *b = ts_broker_start_conf(&conf);
    char port[16], state[512];
    int64_t t0 = ts_now_ms();
    int status;

    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    status = run("-p", port, "-i", "alice", "-W", "20", "send", "room", "hi");
    CHECK(status == 3, "send to a broker that refuses: status %d, expected 3\n%s", status,
          g_stderr);
    expect("stderr", "refused the connection", g_stderr);
    status = run("-p", port, "-u", "bob", "-V", "5", "--state", ct_path(state, sizeof state, "x"),
                 "listen", "room");
    CHECK(status == 3, "listen to a broker that refuses: status %d, expected 3\n%s", status,
          g_stderr);
    CHECK(ts_now_ms() - t0 < 15000, "refusals took %lld ms", (long long)(ts_now_ms() - t0));
    ts_broker_destroy(b);
    ts_log("connection refused by the broker: exit 3 at once");
}

/* ---------------------------------------------------------------------------
 * The library: DISCONNECTED carries the broker's reason code
 * ------------------------------------------------------------------------- */

struct seen {
    pthread_mutex_t mu;
    int connects;
    int disconnects;
    int code;
    char reason[512];
};

static void on_event(void *arg, const chat_client_event *ev)
{
    struct seen *s = arg;

    pthread_mutex_lock(&s->mu);
    if (ev->type == CHAT_CLIENT_EV_CONNECTED)
        s->connects++;
    if (ev->type == CHAT_CLIENT_EV_DISCONNECTED && s->disconnects++ == 0) {
        s->code = ev->code;
        snprintf(s->reason, sizeof s->reason, "%s", ev->reason ? ev->reason : "");
    }
    pthread_mutex_unlock(&s->mu);
}

static chat_client *client(int port, const char *id, int version, struct seen *s)
{
    chat_client_options o = {0};
    chat_client *c = NULL;

    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    o.port = port;
    o.client_id = id;
    o.mqtt_version = version;
    o.on_event = on_event;
    o.arg = s;
    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    CHECK(chat_client_connect(c, 10000) == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    return c;
}

/* Waits at most 10 s until *counter (a field of s) reaches n. */
static void wait_count(struct seen *s, const int *counter, int n, const char *what)
{
    int64_t deadline = ts_now_ms() + 10000;

    for (;;) {
        int have;
        pthread_mutex_lock(&s->mu);
        have = *counter;
        pthread_mutex_unlock(&s->mu);
        if (have >= n)
            return;
        CHECK(ts_now_ms() < deadline, "%s: %d of %d events within 10 s", what, have, n);
        ts_sleep_ms(10);
    }
}

/* Waits for the first DISCONNECTED event; returns its code. */
static int wait_disconnect(struct seen *s, const char *what)
{
    wait_count(s, &s->disconnects, 1, what);
    return s->code;
}

static void disconnect_reasons(void)
{
    static const char *const lines[] = {"max_packet_size 2000", NULL};
    ts_broker_conf conf = {.lines = lines};
    ts_broker *b = ts_broker_start_conf(&conf);
    int port = ts_broker_port(b), version = ts_broker_version(), code;
    char big[3001];
    struct seen s, s2;
    chat_client *c, *c2;

    /* A packet over max_packet_size: MQTT 5 hears 0x95, MQTT 3.1.1 nothing. */
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int v = 4; v <= 5; v++) {
        c = client(port, v == 5 ? "big5" : "big4", v, &s);
        CHECK(chat_client_send(c, "room", big, NULL, 0) == CHAT_CLIENT_OK, "send");
        code = wait_disconnect(&s, "oversized publish");
        /* ... and it connects again by itself (it then resends the message
         * and is disconnected again: destroy it). */
        wait_count(&s, &s.connects, 2, "connect after the broker's DISCONNECT");
        chat_client_destroy(c);
        if (v == 5) {
            CHECK(code == 0x95 && strstr(s.reason, "Packet too large (0x95)") != NULL,
                  "MQTT 5, oversized publish: code 0x%X, reason \"%s\"", (unsigned)code, s.reason);
        } else {
            CHECK(code == 0, "MQTT 3.1.1, oversized publish: code 0x%X", (unsigned)code);
        }
        ts_log("MQTT %s, oversized publish: DISCONNECTED code 0x%02X \"%s\"",
               v == 5 ? "5" : "3.1.1", (unsigned)code, s.reason);
    }

    /* Two devices named alike: the second takes over. Mosquitto tells the
     * first why (0x8E) from 2.0.15 on; 2.0.11 just closes its socket. */
    c = client(port, "phone", 5, &s);
    c2 = client(port, "phone", 5, &s2);
    code = wait_disconnect(&s, "session taken over");
    chat_client_destroy(c); /* before it takes the session back */
    chat_client_destroy(c2);
    if (version >= 20015)
        CHECK(code == 0x8E && strstr(s.reason, "same client id") != NULL,
              "session taken over: code 0x%X, reason \"%s\"", (unsigned)code, s.reason);
    else
        CHECK(code == 0, "session taken over on Mosquitto %d: code 0x%X", version, (unsigned)code);
    ts_log("Mosquitto %d.%d.%d, session taken over: DISCONNECTED code 0x%02X \"%s\"",
           version / 10000, version / 100 % 100, version % 100, (unsigned)code, s.reason);
    ts_broker_destroy(b);
}

int main(void)
{
    ts_broker *b;
    char port[16];

    ct_init("clients_connect");
    b = ts_broker_start(NULL);
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    send_waits(b, port);
    listen_waits(b, port);
    second_listen(port);
    no_groups(port);
    ts_broker_destroy(b);
    refused();
    disconnect_reasons();
    free(g_stdout);
    free(g_stderr);
    return ct_pass();
}
