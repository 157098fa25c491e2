/* harness.c: starts and stops real mosquitto brokers with the chat plugin and
 * drives them with Paho MQTTClient clients, for the integration tests. */
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <MQTTClient.h>

#ifndef CHAT_MOSQUITTO_BIN
#error "CHAT_MOSQUITTO_BIN must name the mosquitto binary"
#endif
#ifndef CHAT_PLUGIN_PATH
#error "CHAT_PLUGIN_PATH must name mosquitto_chat.so"
#endif

extern char **environ;

#define MAX_BROKERS 8           /* brokers alive at once in one test */
#define START_ATTEMPTS 5        /* tries to start a broker (new port each) */
#define READY_TIMEOUT_MS 10000  /* a broker must accept connections within this */
#define STOP_TIMEOUT_MS 10000   /* a broker must exit this long after SIGTERM */
#define POLL_MS 20              /* pause between readiness probes */
#define LOG_TAIL_BYTES 6000     /* how much of a log a failure prints */
#define NOTABLE_LINES 40        /* and how many of its notable lines */
#define CLIENT_TIMEOUT_MS 10000 /* connect, subscribe, ack and room waits */
#define MAX_WAKEUPS 1000000     /* bound on condition-variable loops */
#define TOKENS 65536            /* Paho delivery tokens are 16-bit packet ids */
#define MAX_FDS 4096            /* descriptors closed in the broker child */
#define PATH_LEN 512
#define PACKET_PUBREC 5 /* MQTT control packet type of PUBREC */

/* ===========================================================================
 * Process-wide state
 * ========================================================================= */

struct harness_broker {
    char dir[64];        /* the temporary directory (a fixed short template) */
    char db[PATH_LEN];   /* <dir>/db: the plugin's LevelDB store */
    char conf[PATH_LEN]; /* <dir>/mosquitto.conf */
    char log[PATH_LEN];  /* <dir>/mosquitto.log: log_dest file */
    char out[PATH_LEN];  /* <dir>/broker.out: the broker's stdout and stderr */
    char **opts;         /* plugin_opt_* lines without the prefix, NULL-terminated */
    char **lines;        /* extra global lines before the plugin line, NULL-terminated */
    char **after;        /* extra lines after the chat plugin's options, NULL-terminated */
    char **top;          /* lines before the listener, NULL-terminated */
    bool without_chat;   /* the chat plugin is left out of the configuration */
    bool no_anonymous;   /* allow_anonymous false */
    char run_as[64];     /* the `user` line */
    bool private_conf;   /* mosquitto.conf mode 0600 */
    int port;            /* 127.0.0.1 port of the listener */
    pid_t pid;           /* running broker, 0 when stopped */
    int starts;          /* successful starts, for messages */
};

static char g_name[128] = "integration test";
static int64_t g_t0;
static bool g_failing;
static harness_broker *g_brokers[MAX_BROKERS];

/* Clients destroyed while another client lives. Paho's MQTTClient runs one
 * thread for all clients. It calls messageArrived without its lock, and after
 * the callback returns it locks again and unlinks the message from the
 * client's Paho queue (MQTTClient_run, in 1.3.12 as upstream). So while that
 * thread runs, neither the harness_client (the callbacks' context) nor its
 * Paho handle may be freed: MQTTClient_destroy would free the handle that
 * thread is about to use (a segfault in ListRemove from MQTTClient_run).
 * Both are kept here, disconnected, until no client is left; then Paho's
 * thread is stopped and they are destroyed and freed (flush_graveyard). */
static struct harness_client *g_graveyard;
static int g_live_clients;

static void stop_broker(harness_broker *b, bool strict);
static void print_tail(const char *path);
static void print_notable(const char *path);
static const char *describe_status(int status, char *buf, size_t size);

void harness_init(const char *test_name)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
    snprintf(g_name, sizeof g_name, "%s", test_name);
    g_t0 = harness_now_ms();
    setvbuf(stdout, NULL, _IOLBF, 0);
    harness_log("%s: start", g_name);
}

int harness_pass(void)
{
    harness_log("PASS %s", g_name);
    fflush(NULL);
    return 0;
}

void harness_note_assert(const char *file, int line, const char *cond)
{
    fflush(stdout);
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, cond);
}

_Noreturn void harness_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "%s:%d: FAIL %s: ", file, line, g_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (g_failing) { /* a failure while reporting one: give up at once */
        fflush(NULL);
        _exit(1);
    }
    g_failing = true;
    for (int i = 0; i < MAX_BROKERS; i++) {
        harness_broker *b = g_brokers[i];
        if (b == NULL)
            continue;
        stop_broker(b, false); /* flushes its log */
        fprintf(stderr, "broker on 127.0.0.1:%d, config %s:\n", b->port, b->conf);
        print_tail(b->out);
        print_notable(b->log);
        print_tail(b->log);
        fprintf(stderr, "kept %s for inspection\n", b->dir);
    }
    fflush(NULL);
    /* _exit: Paho's thread may still run, and leak reports would bury the
     * message above. */
    _exit(1);
}

void harness_log(const char *fmt, ...)
{
    va_list ap;
    int64_t t = harness_now_ms() - g_t0;

    printf("[%3d.%03ds] ", (int)(t / 1000), (int)(t % 1000));
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

int64_t harness_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t harness_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void harness_sleep_ms(int ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    /* EINTR leaves the rest in ts; a bounded number of resumptions. */
    for (int i = 0; i < 100 && nanosleep(&ts, &ts) != 0 && errno == EINTR; i++)
        ;
}

/* ===========================================================================
 * Files
 * ========================================================================= */

/* Prints at most the last LOG_TAIL_BYTES of path to stderr, from a line
 * start. */
static void print_tail(const char *path)
{
    FILE *f = fopen(path, "rb");
    char buf[1024];
    long size, from;
    bool skip = false;
    size_t n;

    if (f == NULL) {
        fprintf(stderr, "(cannot open %s: %s)\n", path, strerror(errno));
        return;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0) {
        fclose(f);
        return;
    }
    from = size > LOG_TAIL_BYTES ? size - LOG_TAIL_BYTES : 0;
    skip = from > 0;
    fseek(f, from, SEEK_SET);
    fprintf(stderr, "----- %s (last %ld of %ld bytes) -----\n", path, size - from, size);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        size_t off = 0;
        if (skip) {
            char *nl = memchr(buf, '\n', n);
            if (nl == NULL)
                continue;
            off = (size_t)(nl - buf) + 1;
            skip = false;
        }
        fwrite(buf + off, 1, n - off, stderr);
    }
    fprintf(stderr, "----- end of %s -----\n", path);
    fclose(f);
}

/* Prints the last NOTABLE_LINES lines of a broker log that are not routine
 * packet traffic: the plugin's own lines, warnings, errors, denials, drops.
 * (With log_type all, the tail alone is mostly PUBLISH/PUBACK chatter.) */
static void print_notable(const char *path)
{
    static const char *const marks[] = {"mosquitto-chat", "rror",      "arning", "enied",
                                        "ropp",           "xceeded",   "rc151",  "rc135",
                                        "rc128",          "isconnect", "lugin"};
    char ring[NOTABLE_LINES][256];
    char line[1024];
    long count = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return;
    for (long i = 0; i < 50000000L && fgets(line, sizeof line, f) != NULL; i++) {
        bool notable = false;
        for (size_t k = 0; k < sizeof marks / sizeof marks[0] && !notable; k++)
            notable = strstr(line, marks[k]) != NULL;
        if (!notable)
            continue;
        {
            size_t len = strlen(line);
            if (len >= sizeof ring[0])
                len = sizeof ring[0] - 1;
            memcpy(ring[count % NOTABLE_LINES], line, len);
            ring[count % NOTABLE_LINES][len] = '\0';
        }
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

/* How many lines of the file at path contain needle (lines longer than 1 KiB
 * are read in pieces); 0 if it cannot be read. */
static long count_lines(const char *path, const char *needle)
{
    char line[1024];
    long found = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return 0;
    for (long i = 0; i < 50000000L && fgets(line, sizeof line, f) != NULL; i++)
        found += strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

static bool file_contains(const char *path, const char *needle)
{
    return count_lines(path, needle) > 0;
}

/* Removes path and, if it is a directory, everything under it (at most
 * depth levels). Returns 0 or -1 with errno set. */
static int remove_tree(const char *path, int depth)
{
    struct stat st;
    DIR *d;
    struct dirent *e;
    char child[PATH_LEN];
    int rc = 0;

    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    if (depth <= 0 || (d = opendir(path)) == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child ||
            remove_tree(child, depth - 1) != 0)
            rc = -1;
    }
    closedir(d);
    return rc == 0 ? rmdir(path) : -1;
}

static uint64_t tree_bytes(const char *path, int depth)
{
    struct stat st;
    DIR *d;
    struct dirent *e;
    char child[PATH_LEN];
    uint64_t sum = 0;

    if (lstat(path, &st) != 0)
        FAILF("stat %s: %s", path, strerror(errno));
    if (S_ISREG(st.st_mode))
        return (uint64_t)st.st_size;
    if (!S_ISDIR(st.st_mode) || depth <= 0)
        return 0;
    if ((d = opendir(path)) == NULL)
        FAILF("opendir %s: %s", path, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child)
            FAILF("path too long under %s", path);
        sum += tree_bytes(child, depth - 1);
    }
    closedir(d);
    return sum;
}

uint64_t harness_dir_bytes(const char *path)
{
    return tree_bytes(path, 8);
}

void harness_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL)
        FAILF("cannot write %s: %s", path, strerror(errno));
    if (fwrite(data, 1, len, f) != len || fclose(f) != 0)
        FAILF("cannot write %s: %s", path, strerror(errno));
}

