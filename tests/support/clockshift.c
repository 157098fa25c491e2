/* clockshift.c: a shared object the broker preloads (ts_broker_shift_clock)
 * so that its wall clock runs CHAT_CLOCK_SHIFT_S seconds ahead: the plugin
 * then stamps messages and sweeps retention_days as it would that much later.
 * No test can wait days, and the plugin has no clock of its own to set from
 * outside; a preloaded clock changes nothing in the plugin.
 *
 * Only the wall clock moves (CLOCK_REALTIME and its coarse variant, time(),
 * gettimeofday()); the monotonic clocks, which the broker's keep-alives and
 * timers use, are left alone. The shift is read once, at load time. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

typedef int clock_gettime_fn(clockid_t, struct timespec *);

static long g_shift; /* seconds */
static clock_gettime_fn *g_real;

/* The next clock_gettime after this object's (libc's). dlsym returns an
 * object pointer; POSIX guarantees it converts to a function pointer, ISO C
 * does not: copy the bits. */
static clock_gettime_fn *real_clock_gettime(void)
{
    void *sym = dlsym(RTLD_NEXT, "clock_gettime");
    clock_gettime_fn *fn = NULL;

    memcpy(&fn, &sym, sizeof fn);
    return fn;
}

__attribute__((constructor)) static void clockshift_init(void)
{
    const char *s = getenv("CHAT_CLOCK_SHIFT_S");

    g_shift = s != NULL ? strtol(s, NULL, 10) : 0;
    g_real = real_clock_gettime();
}

int clock_gettime(clockid_t id, struct timespec *tp)
{
    int rc;

    if (g_real == NULL) /* called before the constructor ran */
        g_real = real_clock_gettime();
    rc = g_real(id, tp);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        tp->tv_sec += g_shift;
    return rc;
}

time_t time(time_t *out)
{
    struct timespec ts;
    time_t now;

    clock_gettime(CLOCK_REALTIME, &ts);
    now = ts.tv_sec;
    if (out != NULL)
        *out = now;
    return now;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;

    (void)tz;
    clock_gettime(CLOCK_REALTIME, &ts);
    tv->tv_sec = ts.tv_sec; /* glibc declares tv nonnull */
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}
