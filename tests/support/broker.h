/* broker: the one launcher of a real broker for every test program, as
 * Mosquitto's test/mosq_test.py serves its broker, library and client tests.
 *
 * A ts_broker is a `mosquitto -c` (CHAT_MOSQUITTO_BIN) loading the plugin
 * (CHAT_PLUGIN_PATH) on a free 127.0.0.1 port, with its configuration, log
 * and LevelDB store in a fresh temporary directory; a ts_broker_conf adds
 * other configuration lines, or leaves the plugin out. A start waits until
 * the broker logged that it runs and accepts connections (so that whatever
 * answers is this broker, not another process that took the port); a broker
 * that exits at start because its port was taken meanwhile is retried on
 * another port. CHAT_BROKER_PRELOAD, if set, becomes the broker's LD_PRELOAD
 * (see broker_conf.c); with CHAT_TEST_PG_PORT set, a broker whose options name no
 * store keeps its data in a new database on that PostgreSQL cluster (pg.h).
 *
 * Failure policy (util.h): a broker that cannot do what is asked fails the
 * test; a failing test stops every broker, prints the tail of its output and
 * log (and the log's notable lines) and keeps its directory for inspection.
 *
 * Ownership: ts_broker_create or ts_broker_start, and ts_broker_destroy, are a
 * pair; the strings of a ts_broker_conf are copied. Threading: the test's main
 * thread only.
 */
#ifndef CHAT_TS_BROKER_H
#define CHAT_TS_BROKER_H

#include <stdbool.h>

typedef struct ts_broker ts_broker;

/* A broker configuration beyond the listener. The listener, logging, `user`,
 * `set_tcp_nodelay true` and `persistence false` lines are always written,
 * then lines, then (unless without_chat) the plugin with its store in
 * <dir>/db and one line `plugin_opt_<opt>` per entry of plugin_opts, then
 * after. In top, lines and after, "@DIR@" stands for the broker's directory
 * (ts_broker_dir), so that files a test writes there before the launch can be
 * named. Every list is NULL-terminated; NULL for none. */
typedef struct ts_broker_conf {
    const char *const *plugin_opts; /* e.g. "page_size 7" */
    const char *const *lines;       /* global lines before the plugin line (password_file,
                                       acl_file ...) */
    const char *const *after;       /* lines after the chat plugin's options, e.g. a second
                                       `plugin` line and its plugin_opt_ lines */
    const char *const *top;         /* lines before the listener (per_listener_settings) */
    bool without_chat;              /* leave the chat plugin out: the same broker without it */
    bool no_anonymous;              /* allow_anonymous false instead of true */
    const char *const *users;       /* usernames the broker verifies: a password_file holds
                                       each, with the name itself as password (the harness's
                                       clients send their username as password by default) */
    const char *run_as;             /* `user` line: NULL for root; another user gets the store
                                       and the log, and the directory becomes world-readable */
    bool private_conf;              /* mosquitto.conf readable by root only (mode 0600) */
} ts_broker_conf;

/* Creates a broker's temporary directory (with an empty <dir>/db) for conf
 * (NULL: the plugin with its defaults), without starting it, so that the test
 * can write files there first. Returns the broker, owned by the caller. */
ts_broker *ts_broker_create(const ts_broker_conf *conf);

/* Writes the configuration of a created broker for a free loopback port and
 * starts it (see the top of this header). Once per broker; later starts use
 * ts_broker_restart. */
void ts_broker_launch(ts_broker *b);

/* ts_broker_create followed by ts_broker_launch. */
ts_broker *ts_broker_start_conf(const ts_broker_conf *conf);

/* A broker with the plugin and these plugin options (NULL-terminated, NULL
 * for none), started: ts_broker_start_conf with only plugin_opts. */
ts_broker *ts_broker_start(const char *const *plugin_opts);

/* The mosquitto-chat plugin the brokers load (for a test's own plugin
 * lines, e.g. one per listener with per_listener_settings true). */
const char *ts_broker_plugin_path(void);

/* Usernames the tests connect with, for a broker that verifies them
 * (ts_broker_conf.users): admin, boss, root, alice, bob, carol ... */
extern const char *const ts_test_users[];

