/* retention.c: deletes old messages per plugin_opt_retention_count and
 * plugin_opt_retention_days. Readers learn of it through "truncated". */
#include "plugin.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_EVERY 60      /* seconds between two retention_days sweeps */
#define GROUPS_PER_TICK 32u /* bounds the work one broker loop pass does */

void chat_retention_count(struct chat_plugin *pl, const char *group, uint64_t head)
{
    uint64_t keep = pl->cfg.retention_count;
    if (keep == 0 || head <= keep) {
        return;
    }
    chat_err rc = chat_store_trim(pl->store, group, head - keep + 1);
    if (rc != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: retention in %s: %s", group,
                             chat_strerror(rc));
    }
}

/* The ts of a stored envelope, or -1 when it cannot be read. */
static int64_t stored_ts(struct chat_plugin *pl, const char *group, uint64_t id)
{
    chat_msg m = {0};
    bool found = false;
    int64_t ts = -1;
    if (chat_store_get(pl->store, group, id, &m, &found) != CHAT_OK || !found) {
        return -1;
    }
    cJSON *env = cJSON_ParseWithLength(m.data, m.len);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(env, "ts");
    if (cJSON_IsNumber(t)) {
        ts = (int64_t)t->valuedouble;
    }
    cJSON_Delete(env);
    free(m.data);
    return ts;
}

/* Trims one group: ts grows with id, so a binary search finds the first
 * message young enough to keep. */
static int sweep_group(void *ctx, const char *group, uint64_t head)
{
    struct chat_plugin *pl = ctx;
    int64_t cutoff = chat_now_ms() - (int64_t)pl->cfg.retention_days * 86400000;
    uint64_t lo = 1, hi = head + 1;

    snprintf(pl->sweep_after, sizeof(pl->sweep_after), "%s", group);
    if (chat_store_first(pl->store, group, &lo) != CHAT_OK || lo > head) {
        return 0;
    }
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int64_t ts = stored_ts(pl, group, mid);
        if (ts < 0) {
            return 0; /* unreadable: leave this group alone, log nothing twice a minute */
        }
        if (ts < cutoff) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    chat_err rc = chat_store_trim(pl->store, group, lo);
    if (rc != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: retention in %s: %s", group,
                             chat_strerror(rc));
    }
    return 0;
}

void chat_retention_tick(struct chat_plugin *pl, time_t now)
{
    bool done = false;
    if (pl->cfg.retention_days == 0) {
        return;
    }
    if (!pl->sweeping) {
        if (now < pl->next_sweep) {
            return;
        }
        pl->sweeping = true;
        pl->sweep_after[0] = '\0';
    }
    chat_err rc = chat_store_groups(pl->store, pl->sweep_after[0] ? pl->sweep_after : NULL,
                                    GROUPS_PER_TICK, sweep_group, pl, &done);
    if (rc != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: retention sweep: %s",
                             chat_strerror(rc));
        done = true;
    }
    if (done) {
        pl->sweeping = false;
        pl->next_sweep = now + SWEEP_EVERY;
    }
}
