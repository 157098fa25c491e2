/* broker_conf.c: what a test broker is given (see broker_conf.h). */
#include "broker_conf.h"

#include "pg.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CHAT_PLUGIN_PATH
#error "CHAT_PLUGIN_PATH must name mosquitto_chat.so"
#endif

extern char **environ;

#define MAX_ENV 4096 /* environment entries passed on to the broker */

/* A heap copy of a NULL-terminated array of strings (an empty one for NULL). */
char **ts_lines_copy(const char *const *lines)
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

void ts_lines_free(char **lines)
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

void ts_conf_write(const ts_broker *b)
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
        /* The tests that fill LevelDB's memtables and table files (disk
         * full, descriptors, damage) count their messages for 8 MiB, the
         * default before issue 16: with 32 MiB they would publish four
         * times as much. A test's own value comes later and wins. */
        fputs("plugin_opt_write_buffer_mb 8\n", f);
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
void ts_conf_hand_over(const ts_broker *b)
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
char **ts_conf_env(const ts_broker *b)
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
void ts_conf_pg_database(ts_broker *b)
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

const char *ts_broker_plugin_path(void)
{
    return CHAT_PLUGIN_PATH;
}
