/* tick.c: the plugin's periodic work (fsync batch, replay timeouts,
 * retention, figures, device expiry, deletions, other brokers' messages, the
 * reads/presence pushes, push notifications), from the broker's tick, or
 * from client events while the broker sends no tick (Mosquitto 2.0.11 with
 * per_listener_settings true); and, from the broker's tick alone, the
 * disconnect of clients that read nothing. It keeps the longest tick, for
 * the log. */
#include "chat_mono.h"
#include "plugin.h"
#include "push.h"

#include <stdlib.h>

#define EVENT_EVERY_MS 200 /* the work runs from client events at most this often */
/* A request this large is served from glibc's large bins, which first
 * merges every small block freed since the last such request. */
#define MERGE_REQUEST 4096u
/* The thread's CPU clock is a system call (no vDSO), two per tick: with one
 * message per pass of a busy broker's loop they were 2 of its ~22 system
 * calls per message (issue 23). So a tick reads it only after a tick whose
 * wall time reached this; any other tick counts its wall time, which is at
 * least its CPU time. A long phase (presence pushes, a deletion's walk)
 * spans many ticks and is measured in CPU from its second tick; a single
 * long tick counts as its wall time, an upper bound. */
#define CPU_CLOCK_AFTER_US 200
#define RELEASE_EVERY_US 1000000

struct chat_tick {
    bool seen;             /* the broker sends us ticks (see plugin.c) */
    int64_t last_event_ms; /* when the work last ran from a client event */
    int64_t start_us;      /* when the last tick began (monotonic µs) ... */
    int64_t max_us;        /* ... the longest tick so far (wall, and CPU) ... */
    int64_t cpu_max_us;    /* (at most: see CPU_CLOCK_AFTER_US) */
    int64_t gap_max_us;    /* ... and the longest time from one tick to the next */
    int64_t last_took_us;  /* the wall time of the last tick */
    int64_t release_us;    /* when the store last looked for memory to give back */
    uint64_t passes;       /* runs so far: the passes of the broker's loop (chat_tick_pass) */
};

bool chat_tick_init(struct chat_plugin *pl)
{
    pl->tick = calloc(1, sizeof(*pl->tick));
    return pl->tick != NULL;
}

void chat_tick_free(struct chat_plugin *pl)
{
    free(pl->tick);
    pl->tick = NULL;
}

/* The periodic work, in the order each part needs the one before. */
static void run(struct chat_plugin *pl)
{
    struct chat_tick *t = pl->tick;
    int64_t start = chat_mono_us();
    bool cpu_clock = t->last_took_us >= CPU_CLOCK_AFTER_US;
    int64_t cpu = cpu_clock ? chat_thread_cpu_us() : 0;
    if (t->start_us && start - t->start_us > t->gap_max_us) {
        t->gap_max_us = start - t->start_us;
    }
    t->start_us = start;
    t->passes++;
    if (pl->cfg.fsync == CHAT_SYNC_BATCH) {
        chat_err rc = chat_store_sync_async(pl->store);
        if (rc != CHAT_OK) {
            chat_log_store_error(pl, rc, "store sync");
        }
    }
    /* After LevelDB wrote a memtable out, the broker's resident memory
     * follows what it holds, not its highest (chat_store.h); once a second,
     * since ticks come once per pass of a busy loop. */
    if (start - t->release_us >= RELEASE_EVERY_US) {
        t->release_us = start;
        (void)chat_store_release_memory(pl->store);
    }
    time_t now = time(NULL);
    chat_health_tick(pl, now);
    chat_relay_tick(pl);
    chat_envelope_cache_tick(pl);
    chat_replay_tick(pl, chat_now_ms());
    chat_retention_tick(pl, now);
    chat_stats_tick(pl, now);
    chat_expiry_tick(pl, now);
    chat_admin_tick(pl, chat_now_ms());
    chat_presence_tick(pl, chat_now_ms());
    chat_push_tick(pl, chat_now_ms());
    /* glibc keeps small freed blocks apart until its next large request or
     * free merges them all (malloc_consolidate), in that one call: after
     * 50,000 devices left, the members, links and verdicts they freed took
     * 18-29 ms to merge in whichever call came next. Asking once a tick
     * merges what one pass of the loop freed (at most 2.3 ms measured, with
     * 4,096 members freed per tick: chat_tick in bench/run). volatile: a
     * compiler may drop a malloc that is only freed. */
    void *volatile merge = malloc(MERGE_REQUEST);
    free(merge);
    /* Wall time counts the time the machine gave others too; the thread's
     * CPU time is the tick's own work. */
    int64_t took = chat_mono_us() - start;
    int64_t worked = cpu_clock ? chat_thread_cpu_us() - cpu : took;
    t->last_took_us = took;
    t->max_us = took > t->max_us ? took : t->max_us;
    t->cpu_max_us = worked > t->cpu_max_us ? worked : t->cpu_max_us;
}

void chat_tick_set_seen(struct chat_plugin *pl)
{
    pl->tick->seen = true;
}

bool chat_tick_seen(const struct chat_plugin *pl)
{
    return pl->tick->seen;
}

uint64_t chat_tick_pass(const struct chat_plugin *pl)
{
    return pl->tick->passes;
}

void chat_tick_from_broker(struct chat_plugin *pl)
{
    chat_tick_set_seen(pl);
    run(pl);
    /* Here only: the broker's tick comes from its main loop, between the
     * passes over its clients, where a client may be disconnected. The
     * work run from client events (below) may not do it. */
    chat_peers_kick(pl);
}

void chat_tick_from_event(struct chat_plugin *pl)
{
    struct chat_tick *t = pl->tick;
    if (t->seen) {
        return;
    }
    int64_t now = chat_now_ms();
    if (now - t->last_event_ms >= EVENT_EVERY_MS) {
        t->last_event_ms = now;
        run(pl);
    }
}

void chat_tick_report(struct chat_plugin *pl)
{
    const struct chat_tick *t = pl->tick;
    if (!t || !t->seen) {
        return; /* never ran (a refused start): nothing to report, and one line says why */
    }
    /* The broker's loop waits up to 100 ms for its sockets between two
     * ticks when idle (2.0.11 to 2.0.20): a longer gap is time the broker
     * spent working, ours or anyone's. */
    mosquitto_log_printf(MOSQ_LOG_INFO,
                         "mosquitto-chat: longest tick %.3f ms (%.3f ms of CPU at most), longest "
                         "gap between ticks %.3f ms",
                         (double)t->max_us / 1000.0, (double)t->cpu_max_us / 1000.0,
                         (double)t->gap_max_us / 1000.0);
}
