/* chat_quiet: the log of one thing's outages, kept short. While
 * PostgreSQL is down the store retries its connections (at the pace of
 * pg_backoff), and the plugin fails every publish and request that needs
 * the store; each failure logged would flood the operator's log. Per
 * thing that fails (the store's writer and listener connections, the
 * plugin's store calls) it logs:
 *
 *   1. the first failure of an outage, in full;
 *   2. a failure whose text this outage has not logged yet, in full (a
 *      changed cause stays visible), up to CHAT_QUIET_TEXTS texts an outage;
 *   3. else at most one line per CHAT_QUIET_EVERY_MS: "<name> still down
 *      after N s: A attempts failed, L lines not logged (H with an error
 *      not logged before); last: <text>", H counting the failures whose
 *      new text came past CHAT_QUIET_TEXTS;
 *   4. when it is back, one line: "<name> back after N s
 *      (A attempts failed, L lines not logged since the last)".
 *
 * So an outage of T seconds logs at most 1 + CHAT_QUIET_TEXTS + T / 30 + 1
 * lines per thing, however fast the failures come. Part of the store
 * library (no MQTT, no PostgreSQL): store/pg's pg_watch and pg_db share it,
 * and the plugin's store_health logs its store errors of an outage with it.
 *
 * Conventions: a chat_quiet is the caller's memory (embedded in its
 * struct), set up by chat_quiet_init and released by chat_quiet_destroy;
 * its fields are shown for that only, never read or written by callers.
 *
 * Clock and sink: the default clock is the monotonic one and the default
 * sink stderr (the store has no logger of its own: stderr reaches the
 * broker's log when it runs in the foreground); the plugin passes the
 * broker's log as its sink, a test injects both.
 *
 * Threading: a chat_quiet has a mutex of its own; any thread may report on
 * it (the writer is lost on the broker's thread and remade on the
 * watcher's). The sink is called under it, and must not report on the
 * same chat_quiet. */
#ifndef CHAT_QUIET_H
#define CHAT_QUIET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* At most one "still down" line per connection this often. */
#define CHAT_QUIET_EVERY_MS 30000
/* Distinct failure texts an outage logs in full at most. */
#define CHAT_QUIET_TEXTS 8
/* A failure's text is cut at this many bytes. */
#define CHAT_QUIET_TEXT_MAX 512

/* A monotonic clock in ms. */
typedef int64_t chat_quiet_clock(void);
/* Writes one line (no newline at its end). */
typedef void chat_quiet_sink(void *ctx, const char *line);

typedef struct chat_quiet {
    const char *name;                 /* "PostgreSQL writer": a static string */
    chat_quiet_clock *now;            /* the clock */
    chat_quiet_sink *sink;            /* where lines go */
    void *ctx;                        /* the sink's */
    pthread_mutex_t mu;               /* over everything below */
    bool down;                        /* in an outage: a failure since the last success */
    int64_t since;                    /* when the outage began (its first failure) */
    int64_t last_line;                /* when this outage last logged a line */
    uint64_t attempts;                /* failures in this outage */
    uint64_t unlogged;                /* failures not logged since the last line */
    uint64_t hidden;                  /* new texts past CHAT_QUIET_TEXTS, not logged in full */
    uint64_t texts[CHAT_QUIET_TEXTS]; /* hashes of the texts this outage logged */
    int ntexts;
} chat_quiet;

/* Sets up q for the connection called name (static). now NULL: the
 * monotonic clock; sink NULL: stderr, one line each. Pair with
 * chat_quiet_destroy. */
void chat_quiet_init(chat_quiet *q, const char *name, chat_quiet_clock *now, chat_quiet_sink *sink,
                     void *ctx);

/* Releases q's mutex. Nothing is logged. */
void chat_quiet_destroy(chat_quiet *q);

/* Reports one failure of the connection: fmt, after "mosquitto-chat: ",
 * is the line to log when rules 1 and 2 say so; else it is counted, and
 * a "still down" line is logged when rule 3 lets it. Returns whether a
 * line was logged. */
bool chat_quiet_fail(chat_quiet *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reports the connection made: the "back" line when it was down (returns
 * true), nothing otherwise. */
bool chat_quiet_ok(chat_quiet *q);

#endif
