/* broker.c: starts, restarts and stops real mosquitto brokers with the chat
 * plugin for every test program (see broker.h). */
#include "broker.h"

#include "pg.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CHAT_MOSQUITTO_BIN
#error "CHAT_MOSQUITTO_BIN must name the mosquitto binary"
#endif
#ifndef CHAT_PLUGIN_PATH
#error "CHAT_PLUGIN_PATH must name mosquitto_chat.so"
#endif

extern char **environ;

#define MAX_BROKERS 8          /* brokers alive at once in one test */
#define START_ATTEMPTS 5       /* tries to start a broker (new port each) */
#define READY_TIMEOUT_MS 10000 /* a broker must accept connections within this */
#define STOP_TIMEOUT_MS 10000  /* a broker must exit this long after SIGTERM */
#define POLL_MS 10             /* pause between two looks at a starting broker */
#define LOG_TAIL_BYTES 6000    /* how much of a log a failure prints */
#define NOTABLE_LINES 40       /* and how many of its notable lines */
#define MAX_ENV 4096           /* environment entries passed on to the broker */
#define PATH_LEN 512

/* The line mosquitto logs once its listeners are open. */
#define RUNNING_LINE " running"

struct ts_broker {
    char dir[64];          /* the temporary directory (a fixed short template) */
    char db[PATH_LEN];     /* <dir>/db: the plugin's LevelDB store */
    char conf[PATH_LEN];   /* <dir>/mosquitto.conf */
    char log[PATH_LEN];    /* <dir>/mosquitto.log: log_dest file */
    char out[PATH_LEN];    /* <dir>/broker.out: the broker's stdout and stderr */
    char **opts;           /* plugin_opt_* lines without the prefix, NULL-terminated */
    char **lines;          /* global lines before the plugin line, NULL-terminated */
    char **after;          /* lines after the chat plugin's options, NULL-terminated */
    char **top;            /* lines before the listener, NULL-terminated */
    bool without_chat;     /* the chat plugin is left out of the configuration */
    bool no_anonymous;     /* allow_anonymous false */
    char run_as[64];       /* the `user` line */
    bool private_conf;     /* mosquitto.conf mode 0600 */
    long clock_shift;      /* seconds the plugin's clock runs ahead (0: none) */
    char pg_conninfo[160]; /* CHAT_TEST_PG_PORT: the broker's own database, "" for LevelDB */
    bool suppress;         /* <dir>/lsan.supp names leaks LeakSanitizer ignores */
    int port;              /* 127.0.0.1 port of the listener */
    pid_t pid;             /* running broker, 0 when stopped */
    int starts;            /* successful starts, for messages */
};

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
 * Configuration
 * ========================================================================= */

/* A heap copy of a NULL-terminated array of strings (an empty one for NULL). */
static char **copy_lines(const char *const *lines)
{
    size_t n = 0;
    char **out;

    while (lines != NULL && lines[n] != NULL)
        n++;
    if ((out = calloc(n + 1, sizeof *out)) == NULL)
        FAILF("out of memory");
    for (size_t i = 0; i < n; i++)
        if ((out[i] = strdup(lines[i])) == NULL)
            FAILF("out of memory");
    return out;
}

static void free_lines(char **lines)
{
    for (size_t i = 0; lines != NULL && lines[i] != NULL; i++)
        free(lines[i]);
    free(lines);
}

/* Writes line to f with every "@DIR@" replaced by the broker's directory. */
static void put_line(FILE *f, const ts_broker *b, const char *line)
{
    static const char mark[] = "@DIR@";
    const char *p = line;

    for (int i = 0; i < 64; i++) {
        const char *at = strstr(p, mark);
        if (at == NULL)
            break;
        fwrite(p, 1, (size_t)(at - p), f);
        fputs(b->dir, f);
        p = at + sizeof mark - 1;
    }
    fprintf(f, "%s\n", p);
}

