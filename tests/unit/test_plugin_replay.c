/* Unit tests of plugin/replay.c's window and resend rules, on a real store
 * in a temporary directory, with the broker stubbed: the tests call
 * chat_replay_start, _acked and _tick as the broker's events would, and
 * read the pages the plugin published to each client.
 *
 * A client model (struct device below) reads every page and error entry
 * published to it, checks each page (consecutive ids, the envelopes as
 * stored, no more bytes than page_bytes beyond its first message), and
 * counts the pages it has not acked: never more than replay_window.
 *
 * The client model is in replay_device.c; this file holds the window and
 * resend cases, test_plugin_replay_ends.c how a replay ends or steps over
 * what is gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay_device.h"

/* ===========================================================================
 * Cases
 * ========================================================================= */

/* The window is full at once, and each ack that frees a place in it sends
 * one more page: never more than replay_window out, never fewer while
 * there is more to send. */
static void test_window(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=3", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 13);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 3);
    rd_assert_page(&d->pages[0], "g", 1, 2);
    rd_assert_page(&d->pages[1], "g", 3, 4);
    rd_assert_page(&d->pages[2], "g", 5, 6);
    assert_true(d->pages[0].more && d->pages[0].head == 13);
    /* An ack inside a page frees nothing. */
    rd_ack(fx, d, "g", 1);
    assert_int_equal(d->npages, 3);
    /* One page acked: one more page. */
    rd_ack(fx, d, "g", 2);
    assert_int_equal(d->npages, 4);
    rd_assert_page(&d->pages[3], "g", 7, 8);
    /* Two pages at once (cumulative): two more. */
    rd_ack(fx, d, "g", 7);
    assert_int_equal(d->npages, 6);
    rd_assert_page(&d->pages[4], "g", 9, 10);
    rd_assert_page(&d->pages[5], "g", 11, 12);
    rd_ack(fx, d, "g", 10);
    assert_int_equal(d->npages, 7);
    rd_assert_page(&d->pages[6], "g", 13, 13);
    assert_false(d->pages[6].more);
    /* Nothing left to send: the device's state goes once all is acked. */
    rd_ack(fx, d, "g", 12);
    assert_int_equal(d->npages, 7);
    assert_int_equal(rd_devices(fx), 1);
    rd_ack(fx, d, "g", 13);
    assert_int_equal(rd_devices(fx), 0);
    assert_int_equal(d->nerrors, 0);
    free(d);
}

/* A window of one, and a group already read: nothing to send. */
static void test_window_of_one(void **state)
{
    static const char *const opts[] = {"page_size=5", "replay_window=1", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 12);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 1);
    rd_ack(fx, d, "g", 5);
    rd_ack(fx, d, "g", 10);
    rd_ack(fx, d, "g", 12);
    assert_int_equal(d->npages, 3);
    rd_assert_page(&d->pages[2], "g", 11, 12);
    assert_int_equal(rd_devices(fx), 0);
    /* Caught up: a new subscribe sends nothing and keeps no state. */
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 3);
    assert_int_equal(rd_devices(fx), 0);
    /* Not a member: nothing either. */
    struct device *eve = rd_new_device("eve-phone", "eve");
    rd_start(fx, eve, "g");
    assert_int_equal(eve->npages + eve->nerrors, 0);
    assert_int_equal(rd_devices(fx), 0);
    free(eve);
    free(d);
}

/* page_bytes bounds a page after its first message. */
static void test_page_bytes(void **state)
{
    static const char *const opts[] = {"page_size=100", "page_bytes=1024", "replay_window=2", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 30);
    rd_start(fx, d, "g");
    /* 10 envelopes of 100 bytes fit in 1024, 11 do not. */
    assert_int_equal(d->npages, 2);
    rd_assert_page(&d->pages[0], "g", 1, 10);
    rd_assert_page(&d->pages[1], "g", 11, 20);
    free(d);
}

/* A catch-up goes up to the head it started with: messages stored while it
 * runs come live, so its last page stops at that head, one message short
 * of a full page, and no page passes it. */
