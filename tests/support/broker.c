/* broker.c: starts, restarts and stops real mosquitto brokers with the chat
 * plugin for every test program (see broker.h). */
#include "broker.h"
#include "broker_conf.h"

#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(CHAT_MOSQUITTO_BIN) || !defined(CHAT_MOSQUITTO_PASSWD) || !defined(CHAT_MOSQUITTO_CTRL)
#error "CHAT_MOSQUITTO_BIN, _PASSWD and _CTRL must name the broker's programs"
#endif

#define MAX_BROKERS 8          /* brokers alive at once in one test */
#define START_ATTEMPTS 5       /* tries to start a broker (new port each) */
#define READY_TIMEOUT_MS 10000 /* a broker must accept connections within this */
#define STOP_TIMEOUT_MS 10000  /* a broker must exit this long after SIGTERM */
#define POLL_MS 10             /* pause between two looks at a starting broker */
#define LOG_TAIL_BYTES 6000    /* how much of a log a failure prints */
#define NOTABLE_LINES 40       /* and how many of its notable lines */

/* The line mosquitto logs once its listeners are open. */
#define RUNNING_LINE " running"

static ts_broker *g_brokers[MAX_BROKERS];

static void stop_broker(ts_broker *b, bool strict);

/* ===========================================================================
 * Failure reports
 * ========================================================================= */

/* Prints the last NOTABLE_LINES lines of a broker log that are not routine
 * packet traffic: the plugin's own lines, warnings, errors, denials, drops.
 * (With log_type all, the tail alone is mostly PUBLISH/PUBACK chatter.) */
static void print_notable(const char *path)
{
    static const char *const marks[] = {"mosquitto-chat", "rror",      "arning", "enied",
                                        "ropp",           "xceeded",   "rc151",  "rc135",
                                        "rc128",          "isconnect", "lugin"};
    static char ring[NOTABLE_LINES][256];
    char line[1024];
    long count = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return;
    for (long i = 0; i < 50000000L && fgets(line, sizeof line, f) != NULL; i++) {
        bool notable = false;
        size_t len;
        for (size_t k = 0; k < sizeof marks / sizeof marks[0] && !notable; k++)
            notable = strstr(line, marks[k]) != NULL;
        if (!notable)
            continue;
        len = strlen(line);
        if (len >= sizeof ring[0])
            len = sizeof ring[0] - 1;
        memcpy(ring[count % NOTABLE_LINES], line, len);
        ring[count % NOTABLE_LINES][len] = '\0';
        count++;
    }
    fclose(f);
    fprintf(stderr, "----- %s: last %ld of %ld notable lines -----\n", path,
            count < NOTABLE_LINES ? count : (long)NOTABLE_LINES, count);
    for (long i = count < NOTABLE_LINES ? 0 : count - NOTABLE_LINES; i < count; i++) {
        const char *l = ring[i % NOTABLE_LINES];
        fputs(l, stderr);
        if (l[0] == '\0' || l[strlen(l) - 1] != '\n')
            fputc('\n', stderr);
    }
}

/* The failure hook (ts_on_fail): stops every broker, which flushes its log,
 * and shows what it said. */
static void report_brokers(void)
{
    for (int i = 0; i < MAX_BROKERS; i++) {
        ts_broker *b = g_brokers[i];
        if (b == NULL)
            continue;
        stop_broker(b, false);
        fprintf(stderr, "broker on 127.0.0.1:%d, config %s:\n", b->port, b->conf);
        ts_print_tail(b->out, LOG_TAIL_BYTES);
        print_notable(b->log);
        ts_print_tail(b->log, LOG_TAIL_BYTES);
        fprintf(stderr, "kept %s for inspection\n", b->dir);
    }
}

/* ===========================================================================
 * Starting and stopping
 * ========================================================================= */

enum { READY, EXITED, NOT_READY };

/* Waits until the broker accepts connections or exits, at most
 * READY_TIMEOUT_MS. Ready means: a new "running" line in its log (so that
 * whatever answers the probe is this broker) and a successful TCP connect.
 * runs_before is the count of such lines before the start. */
static int wait_ready(ts_broker *b, long runs_before, int *status)
{
    int64_t deadline = ts_now_ms() + READY_TIMEOUT_MS;

    for (int i = 0; i < READY_TIMEOUT_MS / POLL_MS + 10; i++) {
        if (waitpid(b->pid, status, WNOHANG) == b->pid) {
            b->pid = 0;
            return EXITED;
        }
        if (ts_count_lines(b->log, RUNNING_LINE) > runs_before && ts_port_open(b->port))
            return READY;
        if (ts_now_ms() >= deadline)
            break;
        ts_sleep_ms(POLL_MS);
    }
    return NOT_READY;
}