char *harness_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    long size;
    char *buf;

    if (f == NULL)
        FAILF("cannot read %s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        FAILF("cannot size %s: %s", path, strerror(errno));
    if ((buf = malloc((size_t)size + 1)) == NULL)
        FAILF("out of memory");
    if (fread(buf, 1, (size_t)size, f) != (size_t)size)
        FAILF("cannot read %s", path);
    fclose(f);
    buf[size] = '\0';
    if (len != NULL)
        *len = (size_t)size;
    return buf;
}

#define RUN_TIMEOUT_MS 10000 /* a helper program must finish within this */

void harness_run(const char *const *argv)
{
    char why[128];
    int status = 0;
    pid_t pid;
    bool exited = false;

    fflush(NULL);
    pid = fork();
    if (pid < 0)
        FAILF("fork: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < RUN_TIMEOUT_MS / 10 && !exited; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            exited = true;
        else
            harness_sleep_ms(10);
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAILF("%s did not finish within %d ms", argv[0], RUN_TIMEOUT_MS);
    }
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        FAILF("%s %s failed: %s", argv[0], argv[1] != NULL ? argv[1] : "",
              describe_status(status, why, sizeof why));
}

/* ===========================================================================
 * Broker
 * ========================================================================= */

static const char *describe_status(int status, char *buf, size_t size)
{
    if (WIFEXITED(status))
        snprintf(buf, size, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, size, "wait status 0x%x", (unsigned)status);
    return buf;
}

/* A port on 127.0.0.1 that nobody listened on a moment ago. */
static int free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    if (fd < 0)
        FAILF("socket: %s", strerror(errno));
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int err = errno;
        close(fd);
        FAILF("bind 127.0.0.1:0: %s", strerror(err));
    }
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* True if something accepts TCP connections on 127.0.0.1:port. */
static bool probe(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok;

    if (fd < 0)
        FAILF("socket: %s", strerror(errno));
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Writes line to f with every "@DIR@" replaced by the broker's directory. */
static void put_line(FILE *f, const harness_broker *b, const char *line)
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

static void write_config(const harness_broker *b)
{
    FILE *f = fopen(b->conf, "w");

    if (f == NULL)
        FAILF("cannot write %s: %s", b->conf, strerror(errno));
    fputs("# Written by the mosquitto-chat integration test harness.\n", f);
    for (size_t i = 0; b->top != NULL && b->top[i] != NULL; i++)
        put_line(f, b, b->top[i]);
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
    for (size_t i = 0; b->lines != NULL && b->lines[i] != NULL; i++)
        put_line(f, b, b->lines[i]);
    if (!b->without_chat) {
        fprintf(f, "plugin %s\nplugin_opt_db_path %s\n", CHAT_PLUGIN_PATH, b->db);
        for (size_t i = 0; b->opts != NULL && b->opts[i] != NULL; i++)
            fprintf(f, "plugin_opt_%s\n", b->opts[i]);
    } else {
        fputs("# The same broker without mosquitto-chat.\n", f);
    }
    for (size_t i = 0; b->after != NULL && b->after[i] != NULL; i++)
        put_line(f, b, b->after[i]);
    if (fclose(f) != 0)
        FAILF("cannot write %s: %s", b->conf, strerror(errno));
    if (chmod(b->conf, b->private_conf ? 0600 : 0644) != 0)
        FAILF("chmod %s: %s", b->conf, strerror(errno));
}

static char **copy_lines(const char *const *lines);
static void free_lines(char **lines);

/* Gives the broker's store and log to the user it runs as, and lets that
 * user into the directory. */
static void hand_over(const harness_broker *b)
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

void harness_broker_set_lines(harness_broker *b, const char *const *lines)
{
    free_lines(b->lines);
    b->lines = copy_lines(lines);
    write_config(b);
}

void harness_broker_set_opts(harness_broker *b, const char *const *plugin_opts)
{
    free_lines(b->opts);
    b->opts = copy_lines(plugin_opts);
    write_config(b);
}

void harness_broker_reload(harness_broker *b)
{
    long before = harness_broker_log_count(b, "Reloading config.");
    int64_t deadline = harness_now_ms() + 10000;

    if (b->pid == 0 || kill(b->pid, SIGHUP) != 0)
        FAILF("cannot send SIGHUP to the broker: %s", b->pid ? strerror(errno) : "not running");
    while (harness_broker_log_count(b, "Reloading config.") == before) {
        if (harness_now_ms() > deadline)
            FAILF("the broker did not reload its configuration within 10 s");
        harness_sleep_ms(20);
    }
    /* The log line comes before the reload itself: give it the same pass. */
    harness_sleep_ms(200);
}

/* The environment of the broker: ours, with LD_PRELOAD replaced by
 * CHAT_BROKER_PRELOAD when that is set (an ASan plugin in an uninstrumented
 * broker needs libasan preloaded; the tests themselves must not get it).
 * The plugin itself is then preloaded too: mosquitto dlcloses it at exit,
 * before LeakSanitizer runs, which would leave its frames unsymbolized and
 * hide its static storage, so that LevelDB's default Env (a deliberate
 * process-lifetime singleton the plugin cannot free) would be reported as a
 * leak. Kept mapped, real leaks are still reported, with symbols.
 * Returns a heap array of borrowed strings (plus one owned, *owned), freed by
 * the caller with free(). */
static char **broker_env(char **owned)
{
    const char *preload = getenv("CHAT_BROKER_PRELOAD");
    size_t n = 0, k = 0;
    char **env;

    *owned = NULL;
    while (environ[n] != NULL)
        n++;
    if ((env = calloc(n + 2, sizeof *env)) == NULL)
        FAILF("out of memory");
    for (size_t i = 0; i < n; i++) {
        if (preload != NULL && preload[0] != '\0' && strncmp(environ[i], "LD_PRELOAD=", 11) == 0)
            continue;
        env[k++] = environ[i];
    }
    if (preload != NULL && preload[0] != '\0') {
        size_t len = strlen(preload) + strlen(CHAT_PLUGIN_PATH) + sizeof "LD_PRELOAD= ";
        if ((*owned = malloc(len)) == NULL)
            FAILF("out of memory");
        snprintf(*owned, len, "LD_PRELOAD=%s %s", preload, CHAT_PLUGIN_PATH);
        env[k++] = *owned;
    }
    env[k] = NULL;
    return env;
}

/* Forks and execs the broker. Everything the child needs is prepared before
 * the fork: the child only calls async-signal-safe functions. */
static void spawn(harness_broker *b)
{
    char *argv[] = {(char *)CHAT_MOSQUITTO_BIN, (char *)"-c", b->conf, NULL};
    char *owned = NULL;
    char **env = broker_env(&owned);
    struct sigaction dfl;
    sigset_t none;
    long max_fd = sysconf(_SC_OPEN_MAX);
    pid_t pid;

    if (max_fd < 0 || max_fd > MAX_FDS)
        max_fd = MAX_FDS;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigemptyset(&none);
    fflush(NULL);

    pid = fork();
    if (pid < 0)
        FAILF("fork: %s", strerror(errno));
    if (pid == 0) {
        int out = open(b->out, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int in = open("/dev/null", O_RDONLY);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        if (in >= 0)
            dup2(in, 0);
        for (long fd = 3; fd < max_fd; fd++)
            close((int)fd);
        sigaction(SIGPIPE, &dfl, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(argv[0], argv, env);
        _exit(127);
    }
    b->pid = pid;
    free(env);
    free(owned);
}

enum { READY, EXITED, NOT_READY };

/* The line mosquitto logs once its listeners are open. */
#define RUNNING_LINE " running"

/* Waits until the broker accepts connections or exits, at most
 * READY_TIMEOUT_MS. Ready means: a new "running" line in its log (so that
 * whatever answers the probe is this broker, not another process that took
 * the port) and a successful TCP connect. runs_before is the count of such
 * lines before the start. */
static int wait_ready(harness_broker *b, long runs_before, int *status)
{
    int64_t deadline = harness_now_ms() + READY_TIMEOUT_MS;

    for (int i = 0; i < READY_TIMEOUT_MS / POLL_MS + 10; i++) {
        if (waitpid(b->pid, status, WNOHANG) == b->pid) {
            b->pid = 0;
            return EXITED;
        }
        if (count_lines(b->log, RUNNING_LINE) > runs_before && probe(b->port))
            return READY;
        if (harness_now_ms() >= deadline)
            break;
        harness_sleep_ms(POLL_MS);
    }
    return NOT_READY;
}

/* Starts the broker, on a new port per attempt if new_port, else on b->port. */
static void launch(harness_broker *b, bool new_port)
{
    char why[128];
    int status = 0;

    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
        if (new_port) {
            b->port = free_port();
            write_config(b);
        }
        long runs_before = count_lines(b->log, RUNNING_LINE);
        spawn(b);
        switch (wait_ready(b, runs_before, &status)) {
        case READY:
            b->starts++;
            harness_log("broker pid %d ready on 127.0.0.1:%d (start %d, attempt %d), dir %s",
                        (int)b->pid, b->port, b->starts, attempt, b->dir);
            return;
        case EXITED:
            /* Only a port taken between free_port() and the broker's bind is
             * worth another attempt; anything else (a bad option, a plugin
             * that fails to load) would fail again. */
            if (!file_contains(b->out, "in use") && !file_contains(b->log, "in use"))
                FAILF("broker exited at start (%s); its output follows",
                      describe_status(status, why, sizeof why));
            harness_log("broker exited at start (%s): port %d taken; attempt %d of %d",
                        describe_status(status, why, sizeof why), b->port, attempt, START_ATTEMPTS);
            harness_sleep_ms(200);
            break;
        default:
            FAILF("broker pid %d does not accept connections on 127.0.0.1:%d after %d ms",
                  (int)b->pid, b->port, READY_TIMEOUT_MS);
        }
    }
    FAILF("broker did not start in %d attempts; its output follows", START_ATTEMPTS);
}

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

harness_broker *harness_broker_create(const harness_conf *conf)
{
    harness_broker *b = calloc(1, sizeof *b);
    int slot = -1;

    if (b == NULL)
        FAILF("out of memory");
    for (int i = 0; i < MAX_BROKERS && slot < 0; i++)
        if (g_brokers[i] == NULL)
            slot = i;
    if (slot < 0)
        FAILF("more than %d brokers at once", MAX_BROKERS);
    snprintf(b->dir, sizeof b->dir, "/tmp/mosquitto-chat-integ-XXXXXX");
    if (mkdtemp(b->dir) == NULL)
        FAILF("mkdtemp: %s", strerror(errno));
    snprintf(b->db, sizeof b->db, "%s/db", b->dir);
    snprintf(b->conf, sizeof b->conf, "%s/mosquitto.conf", b->dir);
    snprintf(b->log, sizeof b->log, "%s/mosquitto.log", b->dir);
    snprintf(b->out, sizeof b->out, "%s/broker.out", b->dir);
    if (mkdir(b->db, 0700) != 0)
        FAILF("mkdir %s: %s", b->db, strerror(errno));
    b->opts = copy_lines(conf != NULL ? conf->plugin_opts : NULL);
    b->lines = copy_lines(conf != NULL ? conf->lines : NULL);
    b->after = copy_lines(conf != NULL ? conf->after : NULL);
    b->top = copy_lines(conf != NULL ? conf->top : NULL);
    b->without_chat = conf != NULL && conf->without_chat;
    b->no_anonymous = conf != NULL && conf->no_anonymous;
    snprintf(b->run_as, sizeof b->run_as, "%s",
             conf != NULL && conf->run_as != NULL ? conf->run_as : "root");
    b->private_conf = conf != NULL && conf->private_conf;
    g_brokers[slot] = b;
    hand_over(b);
    return b;
}

void harness_broker_launch(harness_broker *b)
{
    if (b->pid != 0 || b->starts != 0)
        FAILF("harness_broker_launch: broker in %s was started before", b->dir);
    launch(b, true);
}

harness_broker *harness_broker_start_conf(const harness_conf *conf)
{
    harness_broker *b = harness_broker_create(conf);

    harness_broker_launch(b);
    return b;
}

harness_broker *harness_broker_start(const char *const *plugin_opts)
{
    harness_conf conf = {.plugin_opts = plugin_opts};

    return harness_broker_start_conf(&conf);
}

/* Stops a running broker: SIGTERM, at most STOP_TIMEOUT_MS, then SIGKILL. If
 * strict, a broker that had died, needed SIGKILL or exited with a non-zero
 * status fails the test. */
static void stop_broker(harness_broker *b, bool strict)
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
                  describe_status(status, why, sizeof why));
        fprintf(stderr, "broker pid %d had died: %s\n", (int)pid,
                describe_status(status, why, sizeof why));
        return;
    }
    kill(pid, SIGTERM);
    for (int i = 0; i < STOP_TIMEOUT_MS / 10 && !exited; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            exited = true;
        else
            harness_sleep_ms(10);
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        b->pid = 0;
        if (strict)
            FAILF("broker pid %d did not exit within %d ms of SIGTERM; killed", (int)pid,
                  STOP_TIMEOUT_MS);
        return;
    }
    b->pid = 0;
    if (strict && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        FAILF("broker pid %d ended with %s after SIGTERM", (int)pid,
              describe_status(status, why, sizeof why));
    if (!g_failing)
        harness_log("broker pid %d stopped", (int)pid);
}