static void test_target(void **state)
{
    static const char *const opts[] = {"page_size=10", "replay_window=1", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 19);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 1);
    rd_assert_page(&d->pages[0], "g", 1, 10);
    /* Stored during the catch-up: past its target, 19. */
    rd_fill(fx, "g", 5);
    rd_ack(fx, d, "g", 10);
    assert_int_equal(d->npages, 2);
    rd_assert_page(&d->pages[1], "g", 11, 19);
    rd_ack(fx, d, "g", 19);
    assert_int_equal(d->npages, 2);
    for (size_t i = 0; i < d->npages; i++) {
        assert_true(d->pages[i].last <= 19);
    }
    assert_int_equal(rd_devices(fx), 0);
    free(d);
}

/* A new subscribe (or sync) restarts from the cursor at once, but pages in
 * flight still count: repeating subscribes does not queue window after
 * window. */
static void test_restart(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 20);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    for (int i = 0; i < 10; i++) {
        rd_start(fx, d, "g");
    }
    assert_int_equal(d->npages, 2);
    /* The pages in flight go on from where they were. */
    rd_ack(fx, d, "g", 2);
    assert_int_equal(d->npages, 3);
    rd_assert_page(&d->pages[2], "g", 5, 6);
    /* Once nothing is in flight, a restart sends from the cursor. */
    rd_ack(fx, d, "g", 6);
    assert_int_equal(d->npages, 5);
    chat_replay_stop(&fx->pl, "phone", NULL); /* the device disconnects */
    rd_lose(d);
    assert_int_equal(rd_devices(fx), 0);
    rd_start(fx, d, "g"); /* and subscribes again: from its cursor, 6 */
    assert_int_equal(d->npages, 7);
    rd_assert_page(&d->pages[5], "g", 7, 8);
    rd_assert_page(&d->pages[6], "g", 9, 10);
    /* New messages while catching up: the target moves on restart. */
    rd_fill(fx, "g", 3);
    rd_ack(fx, d, "g", 10);
    rd_start(fx, d, "g");
    rd_ack(fx, d, "g", 14);
    rd_ack(fx, d, "g", 18);
    rd_ack(fx, d, "g", 22);
    rd_ack(fx, d, "g", 23);
    rd_assert_page(&d->pages[d->npages - 1], "g", 23, 23);
    assert_int_equal(d->pages[d->npages - 1].head, 23);
    assert_int_equal(rd_devices(fx), 0);
    free(d);
}

/* A device that acks nothing for replay_timeout gets its pages again from
 * its cursor, each resend in pages of a quarter of the bytes, down to one
 * message; one message sent alone twice in vain is reported once; an ack
 * doubles the page size again. */
static void test_resend(void **state)
{
    static const char *const opts[] = {"page_size=100", "page_bytes=4096", "replay_window=2",
                                       "replay_timeout=5", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 200);
    rd_start(fx, d, "g");
    /* The plugin's clock in whole seconds, rounded up after the start: the
     * device's clock (in ms) began at most t. */
    time_t t = (time_t)(chat_now_ms() / 1000 + 1);
    assert_int_equal(d->npages, 2);
    rd_assert_page(&d->pages[0], "g", 1, 40);
    rd_assert_page(&d->pages[1], "g", 41, 80);
    /* Not yet. */
    rd_tick(fx, d, t + 3);
    assert_int_equal(d->npages, 2);
    /* replay_timeout: again from the cursor, 1024 bytes a page. */
    rd_lose(d);
    rd_tick(fx, d, t + 6);
    assert_int_equal(d->npages, 4);
    rd_assert_page(&d->pages[2], "g", 1, 10);
    rd_assert_page(&d->pages[3], "g", 11, 20);
    assert_true(stub_log_has(MOSQ_LOG_INFO, "no ack from phone for 5 s, resending from its "
                                            "cursor in pages of at most 1024 bytes"));
    /* 1024 is under 2048: a page of one message from now on. */
    rd_lose(d);
    rd_tick(fx, d, t + 12);
    assert_int_equal(d->npages, 6);
    rd_assert_page(&d->pages[4], "g", 1, 1);
    rd_assert_page(&d->pages[5], "g", 2, 2);
    assert_int_equal(d->nerrors, 0);
    rd_lose(d);
    rd_tick(fx, d, t + 18); /* alone once */
    assert_int_equal(d->nerrors, 0);
    rd_lose(d);
    rd_tick(fx, d, t + 24); /* alone twice: reported, and resent anyway */
    assert_int_equal(d->nerrors, 1);
    assert_int_equal(d->errors[0].id, 1);
    assert_non_null(strstr(d->errors[0].error, "message 1 was sent alone 2 times without an ack"));
    assert_int_equal(d->npages, 10);
    rd_assert_page(&d->pages[8], "g", 1, 1);
    rd_lose(d);
    rd_tick(fx, d, t + 30); /* reported once only */
    assert_int_equal(d->nerrors, 1);
    size_t resent = d->npages;
    /* The device acks each page as it comes: each ack that moves its
     * cursor doubles the page's bytes, back up to page_bytes and no more. */
    size_t next = resent - 2, most = 0;
    while (next < d->npages) {
        const struct page *p = &d->pages[next++];
        most = p->count > most ? p->count : most;
        rd_ack(fx, d, "g", p->last);
    }
    assert_int_equal(d->pages[resent].count, 1); /* 2 bytes: one message */
    assert_int_equal(most, 40);
    assert_int_equal(d->pages[d->npages - 1].last, 200);
    assert_int_equal(rd_devices(fx), 0);
    free(d);
}

