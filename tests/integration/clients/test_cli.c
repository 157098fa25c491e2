/* test_cli.c: mqchat's commands, output and exit status: 0 success, 1 broker
 * unreachable, 2 usage error (bad option, bad group name), 3 refused by the
 * server (request, message, subscription), with MQTT 3.1.1 and 5. Waiting
 * for the broker, exit 4 and refused connections: test_connect.c. */
#include "ct.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ARGS 32

static char g_in[512], g_state[512];
static char *g_stdout, *g_stderr; /* of the last run */

/* Runs mqchat with the NULL-terminated arguments (stdin from in, or
 * /dev/null) and checks its exit status; keeps its output in g_stdout and
 * g_stderr. */
static void run_in(int expect, const char *in, ...)
{
    char *argv[MAX_ARGS + 2] = {(char *)MQCHAT_BIN};
    char cmd[1024] = "mqchat";
    int argc = 1, status;
    va_list ap;

    va_start(ap, in);
    for (const char *a, *prev = ""; argc + 2 < MAX_ARGS && (a = va_arg(ap, const char *)) != NULL;
         prev = a) {
        argv[argc++] = (char *)a;
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " '%s'", a);
        /* A broker that verifies usernames knows each test user with its
         * name as password (ts_broker_conf.users); one that does not
         * ignores it. */
        if (strcmp(prev, "-u") == 0) {
            argv[argc++] = (char *)"-P";
            argv[argc++] = (char *)a;
        }
    }
    va_end(ap);
    argv[argc] = NULL;
    status = ct_run_output(argv, in, 30000, &g_stdout, &g_stderr);
    CHECK(status == expect, "%s: exit status %d, expected %d; stdout:\n%s\nstderr:\n%s", cmd,
          status, expect, g_stdout, g_stderr);
}

#define run(expect, ...) run_in(expect, NULL, __VA_ARGS__, NULL)

static void expect_out(const char *text)
{
    CHECK(strstr(g_stdout, text) != NULL, "stdout lacks \"%s\":\n%s", text, g_stdout);
}

static void expect_err(const char *text)
{
    CHECK(strstr(g_stderr, text) != NULL, "stderr lacks \"%s\":\n%s", text, g_stderr);
}

static void usage_errors(void)
{
    char long_name[200];

    run(0, "--help");
    expect_out("Usage: mqchat");
    run(2, "-p", "1883");
    expect_err("no command given");
    run(2, "frobnicate");
    expect_err("unknown command");
    run(2, "-Z", "unread");
    expect_err("unknown option '-Z'");
    run(2, "-p", "70000", "unread");
    run(2, "-V", "7", "unread");
    run(2, "send", "room");
    run(2, "history", "room", "extra");
    run(2, "-n", "0", "history", "room");
    run(2, "-p");
    expect_err("-p needs a value");
    /* Bad group names never reach the broker. */
    run(2, "send", "a/b", "hi");
    expect_err("group name contains one of / + # $");
    run(2, "listen", "ok", "x+y");
    run(2, "history", "");
    expect_err("group name is empty");
    run(2, "join", "a#");
    run(2, "leave", "$sys");
    run(2, "send", "tab\there", "hi");
    expect_err("control character");
    memset(long_name, 'g', 129);
    long_name[129] = '\0';
    run(2, "join", long_name);
    expect_err("longer than 128 bytes");
    ts_log("usage errors and bad group names: exit 2");
}

static void unreachable(void)
{
    char port[16];
    int64_t t0 = ts_now_ms();

    /* Each command waits -W seconds for the broker, retrying; listen until
     * it is stopped (here by -W), and then says it never got through. */
    snprintf(port, sizeof port, "%d", ts_free_port());
    run(1, "-p", port, "-W", "1", "send", "room", "hi");
    expect_err("cannot connect within 1 s");
    run(1, "-p", port, "-V", "5", "-W", "1", "--state", g_state, "listen", "room");
    expect_err("stopped before the broker could be reached");
    run(1, "-p", port, "-W", "1", "unread");
    run(1, "-p", port, "-W", "1", "history", "room");
    CHECK(ts_now_ms() - t0 < 15000, "unreachable broker took %lld ms",
          (long long)(ts_now_ms() - t0));
    ts_log("unreachable broker: exit 1 after -W");
}

