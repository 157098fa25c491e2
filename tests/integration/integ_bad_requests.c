/* integ_bad_requests: bad requests on $CONTROL/chat/v1 and bad group names,
 * one ctest per kind (argv[1]): malformed JSON, not an object, bad commands
 * arrays, unknown commands, bad fields and numbers, bad group names. What
 * every variant must get and keep: integ_bad.h. */
#include "integ_bad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * Cases
 * ========================================================================= */

static void case_malformed_json(fixture *fx)
{
    static const char nul_inside[] = "{\"commands\":[]}\0";

    bad_request_error(fx, "truncated", "{\"commands\":[", "request", NULL, E_MALFORMED);
    bad_request_error(fx, "bare word", "hello", "request", NULL, E_MALFORMED);
    bad_request_error(fx, "single quotes", "{'commands':[]}", "request", NULL, E_MALFORMED);
    bad_request_error(fx, "trailing comma", "{\"commands\":[{\"command\":\"sync\"},]}", "request",
                      NULL, E_MALFORMED);
    bad_request_error(fx, "unquoted key", "{commands:[]}", "request", NULL, E_MALFORMED);
    bad_request_error(fx, "trailing garbage",
                      "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]} and more",
                      "request", NULL, E_MALFORMED);
    bad_request_error(fx, "two objects", "{\"commands\":[]}{\"commands\":[]}", "request", NULL,
                      E_MALFORMED);
    bad_request_bytes_error(fx, "empty payload", "", 0, E_NOT_UTF8_OBJECT);
    bad_request_bytes_error(fx, "not UTF-8", "\xff\xfe{}", 4, E_NOT_UTF8_OBJECT);
    bad_request_bytes_error(fx, "NUL byte", nul_inside, sizeof nul_inside - 1, E_NOT_UTF8_OBJECT);
}

static void case_not_object(fixture *fx)
{
    static const char *const values[] = {
        "[]", "[{\"command\":\"sync\"}]", "42", "\"commands\"", "null", "true"};

    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        bad_request_error(fx, values[i], values[i], "request", NULL, E_NOT_OBJECT);
}

static void case_commands(fixture *fx)
{
    variant empty = {
        .name = "empty array", .who = BOB, .kind = REQUEST, .payload = "{\"commands\":[]}", .n = 0};

    bad_request_error(fx, "no commands", "{}", "request", NULL, E_COMMANDS_MISSING);
    bad_request_error(fx, "command instead", "{\"command\":\"sync\"}", "request", NULL,
                      E_COMMANDS_MISSING);
    bad_request_error(fx, "wrong case", "{\"Commands\":[{\"command\":\"sync\"}]}", "request", NULL,
                      E_COMMANDS_MISSING);
    bad_request_error(fx, "object", "{\"commands\":{\"command\":\"sync\"}}", "request", NULL,
                      E_COMMANDS_ARRAY);
    bad_request_error(fx, "string", "{\"commands\":\"sync\"}", "request", NULL, E_COMMANDS_ARRAY);
    bad_request_error(fx, "null", "{\"commands\":null}", "request", NULL, E_COMMANDS_ARRAY);
    bad_request_error(fx, "number", "{\"commands\":1}", "request", NULL, E_COMMANDS_ARRAY);
    bad_run(fx, &empty); /* not an error: no commands, no entries */
}

static void case_unknown_command(fixture *fx)
{
    variant mixed = {.name = "among good ones",
                     .who = BOB,
                     .kind = REQUEST,
                     .payload = "{\"commands\":[{\"command\":\"sync\",\"replay\":false},"
                                "{\"command\":\"nope\",\"group\":\"" GROUP "\"},"
                                "{\"command\":\"history\",\"group\":\"" GROUP "\",\"limit\":1}]}",
                     .n = 3};

    mixed.e[0] = (expect){"sync", NULL, NULL, NULL};
    mixed.e[1] = (expect){"nope", NULL, NULL, E_UNKNOWN};
    mixed.e[2] = (expect){"history", GROUP, NULL, NULL};
    bad_request_error(fx, "frobnicate", "{\"commands\":[{\"command\":\"frobnicate\"}]}",
                      "frobnicate", NULL, E_UNKNOWN);
    bad_request_error(fx, "upper case", "{\"commands\":[{\"command\":\"SYNC\"}]}", "SYNC", NULL,
                      E_UNKNOWN);
    bad_request_error(fx, "empty name", "{\"commands\":[{\"command\":\"\"}]}", "", NULL, E_UNKNOWN);
    bad_request_error(fx, "replay is not a request",
                      "{\"commands\":[{\"command\":\"replay\",\"group\":\"" GROUP "\"}]}", "replay",
                      NULL, E_UNKNOWN);
    bad_run(fx, &mixed);
}