void harness_broker_stop(harness_broker *b)
{
    stop_broker(b, true);
}

void harness_broker_kill(harness_broker *b)
{
    char why[128];
    int status = 0;
    pid_t pid = b->pid;

    if (pid == 0)
        return;
    if (waitpid(pid, &status, WNOHANG) == pid) {
        b->pid = 0;
        FAILF("broker pid %d had died before it was killed: %s", (int)pid,
              describe_status(status, why, sizeof why));
    }
    if (kill(pid, SIGKILL) != 0)
        FAILF("kill -9 %d: %s", (int)pid, strerror(errno));
    /* SIGKILL cannot be caught: the wait ends at once. */
    if (waitpid(pid, &status, 0) != pid)
        FAILF("waitpid %d: %s", (int)pid, strerror(errno));
    b->pid = 0;
    harness_log("broker pid %d killed with SIGKILL", (int)pid);
}

void harness_broker_restart(harness_broker *b)
{
    if (b->pid != 0)
        FAILF("harness_broker_restart: broker pid %d still runs", (int)b->pid);
    launch(b, false);
}

void harness_broker_destroy(harness_broker *b)
{
    if (b == NULL)
        return;
    stop_broker(b, true);
    for (int i = 0; i < MAX_BROKERS; i++)
        if (g_brokers[i] == b)
            g_brokers[i] = NULL;
    if (remove_tree(b->dir, 4) != 0)
        fprintf(stderr, "warning: cannot remove %s: %s\n", b->dir, strerror(errno));
    free_lines(b->opts);
    free_lines(b->lines);
    free_lines(b->after);
    free_lines(b->top);
    free(b);
}

int harness_broker_port(const harness_broker *b)
{
    return b->port;
}

int harness_broker_pid(const harness_broker *b)
{
    return (int)b->pid;
}

const char *harness_broker_db_path(const harness_broker *b)
{
    return b->db;
}

const char *harness_broker_dir(const harness_broker *b)
{
    return b->dir;
}

long harness_broker_log_count(const harness_broker *b, const char *needle)
{
    return count_lines(b->log, needle);
}

/* ===========================================================================
 * Clients
 * ========================================================================= */

struct harness_client {
    MQTTClient mc;                 /* the Paho handle */
    char id[256];                  /* client id */
    pthread_mutex_t mu;            /* guards everything below */
    pthread_cond_t cv;             /* signalled on every change below */
    harness_msg *head, *tail;      /* received messages, oldest first */
    bool lost;                     /* the connection was lost */
    bool oom;                      /* a message was dropped for lack of memory */
    char cause[256];               /* Paho's reason for the loss, if any */
    uint32_t *sent;                /* [TOKENS] QoS 1/2 publishes per token */
    uint32_t *done;                /* [TOKENS] acknowledgements per token */
    int inflight;                  /* QoS 1/2 publishes not yet acknowledged */
    int window;                    /* most inflight allowed */
    int version;                   /* 4: MQTT 3.1.1, 5: MQTT 5 */
    uint8_t *reason;               /* [TOKENS] MQTT 5: reason code of the last ack per token */
    bool dropping;                 /* destroyed or being disconnected: on_message frees and
                                      drops what still arrives */
    bool hands_off;                /* MQTT 3.1.1 being disconnected: on_message must not even
                                      read a message (see settle_deliveries) */
    bool pushes;                   /* keep pushed entries (harness_client_opts.pushes) */
    bool persistent;               /* the session outlives the connection */
    char **filters;                /* filters subscribed (granted), for settle_deliveries */
    size_t nfilters;               /* ... and how many */
    struct harness_client *buried; /* graveyard link */
};

static const char *paho_err(int rc)
{
    const char *s;

    switch (rc) { /* CONNACK return codes come back as positive values */
    case 1:
        return "connection refused: unacceptable protocol version";
    case 2:
        return "connection refused: identifier rejected";
    case 3:
        return "connection refused: server unavailable";
    case 4:
        return "connection refused: bad user name or password";
    case 5:
        return "connection refused: not authorized";
    default:
        s = MQTTClient_strerror(rc);
        return s != NULL ? s : "unknown error";
    }
}

/* Converts a harness_now_ms() deadline to the condition variable's clock. */
static struct timespec deadline_ts(int64_t deadline_ms)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(deadline_ms / 1000);
    ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
    return ts;
}

/* Paho's thread: copies the message into the queue and returns at once.
 * Once the test is done with the client (dropping) the message is freed
 * unread; while an MQTT 3.1.1 client is being disconnected (hands_off) it is
 * not touched at all: MQTTClient_disconnect may be freeing it right now
 * (see settle_deliveries), or Paho's thread unlinks it and it leaks. */
