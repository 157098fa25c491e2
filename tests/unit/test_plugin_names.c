/* Unit tests of plugin/names.c: what the plugin makes of the names in
 * network input (chat topics, the member a client speaks as, \u0000
 * escapes), with the broker API stubbed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "plugin_stubs.h"

static void test_topic_parse(void **state)
{
    static const struct {
        const char *prefix;
        const char *topic;
        enum chat_topic_kind kind;
        const char *group; /* GROUP and ACK: the group named */
    } cases[] = {
        {"chat", "chat/room1", CHAT_TOPIC_GROUP, "room1"},
        {"chat", "chat/room1/ack", CHAT_TOPIC_ACK, "room1"},
        {"chat", "chat/caf\xc3\xa9", CHAT_TOPIC_GROUP, "caf\xc3\xa9"},
        /* The group's own checks come later (chat_proto_group_error). */
        {"chat", "chat/", CHAT_TOPIC_GROUP, ""},
        {"chat", "chat//ack", CHAT_TOPIC_ACK, ""},
        {"chat", "chat/a+b", CHAT_TOPIC_GROUP, "a+b"},
        {"chat", "chat/room1/x", CHAT_TOPIC_BAD, NULL},
        {"chat", "chat/room1/", CHAT_TOPIC_BAD, NULL},
        {"chat", "chat/room1/ACK", CHAT_TOPIC_BAD, NULL},
        {"chat", "chat/room1/ack/x", CHAT_TOPIC_BAD, NULL},
        {"chat", "chat/room1/acks", CHAT_TOPIC_BAD, NULL},
        {"chat", "chat", CHAT_TOPIC_NONE, NULL}, /* the prefix alone names no group */
        {"chat", "chatter/room1", CHAT_TOPIC_NONE, NULL},
        {"chat", "cha", CHAT_TOPIC_NONE, NULL},
        {"chat", "Chat/room1", CHAT_TOPIC_NONE, NULL},
        {"chat", "x/chat/room1", CHAT_TOPIC_NONE, NULL},
        {"chat", "", CHAT_TOPIC_NONE, NULL},
        {"chat", "$CONTROL/chat/v1", CHAT_TOPIC_NONE, NULL},
        /* A prefix of the operator's choice. */
        {"team", "team/room1", CHAT_TOPIC_GROUP, "room1"},
        {"team", "team/room1/ack", CHAT_TOPIC_ACK, "room1"},
        {"team", "chat/room1", CHAT_TOPIC_NONE, NULL},
        {"t\xc3\xa9", "t\xc3\xa9/r", CHAT_TOPIC_GROUP, "r"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct chat_config cfg = {.topic_prefix = (char *)cases[i].prefix,
                                  .prefix_len = strlen(cases[i].prefix)};
        const char *g = NULL;
        size_t glen = 99;
        enum chat_topic_kind k = chat_topic_parse(&cfg, cases[i].topic, &g, &glen);
        if (k != cases[i].kind) {
            fail_msg("topic \"%s\" (prefix %s): kind %d, expected %d", cases[i].topic,
                     cases[i].prefix, k, cases[i].kind);
        }
        if (cases[i].group) {
            assert_int_equal(glen, strlen(cases[i].group));
            assert_memory_equal(g, cases[i].group, glen);
            /* The group points into the topic, right after "<prefix>/". */
            assert_ptr_equal(g, cases[i].topic + strlen(cases[i].prefix) + 1);
        }
    }
}

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static void test_member(void **state)
{
    char *u1024 = repeat('u', 1024), *u1025 = repeat('u', 1025);
    char *i1023 = repeat('i', 1023), *i1024 = repeat('i', 1024), *i1025 = repeat('i', 1025);
    const char *reserved = "usernames beginning with ~ are reserved on this broker for members "
                           "without a username";
    const char *too_long = "client id or username is longer than 1024 bytes";
    const struct {
        bool verified; /* tilde_names: some listener checks usernames (and this one did) */
        const char *user, *id;
        const char *member; /* NULL: refused with error */
        const char *error;
    } cases[] = {
        {false, "alice", "dev1", "alice", NULL},
        {true, "alice", "dev1", "alice", NULL},
        {false, NULL, "dev1", "dev1", NULL},
        {false, "", "dev1", "dev1", NULL},
        /* Where usernames are verified, a client id is anyone's to choose:
         * it never passes for a user. */
        {true, NULL, "dev1", "~dev1", NULL},
        {true, "", "dev1", "~dev1", NULL},
        {true, NULL, "alice", "~alice", NULL},
        {true, NULL, "~x", "~~x", NULL},
        {true, "~bob", "dev1", NULL, reserved},
        {true, "~", "dev1", NULL, reserved},
        {false, "~bob", "dev1", "~bob", NULL}, /* nobody is named ~ here */
        {false, NULL, NULL, NULL, "client has no client id"},
        {true, "", NULL, NULL, "client has no client id"},
        {false, "bob", NULL, "bob", NULL},
        {false, u1024, "d", u1024, NULL},
        {false, u1025, "d", NULL, too_long},
        {false, NULL, i1024, i1024, NULL},
        {true, NULL, i1024, NULL, too_long}, /* the ~ makes it 1025 */
        {true, NULL, i1023, NULL, NULL},     /* "~" + 1023: checked below */
        /* the client id names the device even beside a username */
        {false, "alice", i1024, "alice", NULL},
        {false, "alice", i1025, NULL, too_long},
        {true, "alice", i1025, NULL, too_long},
    };
    /* A username its listener did not check, beside listeners that check
     * theirs: named by its client id, never passing for the user. */
    char buf[CHAT_MEMBER_BUF];
    assert_null(chat_member_name(true, false, "admin", "dev9", buf));
    assert_string_equal(buf, "~dev9");
    assert_null(chat_member_name(true, false, "~admin", "dev9", buf));
    assert_string_equal(buf, "~dev9");
    assert_string_equal(chat_member_name(true, false, "admin", NULL, buf),
                        "client has no client id");
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[CHAT_MEMBER_BUF];
        const char *why =
            chat_member_name(cases[i].verified, cases[i].verified, cases[i].user, cases[i].id, buf);
        const char *m = why ? NULL : buf;
        if (cases[i].error) {
            if (m != NULL) {
                fail_msg("case %zu: member \"%.40s\", expected the error \"%s\"", i, m,
                         cases[i].error);
            }
            assert_non_null(why);
            assert_string_equal(why, cases[i].error);
        } else if (cases[i].member) {
            assert_ptr_equal(m, buf);
            assert_string_equal(m, cases[i].member);
        } else {
            assert_non_null(m);
            assert_int_equal(strlen(m), 1024);
            assert_int_equal(m[0], '~');
            assert_string_equal(m + 1, i1023);
        }
    }
    free(u1024);
    free(u1025);
    free(i1023);
    free(i1024);
    free(i1025);
}

