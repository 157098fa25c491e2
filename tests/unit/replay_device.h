/* replay_device: what the unit tests of plugin/replay.c share
 * (test_plugin_replay.c: the window and resends; test_plugin_replay_ends.c:
 * holes, retention, revoked reads, stops). A plugin on a real store in a
 * temporary directory with the broker stubbed, and a client model: a
 * device reads every page and error entry published to it, checks each
 * page (consecutive ids, the envelopes as stored, no more bytes than
 * page_bytes beyond its first message), and counts the pages it has not
 * acked: never more than replay_window (a cmocka failure otherwise). */
#ifndef CHAT_REPLAY_DEVICE_H
#define CHAT_REPLAY_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "plugin_fixture.h"

#define ENV_SIZE 100 /* bytes of every test envelope */
#define MAX_PAGES 512

struct page {
    char group[32];
    uint64_t first, last, head;
    size_t count;
    bool more, truncated;
};

struct error_entry {
    char group[32];
    uint64_t id; /* 0: none */
    char error[256];
};

/* What one client has received, and what it has acked. */
struct device {
    struct mosquitto client;
    size_t next_pub; /* the first publish not read yet */
    struct page pages[MAX_PAGES];
    size_t npages;
    struct error_entry errors[64];
    size_t nerrors;
    struct {
        char name[32];
        uint64_t acked;
    } groups[4];
};

/* Opens a fixture with the plugin options opts into *state (closed by
 * rd_teardown, the cases' cmocka teardown); replay_budget=0 unless opts set
 * it, since most cases end no pass of the broker's loop (no tick). */
struct plugin_fixture *rd_open_fixture(void **state, const char *const *opts);
int rd_teardown(void **state);

/* Appends n messages of ENV_SIZE bytes to group. */
void rd_fill(struct plugin_fixture *fx, const char *group, unsigned n);

/* Makes member a member of group. */
void rd_join(struct plugin_fixture *fx, const char *group, const char *member);

/* Reads what came to d and checks the window. */
void rd_step(struct plugin_fixture *fx, struct device *d);

/* The device no longer waits for the pages it has not acked: they were
 * lost (a disconnect), or the plugin resends them (a timeout). */
void rd_lose(struct device *d);

/* The replay of group to d starts (a subscribe), then rd_step. */
void rd_start(struct plugin_fixture *fx, struct device *d, const char *group);

/* The device acks id in group, as an ack publish would (the cursor first,
 * then the replay), then rd_step. */
void rd_ack(struct plugin_fixture *fx, struct device *d, const char *group, uint64_t id);

/* The plugin's tick at now, then rd_step. */
void rd_tick(struct plugin_fixture *fx, struct device *d, time_t now);

/* A new device (client id, user name), freed by the caller with free(). */
struct device *rd_new_device(const char *id, const char *user);

/* Fails unless p is the page first..last of group. */
void rd_assert_page(const struct page *p, const char *group, uint64_t first, uint64_t last);

/* The devices the plugin keeps state for. */
size_t rd_devices(struct plugin_fixture *fx);

/* The cases of test_plugin_replay_ends.c, run by test_plugin_replay.c's main. */
void test_hole(void **state);
void test_hole_of_one(void **state);
void test_truncated(void **state);
void test_read_revoked(void **state);
void test_stop(void **state);
void test_stop_one_group(void **state);
void test_live_acks(void **state);

#endif
