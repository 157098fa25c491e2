/* pg_quiet: the log of one connection's outages, kept short. While
 * PostgreSQL is down the backend retries a connection a few times a
 * second; each failure logged would flood the operator's log. Per
 * connection (the writer, the listener) it logs:
 *
 *   1. the first failure of an outage, in full;
 *   2. a failure whose text this outage has not logged yet, in full (a
 *      changed cause stays visible), up to PG_QUIET_TEXTS texts an outage;
 *   3. else at most one line per PG_QUIET_EVERY_MS: "<name> still down
 *      after N s: A attempts failed, L lines not logged (H with an error
 *      not logged before); last: <text>", H counting the failures whose
 *      new text came past PG_QUIET_TEXTS;
 *   4. when the connection is back, one line: "<name> back after N s
 *      (A attempts failed, L lines not logged since the last)".
 *
 * So an outage of T seconds logs at most 1 + PG_QUIET_TEXTS + T / 30 + 1
 * lines per connection, however fast the retries. Private to store/pg,
 * below pg_watch and pg_db, which share it.
 *
 * Clock and sink: the default clock is the monotonic one and the default
 * sink stderr (the store has no logger of its own: stderr reaches the
 * broker's log when it runs in the foreground); a test injects both.
 *
 * Threading: a pg_quiet has a mutex of its own; any thread may report on
 * it (the writer is lost on the broker's thread and remade on the
 * watcher's). The sink is called under it. */
#ifndef PG_QUIET_H
#define PG_QUIET_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* At most one "still down" line per connection this often. */
#define PG_QUIET_EVERY_MS 30000
/* Distinct failure texts an outage logs in full at most. */
#define PG_QUIET_TEXTS 8
/* A failure's text is cut at this many bytes. */
#define PG_QUIET_TEXT_MAX 512

/* A monotonic clock in ms. */
typedef int64_t pg_quiet_clock(void);
/* Writes one line (no newline at its end). */
typedef void pg_quiet_sink(void *ctx, const char *line);

typedef struct pg_quiet {
    const char *name;               /* "PostgreSQL writer": a static string */
    pg_quiet_clock *now;            /* the clock */
    pg_quiet_sink *sink;            /* where lines go */
    void *ctx;                      /* the sink's */
    pthread_mutex_t mu;             /* over everything below */
    bool down;                      /* in an outage: a failure since the last success */
    int64_t since;                  /* when the outage began (its first failure) */
    int64_t last_line;              /* when this outage last logged a line */
    uint64_t attempts;              /* failures in this outage */
    uint64_t unlogged;              /* failures not logged since the last line */
    uint64_t hidden;                /* new texts past PG_QUIET_TEXTS, not logged in full */
    uint64_t texts[PG_QUIET_TEXTS]; /* hashes of the texts this outage logged */
    int ntexts;
} pg_quiet;

/* Sets up q for the connection called name (static). now NULL: the
 * monotonic clock; sink NULL: stderr, one line each. Pair with
 * pg_quiet_destroy. */
void pg_quiet_init(pg_quiet *q, const char *name, pg_quiet_clock *now, pg_quiet_sink *sink,
                   void *ctx);

/* Releases q's mutex. Nothing is logged. */
void pg_quiet_destroy(pg_quiet *q);

/* Reports one failure of the connection: fmt, after "mosquitto-chat: ",
 * is the line to log when rules 1 and 2 say so; else it is counted, and
 * a "still down" line is logged when rule 3 lets it. Returns whether a
 * line was logged. */
bool pg_quiet_fail(pg_quiet *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reports the connection made: the "back" line when it was down (returns
 * true), nothing otherwise. */
bool pg_quiet_ok(pg_quiet *q);

#endif
