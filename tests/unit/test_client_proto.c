/* Unit tests of the client library's side of the protocol (clients/proto.c):
 * the JSON objects it writes (commands, requests with their
 * correlationData, messages), and what it reads (integers, envelopes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"

/* Writes one object per case and compares the text. */
static void test_objects(void **state)
{
    static const struct {
        const char *name;
        const char *key;
        const char *str; /* NULL: u64 */
        uint64_t u64;
        const char *want;
    } cases[] = {
        {"plain string", "body", "hello", 0, "{\"body\":\"hello\"}"},
        {"escapes", "body", "a\"b\\c\nd\te\x01", 0, "{\"body\":\"a\\\"b\\\\c\\nd\\te\\u0001\"}"},
        {"UTF-8 as is", "body", "caf\xc3\xa9", 0, "{\"body\":\"caf\xc3\xa9\"}"},
        {"zero", "after", NULL, 0, "{\"after\":0}"},
        {"2^53-1 exactly", "after", NULL, 9007199254740991ull, "{\"after\":9007199254740991}"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        chat_obj o = {0};
        char *text;
        if (cases[i].str != NULL)
            chat_obj_str(&o, cases[i].key, cases[i].str);
        else
            chat_obj_u64(&o, cases[i].key, cases[i].u64);
        text = chat_obj_end(&o);
        assert_non_null(text);
        if (strcmp(text, cases[i].want) != 0)
            fail_msg("%s: wrote %s, want %s", cases[i].name, text, cases[i].want);
        free(text);
    }
}

static void test_object_fields(void **state)
{
    chat_obj o = {0};
    char *text = chat_obj_end(&o);

    (void)state;
    assert_string_equal(text, "{}");
    free(text);
    chat_obj_str(&o, "command", "sync");
    chat_obj_bool(&o, "replay", false);
    chat_obj_bool(&o, "more", true);
    text = chat_obj_end(&o);
    assert_string_equal(text, "{\"command\":\"sync\",\"replay\":false,\"more\":true}");
    free(text);
}

/* The request carries the command with its correlationData, and the
 * plugin's parser sees the same strings. */
static void test_request_text(void **state)
{
    char *text = chat_request_text("{\"command\":\"fetch\",\"group\":\"room1\"}", "ab\"c-r7");
    cJSON *root, *cmd;

    (void)state;
    assert_non_null(text);
    assert_string_equal(text, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"room1\","
                              "\"correlationData\":\"ab\\\"c-r7\"}]}");
    root = cJSON_Parse(text);
    cmd = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "commands"), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(cmd, "correlationData")->valuestring,
                        "ab\"c-r7");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "commands")), 1);
    cJSON_Delete(root);
    free(text);
}

static void test_json_u64(void **state)
{
    static const struct {
        const char *json;
        uint64_t lo;
        bool ok;
        uint64_t want;
    } cases[] = {
        {"0", 0, true, 0},
        {"0", 1, false, 0},
        {"9007199254740991", 0, true, 9007199254740991ull},
        {"9007199254740992", 0, false, 0}, /* 2^53: the protocol stops one below */
        {"-1", 0, false, 0},
        {"1.5", 0, false, 0},
        {"\"7\"", 0, false, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *item = cJSON_Parse(cases[i].json);
        uint64_t v = 0;
        assert_int_equal(chat_json_u64(item, cases[i].lo, &v), cases[i].ok);
        if (cases[i].ok)
            assert_true(v == cases[i].want);
        cJSON_Delete(item);
    }
    assert_false(chat_json_u64(NULL, 0, NULL));
}

static void test_envelopes(void **state)
{
    static const struct {
        const char *json;
        bool ok;
    } cases[] = {
        {"{\"group\":\"g\",\"id\":3,\"from\":\"bob\",\"ts\":5,\"body\":\"hi\",\"cid\":\"c\"}",
         true},
        {"{\"group\":\"g\",\"id\":3}", true},
        {"{\"group\":\"g\",\"id\":0}", false},
        {"{\"id\":3}", false},
        {"[1]", false},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *env = cJSON_Parse(cases[i].json);
        chat_client_message m;
        assert_int_equal(chat_envelope_view(env, cases[i].json, &m), cases[i].ok);
        if (cases[i].ok) {
            assert_string_equal(m.group, "g");
            assert_true(m.id == 3);
            assert_non_null(m.from); /* "" when absent */
            assert_ptr_equal(m.json, cases[i].json);
        }
        cJSON_Delete(env);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_objects),      cmocka_unit_test(test_object_fields),
        cmocka_unit_test(test_request_text), cmocka_unit_test(test_json_u64),
        cmocka_unit_test(test_envelopes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
