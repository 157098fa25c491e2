/* ct: scaffolding for the tests of the client library and mqchat: a real
 * mosquitto with the chat plugin on a free 127.0.0.1 port with a temporary
 * store, child processes with bounded waits, and failure reporting.
 *
 * These tests drive the broker with the library under test (Paho MQTTAsync)
 * and with the mqchat binary; the shared harness of tests/integration links
 * Paho's synchronous library, which must not share a process with the
 * asynchronous one, hence this small helper of our own.
 *
 * Failure policy: a test stops at its first failure; ct_fail prints why,
 * kills every broker and child it started, prints the tail of each broker's
 * log, keeps the temporary directories and exits with status 1.
 *
 * Ownership: ct_broker_start/ct_broker_destroy are a pair; ct_read_file's
 * result is the caller's (free). Threading: call everything from the test's
 * main thread, except ct_now_ms, ct_sleep_ms and ct_log (any thread). Every
 * wait is bounded in time.
 */
#ifndef CHAT_CT_H
#define CHAT_CT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Fails the test unless cond holds; the rest is a printf-style message. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ct_check_failed(__FILE__, __LINE__, #cond, __VA_ARGS__);                               \
    } while (0)

#define FAIL(...) ct_fail(__FILE__, __LINE__, __VA_ARGS__)

/* Names the test, starts its clock, ignores SIGPIPE and makes a temporary
 * directory (ct_dir) for its files. Call first. */
void ct_init(const char *name);

/* Removes the temporary directory (kept if CT_KEEP is set), prints PASS and
 * returns 0. */
int ct_pass(void);

_Noreturn void ct_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ct_fail after naming the failed condition. */
_Noreturn void ct_check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A progress line on stdout with the seconds since ct_init. */
void ct_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int64_t ct_now_ms(void);
void ct_sleep_ms(int ms);

/* The test's temporary directory, and path = <dir>/<name> in buf. */
const char *ct_dir(void);
const char *ct_path(char *buf, size_t size, const char *name);

/* ---------------------------------------------------------------------------
 * Broker
 * ------------------------------------------------------------------------- */

typedef struct ct_broker ct_broker;

/* Writes a configuration (listener on a free 127.0.0.1 port, user root,
 * set_tcp_nodelay, allow_anonymous, the plugin with its store in a fresh
 * directory, then "plugin_opt_<opt>" for each of the NULL-terminated opts)
 * and starts the broker, waiting until it accepts connections (a broker that
 * exits at start is retried on another port). CHAT_BROKER_PRELOAD, if set,
 * becomes the broker's LD_PRELOAD. */
ct_broker *ct_broker_start(const char *const *opts);

/* The same with broker configuration lines (NULL-terminated, may be NULL)
 * written after all of the above, e.g. "max_packet_size 2000". */
ct_broker *ct_broker_start_with(const char *const *opts, const char *const *lines);

/* kill -9, and reap. */
void ct_broker_kill(ct_broker *b);

/* Starts a killed or stopped broker again, same port, same store. */
void ct_broker_restart(ct_broker *b);

/* SIGTERM; fails the test unless it exits with status 0 within 10 s. */
void ct_broker_stop(ct_broker *b);

/* Stops the broker if running and frees b. Accepts NULL. */
void ct_broker_destroy(ct_broker *b);

int ct_broker_port(const ct_broker *b);

/* The broker's LevelDB directory, owned by b. */
const char *ct_broker_db(const ct_broker *b);

/* The version of the broker the tests run, from `mosquitto -h`, as 10000 *
 * major + 100 * minor + patch (20011 for 2.0.11). */
int ct_broker_version(void);

/* ---------------------------------------------------------------------------
 * PostgreSQL (tests/pg/pgcluster.sh): a cluster of the test's own on a free
 * 127.0.0.1 port, in a temporary directory of the postgres user's. With
 * CHAT_TEST_PG_PORT set, ct_broker_start puts every broker that names no
 * store in a new database on that cluster instead of LevelDB.
 * ------------------------------------------------------------------------- */

typedef struct ct_pg ct_pg;

/* initdb and start; sync_standby: commits wait for a standby named
 * "standby" (ct_pg_standby) to have them. ct_pg_destroy stops and removes
 * it; a failing test stops it (immediate) and keeps its directory. */
ct_pg *ct_pg_start(bool sync_standby);

/* A streaming standby of primary (pg_basebackup), started. */
ct_pg *ct_pg_standby(const ct_pg *primary);

/* pg_ctl stop -m mode ("fast", "immediate"); pg_ctl promote. */
void ct_pg_stop(ct_pg *pg, const char *mode);
void ct_pg_promote(ct_pg *pg);

void ct_pg_createdb(const ct_pg *pg, const char *name);
int ct_pg_port(const ct_pg *pg);
void ct_pg_destroy(ct_pg *pg);

/* ---------------------------------------------------------------------------
 * Processes
 * ------------------------------------------------------------------------- */

/* Starts argv[0] (a path) with stdin from in_path (NULL: /dev/null) and
 * stdout and stderr appended to out_path and err_path (NULL: /dev/null).
 * The child is killed if the test fails. */
pid_t ct_spawn(char *const argv[], const char *in_path, const char *out_path, const char *err_path);

/* Waits at most timeout_ms for child pid; fails the test (after killing it)
 * if it does not end. Returns its exit status, or 128 + the signal that
 * killed it. */
int ct_wait(pid_t pid, int timeout_ms);

/* True if child pid has ended (reaps it, *status as for ct_wait). */
bool ct_ended(pid_t pid, int *status);

/* Sends sig to child pid. */
void ct_signal(pid_t pid, int sig);

/* ct_spawn then ct_wait. */
int ct_run(char *const argv[], const char *in_path, const char *out_path, const char *err_path,
           int timeout_ms);

/* The whole file (NUL-terminated, *len bytes without the NUL; len may be
 * NULL), or NULL if it does not exist. The caller frees it. */
char *ct_read_file(const char *path, size_t *len);

/* Writes text to path (replacing it). */
void ct_write_file(const char *path, const char *text);

/* A port on 127.0.0.1 that nobody listened on a moment ago. */
int ct_free_port(void);

#endif
