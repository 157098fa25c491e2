/* chat_mono: the one monotonic clock of the store and of the plugin above
 * it, for deadlines, budgets and intervals (never for a time that is
 * stored or shown: that is chat_store_set_clock's, the wall clock). It
 * lives in the store, the lowest library, so that the store may use it
 * without MQTT and the plugin without a clock of its own. No state: any
 * thread may call it.
 */
#ifndef CHAT_MONO_H
#define CHAT_MONO_H

#include <stdint.h>

/* CLOCK_MONOTONIC in microseconds: never goes back, and counts from an
 * arbitrary start, so only differences mean anything. */
int64_t chat_mono_us(void);

#endif
