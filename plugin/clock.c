/* clock.c: the plugin's clock (chat_now_ms), which every part of the plugin
 * and the store's last-use stamps read; it depends on nothing else of the
 * plugin. */
#include "plugin.h"

#include <stdlib.h>

/* The test hook's shift, in ms: set once at init, before any event. One
 * plugin instance per broker process, so a file-wide value is its own. */
static int64_t clock_shift_ms;

void chat_clock_init(void)
{
    const char *s = getenv("MOSQUITTO_CHAT_TEST_CLOCK_SHIFT");
    clock_shift_ms = 0;
    if (s && s[0]) {
        char *end = NULL;
        long long v = strtoll(s, &end, 10);
        if (*end == '\0' && v > -(1LL << 40) && v < (1LL << 40)) {
            clock_shift_ms = (int64_t)v * 1000;
            mosquitto_log_printf(MOSQ_LOG_WARNING,
                                 "mosquitto-chat: test hook: the plugin's clock is shifted by %lld "
                                 "s (MOSQUITTO_CHAT_TEST_CLOCK_SHIFT)",
                                 v);
        }
    }
}

int64_t chat_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + clock_shift_ms;
}

int64_t chat_store_clock(void *ctx)
{
    (void)ctx;
    return chat_now_ms();
}

int64_t chat_thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
