/* Unit tests of plugin/config.c, continued (test_plugin_config.c runs
 * them): the scan of the broker's configuration, chat_broker_scan.
 *
 * chat_broker_scan reads the broker's command line (/proc/self/cmdline) for
 * -c <file>, so a scan runs in a child: this executable again, as
 * "<self> --scan -c <file>", which prints what it found. */
#define _XOPEN_SOURCE 700 /* mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_scan.h"
#include "plugin.h"
#include "plugin_fixture.h"
#include "plugin_stubs.h"
#include "util.h"

#define SCAN_MS 10000 /* one scan of a small configuration */

char config_self[PATH_MAX]; /* this executable */

/* ===========================================================================
 * Scanning the broker's configuration
 * ========================================================================= */

struct scan {
    struct chat_broker_conf bc;
    bool result;
};

/* The child's side: prints what chat_broker_scan found. */
int config_scan_child(void)
{
    struct chat_broker_conf bc;
    bool ok = chat_broker_scan(&bc);
    printf("%d %d %d %d %d %d %d %d\n%s\n", ok, bc.readable, bc.acl, bc.auth, bc.per_listener,
           bc.first_is_other, bc.plugins, bc.err, bc.unreadable);
    return 0;
}

/* Runs "<self> --scan [-c conf]" (through tests/support, as every program a
 * test starts) and reads what it printed. */
static struct scan run_scan(const char *conf)
{
    struct scan s;
    char dir[] = "/tmp/chat_config_scan.XXXXXX", out[64];
    char *argv[] = {config_self, "--scan", "-c", (char *)conf, NULL};
    int v[8] = {0}, n, used = 0;
    char *text, *path;

    memset(&s, 0, sizeof(s));
    if (!conf) {
        argv[2] = NULL;
    }
    ts_mkdtemp(dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    assert_int_equal(ts_run(argv, NULL, out, "/dev/stderr", SCAN_MS), 0);
    text = ts_read_file(out, NULL);
    assert_non_null(text);
    /* the eight figures, then the unreadable path on a line of its own */
    n = sscanf(text, "%d %d %d %d %d %d %d %d\n%n", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7], &used);
    assert_int_equal(n, 8);
    path = text + used;
    path[strcspn(path, "\n")] = '\0';
    s.result = v[0];
    s.bc.readable = v[1];
    s.bc.acl = v[2];
    s.bc.auth = v[3];
    s.bc.per_listener = v[4];
    s.bc.first_is_other = v[5];
    s.bc.plugins = v[6];
    s.bc.err = v[7];
    snprintf(s.bc.unreadable, sizeof(s.bc.unreadable), "%s", path);
    free(text);
    assert_int_equal(ts_remove_tree(dir, 1), 0);
    return s;
}

struct tmp {
    char dir[64];
};

