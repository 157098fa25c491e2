/* test_client_seq.c: unit tests (cmocka) of clients/seq.c, the per-group ordering
 * of the client library: ids released once, in order, held across gaps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "seq.h"

/* Items are heap ids, so that leaks and double frees show under valgrind
 * and ASan; g_freed counts frees. */
static int g_freed;

static void free_item(void *item)
{
    g_freed++;
    free(item);
}

static void *item(uint64_t id)
{
    uint64_t *p = malloc(sizeof *p);

    assert_non_null(p);
    *p = id;
    return p;
}

/* Pops everything due; returns how many, checking they count up from
 * first. */
static int pop_all(chat_seq *s, uint64_t first)
{
    uint64_t id;
    void *it;
    int n = 0;

    while ((it = chat_seq_pop(s, &id)) != NULL) {
        assert_int_equal(id, first + (uint64_t)n);
        assert_int_equal(*(uint64_t *)it, id);
        free(it);
        n++;
    }
    return n;
}

static int setup(void **state)
{
    chat_seq *s = malloc(sizeof *s);

    if (s == NULL)
        return -1;
    chat_seq_init(s, 8, free_item);
    g_freed = 0;
    *state = s;
    return 0;
}

static int teardown(void **state)
{
    chat_seq_clear(*state);
    free(*state);
    return 0;
}

static void test_in_order(void **state)
{
    chat_seq *s = *state;

    chat_seq_set_base(s, 0);
    for (uint64_t id = 1; id <= 5; id++) {
        assert_int_equal(chat_seq_offer(s, id, item(id)), CHAT_SEQ_HELD);
        assert_int_equal(pop_all(s, id), 1);
    }
    assert_int_equal(s->shown, 5);
}

static void test_held_until_gap_filled(void **state)
{
    chat_seq *s = *state;

    chat_seq_set_base(s, 10);
    assert_int_equal(chat_seq_offer(s, 13, item(13)), CHAT_SEQ_HELD);
    assert_int_equal(chat_seq_offer(s, 12, item(12)), CHAT_SEQ_HELD);
    assert_int_equal(pop_all(s, 11), 0);
    assert_int_equal(chat_seq_first_held(s), 12);
    assert_int_equal(chat_seq_last_held(s), 13);
    assert_int_equal(chat_seq_offer(s, 11, item(11)), CHAT_SEQ_HELD);
    assert_int_equal(pop_all(s, 11), 3);
    assert_int_equal(s->shown, 13);
    assert_int_equal(s->n, 0);
}

static void test_duplicates_and_old(void **state)
{
    chat_seq *s = *state;

    chat_seq_set_base(s, 5);
    assert_int_equal(chat_seq_offer(s, 5, item(5)), CHAT_SEQ_OLD);
    assert_int_equal(chat_seq_offer(s, 1, item(1)), CHAT_SEQ_OLD);
    assert_int_equal(chat_seq_offer(s, 8, item(8)), CHAT_SEQ_HELD);
    assert_int_equal(chat_seq_offer(s, 8, item(8)), CHAT_SEQ_DUP);
    assert_int_equal(g_freed, 3);
    assert_int_equal(s->n, 1);
}

static void test_unknown_base_holds_everything(void **state)
{
    chat_seq *s = *state;

    assert_int_equal(chat_seq_offer(s, 3, item(3)), CHAT_SEQ_HELD);
    assert_int_equal(chat_seq_offer(s, 1, item(1)), CHAT_SEQ_HELD);
    assert_int_equal(chat_seq_offer(s, 2, item(2)), CHAT_SEQ_HELD);
    assert_int_equal(pop_all(s, 1), 0); /* no baseline yet */
    chat_seq_set_base(s, 1);            /* 1 was shown before: dropped */
    assert_int_equal(g_freed, 1);
    assert_int_equal(pop_all(s, 2), 2);
}

static void test_full_keeps_lowest(void **state)
{
    chat_seq *s = *state; /* max 8 */

    chat_seq_set_base(s, 0);
    for (uint64_t id = 10; id < 18; id++)
        assert_int_equal(chat_seq_offer(s, id, item(id)), CHAT_SEQ_HELD);
    assert_int_equal(chat_seq_offer(s, 30, item(30)), CHAT_SEQ_DROPPED);
    /* A lower one evicts the highest held. */
    assert_int_equal(chat_seq_offer(s, 2, item(2)), CHAT_SEQ_HELD);
    assert_int_equal(s->n, 8);
    assert_int_equal(chat_seq_last_held(s), 16);
    assert_int_equal(chat_seq_first_held(s), 2);
}

static void test_skip_to(void **state)
{
    chat_seq *s = *state;

    chat_seq_set_base(s, 0);
    assert_int_equal(chat_seq_offer(s, 4, item(4)), CHAT_SEQ_HELD);
    assert_int_equal(chat_seq_offer(s, 7, item(7)), CHAT_SEQ_HELD);
    chat_seq_skip_to(s, 5); /* 1..5 removed by retention: 4 goes */
    assert_int_equal(g_freed, 1);
    assert_int_equal(pop_all(s, 6), 0);
    chat_seq_skip_to(s, 3); /* never back */
    assert_int_equal(s->shown, 5);
    assert_int_equal(chat_seq_offer(s, 6, item(6)), CHAT_SEQ_HELD);
    assert_int_equal(pop_all(s, 6), 2);
}

static void test_unpop(void **state)
{
    chat_seq *s = *state;
    uint64_t id = 0;
    void *it;

    chat_seq_set_base(s, 0);
    assert_int_equal(chat_seq_offer(s, 2, item(2)), CHAT_SEQ_HELD);
    assert_int_equal(chat_seq_offer(s, 1, item(1)), CHAT_SEQ_HELD);
    it = chat_seq_pop(s, &id);
    assert_non_null(it);
    assert_int_equal(id, 1);
    chat_seq_unpop(s, id, it); /* the application refused it */
    assert_int_equal(s->shown, 0);
    assert_int_equal(pop_all(s, 1), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_until_gap_filled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicates_and_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_base_holds_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_keeps_lowest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skip_to, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unpop, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