/* Starts the broker, on a new port per attempt if new_port, else on b->port.
 * Returns 0 once it runs. A broker that exits at start for another reason
 * than a taken port fails the test, unless may_exit: then its exit status
 * (decoded as ts_wait does) is returned. */
static int launch(ts_broker *b, bool new_port, bool may_exit)
{
    char *argv[] = {(char *)CHAT_MOSQUITTO_BIN, (char *)"-c", b->conf, NULL};
    char why[128];
    int status = 0;

    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
        long runs_before;
        if (new_port) {
            b->port = ts_free_port();
            ts_conf_write(b);
        }
        runs_before = ts_count_lines(b->log, RUNNING_LINE);
        b->pid = ts_spawn(argv, ts_conf_env(b), NULL, b->out, b->out);
        ts_disown(b->pid);
        switch (wait_ready(b, runs_before, &status)) {
        case READY:
            b->starts++;
            ts_log("broker pid %d ready on 127.0.0.1:%d (start %d, attempt %d), dir %s",
                   (int)b->pid, b->port, b->starts, attempt, b->dir);
            return 0;
        case EXITED:
            /* Only a port taken between ts_free_port() and the broker's
             * bind is worth another attempt; anything else (a bad option, a
             * plugin that fails to load) would fail again. */
            if (ts_count_lines(b->out, "in use") == 0 && ts_count_lines(b->log, "in use") == 0) {
                if (may_exit) {
                    ts_log("broker exited at start (%s)",
                           ts_describe_status(status, why, sizeof why));
                    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                }
                FAILF("broker exited at start (%s); its output follows",
                      ts_describe_status(status, why, sizeof why));
            }
            ts_log("broker exited at start (%s): port %d taken; attempt %d of %d",
                   ts_describe_status(status, why, sizeof why), b->port, attempt, START_ATTEMPTS);
            ts_sleep_ms(200);
            break;
        default:
            FAILF("broker pid %d does not accept connections on 127.0.0.1:%d after %d ms",
                  (int)b->pid, b->port, READY_TIMEOUT_MS);
        }
    }
    FAILF("broker did not start in %d attempts; its output follows", START_ATTEMPTS);
}

/* Stops a running broker: SIGTERM, at most STOP_TIMEOUT_MS, then SIGKILL. If
 * strict, a broker that had died, needed SIGKILL or exited with a non-zero
 * status fails the test. The broker is reaped here, never by ts_ended (its
 * status matters). */
static void stop_broker(ts_broker *b, bool strict)
{
    char why[128];
    int status = 0;
    pid_t pid = b->pid;
    bool exited = false;

    if (pid == 0)
        return;
    if (waitpid(pid, &status, WNOHANG) == pid) {
        b->pid = 0;
        if (strict)
            FAILF("broker pid %d had died before it was stopped: %s", (int)pid,
                  ts_describe_status(status, why, sizeof why));
        fprintf(stderr, "broker pid %d had died: %s\n", (int)pid,
                ts_describe_status(status, why, sizeof why));
        return;
    }
    kill(pid, SIGTERM);
    for (int i = 0; i < STOP_TIMEOUT_MS / 10 && !exited; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            exited = true;
        else
            ts_sleep_ms(10);
    }
    b->pid = 0;
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (strict)
            FAILF("broker pid %d did not exit within %d ms of SIGTERM; killed", (int)pid,
                  STOP_TIMEOUT_MS);
        return;
    }
    if (strict && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        FAILF("broker pid %d ended with %s after SIGTERM", (int)pid,
              ts_describe_status(status, why, sizeof why));
    if (!ts_failing())
        ts_log("broker pid %d stopped", (int)pid);
}

/* ===========================================================================
 * Public interface
 * ========================================================================= */

/* A password file in the broker's directory with each of users (its name
 * as password, made by the broker's own mosquitto_passwd), named by a
 * password_file line before b's other lines. */
static void add_users(ts_broker *b, const char *const *users)
{
    char path[PATH_LEN];
    size_t n = 0;
    snprintf(path, sizeof path, "%s/passwd", b->dir);
    for (size_t i = 0; users[i] != NULL; i++) {
        const char *argv[] = {
            ts_broker_program("mosquitto_passwd"), "-b", path, users[i], users[i], NULL};
        if (i == 0)
            ts_write_file(path, "", 0);
        ts_run_ok(argv);
    }
    while (b->lines[n] != NULL)
        n++;
    char **lines = calloc(n + 2, sizeof *lines);
    if (lines == NULL || (lines[0] = strdup("password_file @DIR@/passwd")) == NULL)
        FAILF("out of memory");
    memcpy(lines + 1, b->lines, n * sizeof *lines);
    free(b->lines);
    b->lines = lines;
}