static void case_fields(fixture *fx)
{
    char req[2048];
    char *long_member = bad_repeat('m', 1025);

    bad_request_error(fx, "empty command object", "{\"commands\":[{}]}", "unknown", NULL,
                      E_COMMAND_MISSING);
    bad_request_error(fx, "command not an object", "{\"commands\":[42]}", "unknown", NULL,
                      E_EACH_OBJECT);
    bad_request_error(fx, "command a number", "{\"commands\":[{\"command\":7}]}", "unknown", NULL,
                      E_COMMAND_STRING);
    bad_request_error(fx, "join without group", "{\"commands\":[{\"command\":\"join\"}]}", "join",
                      NULL, E_GROUP_MISSING);
    bad_request_error(fx, "fetch without group", "{\"commands\":[{\"command\":\"fetch\"}]}",
                      "fetch", NULL, E_GROUP_MISSING);
    bad_request_error(fx, "leave group number",
                      "{\"commands\":[{\"command\":\"leave\",\"group\":5}]}", "leave", NULL,
                      E_GROUP_STRING);
    bad_request_error(fx, "fetch group null",
                      "{\"commands\":[{\"command\":\"fetch\",\"group\":null}]}", "fetch", NULL,
                      E_GROUP_STRING);
    bad_request_error(fx, "history group array",
                      "{\"commands\":[{\"command\":\"history\",\"group\":[\"" GROUP "\"]}]}",
                      "history", NULL, E_GROUP_STRING);
    bad_request_error(fx, "ack without group", "{\"commands\":[{\"command\":\"ack\",\"id\":1}]}",
                      "ack", NULL, E_GROUP_MISSING);
    bad_request_error(fx, "ack without id",
                      "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\"}]}", "ack",
                      GROUP, E_ID_MISSING);
    bad_request_error(fx, "ack id string",
                      "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":\"3\"}]}",
                      "ack", GROUP, "id must be an integer from 0 to 2^53-1");
    bad_request_error(fx, "sync replay string",
                      "{\"commands\":[{\"command\":\"sync\",\"replay\":\"false\"}]}", "sync", NULL,
                      E_REPLAY);
    bad_request_error(fx, "sync replay number",
                      "{\"commands\":[{\"command\":\"sync\",\"replay\":0}]}", "sync", NULL,
                      E_REPLAY);
    bad_request_error(fx, "join member number",
                      "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP
                      "\",\"member\":5}]}",
                      "join", GROUP, E_MEMBER);
    bad_request_error(fx, "join member empty",
                      "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP
                      "\",\"member\":\"\"}]}",
                      "join", GROUP, E_MEMBER);
    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"leave\",\"group\":\"" GROUP "\",\"member\":\"%s\"}]}",
             long_member);
    bad_request_error(fx, "leave member too long", req, "leave", GROUP, E_MEMBER);
    bad_request_error(fx, "fetch limit string",
                      "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP
                      "\",\"limit\":\"10\"}]}",
                      "fetch", GROUP, "limit must be an integer from 1 to 2^53-1");
    bad_request_error(fx, "fetch after null",
                      "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP
                      "\",\"after\":null}]}",
                      "fetch", GROUP, "after must be an integer from 0 to 2^53-1");
    bad_request_error(fx, "history before bool",
                      "{\"commands\":[{\"command\":\"history\",\"group\":\"" GROUP
                      "\",\"before\":true}]}",
                      "history", GROUP, "before must be an integer from 1 to 2^53-1");
    free(long_member);
}

