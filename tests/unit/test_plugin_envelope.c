/* Unit tests of plugin/envelope.c: the stored envelope of a publish, built
 * by splicing the payload's members (the broker's common case) or by
 * printing cJSON's tree (the fallback): both must give the same envelope,
 * strict JSON that any reader parses; and the ack and cid readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "json_check.h"
#include "plugin.h"
#include "plugin_stubs.h"

#define ID 7
#define GROUP "room1"
#define FROM "alice"
#define TS 1764448943123

struct built {
    char *env, *cid;
    const char *why;
};

static struct built build(enum chat_envelope_way way, const char *payload, size_t len)
{
    struct built b;
    chat_envelope_build_way(way, payload, len, ID, GROUP, FROM, TS, &b.env, &b.cid, &b.why);
    return b;
}

static void built_free(struct built *b)
{
    free(b->env);
    free(b->cid);
}

/* The envelope's head, as the plugin writes it. */
#define HEAD "{\"id\":7,\"group\":\"room1\",\"from\":\"alice\",\"ts\":1764448943123"

/* Builds payload both ways (and through the splice alone), and checks that
 * they agree: the same refusal or cid, and envelopes that are strict JSON
 * and read as the same values. Returns what the broker's way built. */
static struct built agree(const char *payload, size_t len)
{
    struct built any = build(CHAT_ENVELOPE_ANY, payload, len);
    struct built tree = build(CHAT_ENVELOPE_TREE, payload, len);
    struct built splice = build(CHAT_ENVELOPE_SPLICE, payload, len);
    const struct built *ways[] = {&any, &tree, &splice};
    static const char *const names[] = {"any", "tree", "splice"};
    char *canon_tree = NULL;

    if ((any.why == NULL) != (tree.why == NULL) || (any.why && strcmp(any.why, tree.why) != 0)) {
        fail_msg("payload %.200s: refused \"%s\" one way, \"%s\" the other", payload,
                 any.why ? any.why : "-", tree.why ? tree.why : "-");
    }
    if ((any.cid == NULL) != (tree.cid == NULL) || (any.cid && strcmp(any.cid, tree.cid) != 0)) {
        fail_msg("payload %.200s: cid differs", payload);
    }
    if (tree.env) {
        canon_tree = json_canon(tree.env, strlen(tree.env));
        if (!canon_tree) {
            fail_msg("payload %.200s: the tree's envelope is not strict JSON: %.300s", payload,
                     tree.env);
        }
    }
    for (size_t i = 0; i < 3; i++) {
        const struct built *w = ways[i];
        if (!w->env) {
            continue;
        }
        char *canon = json_canon(w->env, strlen(w->env));
        if (!canon) {
            fail_msg("payload %.200s: the %s envelope is not strict JSON: %.300s", payload,
                     names[i], w->env);
        }
        if (strcmp(canon, canon_tree) != 0) {
            fail_msg("payload %.200s: the %s envelope %.300s reads differently from the tree's "
                     "%.300s",
                     payload, names[i], w->env, tree.env);
        }
        free(canon);
    }
    free(canon_tree);
    built_free(&tree);
    built_free(&splice);
    return any;
}

static struct built agree_str(const char *payload)
{
    return agree(payload, strlen(payload));
}

