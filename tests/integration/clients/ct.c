/* ct.c: brokers, child processes and failure reports for the client tests. */
#include "ct.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef CHAT_MOSQUITTO_BIN
#error "CHAT_MOSQUITTO_BIN must name the mosquitto binary"
#endif
#ifndef CHAT_PLUGIN_PATH
#error "CHAT_PLUGIN_PATH must name mosquitto_chat.so"
#endif

extern char **environ;

#define MAX_BROKERS 4
#define MAX_CHILDREN 64
#define READY_MS 10000
#define STOP_MS 10000
#define START_ATTEMPTS 5
#define TAIL_BYTES 6000
#define PATH_LEN 512

struct ct_broker {
    char dir[128]; /* <test dir>/broker<n> */
    char conf[PATH_LEN];
    char log[PATH_LEN];
    char out[PATH_LEN];
    char db[PATH_LEN];
    char **opts;
    char **lines; /* broker configuration lines after ours */
    int port;
    pid_t pid; /* 0 when not running */
};

/* A PostgreSQL cluster of the test's (tests/pg/pgcluster.sh). */
#define MAX_PGS 2
struct ct_pg {
    char dir[64]; /* /tmp/mqchat-pg-XXXXXX, the postgres user's */
    int port;
    bool running;
};
static ct_pg *g_pgs[MAX_PGS];
static int g_ndbs;

static char g_name[128] = "client test";
static char g_dir[64]; /* /tmp/mqchat-test-XXXXXX */
static int64_t g_t0;
static bool g_failing;
static ct_broker *g_brokers[MAX_BROKERS];
static pid_t g_children[MAX_CHILDREN];
static int g_nbrokers;

/* LeakSanitizer, in sanitizer builds: Paho MQTT C 1.3.12 leaks commands
 * still queued when a connection breaks (the MQTT 5 properties of publishes
 * copied in MQTTAsync_send, the topic lists of subscribes; seen in CI after
 * the broker kills here), from its own threads, whose frames carry no
 * symbols. Allocations made inside Paho are suppressed; the library's own
 * allocations stay checked. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:MQTTAsync_send\nleak:libpaho-mqtt3as.so\n";
}

/* Paho has no frame pointers: without the slow unwinder a leak's stack
 * stops inside Paho and names neither MQTTAsync_send nor our caller. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "fast_unwind_on_malloc=0";
}

/* ===========================================================================
 * Basics
 * ========================================================================= */

int64_t ct_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ct_sleep_ms(int ms)
{
    struct timespec ts;

    if (ms <= 0)
        return;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    for (int i = 0; i < 100 && nanosleep(&ts, &ts) != 0 && errno == EINTR; i++)
        ;
}

void ct_log(const char *fmt, ...)
{
    int64_t t = ct_now_ms() - g_t0;
    char line[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("[%3d.%03ds] %s\n", (int)(t / 1000), (int)(t % 1000), line);
    fflush(stdout);
}

static void print_tail(const char *path)
{
    FILE *f = fopen(path, "rb");
    char buf[1024];
    long size;
    size_t n;

    if (f == NULL)
        return;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0) {
        fseek(f, size > TAIL_BYTES ? size - TAIL_BYTES : 0, SEEK_SET);
        fprintf(stderr, "----- %s (last %ld bytes) -----\n", path,
                size > TAIL_BYTES ? (long)TAIL_BYTES : size);
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, stderr);
        fprintf(stderr, "----- end of %s -----\n", path);
    }
    fclose(f);
}

_Noreturn void ct_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "%s:%d: FAIL %s: ", file, line, g_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (!g_failing) {
        g_failing = true;
        for (int i = 0; i < MAX_CHILDREN; i++) {
            if (g_children[i] > 0) {
                kill(g_children[i], SIGKILL);
                waitpid(g_children[i], NULL, 0);
            }
        }
        for (int i = 0; i < MAX_BROKERS; i++) {
            ct_broker *b = g_brokers[i];
            if (b == NULL)
                continue;
            if (b->pid > 0) {
                kill(b->pid, SIGKILL);
                waitpid(b->pid, NULL, 0);
                b->pid = 0;
            }
            fprintf(stderr, "broker on 127.0.0.1:%d, config %s\n", b->port, b->conf);
            print_tail(b->out);
            print_tail(b->log);
        }
        for (int i = 0; i < MAX_PGS; i++) {
            if (g_pgs[i] != NULL && g_pgs[i]->running) {
                char *argv[] = {(char *)CHAT_PGCLUSTER, (char *)"stop", g_pgs[i]->dir,
                                (char *)"immediate", NULL};
                pid_t pid = fork();
                if (pid == 0) {
                    execv(argv[0], argv);
                    _exit(127);
                }
                if (pid > 0)
                    waitpid(pid, NULL, 0);
                fprintf(stderr, "PostgreSQL cluster %s (port %d) kept\n", g_pgs[i]->dir,
                        g_pgs[i]->port);
            }
        }
        fprintf(stderr, "kept %s for inspection\n", g_dir);
    }
    fflush(NULL);
    _exit(1); /* Paho's threads may still run: no atexit, no leak report */
}

