/* pg_watch: the PostgreSQL backend's thread of its own. It keeps one
 * LISTEN connection to the primary and
 *   - reads the messages other brokers store in followed groups, when
 *     their notifications arrive (in commit order, which within a group
 *     is id order: the counter row's lock is held until commit), and
 *     queues them for chat_store_feed;
 *   - after a lost connection (NOTIFY is not replayed), reads every id of
 *     a followed group above the last one it handled, from other brokers
 *     (the `origin` column tells them apart), and empties the membership
 *     cache, whose invalidations it may have missed;
 *   - makes the writer connection when the broker's thread lost it, and
 *     hands it over (pg_watch_take_writer), so that the broker's thread
 *     never waits for a connection.
 * Both connections are made again at pg_backoff's pace: the first attempt
 * after a loss at once, then ever further apart up to 2 s.
 * Private to store/pg.
 *
 * Threading: follow, feed, take_writer and want_writer run on the
 * caller's (broker's) thread; everything they share with the thread is
 * under one mutex, held only to copy or link, never over a database call.
 */
#ifndef PG_WATCH_H
#define PG_WATCH_H

#include "pg_db.h"

/* Starts the thread of st (st->watch); CHAT_ENOMEM when it cannot. */
chat_err pg_watch_start(pg *st);

/* Stops the thread, closes its connections and frees what is queued.
 * Nothing when st has none. */
void pg_watch_stop(pg *st);

/* A writer connection the thread made, or NULL (then it is asked for
 * one, and the caller fails its call). */
PGconn *pg_watch_take_writer(pg *st);

/* Asks the thread for a new writer connection: the writer was lost (or
 * its server refused a write). The thread's attempts follow pg_backoff:
 * the first at once, then further apart until one succeeds, and only a
 * server that takes writes makes one succeed (pg_check_writable). */
void pg_watch_want_writer(pg *st);

/* How many writer connections the thread attempted since it started,
 * those that failed included: for tests of the reconnects' pace. */
uint64_t pg_watch_writer_attempts(pg *st);

/* The ops chat_store_follow and chat_store_feed. pg_feed hands nothing
 * over while the writer is gone (pg_writer_ready): the broker's read
 * check of each delivery needs it. */
store_follow_fn pg_follow;
store_feed_fn pg_feed;

#endif
