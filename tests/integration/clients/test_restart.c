/* test_restart.c: `mqchat listen` is stopped and started again with the same
 * state file while messages keep coming: with SIGTERM and SIGINT no message
 * is shown twice and none is missing; with SIGKILL the messages shown since
 * the state file was last written (it is written before every ack and at
 * most 200 ms after a message is shown) show again, and none is missing.
 * Long catch-ups report progress on stderr. */
#include "ct.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_client.h"

#define M 1500
#define GROUP "restart"
#define PACE_MS 2
#define CAP (2 * M + 10) /* lines read at most: repeats after the SIGKILL included */
#define STR_(x) #x
#define STR(x) STR_(x)

struct line {
    uint64_t id;
    int k; /* body n<k> */
};

static char g_port[16], g_state[512], g_out[512], g_err[512];

/* Starts the listener, appending to the output files. */
static pid_t start_listener(void)
{
    char *argv[] = {(char *)MQCHAT_BIN, "-p",    g_port,   "-i",  "reader",
                    "--state",          g_state, "listen", GROUP, NULL};

    return ts_spawn(argv, NULL, NULL, g_out, g_err);
}

/* Parses the output so far into lines (at most cap); returns the count. */
static size_t read_lines(struct line *lines, size_t cap)
{
    char *text = ts_read_file(g_out, NULL), *p, *save = NULL;
    size_t n = 0;

    if (text == NULL)
        return 0;
    for (p = strtok_r(text, "\n", &save); p != NULL && n < cap; p = strtok_r(NULL, "\n", &save)) {
        unsigned long long id;
        int k, used = 0;
        if (sscanf(p, "[" GROUP " #%llu] sender: n%d%n", &id, &k, &used) != 2 || p[used] != '\0')
            FAIL("unexpected output line %zu: %s", n + 1, p);
        lines[n].id = id;
        lines[n].k = k;
        n++;
    }
    free(text);
    return n;
}

/* Stops the listener with sig and waits; for SIGTERM/SIGINT it must exit 0. */
static size_t stop_listener(pid_t pid, int sig, struct line *lines)
{
    int status;
    size_t n;

    ts_signal(pid, sig);
    status = ts_wait(pid, 10000);
    if (sig == SIGKILL)
        CHECK(status == 128 + SIGKILL, "status %d", status);
    else
        CHECK(status == 0, "mqchat listen exited with %d after signal %d", status, sig);
    n = read_lines(lines, CAP);
    ts_log("listener stopped with signal %d after %zu lines", sig, n);
    return n;
}

int main(void)
{
    const char *opts[] = {"page_size 40", NULL};
    struct line *lines = calloc(CAP, sizeof *lines);
    chat_client_options o = {0};
    chat_client *sender = NULL;
    ts_broker *b;
    pid_t pid;
    size_t n = 0, killed_at = 0, dups = 0, refused = 1;
    int64_t deadline;
    chat_client_err err;
    char *errtext;

    ct_init("clients_restart");
    CHECK(lines != NULL, "out of memory");
    b = ts_broker_start(opts);
    snprintf(g_port, sizeof g_port, "%d", ts_broker_port(b));
    ct_path(g_state, sizeof g_state, "reader.state");
    ct_path(g_out, sizeof g_out, "out.txt");
    ct_path(g_err, sizeof g_err, "err.txt");
    {
        char *argv[] = {(char *)MQCHAT_BIN, "-p", g_port, "-i", "reader", "join", GROUP, NULL};
        CHECK(ts_run(argv, NULL, NULL, g_err, 10000) == 0, "mqchat join failed");
    }
    pid = start_listener();

    o.port = ts_broker_port(b);
    o.client_id = "sender";
    err = chat_client_create(&o, &sender);
    CHECK(err == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    err = chat_client_connect(sender, 5000);
    CHECK(err == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());

    for (int k = 0; k < M; k++) {
        char body[32];
        snprintf(body, sizeof body, "n%d", k);
        err = chat_client_send(sender, GROUP, body, NULL, 0);
        CHECK(err == CHAT_CLIENT_OK, "send: %s", chat_client_strerror(err));
        ts_sleep_ms(PACE_MS);
        /* While the listener is down a backlog of several pages builds. */
        if (k == 300 || k == 700 || k == 1100) {
            int sig = k == 300 ? SIGTERM : k == 700 ? SIGINT : SIGKILL;
            n = stop_listener(pid, sig, lines);
            if (sig == SIGKILL)
                killed_at = n;
            ts_sleep_ms(600);
            pid = start_listener();
        }
    }
    err = chat_client_flush(sender, 30000, &refused);
    CHECK(err == CHAT_CLIENT_OK && refused == 0, "flush: %s", chat_client_strerror(err));

    deadline = ts_now_ms() + 60000;
    while ((n = read_lines(lines, CAP)) < M && ts_now_ms() < deadline)
        ts_sleep_ms(100);
    /* One more message once the backlog is shown: once the listener prints
     * it, it printed everything before it (ids in order), so nothing else
     * may come. */
    err = chat_client_send(sender, GROUP, "n" STR(M), NULL, 0);
    CHECK(err == CHAT_CLIENT_OK, "send: %s", chat_client_strerror(err));
    err = chat_client_flush(sender, 30000, &refused);
    CHECK(err == CHAT_CLIENT_OK && refused == 0, "flush: %s", chat_client_strerror(err));
    chat_client_destroy(sender);
    deadline = ts_now_ms() + 30000;
    while (((n = read_lines(lines, CAP)) == 0 || lines[n - 1].k != M) && ts_now_ms() < deadline)
        ts_sleep_ms(100);
    n = stop_listener(pid, SIGTERM, lines);

    /* Every id once, in order, bodies in send order; the one allowed
     * repeat is a run of the last lines printed before the SIGKILL, shown
     * again from where the state file had got to. */
    for (size_t i = 0, want = 1; i < n; i++) {
        if (i == killed_at && i > 0 && lines[i].id < want) {
            CHECK(lines[i].id >= 1, "line %zu: id 0", i + 1);
            for (uint64_t id = lines[i].id; id < want && i < n; id++, i++) {
                CHECK(lines[i].id == id,
                      "line %zu: id %" PRIu64 " while repeating, expected %" PRIu64, i + 1,
                      lines[i].id, id);
                dups++;
            }
            i--;
            continue;
        }
        CHECK(lines[i].id == want, "line %zu: id %" PRIu64 ", expected %zu", i + 1, lines[i].id,
              want);
        CHECK(lines[i].k == (int)want - 1, "line %zu: body n%d for id %zu", i + 1, lines[i].k,
              want);
        want++;
    }
    CHECK(n - dups == M + 1, "%zu lines, %zu repeated, expected %d messages", n, dups, M + 1);
    ts_log("%d messages exactly once in order across 3 restarts (%zu repeated at the SIGKILL)", M,
           dups);

    errtext = ts_read_file(g_err, NULL);
    CHECK(errtext != NULL && strstr(errtext, GROUP ": caught up at #") != NULL,
          "no catch-up progress on stderr: %s", errtext ? errtext : "(none)");
    free(errtext);
    ts_broker_destroy(b);
    free(lines);
    return ct_pass();
}
