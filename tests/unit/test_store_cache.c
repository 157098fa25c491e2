/* Unit tests of chat_cache (store/chat_cache): every entry stays readable
 * while the slots grow from a few to twice max_entries, and a full cache
 * forgets everything and starts over. */
#include "chat_cache.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static size_t key_of(char *buf, size_t size, unsigned i)
{
    int n = snprintf(buf, size, "key-%u", i);
    return (size_t)n;
}

/* Entries put across every doubling of the slots, found or not, all come
 * back with their records. */
static void test_grows_keeping_entries(void **state)
{
    const unsigned max = 100000;
    chat_cache *c = chat_cache_create(max);
    char k[32];
    bool found = false;
    uint64_t v = 0, x = 0;

    (void)state;
    assert_non_null(c);
    for (unsigned i = 0; i < max; i++) {
        chat_cache_put(c, k, key_of(k, sizeof k, i), i % 3 != 0, i, i * 2u);
    }
    for (unsigned i = 0; i < max; i++) {
        assert_true(chat_cache_get(c, k, key_of(k, sizeof k, i), &found, &v, &x));
        assert_int_equal(found, i % 3 != 0);
        if (found) {
            assert_int_equal(v, i);
            assert_int_equal(x, i * 2u);
        }
    }
    /* an update keeps one entry */
    chat_cache_put(c, k, key_of(k, sizeof k, 7), true, 70, 0);
    assert_true(chat_cache_get(c, k, key_of(k, sizeof k, 7), &found, &v, &x));
    assert_true(found);
    assert_int_equal(v, 70);
    chat_cache_destroy(c);
}

/* Updates and absences recorded while the slots double (an old set of
 * slots still being moved over) are what later lookups see, never an older
 * copy; and max counts every key once. */
static void test_updates_while_growing(void **state)
{
    const unsigned n = 20000;
    chat_cache *c = chat_cache_create(n + 10);
    char k[32];
    bool found = false;
    uint64_t v = 0, x = 0;

    (void)state;
    assert_non_null(c);
    for (unsigned i = 0; i < n; i++) {
        chat_cache_put(c, k, key_of(k, sizeof k, i), true, i, 0);
        /* An older key changes (or goes) at every step. */
        unsigned j = i / 2;
        bool gone = j % 7 == 0;
        chat_cache_put(c, k, key_of(k, sizeof k, j), !gone, 1000000u + i, 0);
        assert_true(chat_cache_get(c, k, key_of(k, sizeof k, j), &found, &v, &x));
        assert_int_equal(found, !gone);
        if (!gone) {
            assert_int_equal(v, 1000000u + i);
        }
    }
    for (unsigned j = 0; j < n; j++) {
        /* j was last written at step 2j + 1 (j < n / 2), else at its put. */
        assert_true(chat_cache_get(c, k, key_of(k, sizeof k, j), &found, &v, &x));
        if (j < n / 2) {
            assert_int_equal(found, j % 7 != 0);
            if (found) {
                assert_int_equal(v, 1000000u + 2 * j + 1);
            }
        } else {
            assert_true(found);
            assert_int_equal(v, j);
        }
    }
    /* n keys, max n + 10: ten more fit, the eleventh starts over. */
    for (unsigned i = n; i < n + 10; i++) {
        chat_cache_put(c, k, key_of(k, sizeof k, i), true, i, 0);
    }
    assert_true(chat_cache_get(c, k, key_of(k, sizeof k, 0), &found, &v, &x));
    chat_cache_put(c, k, key_of(k, sizeof k, n + 10), true, 1, 0);
    assert_false(chat_cache_get(c, k, key_of(k, sizeof k, 0), &found, &v, &x));
    chat_cache_destroy(c);
}

/* One entry beyond max: everything before it is forgotten. */
static void test_full_starts_over(void **state)
{
    const unsigned max = 5000;
    chat_cache *c = chat_cache_create(max);
    char k[32];
    bool found = false;
    uint64_t v = 0, x = 0;

    (void)state;
    assert_non_null(c);
    for (unsigned i = 0; i <= max; i++) {
        chat_cache_put(c, k, key_of(k, sizeof k, i), true, i, 0);
    }
    assert_false(chat_cache_get(c, k, key_of(k, sizeof k, 0), &found, &v, &x));
    assert_false(chat_cache_get(c, k, key_of(k, sizeof k, max - 1), &found, &v, &x));
    assert_true(chat_cache_get(c, k, key_of(k, sizeof k, max), &found, &v, &x));
    assert_int_equal(v, max);
    chat_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grows_keeping_entries),
        cmocka_unit_test(test_updates_while_growing),
        cmocka_unit_test(test_full_starts_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
