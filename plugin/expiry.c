/* expiry.c: drops device cursors not used for plugin_opt_device_expiry_days
 * (no subscribe, ack or request of that device), in bounded slices from the
 * tick, like retention: a sweep over every cursor starts every hour and
 * spends at most TICK_BUDGET_MS per broker loop pass. The member stays, and
 * its maximum cursor record with it: a device that comes back starts where
 * the member's most advanced device was. */
#include "plugin.h"

#include <stdlib.h>

#define EXPIRE_EVERY 3600 /* seconds from the end of one sweep to the next */
#define EXPIRE_STEP 256u  /* cursors looked at per store call */
#define TICK_BUDGET_MS 5  /* milliseconds of sweeping per broker loop pass */

/* The sweep over every cursor. */
struct chat_expiry {
    time_t next;                        /* when the next sweep starts */
    bool running;                       /* a sweep is under way */
    uint64_t removed;                   /* cursors dropped by this sweep so far */
    char resume[CHAT_STORE_RESUME_MAX]; /* its resume point */
};

bool chat_expiry_init(struct chat_plugin *pl)
{
    pl->expiry = calloc(1, sizeof(*pl->expiry));
    return pl->expiry != NULL;
}

void chat_expiry_free(struct chat_plugin *pl)
{
    free(pl->expiry);
    pl->expiry = NULL;
}

void chat_expiry_tick(struct chat_plugin *pl, time_t now)
{
    struct chat_expiry *x = pl->expiry;
    if (pl->cfg.device_expiry_days == 0) {
        return;
    }
    if (!x->running) {
        if (now < x->next) {
            return;
        }
        x->running = true;
        x->removed = 0;
        x->resume[0] = x->resume[1] = 0;
    }
    int64_t start = chat_now_ms();
    int64_t cutoff = start - (int64_t)pl->cfg.device_expiry_days * 86400000;
    bool done = false;
    while (!done && chat_now_ms() - start < TICK_BUDGET_MS) {
        size_t removed = 0;
        chat_err rc = chat_store_expire_devices(pl->store, cutoff, EXPIRE_STEP, x->resume,
                                                sizeof(x->resume), &removed, &done);
        if (rc != CHAT_OK) {
            chat_log_store_error(pl, rc, "device expiry");
            done = true; /* the next sweep tries again */
        }
        pl->stats.expired += removed;
        x->removed += removed;
    }
    if (done) {
        x->running = false;
        x->next = now + EXPIRE_EVERY;
        if (x->removed) {
            mosquitto_log_printf(MOSQ_LOG_INFO,
                                 "mosquitto-chat: device expiry: dropped %llu device cursors "
                                 "unused for %llu days",
                                 (unsigned long long)x->removed,
                                 (unsigned long long)pl->cfg.device_expiry_days);
        }
    }
}
