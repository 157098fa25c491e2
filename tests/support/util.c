/* util.c: failure reports, clocks, files, child processes and loopback ports
 * for every test program (see util.h). */
#include "util.h"

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

extern char **environ;

#define MAX_CHILDREN 64    /* children alive at once */
#define MAX_HOOKS 8        /* ts_on_fail hooks */
#define MAX_FDS 4096       /* descriptors closed in a child */
#define RUN_OK_MS 10000    /* a helper program must finish within this */
#define WAIT_POLL_MS 5     /* pause between two looks at a child */
#define PATH_LEN 4096      /* a path, PATH lookups included */
#define MAX_LINES 50000000 /* bound on the lines of one file read */

static char g_name[128] = "test";
static int64_t g_t0;
static bool g_failing;
static pid_t g_children[MAX_CHILDREN];
static void (*g_hooks[MAX_HOOKS])(void);
static int g_nhooks;

/* ===========================================================================
 * Process-wide
 * ========================================================================= */

void ts_init(const char *test_name)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
    snprintf(g_name, sizeof g_name, "%s", test_name);
    g_t0 = ts_now_ms();
    setvbuf(stdout, NULL, _IOLBF, 0);
    ts_log("%s: start", g_name);
}

const char *ts_name(void)
{
    return g_name;
}

int ts_pass(void)
{
    ts_log("PASS %s", g_name);
    fflush(NULL);
    return 0;
}

int ts_run_case(int argc, char **argv, const char *prefix, const ts_case *cases, size_t count)
{
    char name[128];

    for (size_t i = 0; argc == 2 && i < count; i++) {
        if (strcmp(argv[1], cases[i].name) == 0) {
            snprintf(name, sizeof name, "%s%s", prefix, cases[i].name);
            ts_init(name);
            cases[i].fn();
            return ts_pass();
        }
    }
    fprintf(stderr, "usage: %s <case>; cases:", argv[0]);
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, " %s", cases[i].name);
    fputc('\n', stderr);
    return 2;
}

void ts_on_fail(void (*fn)(void))
{
    for (int i = 0; i < g_nhooks; i++)
        if (g_hooks[i] == fn)
            return;
    if (g_nhooks == MAX_HOOKS)
        FAILF("more than %d failure hooks", MAX_HOOKS);
    g_hooks[g_nhooks++] = fn;
}

bool ts_failing(void)
{
    return g_failing;
}

void ts_note_assert(const char *file, int line, const char *cond)
{
    fflush(stdout);
    fprintf(stderr, "%s:%d: assertion failed: %s\n", file, line, cond);
}

_Noreturn void ts_fail(const char *file, int line, const char *fmt, ...)
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
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (g_children[i] > 0) {
            kill(g_children[i], SIGKILL);
            waitpid(g_children[i], NULL, 0);
            g_children[i] = 0;
        }
    }
    for (int i = 0; i < g_nhooks; i++)
        g_hooks[i]();
    fflush(NULL);
    _exit(1);
}

_Noreturn void ts_skip(const char *fmt, ...)
{
    char why[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    ts_log("SKIP %s: %s", g_name, why);
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (g_children[i] > 0) {
            kill(g_children[i], SIGKILL);
            waitpid(g_children[i], NULL, 0);
            g_children[i] = 0;
        }
    }
    fflush(NULL);
    /* exit, not _exit: atexit handlers (an unmount) still run. */
    exit(TS_SKIP_STATUS);
}

void ts_log(const char *fmt, ...)
{
    int64_t t = ts_now_ms() - g_t0;
    char line[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One call, so that lines of several threads do not mix. */
    printf("[%3d.%03ds] %s\n", (int)(t / 1000), (int)(t % 1000), line);
}

/* ===========================================================================
 * Clocks
 * ========================================================================= */

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ts_now_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t ts_wall_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

void ts_sleep_ms(int ms)
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

void ts_mkdtemp(char *template)
{
    if (mkdtemp(template) == NULL)
        FAILF("mkdtemp %s: %s", template, strerror(errno));
}

/* Calls fn(child, arg) for every entry of the directory path but . and ..;
 * stops at the first non-zero return and returns it. -1 (errno set) if the
 * directory cannot be read or a child's path is too long. */
static int each_child(const char *path, int (*fn)(const char *child, void *arg), void *arg)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char child[PATH_LEN];
    int rc = 0;

    if (d == NULL)
        return -1;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child) {
            errno = ENAMETOOLONG;
            rc = -1;
        } else {
            rc = fn(child, arg);
        }
    }
    closedir(d);
    return rc;
}

