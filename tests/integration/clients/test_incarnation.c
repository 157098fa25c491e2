/* test_incarnation.c: a store that lost its last writes (a power loss with
 * fsync none) gives their ids to new messages. `mqchat listen`, whose state
 * file says it showed those ids, must show the new messages, not drop them
 * as already shown: the store's new incarnation tells it to start over from
 * its cursor.
 *
 * The power loss is made by copying the store while the broker runs (what
 * the disk held at that instant), killing the broker later, putting the copy
 * back and starting the broker with another boot id. */
#include "ct.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP "inc"

static char g_port[16], g_state[512], g_out[512], g_err[512];

static pid_t start_listener(void)
{
    char *argv[] = {(char *)MQCHAT_BIN, "-p",    g_port,   "-i",  "reader",
                    "--state",          g_state, "listen", GROUP, NULL};
    return ts_spawn(argv, NULL, NULL, g_out, g_err);
}

static void send_line(const char *text)
{
    char *argv[] = {(char *)MQCHAT_BIN, "-p", g_port, "-i", "sender", "send", GROUP,
                    (char *)text,       NULL};
    CHECK(ts_run(argv, NULL, NULL, NULL, 20000) == 0, "mqchat send %s failed", text);
}

/* Waits until the listener's output has a line containing text. */
static void wait_for(const char *text)
{
    int64_t deadline = ts_now_ms() + 20000;
    for (;;) {
        char *out = ts_read_file(g_out, NULL);
        bool found = out != NULL && strstr(out, text) != NULL;
        free(out);
        if (found)
            return;
        if (ts_now_ms() > deadline)
            FAIL("the listener never showed \"%s\"", text);
        ts_sleep_ms(50);
    }
}

/* Waits until the plugin has stored the reader's cursor at id: an admin's
 * `members` lists the device with that ack. */
static void wait_reader_acked(int id)
{
    char want[64], out[512];
    /* admin's password is its name (ts_test_users): admin commands need a
     * username the broker verifies */
    char *argv[] = {
        (char *)MQCHAT_BIN, "-p",    g_port,    "-u",  "admin", "-P", "admin", "-i", "admin",
        "--json",           "admin", "members", GROUP, NULL};
    int64_t deadline = ts_now_ms() + 20000;

    snprintf(want, sizeof want, "\"device\":\"reader\",\"acked\":%d,", id);
    ct_path(out, sizeof out, "members.out");
    for (;;) {
        char *text;
        bool found;
        ts_write_text(out, "");
        CHECK(ts_run(argv, NULL, out, NULL, 20000) == 0, "mqchat admin members failed");
        text = ts_read_file(out, NULL);
        found = text != NULL && strstr(text, want) != NULL;
        if (!found && ts_now_ms() > deadline)
            FAIL("the reader's cursor never reached %d: %s", id, text ? text : "");
        free(text);
        if (found)
            return;
        ts_sleep_ms(50);
    }
}

static void remove_dir(const char *dir)
{
    char *argv[] = {"/bin/rm", "-rf", (char *)dir, NULL};
    CHECK(ts_run(argv, NULL, NULL, NULL, 10000) == 0, "rm -rf %s", dir);
}

/* Copies a store, open or not. LevelDB's thread may remove a file it no
 * longer needs while cp reads the directory: then copy again. */
static void copy_dir(const char *from, const char *to)
{
    char *argv[] = {"/bin/cp", "-a", (char *)from, (char *)to, NULL};
    for (int attempt = 0; attempt < 5; attempt++) {
        if (ts_run(argv, NULL, NULL, NULL, 10000) == 0)
            return;
        remove_dir(to);
    }
    FAIL("cp -a %s %s failed 5 times", from, to);
}

int main(void)
{
    ts_broker *b;
    pid_t listener;
    char snapshot[512];

    ct_init("clients_incarnation");
    setenv("MOSQUITTO_CHAT_TEST_BOOT_ID", "boot-one", 1);
    /* A password_file, for the admin; the reader and sender connect without
     * a username, so the plugin names them ~<client id>. */
    b = ts_broker_start_users((const char *const[]){"admins admin", NULL});
    snprintf(g_port, sizeof g_port, "%d", ts_broker_port(b));
    ct_path(g_state, sizeof g_state, "reader.state");
    ct_path(g_out, sizeof g_out, "listen.out");
    ct_path(g_err, sizeof g_err, "listen.err");
    ct_path(snapshot, sizeof snapshot, "snapshot");

    listener = start_listener();
    /* Its subscription in place, the reader is a member from id 1 on. */
    ts_broker_wait_log(b, "reader 1 chat/" GROUP, 1, 20000);
    send_line("one");
    send_line("two");
    wait_for("sender: two");
    wait_reader_acked(2);                     /* the listener's acks reached the store */
    copy_dir(ts_broker_db_path(b), snapshot); /* what the disk holds now */
    send_line("three (lost)");
    send_line("four (lost)");
    wait_for("sender: four (lost)");
    ts_signal(listener, SIGTERM);
    CHECK(ts_wait(listener, 10000) == 0, "listener did not exit cleanly");

    /* The power goes: the store is back to the copy, the machine rebooted. */
    ts_broker_kill(b);
    remove_dir(ts_broker_db_path(b));
    copy_dir(snapshot, ts_broker_db_path(b));
    setenv("MOSQUITTO_CHAT_TEST_BOOT_ID", "boot-two", 1);
    ts_broker_restart(b);
    send_line("new three");
    send_line("new four");
    send_line("five");

    listener = start_listener();
    wait_for("sender: five");
    wait_for("sender: new four");
    {
        char *out = ts_read_file(g_out, NULL), *err = ts_read_file(g_err, NULL);
        CHECK(strstr(out, "[" GROUP " #3] ~sender: new three") != NULL,
              "id 3 of the new incarnation was not shown:\n%s", out);
        CHECK(strstr(out, "[" GROUP " #4] ~sender: new four") != NULL,
              "id 4 of the new incarnation was not shown:\n%s", out);
        CHECK(err != NULL && strstr(err, "new incarnation") != NULL,
              "no warning about the new incarnation on stderr:\n%s", err ? err : "");
        free(out);
        free(err);
    }
    ts_signal(listener, SIGTERM);
    CHECK(ts_wait(listener, 10000) == 0, "listener did not exit cleanly");
    ts_broker_destroy(b);
    unsetenv("MOSQUITTO_CHAT_TEST_BOOT_ID");
    return ct_pass();
}
