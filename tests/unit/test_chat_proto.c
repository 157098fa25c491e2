/* Unit tests of proto/: the wire format's checks, its JSON string writer
 * and reader, and the check of a stored envelope's shape, shared by the
 * plugin, the client library, mqchat-store and the tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "chat_proto.h"
#include "chat_proto_envelope.h"

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

/* Issue 21, item 9: one rule of member and device names, the plugin's
 * and mqchat-store import's. */
static void test_member_names(void **state)
{
    static const struct {
        const char *name;
        size_t len;
        const char *error;
    } cases[] = {
        {"alice", 5, NULL},
        {"~alice", 6, NULL}, /* a client id where usernames are verified */
        {"~", 1, NULL},
        {"J\xc3\xbcrgen", 7, NULL},
        {"", 0, "member name is empty"},
        {"al\nice", 6, "member name contains a control character"},
        {"al\x7fice", 6, "member name contains a control character"},
        {"al\xc2\x85ice", 7, "member name contains a control character"},
        {"ali\0ce", 6, "member name contains a control character"},
        {"al\xffice", 6, "member name is not valid UTF-8"},
        {"\xed\xa0\x80", 3, "member name is not valid UTF-8"},
    };
    char name[CHAT_PROTO_NAME_MAX + 1];
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = chat_proto_member_error(cases[i].name, cases[i].len);
        if (!cases[i].error) {
            assert_null(got);
        } else {
            assert_non_null(got);
            assert_string_equal(got, cases[i].error);
        }
    }
    memset(name, 'm', sizeof(name));
    assert_null(chat_proto_member_error(name, CHAT_PROTO_NAME_MAX));
    assert_string_equal(chat_proto_member_error(name, CHAT_PROTO_NAME_MAX + 1),
                        "member name is longer than 1024 bytes");
    assert_null(chat_proto_device_error("phone", 5));
    assert_string_equal(chat_proto_device_error("", 0), "device name is empty");
    assert_string_equal(chat_proto_device_error("ph\tone", 6),
                        "device name contains a control character");
}

static void test_json_unescape(void **state)
{
    static const struct {
        const char *in;
        const char *out;
        size_t len; /* SIZE_MAX: refused */
    } cases[] = {
        {"\"plain\"", "plain", 5},
        {"\"q\\\"b\\\\\\/\"", "q\"b\\/", 5},
        {"\"\\b\\f\\n\\r\\t\"", "\b\f\n\r\t", 5},
        {"\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac", 6},
        {"\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4},
        {"\"a\\u0000b\"", "a\0b", 3},
        {"\"\\ud83d\"", NULL, SIZE_MAX},
        {"\"\\ude00x\"", NULL, SIZE_MAX},
        {"\"\\ud83dx\"", NULL, SIZE_MAX},
    };
    char out[16];
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *in = cases[i].in;
        size_t n = chat_proto_json_unescape(in, in + strlen(in), out, sizeof(out));
        assert_true(n == cases[i].len);
        if (n != SIZE_MAX) {
            assert_memory_equal(out, cases[i].out, n);
            assert_int_equal(out[n], '\0');
        }
    }
    /* out with room for the bytes but not the NUL: refused */
    const char *abc = "\"abc\"";
    assert_true(chat_proto_json_unescape(abc, abc + 5, out, 3) == SIZE_MAX);
    assert_int_equal(chat_proto_json_unescape(abc, abc + 5, out, 4), 3);
}

static void test_json_member(void **state)
{
    const char *obj = "{ \"a\" : {\"envelope\":1}, \"\\u0065nvelope\":2 ,\"envelope\": [3, 4] }";
    const char *end = obj + strlen(obj), *vend = NULL;
    (void)state;
    const char *v = chat_proto_json_member(obj, end, "envelope", &vend);
    assert_non_null(v);
    assert_memory_equal(v, "[3, 4]", 6);
    assert_true(vend == v + 6);
    v = chat_proto_json_member(obj, end, "a", &vend);
    assert_memory_equal(v, "{\"envelope\":1}", (size_t)(vend - v));
    assert_null(chat_proto_json_member(obj, end, "b", &vend));
    const char *arr = "[1]";
    assert_null(chat_proto_json_member(arr, arr + 3, "a", &vend));
}

/* Issue 21, item 9: an envelope the plugin could have stored, and one case
 * per way it could not have. */
#define NUL_KEY                                                                                    \
    "a key holds \\u0000 after this name: readers that end a key at a NUL take it for this field"