static int on_message(void *context, char *topic, int topic_len, MQTTClient_message *msg)
{
    harness_client *c = context;
    size_t tlen, plen;
    harness_msg *m;
    bool dropping, hands_off;

    pthread_mutex_lock(&c->mu);
    dropping = c->dropping;
    hands_off = c->hands_off;
    pthread_mutex_unlock(&c->mu);
    if (hands_off)
        return 1;
    tlen = topic_len > 0 ? (size_t)topic_len : strlen(topic);
    plen = msg->payloadlen > 0 ? (size_t)msg->payloadlen : 0;
    /* c->pushes is set before the connect and never changes. */
    if (dropping ||
        (!c->pushes && tlen == strlen(HARNESS_RESPONSE_TOPIC) &&
         memcmp(topic, HARNESS_RESPONSE_TOPIC, tlen) == 0 && harness_is_push(msg->payload, plen))) {
        MQTTClient_freeMessage(&msg);
        MQTTClient_free(topic);
        return 1;
    }
    m = calloc(1, sizeof *m);
    if (m != NULL) {
        m->topic = malloc(tlen + 1);
        m->payload = malloc(plen + 1);
    }
    pthread_mutex_lock(&c->mu);
    if (m == NULL || m->topic == NULL || m->payload == NULL) {
        c->oom = true;
        harness_msg_free(m);
    } else {
        memcpy(m->topic, topic, tlen);
        m->topic[tlen] = '\0';
        if (plen > 0)
            memcpy(m->payload, msg->payload, plen);
        m->payload[plen] = '\0';
        m->len = plen;
        m->qos = msg->qos;
        m->retained = msg->retained != 0;
        m->at_ms = harness_now_ms();
        if (c->version == 5) {
            MQTTProperty *corr =
                MQTTProperties_getProperty(&msg->properties, MQTTPROPERTY_CODE_CORRELATION_DATA);
            if (corr != NULL && corr->value.data.len >= 0) {
                size_t clen = (size_t)corr->value.data.len;
                if ((m->corr = malloc(clen + 1)) == NULL) {
                    c->oom = true;
                } else {
                    memcpy(m->corr, corr->value.data.data, clen);
                    m->corr[clen] = '\0';
                    m->corr_len = clen;
                    m->has_corr = true;
                }
            }
        }
        if (c->tail != NULL)
            c->tail->next = m;
        else
            c->head = m;
        c->tail = m;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    MQTTClient_freeMessage(&msg);
    MQTTClient_free(topic);
    return 1;
}

static void on_lost(void *context, char *cause)
{
    harness_client *c = context;

    pthread_mutex_lock(&c->mu);
    c->lost = true;
    snprintf(c->cause, sizeof c->cause, "%s", cause != NULL ? cause : "no reason given");
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* MQTT 5 only: every PUBACK and PUBCOMP (followed by on_delivered) and every
 * PUBREC that refuses a QoS 2 publish (which ends its exchange: no
 * on_delivered follows, so it counts as the acknowledgement here). */
static void on_published(void *context, int token, int packet_type, MQTTProperties *props,
                         enum MQTTReasonCodes reason)
{
    harness_client *c = context;

    (void)props;
    pthread_mutex_lock(&c->mu);
    if (token > 0 && token < TOKENS) {
        c->reason[token] = (uint8_t)reason;
        if (packet_type == PACKET_PUBREC) {
            c->done[token]++;
            if (c->inflight > 0)
                c->inflight--;
        }
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_delivered(void *context, MQTTClient_deliveryToken token)
{
    harness_client *c = context;

    pthread_mutex_lock(&c->mu);
    if (token > 0 && token < TOKENS)
        c->done[token]++;
    if (c->inflight > 0)
        c->inflight--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Frees a client's memory; Paho must no longer call back into it. */
static void free_client(harness_client *c)
{
    harness_msg *m = c->head;

    for (int i = 0; m != NULL && i < INT_MAX; i++) {
        harness_msg *next = m->next;
        harness_msg_free(m);
        m = next;
    }
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    for (size_t i = 0; i < c->nfilters; i++)
        free(c->filters[i]);
    free(c->filters);
    free(c->sent);
    free(c->done);
    free(c->reason);
    free(c);
}

/* Creates and connects a client as o says. Returns 0 with *out set, or the
 * refusal: a CONNACK return code (MQTT 3.1.1: 1..5), a CONNACK reason code
 * (MQTT 5: 0x80 and above) or a negative Paho code, with *out NULL. */
static int connect_client(const harness_broker *b, const harness_client_opts *o,
                          harness_client **out)
{
    MQTTClient_connectOptions opts = MQTTClient_connectOptions_initializer;
    MQTTClient_connectOptions opts5 = MQTTClient_connectOptions_initializer5;
    MQTTClient_createOptions create = MQTTClient_createOptions_initializer;
    MQTTClient_willOptions will = MQTTClient_willOptions_initializer;
    MQTTClient_connectOptions *co;
    pthread_condattr_t attr;
    harness_client *c = calloc(1, sizeof *c);
    const char *client_id = o->client_id;
    char uri[64];
    int rc;

    *out = NULL;
    if (c == NULL || (c->sent = calloc(TOKENS, sizeof *c->sent)) == NULL ||
        (c->done = calloc(TOKENS, sizeof *c->done)) == NULL ||
        (c->reason = calloc(TOKENS, sizeof *c->reason)) == NULL)
        FAILF("out of memory");
    snprintf(c->id, sizeof c->id, "%s", client_id);
    c->window = HARNESS_DEFAULT_WINDOW;
    c->version = o->mqtt_version == 5 ? 5 : 4;
    c->pushes = o->pushes;
    c->persistent = o->persistent;
    if (pthread_mutex_init(&c->mu, NULL) != 0 || pthread_condattr_init(&attr) != 0 ||
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&c->cv, &attr) != 0)
        FAILF("cannot create a mutex or condition variable");
    pthread_condattr_destroy(&attr);

    snprintf(uri, sizeof uri, "tcp://127.0.0.1:%d", b->port);
    create.MQTTVersion = c->version == 5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1;
    rc = MQTTClient_createWithOptions(&c->mc, uri, client_id, MQTTCLIENT_PERSISTENCE_NONE, NULL,
                                      &create);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: MQTTClient_create(%s): %s (%d)", client_id, uri, paho_err(rc), rc);
    g_live_clients++;
    rc = MQTTClient_setCallbacks(c->mc, c, on_lost, on_message, on_delivered);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: MQTTClient_setCallbacks: %s (%d)", client_id, paho_err(rc), rc);
    if (c->version == 5 && (rc = MQTTClient_setPublished(c->mc, c, on_published)) != 0)
        FAILF("client %s: MQTTClient_setPublished: %s (%d)", client_id, paho_err(rc), rc);

    co = c->version == 5 ? &opts5 : &opts;
    co->keepAliveInterval = 30;
    if (c->version == 5) {
        co->cleansession = 0;
        co->cleanstart = o->persistent ? 0 : 1;
    } else {
        co->cleansession = o->persistent ? 0 : 1;
    }
    co->reliable = 0;
    co->username = o->username;
    co->password = o->password;
    co->connectTimeout = CLIENT_TIMEOUT_MS / 1000;
    co->MQTTVersion = c->version == 5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1;
    /* Above our own window, so that Paho never blocks a publish (it would
     * poll in 100 ms steps). */
    co->maxInflightMessages = 2 * HARNESS_MAX_WINDOW;
    if (o->will_topic != NULL) {
        will.topicName = o->will_topic;
        will.message = o->will_payload != NULL ? o->will_payload : "";
        will.qos = o->will_qos;
        will.retained = o->will_retain;
        co->will = &will;
    }
    if (c->version == 5) {
        MQTTProperties props = MQTTProperties_initializer;
        MQTTProperty p;
        MQTTResponse r;
        if (o->max_packet_size > 0) {
            p.identifier = MQTTPROPERTY_CODE_MAXIMUM_PACKET_SIZE;
            p.value.integer4 = (unsigned)o->max_packet_size;
            if (MQTTProperties_add(&props, &p) != 0)
                FAILF("cannot add the Maximum Packet Size property");
        }
        if (o->persistent) {
            p.identifier = MQTTPROPERTY_CODE_SESSION_EXPIRY_INTERVAL;
            p.value.integer4 = 3600;
            if (MQTTProperties_add(&props, &p) != 0)
                FAILF("cannot add the Session Expiry Interval property");
        }
        r = MQTTClient_connect5(c->mc, co, &props, NULL);
        rc = r.reasonCode;
        MQTTResponse_free(r);
        MQTTProperties_free(&props);
    } else {
        rc = MQTTClient_connect(c->mc, co);
    }
    if (rc != MQTTCLIENT_SUCCESS) {
        harness_client_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

int harness_client_try_connect(const harness_broker *b, const harness_client_opts *o,
                               harness_client **out)
{
    return connect_client(b, o, out);
}

harness_client *harness_client_connect_opts(const harness_broker *b, const harness_client_opts *o)
{
    harness_client *c = NULL;
    int rc = connect_client(b, o, &c);

    if (rc != 0)
        FAILF("client %s (MQTT %s, user %s): connect to 127.0.0.1:%d: %s (%d)", o->client_id,
              o->mqtt_version == 5 ? "5" : "3.1.1", o->username != NULL ? o->username : "(none)",
              b->port, paho_err(rc), rc);
    return c;
}

harness_client *harness_client_connect(const harness_broker *b, const char *client_id,
                                       const char *username)
{
    harness_client_opts o = {.client_id = client_id, .username = username};

    return harness_client_connect_opts(b, &o);
}

/* Subscribes to count filters; fills codes[i] with what the SUBACK granted
 * (0..2) or its refusal (0x80 under MQTT 3.1.1, the reason code under MQTT
 * 5). Returns a Paho error code if no SUBACK came. */
static int subscribe_codes(harness_client *c, size_t count, const char *const *topics, int qos,
                           int *codes)
{
    int rc;

    if (count > INT_MAX)
        FAILF("too many topics");
    for (size_t i = 0; i < count; i++)
        codes[i] = qos;
    if (c->version != 5) {
        rc = MQTTClient_subscribeMany(c->mc, (int)count, (char *const *)topics, codes);
    } else {
        MQTTResponse r =
            MQTTClient_subscribeMany5(c->mc, (int)count, (char *const *)topics, codes, NULL, NULL);
        rc = r.reasonCode < 0 ? r.reasonCode : MQTTCLIENT_SUCCESS;
        if (rc == MQTTCLIENT_SUCCESS) {
            if (r.reasonCodeCount != (int)count)
                FAILF("client %s: SUBACK with %d reason codes for %zu filters", c->id,
                      r.reasonCodeCount, count);
            for (size_t i = 0; i < count; i++)
                codes[i] = count == 1 ? (int)r.reasonCode : (int)r.reasonCodes[i];
        }
        MQTTResponse_free(r);
    }
    /* Remembered for settle_deliveries. */
    for (size_t i = 0; rc == MQTTCLIENT_SUCCESS && i < count; i++) {
        char **n;
        if (codes[i] < 0 || codes[i] >= 0x80)
            continue;
        if ((n = realloc(c->filters, (c->nfilters + 1) * sizeof *n)) == NULL ||
            (n[c->nfilters] = strdup(topics[i])) == NULL)
            FAILF("out of memory");
        c->filters = n;
        c->nfilters++;
    }
    return rc;
}

void harness_client_subscribe_many(harness_client *c, size_t count, const char *const *topics,
                                   int qos)
{
    int *granted = calloc(count, sizeof *granted);
    int rc;

    if (granted == NULL || count > INT_MAX)
        FAILF("out of memory");
    rc = subscribe_codes(c, count, topics, qos, granted);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: subscribe to %s%s (QoS %d): %s (%d)", c->id, topics[0],
              count > 1 ? " and others" : "", qos, paho_err(rc), rc);
    for (size_t i = 0; i < count; i++)
        if (granted[i] == MQTT_BAD_SUBSCRIBE || granted[i] < 0 || granted[i] > 2)
            FAILF("client %s: the broker refused the subscription to %s (granted 0x%x)", c->id,
                  topics[i], (unsigned)granted[i]);
    free(granted);
}

int harness_client_try_subscribe(harness_client *c, const char *topic, int qos)
{
    int code = 0;
    int rc = subscribe_codes(c, 1, &topic, qos, &code);

    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: subscribe to %s (QoS %d): no SUBACK: %s (%d)", c->id, topic, qos,
              paho_err(rc), rc);
    return code;
}

void harness_client_subscribe(harness_client *c, const char *topic, int qos)
{
    harness_client_subscribe_many(c, 1, &topic, qos);
}

/* Publishes len bytes, with MQTT 5 properties p (may be NULL; ignored under
 * MQTT 3.1.1 except retain), without waiting for the acknowledgement; see
 * harness_client_publish_async. */
static int publish_raw(harness_client *c, const char *topic, const void *payload, size_t len,
                       int qos, const harness_props *p, harness_ticket *ticket)
{
    MQTTClient_deliveryToken token = 0;
    harness_ticket t = {0, 0};
    int retain = p != NULL && p->retain;
    int rc;

    if (len > INT_MAX)
        FAILF("payload too long");
    if (qos > 0) {
        int64_t deadline = harness_now_ms() + CLIENT_TIMEOUT_MS;
        struct timespec ts = deadline_ts(deadline);
        pthread_mutex_lock(&c->mu);
        for (int i = 0;
             i < MAX_WAKEUPS && c->inflight >= c->window && !c->lost && harness_now_ms() < deadline;
             i++)
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->lost) {
            pthread_mutex_unlock(&c->mu);
            return MQTTCLIENT_DISCONNECTED;
        }
        if (c->inflight >= c->window) {
            pthread_mutex_unlock(&c->mu);
            FAILF("client %s: %d publishes unacknowledged for %d ms", c->id, c->inflight,
                  CLIENT_TIMEOUT_MS);
        }
        c->inflight++;
        pthread_mutex_unlock(&c->mu);
    }
    if (c->version == 5) {
        MQTTProperties props = MQTTProperties_initializer;
        MQTTProperty prop;
        MQTTResponse r;
        if (p != NULL && p->response_topic != NULL) {
            memset(&prop, 0, sizeof prop);
            prop.identifier = MQTTPROPERTY_CODE_RESPONSE_TOPIC;
            prop.value.data.data = (char *)p->response_topic;
            prop.value.data.len = (int)strlen(p->response_topic);
            if (MQTTProperties_add(&props, &prop) != 0)
                FAILF("client %s: cannot add a Response Topic", c->id);
        }
        if (p != NULL && p->corr != NULL) {
            memset(&prop, 0, sizeof prop);
            prop.identifier = MQTTPROPERTY_CODE_CORRELATION_DATA;
            prop.value.data.data = (char *)p->corr;
            prop.value.data.len = (int)p->corr_len;
            if (MQTTProperties_add(&props, &prop) != 0)
                FAILF("client %s: cannot add Correlation Data", c->id);
        }
        r = MQTTClient_publish5(c->mc, topic, (int)len, payload, qos, retain, &props, &token);
        rc = r.reasonCode < 0 ? r.reasonCode : MQTTCLIENT_SUCCESS;
        MQTTResponse_free(r);
        MQTTProperties_free(&props);
    } else {
        rc = MQTTClient_publish(c->mc, topic, (int)len, (void *)payload, qos, retain, &token);
    }
    pthread_mutex_lock(&c->mu);
    if (rc != MQTTCLIENT_SUCCESS) {
        if (qos > 0 && c->inflight > 0)
            c->inflight--;
    } else if (qos > 0) {
        if (token <= 0 || token >= TOKENS) {
            pthread_mutex_unlock(&c->mu);
            FAILF("client %s: Paho returned delivery token %d", c->id, token);
        }
        t.token = token;
        t.seq = ++c->sent[token];
    }
    pthread_mutex_unlock(&c->mu);
    if (ticket != NULL)
        *ticket = t;
    return rc;
}

int harness_client_publish_async(harness_client *c, const char *topic, const char *payload, int qos,
                                 harness_ticket *ticket)
{
    return publish_raw(c, topic, payload, strlen(payload), qos, NULL, ticket);
}

int harness_client_publish_bytes(harness_client *c, const char *topic, const void *payload,
                                 size_t len, int qos, const harness_props *props)
{
    harness_ticket t;
    int rc = publish_raw(c, topic, payload, len, qos, props, &t);
    int reason;

    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: publish to %s (QoS %d, %zu bytes): %s (%d)", c->id, topic, qos, len,
              paho_err(rc), rc);
    harness_client_wait_acked(c, t, CLIENT_TIMEOUT_MS);
    if (t.token == 0 || c->version != 5)
        return 0;
    pthread_mutex_lock(&c->mu);
    reason = c->reason[t.token];
    pthread_mutex_unlock(&c->mu);
    return reason;
}

void harness_client_set_window(harness_client *c, int window)
{
    if (window < 1 || window > HARNESS_MAX_WINDOW)
        FAILF("client %s: window %d out of 1..%d", c->id, window, HARNESS_MAX_WINDOW);
    pthread_mutex_lock(&c->mu);
    c->window = window;
    pthread_mutex_unlock(&c->mu);
}

void harness_client_publish(harness_client *c, const char *topic, const char *payload, int qos)
{
    harness_ticket t;
    int rc = harness_client_publish_async(c, topic, payload, qos, &t);

    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: publish to %s (QoS %d): %s (%d)", c->id, topic, qos, paho_err(rc), rc);
    harness_client_wait_acked(c, t, CLIENT_TIMEOUT_MS);
}

bool harness_client_acked(harness_client *c, harness_ticket ticket)
{
    bool acked;

    if (ticket.token == 0)
        return true;
    pthread_mutex_lock(&c->mu);
    acked = c->done[ticket.token] >= ticket.seq;
    pthread_mutex_unlock(&c->mu);
    return acked;
}

void harness_client_wait_acked(harness_client *c, harness_ticket ticket, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;
    struct timespec ts = deadline_ts(deadline);
    bool acked, lost;

    if (ticket.token == 0)
        return;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS && c->done[ticket.token] < ticket.seq && !c->lost &&
                    harness_now_ms() < deadline;
         i++)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    acked = c->done[ticket.token] >= ticket.seq;
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    if (!acked)
        FAILF("client %s: publish with token %d not acknowledged: %s", c->id, ticket.token,
              lost ? "connection lost" : "timed out");
}

harness_msg *harness_client_receive(harness_client *c, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct timespec ts = deadline_ts(deadline);
    harness_msg *m;
    bool oom;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS && c->head == NULL && harness_now_ms() < deadline; i++)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    m = c->head;
    if (m != NULL) {
        c->head = m->next;
        if (c->head == NULL)
            c->tail = NULL;
        m->next = NULL;
    }
    oom = c->oom;
    pthread_mutex_unlock(&c->mu);
    if (oom)
        FAILF("client %s: a received message was dropped for lack of memory", c->id);
    return m;
}