static void open_groups(void)
{
    ts_broker *b = ts_broker_start(NULL);
    char port[16], state[512];

    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    ct_path(state, sizeof state, "bob.state");
    run(0, "-p", port, "-i", "alice", "send", "room", "hello", "world");
    CHECK(g_stdout[0] == '\0', "send printed: %s", g_stdout);
    run(0, "-p", port, "-u", "bob", "join", "room");
    expect_out("joined room (head #1)");
    run(0, "-p", port, "-V", "5", "-i", "alice", "-q", "2", "send", "room", "second");
    run(0, "-p", port, "-u", "bob", "-V", "mqttv5", "history", "room", "-n", "5");
    CHECK(strcmp(g_stdout, "[room #1] alice: hello world\n[room #2] alice: second\n") == 0,
          "history:\n%s", g_stdout);
    run(0, "-p", port, "-u", "bob", "history", "-n", "1", "--json", "room");
    CHECK(strncmp(g_stdout, "{\"id\":2,\"group\":\"room\",\"from\":\"alice\"", 36) == 0 &&
              strchr(g_stdout, '\n') == g_stdout + strlen(g_stdout) - 1,
          "history --json:\n%s", g_stdout);
    run(0, "-p", port, "-u", "bob", "unread");
    expect_out("room: 1 unread (head #2)");

    /* listen: bob's device joined at #1, so #2 is its catch-up; -C stops. */
    run(0, "-p", port, "-u", "bob", "--state", state, "-W", "20", "-C", "1", "listen", "room");
    CHECK(strcmp(g_stdout, "[room #2] alice: second\n") == 0, "listen:\n%s", g_stdout);
    /* The same state file: nothing again; a new message ends it. */
    {
        char *argv[] = {
            (char *)MQCHAT_BIN, "-p",   port, "-u", "bob", "--state", state, "-W", "20", "-C", "1",
            "listen",           "room", NULL};
        char out[512], err[512];
        /* the broker logs "<client id> <qos> <filter>" once a subscription
         * is in place: then "third" comes to the listener live */
        long subscribed = ts_broker_log_count(b, " 1 chat/room");
        pid_t pid;
        int status;
        pid = ts_spawn(argv, NULL, NULL, ct_path(out, sizeof out, "listen.out"),
                       ct_path(err, sizeof err, "listen.err"));
        ts_broker_wait_log(b, " 1 chat/room", subscribed + 1, 20000);
        run(0, "-p", port, "-i", "alice", "send", "room", "third");
        status = ts_wait(pid, 20000);
        free(g_stdout);
        g_stdout = ts_read_file(out, NULL);
        CHECK(status == 0 && g_stdout != NULL && strcmp(g_stdout, "[room #3] alice: third\n") == 0,
              "second listen (status %d):\n%s", status, g_stdout ? g_stdout : "");
    }
    /* send -l: one message per non-empty line. */
    ts_write_text(g_in, "line one\n\nline two\nline three");
    run_in(0, g_in, "-p", port, "-i", "alice", "send", "-l", "room", NULL);
    run(0, "-p", port, "-u", "bob", "history", "room", "-n", "3");
    CHECK(strcmp(g_stdout, "[room #4] alice: line one\n[room #5] alice: line two\n"
                           "[room #6] alice: line three\n") == 0,
          "history after send -l:\n%s", g_stdout);
    /* Control characters from others never reach the terminal raw. */
    ts_write_text(g_in, "bell\a and escape\x1b[31m\n");
    run_in(0, g_in, "-p", port, "-i", "alice", "send", "-l", "room", NULL);
    run(0, "-p", port, "-u", "bob", "history", "room", "-n", "1");
    expect_out("[room #7] alice: bell? and escape?[31m\n");
    run(0, "-p", port, "-u", "bob", "leave", "room");
    expect_out("left room");
    ts_broker_destroy(b);
    ts_log("open groups: send, join, history, unread, listen, send -l, leave");
}

/* recall and edit (v1.2): the commands, and how listen and history show
 * them. */
