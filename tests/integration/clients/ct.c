/* ct.c: the temporary directory of a client test, and what LeakSanitizer must
 * know about Paho's asynchronous library (see ct.h). */
#include "ct.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64]; /* /tmp/mqchat-test-XXXXXX */

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

static void keep_dir(void)
{
    fprintf(stderr, "kept %s for inspection\n", g_dir);
}

void ct_init(const char *name)
{
    ts_init(name);
    snprintf(g_dir, sizeof g_dir, "/tmp/mqchat-test-XXXXXX");
    ts_mkdtemp(g_dir);
    ts_on_fail(keep_dir);
    ts_log("files in %s", g_dir);
}

int ct_pass(void)
{
    if (getenv("TS_KEEP") != NULL)
        ts_log("kept %s (TS_KEEP is set)", g_dir);
    else if (ts_remove_tree(g_dir, 6) != 0)
        ts_log("could not remove %s", g_dir);
    return ts_pass();
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

void ct_violation(char *bad, size_t size, const char *fmt, ...)
{
    va_list ap;

    if (bad[0] != '\0')
        return;
    va_start(ap, fmt);
    vsnprintf(bad, size, fmt, ap);
    va_end(ap);
}

int ct_run_output(char *const argv[], const char *in_path, int timeout_ms, char **out, char **err)
{
    char out_path[512], err_path[512];
    int status;

    ct_path(out_path, sizeof out_path, "run.out");
    ct_path(err_path, sizeof err_path, "run.err");
    unlink(out_path);
    unlink(err_path);
    status = ts_run(argv, in_path, out_path, err_path, timeout_ms);
    free(*out);
    free(*err);
    *out = ts_read_file(out_path, NULL);
    *err = ts_read_file(err_path, NULL);
    if (*out == NULL)
        *out = strdup("");
    if (*err == NULL)
        *err = strdup("");
    if (*out == NULL || *err == NULL)
        FAIL("out of memory");
    return status;
}