void harness_client_expect_none(harness_client *c, int timeout_ms, const char *what)
{
    harness_msg *m = harness_client_receive(c, timeout_ms);

    if (m != NULL)
        FAILF("client %s: expected %s, but got a message on %s: %.400s", c->id, what, m->topic,
              m->payload);
}

bool harness_client_wait_lost(harness_client *c, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;
    struct timespec ts = deadline_ts(deadline);
    bool lost;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS && !c->lost && harness_now_ms() < deadline; i++)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    return lost;
}

harness_msg *harness_client_receive_if(harness_client *c, harness_msg_pred *pred, void *arg,
                                       int timeout_ms)
{
    int64_t deadline = harness_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct timespec ts = deadline_ts(deadline);
    harness_msg *found = NULL;
    bool oom;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS; i++) {
        harness_msg *prev = NULL;
        for (harness_msg *m = c->head; m != NULL && found == NULL; prev = m, m = m->next) {
            if (!pred(m, arg))
                continue;
            if (prev != NULL)
                prev->next = m->next;
            else
                c->head = m->next;
            if (c->tail == m)
                c->tail = prev;
            m->next = NULL;
            found = m;
        }
        if (found != NULL || harness_now_ms() >= deadline)
            break;
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    oom = c->oom;
    pthread_mutex_unlock(&c->mu);
    if (oom)
        FAILF("client %s: a received message was dropped for lack of memory", c->id);
    return found;
}