static void test_text(void **state)
{
    static const struct {
        const char *payload;
        const char *env; /* after HEAD */
    } cases[] = {
        {"hello", ",\"body\":\"hello\"}"},
        {"", ",\"body\":\"\"}"},
        {"42", ",\"body\":\"42\"}"},
        {"[1]", ",\"body\":\"[1]\"}"},
        {"\"x\"", ",\"body\":\"\\\"x\\\"\"}"},
        {"null", ",\"body\":\"null\"}"},
        {"{", ",\"body\":\"{\"}"},
        {"{\"a\":}", ",\"body\":\"{\\\"a\\\":}\"}"},
        {"{}x", ",\"body\":\"{}x\"}"},
        {"{} {}", ",\"body\":\"{} {}\"}"},
        {"line\nbreak\t\x01", ",\"body\":\"line\\nbreak\\t\\u0001\"}"},
        {"caf\xc3\xa9 \xe2\x98\x95", ",\"body\":\"caf\xc3\xa9 \xe2\x98\x95\"}"},
        /* Text keeps \u0000 as six characters, not a NUL. */
        {"a\\u0000b", ",\"body\":\"a\\\\u0000b\"}"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[256];
        struct built b = agree_str(cases[i].payload);
        snprintf(want, sizeof(want), HEAD "%s", cases[i].env);
        assert_null(b.why);
        assert_null(b.cid);
        assert_non_null(b.env);
        assert_string_equal(b.env, want);
        built_free(&b);
    }
}

static void test_objects(void **state)
{
    static const struct {
        const char *payload;
        const char *env; /* after HEAD */
        const char *cid;
    } cases[] = {
        {"{}", "}", NULL},
        {"{\"body\":\"hi\"}", ",\"body\":\"hi\"}", NULL},
        {"{\"body\":\"hi\",\"cid\":\"a-1\"}", ",\"body\":\"hi\",\"cid\":\"a-1\"}", "a-1"},
        /* The plugin's fields are the plugin's, whatever the client sent;
         * the rest keep their order and bytes (spliced). */
        {"{\"id\":99,\"body\":\"b\",\"group\":\"x\",\"from\":\"mallory\",\"ts\":1,\"z\":[1, 2]}",
         ",\"body\":\"b\",\"z\":[1, 2]}", NULL},
        {" {\n \"a\" : { \"b\" : [ true , null ] } ,\r\n\t\"c\":-1.5e3 } \n",
         ",\"a\" : { \"b\" : [ true , null ] },\"c\":-1.5e3}", NULL},
        /* Keys that only look like the plugin's stay. */
        {"{\"ids\":1,\"Id\":2,\"i\":3,\"froms\":4}", ",\"ids\":1,\"Id\":2,\"i\":3,\"froms\":4}",
         NULL},
        /* Other keys may repeat; both copies stay. */
        {"{\"a\":1,\"a\":2}", ",\"a\":1,\"a\":2}", NULL},
        {"{\"n\":{\"a\":1,  \"b\" :2}}", ",\"n\":{\"a\":1,  \"b\" :2}}", NULL},
        {"{\"body\":\"x\\u0000y\"}", ",\"body\":\"x\\u0000y\"}", NULL},
        /* The fields of a change (v1.2) are the plugin's: dropped, so no
         * publish passes for a recall or an edit; a key twice goes the
         * tree's way, which drops both. */
        {"{\"body\":\"b\",\"recall\":1,\"edit\":2,\"recalled\":true,\"edited\":5}",
         ",\"body\":\"b\"}", NULL},
        {"{\"edits\":[3],\"body\":\"b\"}", ",\"body\":\"b\"}", NULL},
        {"{\"body\":\"b\",\"edits\\u0000\":[3]}", ",\"body\":\"b\"}", NULL},
        {"{\"recall\":1,\"recall\":2,\"body\":\"b\"}", ",\"body\":\"b\"}", NULL},
        {"{\"recalls\":1,\"Edit\":2}", ",\"recalls\":1,\"Edit\":2}", NULL},
        {"{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"}",
         ",\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"}", NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[512];
        struct built b = agree_str(cases[i].payload);
        snprintf(want, sizeof(want), HEAD "%s", cases[i].env);
        assert_null(b.why);
        assert_non_null(b.env);
        assert_string_equal(b.env, want);
        if (cases[i].cid) {
            assert_non_null(b.cid);
            assert_string_equal(b.cid, cases[i].cid);
        } else {
            assert_null(b.cid);
        }
        built_free(&b);
    }
}

