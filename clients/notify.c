/* notify.c: events to the application (see notify.h). */
#include "notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define REASON_MAX 512 /* bytes of an error text, NUL included */

void chat_notify_event(const chat_notify *n, const chat_client_event *ev)
{
    if (n->on_event != NULL)
        n->on_event(n->arg, ev);
}

void chat_notify_error(const chat_notify *n, const char *group, const char *fmt, ...)
{
    chat_client_event ev;
    char reason[REASON_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    memset(&ev, 0, sizeof ev);
    ev.type = CHAT_CLIENT_EV_ERROR;
    ev.group = group;
    ev.reason = reason;
    chat_notify_event(n, &ev);
}
