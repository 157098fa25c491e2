/* clock: the client library's one clock, monotonic milliseconds, shared by
 * every module that keeps time (deadlines, timers, backoff).
 *
 * Threading: pure functions, any thread.
 */
#ifndef CHAT_CLIENT_CLOCK_H
#define CHAT_CLIENT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t chat_now_ms(void);

/* The CLOCK_MONOTONIC time ms as a timespec, for pthread_cond_timedwait on
 * a condition variable created with that clock. */
struct timespec chat_ms_timespec(int64_t ms);

#endif
