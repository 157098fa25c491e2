/* pg.c: throwaway PostgreSQL clusters through tests/pg/pgcluster.sh (see
 * pg.h). */
#include "pg.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CHAT_PGCLUSTER
#error "CHAT_PGCLUSTER must name tests/pg/pgcluster.sh"
#endif

#define MAX_PGS 2           /* clusters alive at once in one test */
#define PGCLUSTER_MS 120000 /* initdb, pg_basebackup: slow on a busy machine */
#define OUT_TAIL_BYTES 4000 /* how much of pgcluster.sh's output a failure shows */

struct ts_pg {
    char dir[64]; /* /tmp/mqchat-pg-XXXXXX, the postgres user's */
    char out[96]; /* <dir>.out: what pgcluster.sh said */
    int port;     /* 127.0.0.1 port */
    bool running; /* started and not stopped */
};

static ts_pg *g_pgs[MAX_PGS];

void ts_pg_run(const char *const *args, const char *out)
{
    char *argv[8];
    size_t n = 0;

    argv[n++] = (char *)CHAT_PGCLUSTER;
    for (size_t i = 0; args[i] != NULL && n < 7; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    if (out == NULL) {
        ts_run_ok((const char *const *)argv);
        return;
    }
    if (ts_run(argv, NULL, out, out, PGCLUSTER_MS) != 0) {
        ts_print_tail(out, OUT_TAIL_BYTES);
        FAILF("pgcluster.sh %s failed", args[0]);
    }
}

/* The failure hook (ts_on_fail): stops every cluster at once, keeps it. */
static void report_pgs(void)
{
    for (int i = 0; i < MAX_PGS; i++) {
        ts_pg *pg = g_pgs[i];
        if (pg == NULL || !pg->running)
            continue;
        {
            char *argv[] = {(char *)CHAT_PGCLUSTER, (char *)"stop", pg->dir, (char *)"immediate",
                            NULL};
            ts_run(argv, NULL, NULL, NULL, PGCLUSTER_MS);
        }
        pg->running = false;
        fprintf(stderr, "PostgreSQL cluster %s (port %d) kept; its setup said: %s\n", pg->dir,
                pg->port, pg->out);
    }
}

/* A new cluster object in a fresh directory on a free port, registered. */
static ts_pg *pg_new(void)
{
    ts_pg *pg = calloc(1, sizeof *pg);
    int slot = -1;

    if (pg == NULL)
        FAILF("out of memory");
    for (int i = 0; i < MAX_PGS && slot < 0; i++)
        if (g_pgs[i] == NULL)
            slot = i;
    if (slot < 0)
        FAILF("more than %d PostgreSQL clusters", MAX_PGS);
    snprintf(pg->dir, sizeof pg->dir, "/tmp/mqchat-pg-XXXXXX");
    ts_mkdtemp(pg->dir);
    snprintf(pg->out, sizeof pg->out, "%s.out", pg->dir);
    pg->port = ts_free_port();
    g_pgs[slot] = pg;
    ts_on_fail(report_pgs);
    return pg;
}

ts_pg *ts_pg_start(bool sync_standby)
{
    ts_pg *pg = pg_new();
    char port[16];

    snprintf(port, sizeof port, "%d", pg->port);
    ts_pg_run((const char *const[]){"init", pg->dir, port, sync_standby ? "sync" : NULL, NULL},
              pg->out);
    pg->running = true;
    ts_log("PostgreSQL on 127.0.0.1:%d in %s", pg->port, pg->dir);
    return pg;
}

ts_pg *ts_pg_standby(const ts_pg *primary)
{
    ts_pg *pg = pg_new();
    char pport[16], port[16];

    snprintf(pport, sizeof pport, "%d", primary->port);
    snprintf(port, sizeof port, "%d", pg->port);
    ts_pg_run((const char *const[]){"standby", pport, pg->dir, port, NULL}, pg->out);
    pg->running = true;
    ts_log("PostgreSQL standby on 127.0.0.1:%d in %s", pg->port, pg->dir);
    return pg;
}

void ts_pg_stop(ts_pg *pg, const char *mode)
{
    if (pg->running)
        ts_pg_run((const char *const[]){"stop", pg->dir, mode != NULL ? mode : "fast", NULL},
                  pg->out);
    pg->running = false;
}

void ts_pg_restart(ts_pg *pg)
{
    if (!pg->running)
        ts_pg_run((const char *const[]){"start", pg->dir, NULL}, pg->out);
    pg->running = true;
}

void ts_pg_promote(ts_pg *pg)
{
    ts_pg_run((const char *const[]){"promote", pg->dir, NULL}, pg->out);
}

void ts_pg_createdb(const ts_pg *pg, const char *name)
{
    char port[16];

    snprintf(port, sizeof port, "%d", pg->port);
    ts_pg_run((const char *const[]){"createdb", port, name, NULL}, pg->out);
}

int ts_pg_port(const ts_pg *pg)
{
    return pg->port;
}

void ts_pg_destroy(ts_pg *pg)
{
    if (pg == NULL)
        return;
    ts_pg_stop(pg, "immediate");
    for (int i = 0; i < MAX_PGS; i++)
        if (g_pgs[i] == pg)
            g_pgs[i] = NULL;
    if (getenv("TS_KEEP") == NULL) {
        ts_remove_tree(pg->dir, 8);
        unlink(pg->out);
    }
    free(pg);
}
