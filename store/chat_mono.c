/* chat_mono: the monotonic clock (see chat_mono.h). */
#include "chat_mono.h"

#include <time.h>

int64_t chat_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
