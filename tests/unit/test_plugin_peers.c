/* Unit tests of plugin/peer_table.c and plugin/hmap.c: the per client state the
 * plugin keeps between events (pending subscriptions and their caps, the
 * answer budget, its refill, and the disconnect of clients that read
 * nothing) and the map it lives in.
 *
 * The clock is this file's: it defines chat_now_ms, so the linker takes it
 * instead of clock.c's (which nothing else here needs), and the budget's
 * refill is tested to the millisecond. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "plugin.h"
#include "plugin_stubs.h"

#define MIB (1u << 20)

static int64_t fake_now = 1700000000000;

int64_t chat_now_ms(void)
{
    return fake_now;
}

static int setup(void **state)
{
    struct chat_plugin *pl = calloc(1, sizeof(*pl));
    assert_non_null(pl);
    assert_true(chat_peers_init(pl));
    stub_reset();
    fake_now = 1700000000000;
    *state = pl;
    return 0;
}

static int teardown(void **state)
{
    struct chat_plugin *pl = *state;
    chat_peers_free(pl);
    free(pl);
    return 0;
}

/* ===========================================================================
 * hmap
 * ========================================================================= */

static unsigned freed;

static void count_free(void *v)
{
    freed++;
    free(v);
}

static bool remove_odd(void *ctx, const void *key, size_t len, void *val)
{
    unsigned *seen = ctx;
    (void)key;
    (void)len;
    (*seen)++;
    if (*(int *)val % 2) {
        free(val);
        return true;
    }
    return false;
}

static void test_hmap(void **state)
{
    (void)state;
    chat_hmap *m = chat_hmap_create();
    void *old = (void *)1;
    assert_non_null(m);
    assert_int_equal(chat_hmap_count(m), 0);
    assert_null(chat_hmap_get(m, "a", 1));
    assert_null(chat_hmap_remove(m, "a", 1));

    /* Keys are bytes: a NUL inside, a prefix, the empty key are all apart. */
    int *v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = malloc(sizeof(int));
        assert_non_null(v[i]);
        *v[i] = i;
    }
    assert_true(chat_hmap_put(m, "ab", 2, v[0], &old));
    assert_null(old);
    assert_true(chat_hmap_put(m, "a\0b", 3, v[1], NULL));
    assert_true(chat_hmap_put(m, "a", 1, v[2], NULL));
    assert_true(chat_hmap_put(m, "", 0, v[3], NULL));
    assert_int_equal(chat_hmap_count(m), 4);
    assert_ptr_equal(chat_hmap_get(m, "ab", 2), v[0]);
    assert_ptr_equal(chat_hmap_get(m, "a\0b", 3), v[1]);
    assert_ptr_equal(chat_hmap_get(m, "a", 1), v[2]);
    assert_ptr_equal(chat_hmap_get(m, "", 0), v[3]);
    assert_null(chat_hmap_get(m, "abc", 2 + 1));
    /* Putting again replaces, and hands back the old value. */
    assert_true(chat_hmap_put(m, "ab", 2, v[4], &old));
    assert_ptr_equal(old, v[0]);
    free(v[0]);
    assert_int_equal(chat_hmap_count(m), 4);
    assert_ptr_equal(chat_hmap_remove(m, "a", 1), v[2]);
    free(v[2]);
    assert_null(chat_hmap_get(m, "a", 1));
    assert_int_equal(chat_hmap_count(m), 3);
    freed = 0;
    chat_hmap_destroy(m, count_free);
    assert_int_equal(freed, 3);
    chat_hmap_destroy(NULL, count_free);
}

