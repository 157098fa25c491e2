/* integ_ops: what the tests of operating the plugin (issue 12) share:
 * integ_ops_manage.c (figures, admin, delete, expiry) and integ_ops_store.c
 * (backup, backup_live, offline). Commands and their one entry, an admin's
 * stats, and mqchat-store (MQCHAT_STORE_BIN) on a store or on the broker's,
 * LevelDB or PostgreSQL (CHAT_TEST_PG_PORT). Every function fails the test
 * when it cannot do its job (tests/support/util.h). */
#ifndef CHAT_INTEG_OPS_H
#define CHAT_INTEG_OPS_H

#include "harness.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WAIT_MS 10000
#define DAY_S 86400

/* Runs argv (a path) with stdin from in (NULL: /dev/null) and stdout to out
 * (NULL: /dev/null), waits at most 60 s; returns its exit status. */
int ops_run(const char *const *argv, const char *in, const char *out);

/* ops_run with stderr to the file err (NULL: the test's). */
int ops_run_err(const char *const *argv, const char *in, const char *out, const char *err);

/* mqchat-store <cmd> <db> [arg]; stdin from in, stdout to out (ops_run). */
int ops_store_tool(const char *cmd, const char *db, const char *arg, const char *in,
                   const char *out);

/* The same with stderr to the file err (ops_run_err). */
int ops_store_tool_err(const char *cmd, const char *db, const char *arg, const char *in,
                       const char *out, const char *err);

/* Whether the broker's store is PostgreSQL (CHAT_TEST_PG_PORT). */
bool ops_on_pg(const ts_broker *b);

/* mqchat-store <cmd> on the broker's store: its directory, or with
 * PostgreSQL --store postgresql and its connection string. */
int ops_broker_store_tool(const ts_broker *b, const char *cmd, const char *arg, const char *in,
                          const char *out);

/* Connects as (id, user name). */
harness_client *ops_user(ts_broker *b, const char *id, const char *name);

/* One command (a JSON object text) and its one entry, which the caller
 * reads while resp (returned in *resp, freed by the caller) lives. */
const cJSON *ops_ask(harness_client *c, const char *command, cJSON **resp);

/* Fails unless command's one entry is the error error about group. */
void ops_expect_refused(harness_client *c, const char *command, const char *group,
                        const char *error);

/* A figure of `stats` (an admin's). */
int64_t ops_stat_of(harness_client *admin, const char *figure);

/* The deletions the tick has yet to finish (`stats`). */
int64_t ops_deletions(harness_client *admin);

/* Waits (bounded) until the store job of `stats` is no longer running;
 * returns its state ("done", "failed"; static, overwritten by the next
 * call). */
const char *ops_wait_job(harness_client *admin);

/* The device's sync entry for group: its acked, and the incarnation (into
 * inc, when not NULL). */
int64_t ops_synced(harness_client *c, const char *group, char *inc, size_t inc_size);

#endif
