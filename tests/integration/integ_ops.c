/* integ_ops.c: helpers of the tests of operating the plugin (integ_ops.h). */
#include "integ_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_MS 60000 /* mqchat-store on a test's store: seconds at most */

/* Runs argv (a path) with stdin from in (NULL: /dev/null), stdout to out
 * (NULL: /dev/null) and stderr to err (NULL: the test's), each file written
 * afresh, through tests/support (ts_run: at most 60 s); returns its exit
 * status. */
int ops_run_err(const char *const *argv, const char *in, const char *out, const char *err)
{
    int status;

    if (out != NULL)
        ts_write_text(out, "");
    if (err != NULL)
        ts_write_text(err, "");
    /* execve's argv is char *const[] for historical reasons only. */
    status = ts_run((char *const *)argv, in, out, err != NULL ? err : "/dev/stderr", RUN_MS);
    ASSERTF(status < 128, "%s %s was killed by signal %d", argv[0], argv[1] ? argv[1] : "",
            status - 128);
    return status;
}

int ops_run(const char *const *argv, const char *in, const char *out)
{
    return ops_run_err(argv, in, out, NULL);
}

/* mqchat-store <cmd> <db> [arg]; stdout to out. */
int ops_store_tool(const char *cmd, const char *db, const char *arg, const char *in,
                   const char *out)
{
    return ops_store_tool_err(cmd, db, arg, in, out, NULL);
}

int ops_store_tool_err(const char *cmd, const char *db, const char *arg, const char *in,
                       const char *out, const char *err)
{
    const char *argv[] = {MQCHAT_STORE_BIN, cmd, db, arg, NULL};
    return ops_run_err(argv, in, out, err);
}

/* Whether the broker's store is PostgreSQL (CHAT_TEST_PG_PORT). */
bool ops_on_pg(const ts_broker *b)
{
    return ts_broker_pg_conninfo(b)[0] != '\0';
}

/* mqchat-store <cmd> on the broker's store: its directory, or with
 * PostgreSQL --store postgresql and its connection string. */
int ops_broker_store_tool(const ts_broker *b, const char *cmd, const char *arg, const char *in,
                          const char *out)
{
    if (ops_on_pg(b)) {
        const char *argv[] = {MQCHAT_STORE_BIN,         "--store", "postgresql", cmd,
                              ts_broker_pg_conninfo(b), arg,       NULL};
        return ops_run(argv, in, out);
    }
    return ops_store_tool(cmd, ts_broker_db_path(b), arg, in, out);
}

harness_client *ops_user(ts_broker *b, const char *id, const char *name)
{
    harness_client_opts o = {.client_id = id, .username = name};
    return harness_client_connect_opts(b, &o);
}

/* One command (a JSON object text) and its one entry, which the caller
 * reads while resp (returned in *resp, freed by the caller) lives. */
const cJSON *ops_ask(harness_client *c, const char *command, cJSON **resp)
{
    char req[2048];
    snprintf(req, sizeof req, "{\"commands\":[%s]}", command);
    *resp = harness_request(c, req, WAIT_MS);
    return harness_response_only(*resp);
}

void ops_expect_refused(harness_client *c, const char *command, const char *group,
                        const char *error)
{
    cJSON *resp = NULL;
    const cJSON *e = ops_ask(c, command, &resp);
    harness_expect_error(e, harness_json_str(e, "command"), group, NULL, error);
    cJSON_Delete(resp);
}

/* A figure of `stats` (an admin's). */
int64_t ops_stat_of(harness_client *admin, const char *figure)
{
    cJSON *resp = NULL;
    const cJSON *e = ops_ask(admin, "{\"command\":\"stats\"}", &resp);
    harness_expect_ok(e, "stats", NULL);
    int64_t v = harness_json_int(cJSON_GetObjectItemCaseSensitive(e, "figures"), figure);
    cJSON_Delete(resp);
    return v;
}

/* The deletions the tick has yet to finish (`stats`). */
int64_t ops_deletions(harness_client *admin)
{
    cJSON *resp = NULL;
    const cJSON *e = ops_ask(admin, "{\"command\":\"stats\"}", &resp);
    int64_t v = harness_json_int(e, "deletions");
    cJSON_Delete(resp);
    return v;
}

/* Waits (bounded) until the store job of `stats` is no longer running;
 * returns its state ("done", "failed"). */
const char *ops_wait_job(harness_client *admin)
{
    static char state[32];
    for (int i = 0; i < 500; i++) {
        cJSON *resp = NULL;
        const cJSON *e = ops_ask(admin, "{\"command\":\"stats\"}", &resp);
        const cJSON *job = cJSON_GetObjectItemCaseSensitive(e, "job");
        snprintf(state, sizeof state, "%s", harness_json_str(job, "state"));
        cJSON_Delete(resp);
        if (strcmp(state, "running") != 0) {
            return state;
        }
        ts_sleep_ms(20);
    }
    FAILF("the store job did not end in 10 s");
}

/* The device's sync entry for group: its acked, and the incarnation. */
int64_t ops_synced(harness_client *c, const char *group, char *inc, size_t inc_size)
{
    cJSON *resp = NULL;
    int64_t acked = -1;
    const cJSON *e = ops_ask(c, "{\"command\":\"sync\",\"replay\":false}", &resp);
    harness_expect_ok(e, "sync", NULL);
    ASSERTF(harness_sync_find(e, group, NULL, &acked, NULL), "%s not in sync", group);
    if (inc) {
        snprintf(inc, inc_size, "%s", harness_json_str(e, "incarnation"));
    }
    cJSON_Delete(resp);
    return acked;
}
