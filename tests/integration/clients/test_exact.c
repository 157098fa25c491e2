/* test_exact: what mqchat and the client library hand out, and how mqchat
 * stops (issue 25, item 10), one case per argv[1] (ctest clients_exact_<case>):
 *
 *   history_json  `mqchat history --json` prints each envelope as stored,
 *                 as `listen --json` prints it live: text after \u0000
 *                 kept, 1e999 kept (not null), a 20-digit integer kept
 *                 digit for digit (not rounded); so does chat_client_fetch
 *   sigterm       SIGTERM during a long catch-up ends mqchat at once, not
 *                 after the catch-up: it has printed part of the backlog,
 *                 and the next listen prints the rest, each message once
 *   pages         catch-up progress says "1 page", never "1 pages"
 */
#include "ct.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_client.h"

#define WAIT_MS 20000
#define GROUP "room"

static char g_port[16];

/* Runs mqchat with args (NULL-terminated) and the output into out and err
 * (paths); returns its exit status. */
static int mqchat(const char *out, const char *err, const char *in, ...)
{
    char *argv[24] = {(char *)MQCHAT_BIN, "-p", g_port};
    int argc = 3;
    va_list ap;
    va_start(ap, in);
    for (const char *a; argc < 22 && (a = va_arg(ap, const char *)) != NULL;)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    unlink(out);
    unlink(err);
    return ts_run(argv, in, out, err, WAIT_MS * 3);
}

/* Lines of the file at path (0 if it cannot be read). */
static long lines_of(const char *path)
{
    return ts_count_lines(path, "");
}

/* ===========================================================================
 * history_json
 * ========================================================================= */

static void history_json(void)
{
    ts_broker *b = ts_broker_start(NULL);
    char out[512], err[512], in[512], live[512];
    /* A string that holds \u0000, a number beyond a double (1e999 as the
     * plugin writes an infinity), an integer beyond 2^53: stored as sent. */
    static const char msg[] =
        "{\"body\":\"before\\u0000after\",\"big\":12345678901234567890,\"x\":1e999}\n";

    snprintf(g_port, sizeof g_port, "%d", ts_broker_port(b));
    ct_path(out, sizeof out, "out");
    ct_path(err, sizeof err, "err");
    ct_path(in, sizeof in, "in");
    ct_path(live, sizeof live, "live");
    ts_write_text(in, "");
    CHECK(mqchat(out, err, in, "-u", "bob", "join", GROUP, NULL) == 0, "join");
    /* bob listens for one message: printed live, exactly as stored */
    char state[512];
    ct_path(state, sizeof state, "bob.state");
    ct_path(state, sizeof state, "bob.state");
    char *largv[] = {(char *)MQCHAT_BIN, "-p", g_port, "-u",     "bob", "--state", state,
                     "--json",           "-C", "1",    "listen", GROUP, NULL};
    pid_t pid = ts_spawn(largv, NULL, NULL, live, NULL);
    /* alice sends the JSON text with mosquitto_pub, byte for byte (the
     * library's send_json prints it again through cJSON to add its cid) */
    {
        char json[sizeof msg];
        memcpy(json, msg, sizeof msg);
        json[strlen(json) - 1] = '\0'; /* no newline */
        char *pub[] = {"mosquitto_pub", "-h", "127.0.0.1", "-p", g_port, "-i",
                       "alice-pub",     "-u", "alice",     "-q", "1",    "-t",
                       "chat/" GROUP,   "-m", json,        NULL};
        CHECK(ts_run(pub, NULL, NULL, NULL, WAIT_MS) == 0, "mosquitto_pub");
    }
    CHECK(ts_wait(pid, WAIT_MS) == 0, "listen -C 1 did not end");
    char *shown = ts_read_file(live, NULL);
    CHECK(shown != NULL && strstr(shown, "\"body\":\"before\\u0000after\"") != NULL &&
              strstr(shown, "\"big\":12345678901234567890") != NULL &&
              strstr(shown, "\"x\":1e999") != NULL,
          "listen --json printed: %s", shown ? shown : "");
    /* history --json: the same line */
    CHECK(mqchat(out, err, in, "-u", "bob", "--json", "history", GROUP, "-n", "1", NULL) == 0,
          "history");
    char *hist = ts_read_file(out, NULL);
    CHECK(hist != NULL && strcmp(hist, shown) == 0,
          "history --json printed\n  %s\nwhere listen --json printed\n  %s", hist ? hist : "",
          shown);
    /* the library's fetch and history hand out the same text */
    chat_client_options o = {0};
    chat_client *c = NULL;
    o.port = ts_broker_port(b);
    o.client_id = "alice-lib";
    o.username = "alice";
    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create");
    CHECK(chat_client_connect(c, WAIT_MS) == CHAT_CLIENT_OK, "connect");
    chat_client_page *p = NULL;
    CHECK(chat_client_fetch(c, GROUP, 0, 10, &p) == CHAT_CLIENT_OK && p->count == 1, "fetch");
    CHECK(strncmp(p->messages[0].json, shown, strlen(p->messages[0].json)) == 0 &&
              strlen(p->messages[0].json) + 1 == strlen(shown),
          "fetch's json: %s", p->messages[0].json);
    CHECK(p->messages[0].body != NULL && strcmp(p->messages[0].body, "before") == 0,
          "fetch's body: %s", p->messages[0].body ? p->messages[0].body : "(null)");
    chat_client_page_free(p);
    p = NULL;
    CHECK(chat_client_history(c, GROUP, 0, 10, &p) == CHAT_CLIENT_OK && p->count == 1, "history");
    CHECK(strncmp(p->messages[0].json, shown, strlen(p->messages[0].json)) == 0 &&
              strlen(p->messages[0].json) + 1 == strlen(shown),
          "history's json: %s", p->messages[0].json);
    chat_client_page_free(p);
    chat_client_destroy(c);
    free(hist);
    free(shown);
    ts_broker_destroy(b);
    ts_log("history --json, fetch and history print the stored envelope, as listen does");
}

