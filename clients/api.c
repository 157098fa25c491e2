/* api.c: errors, reasons and calls of the public functions (see api.h). */
#include "api.h"

#include <stdarg.h>
#include <stdio.h>

#include "clock.h"
#include "dispatch.h"
#include "proto.h"

#define GRACE_MS 2000 /* a waiter waits this much past the dispatcher's deadline */

static _Thread_local char tl_reason[CHAT_REASON_MAX];

const char *chat_client_strerror(chat_client_err err)
{
    switch (err) {
    case CHAT_CLIENT_OK:
        return "success";
    case CHAT_CLIENT_ERR_INVAL:
        return "invalid argument";
    case CHAT_CLIENT_ERR_NOMEM:
        return "out of memory";
    case CHAT_CLIENT_ERR_CONNECT:
        return "cannot connect to the broker";
    case CHAT_CLIENT_ERR_TIMEOUT:
        return "timed out";
    case CHAT_CLIENT_ERR_REFUSED:
        return "refused by the server";
    case CHAT_CLIENT_ERR_PROTOCOL:
        return "unexpected answer from the server";
    case CHAT_CLIENT_ERR_STATE:
        return "state file error";
    case CHAT_CLIENT_ERR_FULL:
        return "too many messages waiting to be sent";
    case CHAT_CLIENT_ERR_MQTT:
        return "MQTT client error";
    case CHAT_CLIENT_ERR_CLOSED:
        return "client closed";
    case CHAT_CLIENT_ERR_IN_USE:
        return "the state file is in use by another client";
    }
    return "unknown error";
}

const char *chat_client_reason(void)
{
    return tl_reason;
}

chat_client_err chat_api_report(chat_client_err err, const char *fmt, ...)
{
    va_list ap;

    tl_reason[0] = '\0';
    if (fmt != NULL) {
        va_start(ap, fmt);
        vsnprintf(tl_reason, sizeof tl_reason, fmt, ap);
        va_end(ap);
    }
    return err;
}

chat_client_err chat_api_check_group(const chat_client *c, const char *group)
{
    const char *why;

    if (c == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    if ((why = chat_client_group_error(group)) != NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "%s", why);
    return CHAT_CLIENT_OK;
}

chat_client_err chat_api_post(chat_client *c, struct call *call)
{
    if (!chat_queue_post_call(&c->queue, call, c->request_timeout_ms)) {
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    return CHAT_CLIENT_OK;
}

static bool on_dispatcher(const chat_client *c)
{
    return c->thread_started && pthread_equal(pthread_self(), c->thread);
}

chat_client_err chat_api_run(chat_client *c, struct call *call, int timeout_ms)
{
    chat_client_err err;

    if (on_dispatcher(c)) {
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_INVAL,
                               "blocking calls cannot be made from a callback");
    }
    if (timeout_ms <= 0)
        timeout_ms = c->request_timeout_ms;
    call->waited = true;
    if (!chat_queue_post_call(&c->queue, call, timeout_ms)) {
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    if (!chat_queue_wait(&c->queue, call, call->deadline + GRACE_MS))
        return chat_api_report(CHAT_CLIENT_ERR_TIMEOUT, "no answer within %d ms", timeout_ms);
    err = call->err;
    if (err != CHAT_CLIENT_OK) {
        chat_api_report(err, "%s", call->reason);
        chat_call_free(call);
        return err;
    }
    return chat_api_report(CHAT_CLIENT_OK, NULL);
}
