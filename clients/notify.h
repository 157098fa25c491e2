/* notify: what the application hears through on_event: one place that
 * calls it, for every module that has something to report.
 *
 * Threading: the dispatcher thread only (on_event runs there, by the
 * public header's promise).
 */
#ifndef CHAT_CLIENT_NOTIFY_H
#define CHAT_CLIENT_NOTIFY_H

#include "chat_client.h"

typedef struct chat_notify {
    chat_client_event_fn *on_event; /* the application's, or NULL */
    void *arg;
} chat_notify;

/* Hands ev to on_event, if any. */
void chat_notify_event(const chat_notify *n, const chat_client_event *ev);

/* Reports CHAT_CLIENT_EV_ERROR about group (may be NULL) with a printf
 * reason (cut at 511 bytes). */
void chat_notify_error(const chat_notify *n, const char *group, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