int config_tmp_setup(void **state)
{
    struct tmp *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    snprintf(t->dir, sizeof(t->dir), "/tmp/chat_config_test.XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    stub_reset();
    *state = t;
    return 0;
}

int config_tmp_teardown(void **state)
{
    struct tmp *t = *state;
    plugin_rm_tree(t->dir);
    free(t);
    return 0;
}

/* Writes text to dir/name; returns the path (static, overwritten by the
 * next call). */
static const char *write_file(const char *dir, const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

void test_scan_lines(void **state)
{
    struct tmp *t = *state;
    char other_first[PATH_MAX + 64], ours_first[PATH_MAX + 64], ours[PATH_MAX + 16];
    snprintf(ours, sizeof(ours), "plugin %s\n", config_self);
    snprintf(other_first, sizeof(other_first), "plugin /usr/lib/other.so\nplugin %s\n",
             config_self);
    snprintf(ours_first, sizeof(ours_first), "plugin %s\nauth_plugin /other.so\n", config_self);
    const struct {
        const char *text;
        bool acl, auth, per_listener, first_is_other;
        int plugins;
    } cases[] = {
        {"listener 1883\n", false, false, false, false, 0},
        {"acl_file /etc/mosquitto/acl\n", true, false, false, false, 0},
        {"acl_file\n", true, false, false, false, 0},
        {"# acl_file /x\n", false, false, false, false, 0},
        {"  \tacl_file /x\r\n", true, false, false, false, 0},
        {"acl_filex /x\n", false, false, false, false, 0},
        {"password_file /x\n", false, true, false, false, 0},
        {"psk_file /x\n", false, true, false, false, 0},
        {"use_identity_as_username true\n", false, true, false, false, 0},
        {"use_identity_as_username false\n", false, false, false, false, 0},
        {"use_subject_as_username true\r\n", false, true, false, false, 0},
        {"use_subject_as_username truex\n", false, false, false, false, 0},
        {"per_listener_settings true\n", false, false, true, false, 0},
        {"per_listener_settings false\n", false, false, false, false, 0},
        /* Our own plugin line is no other checker. */
        {ours, false, false, false, false, 1},
        /* Any other plugin may check access and authenticate. */
        {"plugin /usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so\n", true, true, false,
         true, 1},
        {other_first, true, true, false, true, 2},
        {ours_first, true, true, false, false, 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct scan s = run_scan(write_file(t->dir, "mosquitto.conf", cases[i].text));
        if (!s.result || !s.bc.readable || s.bc.acl != cases[i].acl || s.bc.auth != cases[i].auth ||
            s.bc.per_listener != cases[i].per_listener ||
            s.bc.first_is_other != cases[i].first_is_other || s.bc.plugins != cases[i].plugins) {
            fail_msg("config \"%s\": scan %d readable %d acl %d auth %d per_listener %d "
                     "first_is_other %d plugins %d",
                     cases[i].text, s.result, s.bc.readable, s.bc.acl, s.bc.auth, s.bc.per_listener,
                     s.bc.first_is_other, s.bc.plugins);
        }
    }
}

void test_scan_include_dir(void **state)
{
    struct tmp *t = *state;
    char sub[128], text[256];
    snprintf(sub, sizeof(sub), "%s/conf.d", t->dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_file(sub, "acl.conf", "acl_file /x\n");
    write_file(sub, "auth.txt", "password_file /x\n"); /* not *.conf: the broker skips it */
    write_file(sub, ".conf", "password_file /x\n");    /* nor a bare ".conf" */
    snprintf(text, sizeof(text), "include_dir %s\n", sub);
    struct scan s = run_scan(write_file(t->dir, "mosquitto.conf", text));
    assert_true(s.result && s.bc.readable);
    assert_true(s.bc.acl);
    assert_false(s.bc.auth);

    /* A directory that includes itself: the scan stops at a depth. */
    snprintf(text, sizeof(text), "include_dir %s\npsk_file /y\n", sub);
    write_file(sub, "self.conf", text);
    s = run_scan(write_file(t->dir, "mosquitto.conf", text));
    assert_true(s.result && s.bc.acl && s.bc.auth);
}

void test_scan_fails_closed(void **state)
{
    struct tmp *t = *state;
    char missing[128], text[256];

    /* No configuration file on the command line: loaded alone. */
    struct scan s = run_scan(NULL);
    assert_true(s.result && s.bc.readable);
    assert_int_equal(s.bc.plugins, 0);

    /* The file named by -c cannot be read. */
    snprintf(missing, sizeof(missing), "%s/missing.conf", t->dir);
    s = run_scan(missing);
    assert_false(s.result);
    assert_false(s.bc.readable);
    assert_int_equal(s.bc.err, ENOENT);
    assert_string_equal(s.bc.unreadable, missing);

    /* A directory opens but cannot be read as a file. */
    s = run_scan(t->dir);
    assert_false(s.result);
    assert_int_equal(s.bc.err, EISDIR);

    /* An include_dir that is not there; the first unreadable path counts,
     * what follows is still read. */
    snprintf(text, sizeof(text), "include_dir %s/nodir\nacl_file /x\n", t->dir);
    s = run_scan(write_file(t->dir, "mosquitto.conf", text));
    assert_false(s.result);
    assert_true(s.bc.acl);
    assert_non_null(strstr(s.bc.unreadable, "/nodir"));

    /* What the plugin makes of it: defer, and names verified. */
    struct chat_config cfg;
    assert_int_equal(chat_config_parse(&cfg, NULL, 0), MOSQ_ERR_SUCCESS);
    chat_config_apply_broker(&cfg, &s.bc, true);
    assert_int_equal(cfg.acl_mode, CHAT_ACL_DEFER);
    assert_true(cfg.names_verified);
    assert_true(stub_log_has(MOSQ_LOG_WARNING, "/nodir"));
    chat_config_free(&cfg);
}