bool harness_client_is_lost(harness_client *c)
{
    bool lost;

    pthread_mutex_lock(&c->mu);
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    return lost;
}

/* The filter of the UNSUBSCRIBE with which settle_deliveries waits for Paho's
 * thread: no test subscribes to it, so unsubscribing changes nothing. */
#define SETTLE_TOPIC "harness/settle"

/* Readies c for MQTTClient_disconnect, from the test's thread.
 *
 * MQTTClient_disconnect of a clean MQTT 3.1.1 session frees every message
 * still on the client's Paho queue. Paho's thread unlinks a message from that
 * queue only after on_message has returned (and freed it), under its own lock
 * and without telling anyone. A test that disconnects right after receiving a
 * message (harness_client_receive wakes up inside on_message) would free that
 * message a second time: a double free or heap-use-after-free between
 * MQTTClient_emptyMessageQueue and MQTTClient_freeMessage.
 *
 * So: first mark c (on_message leaves every later message alone), then make
 * one round trip that Paho's thread completes only after every delivery
 * begun before the mark: the UNSUBACK of an UNSUBSCRIBE of SETTLE_TOPIC.
 * Paho's thread reads one packet per turn and posts the UNSUBACK at the end
 * of that turn, after the turn's delivery and its unlinking.
 *
 * The plugin's pushes (protocol v1.1) come unasked at any time to a client
 * subscribed to a group, and one that arrived after the mark would be left
 * alone and leak. So a clean session first unsubscribes from every filter
 * it has (freeing what arrives meanwhile, as it drops it): past that
 * UNSUBACK the plugin pushes it nothing more. A persistent session keeps
 * its subscriptions for its next connection. An MQTT 5
 * client needs no round trip (Paho keeps its queue on disconnect, and its
 * handle lives until the thread stops: see g_graveyard), nor does a lost or
 * closed connection (Paho's thread emptied the queue itself, in turn). */
static void settle_deliveries(harness_client *c)
{
    int rc;

    pthread_mutex_lock(&c->mu);
    c->dropping = true;
    pthread_mutex_unlock(&c->mu);
    if (c->version != 5 && !c->persistent && c->nfilters > 0 && !harness_client_is_lost(c) &&
        MQTTClient_isConnected(c->mc)) {
        rc = MQTTClient_unsubscribeMany(c->mc, (int)c->nfilters, c->filters);
        if (rc != MQTTCLIENT_SUCCESS && !harness_client_is_lost(c))
            fprintf(stderr, "client %s: warning: no UNSUBACK of its filters: %s (%d)\n", c->id,
                    paho_err(rc), rc);
    }
    pthread_mutex_lock(&c->mu);
    c->hands_off = c->version != 5;
    pthread_mutex_unlock(&c->mu);
    if (c->version == 5 || harness_client_is_lost(c) || !MQTTClient_isConnected(c->mc))
        return;
    rc = MQTTClient_unsubscribe(c->mc, SETTLE_TOPIC);
    if (rc != MQTTCLIENT_SUCCESS && !harness_client_is_lost(c))
        fprintf(stderr, "client %s: warning: no UNSUBACK before the disconnect: %s (%d)\n", c->id,
                paho_err(rc), rc);
}

void harness_client_disconnect_with_will(harness_client *c)
{
    int rc;

    if (c->version != 5)
        FAILF("client %s: only an MQTT 5 client can ask for its Will on disconnect", c->id);
    settle_deliveries(c);
    rc = MQTTClient_disconnect5(c->mc, 1000, MQTTREASONCODE_DISCONNECT_WITH_WILL_MESSAGE, NULL);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: disconnect with Will: %s (%d)", c->id, paho_err(rc), rc);
    harness_client_destroy(c);
}

const char *harness_client_id(const harness_client *c)
{
    return c->id;
}

void harness_client_disconnect(harness_client *c)
{
    int rc;
    bool lost;

    settle_deliveries(c);
    rc = MQTTClient_disconnect(c->mc, 1000);
    pthread_mutex_lock(&c->mu);
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    if (rc != MQTTCLIENT_SUCCESS && !lost)
        FAILF("client %s: disconnect: %s (%d)", c->id, paho_err(rc), rc);
    harness_client_destroy(c);
}

#define STOP_WAIT_MS 10000 /* Paho's thread must have stopped within this */

/* Once no client lives: stops Paho's thread, then destroys the Paho handles
 * of the buried clients and frees them (see g_graveyard). */
static void flush_graveyard(void)
{
    harness_client *c;
    int rc = MQTTCLIENT_FAILURE, n = 0;

    /* A client destroyed without a DISCONNECT may still be connected as far
     * as Paho knows (its broker died unnoticed): disconnect it, so that
     * Paho's thread has no connection left. */
    c = g_graveyard;
    for (int i = 0; c != NULL && i < INT_MAX; i++, c = c->buried) {
        n++;
        if (MQTTClient_isConnected(c->mc)) {
            settle_deliveries(c);
            MQTTClient_disconnect(c->mc, 0);
        }
    }
    /* MQTTClient_disconnect stops Paho's thread, and waits for it, when no
     * handle is connected any more. The last connection may have ended
     * without one (lost, or refused): this call makes sure. */
    MQTTClient_disconnect(g_graveyard->mc, 0);
    /* MQTTClient_receive refuses (MQTTCLIENT_FAILURE) while Paho's thread
     * runs; on a disconnected handle it then says MQTTCLIENT_DISCONNECTED. */
    for (int i = 0; i < STOP_WAIT_MS / 10; i++) {
        char *topic = NULL;
        int topic_len = 0;
        MQTTClient_message *msg = NULL;

        rc = MQTTClient_receive(g_graveyard->mc, &topic, &topic_len, &msg, 0);
        if (msg != NULL)
            MQTTClient_freeMessage(&msg);
        if (topic != NULL)
            MQTTClient_free(topic);
        if (rc != MQTTCLIENT_FAILURE)
            break;
        harness_sleep_ms(10);
    }
    if (rc == MQTTCLIENT_FAILURE) {
        /* Freeing now could crash that thread: leak them instead. */
        fprintf(stderr,
                "warning: Paho's thread still runs %d ms after the last disconnect; "
                "%d client(s) left unfreed\n",
                STOP_WAIT_MS, n);
        g_graveyard = NULL;
        return;
    }
    for (int i = 0; g_graveyard != NULL && i < INT_MAX; i++) {
        harness_client *next = g_graveyard->buried;
        MQTTClient_destroy(&g_graveyard->mc);
        free_client(g_graveyard);
        g_graveyard = next;
    }
}

void harness_client_destroy(harness_client *c)
{
    if (c == NULL)
        return;
    /* No MQTTClient_destroy yet: Paho's thread may be about to use the handle
     * (see g_graveyard). What still arrives is dropped. */
    pthread_mutex_lock(&c->mu);
    c->dropping = true;
    pthread_mutex_unlock(&c->mu);
    g_live_clients--;
    c->buried = g_graveyard;
    g_graveyard = c;
    if (g_live_clients == 0)
        flush_graveyard();
}

void harness_msg_free(harness_msg *m)
{
    if (m == NULL)
        return;
    free(m->topic);
    free(m->payload);
    free(m->corr);
    free(m);
}

/* ===========================================================================
 * JSON and the chat protocol
 * ========================================================================= */

/* Fails the test, showing the JSON the complaint is about. */
static _Noreturn void fail_json(const cJSON *json, const char *what, const char *key)
{
    char *text = cJSON_PrintUnformatted(json);

    FAILF("%s%s%s in %.600s", what, key != NULL ? " " : "", key != NULL ? key : "",
          text != NULL ? text : "(unprintable JSON)");
}

cJSON *harness_json_object(const harness_msg *m)
{
    cJSON *json = cJSON_ParseWithLength(m->payload, m->len);

    if (!cJSON_IsObject(json))
        FAILF("message on %s is not a JSON object: %.600s", m->topic, m->payload);
    return json;
}