static void put_lines(FILE *f, const ts_broker *b, char **lines)
{
    for (size_t i = 0; lines[i] != NULL; i++)
        put_line(f, b, lines[i]);
}

static void write_config(const ts_broker *b)
{
    FILE *f = fopen(b->conf, "w");

    if (f == NULL)
        FAILF("cannot write %s: %s", b->conf, strerror(errno));
    fputs("# Written by the mosquitto-chat test support (tests/support/broker.c).\n", f);
    put_lines(f, b, b->top);
    fprintf(f,
            "listener %d 127.0.0.1\n"
            "allow_anonymous %s\n"
            "# CI runs as root: without this the broker becomes user mosquitto,\n"
            "# who cannot write the temporary store.\n"
            "user %s\n"
            "set_tcp_nodelay true\n"
            "persistence false\n"
            "log_dest file %s\n"
            "log_type all\n"
            "log_timestamp_format %%H:%%M:%%S\n",
            b->port, b->no_anonymous ? "false" : "true", b->run_as, b->log);
    put_lines(f, b, b->lines);
    if (!b->without_chat) {
        bool store_named = false;
        fprintf(f, "plugin %s\nplugin_opt_db_path %s\n", CHAT_PLUGIN_PATH, b->db);
        for (size_t i = 0; b->opts[i] != NULL; i++) {
            fprintf(f, "plugin_opt_%s\n", b->opts[i]);
            store_named = store_named || strncmp(b->opts[i], "store ", 6) == 0;
        }
        if (b->pg_conninfo[0] != '\0' && !store_named)
            fprintf(f, "plugin_opt_store postgresql\nplugin_opt_pg_conninfo %s\n", b->pg_conninfo);
    } else {
        fputs("# The same broker without mosquitto-chat.\n", f);
    }
    put_lines(f, b, b->after);
    if (fclose(f) != 0)
        FAILF("cannot write %s: %s", b->conf, strerror(errno));
    if (chmod(b->conf, b->private_conf ? 0600 : 0644) != 0)
        FAILF("chmod %s: %s", b->conf, strerror(errno));
}

/* Gives the broker's store and log to the user it runs as, and lets that
 * user into the directory. */
static void hand_over(const ts_broker *b)
{
    struct passwd *pw;
    int fd;

    if (strcmp(b->run_as, "root") == 0)
        return;
    if ((pw = getpwnam(b->run_as)) == NULL)
        FAILF("no user %s on this machine", b->run_as);
    if ((fd = open(b->log, O_WRONLY | O_CREAT | O_APPEND, 0644)) >= 0)
        close(fd);
    if (chmod(b->dir, 0755) != 0 || chown(b->db, pw->pw_uid, pw->pw_gid) != 0 ||
        chown(b->log, pw->pw_uid, pw->pw_gid) != 0)
        FAILF("cannot give %s to %s: %s", b->dir, b->run_as, strerror(errno));
}

/* ===========================================================================
 * Starting and stopping
 * ========================================================================= */

/* The environment of the broker: ours, with LD_PRELOAD replaced by
 * CHAT_BROKER_PRELOAD when that is set (an ASan plugin in an uninstrumented
 * broker needs libasan preloaded; the tests themselves must not get it).
 * The plugin itself is then preloaded too: mosquitto dlcloses it at exit,
 * before LeakSanitizer runs, which would leave its frames unsymbolized and
 * hide its static storage, so that LevelDB's default Env (a deliberate
 * process-lifetime singleton the plugin cannot free) would be reported as a
 * leak. Kept mapped, real leaks are still reported, with symbols. Leak
 * suppressions (ts_broker_suppress_leaks) and a shifted clock (the plugin's
 * test hook, MOSQUITTO_CHAT_TEST_CLOCK_SHIFT) are this broker's alone. The
 * strings are static or the environment's: one broker starts at a time. */
