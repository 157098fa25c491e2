/* Unit tests of chat_quiet (store/chat_quiet.c): the log of a thing's
 * outages (the PostgreSQL backend's connections, the plugin's store
 * calls), on an injected clock and sink. An outage logs
 * its first failure in full, every new failure text in full (up to
 * CHAT_QUIET_TEXTS), else at most one "still down" line per
 * CHAT_QUIET_EVERY_MS with the counts of what it did not log, and one "back"
 * line with its length; a failure retried four times a second for ten
 * minutes logs a few dozen lines, not thousands. No database: the rules
 * alone. */
#include "chat_quiet.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAX_LINES 64

static int64_t g_now; /* the injected clock, ms */

static int64_t fake_now(void)
{
    return g_now;
}

/* What the sink got. */
struct lines {
    int n;
    char line[MAX_LINES][700];
};

static void sink(void *ctx, const char *line)
{
    struct lines *l = ctx;
    assert_true(l->n < MAX_LINES);
    assert_null(strchr(line, '\n')); /* one line each */
    snprintf(l->line[l->n++], sizeof(l->line[0]), "%s", line);
}

static const char refused[] = "connection to server failed: Connection refused";

/* Retries every step_ms for dur_ms from now on, failing with text. */
static void retry(chat_quiet *q, int64_t dur_ms, int64_t step_ms, const char *text)
{
    for (int64_t t = 0; t < dur_ms; t += step_ms) {
        g_now += step_ms;
        chat_quiet_fail(q, "PostgreSQL listener: %s", text);
    }
}

static int setup(void **state)
{
    struct lines *l = calloc(1, sizeof(*l));
    chat_quiet *q = calloc(1, sizeof(*q));
    if (!l || !q) {
        free(l);
        free(q);
        return -1;
    }
    g_now = 1000000;
    chat_quiet_init(q, "PostgreSQL listener", fake_now, sink, l);
    state[0] = q;
    return 0;
}

static int teardown(void **state)
{
    chat_quiet *q = state[0];
    free(q->ctx);
    chat_quiet_destroy(q);
    free(q);
    return 0;
}

/* The first failure in full, the same text again not at all. */
static void test_first_failure_in_full(void **state)
{
    chat_quiet *q = state[0];
    struct lines *l = q->ctx;
    assert_true(chat_quiet_fail(q, "PostgreSQL listener lost: %s", "server closed the connection"));
    assert_true(chat_quiet_fail(q, "PostgreSQL listener: %s", refused));
    assert_false(chat_quiet_fail(q, "PostgreSQL listener: %s", refused));
    retry(q, 10000, 250, refused);
    assert_int_equal(l->n, 2);
    assert_string_equal(l->line[0],
                        "mosquitto-chat: PostgreSQL listener lost: server closed the connection");
    assert_string_equal(l->line[1], "mosquitto-chat: PostgreSQL listener: connection to server "
                                    "failed: Connection refused");
}

/* At most one line per CHAT_QUIET_EVERY_MS, saying for how long, how many
 * attempts failed, how many lines were not logged, and the last text. */
static void test_still_down_every_30_s(void **state)
{
    chat_quiet *q = state[0];
    struct lines *l = q->ctx;
    chat_quiet_fail(q, "PostgreSQL listener: %s", refused); /* at 0 */
    retry(q, CHAT_QUIET_EVERY_MS - 250, 250, refused);      /* up to 29.75 s */
    assert_int_equal(l->n, 1);
    retry(q, 250, 250, refused); /* 30 s */
    assert_int_equal(l->n, 2);
    assert_string_equal(l->line[1],
                        "mosquitto-chat: PostgreSQL listener still down after 30.0 s: 121 attempts "
                        "failed, 120 lines not logged (0 with an error not logged before); last: "
                        "PostgreSQL listener: connection to "
                        "server failed: Connection refused");
    retry(q, CHAT_QUIET_EVERY_MS - 250, 250, refused);
    assert_int_equal(l->n, 2);
    retry(q, 250, 250, refused);
    assert_int_equal(l->n, 3);
    assert_non_null(strstr(l->line[2], "still down after 60.0 s: 241 attempts failed, 120 lines"));
}