static void test_hmap_many(void **state)
{
    (void)state;
    chat_hmap *m = chat_hmap_create();
    char key[32];
    assert_non_null(m);
    /* Far past the first bucket array: every key is still found. */
    for (int i = 0; i < 20000; i++) {
        int *val = malloc(sizeof(int));
        assert_non_null(val);
        *val = i;
        snprintf(key, sizeof(key), "client-%d", i);
        assert_true(chat_hmap_put(m, key, strlen(key), val, NULL));
    }
    assert_int_equal(chat_hmap_count(m), 20000);
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof(key), "client-%d", i);
        int *val = chat_hmap_get(m, key, strlen(key));
        assert_non_null(val);
        assert_int_equal(*val, i);
    }
    /* foreach visits each once and removes what fn says. */
    unsigned seen = 0;
    chat_hmap_foreach(m, remove_odd, &seen);
    assert_int_equal(seen, 20000);
    assert_int_equal(chat_hmap_count(m), 10000);
    assert_null(chat_hmap_get(m, "client-1", 8));
    assert_non_null(chat_hmap_get(m, "client-2", 8));
    freed = 0;
    chat_hmap_destroy(m, count_free);
    assert_int_equal(freed, 10000);
}

/* ===========================================================================
 * Pending subscriptions
 * ========================================================================= */

static void test_pending(void **state)
{
    struct chat_plugin *pl = *state;
    assert_false(chat_pending_has(pl, "c1", "room1"));
    chat_pending_add(pl, "c1", "room1");
    chat_pending_add(pl, "c1", "room1"); /* twice is once */
    chat_pending_add(pl, "c1", "room2");
    assert_true(chat_pending_has(pl, "c1", "room1"));
    assert_true(chat_pending_has(pl, "c1", "room2"));
    assert_false(chat_pending_has(pl, "c1", "room"));
    assert_false(chat_pending_has(pl, "c2", "room1")); /* per client */
    assert_false(chat_pending_has(pl, "c", "room1"));
    chat_pending_remove(pl, "c1", "room1");
    chat_pending_remove(pl, "c1", "room1");
    chat_pending_remove(pl, "nobody", "room1");
    assert_false(chat_pending_has(pl, "c1", "room1"));
    assert_true(chat_pending_has(pl, "c1", "room2"));

    /* A clean session forgets them at disconnect. */
    struct mosquitto c1 = {.id = "c1", .clean_session = true};
    chat_peer_disconnected(pl, &c1, CHAT_GONE_ENDED);
    assert_false(chat_pending_has(pl, "c1", "room2"));
    assert_int_equal(chat_peers_count(pl), 0);
}

static void test_pending_cap(void **state)
{
    struct chat_plugin *pl = *state;
    char group[32];
    for (int i = 0; i < 1024; i++) {
        snprintf(group, sizeof(group), "g%d", i);
        chat_pending_add(pl, "greedy", group);
    }
    assert_true(chat_pending_has(pl, "greedy", "g1023"));
    assert_int_equal(stub_log_count(), 0);
    /* One more fails closed: not let through, and logged. */
    chat_pending_add(pl, "greedy", "one-too-many");
    assert_false(chat_pending_has(pl, "greedy", "one-too-many"));
    assert_true(stub_log_has(MOSQ_LOG_NOTICE, "greedy subscribed to more than 1024 groups it is "
                                              "not a member of; not delivering one-too-many"));
    /* A place freed is a place taken. */
    chat_pending_remove(pl, "greedy", "g0");
    chat_pending_add(pl, "greedy", "one-too-many");
    assert_true(chat_pending_has(pl, "greedy", "one-too-many"));
    /* Other clients have their own. */
    chat_pending_add(pl, "modest", "g0");
    assert_true(chat_pending_has(pl, "modest", "g0"));
}

