/* chores.c: the plugin's periodic work (fsync batch, replay timeouts,
 * retention, figures, device expiry, deletions, other brokers' messages), from the broker's
 * tick, or from client events while the broker sends no tick (Mosquitto 2.0.11 with
 * per_listener_settings true). */
#include "plugin.h"

void chat_chores(struct chat_plugin *pl)
{
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