static int remove_child(const char *child, void *arg)
{
    return ts_remove_tree(child, *(int *)arg - 1);
}

int ts_remove_tree(const char *path, int depth)
{
    struct stat st;

    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    if (depth <= 0 || each_child(path, remove_child, &depth) != 0)
        return -1;
    return rmdir(path);
}

struct bytes_walk {
    uint64_t sum;
    int depth; /* levels left below the directory walked */
};

static int add_bytes(const char *child, void *arg)
{
    struct bytes_walk *w = arg;
    struct stat st;

    if (lstat(child, &st) != 0)
        FAILF("stat %s: %s", child, strerror(errno));
    if (S_ISREG(st.st_mode)) {
        w->sum += (uint64_t)st.st_size;
    } else if (S_ISDIR(st.st_mode) && w->depth > 0) {
        struct bytes_walk below = {0, w->depth - 1};
        if (each_child(child, add_bytes, &below) != 0)
            FAILF("cannot read %s: %s", child, strerror(errno));
        w->sum += below.sum;
    }
    return 0;
}

uint64_t ts_dir_bytes(const char *path)
{
    struct bytes_walk w = {0, 8};

    if (each_child(path, add_bytes, &w) != 0)
        FAILF("cannot read %s: %s", path, strerror(errno));
    return w.sum;
}

void ts_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");

    if (f == NULL)
        FAILF("cannot write %s: %s", path, strerror(errno));
    if (fwrite(data, 1, len, f) != len || fclose(f) != 0)
        FAILF("cannot write %s: %s", path, strerror(errno));
}

void ts_write_text(const char *path, const char *text)
{
    ts_write_file(path, text, strlen(text));
}

