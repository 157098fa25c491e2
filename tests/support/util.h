/* util: what every test program of mosquitto-chat needs below the broker and
 * below any MQTT library: failure reports, progress lines, clocks, files,
 * child processes and loopback ports. Paho-free, so that the tests on Paho's
 * synchronous library (tests/integration/harness) and those on the client
 * library (tests/integration/clients/ct, Paho's asynchronous library) share
 * it; broker.h builds the broker launcher on it.
 *
 * Failure policy: a test stops at its first failure. ts_fail prints
 * file:line and the message, kills every child ts_spawn started that is still
 * running, runs the hooks registered with ts_on_fail (broker.c prints the
 * tail of each broker's log and keeps its directory) and exits with status 1
 * at once (_exit: an MQTT library's threads may still run, and leak reports
 * would bury the message). Callers therefore need no error handling; every
 * function below that cannot do its job fails the test the same way.
 *
 * Ownership: ts_read_file's result is the caller's, freed with free().
 * Threading: ts_log, ts_now_ms, ts_wall_ms and ts_sleep_ms may be called from
 * any thread; everything else from the test's main thread. Every wait is
 * bounded in time and every loop in count.
 */
#ifndef CHAT_TS_UTIL_H
#define CHAT_TS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Fails the test (see ts_fail) unless cond holds. */
#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ts_fail(__FILE__, __LINE__, "assertion failed: %s", #cond);                            \
    } while (0)

/* The same, with a printf-style explanation after the condition. */
#define ASSERTF(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ts_note_assert(__FILE__, __LINE__, #cond);                                             \
            ts_fail(__FILE__, __LINE__, __VA_ARGS__);                                              \
        }                                                                                          \
    } while (0)

/* Fails the test unconditionally with a printf-style message. */
#define FAILF(...) ts_fail(__FILE__, __LINE__, __VA_ARGS__)

/* ---------------------------------------------------------------------------
 * Process-wide
 * ------------------------------------------------------------------------- */

/* Records the test name for messages, ignores SIGPIPE (a killed broker must
 * not kill the test), makes stdout line-buffered and starts the clock of
 * ts_log. Call first. */
void ts_init(const char *test_name);

/* The name given to ts_init. */
const char *ts_name(void);

/* Prints "PASS <name>" and returns 0 for main to return. Callers destroy
 * their own objects first. */
int ts_pass(void);

/* Prints file:line, the test's name and the message, then stops the test as
 * the header says. A failure while reporting one exits at once. */
_Noreturn void ts_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Ends a test that cannot run here (it needs root, a tmpfs, a tool): prints
 * "SKIP <name>: " and the message, kills every child ts_spawn started that
 * is still running and exits with status 77, which ctest reports as skipped
 * for a test registered with SKIP_RETURN_CODE 77 (every integration test
 * is; scripts/test fails a stage in which a test it must run skipped).
 * Never "passes": a test that did not run must not look as if it had. */
_Noreturn void ts_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The exit status of ts_skip. */
#define TS_SKIP_STATUS 77

/* Used by ASSERTF: prints the failed condition before the message. */
void ts_note_assert(const char *file, int line, const char *cond);

/* One case of a test program that runs a table of named cases, one per
 * ctest (argv[1]). */
typedef struct ts_case {
    const char *name;
    void (*fn)(void);
} ts_case;

/* Runs the case of cases[0..count) that argv[1] names, as the test
 * <prefix><name> (ts_init, the case, ts_pass), and returns main's status;
 * prints the usage with the names and returns 2 if argv[1] names none. */
int ts_run_case(int argc, char **argv, const char *prefix, const ts_case *cases, size_t count);

/* Registers fn to run once when the test fails, after the children are
 * killed, in the order registered (at most 8 hooks). */
void ts_on_fail(void (*fn)(void));

/* Whether the test is failing (a hook is running): a hook's own helpers use
 * it to stay quiet and lenient. */
bool ts_failing(void);

/* Prints a progress line to stdout, prefixed with the seconds since
 * ts_init. */
void ts_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------------------
 * Clocks
 * ------------------------------------------------------------------------- */

/* Milliseconds of a monotonic clock. */
int64_t ts_now_ms(void);