static char **broker_env(const ts_broker *b)
{
    static char *env[MAX_ENV];
    static char preload_var[2 * PATH_LEN + 4096], shift_var[64];
    static char lsan_var[PATH_LEN + 64], asan_var[4096];
    const char *asked = getenv("CHAT_BROKER_PRELOAD");
    bool replace = asked != NULL && asked[0] != '\0';
    bool suppress = replace && b->suppress;
    size_t k = 0;

    for (size_t i = 0; environ[i] != NULL && k + 5 < MAX_ENV; i++) {
        if (replace && strncmp(environ[i], "LD_PRELOAD=", 11) == 0)
            continue;
        if (suppress && (strncmp(environ[i], "LSAN_OPTIONS=", 13) == 0 ||
                         strncmp(environ[i], "ASAN_OPTIONS=", 13) == 0))
            continue;
        if (strncmp(environ[i], "MOSQUITTO_CHAT_TEST_CLOCK_SHIFT=", 32) == 0)
            continue;
        env[k++] = environ[i];
    }
    if (replace) {
        snprintf(preload_var, sizeof preload_var, "LD_PRELOAD=%s %s", asked, CHAT_PLUGIN_PATH);
        env[k++] = preload_var;
    }
    if (suppress) {
        const char *asan = getenv("ASAN_OPTIONS");
        snprintf(lsan_var, sizeof lsan_var, "LSAN_OPTIONS=suppressions=%s/lsan.supp", b->dir);
        snprintf(asan_var, sizeof asan_var, "ASAN_OPTIONS=%s%sfast_unwind_on_malloc=0",
                 asan != NULL ? asan : "", asan != NULL && asan[0] != '\0' ? ":" : "");
        env[k++] = lsan_var;
        env[k++] = asan_var;
    }
    if (b->clock_shift != 0) {
        snprintf(shift_var, sizeof shift_var, "MOSQUITTO_CHAT_TEST_CLOCK_SHIFT=%ld",
                 b->clock_shift);
        env[k++] = shift_var;
    }
    env[k] = NULL;
    return env;
}

/* With CHAT_TEST_PG_PORT set (scripts/test's pg stage), the broker keeps
 * its data in a new database of its own on that PostgreSQL cluster, unless
 * its options name a store: the same tests against the postgresql backend. */
static void pg_database(ts_broker *b)
{
    static int n;
    const char *port = getenv("CHAT_TEST_PG_PORT");
    char db[64];

    if (port == NULL || port[0] == '\0' || b->without_chat)
        return;
    snprintf(db, sizeof db, "ts_%d_%d", (int)getpid(), n++);
    ts_pg_run((const char *const[]){"createdb", port, db, NULL}, NULL);
    snprintf(b->pg_conninfo, sizeof b->pg_conninfo,
             "host=127.0.0.1 port=%s user=postgres dbname=%s", port, db);
}

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
            write_config(b);
        }
        runs_before = ts_count_lines(b->log, RUNNING_LINE);
        b->pid = ts_spawn(argv, broker_env(b), NULL, b->out, b->out);
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
    b->opts = copy_lines(conf->plugin_opts);
    b->lines = copy_lines(conf->lines);
    b->after = copy_lines(conf->after);
    b->top = copy_lines(conf->top);
    b->without_chat = conf->without_chat;
    b->no_anonymous = conf->no_anonymous;
    snprintf(b->run_as, sizeof b->run_as, "%s", conf->run_as != NULL ? conf->run_as : "root");
    b->private_conf = conf->private_conf;
    g_brokers[slot] = b;
    ts_on_fail(report_brokers);
    hand_over(b);
    pg_database(b);
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
    free_lines(b->opts);
    free_lines(b->lines);
    free_lines(b->after);
    free_lines(b->top);
    free(b);
}

void ts_broker_set_lines(ts_broker *b, const char *const *lines)
{
    free_lines(b->lines);
    b->lines = copy_lines(lines);
    write_config(b);
}

void ts_broker_set_opts(ts_broker *b, const char *const *plugin_opts)
{
    free_lines(b->opts);
    b->opts = copy_lines(plugin_opts);
    write_config(b);
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
