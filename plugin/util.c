/* util.c: the clock and the log line of a store error, which every part of
 * the plugin uses; they depend on nothing else of the plugin. */
#include "plugin.h"

#include <stdarg.h>
#include <stdio.h>

int64_t chat_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void chat_log_store_error(struct chat_plugin *pl, chat_err rc, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const char *detail = pl->store ? chat_store_last_error(pl->store) : "the store is closed";
    chat_storage_failed(pl, detail);
    mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: %s: %s%s%s%s", what, chat_strerror(rc),
                         detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}