_Noreturn void ct_check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ct_fail(file, line, "check failed: %s: %s", cond, msg);
}

static int remove_tree(const char *path, int depth)
{
    struct stat st;
    struct dirent *e;
    char child[PATH_LEN];
    DIR *d;
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

void ct_init(const char *name)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
    snprintf(g_name, sizeof g_name, "%s", name);
    g_t0 = ct_now_ms();
    snprintf(g_dir, sizeof g_dir, "/tmp/mqchat-test-XXXXXX");
    if (mkdtemp(g_dir) == NULL)
        FAIL("mkdtemp: %s", strerror(errno));
    ct_log("%s: start, files in %s", g_name, g_dir);
}

int ct_pass(void)
{
    if (getenv("CT_KEEP") != NULL)
        ct_log("kept %s (CT_KEEP is set)", g_dir);
    else if (remove_tree(g_dir, 6) != 0)
        ct_log("could not remove %s", g_dir);
    ct_log("PASS %s", g_name);
    return 0;
}

const char *ct_dir(void)
{
    return g_dir;
}

const char *ct_path(char *buf, size_t size, const char *name)
{
    if (snprintf(buf, size, "%s/%s", g_dir, name) >= (int)size)
        FAIL("path too long: %s/%s", g_dir, name);
    return buf;
}

char *ct_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0, got;

    if (f == NULL) {
        if (errno == ENOENT)
            return NULL;
        FAIL("open %s: %s", path, strerror(errno));
    }
    do {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            if ((buf = realloc(buf, cap)) == NULL)
                FAIL("out of memory");
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    if (buf == NULL && (buf = malloc(1)) == NULL)
        FAIL("out of memory");
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

void ct_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0)
        FAIL("cannot write %s: %s", path, strerror(errno));
}

int ct_free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    if (fd < 0)
        FAIL("socket: %s", strerror(errno));
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        FAIL("bind 127.0.0.1:0: %s", strerror(errno));
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* ===========================================================================
 * Processes
 * ========================================================================= */

static void track(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (g_children[i] == 0) {
            g_children[i] = pid;
            return;
        }
    }
    FAIL("more than %d children at once", MAX_CHILDREN);
}

static void untrack(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == pid)
            g_children[i] = 0;
}

/* Forks and execs argv with the given files and environment; everything the
 * child uses is prepared before the fork. */
static pid_t spawn_env(char *const argv[], char *const envp[], const char *in_path,
                       const char *out_path, const char *err_path)
{
    struct sigaction dfl;
    sigset_t none;
    pid_t pid;

    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigemptyset(&none);
    fflush(NULL);
    if ((pid = fork()) < 0)
        FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Brokers and mqchat die with the test, even if it crashes. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int in = open(in_path ? in_path : "/dev/null", O_RDONLY);
        int out = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        int err = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in < 0 || out < 0 || err < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        sigaction(SIGPIPE, &dfl, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    track(pid);
    return pid;
}

pid_t ct_spawn(char *const argv[], const char *in_path, const char *out_path, const char *err_path)
{
    return spawn_env(argv, environ, in_path, out_path, err_path);
}

static int decode(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 255;
}

bool ct_ended(pid_t pid, int *status)
{
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);

    if (r == 0)
        return false;
    if (r != pid)
        FAIL("waitpid %d: %s", (int)pid, strerror(errno));
    untrack(pid);
    if (status != NULL)
        *status = decode(st);
    return true;
}

int ct_wait(pid_t pid, int timeout_ms)
{
    int64_t deadline = ct_now_ms() + timeout_ms;
    int status = 0;

    for (int i = 0; i < timeout_ms / 5 + 10; i++) {
        if (ct_ended(pid, &status))
            return status;
        if (ct_now_ms() >= deadline)
            break;
        ct_sleep_ms(5);
    }
    FAIL("process %d did not end within %d ms", (int)pid, timeout_ms);
}