/* Groups take turns: one long backlog does not hold back the others. */
static void test_turns(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");
    const char *groups[] = {"a", "b", "c"};

    for (size_t i = 0; i < 3; i++) {
        rd_join(fx, groups[i], "bob");
    }
    rd_fill(fx, "a", 40);
    rd_fill(fx, "b", 8);
    rd_fill(fx, "c", 8);
    /* The long backlog starts last: newest groups come first in the
     * device's list, and must not be served first for ever. */
    rd_start(fx, d, "b");
    rd_start(fx, d, "c");
    rd_start(fx, d, "a");
    assert_int_equal(d->npages, 2); /* b's, the window full */
    /* The device acks each page as it comes, oldest first. */
    size_t acked_pages = 0;
    while (acked_pages < d->npages) {
        const struct page *p = &d->pages[acked_pages++];
        rd_ack(fx, d, p->group, p->last);
    }
    /* b and c were done long before a: while all three had more to send,
     * none got two pages in a row more than once per round. */
    size_t last_b = 0, last_c = 0, a_before = 0;
    for (size_t i = 0; i < d->npages; i++) {
        if (!strcmp(d->pages[i].group, "b")) {
            last_b = i;
        } else if (!strcmp(d->pages[i].group, "c")) {
            last_c = i;
        } else if (i < 16) {
            a_before++;
        }
    }
    assert_int_equal(d->npages, 20 + 4 + 4);
    assert_true(last_b < 16 && last_c < 16);
    assert_true(a_before <= 8);
    assert_int_equal(rd_devices(fx), 0);
    free(d);
}

/* replay_budget: a pass of the broker's loop (tick to tick) pages at most
 * the budget over all devices (here one page of 5), and the devices waiting
 * take turns, one page each, from the front of one queue: a pass sends a
 * page while a device waiting has one to send, no device runs more than a
 * page or two ahead of another, and each still gets every id once, in order. */
#define TURN_DEVICES 4
#define TURN_MESSAGES 40 /* 8 pages of 5 for each device */
/* The client model keeps these names, not copies. */
static const char *const turn_ids[TURN_DEVICES] = {"phone0", "phone1", "phone2", "phone3"};
static const char *const turn_users[TURN_DEVICES] = {"user0", "user1", "user2", "user3"};