char *ts_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0, got;

    if (f == NULL) {
        if (errno == ENOENT)
            return NULL;
        FAILF("cannot read %s: %s", path, strerror(errno));
    }
    /* Grown as it comes: some files (a broker's log) grow while read. */
    do {
        if (n + 4096 + 1 > cap) {
            char *more;
            cap = cap ? cap * 2 : 65536;
            if ((more = realloc(buf, cap)) == NULL)
                FAILF("out of memory");
            buf = more;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    if (ferror(f))
        FAILF("cannot read %s", path);
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

long ts_count_lines(const char *path, const char *needle)
{
    char line[1024];
    long found = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return 0;
    for (long i = 0; i < MAX_LINES && fgets(line, sizeof line, f) != NULL; i++)
        found += strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

struct find_walk {
    const char *suffix;
    bool largest;
    char *out;
    size_t size;
    off_t best; /* size of the file in out */
};

static int consider_file(const char *child, void *arg)
{
    struct find_walk *w = arg;
    size_t len = strlen(child), slen = strlen(w->suffix);
    struct stat st;
    bool better;

    if (len < slen || strcmp(child + len - slen, w->suffix) != 0 || lstat(child, &st) != 0 ||
        !S_ISREG(st.st_mode))
        return 0;
    if (len >= w->size)
        FAILF("path %s too long for its buffer", child);
    if (w->out[0] == '\0')
        better = true;
    else if (w->largest && st.st_size != w->best)
        better = st.st_size > w->best;
    else
        better = strcmp(child, w->out) < 0;
    if (better) {
        memcpy(w->out, child, len + 1);
        w->best = st.st_size;
    }
    return 0;
}

bool ts_find_file(const char *dir, const char *suffix, bool largest, char *out, size_t size)
{
    struct find_walk w = {suffix, largest, out, size, 0};

    if (size == 0)
        FAILF("ts_find_file: no room for a path");
    out[0] = '\0';
    if (each_child(dir, consider_file, &w) != 0)
        FAILF("cannot read %s: %s", dir, strerror(errno));
    return out[0] != '\0';
}

void ts_print_tail(const char *path, long bytes)
{
    FILE *f = fopen(path, "rb");
    char buf[1024];
    long size, from;
    bool skip;
    size_t n;

    if (f == NULL) {
        fprintf(stderr, "(cannot open %s: %s)\n", path, strerror(errno));
        return;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0) {
        fclose(f);
        return;
    }
    from = size > bytes ? size - bytes : 0;
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

/* ===========================================================================
 * Child processes
 * ========================================================================= */

static void track(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (g_children[i] == 0) {
            g_children[i] = pid;
            return;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    FAILF("more than %d children at once", MAX_CHILDREN);
}

void ts_disown(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (g_children[i] == pid)
            g_children[i] = 0;
}

/* The program to exec for name: name itself if it holds a '/', else the
 * first executable file of that name in PATH (as execvp), written to buf. */
static const char *find_program(const char *name, char *buf, size_t size)
{
    const char *path = getenv("PATH");

    if (strchr(name, '/') != NULL)
        return name;
    for (const char *p = path != NULL ? path : "/usr/bin:/bin"; *p != '\0';) {
        size_t len = strcspn(p, ":");
        if (len > 0 && snprintf(buf, size, "%.*s/%s", (int)len, p, name) < (int)size &&
            access(buf, X_OK) == 0)
            return buf;
        p += len;
        if (*p == ':')
            p++;
    }
    FAILF("%s not found in PATH", name);
}

pid_t ts_spawn(char *const argv[], char *const *envp, const char *in_path, const char *out_path,
               const char *err_path)
{
    char found[PATH_LEN];
    const char *prog = find_program(argv[0], found, sizeof found);
    char *const *env = envp != NULL ? envp : environ;
    long max_fd = sysconf(_SC_OPEN_MAX);
    struct sigaction dfl;
    sigset_t none;
    pid_t pid;

    /* Everything the child needs is prepared before the fork: the child
     * only calls async-signal-safe functions. */
    if (max_fd < 0 || max_fd > MAX_FDS)
        max_fd = MAX_FDS;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigemptyset(&none);
    in_path = in_path != NULL ? in_path : "/dev/null";
    out_path = out_path != NULL ? out_path : "/dev/null";
    err_path = err_path != NULL ? err_path : "/dev/null";
    fflush(NULL);
    if ((pid = fork()) < 0)
        FAILF("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Brokers and clients die with the test, even if it crashes. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int in = open(in_path, O_RDONLY);
        int out = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int err = open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (in < 0 || out < 0 || err < 0)
            _exit(126);
        dup2(in, 0);
        dup2(out, 1);
        dup2(err, 2);
        for (long fd = 3; fd < max_fd; fd++)
            close((int)fd);
        sigaction(SIGPIPE, &dfl, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(prog, argv, env);
        _exit(127);
    }
    track(pid);
    return pid;
}

static int decode(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 255;
}

bool ts_ended(pid_t pid, int *status)
{
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);

    if (r == 0)
        return false;
    if (r != pid)
        FAILF("waitpid %d: %s", (int)pid, strerror(errno));
    ts_disown(pid);
    if (status != NULL)
        *status = decode(st);
    return true;
}

int ts_wait(pid_t pid, int timeout_ms)
{
    int64_t deadline = ts_now_ms() + timeout_ms;
    int status = 0;

    for (int i = 0; i < timeout_ms / WAIT_POLL_MS + 10; i++) {
        if (ts_ended(pid, &status))
            return status;
        if (ts_now_ms() >= deadline)
            break;
        ts_sleep_ms(WAIT_POLL_MS);
    }
    FAILF("process %d did not end within %d ms", (int)pid, timeout_ms);
}

void ts_signal(pid_t pid, int sig)
{
    if (kill(pid, sig) != 0)
        FAILF("kill(%d, %d): %s", (int)pid, sig, strerror(errno));
}

int ts_run(char *const argv[], const char *in_path, const char *out_path, const char *err_path,
           int timeout_ms)
{
    return ts_wait(ts_spawn(argv, NULL, in_path, out_path, err_path), timeout_ms);
}

void ts_run_ok(const char *const *argv)
{
    /* execve's argv is char *const[] for historical reasons only. */
    int status = ts_run((char *const *)argv, NULL, NULL, "/dev/stderr", RUN_OK_MS);

    if (status != 0)
        FAILF("%s %s failed: %s %d", argv[0], argv[1] != NULL ? argv[1] : "",
              status > 128 ? "killed by signal" : "exit status",
              status > 128 ? status - 128 : status);
}

const char *ts_describe_status(int status, char *buf, size_t size)
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

/* ===========================================================================
 * Loopback ports
 * ========================================================================= */

static int loopback_socket(struct sockaddr_in *a, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        FAILF("socket: %s", strerror(errno));
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->sin_port = htons((uint16_t)port);
    return fd;
}

int ts_free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = loopback_socket(&a, 0);
    int port;

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

bool ts_port_open(int port)
{
    struct sockaddr_in a;
    int fd = loopback_socket(&a, port);
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;

    close(fd);
    return ok;
}
