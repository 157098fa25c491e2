/* integ_load: the load test of issue 11 (bench/chat_load.c) at a reduced
 * size, against the real broker: 200 devices in 10 of 20 groups, 50 of
 * which disconnect while every group moves on by 100 messages, then
 * reconnect at once and catch up while steady traffic goes on; twice. It
 * asserts correctness only, never a timing: chat_load --check fails unless no
 * message was lost or duplicated to the application, every id carried its
 * message, no connection broke, and the broker's resident memory after a
 * second storm is back where it was after the first (not under
 * AddressSanitizer, whose quarantine keeps freed memory); the broker must
 * not have dropped a message (its log says "being dropped" when a queue
 * limit does), must still run, and must stop cleanly (LeakSanitizer).
 *
 * The broker is configured as a deployment of this size would be (see
 * docs/scaling.md): max_connections above the device count, Mosquitto's
 * default max_queued_messages and max_inflight_messages, the plugin's
 * default replay_window and page_size. */
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_MS 240000 /* chat_load's own --timeout-ms is below it */

int main(void)
{
    ts_broker_conf conf = {
        .lines = (const char *const[]){"max_connections 1000", "max_queued_messages 1000",
                                       "max_inflight_messages 20", NULL},
        .plugin_opts = (const char *const[]){"replay_window 4", "page_size 100", NULL}};
    ts_broker *b;
    char port[16], pid[16], out[600], err[600];
    char *argv[] = {(char *)CHAT_LOAD_BIN,
                    "--port",
                    port,
                    "--pid",
                    pid,
                    "--devices",
                    "200",
                    "--groups",
                    "20",
                    "--per-device",
                    "10",
                    "--storm",
                    "50",
                    "--backlog",
                    "100",
                    "--rate",
                    "100",
                    "--steady-ms",
                    "1000",
                    "--settle-ms",
                    "1000",
                    "--senders",
                    "5",
                    "--probes",
                    "20",
                    "--timeout-ms",
                    "200000",
                    "--check",
                    NULL};
    int status = 0;
    bool exited = false, asan;
    pid_t child;
    char *text;

    ts_init("integ_load");
    b = ts_broker_start_conf(&conf);
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    /* Under AddressSanitizer freed memory waits in a quarantine, so the
     * broker's resident memory only grows: it is not checked then (--pid 0);
     * LeakSanitizer checks for leaks when the broker stops. */
    asan = getenv("CHAT_BROKER_PRELOAD") != NULL && getenv("CHAT_BROKER_PRELOAD")[0] != '\0';
    snprintf(pid, sizeof pid, "%d", asan ? 0 : ts_broker_pid(b));
    if (asan)
        ts_log("the broker runs under AddressSanitizer: its memory is not checked");
    snprintf(out, sizeof out, "%s/chat_load.out", ts_broker_dir(b));
    snprintf(err, sizeof err, "%s/chat_load.err", ts_broker_dir(b));
    /* chat_load's output is printed whatever happens: it is polled here
     * rather than waited for with ts_wait, which fails at once. */
    child = ts_spawn(argv, NULL, NULL, out, err);
    for (int i = 0; i < RUN_MS / 100 && !exited; i++) {
        exited = ts_ended(child, &status);
        if (!exited)
            ts_sleep_ms(100);
    }
    if (!exited) {
        ts_signal(child, SIGKILL);
        status = ts_wait(child, 10000);
    }
    text = ts_read_file(err, NULL);
    printf("%s", text);
    free(text);
    text = ts_read_file(out, NULL);
    printf("%s", text);
    ASSERTF(exited, "chat_load did not finish within %d ms", RUN_MS);
    ASSERTF(status == 0, "chat_load failed (%s %d)", status < 128 ? "exit status" : "signal",
            status < 128 ? status : status - 128);
    ASSERTF(strstr(text, "\nlost=0\n") && strstr(text, "\nduplicated=0\n"),
            "chat_load reported a loss or a duplicate");
    free(text);
    ASSERTF(ts_broker_log_count(b, "being dropped") == 0,
            "the broker dropped messages (a queue limit)");
    ASSERTF(ts_broker_pid(b) != 0 && kill(ts_broker_pid(b), 0) == 0, "the broker is gone");
    ts_broker_stop(b);
    ts_broker_destroy(b);
    return ts_pass();
}