static void test_refused(void **state)
{
    char cid64[128], cid65[128];
    snprintf(cid64, sizeof(cid64), "{\"cid\":\"%064d\"}", 0);
    snprintf(cid65, sizeof(cid65), "{\"cid\":\"%065d\"}", 0);
    const struct {
        const char *payload;
        size_t len; /* 0: strlen */
        const char *why;
    } cases[] = {
        {"\xff", 0, "payload is neither a JSON object nor UTF-8 text"},
        {"a\0b", 3, "payload is neither a JSON object nor UTF-8 text"},
        {"{\"body\":\"\xc3\"}", 0, "payload is neither a JSON object nor UTF-8 text"},
        {"{\"cid\":5}", 0, "cid must be a string of 1 to 64 bytes"},
        {"{\"cid\":\"\"}", 0, "cid must be a string of 1 to 64 bytes"},
        {"{\"cid\":null}", 0, "cid must be a string of 1 to 64 bytes"},
        {cid65, 0, "cid must be a string of 1 to 64 bytes"},
        {cid64, 0, NULL},
        {"{\"id\":1,\"id\":2}", 0, "payload has the key \"id\" more than once"},
        {"{\"group\":1,\"x\":0,\"group\":2}", 0, "payload has the key \"group\" more than once"},
        {"{\"from\":1,\"from\":2}", 0, "payload has the key \"from\" more than once"},
        {"{\"ts\":1,\"ts\":2}", 0, "payload has the key \"ts\" more than once"},
        {"{\"cid\":\"a\",\"cid\":\"b\"}", 0, "payload has the key \"cid\" more than once"},
        /* A key spelt with an escape is the same key. */
        {"{\"cid\":\"a\",\"\\u0063id\":\"b\"}", 0, "payload has the key \"cid\" more than once"},
        {"{\"a\":\"\\u0000\",\"b\":\"\xef\xb7\x90\"}", 0, "payload holds both \\u0000 and U+FDD0"},
        {"{\"a\":\"\\u0000\\uFDD0\"}", 0, "payload holds both \\u0000 and U+FDD0"},
        {"{\"a\":\"\\u0000\\ufdd0\"}", 0, "payload holds both \\u0000 and U+FDD0"},
        /* JSON's hex digits are of either case (found by the fuzzer: the
         * tree's way turned a mixed-case U+FDD0 into \u0000). */
        {"{\"a\":\"\\u0000\\uFDd0\"}", 0, "payload holds both \\u0000 and U+FDD0"},
        {"\xef\xbb\xbf{\"a\":\"\\u0000\\ufDD0\"}", 0, "payload holds both \\u0000 and U+FDD0"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].payload);
        struct built b = agree(cases[i].payload, len);
        if (cases[i].why) {
            assert_null(b.env);
            assert_non_null(b.why);
            assert_string_equal(b.why, cases[i].why);
        } else {
            assert_null(b.why);
            assert_non_null(b.env);
        }
        built_free(&b);
    }
}

/* Keys written with escapes go through the tree (an escape may spell a
 * reserved name); the result is the same as if they had been plain. */
