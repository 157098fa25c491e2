/* store_backend: what every backend's handle shares (see store_backend.h). */
#include "store_backend.h"

#include <time.h>

static int64_t realtime_ms(void *ctx)
{
    struct timespec ts;
    (void)ctx;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void store_base_init(chat_store *st, const chat_store_ops *ops)
{
    st->ops = ops;
    st->clock = realtime_ms;
    st->clock_ctx = NULL;
    st->recovered = false;
    st->incarnation[0] = '\0';
    st->last_err[0] = '\0';
}

void store_set_clock(chat_store *st, chat_clock_fn fn, void *ctx)
{
    st->clock = fn ? fn : realtime_ms;
    st->clock_ctx = fn ? ctx : NULL;
}
