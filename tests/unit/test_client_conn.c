/* test_client_conn.c: unit tests (cmocka) of clients/conn.c, the pauses
 * between the client library's connection attempts: after a lost
 * connection the first attempt is spread over a second (so that devices
 * that lost the broker together do not all come back in one pass of its
 * loop), never past reconnect_max_s, and the attempts after it double.
 * Paho and the call list are stubbed here: nothing connects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clock.h"
#include "conn.h"
#include "queue.h"

#define SEEDS 2000u

/* Stubs of what conn.c calls in paho.c and queue.c. */
static int g_opens;

int chat_paho_open(chat_paho *p, int timeout_ms)
{
    (void)p;
    (void)timeout_ms;
    g_opens++;
    return MQTTASYNC_SUCCESS;
}

void chat_paho_close(chat_paho *p)
{
    (void)p;
}

void chat_paho_set_up(chat_paho *p, bool up)
{
    (void)p;
    (void)up;
}

int chat_paho_disconnect(chat_paho *p, int timeout_ms)
{
    (void)p;
    (void)timeout_ms;
    return MQTTASYNC_SUCCESS;
}

bool chat_calls_any(const struct chat_calls *l, enum call_op op)
{
    (void)l;
    (void)op;
    return false;
}

void chat_calls_finish(struct chat_queue *q, struct chat_calls *l, enum call_op op,
                       chat_client_err err, const char *why)
{
    (void)q;
    (void)l;
    (void)op;
    (void)err;
    (void)why;
}

static int g_events;

static void on_event(void *arg, const chat_client_event *ev)
{
    (void)arg;
    assert_int_equal(ev->type, CHAT_CLIENT_EV_DISCONNECTED);
    g_events++;
}

static const chat_notify g_notify = {.on_event = on_event, .arg = NULL};
/* Read by conn.c for its messages only (the URI of a failed attempt). */
static chat_paho g_paho = {.cfg = {.uri = "tcp://127.0.0.1:1", .version = 4}};

/* A connection that was up and is wanted, as after a connect call. */
static void up(chat_conn *cn, int reconnect_max_s, unsigned seed)
{
    struct chat_conn_cfg cfg = {
        .paho = &g_paho, .notify = &g_notify, .reconnect_max_s = reconnect_max_s};

    chat_conn_init(cn, &cfg, 1000, seed);
    cn->want = true;
    cn->state = CONN_UP;
}

/* The pause chat_conn_lost schedules, in ms (within the few ms the test's
 * own clock reads may add). */
static int64_t pause_after_loss(chat_conn *cn)
{
    int64_t before = chat_now_ms();

    chat_conn_close(cn);
    chat_conn_lost(cn, "test");
    return cn->reconnect_at - before;
}

static void test_first_attempt_spread(void **state)
{
    unsigned buckets[10] = {0};
    int64_t lo = INT64_MAX, hi = 0;

    (void)state;
    g_events = 0;
    for (unsigned s = 1; s <= SEEDS; s++) {
        chat_conn cn;
        up(&cn, 16, s);
        int64_t p = pause_after_loss(&cn);
        assert_true(p >= 250);
        assert_true(p < 1250 + 50);
        lo = p < lo ? p : lo;
        hi = p > hi ? p : hi;
        buckets[p >= 1250 ? 9 : (p - 250) / 100]++;
    }
    assert_int_equal(g_events, SEEDS);
    /* Spread over the second, not bunched: every tenth of it has a fair
     * share (200 expected each). */
    for (int b = 0; b < 10; b++)
        assert_true(buckets[b] >= 100);
    assert_true(lo < 300);
    assert_true(hi > 1200);
}

/* reconnect_max_s is the longest pause promised: the spread stops there. */
static void test_spread_within_max(void **state)
{
    (void)state;
    for (unsigned s = 1; s <= SEEDS; s++) {
        chat_conn cn;
        up(&cn, 1, s);
        int64_t p = pause_after_loss(&cn);
        assert_true(p >= 250);
        assert_true(p < 1000 + 50);
    }
}

/* A failed attempt after the loss waits about twice the first pause,
 * doubling from there (+-12.5 %), up to reconnect_max_s. */
static void test_later_attempts_double(void **state)
{
    chat_conn cn;
    int64_t want = 500;

    (void)state;
    up(&cn, 4, 7);
    (void)pause_after_loss(&cn);
    g_opens = 0;
    for (int i = 0; i < 6; i++) {
        chat_conn_tick(&cn, cn.reconnect_at);
        assert_int_equal(g_opens, i + 1);
        assert_int_equal(cn.state, CONN_CONNECTING);
        int64_t before = chat_now_ms();
        chat_conn_failed(&cn, -1, "refused by the test");
        int64_t p = cn.reconnect_at - before;
        assert_true(p >= want - want / 8);
        assert_true(p <= want + want / 8 + 50);
        want = want * 2 < 4000 ? want * 2 : 4000;
    }
}

/* Not wanted (a disconnect call): a loss schedules nothing. */
static void test_unwanted_no_attempt(void **state)
{
    chat_conn cn;

    (void)state;
    up(&cn, 16, 3);
    chat_conn_unwant(&cn);
    chat_conn_close(&cn);
    chat_conn_lost(&cn, "test");
    assert_int_equal(cn.reconnect_at, 0);
    g_opens = 0;
    chat_conn_tick(&cn, chat_now_ms() + 60000);
    assert_int_equal(g_opens, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_attempt_spread),
        cmocka_unit_test(test_spread_within_max),
        cmocka_unit_test(test_later_attempts_double),
        cmocka_unit_test(test_unwanted_no_attempt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