int64_t harness_json_int(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    double d;

    if (!cJSON_IsNumber(item))
        fail_json(obj, "missing or non-numeric field", key);
    d = item->valuedouble;
    if (!(d >= -9.0e15 && d <= 9.0e15) || (double)(int64_t)d != d)
        fail_json(obj, "non-integer field", key);
    return (int64_t)d;
}

const char *harness_json_str(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (!cJSON_IsString(item) || item->valuestring == NULL)
        fail_json(obj, "missing or non-string field", key);
    return item->valuestring;
}

bool harness_json_bool(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);

    if (item == NULL)
        return false;
    if (!cJSON_IsBool(item))
        fail_json(obj, "non-boolean field", key);
    return cJSON_IsTrue(item);
}

bool harness_page_parse(const harness_msg *m, harness_page *p)
{
    const cJSON *responses, *entry;
    cJSON *root;
    int n;

    memset(p, 0, sizeof *p);
    if (strcmp(m->topic, HARNESS_RESPONSE_TOPIC) != 0)
        return false;
    root = harness_json_object(m);
    responses = cJSON_GetObjectItemCaseSensitive(root, "responses");
    if (!cJSON_IsArray(responses))
        fail_json(root, "no \"responses\" array", NULL);
    if ((n = cJSON_GetArraySize(responses)) != 1)
        fail_json(root, "a replay page must be one message with one entry, not this", NULL);
    entry = cJSON_GetArrayItem(responses, 0);
    if (!cJSON_IsObject(entry))
        fail_json(root, "a response entry is not an object", NULL);
    if (cJSON_GetObjectItemCaseSensitive(entry, "error") != NULL)
        fail_json(root, "unexpected error entry", NULL);
    if (strcmp(harness_json_str(entry, "command"), "replay") != 0)
        fail_json(root, "expected a replay page, got", "another command");
    p->root = root;
    p->group = harness_json_str(entry, "group");
    p->messages = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    if (!cJSON_IsArray(p->messages))
        fail_json(root, "no \"messages\" array", NULL);
    p->count = (size_t)cJSON_GetArraySize(p->messages);
    p->first = harness_json_int(entry, "first");
    p->last = harness_json_int(entry, "last");
    p->head = harness_json_int(entry, "head");
    p->more = harness_json_bool(entry, "more");
    p->truncated = harness_json_bool(entry, "truncated");
    p->at_ms = m->at_ms;
    return true;
}

void harness_page_free(harness_page *p)
{
    cJSON_Delete(p->root);
    memset(p, 0, sizeof *p);
}

void harness_ack(harness_client *c, const char *group, int64_t id, int qos)
{
    char topic[300], payload[32];

    snprintf(topic, sizeof topic, "chat/%s/ack", group);
    snprintf(payload, sizeof payload, "%lld", (long long)id);
    harness_client_publish(c, topic, payload, qos);
}

/* Checks one page of a catch-up against what g expects next; returns whether
 * the group is now complete. */
static bool check_page(harness_client *c, harness_catchup *g, int64_t *next, const harness_page *p,
                       size_t page_size, harness_envelope_fn *fn, void *arg)
{
    const cJSON *env;

    if (p->count < 1 || p->count > page_size)
        fail_json(p->root, "page size out of 1..page_size", NULL);
    if (p->truncated)
        fail_json(p->root, "truncated page, yet nothing was deleted", NULL);
    if (g->head < 0)
        g->head = p->head; /* learnt from the first page */
    ASSERTF(p->head == g->head, "group %s: page says head %lld, expected %lld", g->group,
            (long long)p->head, (long long)g->head);
    ASSERTF(p->first == *next,
            "group %s: page starts at %lld, expected %lld (first %lld last %lld)", g->group,
            (long long)p->first, (long long)*next, (long long)p->first, (long long)p->last);
    cJSON_ArrayForEach(env, p->messages)
    {
        int64_t id = harness_json_int(env, "id");
        ASSERTF(id == *next,
                "group %s: envelope id %lld where %lld was expected: ids must come exactly once, "
                "in order (page first %lld last %lld)",
                g->group, (long long)id, (long long)*next, (long long)p->first, (long long)p->last);
        if (strcmp(harness_json_str(env, "group"), g->group) != 0)
            fail_json(env, "envelope of another group in a page of", g->group);
        if (harness_json_str(env, "from")[0] == '\0')
            fail_json(env, "empty", "from");
        if (harness_json_int(env, "ts") <= 0)
            fail_json(env, "non-positive", "ts");
        if (fn != NULL)
            fn(arg, g->group, env);
        (*next)++;
    }
    ASSERTF(p->last == *next - 1, "group %s: page says last %lld, its envelopes end at %lld",
            g->group, (long long)p->last, (long long)(*next - 1));
    ASSERTF(p->last <= p->head, "group %s: page last %lld above head %lld", g->group,
            (long long)p->last, (long long)p->head);
    ASSERTF(p->more == (p->last < p->head), "group %s: page %lld..%lld of head %lld says more=%s",
            g->group, (long long)p->first, (long long)p->last, (long long)p->head,
            p->more ? "true" : "false");
    g->pages++;
    if (p->count > g->largest)
        g->largest = p->count;
    harness_ack(c, g->group, p->last, 0);
    return p->last == g->head;
}

void harness_catch_up(harness_client *c, harness_catchup *groups, size_t ngroups, size_t page_size,
                      int timeout_ms, harness_envelope_fn *fn, void *arg)
{
    int64_t *next = calloc(ngroups, sizeof *next);
    bool *done = calloc(ngroups, sizeof *done);
    int64_t deadline = harness_now_ms() + timeout_ms;
    size_t remaining = 0;

    if (next == NULL || done == NULL)
        FAILF("out of memory");
    for (size_t i = 0; i < ngroups; i++) {
        next[i] = groups[i].from;
        groups[i].pages = 0;
        groups[i].largest = 0;
        groups[i].head = groups[i].to;
        groups[i].done_ms = 0;
        done[i] = groups[i].to >= 0 && groups[i].from > groups[i].to;
        if (!done[i])
            remaining++;
    }
    for (long iter = 0; remaining > 0 && iter < 100000000L; iter++) {
        int64_t left = deadline - harness_now_ms();
        harness_msg *m;
        harness_page p;
        size_t i;

        if (left <= 0) {
            for (i = 0; i < ngroups; i++)
                if (!done[i])
                    fprintf(stderr, "group %s: next id %lld, expected up to %lld, %zu pages\n",
                            groups[i].group, (long long)next[i], (long long)groups[i].head,
                            groups[i].pages);
            FAILF("client %s: catch-up of %zu group(s) not complete after %d ms", c->id, remaining,
                  timeout_ms);
        }
        if ((m = harness_client_receive(c, (int)left)) == NULL)
            continue;
        if (!harness_page_parse(m, &p))
            FAILF("client %s: during catch-up, unexpected message on %s: %.400s", c->id, m->topic,
                  m->payload);
        for (i = 0; i < ngroups; i++)
            if (strcmp(groups[i].group, p.group) == 0)
                break;
        if (i == ngroups)
            fail_json(p.root, "page of a group this device does not catch up on:", p.group);
        if (done[i])
            fail_json(p.root, "page after the catch-up of its group completed (a duplicate?)",
                      p.group);
        if (check_page(c, &groups[i], &next[i], &p, page_size, fn, arg)) {
            done[i] = true;
            groups[i].done_ms = p.at_ms;
            remaining--;
        }
        harness_page_free(&p);
        harness_msg_free(m);
    }
    /* An ack at QoS 1 after the QoS 0 ones: when the broker acknowledges it,
     * it has applied them all (it reads one connection in order). */
    for (size_t i = 0; i < ngroups; i++)
        if (groups[i].pages > 0)
            harness_ack(c, groups[i].group, groups[i].head, 1);
    harness_client_expect_none(c, 500, "no page after the catch-up completed");
    free(next);
    free(done);
}

/* ===========================================================================
 * Requests and responses
 * ========================================================================= */

bool harness_is_push(const char *payload, size_t len)
{
    static const char reads[] = "{\"responses\":[{\"command\":\"reads\"";
    static const char presence[] = "{\"responses\":[{\"command\":\"presence\"";
    const cJSON *e;
    bool push = true;

    /* Most responses are answers and pages: only these two starts parse. */
    if ((len < sizeof reads - 1 || memcmp(payload, reads, sizeof reads - 1) != 0) &&
        (len < sizeof presence - 1 || memcmp(payload, presence, sizeof presence - 1) != 0))
        return false;
    cJSON *root = cJSON_ParseWithLength(payload, len);
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "responses");
    cJSON_ArrayForEach(e, entries)
    {
        const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
        bool is_reads = cJSON_IsString(cmd) && strcmp(cmd->valuestring, "reads") == 0;
        bool is_presence = cJSON_IsString(cmd) && strcmp(cmd->valuestring, "presence") == 0 &&
                           !cJSON_GetObjectItemCaseSensitive(e, "members") &&
                           !cJSON_GetObjectItemCaseSensitive(e, "error");
        push = push && (is_reads || is_presence) &&
               !cJSON_GetObjectItemCaseSensitive(e, "correlationData");
    }
    push = push && cJSON_IsArray(entries);
    cJSON_Delete(root);
    return push;
}