ts_broker *ts_broker_create(const ts_broker_conf *conf)
{
    ts_broker_conf none = {0};
    ts_broker *b = calloc(1, sizeof *b);
    int slot = -1;

    if (conf == NULL)
        conf = &none;
    if (b == NULL)
        FAILF("out of memory");
    for (int i = 0; i < MAX_BROKERS && slot < 0; i++)
        if (g_brokers[i] == NULL)
            slot = i;
    if (slot < 0)
        FAILF("more than %d brokers at once", MAX_BROKERS);
    snprintf(b->dir, sizeof b->dir, "/tmp/mosquitto-chat-test-XXXXXX");
    ts_mkdtemp(b->dir);
    snprintf(b->db, sizeof b->db, "%s/db", b->dir);
    snprintf(b->conf, sizeof b->conf, "%s/mosquitto.conf", b->dir);
    snprintf(b->log, sizeof b->log, "%s/mosquitto.log", b->dir);
    snprintf(b->out, sizeof b->out, "%s/broker.out", b->dir);
    if (mkdir(b->db, 0700) != 0)
        FAILF("mkdir %s: %s", b->db, strerror(errno));
    b->opts = ts_lines_copy(conf->plugin_opts);
    b->lines = ts_lines_copy(conf->lines);
    if (conf->users != NULL)
        add_users(b, conf->users);
    b->after = ts_lines_copy(conf->after);
    b->top = ts_lines_copy(conf->top);
    b->without_chat = conf->without_chat;
    b->no_anonymous = conf->no_anonymous;
    snprintf(b->run_as, sizeof b->run_as, "%s", conf->run_as != NULL ? conf->run_as : "root");
    b->private_conf = conf->private_conf;
    g_brokers[slot] = b;
    ts_on_fail(report_brokers);
    ts_conf_hand_over(b);
    ts_conf_pg_database(b);
    return b;
}

void ts_broker_launch(ts_broker *b)
{
    if (b->pid != 0 || b->starts != 0)
        FAILF("ts_broker_launch: broker in %s was started before", b->dir);
    launch(b, true, false);
}

ts_broker *ts_broker_start_conf(const ts_broker_conf *conf)
{
    ts_broker *b = ts_broker_create(conf);

    ts_broker_launch(b);
    return b;
}

const char *const ts_test_users[] = {"admin", "boss",  "root",  "alice",   "bob",
                                     "bob5",  "carol", "dave",  "eve",     "eve5",
                                     "spy",   "frank", "grace", "mallory", NULL};

ts_broker *ts_broker_start_users(const char *const *plugin_opts)
{
    ts_broker_conf conf = {.plugin_opts = plugin_opts, .users = ts_test_users};

    return ts_broker_start_conf(&conf);
}

ts_broker *ts_broker_start(const char *const *plugin_opts)
{
    ts_broker_conf conf = {.plugin_opts = plugin_opts};

    return ts_broker_start_conf(&conf);
}

void ts_broker_stop(ts_broker *b)
{
    stop_broker(b, true);
}

void ts_broker_kill(ts_broker *b)
{
    char why[128];
    int status = 0;
    pid_t pid = b->pid;

    if (pid == 0)
        return;
    if (waitpid(pid, &status, WNOHANG) == pid) {
        b->pid = 0;
        FAILF("broker pid %d had died before it was killed: %s", (int)pid,
              ts_describe_status(status, why, sizeof why));
    }
    if (kill(pid, SIGKILL) != 0)
        FAILF("kill -9 %d: %s", (int)pid, strerror(errno));
    /* SIGKILL cannot be caught: the wait ends at once. */
    if (waitpid(pid, &status, 0) != pid)
        FAILF("waitpid %d: %s", (int)pid, strerror(errno));
    b->pid = 0;
    ts_log("broker pid %d killed with SIGKILL", (int)pid);
}

void ts_broker_restart(ts_broker *b)
{
    if (b->pid != 0)
        FAILF("ts_broker_restart: broker pid %d still runs", (int)b->pid);
    launch(b, false, false);
}

int ts_broker_try_launch(ts_broker *b)
{
    if (b->pid != 0 || b->starts != 0)
        FAILF("ts_broker_try_launch: broker in %s was started before", b->dir);
    return launch(b, true, true);
}