static void case_numbers(fixture *fx)
{
    static const struct {
        const char *command;
        const char *field;
        int lo;
    } fields[] = {{"fetch", "limit", 1},
                  {"fetch", "after", 0},
                  {"history", "limit", 1},
                  {"history", "before", 1},
                  {"ack", "id", 0}};
    static const struct {
        const char *text;
        int below; /* bad only when the least value is above this */
    } values[] = {{"-1", -100},
                  {"0", 0},
                  {"-0.5", -100},
                  {"1.5", -100},
                  {"9007199254740992", -100},
                  {"18446744073709551616", -100},
                  {"1e300", -100},
                  {"\"5\"", -100},
                  {"[5]", -100}};
    char req[512], name[128], error[128];

    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            if (fields[f].lo <= values[v].below)
                continue; /* "0" is fine where 0 is allowed */
            snprintf(name, sizeof name, "%s %s %s", fields[f].command, fields[f].field,
                     values[v].text);
            snprintf(req, sizeof req,
                     "{\"commands\":[{\"command\":\"%s\",\"group\":\"" GROUP "\",\"%s\":%s}]}",
                     fields[f].command, fields[f].field, values[v].text);
            snprintf(error, sizeof error, "%s must be an integer from %d to 2^53-1",
                     fields[f].field, fields[f].lo);
            bad_request_error(fx, name, req, fields[f].command, GROUP, error);
        }
    }
    /* The bounds themselves are accepted. */
    if (bad_selected(fx, "bounds accepted")) {
        cJSON *resp = harness_request(
            fx->c[BOB],
            "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP
            "\",\"after\":0,\"limit\":1},"
            "{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":9007199254740991},"
            "{\"command\":\"history\",\"group\":\"" GROUP "\",\"before\":1},"
            "{\"command\":\"history\",\"group\":\"" GROUP "\",\"before\":9007199254740991,"
            "\"limit\":9007199254740991}]}",
            WAIT_MS);
        const cJSON *e;
        ASSERT(harness_response_count(resp) == 4);
        e = harness_response_entry(resp, 0);
        harness_expect_ok(e, "fetch", GROUP);
        ASSERTF(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages")) == 1 &&
                    harness_json_int(e, "first") == 1 && harness_json_bool(e, "more"),
                "fetch after 0 limit 1 is not message 1 with more");
        e = harness_response_entry(resp, 1);
        harness_expect_ok(e, "fetch", GROUP);
        ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages")) == 0);
        e = harness_response_entry(resp, 2);
        harness_expect_ok(e, "history", GROUP);
        ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages")) == 0);
        e = harness_response_entry(resp, 3);
        harness_expect_ok(e, "history", GROUP);
        ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages")) == fx->head);
        cJSON_Delete(resp);
        bad_carry_on(fx, BOB, "bounds accepted");
    }
}

