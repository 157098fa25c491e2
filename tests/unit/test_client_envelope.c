/* Unit tests of the client library's envelope reader (clients/envelope.c):
 * the scanner for the common shape must agree with cJSON's reading
 * (chat_envelope_view) on every envelope, the fallback included, hand back
 * the envelope's own text without blanks, and cut responses so that their
 * messages are read from the payload. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "envelope.h"
#include "proto.h"

static void same_string(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        assert_ptr_equal(a, b);
    else
        assert_string_equal(a, b);
}

/* Every case read both ways: the fields agree with cJSON's. */
static void test_read_agrees_with_cjson(void **state)
{
    static const struct {
        const char *name;
        const char *json;
        const char *compact; /* the json field; NULL: the same as json */
    } cases[] = {
        {"common",
         "{\"id\":3,\"group\":\"g\",\"from\":\"bob\",\"ts\":5,\"cid\":\"c\",\"body\":\"hi\"}",
         NULL},
        {"blanks", " { \"id\" : 3 ,\n\"group\":\"g\", \"body\" : \"a b\" , \"x\" : [ 1 , 2 ] } ",
         "{\"id\":3,\"group\":\"g\",\"body\":\"a b\",\"x\":[1,2]}"},
        {"escaped body", "{\"id\":3,\"group\":\"g\",\"body\":\"a\\\"b\\n\\u00e9\"}", NULL},
        {"escaped key", "{\"i\\u0064\":3,\"group\":\"g\"}", NULL},
        {"no from", "{\"id\":3,\"group\":\"g\"}", NULL},
        {"body not a string", "{\"id\":3,\"group\":\"g\",\"body\":{\"a\":\"}\"}}", NULL},
        {"first of duplicates", "{\"id\":3,\"group\":\"g\",\"body\":\"one\",\"body\":\"two\"}",
         NULL},
        {"id with a fraction", "{\"id\":3.0,\"group\":\"g\"}", NULL},
        {"id as an exponent", "{\"id\":3e0,\"group\":\"g\"}", NULL},
        {"ts negative", "{\"id\":3,\"group\":\"g\",\"ts\":-5}", NULL},
        {"ts a fraction", "{\"id\":3,\"group\":\"g\",\"ts\":5.5}", NULL},
        {"largest id", "{\"id\":9007199254740991,\"group\":\"g\"}", NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct chat_env *e = NULL;
        cJSON *tree = cJSON_Parse(cases[i].json);
        chat_client_message want;
        print_message("%s\n", cases[i].name);
        assert_true(chat_envelope_view(tree, "", &want));
        assert_int_equal(chat_env_read(cases[i].json, strlen(cases[i].json), &e), CHAT_ENV_OK);
        assert_true(e->m.id == want.id);
        assert_true(e->m.ts == want.ts);
        same_string(e->m.group, want.group);
        same_string(e->m.from, want.from);
        same_string(e->m.body, want.body);
        same_string(e->m.cid, want.cid);
        assert_string_equal(e->m.json, cases[i].compact ? cases[i].compact : cases[i].json);
        free(e);
        cJSON_Delete(tree);
    }
}

static void test_not_envelopes(void **state)
{
    static const char *const cases[] = {
        "[1]",
        "\"text\"",
        "{\"group\":\"g\",\"id\":0}",
        "{\"id\":3}",
        "{\"id\":\"3\",\"group\":\"g\"}",
        "{\"id\":3,\"group\":7}",
        "{\"id\":9007199254740992,\"group\":\"g\"}",
        "{\"id\":-3,\"group\":\"g\"}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct chat_env *e = NULL;
        print_message("%s\n", cases[i]);
        assert_int_equal(chat_env_read(cases[i], strlen(cases[i]), &e), CHAT_ENV_INVALID);
        assert_null(e);
    }
}

/* A page is cut: its messages array is left out of the tree and read from
 * the payload, element by element; an entry with a correlationData keeps
 * its messages in the tree as well. */
static void test_cut(void **state)
{
    static const char page[] =
        "{\"responses\":[{\"command\":\"replay\",\"group\":\"g\",\"messages\":["
        "{\"id\":1,\"group\":\"g\",\"body\":\"a\"}, 7 ,{\"id\":2,\"group\":\"g\",\"body\":\"]\"}],"
        "\"first\":1,\"more\":false},"
        "{\"command\":\"fetch\",\"correlationData\":\"c1\",\"messages\":[{\"id\":5,\"group\":\"g\"}"
        "]}]}";
    cJSON *root = NULL, *entry;
    struct chat_span *spans = NULL;
    size_t n = 0, count = 0, len, at;
    const char *elem;
    chat_env_verdict v;
    struct chat_env *e;
    static const chat_env_verdict want[] = {CHAT_ENV_OK, CHAT_ENV_INVALID, CHAT_ENV_OK};

    (void)state;
    assert_true(chat_response_cut(page, strlen(page), &root, &spans, &n));
    assert_int_equal(n, 2);
    entry = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "responses"), 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(entry, "messages")), 0);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(entry, "more")));
    entry = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "responses"), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(entry, "messages")), 1);
    at = 0;
    while (chat_span_next(&spans[0], &at, &v, &e, &elem, &len)) {
        assert_true(count < 3);
        assert_int_equal(v, want[count]);
        if (v == CHAT_ENV_OK) {
            assert_true(e->m.id == (count == 0 ? 1 : 2));
            assert_string_equal(e->m.body, count == 0 ? "a" : "]");
        } else {
            assert_memory_equal(elem, "7", len);
        }
        free(e);
        count++;
    }
    assert_int_equal(count, 3);
    assert_memory_equal(spans[0].text, "[{", 2);
    assert_memory_equal(spans[0].text + spans[0].len - 2, "}]", 2);
    at = 0;
    assert_true(chat_span_next(&spans[1], &at, &v, &e, &elem, &len));
    assert_int_equal(v, CHAT_ENV_OK);
    free(e);
    assert_false(chat_span_next(&spans[1], &at, &v, &e, &elem, &len));
    cJSON_Delete(root);
    chat_spans_free(spans, n);

    /* Envelopes not handed on are freed with the spans. */
    assert_true(chat_response_cut(page, strlen(page), &root, &spans, &n));
    cJSON_Delete(root);
    chat_spans_free(spans, n);

    /* Not strict JSON, or a key with an escape: parsed whole instead. */
    assert_false(chat_response_cut("{\"responses\":[],}", 17, &root, &spans, &n));
    assert_false(chat_response_cut("{\"respons\\u0065s\":[]}", 21, &root, &spans, &n));
    assert_null(root);
    assert_null(spans);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_agrees_with_cjson),
        cmocka_unit_test(test_not_envelopes),
        cmocka_unit_test(test_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