static void test_nul_escapes(void **state)
{
    static const struct {
        const char *in;
        size_t len; /* 0: strlen(in) */
        size_t count;
        const char *out; /* with "FDD0" written over each escape's digits */
    } cases[] = {
        {"\"a\\u0000b\"", 0, 1, "\"a\\uFDD0b\""},
        {"\\u0000\\u0000", 0, 2, "\\uFDD0\\uFDD0"},
        {"\"\\\\u0000\"", 0, 0, "\"\\\\u0000\""},     /* an escaped backslash, then text */
        {"\"\\\\\\u0000\"", 0, 1, "\"\\\\\\uFDD0\""}, /* a backslash, then the escape */
        {"\\u00000", 0, 1, "\\uFDD00"},               /* digits after it are text */
        {"\\u000", 0, 0, "\\u000"},                   /* truncated */
        {"\\u0000", 5, 0, "\\u0000"},                 /* cut by the length */
        {"\\U0000", 0, 0, "\\U0000"},                 /* not an escape */
        {"\\u0001", 0, 0, "\\u0001"},
        {"\\", 0, 0, "\\"},
        {"", 0, 0, ""},
        {"{\"\\u0000\":\"\\u0000\"}", 0, 2, "{\"\\uFDD0\":\"\\uFDD0\"}"}, /* keys too */
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64];
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].in);
        snprintf(buf, sizeof(buf), "%s", cases[i].in);
        assert_int_equal(chat_nul_escapes(buf, len, NULL), cases[i].count);
        assert_string_equal(buf, cases[i].in); /* counting writes nothing */
        assert_int_equal(chat_nul_escapes(buf, len, "FDD0"), cases[i].count);
        assert_string_equal(buf, cases[i].out);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topic_parse),
        cmocka_unit_test(test_member),
        cmocka_unit_test(test_nul_escapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
