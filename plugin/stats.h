/* stats.h: the figures under $SYS/broker/chat/ (stats.c): the counters
 * every part of the plugin bumps, the append latency histogram and the
 * functions that publish and list them. plugin.h includes it, since struct
 * chat_plugin holds the counters; stats.c is the only file that reads them
 * back. Everything here runs on the broker's thread. */
#ifndef CHAT_STATS_H
#define CHAT_STATS_H

#include <stdint.h>
#include <time.h>

#include "sbuf.h"

struct chat_plugin;

/* The figures under $SYS/broker/chat/ (stats.c). Counters are bumped in
 * place where things happen (a field increment: nothing measurable per
 * message); stats.c reads them from the tick. */
#define CHAT_STATS_BUCKETS 320 /* of the write latency histogram, see chat_stats_write */
struct chat_stats {
    uint64_t stored;          /* messages stored since start */
    uint64_t refused;         /* publishes refused since start */
    uint64_t acks;            /* acks applied since start */
    uint64_t pages;           /* replay pages sent since start */
    uint64_t expired;         /* device cursors dropped by device_expiry_days since start */
    uint64_t expired_members; /* members that went with their last device, since start */
    uint32_t writes[CHAT_STATS_BUCKETS]; /* store append latency, this interval */
    uint64_t nwrites;                    /* appends timed this interval */
    uint64_t p50_us, p99_us;             /* of the last interval */
    time_t interval_start;               /* when this interval began */
    time_t last_sys;                     /* when the figures were last published */
};

/* Records one store append that took ns nanoseconds: a log-linear bucket
 * (16 linear ones, then 8 per power of two) of the microseconds. */
static inline void chat_stats_write(struct chat_stats *s, uint64_t ns)
{
    uint64_t us = ns / 1000;
    unsigned b;
    if (us < 16) {
        b = (unsigned)us;
    } else {
        unsigned e = 63u - (unsigned)__builtin_clzll(us); /* >= 4 */
        b = 16u + (e - 4u) * 8u + (unsigned)((us >> (e - 3u)) & 7u);
    }
    s->writes[b < CHAT_STATS_BUCKETS ? b : CHAT_STATS_BUCKETS - 1]++;
    s->nwrites++;
}

/* From the tick: ends an interval every sys_interval seconds (10 when the
 * broker publishes no $SYS) and, unless sys_interval is 0, publishes the
 * figures, retained, under $SYS/broker/chat/. */
void chat_stats_tick(struct chat_plugin *pl, time_t now);

/* Appends the figures to b as the members of a JSON object, without the
 * braces: "messages/stored":N,... */
void chat_stats_json(struct chat_plugin *pl, sbuf *b);

#endif