int ts_broker_try_restart(ts_broker *b)
{
    if (b->pid != 0)
        FAILF("ts_broker_try_restart: broker pid %d still runs", (int)b->pid);
    return launch(b, false, true);
}

void ts_broker_suppress_leaks(ts_broker *b, const char *const *functions)
{
    char path[PATH_LEN + 16], text[2048];
    size_t off = 0;

    if (getenv("CHAT_BROKER_PRELOAD") == NULL)
        return;
    for (size_t i = 0; functions[i] != NULL; i++) {
        int n = snprintf(text + off, sizeof text - off, "leak:%s\n", functions[i]);
        if (n < 0 || (size_t)n >= sizeof text - off)
            FAILF("too many leak suppressions");
        off += (size_t)n;
    }
    snprintf(path, sizeof path, "%s/lsan.supp", b->dir);
    ts_write_file(path, text, off);
    b->suppress = true;
}

void ts_broker_destroy(ts_broker *b)
{
    if (b == NULL)
        return;
    stop_broker(b, true);
    for (int i = 0; i < MAX_BROKERS; i++)
        if (g_brokers[i] == b)
            g_brokers[i] = NULL;
    if (getenv("TS_KEEP") != NULL)
        ts_log("kept %s (TS_KEEP is set)", b->dir);
    else if (ts_remove_tree(b->dir, 4) != 0)
        fprintf(stderr, "warning: cannot remove %s: %s\n", b->dir, strerror(errno));
    ts_lines_free(b->opts);
    ts_lines_free(b->lines);
    ts_lines_free(b->after);
    ts_lines_free(b->top);
    free(b);
}

void ts_broker_set_lines(ts_broker *b, const char *const *lines)
{
    ts_lines_free(b->lines);
    b->lines = ts_lines_copy(lines);
    ts_conf_write(b);
}

void ts_broker_set_opts(ts_broker *b, const char *const *plugin_opts)
{
    ts_lines_free(b->opts);
    b->opts = ts_lines_copy(plugin_opts);
    ts_conf_write(b);
}

void ts_broker_shift_clock(ts_broker *b, long seconds)
{
    b->clock_shift = seconds;
}

void ts_broker_reload(ts_broker *b)
{
    long before = ts_broker_log_count(b, "Reloading config.");
    int64_t deadline = ts_now_ms() + 10000;

    if (b->pid == 0 || kill(b->pid, SIGHUP) != 0)
        FAILF("cannot send SIGHUP to the broker: %s", b->pid ? strerror(errno) : "not running");
    while (ts_broker_log_count(b, "Reloading config.") == before) {
        if (ts_now_ms() > deadline)
            FAILF("the broker did not reload its configuration within 10 s");
        ts_sleep_ms(20);
    }
    /* The log line comes before the reload itself: give it the same pass. */
    ts_sleep_ms(200);
}

int ts_broker_pid(const ts_broker *b)
{
    return (int)b->pid;
}

int ts_broker_port(const ts_broker *b)
{
    return b->port;
}

const char *ts_broker_dir(const ts_broker *b)
{
    return b->dir;
}

const char *ts_broker_db_path(const ts_broker *b)
{
    return b->db;
}

const char *ts_broker_pg_conninfo(const ts_broker *b)
{
    return b->pg_conninfo;
}

long ts_broker_log_count(const ts_broker *b, const char *needle)
{
    return ts_count_lines(b->log, needle);
}

const char *ts_broker_program(const char *name)
{
    if (strcmp(name, "mosquitto_passwd") == 0)
        return CHAT_MOSQUITTO_PASSWD;
    if (strcmp(name, "mosquitto_ctrl") == 0)
        return CHAT_MOSQUITTO_CTRL;
    FAILF("no broker program %s", name);
    return NULL;
}

int ts_broker_version(void)
{
    char *argv[] = {(char *)CHAT_MOSQUITTO_BIN, (char *)"-h", NULL};
    char out[] = "/tmp/mosquitto-chat-version-XXXXXX", file[sizeof out + 16];
    int major = 0, minor = 0, patch = 0;
    char *text, *v;

    ts_mkdtemp(out);
    snprintf(file, sizeof file, "%s/h.txt", out);
    ts_run(argv, NULL, file, NULL, 10000); /* -h exits with a usage status */
    text = ts_read_file(file, NULL);
    ts_remove_tree(out, 1);
    v = text != NULL ? strstr(text, "version ") : NULL;
    if (v == NULL || sscanf(v, "version %d.%d.%d", &major, &minor, &patch) != 3)
        FAILF("no version in the output of %s -h: %s", CHAT_MOSQUITTO_BIN, text ? text : "");
    free(text);
    return major * 10000 + minor * 100 + patch;
}
