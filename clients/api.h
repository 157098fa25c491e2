/* api: what the public functions share: the calling thread's reason for
 * its last error, the argument checks, and handing a call to the dispatcher
 * (posting it, or posting it and waiting for it).
 *
 * Threading: any thread but the dispatcher's for chat_api_run (a blocking
 * call from a callback is refused rather than deadlocking); the reason is
 * thread-local.
 */
#ifndef CHAT_CLIENT_API_H
#define CHAT_CLIENT_API_H

#include "chat_client.h"
#include "queue.h"

/* Sets this thread's reason (fmt NULL: none) and returns err. */
chat_client_err chat_api_report(chat_client_err err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Checks c and group; sets the reason. */
chat_client_err chat_api_check_group(const chat_client *c, const char *group);

/* Hands an unwaited call (taken, freed by the dispatcher) to the
 * dispatcher, its deadline request_timeout_ms away. */
chat_client_err chat_api_post(chat_client *c, struct call *call);

/* Runs a blocking call: hands it to the dispatcher and waits until it is
 * done or its deadline (timeout_ms, <= 0: request_timeout_ms; plus a grace)
 * passed. On OK the reason is cleared and the caller reads the results and
 * frees call; otherwise call is freed here (or by the dispatcher if
 * abandoned) and the reason is set. */
chat_client_err chat_api_run(chat_client *c, struct call *call, int timeout_ms);

#endif
