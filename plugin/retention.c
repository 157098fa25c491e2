/* retention.c: deletes old messages per plugin_opt_retention_count and
 * plugin_opt_retention_days, in bounded steps. Readers learn of it through
 * "truncated".
 *
 * The broker's thread is everyone's: a publish deletes at most TRIM_STEP
 * messages of its group, and the tick spends at most TICK_BUDGET_MS on the
 * sweep over all groups, which picks up whatever a publish left (retention
 * just enabled on a long history) and applies retention_days. */
#include "plugin.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWEEP_EVERY 60   /* seconds between two sweeps when nothing is left over */
#define TRIM_STEP 1024u  /* messages (and their cid keys) deleted per store call */
#define TICK_BUDGET_MS 5 /* milliseconds of sweeping per broker loop pass */

/* The sweep over all groups. */
struct chat_retention {
    time_t next_sweep;                   /* when the next sweep starts */
    bool sweeping;                       /* a sweep is under way */
    char after[CHAT_STORE_MAX_NAME + 1]; /* the last group swept ("" at its start) */
};

bool chat_retention_init(struct chat_plugin *pl)
{
    pl->retention = calloc(1, sizeof(*pl->retention));
    return pl->retention != NULL;
}

void chat_retention_free(struct chat_plugin *pl)
{
    free(pl->retention);
    pl->retention = NULL;
}

static void trim_failed(struct chat_plugin *pl, const char *group, chat_err rc)
{
    mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: retention in %s: %s (%s)", group,
                         chat_strerror(rc), chat_store_last_error(pl->store));
}

void chat_retention_count(struct chat_plugin *pl, const char *group, uint64_t head)
{
    uint64_t keep = pl->cfg.retention_count, first = 0;
    /* With PostgreSQL this is a second round trip on the publish: a retry
     * of a cid that retention removed must be stored anew at once. */
    if (keep == 0 || head <= keep) {
        return;
    }
    chat_err rc = chat_store_trim(pl->store, group, head - keep + 1, TRIM_STEP, &first);
    if (rc != CHAT_OK) {
        trim_failed(pl, group, rc);
    } else if (first < head - keep + 1) {
        pl->retention->next_sweep = 0; /* more than one step to delete: the tick goes on */
    }
}

/* The ts of a stored envelope, or -1 when it cannot be read. */
static int64_t stored_ts(struct chat_plugin *pl, const char *group, uint64_t id)
{
    chat_msg m = {0};
    bool found = false;
    int64_t ts = -1;
    chat_err rc = chat_store_get(pl->store, group, id, &m, &found);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "retention in %s: reading message %llu", group,
                             (unsigned long long)id);
    }
    if (rc != CHAT_OK || !found) {
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

/* The first id group keeps under retention_days: ts grows with id, so a
 * binary search finds the first message young enough. */
static uint64_t keep_from_days(struct chat_plugin *pl, const char *group, uint64_t first,
                               uint64_t head)
{
    int64_t cutoff = chat_now_ms() - (int64_t)pl->cfg.retention_days * 86400000;
    uint64_t lo = first, hi = head + 1;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int64_t ts = stored_ts(pl, group, mid);
        if (ts < 0) {
            return first; /* unreadable: leave this group alone this time */
        }
        if (ts < cutoff) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

struct sweep {
    struct chat_plugin *pl;
    int64_t deadline_ms;
    bool out_of_time; /* stopped inside a group, which the next tick resumes */
};

/* Trims one group as far as both options say, in steps, while time lasts. */
static int sweep_group(void *ctx, const char *group, uint64_t head)
{
    struct sweep *sw = ctx;
    struct chat_plugin *pl = sw->pl;
    uint64_t first = 1, before = 1;

    chat_err rc = chat_store_first(pl->store, group, &first);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "retention in %s", group);
    }
    if (rc != CHAT_OK || first > head) {
        snprintf(pl->retention->after, sizeof(pl->retention->after), "%s", group);
        return 0;
    }
    if (pl->cfg.retention_count && head > pl->cfg.retention_count) {
        before = head - pl->cfg.retention_count + 1;
    }
    if (pl->cfg.retention_days) {
        uint64_t by_days = keep_from_days(pl, group, first, head);
        before = by_days > before ? by_days : before;
    }
    while (first < before) {
        if (chat_now_ms() >= sw->deadline_ms) {
            sw->out_of_time = true;
            return 1;
        }
        chat_err rc = chat_store_trim(pl->store, group, before, TRIM_STEP, &first);
        if (rc != CHAT_OK) {
            trim_failed(pl, group, rc);
            break;
        }
    }
    snprintf(pl->retention->after, sizeof(pl->retention->after), "%s", group);
    return chat_now_ms() >= sw->deadline_ms ? (sw->out_of_time = true, 1) : 0;
}

void chat_retention_tick(struct chat_plugin *pl, time_t now)
{
    bool done = false;
    struct sweep sw = {pl, chat_now_ms() + TICK_BUDGET_MS, false};
    if (pl->cfg.retention_days == 0 && pl->cfg.retention_count == 0) {
        return;
    }
    if (!pl->retention->sweeping) {
        if (now < pl->retention->next_sweep) {
            return;
        }
        pl->retention->sweeping = true;
        pl->retention->after[0] = '\0';
    }
    chat_err rc =
        chat_store_groups(pl->store, pl->retention->after[0] ? pl->retention->after : NULL, 64,
                          sweep_group, &sw, &done);
    if (rc != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: retention sweep: %s (%s)",
                             chat_strerror(rc), chat_store_last_error(pl->store));
        done = true;
    }
    if (done && !sw.out_of_time) {
        pl->retention->sweeping = false;
        pl->retention->next_sweep = now + SWEEP_EVERY;
    }
}