/* Milliseconds since the epoch (the clock of an envelope's `ts`). */
int64_t ts_wall_ms(void);

/* Sleeps ms milliseconds (ms <= 0: not at all). */
void ts_sleep_ms(int ms);

/* ---------------------------------------------------------------------------
 * Files
 * ------------------------------------------------------------------------- */

/* Makes a fresh directory from template (ending in XXXXXX, as mkdtemp) and
 * writes its path back into template. */
void ts_mkdtemp(char *template);

/* Removes path and, if it is a directory, everything under it (at most
 * depth levels). Returns 0, or -1 with errno set. */
int ts_remove_tree(const char *path, int depth);

/* Sum of the sizes of the regular files under path, recursively. */
uint64_t ts_dir_bytes(const char *path);

/* Writes len bytes to the file at path, replacing it. */
void ts_write_file(const char *path, const void *data, size_t len);

/* Writes the NUL-terminated text to the file at path, replacing it. */
void ts_write_text(const char *path, const char *text);

/* The whole file at path, NUL-terminated, with its length (without the NUL)
 * in *len (len may be NULL); NULL if it does not exist. The caller frees it
 * with free(). */
char *ts_read_file(const char *path, size_t *len);

/* How many lines of the file at path contain needle (lines longer than
 * 1 KiB are read in pieces); 0 if it cannot be read. */
long ts_count_lines(const char *path, const char *needle);

/* The path of a regular file directly under dir whose name ends in suffix
 * (e.g. LevelDB's write-ahead log, ".log"), written to out (size bytes):
 * the first such name in byte order, or with largest the largest such file
 * (of equal sizes, the first name). Returns false, with out empty, if there
 * is none. */
bool ts_find_file(const char *dir, const char *suffix, bool largest, char *out, size_t size);

/* Prints at most the last bytes bytes of path to stderr, from a line start,
 * between two banner lines. */
void ts_print_tail(const char *path, long bytes);

/* ---------------------------------------------------------------------------
 * Child processes
 * ------------------------------------------------------------------------- */

/* Starts argv[0] (a path, or a name looked up in PATH) with argv
 * (NULL-terminated) and envp (NULL: this process's environment), stdin from
 * in_path and stdout and stderr appended to out_path and err_path (NULL:
 * /dev/null for each). The child dies with the test (PR_SET_PDEATHSIG) and is
 * killed if the test fails, until ts_wait or ts_ended reaps it. */
pid_t ts_spawn(char *const argv[], char *const *envp, const char *in_path, const char *out_path,
               const char *err_path);

/* Hands child pid over to the caller, who reaps it and stops it on a
 * failure (broker.c: a broker's exit status matters, and a failing test
 * stops it with SIGTERM so that it flushes its log). */
void ts_disown(pid_t pid);

/* Waits at most timeout_ms for child pid; fails the test (after killing it)
 * if it does not end. Returns its exit status, or 128 + the signal that
 * killed it. */
int ts_wait(pid_t pid, int timeout_ms);

/* True if child pid has ended (reaps it; *status as for ts_wait, may be
 * NULL). */
bool ts_ended(pid_t pid, int *status);

/* Sends sig to child pid; fails the test if that is impossible. */
void ts_signal(pid_t pid, int sig);

/* ts_spawn, then ts_wait. */
int ts_run(char *const argv[], const char *in_path, const char *out_path, const char *err_path,
           int timeout_ms);

/* Runs a helper program (mosquitto_passwd, mosquitto_ctrl ...) with stdin
 * and stdout on /dev/null and stderr to the test's, at most 10 s; fails the
 * test unless it exits with status 0. */
void ts_run_ok(const char *const *argv);

/* "exit status N", "killed by signal N (name)": status as waitpid gives it. */
const char *ts_describe_status(int status, char *buf, size_t size);

/* ---------------------------------------------------------------------------
 * Loopback ports
 * ------------------------------------------------------------------------- */

/* A port on 127.0.0.1 that nobody listened on a moment ago. */
int ts_free_port(void);

/* True if something accepts TCP connections on 127.0.0.1:port. */
bool ts_port_open(int port);

#endif