static void test_persistent_sessions(void **state)
{
    struct chat_plugin *pl = *state;
    struct mosquitto keep = {.id = "keep", .clean_session = false};
    struct mosquitto bare = {.id = "bare", .clean_session = false};
    struct mosquitto none = {.id = NULL, .clean_session = false};

    struct mosquitto keep_again = {.id = "keep", .clean_session = false};

    chat_pending_add(pl, "keep", "room1");
    assert_int_equal(chat_budget_check(pl, "bare"), CHAT_BUDGET_OK); /* a peer, no pending */
    chat_peer_disconnected(pl, &keep, CHAT_GONE_OFFLINE);
    chat_peer_disconnected(pl, &bare, CHAT_GONE_OFFLINE);
    chat_peer_disconnected(pl, &none, CHAT_GONE_OFFLINE);
    /* Its session keeps its subscriptions at the broker: live messages must
     * still pass when it comes back without subscribing again. */
    assert_true(chat_pending_has(pl, "keep", "room1"));
    assert_int_equal(chat_peers_gone(pl), 1);
    assert_false(chat_peer_known(pl, "bare"));            /* nothing to keep */
    chat_peer_disconnected(pl, &keep, CHAT_GONE_OFFLINE); /* twice: no double count */
    assert_int_equal(chat_peers_gone(pl), 1);
    /* Deliveries to the connection it left are what the broker would queue;
     * anything it does itself there is a connection (a session that expired
     * unseen, its memory reused by the next connection of its id). */
    assert_true(chat_peer_offline(pl, &keep));
    assert_false(chat_peer_back(pl, &keep, false));
    /* It comes back in a new connection: connected again, once. */
    assert_false(chat_peer_offline(pl, &keep_again));
    assert_true(chat_peer_back(pl, &keep_again, false));
    assert_false(chat_peer_back(pl, &keep_again, false));
    assert_false(chat_peer_offline(pl, &keep));
    assert_int_equal(chat_peers_gone(pl), 0);
    assert_true(chat_pending_has(pl, "keep", "room1"));
    /* And its session ends this time. */
    chat_peer_disconnected(pl, &keep_again, CHAT_GONE_ENDED);
    assert_false(chat_pending_has(pl, "keep", "room1"));
    assert_int_equal(chat_peers_gone(pl), 0);
}

/* A session taken over, or resumed: the old connection is no one's. */
static void test_replaced_sessions(void **state)
{
    struct chat_plugin *pl = *state;
    struct mosquitto old = {.id = "phone", .clean_session = false};
    struct mosquitto now = {.id = "phone", .clean_session = false};

    chat_peer_subscribed(pl, "phone", "room1", true);
    chat_peer_wants_pushes(pl, "phone", true);
    chat_peer_disconnected(pl, &old, CHAT_GONE_OFFLINE);
    assert_true(chat_peer_offline(pl, &old));
    /* 2.0 closes the old connection as the session resumes in a new one. */
    chat_peer_disconnected(pl, &old, CHAT_GONE_REPLACED);
    assert_false(chat_peer_offline(pl, &old));
    assert_true(chat_peer_pushes(pl, "phone"));
    assert_true(chat_peer_back(pl, &now, false));
    /* Taken over while connected: what the session keeps stays, and the new
     * connection is back. */
    chat_peer_disconnected(pl, &now, CHAT_GONE_REPLACED);
    assert_true(chat_peer_back(pl, &old, false));
    assert_true(chat_peer_pushes(pl, "phone"));
    chat_peer_wants_pushes(pl, "phone", false);
    chat_peer_subscribed(pl, "phone", "room1", false);
    assert_false(chat_peer_pushes(pl, "phone"));
    /* A clean start ends the session away: nothing of it resumes. */
    chat_peer_subscribed(pl, "phone", "room1", true);
    chat_peer_disconnected(pl, &old, CHAT_GONE_OFFLINE);
    struct mosquitto clean = {.id = "phone", .clean_session = true};
    assert_false(chat_peer_back(pl, &clean, false));
    assert_false(chat_peer_known(pl, "phone"));
}

static void test_persistent_cap(void **state)
{
    struct chat_plugin *pl = *state;
    char id[32];
    /* At most 10000 disconnected sessions are remembered: the one away
     * longest makes room for the newest. */
    for (int i = 0; i < 10001; i++) {
        struct mosquitto c = {.id = id, .clean_session = false};
        snprintf(id, sizeof(id), "gone-%d", i);
        chat_pending_add(pl, id, "room1");
        chat_peer_disconnected(pl, &c, CHAT_GONE_OFFLINE);
    }
    assert_int_equal(chat_peers_gone(pl), 10000);
    assert_false(chat_pending_has(pl, "gone-0", "room1"));
    assert_true(chat_pending_has(pl, "gone-1", "room1"));
    assert_true(chat_pending_has(pl, "gone-10000", "room1"));
    assert_int_equal(chat_peers_count(pl), 10000);
    /* One that comes back leaves the list; the next one away takes its
     * place without pushing anyone out. */
    struct mosquitto back = {.id = "gone-5000", .clean_session = false};
    assert_true(chat_peer_back(pl, &back, true));
    assert_int_equal(chat_peers_gone(pl), 9999);
    struct mosquitto more = {.id = "gone-new", .clean_session = false};
    chat_pending_add(pl, "gone-new", "room1");
    chat_peer_disconnected(pl, &more, CHAT_GONE_OFFLINE);
    assert_int_equal(chat_peers_gone(pl), 10000);
    assert_true(chat_pending_has(pl, "gone-1", "room1"));
}