/* Ten minutes of retries four times a second: 2,400 failures, 21 lines
 * (the first, one every 30 s), and the back line. */
static void test_ten_minutes_bounded(void **state)
{
    chat_quiet *q = state[0];
    struct lines *l = q->ctx;
    chat_quiet_fail(q, "PostgreSQL listener: %s", refused);
    retry(q, 600000, 250, refused);
    assert_int_equal(l->n, 1 + 600000 / CHAT_QUIET_EVERY_MS);
    g_now += 250;
    assert_true(chat_quiet_ok(q));
    assert_int_equal(l->n, 2 + 600000 / CHAT_QUIET_EVERY_MS);
    assert_string_equal(l->line[l->n - 1], "mosquitto-chat: PostgreSQL listener back after 600.2 "
                                           "s (2401 attempts failed, 0 lines not logged since "
                                           "the last)");
}

/* A changed text is logged at once, wherever the 30 s stand; a text the
 * outage logged before is not again; past CHAT_QUIET_TEXTS texts the rest
 * waits for the "still down" line. */
static void test_changed_text_logged(void **state)
{
    chat_quiet *q = state[0];
    struct lines *l = q->ctx;
    char text[64];
    chat_quiet_fail(q, "PostgreSQL listener: %s", refused);
    retry(q, 1000, 250, refused);
    g_now += 250;
    assert_true(
        chat_quiet_fail(q, "PostgreSQL listener: %s", "the database system is starting up"));
    assert_false(chat_quiet_fail(q, "PostgreSQL listener: %s", refused)); /* seen: not again */
    assert_int_equal(l->n, 2);
    assert_string_equal(l->line[1], "mosquitto-chat: PostgreSQL listener: the database system is "
                                    "starting up");
    for (int i = 2; i < CHAT_QUIET_TEXTS; i++) {
        snprintf(text, sizeof(text), "cause %d", i);
        assert_true(chat_quiet_fail(q, "PostgreSQL listener: %s", text));
    }
    assert_int_equal(l->n, CHAT_QUIET_TEXTS);
    assert_false(chat_quiet_fail(q, "PostgreSQL listener: %s", "one cause too many"));
    assert_int_equal(l->n, CHAT_QUIET_TEXTS);
    g_now += CHAT_QUIET_EVERY_MS;
    assert_true(chat_quiet_fail(q, "PostgreSQL listener: %s", "one cause too many"));
    assert_non_null(strstr(l->line[l->n - 1], "still down"));
    assert_non_null(strstr(l->line[l->n - 1], "last: PostgreSQL listener: one cause too many"));
    /* Past the cap a new text is counted, so the operator knows one came
     * even when it is not the last (review of 2959f82). */
    assert_non_null(strstr(l->line[l->n - 1], "(2 with an error not logged before)"));
}

/* Back: one line with the outage's length and counts, nothing when it was
 * not down, and the next outage starts over (its first failure in full,
 * the texts of the last one forgotten). */
static void test_back_and_next_outage(void **state)
{
    chat_quiet *q = state[0];
    struct lines *l = q->ctx;
    assert_false(chat_quiet_ok(q));
    assert_int_equal(l->n, 0);
    chat_quiet_fail(q, "PostgreSQL listener: %s", refused);
    retry(q, 2400, 250, refused);
    g_now += 100;
    assert_true(chat_quiet_ok(q));
    assert_false(chat_quiet_ok(q));
    assert_int_equal(l->n, 2);
    assert_string_equal(l->line[1], "mosquitto-chat: PostgreSQL listener back after 2.6 s (11 "
                                    "attempts failed, 10 lines not logged since the last)");
    g_now += 5000;
    assert_true(chat_quiet_fail(q, "PostgreSQL listener: %s", refused));
    assert_int_equal(l->n, 3);
    g_now += 1000;
    assert_true(chat_quiet_ok(q));
    assert_non_null(strstr(l->line[3], "back after 1.0 s (1 attempts failed"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_first_failure_in_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_still_down_every_30_s, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ten_minutes_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_changed_text_logged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_back_and_next_outage, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