/* ===========================================================================
 * sigterm
 * ========================================================================= */

#define BACKLOG 30000

static void sigterm(void)
{
    /* One message per page: a catch-up of 30,000 round trips, so that it
     * is still under way when the signal comes (whatever the machine). */
    ts_broker *b = ts_broker_start((const char *const[]){"page_size 1", NULL});
    char out[512], err[512], in[512], state[512], out2[512];

    snprintf(g_port, sizeof g_port, "%d", ts_broker_port(b));
    ct_path(out, sizeof out, "out");
    ct_path(out2, sizeof out2, "out2");
    ct_path(err, sizeof err, "err");
    ct_path(in, sizeof in, "lines");
    ct_path(state, sizeof state, "bob.state");
    {
        FILE *f = fopen(in, "w");
        CHECK(f != NULL, "open %s", in);
        for (int i = 1; i <= BACKLOG; i++)
            fprintf(f, "m%d\n", i);
        fclose(f);
    }
    CHECK(mqchat(out, err, in, "-u", "bob", "join", GROUP, NULL) == 0, "join");
    CHECK(mqchat(out, err, in, "-u", "alice", "-W", "60", "send", "-l", GROUP, NULL) == 0,
          "send -l");
    char *argv[] = {(char *)MQCHAT_BIN, "-p",  g_port, "-u", "bob", "--state", state, "-i", "bob1",
                    "listen",           GROUP, NULL};
    pid_t pid = ts_spawn(argv, NULL, NULL, out, err);
    int64_t deadline = ts_now_ms() + WAIT_MS;
    while (lines_of(out) < 100) {
        CHECK(ts_now_ms() < deadline, "listen printed %ld lines", lines_of(out));
        ts_sleep_ms(10);
    }
    ts_signal(pid, SIGTERM);
    CHECK(ts_wait(pid, WAIT_MS) == 0, "listen did not end with status 0 after SIGTERM");
    long first = lines_of(out);
    ts_log("SIGTERM after the first 100 lines: %ld of %d printed", first, BACKLOG);
    CHECK(first < BACKLOG, "mqchat printed the whole catch-up (%d) before it stopped", BACKLOG);
    /* Nothing lost, nothing twice: the next listen prints the rest. */
    char count[24];
    snprintf(count, sizeof count, "%ld", (long)BACKLOG - first);
    CHECK(mqchat(out2, err, in, "-u", "bob", "--state", state, "-i", "bob1", "-C", count, "-W",
                 "60", "listen", GROUP, NULL) == 0,
          "the second listen");
    char *a = ts_read_file(out, NULL), *z = ts_read_file(out2, NULL);
    char last[64];
    snprintf(last, sizeof last, "[room #%ld] alice: m%ld\n", first, first);
    CHECK(a != NULL && strstr(a, last) != NULL, "the first listen's last line is not #%ld", first);
    snprintf(last, sizeof last, "[room #%ld] alice: m%ld\n", first + 1, first + 1);
    CHECK(z != NULL && strncmp(z, last, strlen(last)) == 0,
          "the second listen does not start at #%ld: %.80s", first + 1, z ? z : "");
    CHECK(lines_of(out2) == BACKLOG - first, "the second listen printed %ld lines, not %ld",
          lines_of(out2), (long)BACKLOG - first);
    free(a);
    free(z);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * pages
 * ========================================================================= */

static void pages(void)
{
    /* One page in flight: the first progress line comes after page 1. */
    ts_broker *b = ts_broker_start((const char *const[]){"replay_window 1", NULL});
    char out[512], err[512], in[512], state[512];

    snprintf(g_port, sizeof g_port, "%d", ts_broker_port(b));
    ct_path(out, sizeof out, "out");
    ct_path(err, sizeof err, "err");
    ct_path(in, sizeof in, "lines");
    ct_path(state, sizeof state, "bob.state");
    {
        FILE *f = fopen(in, "w");
        CHECK(f != NULL, "open %s", in);
        for (int i = 1; i <= 450; i++)
            fprintf(f, "m%d\n", i);
        fclose(f);
    }
    CHECK(mqchat(out, err, in, "-u", "bob", "join", GROUP, NULL) == 0, "join");
    CHECK(mqchat(out, err, in, "-u", "alice", "send", "-l", GROUP, NULL) == 0, "send -l");
    CHECK(mqchat(out, err, in, "-u", "bob", "--state", state, "-C", "450", "listen", GROUP, NULL) ==
              0,
          "listen");
    char *said = ts_read_file(err, NULL);
    CHECK(said != NULL && strstr(said, "1 pages") == NULL && strstr(said, "1 messages") == NULL,
          "stderr: %s", said ? said : "");
    CHECK(strstr(said, "catching up: 1 page, 100 messages so far, 350 remaining") != NULL &&
              strstr(said, "caught up at #450 (450 messages, 5 pages)") != NULL,
          "no progress lines as expected: %s", said);
    free(said);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"history_json", history_json},
    {"sigterm", sigterm},
    {"pages", pages},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof cases[0]; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            char name[64];
            snprintf(name, sizeof name, "clients_exact_%s", cases[i].name);
            ct_init(name);
            cases[i].fn();
            return ct_pass();
        }
    }
    fprintf(stderr, "usage: clients_test_exact history_json|sigterm|pages\n");
    return 2;
}