static void test_envelope(void **state)
{
    static const struct {
        const char *text;
        const char *error; /* NULL: accepted */
        const char *field;
    } cases[] = {
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0}", NULL, NULL},
        {"{\"id\":9007199254740991,\"group\":\"~g\\\"\",\"from\":\"~a\",\"ts\":17,\"body\":"
         "\"x\",\"cid\":\"c\\u0000\",\"n\" : { \"id\" : 1 },\"\\u0069dx\":2}",
         NULL, NULL},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\":\"x\"}", NULL, NULL},
        {"[1]", "envelope is not a JSON object", NULL},
        {"{\"id\":1,}", "envelope is not a JSON object", NULL},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0}\xff", "envelope is not valid UTF-8",
         NULL},
        {" {\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0}", "envelope is not a JSON object",
         NULL},
        {"{\"group\":\"g\",\"id\":1,\"from\":\"a\",\"ts\":0}",
         "envelope does not begin with {\"id\":", "id"},
        {"{\"id\":0,\"group\":\"g\",\"from\":\"a\",\"ts\":0}",
         "envelope id must be an integer from 1 to 9007199254740991", "id"},
        {"{\"id\":01,\"group\":\"g\",\"from\":\"a\",\"ts\":0}", "envelope is not a JSON object",
         NULL},
        {"{\"id\":9007199254740992,\"group\":\"g\",\"from\":\"a\",\"ts\":0}",
         "envelope id must be an integer from 1 to 9007199254740991", "id"},
        {"{\"id\":1e3,\"group\":\"g\",\"from\":\"a\",\"ts\":0}",
         "envelope id must be an integer from 1 to 9007199254740991", "id"},
        {"{\"id\":\"1\",\"group\":\"g\",\"from\":\"a\",\"ts\":0}",
         "envelope id must be an integer from 1 to 9007199254740991", "id"},
        {"{\"id\":1, \"group\":\"g\",\"from\":\"a\",\"ts\":0}",
         "envelope has no \"group\" after its id", "group"},
        {"{\"id\":1,\"group\":5,\"from\":\"a\",\"ts\":0}", "envelope \"group\" must be a string",
         "group"},
        {"{\"id\":1,\"group\":\"a+b\",\"from\":\"a\",\"ts\":0}",
         "group name contains one of / + # $", "group"},
        {"{\"id\":1,\"group\":\"\\u0000\",\"from\":\"a\",\"ts\":0}",
         "group name contains a control character", "group"},
        {"{\"id\":1,\"group\":\"g\",\"ts\":0}", "envelope has no \"from\" after its group", "from"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"\",\"ts\":0}", "member name is empty", "from"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":-1}",
         "envelope ts must be an integer from 0 to 9007199254740991", "ts"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\"}", "envelope has no \"ts\" after its sender",
         "ts"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"ts\":1}",
         "envelope has the key \"ts\" more than once", "ts"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"gr\\u006fup\":\"h\"}",
         "envelope has the key \"group\" more than once", "group"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\":\"x\",\"cid\":\"x\"}",
         "envelope has the key \"cid\" more than once", "cid"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\":null}",
         "cid must be a string of 1 to 64 bytes", "cid"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\":\"\"}",
         "cid must be a string of 1 to 64 bytes", "cid"},
        /* a key that readers ending keys at a NUL (cJSON) take for one of
         * the plugin's: a forged change, sender or cid (redteam2) */
        {"{\"id\":2,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"recall\\u0000\":1}", NUL_KEY,
         "recall"},
        {"{\"id\":2,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"edit\\u0000xyzxyzxyzxyzxyz\":1}",
         NUL_KEY, "edit"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"fr\\u006fm\\u0000\":\"b\"}", NUL_KEY,
         "from"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\\u0000\":\"b\"}", NUL_KEY, "cid"},
        {"{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"\\u0000recall\":1,\"recallx\\u0000\":"
         "1,"
         "\"body\\u0000\":1,\"recall\\\\u0000\":1}",
         NULL, NULL},
    };
    chat_proto_envelope e;
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = chat_proto_envelope_error(cases[i].text, strlen(cases[i].text), &e);
        if (!cases[i].error) {
            assert_null(got);
            continue;
        }
        assert_non_null(got);
        assert_string_equal(got, cases[i].error);
        if (cases[i].field) {
            assert_non_null(e.field);
            assert_string_equal(e.field, cases[i].field);
        } else {
            assert_null(e.field);
        }
    }

    /* what it found: the fields, decoded, and where the id and ts are */
    const char *text = cases[1].text;
    assert_null(chat_proto_envelope_error(text, strlen(text), &e));
    assert_true(e.id == CHAT_PROTO_JSON_INT_MAX);
    assert_int_equal(e.ts, 17);
    assert_memory_equal(text + e.id_at, "9007199254740991", e.id_len);
    assert_memory_equal(text + e.ts_at, "17", e.ts_len);
    assert_string_equal(e.group, "~g\"");
    assert_string_equal(e.from, "~a");
    assert_true(e.has_cid);
    assert_string_equal(e.cid, "c\xef\xb7\x90"); /* \u0000 as the plugin indexes it */

    /* a cid of 64 bytes, of 65, and of 62 + \u0000 (64 as indexed) */
    char buf[256], cid[70];
    memset(cid, 'c', sizeof(cid));
    for (int n = 64; n <= 65; n++) {
        int len =
            snprintf(buf, sizeof(buf),
                     "{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\":\"%.*s\"}", n, cid);
        const char *why = chat_proto_envelope_error(buf, (size_t)len, &e);
        if (n == 64) {
            assert_null(why);
        } else {
            assert_non_null(why);
        }
    }
    int len = snprintf(buf, sizeof(buf),
                       "{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\":\"%.*s\\u0000\"}",
                       62, cid);
    assert_non_null(chat_proto_envelope_error(buf, (size_t)len, &e));
    len = snprintf(buf, sizeof(buf),
                   "{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":0,\"cid\":\"%.*s\\u0000\"}", 61,
                   cid);
    assert_null(chat_proto_envelope_error(buf, (size_t)len, &e));
    assert_int_equal(strlen(e.cid), 64);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),          cmocka_unit_test(test_group_names),
        cmocka_unit_test(test_json_int),      cmocka_unit_test(test_json_string),
        cmocka_unit_test(test_json_valid),    cmocka_unit_test(test_member_names),
        cmocka_unit_test(test_json_unescape), cmocka_unit_test(test_json_member),
        cmocka_unit_test(test_envelope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