static void test_escaped_keys(void **state)
{
    static const struct {
        const char *payload;
        const char *env; /* after HEAD */
        const char *cid;
    } cases[] = {
        {"{\"\\u0069d\":5,\"b\":1}", ",\"b\":1}", NULL},
        {"{\"\\u0074s\":5}", "}", NULL},
        {"{\"c\\u0069d\":\"x\",\"body\":\"y\"}", ",\"cid\":\"x\",\"body\":\"y\"}", "x"},
        {"{\"a\\\"b\":1}", ",\"a\\\"b\":1}", NULL},
        {"{\"a\\u0000b\":\"c\\u0000\"}", ",\"a\\u0000b\":\"c\\u0000\"}", NULL},
        {"{\"\\u00e9\":1}", ",\"\xc3\xa9\":1}", NULL},
        /* Readers that end a key at its NUL (cJSON: the plugin, the client
         * library) would take these for a change, another sender, a second
         * cid: they are dropped as the plugin's keys are (redteam2). */
        {"{\"body\":\"x\",\"recall\\u0000\":1}", ",\"body\":\"x\"}", NULL},
        {"{\"edit\\u0000\":1,\"body\":\"x\"}", ",\"body\":\"x\"}", NULL},
        {"{\"recalled\\u0000z\":true,\"edited\\u0000\":5}", "}", NULL},
        {"{\"from\\u0000\":\"root\",\"id\\u0000\":1,\"ts\\u0000\":1,\"group\\u0000\":\"g\"}", "}",
         NULL},
        {"{\"cid\":\"a\",\"cid\\u0000\":\"b\"}", ",\"cid\":\"a\"}", "a"},
        {"{\"cid\\u0000\":\"b\"}", "}", NULL},
        /* a NUL that does not end one of those keys early keeps its key */
        {"{\"\\u0000recall\":1,\"recallx\\u0000\":2}", ",\"\\u0000recall\":1,\"recallx\\u0000\":2}",
         NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char want[256];
        struct built b = agree_str(cases[i].payload);
        struct built s = build(CHAT_ENVELOPE_SPLICE, cases[i].payload, strlen(cases[i].payload));
        assert_null(s.env); /* the splice declines */
        assert_null(s.why);
        snprintf(want, sizeof(want), HEAD "%s", cases[i].env);
        assert_null(b.why);
        assert_string_equal(b.env, want);
        if (cases[i].cid) {
            assert_string_equal(b.cid, cases[i].cid);
        }
        built_free(&b);
        built_free(&s);
    }
}

/* Payloads whose two ways could part: numbers a double cannot hold,
 * unicode, NUL escapes, deep nesting, and what cJSON reads although it is
 * not JSON (a byte order mark, control characters as blanks or raw in
 * strings, numbers JSON does not allow). Each must agree (see agree). */
static void test_equivalent(void **state)
{
    static const char *const payloads[] = {
        "{\"n\":12345678901234567890}",
        "{\"n\":9007199254740993}",
        "{\"n\":1e400}",
        "{\"n\":-1e400,\"m\":[1e999]}",
        "{\"n\":1e-400}",
        "{\"n\":-0}",
        "{\"n\":-0.0e0}",
        "{\"n\":0.1}",
        "{\"n\":1E+2,\"m\":1e-2}",
        "{\"u\":\"\\ud83d\\ude00\xf0\x9f\x98\x80\"}",
        "{\"u\":\"\xe2\x80\xa8\xe2\x80\xa9\xef\xbf\xbf\"}",
        "{\"u\":\"\xef\xb7\x90\"}",
        "{\"z\":\"\\u0000\",\"\\u0000\":\"\\u0000\\u0000\"}",
        "{\"z\":\"\\\\u0000\"}",
        "{\"a\":{\"b\":{\"c\":[[[[[]]]]]}}}",
        "{\"a\":\"\",\"\":\"\"}",
        "{\"a\":true,\"b\":false,\"c\":null}",
        /* What cJSON accepts although JSON does not. */
        "\xef\xbb\xbf{\"body\":\"after a byte order mark\"}",
        "\x0b{\"a\":1}",
        "{\x0b\"a\":1}",
        "{\"a\":1,\x0c\"b\":2}",
        "{\"a\":1\x01,\"b\":2}",
        "{\"a\":[1,\x1f 2]}",
        "{\"body\":\"a\tb\"}",
        "{\"body\":\"a\nb\x01\"}",
        "{\"n\":01}",
        "{\"n\":-01.5}",
        "{\"n\":1.}",
        "{\"n\":-.5}",
        "{\"n\":1.e5}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(payloads) / sizeof(payloads[0]); i++) {
        struct built b = agree_str(payloads[i]);
        assert_null(b.why);
        assert_non_null(b.env);
        built_free(&b);
    }
    /* Nested as deep as cJSON reads, and deeper (text then). */
    for (size_t depth = 998; depth <= 1001; depth++) {
        size_t len = 6 + 2 * depth;
        char *p = malloc(len + 1);
        assert_non_null(p);
        memcpy(p, "{\"a\":", 5);
        memset(p + 5, '[', depth);
        memset(p + 5 + depth, ']', depth);
        p[len - 1] = '}';
        p[len] = '\0';
        struct built b = agree(p, len);
        assert_non_null(b.env);
        built_free(&b);
        free(p);
    }
}

/* The fast way (the splice with its own checks, no cJSON tree) takes a
 * plain object and gives what the tree gives; what it cannot judge as the
 * tree would, it leaves to the tree: then the splice alone declines. */
static void test_fast_way(void **state)
{
    static const struct {
        const char *payload;
        bool fast; /* the splice alone builds it */
    } cases[] = {
        {"{\"cid\":\"pub0-1-1\",\"n\":1,\"t\":2,\"body\":\"a b c\"}", true},
        {" {\"body\":\"a\\\"b\\\\c\\n\",\"x\":[{\"y\":null}]} ", true},
        {"{\"id\":1,\"group\":2,\"from\":3,\"ts\":4,\"cid\":\"c\"}", true},
        {"{\"cid\":\"c\\\"d\"}", false}, /* an escape in the cid */
        {"{\"cid\":5}", false},          /* refusals are the tree's */
        {"{\"cid\":\"\"}", false},
        {"{\"ts\":1,\"ts\":1}", false},
        {"{\"b\":\"\\u0041\"}", false},  /* a \u escape */
        {"{\"b\":\"\\\\u0041\"}", true}, /* only looks like one */
        {"{\"n\":123456789012345678901234567890123}", false},
        {"{\"n\":12345678901234567890123456789012}", true},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *pl = cases[i].payload;
        struct built s = build(CHAT_ENVELOPE_SPLICE, pl, strlen(pl));
        struct built b = agree_str(pl);
        if ((s.env != NULL) != cases[i].fast) {
            fail_msg("payload %s: the splice alone %s", pl, s.env ? "built it" : "declined");
        }
        if (s.env) {
            assert_string_equal(s.env, b.env);
            assert_true((s.cid == NULL) == (b.cid == NULL));
            if (s.cid) {
                assert_string_equal(s.cid, b.cid);
            }
        }
        built_free(&s);
        built_free(&b);
    }
    /* Numbers cJSON cannot read (64 bytes and more) and nesting around the
     * fast way's bound: both ways still agree. */
    for (size_t n = 30; n <= 66; n++) {
        char p[96];
        memcpy(p, "{\"n\":", 5);
        memset(p + 5, '7', n);
        memcpy(p + 5 + n, "}", 2);
        struct built b = agree_str(p);
        assert_non_null(b.env);
        built_free(&b);
    }
    for (size_t depth = 62; depth <= 67; depth++) {
        char p[200];
        size_t len = 6 + 2 * depth;
        memcpy(p, "{\"a\":", 5);
        memset(p + 5, '[', depth);
        memset(p + 5 + depth, ']', depth);
        p[len - 1] = '}';
        p[len] = '\0';
        struct built b = agree(p, len);
        assert_non_null(b.env);
        built_free(&b);
    }
}

static void test_ack_parse(void **state)
{
    static const struct {
        const char *payload;
        bool ok;
        uint64_t id;
    } cases[] = {
        {"5", true, 5},
        {"0", true, 0},
        {" 5\n", true, 5},
        {"\t\r\n7 \r\n", true, 7},
        {"0005", true, 5},
        {"9999999999999999999", true, 9999999999999999999ull}, /* 19 digits */
        {"12345678901234567890", false, 0},                    /* 20 */
        {"00000000000000000001", false, 0},
        {"", false, 0},
        {" ", false, 0},
        {"\n", false, 0},
        {"abc", false, 0},
        {"1.5", false, 0},
        {"0x10", false, 0},
        {"+5", false, 0},
        {"-1", false, 0},
        {"1e3", false, 0},
        {"5 5", false, 0},
        {"\xd9\xa3", false, 0}, /* an Arabic-Indic three */
        {"5\v", false, 0},
        {"{\"id\":5}", false, 0},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t id = 4242;
        bool ok = chat_ack_parse(cases[i].payload, strlen(cases[i].payload), &id);
        if (ok != cases[i].ok) {
            fail_msg("ack \"%s\": %s", cases[i].payload, ok ? "accepted" : "refused");
        }
        assert_true(ok ? id == cases[i].id : id == 4242);
    }
    uint64_t id = 0;
    assert_true(chat_ack_parse("12x", 2, &id)); /* only len bytes count */
    assert_int_equal(id, 12);
}

static void test_payload_cid(void **state)
{
    static const struct {
        const char *payload;
        size_t max_len;
        const char *cid;
    } cases[] = {
        {"{\"cid\":\"c-1\",\"body\":\"x\"}", 100, "c-1"},
        {"{\"cid\":\"c-1\",\"body\":\"x\"}", 10, NULL}, /* longer than max_len */
        {"{\"cid\":5}", 100, NULL},
        {"{\"body\":\"x\"}", 100, NULL},
        {"[{\"cid\":\"c\"}]", 100, NULL},
        {"\"cid\"", 100, NULL},
        {"", 100, NULL},
        {"{\"cid\":\"\xff\"}", 100, NULL},
        {"{\"cid\":\"0000000000000000000000000000000000000000000000000000000000000000\"}", 100,
         "0000000000000000000000000000000000000000000000000000000000000000"},
        {"{\"cid\":\"00000000000000000000000000000000000000000000000000000000000000000\"}", 100,
         NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *cid = chat_payload_cid(cases[i].payload, strlen(cases[i].payload), cases[i].max_len);
        if (cases[i].cid) {
            assert_non_null(cid);
            assert_string_equal(cid, cases[i].cid);
        } else if (cid) {
            fail_msg("payload %s: cid \"%s\"", cases[i].payload, cid);
        }
        free(cid);
    }
}

/* The facts of a stored envelope, and the texts of a recall and of an
 * edit built from them: N's new version and M's template, each strict
 * JSON once the store fills in the holes. */
static char *filled(const chat_envelope *e, uint64_t id, int64_t ts)
{
    char *out = malloc(e->head_len + e->mid_len + e->tail_len + 64);
    assert_non_null(out);
    snprintf(out, e->head_len + e->mid_len + e->tail_len + 64, "%.*s%llu%.*s%lld%.*s",
             (int)e->head_len, e->head, (unsigned long long)id, (int)e->mid_len, e->mid,
             (long long)ts, (int)e->tail_len, e->tail);
    return out;
}

static void test_change(void **state)
{
    static const char n[] = HEAD ",\"cid\":\"a-1\",\"body\":\"helo\",\"pic\":[1]}";
    struct chat_envelope_facts f;
    chat_change ch = {0};
    char *buf = NULL, *m = NULL;
    (void)state;

    assert_null(chat_envelope_facts(n, strlen(n), &f));
    assert_string_equal(f.from, FROM);
    assert_int_equal(f.ts, TS);
    assert_true(f.has_cid);
    assert_string_equal(f.cid, "a-1");
    assert_false(f.recalled);
    assert_false(f.change);
    assert_non_null(chat_envelope_facts("{\"id\":1}", 8, &f));
    assert_non_null(chat_envelope_facts("not json", 8, &f));
    static const char tomb[] =
        "{\"id\":7,\"group\":\"g\",\"from\":\"a\",\"ts\":1,\"recalled\":true}";
    assert_null(chat_envelope_facts(tomb, strlen(tomb), &f));
    assert_true(f.recalled);
    static const char carrier[] = "{\"id\":8,\"group\":\"g\",\"from\":\"a\",\"ts\":1,\"edit\":3}";
    assert_null(chat_envelope_facts(carrier, strlen(carrier), &f));
    assert_true(f.change);

    /* A recall by bob: the tombstone keeps id, group, from and ts alone. */
    assert_null(chat_envelope_facts(n, strlen(n), &f));
    assert_null(chat_envelope_change(&f, GROUP, "bob", ID, NULL, 100, &ch, &buf));
    assert_false(ch.stamp);
    assert_int_equal(ch.id, ID);
    assert_memory_equal(ch.before, HEAD ",\"recalled\":true}", ch.before_len);
    assert_int_equal(ch.before_len, strlen(HEAD ",\"recalled\":true}"));
    m = filled(&ch.msg, 9, 1764448950000);
    assert_string_equal(
        m, "{\"id\":9,\"group\":\"room1\",\"from\":\"bob\",\"ts\":1764448950000,\"recall\":7}");
    free(m);
    mosquitto_free(buf);

    /* An edit: the command's fields but its own and the plugin's replace
     * N's; N keeps its cid; numbers keep their value. */
    cJSON *c = cJSON_Parse("{\"command\":\"edit\",\"group\":\"room1\",\"id\":7,"
                           "\"correlationData\":\"x\",\"body\":\"hello\",\"n\":9007199254740993,"
                           "\"cid\":\"forged\",\"from\":\"mallory\",\"recalled\":true}");
    assert_non_null(c);
    assert_null(chat_envelope_change(&f, GROUP, FROM, ID, c, 100, &ch, &buf));
    assert_true(ch.stamp);
    assert_true(ch.stamp_id);
    char version[256];
    snprintf(version, sizeof(version), "%.*s%lld%.*s%d%.*s", (int)ch.before_len, ch.before,
             1764448950000LL, (int)ch.after_len, ch.after, 9, (int)ch.last_len, ch.last);
    assert_string_equal(version, HEAD ",\"cid\":\"a-1\",\"body\":\"hello\",\"n\":9007199254740992,"
                                      "\"edited\":1764448950000,\"edits\":[9]}");
    m = filled(&ch.msg, 9, 1764448950000);
    assert_string_equal(m, "{\"id\":9,\"group\":\"room1\",\"from\":\"alice\",\"ts\":1764448950000,"
                           "\"edit\":7,\"body\":\"hello\",\"n\":9007199254740992}");
    char *canon = json_canon(m, strlen(m));
    assert_non_null(canon);
    free(canon);
    free(m);
    mosquitto_free(buf);
    buf = NULL;
    /* An edit of an edited version lists the carriers before M; the
     * facts read the list (the ids, each once) and the carrier's N. */
    static const char edited[] = "{\"id\":7,\"group\":\"room1\",\"from\":\"alice\",\"ts\":1,"
                                 "\"body\":\"x\",\"edited\":2,\"edits\":[9,12,9,0,\"13\",14]}";
    assert_null(chat_envelope_facts(edited, strlen(edited), &f));
    assert_int_equal(f.nedits, 3);
    assert_int_equal(f.edits[0], 9);
    assert_int_equal(f.edits[1], 12);
    assert_int_equal(f.edits[2], 14);
    assert_false(f.edits_over);
    assert_null(chat_envelope_change(&f, GROUP, FROM, ID, c, 100, &ch, &buf));
    snprintf(version, sizeof(version), "%.*s%d%.*s", (int)ch.after_len, ch.after, 15,
             (int)ch.last_len, ch.last);
    assert_string_equal(version, ",\"edits\":[9,12,14,15]}");
    mosquitto_free(buf);
    buf = NULL;
    assert_null(chat_envelope_facts(carrier, strlen(carrier), &f));
    assert_int_equal(f.edit_of, 3);
    /* The tombstone a recall of 3 writes over that carrier. */
    size_t tlen = 0;
    char *t = chat_envelope_carrier_tombstone(&f, GROUP, 8, 3, &tlen);
    assert_string_equal(t, "{\"id\":8,\"group\":\"room1\",\"from\":\"a\",\"ts\":1,\"edit\":3,"
                           "\"recalled\":true}");
    assert_int_equal(tlen, strlen(t));
    mosquitto_free(t);
    /* 21 listed: more than an edit may add to */
    static const char full[] =
        "{\"id\":1,\"group\":\"g\",\"from\":\"a\",\"ts\":1,\"edited\":2,"
        "\"edits\":[2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22]}";
    assert_null(chat_envelope_facts(full, strlen(full), &f));
    assert_int_equal(f.nedits, CHAT_PROTO_EDITS_MAX);
    assert_true(f.edits_over);
    assert_null(chat_envelope_facts(n, strlen(n), &f));
    /* Bounds: more than max bytes of fields, a field twice, none at all. */
    assert_string_equal(chat_envelope_change(&f, GROUP, FROM, ID, c, 10, &ch, &buf),
                        "edit is larger than max_payload");
    assert_null(buf);
    cJSON_Delete(c);
    c = cJSON_Parse("{\"body\":\"a\",\"body\":\"b\"}");
    assert_string_equal(chat_envelope_change(&f, GROUP, FROM, ID, c, 100, &ch, &buf),
                        "edit has a field more than once");
    cJSON_Delete(c);
    c = cJSON_Parse("{\"command\":\"edit\",\"id\":7}");
    assert_string_equal(chat_envelope_change(&f, GROUP, FROM, ID, c, 100, &ch, &buf),
                        "edit has no new fields");
    cJSON_Delete(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),        cmocka_unit_test(test_objects),
        cmocka_unit_test(test_refused),     cmocka_unit_test(test_escaped_keys),
        cmocka_unit_test(test_equivalent),  cmocka_unit_test(test_ack_parse),
        cmocka_unit_test(test_payload_cid), cmocka_unit_test(test_fast_way),
        cmocka_unit_test(test_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