static void test_budget_turns(void **state)
{
    /* replay_share 0: the budget in messages alone, which this test counts
     * (the share follows the CPU of whatever runs between two ticks). */
    static const char *const opts[] = {"page_size=5", "replay_window=2", "replay_budget=5",
                                       "replay_share=0", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d[TURN_DEVICES];
    size_t passes = 0, empty = 0;

    for (int i = 0; i < TURN_DEVICES; i++) {
        d[i] = rd_new_device(turn_ids[i], turn_users[i]);
        rd_join(fx, "g", turn_users[i]);
    }
    rd_fill(fx, "g", TURN_MESSAGES);
    /* All reconnect in one pass: the first takes the pass's budget, the
     * others wait for their turn. */
    for (int i = 0; i < TURN_DEVICES; i++) {
        rd_start(fx, d[i], "g");
    }
    assert_int_equal(d[0]->npages, 1);
    for (int i = 1; i < TURN_DEVICES; i++) {
        assert_int_equal(d[i]->npages, 0);
    }
    assert_int_equal(chat_replay_waiting(&fx->pl), TURN_DEVICES);
    while (rd_devices(fx) > 0) {
        size_t before = 0, after = 0, lo = MAX_PAGES, hi = 0;
        bool waiting = chat_replay_waiting(&fx->pl) > 0;
        assert_true(++passes <= 4 * TURN_DEVICES * TURN_MESSAGES / 5);
        for (int i = 0; i < TURN_DEVICES; i++) {
            before += d[i]->npages;
        }
        /* A pass: its tick, then every device acks what it got. */
        chat_replay_tick(&fx->pl, 1000);
        for (int i = 0; i < TURN_DEVICES; i++) {
            rd_step(fx, d[i]);
            if (d[i]->npages > 0 && d[i]->pages[d[i]->npages - 1].last > d[i]->groups[0].acked) {
                rd_ack(fx, d[i], "g", d[i]->pages[d[i]->npages - 1].last);
            }
        }
        for (int i = 0; i < TURN_DEVICES; i++) {
            after += d[i]->npages;
            lo = d[i]->npages < lo ? d[i]->npages : lo;
            hi = d[i]->npages > hi ? d[i]->npages : hi;
        }
        /* The budget: one page a pass. A pass with devices waiting sends
         * none only when those have nothing left but to be found done. */
        assert_true(after - before <= 1);
        empty += waiting && after == before;
        /* Turns: nobody waits for the others to finish. */
        assert_true(hi - lo <= 2);
    }
    for (int i = 0; i < TURN_DEVICES; i++) {
        assert_int_equal(d[i]->npages, TURN_MESSAGES / 5);
        assert_int_equal(d[i]->pages[d[i]->npages - 1].last, TURN_MESSAGES);
        assert_int_equal(d[i]->nerrors, 0);
        free(d[i]);
    }
    assert_true(empty <= TURN_DEVICES);
    assert_true(passes <= TURN_DEVICES * TURN_MESSAGES / 5 + TURN_DEVICES);
    assert_int_equal(chat_replay_pass_max(&fx->pl), 5);
    assert_true(chat_replay_turns(&fx->pl) >= TURN_DEVICES - 1);
    assert_int_equal(chat_replay_waiting(&fx->pl), 0);
}

/* The publishes to client_id from index from on: how many are the empty
 * answer {"responses":[]}, and the index of the first (SIZE_MAX: none). */
static size_t empty_answers(const char *client_id, size_t from, size_t *first)
{
    size_t n = 0;
    *first = SIZE_MAX;
    for (size_t i = from; i < stub_publish_count(); i++) {
        const struct stub_publish *p = stub_publish_get(i);
        if (!strcmp(p->client_id, client_id) && !strcmp(p->payload, "{\"responses\":[]}")) {
            *first = n++ ? *first : i;
        }
    }
    return n;
}

/* Holds an empty request of d with correlation data corr: must be held. */
static void hold(struct plugin_fixture *fx, struct device *d, const char *corr)
{
    bool held = false;
    assert_null(
        chat_replay_hold_empty(&fx->pl, &d->client, NULL, corr, (uint16_t)strlen(corr), &held));
    assert_true(held);
}

/* An empty request of a device waiting for its turn is answered once its
 * turns have served it (its window full), after its pages, while the
 * others go on taking theirs; at most 16 of one client are held, a 17th is
 * refused; a device not waiting is answered at once; a stop answers what
 * is held; a disconnect (held_drop) answers nothing. */
static void test_budget_held(void **state)
{
    static const char *const opts[] = {"page_size=5", "replay_window=2", "replay_budget=5",
                                       "replay_share=0", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d[TURN_DEVICES], *idle = rd_new_device("idle", "user0");
    size_t first = 0, mark = 0;
    bool held = true;
    char corr[16];

    for (int i = 0; i < TURN_DEVICES; i++) {
        d[i] = rd_new_device(turn_ids[i], turn_users[i]);
        rd_join(fx, "g", turn_users[i]);
    }
    rd_fill(fx, "g", TURN_MESSAGES);
    for (int i = 0; i < TURN_DEVICES; i++) {
        rd_start(fx, d[i], "g");
    }
    assert_int_equal(chat_replay_waiting(&fx->pl), TURN_DEVICES);
    assert_int_equal(d[2]->npages, 0);
    /* Nothing to catch up: answered at once (nothing held). */
    assert_null(chat_replay_hold_empty(&fx->pl, &idle->client, NULL, NULL, 0, &held));
    assert_false(held);
    /* phone2 waits for its turn: sixteen are held, the seventeenth refused. */
    mark = stub_publish_count();
    for (int k = 0; k < 16; k++) {
        snprintf(corr, sizeof(corr), "c%02d", k);
        hold(fx, d[2], corr);
    }
    assert_string_equal(chat_replay_hold_empty(&fx->pl, &d[2]->client, NULL, "x", 1, &held),
                        CHAT_PROTO_ERR_EMPTY_HELD);
    assert_false(held);
    /* phone3 holds two and disconnects: dropped, never sent. Before that,
     * its held properties are bounded too: 16 KiB in all. */
    char *big = calloc(1, 16000);
    assert_non_null(big);
    assert_null(chat_replay_hold_empty(&fx->pl, &d[3]->client, NULL, big, 16000, &held));
    assert_true(held);
    assert_string_equal(chat_replay_hold_empty(&fx->pl, &d[3]->client, NULL, big, 400, &held),
                        CHAT_PROTO_ERR_EMPTY_HELD);
    assert_false(held);
    assert_null(chat_replay_hold_empty(&fx->pl, &d[3]->client, NULL, big, 380, &held));
    assert_true(held);
    free(big);
    hold(fx, d[3], "d0");
    hold(fx, d[3], "d1"); /* 16,384 bytes held: the bound, reached */
    assert_string_equal(chat_replay_hold_empty(&fx->pl, &d[3]->client, NULL, "x", 1, &held),
                        CHAT_PROTO_ERR_EMPTY_HELD);
    chat_replay_held_drop(&fx->pl, "phone3");
    /* phone1 holds one and leaves the group: its catch-up ends, answered. */
    hold(fx, d[1], "s0");
    chat_replay_stop(&fx->pl, "phone1", "g");
    assert_int_equal(empty_answers("phone1", mark, &first), 1);
    assert_int_equal(stub_publish_get(first)->corr_len, 2);
    assert_memory_equal(stub_publish_get(first)->corr, "s0", 2);
    /* Passes: one page each (the budget); phone2's answers wait until its
     * window (two pages) is full. */
    size_t passes = 0, others = 0;
    while (empty_answers("phone2", mark, &first) == 0) {
        size_t before = d[0]->npages + d[3]->npages;
        assert_true(++passes <= 16);
        assert_true(d[2]->npages < 2);
        chat_replay_tick(&fx->pl, 1000);
        rd_step(fx, d[0]);
        rd_step(fx, d[2]);
        rd_step(fx, d[3]);
        others += d[0]->npages + d[3]->npages - before;
    }
    /* The sixteen, in the order they came, after phone2's two pages. */
    assert_int_equal(d[2]->npages, 2);
    assert_int_equal(empty_answers("phone2", mark, &first), 16);
    for (int k = 0; k < 16; k++) {
        const struct stub_publish *p = stub_publish_get(first + (size_t)k);
        snprintf(corr, sizeof(corr), "c%02d", k);
        assert_string_equal(p->client_id, "phone2");
        assert_string_equal(p->payload, "{\"responses\":[]}");
        assert_string_equal(p->topic, CHAT_PROTO_RESPONSE_TOPIC);
        assert_int_equal(p->corr_len, 3);
        assert_memory_equal(p->corr, corr, 3);
    }
    for (size_t i = first + 16; i < stub_publish_count(); i++) {
        assert_string_not_equal(stub_publish_get(i)->client_id, "phone2");
    }
    /* Meanwhile the others took turns. */
    assert_true(others >= 1);
    /* Its window full, phone2 waits no more: answered at once again. */
    assert_null(chat_replay_hold_empty(&fx->pl, &d[2]->client, NULL, NULL, 0, &held));
    assert_false(held);
    /* phone3's answers were dropped. */
    chat_replay_tick(&fx->pl, 1000);
    assert_int_equal(empty_answers("phone3", mark, &first), 0);
    for (int i = 0; i < TURN_DEVICES; i++) {
        free(d[i]);
    }
    free(idle);
}

/* Answers still held when the plugin stops are freed unsent (ASan and
 * valgrind see a leak otherwise). */
static void test_budget_held_cleanup(void **state)
{
    static const char *const opts[] = {"page_size=5", "replay_window=2", "replay_budget=5",
                                       "replay_share=0", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d[2];
    size_t first = 0;

    for (int i = 0; i < 2; i++) {
        d[i] = rd_new_device(turn_ids[i], turn_users[i]);
        rd_join(fx, "g", turn_users[i]);
    }
    rd_fill(fx, "g", TURN_MESSAGES);
    for (int i = 0; i < 2; i++) {
        rd_start(fx, d[i], "g");
    }
    hold(fx, d[1], "a");
    hold(fx, d[1], "b");
    plugin_fixture_close(fx);
    free(fx);
    *state = NULL;
    assert_int_equal(empty_answers("phone1", 0, &first), 0);
    for (int i = 0; i < 2; i++) {
        free(d[i]);
    }
}

/* replay_budget 0: no bound, every device's window fills at once, as
 * before the budget. */
static void test_budget_off(void **state)
{
    static const char *const opts[] = {"page_size=5", "replay_window=2", "replay_budget=0", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d[TURN_DEVICES];

    for (int i = 0; i < TURN_DEVICES; i++) {
        d[i] = rd_new_device(turn_ids[i], turn_users[i]);
        rd_join(fx, "g", turn_users[i]);
    }
    rd_fill(fx, "g", TURN_MESSAGES);
    for (int i = 0; i < TURN_DEVICES; i++) {
        rd_start(fx, d[i], "g");
        assert_int_equal(d[i]->npages, 2);
    }
    assert_int_equal(chat_replay_waiting(&fx->pl), 0);
    for (int i = 0; i < TURN_DEVICES; i++) {
        free(d[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_window, rd_teardown),
        cmocka_unit_test_teardown(test_window_of_one, rd_teardown),
        cmocka_unit_test_teardown(test_page_bytes, rd_teardown),
        cmocka_unit_test_teardown(test_restart, rd_teardown),
        cmocka_unit_test_teardown(test_resend, rd_teardown),
        cmocka_unit_test_teardown(test_turns, rd_teardown),
        cmocka_unit_test_teardown(test_budget_turns, rd_teardown),
        cmocka_unit_test_teardown(test_budget_off, rd_teardown),
        cmocka_unit_test_teardown(test_budget_held, rd_teardown),
        cmocka_unit_test_teardown(test_budget_held_cleanup, rd_teardown),
        cmocka_unit_test_teardown(test_target, rd_teardown),
        cmocka_unit_test_teardown(test_hole, rd_teardown),
        cmocka_unit_test_teardown(test_hole_of_one, rd_teardown),
        cmocka_unit_test_teardown(test_truncated, rd_teardown),
        cmocka_unit_test_teardown(test_read_revoked, rd_teardown),
        cmocka_unit_test_teardown(test_stop, rd_teardown),
        cmocka_unit_test_teardown(test_stop_one_group, rd_teardown),
        cmocka_unit_test_teardown(test_live_acks, rd_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