static void case_group_names(fixture *fx)
{
    static const struct {
        const char *name;
        const char *json; /* the group as a JSON string literal */
        const char *error;
    } groups[] = {
        {"empty", "\"\"", E_GROUP_EMPTY},
        {"slash", "\"a/b\"", E_GROUP_CHARS},
        {"plus", "\"a+b\"", E_GROUP_CHARS},
        {"hash", "\"a#b\"", E_GROUP_CHARS},
        {"dollar", "\"$a\"", E_GROUP_CHARS},
        {"U+0001", "\"a\\u0001b\"", E_GROUP_CONTROL},
        {"tab", "\"a\\tb\"", E_GROUP_CONTROL},
        {"newline", "\"a\\nb\"", E_GROUP_CONTROL},
        {"DEL", "\"a\\u007fb\"", E_GROUP_CONTROL},
        {"C1 U+0085", "\"a\\u0085b\"", E_GROUP_CONTROL},
        {"NUL inside", "\"" GROUP "\\u0000x\"", E_GROUP_CONTROL},
    };
    static const char *const commands[] = {"fetch", "join"};
    char req[1024], name[128];
    char *long_group = bad_repeat('g', 129), *max_group = bad_repeat('h', 128);
    char long_topic[256], long_ack[256];

    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        for (size_t k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s %s", commands[k], groups[g].name);
            snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"%s\",\"group\":%s}]}",
                     commands[k], groups[g].json);
            bad_request_error(fx, name, req, commands[k], NULL, groups[g].error);
        }
    }
    snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"history\",\"group\":\"%s\"}]}",
             long_group);
    bad_request_error(fx, "history 129 bytes", req, "history", NULL, E_GROUP_LONG);
    /* 128 bytes is a valid name: the refusal is about membership. */
    snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"history\",\"group\":\"%s\"}]}",
             max_group);
    bad_request_error(fx, "history 128 bytes", req, "history", max_group, E_NOT_MEMBER);
    /* A request is UTF-8 as a whole: a group that is not is refused with it. */
    bad_request_bytes_error(fx, "fetch not UTF-8",
                            "{\"commands\":[{\"command\":\"fetch\",\"group\":\"\xc3\x28\"}]}", 0,
                            E_NOT_UTF8_OBJECT);

    /* Topics. Mosquitto itself refuses topics with + or #, control
     * characters or invalid UTF-8 in a PUBLISH (it disconnects the client
     * before any plugin sees them), so those reach the plugin only in
     * requests, above. */
    snprintf(long_topic, sizeof long_topic, "chat/%s", long_group);
    snprintf(long_ack, sizeof long_ack, "chat/%s/ack", long_group);
    bad_publish_error(fx, "publish chat/ (empty group)", BOB, "chat/", "hello", 0, 1,
                      (expect){"publish", NULL, NULL, E_GROUP_EMPTY});
    bad_publish_error(fx, "publish 129 bytes", BOB, long_topic, "hello", 0, 1,
                      (expect){"publish", NULL, NULL, E_GROUP_LONG});
    bad_publish_error(fx, "publish 129 bytes MQTT 5", BOB5, long_topic, "hello", 0, 1,
                      (expect){"publish", NULL, NULL, E_GROUP_LONG});
    bad_publish_error(fx, "publish dollar", BOB, "chat/a$b", "hello", 0, 1,
                      (expect){"publish", NULL, NULL, E_GROUP_CHARS});
    bad_publish_error(fx, "publish dollar MQTT 5 QoS 2", BOB5, "chat/a$b", "hello", 0, 2,
                      (expect){"publish", NULL, NULL, E_GROUP_CHARS});
    bad_publish_error(fx, "ack dollar", BOB, "chat/a$b/ack", "1", 0, 1,
                      (expect){"ack", NULL, NULL, E_GROUP_CHARS});
    bad_publish_error(fx, "ack 129 bytes", BOB, long_ack, "1", 0, 1,
                      (expect){"ack", NULL, NULL, E_GROUP_LONG});
    bad_publish_error(fx, "deeper topic", BOB, "chat/" GROUP "/x", "hello", 0, 1,
                      (expect){"publish", NULL, NULL, E_NOT_CHAT_TOPIC});
    bad_subscribe_error(fx, "subscribe dollar", BOB, "chat/a$b",
                        (expect){"subscribe", NULL, NULL, E_GROUP_CHARS});
    bad_subscribe_error(fx, "subscribe 129 bytes MQTT 5", BOB5, long_topic,
                        (expect){"subscribe", NULL, NULL, E_GROUP_LONG});
    bad_subscribe_error(fx, "subscribe chat/ (empty group)", BOB, "chat/",
                        (expect){"subscribe", NULL, NULL, E_GROUP_EMPTY});
    free(long_group);
    free(max_group);
}

static const bad_case cases[] = {
    {"malformed_json", case_malformed_json, false},
    {"not_object", case_not_object, false},
    {"commands", case_commands, false},
    {"unknown_command", case_unknown_command, false},
    {"fields", case_fields, false},
    {"numbers", case_numbers, false},
    {"group_names", case_group_names, false},
};

int main(int argc, char **argv)
{
    return bad_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