/* ===========================================================================
 * Answer budget
 * ========================================================================= */

/* As peer_table.c's BUDGET_BYTES and BUDGET_RATE: what one client may have
 * unread at once, and how fast that comes back (bytes a second). */
#define BUDGET (8u << 20)
#define RATE (2u << 20)
#define COST 1024u /* MSG_COST: charged per message besides its bytes */

static void test_budget(void **state)
{
    struct chat_plugin *pl = *state;

    /* The whole budget to start with; an answer may take it below zero. */
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);
    chat_budget_spend(pl, "c1", BUDGET - 1 - COST);
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);
    chat_budget_spend(pl, "c1", 2 * RATE - COST); /* 1 - 2 RATE left */
    /* Over it: ten "slow down" answers a second, then nothing. */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN);
    }
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_DROP);
    assert_true(stub_log_has(MOSQ_LOG_NOTICE,
                             "c1 is sent answers faster than it reads them; 1 requests dropped"));
    stub_log_clear();
    for (int i = 0; i < 5; i++) {
        assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_DROP);
    }
    assert_int_equal(stub_log_count(), 0); /* one line per 10 s */
    /* Another client is not concerned. */
    assert_int_equal(chat_budget_check(pl, "c2"), CHAT_BUDGET_OK);

    /* It comes back at RATE a second, to the millisecond: two seconds to
     * cover 2 RATE - 1 bytes. */
    fake_now += 1000;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN); /* a new second */
    fake_now += 999;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN); /* a ms short */
    fake_now += 2;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);
    /* After a long pause it is full again, but never more than BUDGET. */
    chat_budget_spend(pl, "c1", BUDGET);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN);
    }
    fake_now += 600000;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);
    chat_budget_spend(pl, "c1", BUDGET);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN);
    }
    /* The next log line counts what was dropped since the last one. */
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_DROP);
    assert_true(stub_log_has(MOSQ_LOG_NOTICE, "6 requests dropped unanswered"));

    /* A clock that steps back refills nothing and breaks nothing. */
    fake_now -= 60000;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN);
    /* Spending for a client unknown is ignored. */
    chat_budget_spend(pl, "unknown", MIB);
    assert_false(chat_peer_known(pl, "unknown"));
}

/* Every message costs COST besides its bytes: the budget bounds how many
 * answers a client is sent at once, however small. */
static void test_budget_per_message(void **state)
{
    struct chat_plugin *pl = *state;

    for (unsigned i = 0; i < BUDGET / COST; i++) {
        assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);
        chat_budget_spend(pl, "c1", 0);
    }
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN);
    /* and comes back RATE / COST messages a second */
    fake_now += COST * 1000 / RATE + 1;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);
}

/* Pushes stop while the budget is spent, without using the client's "slow
 * down" errors, and are logged (one line per 10 s). */
static void test_budget_pushes(void **state)
{
    struct chat_plugin *pl = *state;

    assert_true(chat_budget_left(pl, "c1"));
    chat_budget_spend(pl, "c1", BUDGET);
    for (int i = 0; i < 20; i++) {
        assert_false(chat_budget_left(pl, "c1"));
    }
    assert_true(stub_log_has(MOSQ_LOG_NOTICE, "c1 is sent answers faster than it reads them; 1 "
                                              "pushes not sent"));
    assert_int_equal(stub_log_count(), 1);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN);
    }
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_DROP);
}

/* Checks as client id until n requests were dropped (the "slow down"
 * errors of the second first); none may be answered. */
static void drop_n(struct chat_plugin *pl, const char *id, unsigned n)
{
    unsigned dropped = 0, slowed = 0;
    while (dropped < n) {
        enum chat_budget b = chat_budget_check(pl, id);
        assert_int_not_equal(b, CHAT_BUDGET_OK);
        if (b == CHAT_BUDGET_DROP) {
            dropped++;
        } else {
            assert_true(++slowed <= 10);
        }
    }
}

