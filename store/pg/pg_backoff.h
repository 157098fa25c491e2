/* pg_backoff: the pace of a connection's reconnects, for the PostgreSQL
 * backend's writer and listener. After a loss the first attempt is made at
 * once (a dropped session on a healthy server comes back without delay);
 * after each failed attempt the next waits a delay drawn at random in
 * [d/2, d], d starting at PG_BACKOFF_FIRST_MS and doubling up to
 * PG_BACKOFF_MAX_MS. Why these numbers: a failover takes about ten
 * seconds, and a broker finds the new primary at most PG_BACKOFF_MAX_MS
 * after it takes writes; the draw spreads the attempts of N brokers, which
 * all lost their connections in the same instant, so that the new primary
 * is not hit by all of them in lockstep; and an outage of T ms costs at
 * most 5 + (T - 1875) / 1000 attempts per connection (33 in 30 s), at least
 * 5 + (T - 3750) / 2000 (the timing the design note of docs/postgresql.md
 * states, tests/unit/test_store_pg_backoff.c checks).
 *
 * A pg_backoff is the caller's memory, no allocation, no clock: it answers
 * how long to wait, the caller keeps the time. Not thread-safe: one owner,
 * or the owner's lock. Private to store/: pg/ and the opener (store_opener.c). */
#ifndef PG_BACKOFF_H
#define PG_BACKOFF_H

#include <stdint.h>

/* The first delay's upper bound, and the largest delay, in ms. */
#define PG_BACKOFF_FIRST_MS 250
#define PG_BACKOFF_MAX_MS 2000

typedef struct pg_backoff {
    int64_t d;    /* the next delay's upper bound; 0: the next attempt at once */
    uint64_t rng; /* xorshift64 state, never 0 */
} pg_backoff;

/* Sets b up as after a success: the next attempt at once. seed makes the
 * draws (one per connection and process: pg's origin, which is random);
 * any value, 0 too. */
void pg_backoff_init(pg_backoff *b, uint64_t seed);

/* A loss or a failed attempt: returns how long to wait, in ms, before the
 * next attempt (0 the first time after a success, then within [d/2, d]
 * with d doubling from PG_BACKOFF_FIRST_MS to PG_BACKOFF_MAX_MS), and moves
 * on. */
int64_t pg_backoff_next(pg_backoff *b);

/* A success (a connection made and accepted): the next loss is retried at
 * once again. */
void pg_backoff_reset(pg_backoff *b);

#endif
