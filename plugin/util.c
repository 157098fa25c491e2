/* util.c: the clock and the log line of a store error, which every part of
 * the plugin uses; they depend on nothing else of the plugin. */
#include "plugin.h"

#include <stdarg.h>
#include <stdio.h>
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

/* Store error lines per second at most: a client publishing as fast as it
 * can while the disk is full must not fill the broker's log too. */
#define ERR_LINES_PER_SECOND 10u

void chat_log_store_error(struct chat_plugin *pl, chat_err rc, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    int64_t second = chat_now_ms() / 1000;
    const char *detail = pl->store ? chat_store_last_error(pl->store) : "the store is closed";

    chat_storage_failed(pl, detail);
    if (second != pl->err_second) {
        if (pl->err_dropped) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: %u more store errors not logged (at most %u "
                                 "lines a second)",
                                 pl->err_dropped, ERR_LINES_PER_SECOND);
        }
        pl->err_second = second;
        pl->err_lines = 0;
        pl->err_dropped = 0;
    }
    if (pl->err_lines >= ERR_LINES_PER_SECOND) {
        pl->err_dropped++;
        return;
    }
    pl->err_lines++;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: %s: %s%s%s%s", what, chat_strerror(rc),
                         detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}