static void disconnect_hook(void *ctx, const char *clientid)
{
    struct mosquitto client = {.id = clientid, .clean_session = true, .protocol_version = 4};
    chat_peer_disconnected(ctx, &client, CHAT_GONE_ENDED);
}

#define KICKED "c1 disconnected: it sends requests faster than it reads their answers"

/* A client that goes on sending for a second after its requests are
 * dropped, 1000 of them at least, is sent nothing more and disconnected
 * from the tick; one that pauses is not. */
static void test_budget_kick(void **state)
{
    struct chat_plugin *pl = *state;
    struct mosquitto c1 = {.id = "c1", .clean_session = true, .protocol_version = 4};

    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);
    chat_budget_spend(pl, "c1", 40 * RATE); /* 20 s of refill: over budget throughout */
    /* Bursts of 999 drops, a second apart: the client paused in between. */
    for (int i = 0; i < 3; i++) {
        drop_n(pl, "c1", 999);
        fake_now += 1000;
    }
    chat_peers_kick(pl);
    assert_int_equal(stub_kick_count(), 0);
    /* 1000 drops in less than a second: not yet. */
    drop_n(pl, "c1", 1000);
    fake_now += 999;
    drop_n(pl, "c1", 1);
    chat_peers_kick(pl);
    assert_int_equal(stub_kick_count(), 0);
    /* A second after the run began: nothing more for it, not even the
     * errors of a new second, nor pushes. */
    fake_now += 1;
    drop_n(pl, "c1", 1);
    fake_now += 1000;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_DROP);
    assert_false(chat_budget_left(pl, "c1"));
    assert_int_equal(chat_budget_check(pl, "c2"), CHAT_BUDGET_OK); /* no one else */
    /* The broker closes later (a websocket): disconnected once, silenced
     * until its disconnect comes. */
    stub_log_clear();
    chat_peers_kick(pl);
    assert_int_equal(stub_kick_count(), 1);
    assert_string_equal(stub_kick_last(), "c1");
    assert_true(stub_log_has(MOSQ_LOG_NOTICE, KICKED));
    chat_peers_kick(pl);
    assert_int_equal(stub_kick_count(), 1);
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_DROP);
    chat_peer_disconnected(pl, &c1, CHAT_GONE_ENDED);
    /* Its next connection starts afresh. */
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK);

    /* Again, the broker running our disconnect callback within the call,
     * as it does for a client on a socket. */
    stub_kick_set(disconnect_hook, pl, MOSQ_ERR_SUCCESS);
    chat_budget_spend(pl, "c1", 40 * RATE);
    drop_n(pl, "c1", 1000);
    fake_now += 500;
    drop_n(pl, "c1", 1);
    fake_now += 500;
    drop_n(pl, "c1", 1);
    chat_peers_kick(pl);
    assert_int_equal(stub_kick_count(), 2);
    assert_false(chat_peer_known(pl, "c1"));
    chat_peers_kick(pl);
    assert_int_equal(stub_kick_count(), 2);

    /* A client the broker does not know: no line, and it is not silenced. */
    stub_kick_set(NULL, NULL, MOSQ_ERR_NOT_FOUND);
    stub_log_clear();
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_OK); /* a new connection */
    chat_budget_spend(pl, "c1", 40 * RATE);
    drop_n(pl, "c1", 1000);
    fake_now += 500;
    drop_n(pl, "c1", 1);
    fake_now += 500;
    drop_n(pl, "c1", 1);
    chat_peers_kick(pl);
    assert_int_equal(stub_kick_count(), 3);
    assert_false(stub_log_has(-1, "disconnected"));
    fake_now += 1000;
    assert_int_equal(chat_budget_check(pl, "c1"), CHAT_BUDGET_SLOW_DOWN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmap),
        cmocka_unit_test(test_hmap_many),
        cmocka_unit_test_setup_teardown(test_pending, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_persistent_sessions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replaced_sessions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_persistent_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_per_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_pushes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_budget_kick, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
