/* chores.c: the plugin's periodic work (fsync batch, replay timeouts,
 * retention, figures, device expiry, deletions, other brokers' messages, the
 * reads/presence pushes, push notifications), from the broker's tick, or from client events while
 * the broker sends no tick (Mosquitto 2.0.11 with per_listener_settings
 * true). It keeps the longest tick, for the log. */
#include "plugin.h"
#include "push.h"

static int64_t clock_us(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void chat_chores(struct chat_plugin *pl)
{
    int64_t start = clock_us(CLOCK_MONOTONIC);
    int64_t cpu = clock_us(CLOCK_THREAD_CPUTIME_ID);
    if (pl->tick_us && start - pl->tick_us > pl->tick_gap_max_us) {
        pl->tick_gap_max_us = start - pl->tick_us;
    }
    pl->tick_us = start;
    if (pl->cfg.fsync == CHAT_SYNC_BATCH) {
        chat_err rc = chat_store_sync_async(pl->store);
        if (rc != CHAT_OK) {
            chat_log_store_error(pl, rc, "store sync");
        }
    }
    time_t now = time(NULL);
    chat_storage_chores(pl, now);
    chat_relay_tick(pl);
    chat_replay_tick(pl, now);
    chat_retention_tick(pl, now);
    chat_stats_tick(pl, now);
    chat_expiry_tick(pl, now);
    chat_admin_tick(pl);
    chat_presence_tick(pl, chat_now_ms());
    chat_push_tick(pl, chat_now_ms());
    /* Wall time counts the time the machine gave others too; the thread's
     * CPU time is the tick's own work. */
    int64_t took = clock_us(CLOCK_MONOTONIC) - start;
    int64_t worked = clock_us(CLOCK_THREAD_CPUTIME_ID) - cpu;
    pl->tick_max_us = took > pl->tick_max_us ? took : pl->tick_max_us;
    pl->tick_cpu_max_us = worked > pl->tick_cpu_max_us ? worked : pl->tick_cpu_max_us;
}

void chat_chores_without_ticks(struct chat_plugin *pl)
{
    if (pl->ticks_seen) {
        return;
    }
    int64_t now = chat_now_ms();
    if (now - pl->last_chores_ms >= 200) {
        pl->last_chores_ms = now;
        chat_chores(pl);
    }
}

void chat_chores_report(struct chat_plugin *pl)
{
    if (!pl->ticks_seen) {
        return; /* never ran (a refused start): nothing to report, and one line says why */
    }
    /* The broker's loop waits up to 100 ms for its sockets between two
     * ticks when idle (2.0.11 to 2.0.20): a longer gap is time the broker
     * spent working, ours or anyone's. */
    mosquitto_log_printf(MOSQ_LOG_INFO,
                         "mosquitto-chat: longest tick %.3f ms (%.3f ms of CPU at most), longest "
                         "gap between ticks %.3f ms",
                         (double)pl->tick_max_us / 1000.0, (double)pl->tick_cpu_max_us / 1000.0,
                         (double)pl->tick_gap_max_us / 1000.0);
}