void ct_signal(pid_t pid, int sig)
{
    if (kill(pid, sig) != 0)
        FAIL("kill(%d, %d): %s", (int)pid, sig, strerror(errno));
}

int ct_run(char *const argv[], const char *in_path, const char *out_path, const char *err_path,
           int timeout_ms)
{
    return ct_wait(ct_spawn(argv, in_path, out_path, err_path), timeout_ms);
}

/* ===========================================================================
 * Broker
 * ========================================================================= */

static bool probe(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    bool ok;

    if (fd < 0)
        FAIL("socket: %s", strerror(errno));
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static void write_config(const ct_broker *b)
{
    FILE *f = fopen(b->conf, "w");

    if (f == NULL)
        FAIL("cannot write %s: %s", b->conf, strerror(errno));
    fprintf(f,
            "# Written by the client tests.\n"
            "listener %d 127.0.0.1\n"
            "allow_anonymous true\n"
            "# CI runs as root: stay root so the temporary store stays writable.\n"
            "user root\n"
            "set_tcp_nodelay true\n"
            "persistence false\n"
            "log_dest file %s\n"
            "log_type all\n"
            "plugin %s\n"
            "plugin_opt_db_path %s\n",
            b->port, b->log, CHAT_PLUGIN_PATH, b->db);
    for (size_t i = 0; b->opts[i] != NULL; i++)
        fprintf(f, "plugin_opt_%s\n", b->opts[i]);
    for (size_t i = 0; b->lines[i] != NULL; i++)
        fprintf(f, "%s\n", b->lines[i]);
    if (fclose(f) != 0)
        FAIL("cannot write %s: %s", b->conf, strerror(errno));
}

/* Our environment, with LD_PRELOAD replaced by CHAT_BROKER_PRELOAD if set
 * (an instrumented plugin in an uninstrumented broker needs libasan). */
static void launch(ct_broker *b)
{
    static char preload[4096];
    const char *want = getenv("CHAT_BROKER_PRELOAD");
    char *env[1024];
    char *argv[] = {(char *)CHAT_MOSQUITTO_BIN, (char *)"-c", b->conf, NULL};
    size_t k = 0;

    for (size_t i = 0; environ[i] != NULL && k + 2 < sizeof env / sizeof env[0]; i++) {
        if (want != NULL && want[0] != '\0' && strncmp(environ[i], "LD_PRELOAD=", 11) == 0)
            continue;
        env[k++] = environ[i];
    }
    if (want != NULL && want[0] != '\0') {
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s", want);
        env[k++] = preload;
    }
    env[k] = NULL;
    b->pid = spawn_env(argv, env, NULL, b->out, b->out);
    untrack(b->pid); /* brokers are killed through g_brokers */
}

/* Starts b on b->port; returns false if it exited at start. */
static bool start_on_port(ct_broker *b)
{
    int64_t deadline = ct_now_ms() + READY_MS;
    int status;

    launch(b);
    for (int i = 0; i < READY_MS / 10 + 10; i++) {
        if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
            ct_log("broker exited at start (status %d); its output:", decode(status));
            print_tail(b->out);
            b->pid = 0;
            return false;
        }
        if (probe(b->port))
            return true;
        if (ct_now_ms() >= deadline)
            break;
        ct_sleep_ms(10);
    }
    FAIL("broker on port %d not ready after %d ms", b->port, READY_MS);
}

/* A copy of the NULL-terminated list (NULL: empty). */
static char **dup_list(const char *const *list)
{
    size_t n = 0;
    char **copy;

    while (list != NULL && list[n] != NULL)
        n++;
    if ((copy = calloc(n + 1, sizeof *copy)) == NULL)
        FAIL("out of memory");
    for (size_t i = 0; i < n; i++)
        if ((copy[i] = strdup(list[i])) == NULL)
            FAIL("out of memory");
    return copy;
}

static void free_list(char **list)
{
    for (size_t i = 0; list != NULL && list[i] != NULL; i++)
        free(list[i]);
    free(list);
}

/* Runs pgcluster.sh with args (NULL-terminated), its output in the test's
 * directory; fails the test when it fails. */
