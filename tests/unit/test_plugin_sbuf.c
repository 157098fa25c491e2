/* Unit tests of plugin/sbuf.c: the growable buffer every answer is written
 * into, with mosquitto_malloc stubbed to fail on demand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_stubs.h"
#include "sbuf.h"

static int reset(void **state)
{
    (void)state;
    stub_reset();
    return 0;
}

static void take_equals(sbuf *b, const char *want)
{
    size_t len = 12345;
    char *got = sbuf_take(b, &len);
    assert_non_null(got);
    assert_int_equal(len, strlen(want));
    assert_string_equal(got, want); /* NUL-terminated */
    assert_null(b->data);
    assert_int_equal(b->len, 0);
    mosquitto_free(got);
}

static void test_appends(void **state)
{
    sbuf b = {0};
    (void)state;
    sbuf_puts(&b, "{\"n\":");
    sbuf_u64(&b, 0);
    sbuf_add(&b, ",", 1);
    sbuf_u64(&b, UINT64_MAX);
    sbuf_add(&b, ",\"s\":xyz", 5); /* only n bytes */
    sbuf_json_str(&b, "a\"b\\c\nd\x01");
    sbuf_add(&b, "", 0);
    take_equals(&b, "{\"n\":0,18446744073709551615,\"s\":\"a\\\"b\\\\c\\nd\\u0001\"");
    /* b is empty and usable again. */
    sbuf_puts(&b, "again");
    take_equals(&b, "again");
}

static void test_empty(void **state)
{
    sbuf b = {0};
    (void)state;
    take_equals(&b, ""); /* a buffer never written still gives "" */
    sbuf_free(&b);
    sbuf_free(&b); /* twice is fine */
}

static void test_growth(void **state)
{
    sbuf b = {0};
    char *want = malloc(70001);
    (void)state;
    assert_non_null(want);
    for (size_t i = 0; i < 70000; i++) {
        char c = (char)('a' + i % 26);
        want[i] = c;
        sbuf_add(&b, &c, 1);
        assert_true(b.cap > b.len); /* room for the NUL, always */
        assert_int_equal(b.data[b.len], '\0');
    }
    want[70000] = '\0';
    /* One page of the largest escapes at once. */
    char ctl[4000];
    memset(ctl, '\x02', sizeof(ctl) - 1);
    ctl[sizeof(ctl) - 1] = '\0';
    sbuf_json_str(&b, ctl);
    assert_int_equal(b.len, 70000 + 2 + 6 * (sizeof(ctl) - 1));
    assert_memory_equal(b.data, want, 70000);
    assert_memory_equal(b.data + 70000, "\"\\u0002\\u0002", 13);
    sbuf_free(&b);
    assert_null(b.data);
    free(want);
}

static void test_first_allocation_fails(void **state)
{
    sbuf b = {0};
    (void)state;
    stub_alloc_fail_after(0);
    sbuf_puts(&b, "lost");
    assert_true(b.failed);
    stub_alloc_fail_after(-1);
    /* Every later append is ignored, so callers check once at the end. */
    sbuf_puts(&b, "also lost");
    sbuf_u64(&b, 7);
    sbuf_json_str(&b, "x");
    assert_int_equal(b.len, 0);
    assert_null(sbuf_take(&b, NULL));
    assert_false(b.failed); /* take emptied it */
    sbuf_puts(&b, "fresh");
    take_equals(&b, "fresh");
}

static void test_growth_fails(void **state)
{
    sbuf b = {0};
    char big[300];
    size_t len = 99;
    (void)state;
    memset(big, 'b', sizeof(big));
    sbuf_puts(&b, "head");
    stub_alloc_fail_after(0);
    sbuf_add(&b, big, sizeof(big)); /* needs more than the first 256 bytes */
    stub_alloc_fail_after(-1);
    assert_true(b.failed);
    assert_int_equal(b.len, 4);
    sbuf_add(&b, "x", 1);
    assert_int_equal(b.len, 4);
    /* What was written is freed with the failure (valgrind checks). */
    assert_null(sbuf_take(&b, &len));
    assert_null(b.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_appends, reset),
        cmocka_unit_test_setup(test_empty, reset),
        cmocka_unit_test_setup(test_growth, reset),
        cmocka_unit_test_setup(test_first_allocation_fails, reset),
        cmocka_unit_test_setup(test_growth_fails, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