static void recall_edit(void)
{
    ts_broker *b = ts_broker_start(NULL);
    char port[16], state[512], out[512], err[512];

    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    ct_path(state, sizeof state, "bob-recall.state");
    run(0, "-p", port, "-u", "bob", "join", "room");
    run(0, "-p", port, "-u", "alice", "send", "room", "hello");
    run(0, "-p", port, "-u", "alice", "send", "room", "tpyo");
    run(0, "-p", port, "-u", "alice", "send", "room", "third");
    run(0, "-p", port, "-u", "bob", "--state", state, "-W", "20", "-C", "3", "listen", "room");
    CHECK(strcmp(g_stdout, "[room #1] alice: hello\n[room #2] alice: tpyo\n"
                           "[room #3] alice: third\n") == 0,
          "listen:\n%s", g_stdout);
    /* bob listens again (live, or catching up: the same lines) while alice
     * recalls #1 and edits #2; bob may not. */
    char *argv[] = {
        (char *)MQCHAT_BIN, "-p",   port, "-u", "bob", "--state", state, "-W", "20", "-C", "2",
        "listen",           "room", NULL};
    pid_t pid = ts_spawn(argv, NULL, NULL, ct_path(out, sizeof out, "recall.out"),
                         ct_path(err, sizeof err, "recall.err"));
    run(0, "-p", port, "-u", "alice", "recall", "room", "1");
    expect_out("recalled room #1 (#4)");
    run(0, "-p", port, "-u", "alice", "edit", "room", "2", "typo", "fixed");
    expect_out("edited room #2 (#5)");
    run(3, "-p", port, "-u", "bob", "recall", "room", "3");
    expect_err("only its sender may recall this message");
    run(3, "-p", port, "-u", "alice", "edit", "room", "1", "back");
    expect_err("already recalled");
    run(2, "-p", port, "-u", "alice", "recall", "room", "x");
    int status = ts_wait(pid, 20000);
    free(g_stdout);
    g_stdout = ts_read_file(out, NULL);
    CHECK(status == 0 && g_stdout != NULL &&
              strcmp(g_stdout,
                     "[room #4] alice recalled #1\n[room #2] alice: typo fixed (edited)\n") == 0,
          "listen during the changes (status %d):\n%s", status, g_stdout ? g_stdout : "");
    run(0, "-p", port, "-u", "bob", "history", "room", "-n", "5");
    CHECK(strcmp(g_stdout, "[room #1] alice: (recalled)\n[room #2] alice: typo fixed (edited)\n"
                           "[room #3] alice: third\n[room #4] alice recalled #1\n"
                           "[room #5] alice edited #2: typo fixed\n") == 0,
          "history:\n%s", g_stdout);
    ts_broker_destroy(b);
    ts_log("recall and edit: the commands, listen and history");
}

static void refusals(void)
{
    const char *opts[] = {"open_groups false", "admins admin", NULL};
    ts_broker *b = ts_broker_start_users(opts); /* closed groups: verified usernames */
    char port[16];

    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    run(3, "-p", port, "-u", "bob", "join", "staff");
    expect_err("only an admin may change membership of closed groups");
    run(0, "-p", port, "-u", "admin", "join", "staff");
    run(3, "-p", port, "-u", "bob", "send", "staff", "let me in");
    expect_err("not a member of the group");
    run(3, "-p", port, "-u", "bob", "-V", "5", "send", "staff", "let me in");
    expect_err("not a member of the group");
    run(3, "-p", port, "-u", "bob", "-W", "10", "listen", "staff");
    expect_err("cannot listen: not a member of the group");
    run(3, "-p", port, "-u", "bob", "-V", "5", "-W", "10", "listen", "staff");
    expect_err("cannot listen: not a member of the group");
    run(3, "-p", port, "-u", "bob", "-V", "5", "join", "staff");
    expect_err("only an admin may change membership of closed groups");
    run(3, "-p", port, "-u", "bob", "-V", "5", "history", "staff");
    expect_err("not a member of the group");
    run(3, "-p", port, "-i", "anonymous", "unread");
    expect_err("closed groups admit only clients with a username the broker verifies");
    run(0, "-p", port, "-u", "admin", "send", "staff", "admins only");
    run(0, "-p", port, "-u", "admin", "history", "staff");
    expect_out("[staff #1] admin: admins only");
    ts_broker_destroy(b);
    ts_log("refusals: exit 3 with the plugin's reason");
}

int main(void)
{
    ct_init("clients_cli");
    ct_path(g_in, sizeof g_in, "stdin.txt");
    ct_path(g_state, sizeof g_state, "unreachable.state");
    usage_errors();
    unreachable();
    open_groups();
    recall_edit();
    refusals();
    free(g_stdout);
    free(g_stderr);
    return ct_pass();
}
