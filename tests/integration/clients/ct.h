/* ct: what the tests of the client library and mqchat add to the test
 * support library (tests/support: brokers, child processes, clocks, files,
 * failure reports): a temporary directory for the test's own files (state
 * files, mqchat's output) and the CHECK/FAIL vocabulary of these tests.
 *
 * These tests drive the broker with the library under test (Paho MQTTAsync)
 * and with the mqchat binary; tests/integration/harness links Paho's
 * synchronous library, which must not share a process with the asynchronous
 * one, hence a helper of their own on the same support library.
 *
 * Failure policy (tests/support/util.h): a test stops at its first failure;
 * every broker and child it started is stopped, the tail of each broker's log
 * printed, and the directories are kept. Threading: the test's main thread,
 * as for tests/support.
 */
#ifndef CHAT_CT_H
#define CHAT_CT_H

#include <stddef.h>

#include "broker.h"
#include "pg.h"
#include "util.h"

/* The names these tests use for ASSERTF and FAILF (tests/support/util.h). */
#define CHECK(...) ASSERTF(__VA_ARGS__)
#define FAIL(...) FAILF(__VA_ARGS__)

/* ts_init, then makes a temporary directory (ct_dir) for the test's files.
 * Call first. */
void ct_init(const char *name);

/* Removes the temporary directory (kept if TS_KEEP is set) and passes the
 * test (ts_pass): returns 0 for main to return. */
int ct_pass(void);

/* Records the first violation a library callback saw, printf-style, in bad
 * (size bytes, "" until then); later ones are dropped: the test's thread
 * fails on it (callbacks run on the library's thread, which must not exit
 * the test). The caller holds whatever lock guards bad. */
void ct_violation(char *bad, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Runs argv (argv[0] a path, NULL-terminated) with stdin from in_path
 * (NULL: none), to its end or timeout_ms (ts_run), and returns its exit
 * status; its stdout and stderr replace *out and *err (freed first; "" when
 * it wrote nothing). The output goes through files in ct_dir. */
int ct_run_output(char *const argv[], const char *in_path, int timeout_ms, char **out, char **err);

/* The test's temporary directory, and path = <dir>/<name> in buf. */
const char *ct_dir(void);
const char *ct_path(char *buf, size_t size, const char *name);

#endif
