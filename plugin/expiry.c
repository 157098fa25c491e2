/* expiry.c: drops device cursors not used for plugin_opt_device_expiry_days
 * (no subscribe, ack or request of that device), in bounded slices from the
 * tick, like retention: a sweep over every cursor starts every hour and
 * spends at most TICK_BUDGET_MS per broker loop pass. The member stays, and
 * its maximum cursor record with it: a device that comes back starts where
 * the member's most advanced device was. */
#include "plugin.h"

#define EXPIRE_EVERY 3600 /* seconds from the end of one sweep to the next */
#define EXPIRE_STEP 256u  /* cursors looked at per store call */
#define TICK_BUDGET_MS 5  /* milliseconds of sweeping per broker loop pass */

void chat_expiry_tick(struct chat_plugin *pl, time_t now)
{
    if (pl->cfg.device_expiry_days == 0) {
        return;
    }
    if (!pl->expiring) {
        if (now < pl->next_expiry) {
            return;
        }
        pl->expiring = true;
        pl->expiring_removed = 0;
        pl->expire_resume[0] = pl->expire_resume[1] = 0;
    }
    int64_t start = chat_now_ms();
    int64_t cutoff = start - (int64_t)pl->cfg.device_expiry_days * 86400000;
    bool done = false;
    while (!done && chat_now_ms() - start < TICK_BUDGET_MS) {
        size_t removed = 0;
        chat_err rc = chat_store_expire_devices(pl->store, cutoff, EXPIRE_STEP, pl->expire_resume,
                                                sizeof(pl->expire_resume), &removed, &done);
        if (rc != CHAT_OK) {
            chat_log_store_error(pl, rc, "device expiry");
            done = true; /* the next sweep tries again */
        }
        pl->stats.expired += removed;
        pl->expiring_removed += removed;
    }
    if (done) {
        pl->expiring = false;
        pl->next_expiry = now + EXPIRE_EVERY;
        if (pl->expiring_removed) {
            mosquitto_log_printf(MOSQ_LOG_INFO,
                                 "mosquitto-chat: device expiry: dropped %llu device cursors "
                                 "unused for %llu days",
                                 (unsigned long long)pl->expiring_removed,
                                 (unsigned long long)pl->cfg.device_expiry_days);
        }
    }
}