/* ts_broker_start, with the broker verifying ts_test_users' names (a
 * password_file): what admin rights and closed groups need. */
ts_broker *ts_broker_start_users(const char *const *plugin_opts);

/* Stops the broker with SIGTERM, waits at most 10 s, then SIGKILLs it; fails
 * the test if it did not exit with status 0 on SIGTERM (a crash or a
 * sanitizer report in the plugin's cleanup). No-op if not running. */
void ts_broker_stop(ts_broker *b);

/* Kills the broker with SIGKILL and reaps it; fails the test if it had died
 * before. No-op if not running. */
void ts_broker_kill(ts_broker *b);

/* Starts a stopped or killed broker again on the same port with the same
 * store and configuration (as last written). */
void ts_broker_restart(ts_broker *b);

/* Starts a stopped or killed broker again as ts_broker_restart does, for a
 * test that expects it may refuse to start: returns 0 when it runs, else its
 * exit status (128 + the signal that ended it), without failing the test. */
int ts_broker_try_restart(ts_broker *b);

/* ts_broker_launch, for a test that expects the broker may refuse to start:
 * returns 0 when it runs, else its exit status (as ts_broker_try_restart). */
int ts_broker_try_launch(ts_broker *b);

/* Stops the broker if it runs (as ts_broker_stop), removes its directory and
 * frees b. Accepts NULL. */
void ts_broker_destroy(ts_broker *b);

/* Replaces the global lines of the configuration (see ts_broker_conf.lines)
 * and writes it again; ts_broker_reload then makes the running broker read
 * it. */
void ts_broker_set_lines(ts_broker *b, const char *const *lines);

/* Replaces the plugin options and writes the configuration again, for the
 * next restart. */
void ts_broker_set_opts(ts_broker *b, const char *const *plugin_opts);

/* From the broker's next start on, the plugin's clock (envelope stamps,
 * retention_days, device expiry) runs seconds ahead of the real one (0: the
 * real clock), through the plugin's test hook MOSQUITTO_CHAT_TEST_CLOCK_SHIFT
 * in this broker's environment alone. No test can wait days. */
void ts_broker_shift_clock(ts_broker *b, long seconds);

/* In the sanitizer run (CHAT_BROKER_PRELOAD set), from the broker's next
 * start on, LeakSanitizer ignores leaks allocated under these functions of
 * the broker (NULL-terminated): Mosquitto 2.0.11's own leaks that a test
 * provokes on purpose (config__read on a refused reload or with
 * per_listener_settings, sub__add on a second subscription to one filter).
 * The names show only with the full unwinder, which the broker then gets.
 * The plugin's own allocations stay checked. No effect otherwise. */
void ts_broker_suppress_leaks(ts_broker *b, const char *const *functions);

/* Sends the running broker SIGHUP and waits (at most 10 s) until it logs
 * that it reloaded its configuration. */
void ts_broker_reload(ts_broker *b);

/* The process id of the running broker (0 when stopped). */
int ts_broker_pid(const ts_broker *b);

/* The port the broker listens on (127.0.0.1). */
int ts_broker_port(const ts_broker *b);

/* The broker's temporary directory, owned by b. */
const char *ts_broker_dir(const ts_broker *b);

/* The LevelDB directory of the broker's store, owned by b. */
const char *ts_broker_db_path(const ts_broker *b);

/* The libpq connection string of the database made for the broker
 * (CHAT_TEST_PG_PORT set: its store is PostgreSQL unless its options name
 * another), or "" when there is none; owned by b. */
const char *ts_broker_pg_conninfo(const ts_broker *b);

/* How many lines of the broker's log contain needle. */
long ts_broker_log_count(const ts_broker *b, const char *needle);

/* The path of one of the broker's own programs, "mosquitto_passwd" or
 * "mosquitto_ctrl", from the same installation as the broker the tests run
 * (CHAT_BROKER_PREFIX, else the system's): a password file or a
 * dynamic-security file is written by the broker version that reads it.
 * Fails the test for any other name. */
const char *ts_broker_program(const char *name);

/* The version of the broker the tests run, from `mosquitto -h`, as 10000 *
 * major + 100 * minor + patch (20011 for 2.0.11). */
int ts_broker_version(void);

#endif