static void pgcluster(const char *const *args)
{
    char *argv[8];
    char out[PATH_LEN];
    size_t n = 0;

    argv[n++] = (char *)CHAT_PGCLUSTER;
    for (size_t i = 0; args[i] != NULL && n < 7; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    ct_path(out, sizeof out, "pgcluster.out");
    if (ct_run(argv, NULL, out, out, 120000) != 0) {
        print_tail(out);
        FAIL("pgcluster.sh %s failed", args[0]);
    }
}

/* With CHAT_TEST_PG_PORT set (scripts/test's pg stage), every broker whose
 * options do not name a store keeps its data in a database of its own on
 * that cluster: the same tests, against the postgresql backend. */
static void pg_switch(ct_broker *b)
{
    const char *port = getenv("CHAT_TEST_PG_PORT");
    char db[64], conninfo[256];
    size_t n = 0;

    if (port == NULL || port[0] == '\0')
        return;
    for (n = 0; b->opts[n] != NULL; n++)
        if (strncmp(b->opts[n], "store ", 6) == 0)
            return;
    snprintf(db, sizeof db, "ct_%d_%d", (int)getpid(), g_ndbs++);
    pgcluster((const char *const[]){"createdb", port, db, NULL});
    snprintf(conninfo, sizeof conninfo,
             "pg_conninfo host=127.0.0.1 port=%s user=postgres dbname=%s", port, db);
    char **more = realloc(b->opts, (n + 3) * sizeof *more);
    if (more == NULL || (more[n] = strdup("store postgresql")) == NULL ||
        (more[n + 1] = strdup(conninfo)) == NULL)
        FAIL("out of memory");
    more[n + 2] = NULL;
    b->opts = more;
}

ct_pg *ct_pg_start(bool sync_standby)
{
    ct_pg *pg = calloc(1, sizeof *pg);
    char port[16];
    int slot = -1;

    if (pg == NULL)
        FAIL("out of memory");
    for (int i = 0; i < MAX_PGS && slot < 0; i++)
        if (g_pgs[i] == NULL)
            slot = i;
    if (slot < 0)
        FAIL("more than %d PostgreSQL clusters", MAX_PGS);
    snprintf(pg->dir, sizeof pg->dir, "/tmp/mqchat-pg-XXXXXX");
    if (mkdtemp(pg->dir) == NULL)
        FAIL("mkdtemp: %s", strerror(errno));
    g_pgs[slot] = pg;
    pg->port = ct_free_port();
    snprintf(port, sizeof port, "%d", pg->port);
    pgcluster((const char *const[]){"init", pg->dir, port, sync_standby ? "sync" : NULL, NULL});
    pg->running = true;
    ct_log("PostgreSQL on 127.0.0.1:%d in %s", pg->port, pg->dir);
    return pg;
}

ct_pg *ct_pg_standby(const ct_pg *primary)
{
    ct_pg *pg = calloc(1, sizeof *pg);
    char pport[16], port[16];
    int slot = -1;

    if (pg == NULL)
        FAIL("out of memory");
    for (int i = 0; i < MAX_PGS && slot < 0; i++)
        if (g_pgs[i] == NULL)
            slot = i;
    if (slot < 0)
        FAIL("more than %d PostgreSQL clusters", MAX_PGS);
    snprintf(pg->dir, sizeof pg->dir, "/tmp/mqchat-pg-XXXXXX");
    if (mkdtemp(pg->dir) == NULL)
        FAIL("mkdtemp: %s", strerror(errno));
    g_pgs[slot] = pg;
    pg->port = ct_free_port();
    snprintf(pport, sizeof pport, "%d", primary->port);
    snprintf(port, sizeof port, "%d", pg->port);
    pgcluster((const char *const[]){"standby", pport, pg->dir, port, NULL});
    pg->running = true;
    ct_log("PostgreSQL standby on 127.0.0.1:%d in %s", pg->port, pg->dir);
    return pg;
}

void ct_pg_stop(ct_pg *pg, const char *mode)
{
    if (pg->running)
        pgcluster((const char *const[]){"stop", pg->dir, mode ? mode : "fast", NULL});
    pg->running = false;
}

void ct_pg_promote(ct_pg *pg)
{
    pgcluster((const char *const[]){"promote", pg->dir, NULL});
}

void ct_pg_createdb(const ct_pg *pg, const char *name)
{
    char port[16];
    snprintf(port, sizeof port, "%d", pg->port);
    pgcluster((const char *const[]){"createdb", port, name, NULL});
}

int ct_pg_port(const ct_pg *pg)
{
    return pg->port;
}

void ct_pg_destroy(ct_pg *pg)
{
    if (pg == NULL)
        return;
    ct_pg_stop(pg, "immediate");
    for (int i = 0; i < MAX_PGS; i++)
        if (g_pgs[i] == pg)
            g_pgs[i] = NULL;
    if (getenv("CT_KEEP") == NULL)
        remove_tree(pg->dir, 8);
    free(pg);
}

ct_broker *ct_broker_start(const char *const *opts)
{
    return ct_broker_start_with(opts, NULL);
}

ct_broker *ct_broker_start_with(const char *const *opts, const char *const *lines)
{
    ct_broker *b = calloc(1, sizeof *b);
    int slot = -1;

    if (b == NULL)
        FAIL("out of memory");
    for (int i = 0; i < MAX_BROKERS && slot < 0; i++)
        if (g_brokers[i] == NULL)
            slot = i;
    if (slot < 0)
        FAIL("more than %d brokers", MAX_BROKERS);
    g_brokers[slot] = b;
    snprintf(b->dir, sizeof b->dir, "%s/broker%d", g_dir, g_nbrokers++);
    snprintf(b->conf, sizeof b->conf, "%s/mosquitto.conf", b->dir);
    snprintf(b->log, sizeof b->log, "%s/mosquitto.log", b->dir);
    snprintf(b->out, sizeof b->out, "%s/broker.out", b->dir);
    snprintf(b->db, sizeof b->db, "%s/db", b->dir);
    if (mkdir(b->dir, 0700) != 0 || mkdir(b->db, 0700) != 0)
        FAIL("mkdir %s: %s", b->dir, strerror(errno));
    b->opts = dup_list(opts);
    b->lines = dup_list(lines);
    pg_switch(b);
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        b->port = ct_free_port();
        write_config(b);
        if (start_on_port(b)) {
            ct_log("broker pid %d on 127.0.0.1:%d", (int)b->pid, b->port);
            return b;
        }
        ct_sleep_ms(100);
    }
    FAIL("broker did not start in %d attempts", START_ATTEMPTS);
}

