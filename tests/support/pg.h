/* pg: throwaway PostgreSQL clusters for the tests of the postgresql store
 * (tests/pg/pgcluster.sh, Debian's postgresql-15): each on a free
 * 127.0.0.1 port, in a temporary directory of the postgres user's.
 *
 * With CHAT_TEST_PG_PORT set (scripts/test's pg stage), broker.c also puts
 * every broker whose options name no store in a new database of its own on
 * that cluster (ts_pg_run): the same tests against the postgresql backend.
 *
 * Failure policy (util.h): a failing test stops every cluster at once
 * (immediate) and keeps its directory. Ownership: ts_pg_start or
 * ts_pg_standby, and ts_pg_destroy, are a pair. Threading: the test's main
 * thread only.
 */
#ifndef CHAT_TS_PG_H
#define CHAT_TS_PG_H

#include <stdbool.h>

typedef struct ts_pg ts_pg;

/* initdb and start; sync_standby: commits wait for a standby named
 * "standby" (ts_pg_standby) to have them. */
ts_pg *ts_pg_start(bool sync_standby);

/* A streaming standby of primary (pg_basebackup), started. */
ts_pg *ts_pg_standby(const ts_pg *primary);

/* pg_ctl stop -m mode ("fast", "immediate"; NULL: fast). */
void ts_pg_stop(ts_pg *pg, const char *mode);

/* Starts a stopped cluster again (pg_ctl start, waiting until it accepts
 * connections), on its port and with its data. */
void ts_pg_restart(ts_pg *pg);

/* pg_ctl promote. */
void ts_pg_promote(ts_pg *pg);

/* A new database name on pg. */
void ts_pg_createdb(const ts_pg *pg, const char *name);

/* The port pg listens on (127.0.0.1). */
int ts_pg_port(const ts_pg *pg);

/* Stops pg (immediate), removes its directory (kept if TS_KEEP is set) and
 * frees it. Accepts NULL. */
void ts_pg_destroy(ts_pg *pg);

/* Runs pgcluster.sh with args (NULL-terminated: the command and its
 * arguments), its output in out (NULL: the test's stderr); fails the test
 * (showing that output) when it fails. */
void ts_pg_run(const char *const *args, const char *out);

#endif
