/* integ_disk: what the tests of a store's disk share (integ_faults.c,
 * integ_fault_fds.c, integ_damage.c, integ_sec_store.c): publishes of about
 * 2 KB until the store refuses, incompressible messages that fill table
 * files, and a table file found and damaged on purpose. Every function
 * fails the test when it cannot do its job (tests/support/util.h). */
#ifndef CHAT_INTEG_DISK_H
#define CHAT_INTEG_DISK_H

#include "harness.h"

#include <stdbool.h>
#include <stddef.h>

/* 2 KB each: LevelDB switches its 8 MiB memtable several times. */
#define DISK_MAX_PUBLISHES 20000

/* Publishes one message of about 2 KB to chat/room1 with cid c-<n>;
 * returns the reason code of the broker's PUBACK. */
int disk_publish_n(harness_client *c, int n);

/* Fails unless the next response to c (within wait_ms) is the one entry
 * "storage error". */
void disk_expect_storage_error(harness_client *c, int wait_ms);

/* Publishes messages from..(disk_publish_n) until the store refuses one
 * (0x87, its "storage error" read, within wait_ms), at most
 * DISK_MAX_PUBLISHES; returns how many it accepted. */
int disk_publish_until_refused(harness_client *c, int from, int wait_ms);

/* Publishes until the broker accepts again, once each 250 ms within
 * timeout_ms, each refusal read as "storage error" (within wait_ms):
 * message n each time, or with renumber n, n + 1, ... (a refused message
 * stored by mistake would then show). Returns the n accepted. */
int disk_publish_until_accepted(harness_client *c, int n, bool renumber, int timeout_ms,
                                int wait_ms);

/* Publishes count messages to topic whose 2,000-byte bodies do not
 * compress (drawn from rand() seeded with seed), so that damage to a table
 * lands in message bytes; waits up to wait_ms for the last PUBACK. */
void disk_publish_incompressible(harness_client *c, const char *topic, int count, unsigned seed,
                                 int wait_ms);

/* The largest LevelDB table file of b's store, in out (cap bytes). */
void disk_largest_table(const ts_broker *b, char *out, size_t cap);

/* Inverts 64 bytes a third of the way into the file path (over 100,000
 * bytes), as a bad disk block would: in place, the file keeping its size
 * all along, since a running broker's LevelDB may have it mapped (a
 * mapped file cut short, even for a moment, kills the reader with
 * SIGBUS). */
void disk_garble(const char *path);

#endif