void ct_broker_kill(ct_broker *b)
{
    if (b->pid <= 0)
        return;
    kill(b->pid, SIGKILL);
    waitpid(b->pid, NULL, 0);
    ct_log("broker pid %d killed with SIGKILL", (int)b->pid);
    b->pid = 0;
}

void ct_broker_restart(ct_broker *b)
{
    if (b->pid > 0)
        FAIL("restart of a running broker");
    /* The port was ours a moment ago; a start that fails is retried. */
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        if (start_on_port(b)) {
            ct_log("broker restarted, pid %d on 127.0.0.1:%d", (int)b->pid, b->port);
            return;
        }
        ct_sleep_ms(200);
    }
    FAIL("broker did not restart on port %d", b->port);
}

void ct_broker_stop(ct_broker *b)
{
    int status = 0;

    if (b->pid <= 0)
        return;
    kill(b->pid, SIGTERM);
    for (int i = 0; i < STOP_MS / 10; i++) {
        if (waitpid(b->pid, &status, WNOHANG) == b->pid) {
            b->pid = 0;
            if (decode(status) != 0)
                FAIL("broker exited with status %d after SIGTERM", decode(status));
            return;
        }
        ct_sleep_ms(10);
    }
    FAIL("broker pid %d did not stop within %d ms", (int)b->pid, STOP_MS);
}

void ct_broker_destroy(ct_broker *b)
{
    if (b == NULL)
        return;
    ct_broker_stop(b);
    for (int i = 0; i < MAX_BROKERS; i++)
        if (g_brokers[i] == b)
            g_brokers[i] = NULL;
    free_list(b->opts);
    free_list(b->lines);
    free(b);
}

int ct_broker_port(const ct_broker *b)
{
    return b->port;
}

const char *ct_broker_db(const ct_broker *b)
{
    return b->db;
}

int ct_broker_version(void)
{
    char *argv[] = {(char *)CHAT_MOSQUITTO_BIN, (char *)"-h", NULL};
    char out[PATH_LEN];
    int major = 0, minor = 0, patch = 0;
    char *text, *v;

    ct_path(out, sizeof out, "mosquitto-version.txt");
    ct_run(argv, NULL, out, NULL, 10000); /* -h exits with a usage status */
    text = ct_read_file(out, NULL);
    v = text != NULL ? strstr(text, "version ") : NULL;
    if (v == NULL || sscanf(v, "version %d.%d.%d", &major, &minor, &patch) != 3)
        FAIL("no version in the output of %s -h: %s", CHAT_MOSQUITTO_BIN, text ? text : "");
    free(text);
    return major * 10000 + minor * 100 + patch;
}