/* Whether m is on the response topic and is not a replay page. */
static bool is_answer(const harness_msg *m, void *arg)
{
    const char *topic = arg != NULL ? arg : HARNESS_RESPONSE_TOPIC;
    cJSON *root;
    const cJSON *first, *command;
    bool answer;

    if (strcmp(m->topic, topic) != 0)
        return false;
    root = cJSON_ParseWithLength(m->payload, m->len);
    first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "responses"), 0);
    command = cJSON_GetObjectItemCaseSensitive(first, "command");
    /* Anything that is not a replay page counts (an error entry of a
     * command named "replay" too): the caller checks it and fails on
     * garbage. */
    answer = !(cJSON_IsString(command) && strcmp(command->valuestring, "replay") == 0 &&
               cJSON_GetObjectItemCaseSensitive(first, "error") == NULL);
    cJSON_Delete(root);
    return answer;
}

/* Parses a response and checks its outer shape. */
static cJSON *parse_response(const harness_msg *m)
{
    cJSON *root = harness_json_object(m);
    const cJSON *responses = cJSON_GetObjectItemCaseSensitive(root, "responses");

    if (!cJSON_IsArray(responses) || cJSON_GetArraySize(root) != 1)
        fail_json(root, "a response must be exactly {\"responses\":[...]}, not", NULL);
    return root;
}

cJSON *harness_client_response_on(harness_client *c, const char *topic, int timeout_ms)
{
    harness_msg *m = harness_client_receive_if(c, is_answer, (void *)topic, timeout_ms);
    cJSON *root;

    if (m == NULL)
        FAILF("client %s: no response on %s within %d ms%s", c->id,
              topic != NULL ? topic : HARNESS_RESPONSE_TOPIC, timeout_ms,
              harness_client_is_lost(c) ? " (its connection was lost)" : "");
    root = parse_response(m);
    harness_msg_free(m);
    return root;
}

cJSON *harness_client_response(harness_client *c, int timeout_ms)
{
    return harness_client_response_on(c, NULL, timeout_ms);
}

cJSON *harness_request_bytes(harness_client *c, const void *request, size_t len, int timeout_ms)
{
    harness_client_publish_bytes(c, HARNESS_CONTROL_TOPIC, request, len, 1, NULL);
    return harness_client_response(c, timeout_ms);
}

cJSON *harness_request(harness_client *c, const char *request, int timeout_ms)
{
    return harness_request_bytes(c, request, strlen(request), timeout_ms);
}

int harness_response_count(const cJSON *resp)
{
    return cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(resp, "responses"));
}

const cJSON *harness_response_entry(const cJSON *resp, int i)
{
    const cJSON *entry = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(resp, "responses"), i);

    if (!cJSON_IsObject(entry)) {
        char what[64];
        snprintf(what, sizeof what, "no response entry %d (an object) in", i);
        fail_json(resp, what, NULL);
    }
    return entry;
}

const cJSON *harness_response_only(const cJSON *resp)
{
    if (harness_response_count(resp) != 1)
        fail_json(resp, "expected exactly one response entry, got", NULL);
    return harness_response_entry(resp, 0);
}

void harness_expect_ok(const cJSON *entry, const char *command, const char *group)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
    const cJSON *grp = cJSON_GetObjectItemCaseSensitive(entry, "group");

    if (cJSON_GetObjectItemCaseSensitive(entry, "error") != NULL)
        fail_json(entry, "unexpected error entry:", NULL);
    if (!cJSON_IsString(cmd) || strcmp(cmd->valuestring, command) != 0)
        fail_json(entry, "expected a success entry for command", command);
    if (group != NULL && (!cJSON_IsString(grp) || strcmp(grp->valuestring, group) != 0))
        fail_json(entry, "expected a success entry for group", group);
}

void harness_expect_error(const cJSON *entry, const char *command, const char *group,
                          const char *cid, const char *error)
{
    const cJSON *item;
    int fields = 0;

    cJSON_ArrayForEach(item, entry)
    {
        const char *want = NULL;
        fields++;
        if (strcmp(item->string, "command") == 0)
            want = command;
        else if (strcmp(item->string, "group") == 0)
            want = group;
        else if (strcmp(item->string, "cid") == 0)
            want = cid;
        else if (strcmp(item->string, "error") == 0)
            want = error;
        if (want == NULL || !cJSON_IsString(item) || strcmp(item->valuestring, want) != 0) {
            char expect[1200];
            snprintf(expect, sizeof expect,
                     "(expected {\"command\":\"%s\"%s%s%s%s%s%s,\"error\":\"%s\"}) got", command,
                     group != NULL ? ",\"group\":\"" : "", group != NULL ? group : "",
                     group != NULL ? "\"" : "", cid != NULL ? ",\"cid\":\"" : "",
                     cid != NULL ? cid : "", cid != NULL ? "\"" : "", error);
            fail_json(entry, "wrong or unexpected field", expect);
        }
    }
    if (fields != 2 + (group != NULL) + (cid != NULL)) {
        char expect[1200];
        snprintf(expect, sizeof expect, "(expected command%s%s and error \"%s\") in",
                 group != NULL ? ", group" : "", cid != NULL ? ", cid" : "", error);
        fail_json(entry, "missing fields", expect);
    }
}

/* Checks one fetch or history entry and appends its ids to ids[*n]. */
static void page_ids(const cJSON *entry, const char *command, const char *group, int64_t head,
                     int64_t *ids, size_t max, size_t *n, bool *more)
{
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    const cJSON *env;

    harness_expect_ok(entry, command, group);
    if (!cJSON_IsArray(messages))
        fail_json(entry, "no messages array in", command);
    ASSERTF(harness_json_int(entry, "head") == head, "%s of %s says head %lld, expected %lld",
            command, group, (long long)harness_json_int(entry, "head"), (long long)head);
    *more = harness_json_bool(entry, "more");
    cJSON_ArrayForEach(env, messages)
    {
        if (*n >= max)
            fail_json(entry, "more messages than the head allows in", command);
        if (strcmp(harness_json_str(env, "group"), group) != 0)
            fail_json(env, "envelope of another group in", group);
        ids[(*n)++] = harness_json_int(env, "id");
    }
}

void harness_expect_store(harness_client *c, const char *group, int64_t head)
{
    int64_t *ids = calloc((size_t)head + 1, sizeof *ids);
    size_t n = 0;
    bool more = true;
    char req[512];

    if (ids == NULL)
        FAILF("out of memory");
    /* Forward from the start, page by page. */
    for (int64_t after = 0, i = 0; more && i <= head; i++) {
        cJSON *resp;
        size_t before = n;
        snprintf(req, sizeof req,
                 "{\"commands\":[{\"command\":\"fetch\",\"group\":\"%s\",\"after\":%lld}]}", group,
                 (long long)after);
        resp = harness_request(c, req, 5000);
        page_ids(harness_response_only(resp), "fetch", group, head, ids, (size_t)head + 1, &n,
                 &more);
        cJSON_Delete(resp);
        ASSERTF(n > before || !more, "fetch of %s after %lld: empty page with more=true", group,
                (long long)after);
        if (n > before)
            after = ids[n - 1];
    }
    ASSERTF(n == (size_t)head, "fetch of %s from the start returned %zu messages, head is %lld",
            group, n, (long long)head);
    for (size_t k = 0; k < n; k++)
        ASSERTF(ids[k] == (int64_t)k + 1, "fetch of %s: message %zu has id %lld, expected %zu",
                group, k, (long long)ids[k], k + 1);
    /* Backward from the head, page by page: newest first. */
    n = 0;
    more = true;
    for (int64_t before_id = head + 1, i = 0; more && i <= head; i++) {
        cJSON *resp;
        size_t before = n;
        snprintf(req, sizeof req,
                 "{\"commands\":[{\"command\":\"history\",\"group\":\"%s\",\"before\":%lld}]}",
                 group, (long long)before_id);
        resp = harness_request(c, req, 5000);
        page_ids(harness_response_only(resp), "history", group, head, ids, (size_t)head + 1, &n,
                 &more);
        cJSON_Delete(resp);
        ASSERTF(n > before || !more, "history of %s before %lld: empty page with more=true", group,
                (long long)before_id);
        if (n > before)
            before_id = ids[n - 1];
    }
    ASSERTF(n == (size_t)head, "history of %s returned %zu messages, head is %lld", group, n,
            (long long)head);
    for (size_t k = 0; k < n; k++)
        ASSERTF(ids[k] == head - (int64_t)k,
                "history of %s: message %zu has id %lld, expected %lld (newest first)", group, k,
                (long long)ids[k], (long long)(head - (int64_t)k));
    free(ids);
}

bool harness_sync_find(const cJSON *entry, const char *group, int64_t *head, int64_t *acked,
                       int64_t *unread)
{
    const cJSON *groups = cJSON_GetObjectItemCaseSensitive(entry, "groups");
    const cJSON *g;
    bool found = false;

    harness_expect_ok(entry, "sync", NULL);
    if (!cJSON_IsArray(groups))
        fail_json(entry, "no groups array in", "sync");
    cJSON_ArrayForEach(g, groups)
    {
        if (strcmp(harness_json_str(g, "group"), group) != 0)
            continue;
        if (found)
            fail_json(entry, "sync lists a group twice:", group);
        found = true;
        if (head != NULL)
            *head = harness_json_int(g, "head");
        if (acked != NULL)
            *acked = harness_json_int(g, "acked");
        if (unread != NULL)
            *unread = harness_json_int(g, "unread");
        ASSERTF(harness_json_int(g, "unread") ==
                    harness_json_int(g, "head") - harness_json_int(g, "acked"),
                "sync entry of %s: unread is not head - acked", group);
    }
    return found;
}
