/* Unit tests of pg_backoff (store/pg/pg_backoff.c): the pace of the
 * PostgreSQL backend's reconnects. The first attempt after a loss at once;
 * each next delay within [d/2, d], d doubling from 250 ms to 2 s; the
 * attempts an outage of T ms costs between the bounds pg_backoff.h states,
 * for many seeds; a reset starts over; two seeds do not draw alike (no
 * lockstep). No database, no clock: the delays are added up. */
#include "pg_backoff.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define SEEDS 2000

/* The times of the attempts a connection that never comes back makes in
 * [0, t_max] after a loss at 0 (the first at 0): into at[], their count
 * returned. */
static int attempt_times(uint64_t seed, int64_t t_max, int64_t *at, int cap)
{
    pg_backoff b;
    pg_backoff_init(&b, seed);
    int n = 0;
    for (int64_t t = pg_backoff_next(&b); t <= t_max && n < cap; t += pg_backoff_next(&b)) {
        at[n++] = t;
    }
    return n;
}

/* After a loss: at once; after a failure: a delay in [d/2, d]. */
static void test_first_at_once_then_bounded(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        pg_backoff b;
        pg_backoff_init(&b, seed);
        assert_int_equal(pg_backoff_next(&b), 0);
        int64_t d = PG_BACKOFF_FIRST_MS;
        for (int i = 0; i < 12; i++) {
            int64_t delay = pg_backoff_next(&b);
            assert_in_range(delay, d / 2, d);
            d = d * 2 > PG_BACKOFF_MAX_MS ? PG_BACKOFF_MAX_MS : d * 2;
        }
    }
}

/* The draws cover their range: both ends of the capped one are reached
 * within [d/2, d] by some seed, and the mean is near its middle. */
static void test_draws_spread(void **state)
{
    (void)state;
    int64_t lo = PG_BACKOFF_MAX_MS, hi = 0, sum = 0;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        pg_backoff b;
        pg_backoff_init(&b, seed);
        for (int i = 0; i < 5; i++) {
            pg_backoff_next(&b);
        }
        int64_t delay = pg_backoff_next(&b); /* capped: [1000, 2000] */
        lo = delay < lo ? delay : lo;
        hi = delay > hi ? delay : hi;
        sum += delay;
    }
    assert_true(lo < PG_BACKOFF_MAX_MS / 2 + 50);
    assert_true(hi > PG_BACKOFF_MAX_MS - 50);
    assert_in_range(sum / SEEDS, 1400, 1600);
}

/* Attempts within T ms of a loss: n <= 5 + (T - 1875) / 1000 and, from
 * T = 3750 on, n >= 5 + (T - 3750) / 2000 (so >= 4 + (T - 3750) / 2000
 * too); 33 at most in 30 s. */
static void test_attempts_bounded(void **state)
{
    (void)state;
    int64_t at[128];
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        int total = attempt_times(seed, 60000, at, 128);
        assert_true(total < 128);
        int n = 0; /* attempts within [0, t] */
        for (int64_t t = 0; t <= 60000; t += 125) {
            while (n < total && at[n] <= t) {
                n++;
            }
            assert_true(n >= 1);
            if (t >= 1875) {
                assert_true(n <= 5 + (t - 1875) / 1000);
            } else {
                assert_true(n <= 4);
            }
            if (t >= 3750) {
                assert_true(n >= 5 + (t - 3750) / 2000);
                assert_true(n >= 4 + (t - 3750) / 2000);
            }
            if (t == 30000) {
                assert_in_range(n, 18, 33);
            }
        }
    }
}

/* A success starts over: the next loss is retried at once, then after
 * the first delay again. */
static void test_reset(void **state)
{
    (void)state;
    pg_backoff b;
    pg_backoff_init(&b, 42);
    for (int i = 0; i < 10; i++) {
        pg_backoff_next(&b);
    }
    assert_in_range(pg_backoff_next(&b), PG_BACKOFF_MAX_MS / 2, PG_BACKOFF_MAX_MS);
    pg_backoff_reset(&b);
    assert_int_equal(pg_backoff_next(&b), 0);
    assert_in_range(pg_backoff_next(&b), PG_BACKOFF_FIRST_MS / 2, PG_BACKOFF_FIRST_MS);
}

/* Two brokers (two seeds) that lost their connections together do not
 * retry together: their schedules differ within the first few attempts. */
static void test_no_lockstep(void **state)
{
    (void)state;
    int same = 0;
    for (uint64_t seed = 1; seed < SEEDS; seed++) {
        pg_backoff a, b;
        pg_backoff_init(&a, seed);
        pg_backoff_init(&b, seed + 1);
        int64_t ta = 0, tb = 0;
        for (int i = 0; i < 6; i++) {
            ta += pg_backoff_next(&a);
            tb += pg_backoff_next(&b);
        }
        same += ta == tb;
    }
    assert_true(same < SEEDS / 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_at_once_then_bounded),
        cmocka_unit_test(test_draws_spread),
        cmocka_unit_test(test_attempts_bounded),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_no_lockstep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
