/* Unit tests of proto/: the wire format's checks and JSON string writer,
 * shared by the plugin, the client library and the tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "chat_proto.h"

static void test_utf8(void **state)
{
    static const struct {
        const char *s;
        size_t len;
        bool ok;
    } cases[] = {
        {"", 0, true},
        {"hello", 5, true},
        {"caf\xc3\xa9", 5, true},       /* é */
        {"\xf0\x9f\x98\x80", 4, true},  /* U+1F600 */
        {"a\0b", 3, false},             /* NUL */
        {"\xc3", 1, false},             /* truncated */
        {"\xc0\xaf", 2, false},         /* overlong / */
        {"\xed\xa0\x80", 3, false},     /* surrogate U+D800 */
        {"\xf4\x90\x80\x80", 4, false}, /* above U+10FFFF */
        {"\xff", 1, false},             /* never valid */
        {"\xe2\x82", 2, false},         /* truncated three-byte */
        {"ok\x80", 3, false},           /* stray continuation */
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(chat_proto_utf8_valid(cases[i].s, cases[i].len), cases[i].ok);
    }
}

static void test_group_names(void **state)
{
    char long_name[130];
    static const struct {
        const char *name;
        const char *error;
    } cases[] = {
        {"room1", NULL},
        {"caf\xc3\xa9 ☕", NULL},
        {"", "group name is empty"},
        {"a/b", "group name contains one of / + # $"},
        {"a+", "group name contains one of / + # $"},
        {"#", "group name contains one of / + # $"},
        {"$SYS", "group name contains one of / + # $"},
        {"tab\there", "group name contains a control character"},
        {"del\x7f", "group name contains a control character"},
        {"c1\xc2\x85", "group name contains a control character"}, /* U+0085 */
        {"bad\xc3", "group name is not valid UTF-8"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = chat_proto_group_error(cases[i].name, strlen(cases[i].name));
        if (cases[i].error == NULL) {
            assert_null(got);
        } else {
            assert_non_null(got);
            assert_string_equal(got, cases[i].error);
        }
    }
    memset(long_name, 'g', sizeof long_name);
    assert_null(chat_proto_group_error(long_name, CHAT_PROTO_GROUP_MAX));
    assert_string_equal(chat_proto_group_error(long_name, CHAT_PROTO_GROUP_MAX + 1),
                        "group name is longer than 128 bytes");
    /* A NUL inside the given length is a control character. */
    assert_string_equal(chat_proto_group_error("a\0b", 3),
                        "group name contains a control character");
}

static void test_json_int(void **state)
{
    uint64_t v = 0;
    (void)state;
    assert_true(chat_proto_json_int(0, 0, &v));
    assert_int_equal(v, 0);
    assert_false(chat_proto_json_int(0, 1, &v));
    assert_true(chat_proto_json_int(9007199254740991.0, 0, &v));
    assert_true(v == CHAT_PROTO_JSON_INT_MAX);
    assert_false(chat_proto_json_int(9007199254740992.0, 0, &v)); /* 2^53: not exact */
    assert_false(chat_proto_json_int(1.5, 0, &v));
    assert_false(chat_proto_json_int(-1, 0, &v));
    assert_false(chat_proto_json_int(1e300, 0, &v));
    assert_false(chat_proto_json_int(nan(""), 0, &v));
}

static void test_json_string(void **state)
{
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"plain", 5, "\"plain\""},
        {"q\"b\\", 4, "\"q\\\"b\\\\\""},
        {"a\nb\tc\rd", 7, "\"a\\nb\\tc\\rd\""},
        {"\b\f", 2, "\"\\b\\f\""},
        {"\x01\x1f", 2, "\"\\u0001\\u001f\""},
        {"nul\0x", 5, "\"nul\\u0000x\""},
        {"\xc3\xa9/", 3, "\"\xc3\xa9/\""},
    };
    char buf[64];
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = chat_proto_json_string(buf, cases[i].in, cases[i].len);
        assert_true(n <= CHAT_PROTO_JSON_STRING_MAX(cases[i].len));
        assert_int_equal(n, strlen(cases[i].out));
        assert_memory_equal(buf, cases[i].out, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_group_names),
        cmocka_unit_test(test_json_int),
        cmocka_unit_test(test_json_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
