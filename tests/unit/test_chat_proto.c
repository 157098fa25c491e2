/* Unit tests of proto/: the wire format's checks and JSON string writer,
 * shared by the plugin, the client library and the tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

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

static void test_json_valid(void **state)
{
    static const struct {
        const char *text;
        bool ok;
    } cases[] = {
        {"{}", true},
        {"[]", true},
        {" {\"a\" : [1, -2.5e+3, 0, -0, 0.5E-1, true, false, null, \"\"]}\r\n\t", true},
        {"{\"a\":{\"b\":{}},\"c\":[[],[{}]]}", true},
        {"\"s\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\ude00\"", true},
        {"42", true},
        {"\"\xc3\xa9\"", true},
        {"", false},
        {" ", false},
        {"{", false},
        {"{}}", false},
        {"{} {}", false},
        {"[1,]", false},
        {"{\"a\":1,}", false},
        {"{\"a\"}", false},
        {"{\"a\":}", false},
        {"{a:1}", false},
        {"{'a':1}", false},
        {"[1 2]", false},
        {"{\"a\":1 \"b\":2}", false},
        {"[}", false},
        {"{]", false},
        {"\xef\xbb\xbf{}", false}, /* a byte order mark */
        {"\x0b{}", false},         /* control characters are no blanks */
        {"{\"a\":1\x0c}", false},
        {"\"a\tb\"", false}, /* nor allowed raw in a string */
        {"\"a\x01\"", false},
        {"\"\\x\"", false},
        {"\"\\u12\"", false},
        {"\"\\u12g4\"", false},
        {"\"open", false},
        {"\"\\", false},
        {"01", false},
        {"-01", false},
        {"1.", false},
        {"-.5", false},
        {".5", false},
        {"+1", false},
        {"1e", false},
        {"1e+", false},
        {"1.e5", false},
        {"-", false},
        {"0x10", false},
        {"tru", false},
        {"truex", false},
        {"nul", false},
        {"NaN", false},
        {"Infinity", false},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (chat_proto_json_valid(cases[i].text, strlen(cases[i].text)) != cases[i].ok) {
            fail_msg("\"%s\": expected %s", cases[i].text, cases[i].ok ? "valid" : "invalid");
        }
    }
    /* A NUL inside the length is a control character, outside it is not read. */
    assert_false(chat_proto_json_valid("\"a\0\"", 4));
    assert_true(chat_proto_json_valid("[1]]", 3));

    /* Nesting: the bound, and just past it; objects and arrays alike. */
    size_t max = CHAT_PROTO_JSON_DEPTH_MAX;
    char *deep = malloc(6 * (max + 1) + 2);
    assert_non_null(deep);
    for (size_t d = max; d <= max + 1; d++) {
        memset(deep, '[', d);
        memset(deep + d, ']', d);
        assert_int_equal(chat_proto_json_valid(deep, 2 * d), d == max);
        size_t n = 0;
        for (size_t i = 0; i < d; i++, n += 5) {
            memcpy(deep + n, "{\"a\":", 5);
        }
        deep[n++] = '0';
        memset(deep + n, '}', d);
        assert_int_equal(chat_proto_json_valid(deep, n + d), d == max);
    }
    free(deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),       cmocka_unit_test(test_group_names),
        cmocka_unit_test(test_json_int),   cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_json_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
