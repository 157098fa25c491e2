/* integ_bad_input: every bad input of issue 3 gets a clear error and loses
 * nothing. One ctest per kind of bad input (argv[1], see `cases` below); each
 * runs a table of named variants against one broker. For every variant:
 *
 *   - the client that sent it gets exactly the error entries docs/protocol.md
 *     lists, on $CONTROL/chat/v1/response (an MQTT 5 publisher also reason
 *     0x87 in its PUBACK/PUBREC, an MQTT 5 subscriber 0x87 in its SUBACK, an
 *     MQTT 3.1.1 subscriber 0x80);
 *   - it stays connected: its next request is answered, and nothing else
 *     came before that answer;
 *   - another client carries on: a message published meanwhile reaches a
 *     subscriber of the group, with the next id (so the bad input stored and
 *     delivered nothing);
 *   - the store still serves every earlier message: a member fetches ids
 *     1..head and pages back through head..1.
 *
 * argv[2], if given, runs only the variant of that name (for diagnosis);
 * "--list" prints the names of the case's variants. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define WAIT_MS 5000        /* every answer must come within this */
#define FLOOD_BOUND_MS 5000 /* another client's round trip during a flood */
#define MAX_PAYLOAD 65536   /* plugin_opt_max_payload default */
#define SYNC_ONLY "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}"

/* Error strings of docs/protocol.md. */
#define E_MALFORMED "malformed JSON"
#define E_NOT_UTF8_OBJECT "request must be a UTF-8 JSON object"
#define E_NOT_OBJECT "request must be a JSON object"
#define E_COMMANDS_MISSING "commands is missing"
#define E_COMMANDS_ARRAY "commands must be an array"
#define E_EACH_OBJECT "each command must be a JSON object"
#define E_COMMAND_MISSING "command is missing"
#define E_COMMAND_STRING "command must be a string"
#define E_UNKNOWN "unknown command"
#define E_GROUP_MISSING "group is missing"
#define E_GROUP_STRING "group must be a string"
#define E_GROUP_EMPTY "group name is empty"
#define E_GROUP_LONG "group name is longer than 128 bytes"
#define E_GROUP_CONTROL "group name contains a control character"
#define E_GROUP_CHARS "group name contains one of / + # $"
#define E_ID_MISSING "id is missing"
#define E_REPLAY "replay must be true or false"
#define E_MEMBER "member must be a non-empty string of at most 1024 bytes"
#define E_TOO_LARGE "payload is larger than max_payload"
#define E_NEITHER "payload is neither a JSON object nor UTF-8 text"
#define E_CID "cid must be a string of 1 to 64 bytes"
#define E_NOT_MEMBER "not a member of the group"
#define E_NO_USERNAME "closed groups admit only clients with a username"
#define E_NOT_CHAT_TOPIC                                                                           \
    "not a chat topic: publish to chat/<group>, chat/<group>/ack or chat/<group>/read"
#define E_ACK "ack payload must be a decimal message id"
#define E_ONLY_ADMIN_OTHER "only an admin may add or remove another member"
#define E_ONLY_ADMIN_CLOSED "only an admin may change membership of closed groups"
#define E_TOO_MANY "too many commands in one request (at most 1000)"
#define E_RESPONSE_TOO_LARGE "response too large: send fewer fetch or history commands per request"

/* Who sends a variant's bad input. */
enum actor { BOB, BOB5, EVE, EVE5, ANON, ACTORS };
static const char *const actor_names[ACTORS] = {"bob", "bob5", "eve", "eve5", "anon"};

enum kind { REQUEST, PUBLISH, SUBSCRIBE };

/* One expected response entry: error NULL means a success entry. */
typedef struct expect {
    const char *command;
    const char *group;
    const char *cid;
    const char *error;
} expect;

typedef struct variant {
    const char *name;
    enum actor who;
    enum kind kind;
    const char *topic;     /* PUBLISH: the topic; SUBSCRIBE: the filter */
    const char *payload;   /* REQUEST, PUBLISH: the payload */
    size_t len;            /* its bytes; 0: strlen(payload) */
    int qos;               /* PUBLISH: QoS 1 or 2 (0 counts as 1) */
    expect e[4];           /* the entries expected, in order */
    const char *maybe_cid; /* an invalid cid the first entry may echo or leave out */
    int n;                 /* how many */
} variant;

typedef struct fixture {
    harness_broker *b;
    harness_client *c[ACTORS]; /* the senders of bad input (NULL: not in this case) */
    harness_client *alice;     /* member: publishes a message after each variant */
    harness_client *carol;     /* member subscribed to chat/room1: must receive it */
    harness_client *admin;     /* closed groups: the admin */
    bool closed;               /* open_groups false */
    int64_t head;              /* messages stored in room1 */
    int sent;                  /* messages alice sent */
    const char *only;          /* run only this variant */
    int ran;                   /* variants run */
} fixture;

/* ===========================================================================
 * Fixture
 * ========================================================================= */

static harness_client *connect_as(fixture *fx, const char *id, const char *user, int version)
{
    harness_client_opts o = {.client_id = id, .username = user, .mqtt_version = version};

    return harness_client_connect_opts(fx->b, &o);
}

/* Receives the next envelope on chat/room1 at carol, which must be id. */
static bool on_room(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, TOPIC) == 0;
}

static void carol_expects(fixture *fx, int64_t id, const char *body)
{
    harness_msg *m = harness_client_receive_if(fx->carol, on_room, NULL, WAIT_MS);
    cJSON *env;

    ASSERTF(m != NULL, "carol: no message on %s within %d ms (expected id %lld)", TOPIC, WAIT_MS,
            (long long)id);
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == id && strcmp(harness_json_str(env, "body"), body) == 0,
            "carol: expected id %lld \"%s\", got %.300s", (long long)id, body, m->payload);
    cJSON_Delete(env);
    harness_msg_free(m);
}

/* Alice sends one message; carol must get it as the next id. */
static void alice_sends(fixture *fx, const char *label)
{
    char cid[32], body[200];
    cJSON *msg = cJSON_CreateObject();
    char *payload;

    snprintf(body, sizeof body, "alice %d after %s", ++fx->sent, label);
    snprintf(cid, sizeof cid, "alice-%d", fx->sent);
    if (msg == NULL || cJSON_AddStringToObject(msg, "body", body) == NULL ||
        cJSON_AddStringToObject(msg, "cid", cid) == NULL ||
        (payload = cJSON_PrintUnformatted(msg)) == NULL)
        FAILF("out of memory");
    harness_client_publish(fx->alice, TOPIC, payload, 1);
    cJSON_free(payload);
    cJSON_Delete(msg);
    fx->head++;
    carol_expects(fx, fx->head, body);
}

static void join(harness_client *by, const char *member)
{
    char req[256];
    cJSON *resp;

    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"%s\"}]}",
             member);
    resp = harness_request(by, req, WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "join", GROUP);
    cJSON_Delete(resp);
}

/* Starts the broker with opts and the clients; closed: open_groups false,
 * where admin adds the members. */
static void setup(fixture *fx, const char *const *opts, bool closed, bool with_eve)
{
    static const char *const closed_opts[] = {"open_groups false", "admins admin", NULL};

    fx->closed = closed;
    fx->b = harness_broker_start(closed ? closed_opts : opts);
    if (closed) {
        fx->admin = connect_as(fx, "admin", "admin", 4);
        join(fx->admin, "alice");
        join(fx->admin, "carol");
        join(fx->admin, "bob");
        join(fx->admin, "bob5");
    }
    fx->carol = connect_as(fx, "carol", "carol", 4);
    harness_client_subscribe(fx->carol, TOPIC, 1);
    fx->alice = connect_as(fx, "alice", "alice", 4);
    fx->c[BOB] = connect_as(fx, "bob", "bob", 4);
    fx->c[BOB5] = connect_as(fx, "bob5", "bob5", 5);
    if (!closed) {
        join(fx->c[BOB], "bob");
        join(fx->c[BOB5], "bob5");
    }
    if (with_eve) {
        fx->c[EVE] = connect_as(fx, "eve", "eve", 4);
        fx->c[EVE5] = connect_as(fx, "eve5", "eve5", 5);
        fx->c[ANON] = connect_as(fx, "anon", NULL, 4);
    }
    for (int i = 0; i < 3; i++)
        alice_sends(fx, "setup");
    harness_expect_store(fx->c[BOB], GROUP, fx->head);
}

static void teardown(fixture *fx)
{
    for (int i = 0; i < ACTORS; i++)
        if (fx->c[i] != NULL)
            harness_client_disconnect(fx->c[i]);
    harness_client_disconnect(fx->alice);
    harness_client_disconnect(fx->carol);
    if (fx->admin != NULL)
        harness_client_disconnect(fx->admin);
    harness_broker_destroy(fx->b);
}

/* After a variant: the sender is still connected and answered, with
 * nothing before the answer; another client carries on; the store serves
 * every earlier message. */
static void carry_on(fixture *fx, enum actor who, const char *name)
{
    harness_client *c = fx->c[who];
    cJSON *resp;
    const cJSON *entry, *command;

    ASSERTF(!harness_client_is_lost(c), "%s: %s lost its connection", name, actor_names[who]);
    resp = harness_request(c, SYNC_ONLY, WAIT_MS);
    entry = harness_response_only(resp);
    command = cJSON_GetObjectItemCaseSensitive(entry, "command");
    ASSERTF(cJSON_IsString(command) && strcmp(command->valuestring, "sync") == 0,
            "%s: the next response to %s is not the answer to its sync (a second response to the "
            "bad input?)",
            name, actor_names[who]);
    cJSON_Delete(resp);
    harness_client_expect_none(c, 0, "nothing but the answers");
    alice_sends(fx, name);
    harness_expect_store(fx->c[BOB], GROUP, fx->head);
}

static bool selected(fixture *fx, const char *name)
{
    if (fx->only != NULL && strcmp(fx->only, "--list") == 0) {
        printf("%s\n", name);
        return false;
    }
    if (fx->only != NULL && strcmp(fx->only, name) != 0)
        return false;
    fx->ran++;
    harness_log("variant %s", name);
    return true;
}

static void check_entries(const variant *v, const cJSON *resp)
{
    ASSERTF(harness_response_count(resp) == v->n, "%s: %d response entries, expected %d", v->name,
            harness_response_count(resp), v->n);
    for (int i = 0; i < v->n; i++) {
        const cJSON *entry = harness_response_entry(resp, i);
        const cJSON *cid = cJSON_GetObjectItemCaseSensitive(entry, "cid");
        if (i == 0 && v->e[i].error != NULL && v->maybe_cid != NULL && cJSON_IsString(cid) &&
            strcmp(cid->valuestring, v->maybe_cid) == 0)
            harness_expect_error(entry, v->e[i].command, v->e[i].group, v->maybe_cid,
                                 v->e[i].error);
        else if (v->e[i].error != NULL)
            harness_expect_error(entry, v->e[i].command, v->e[i].group, v->e[i].cid, v->e[i].error);
        else
            harness_expect_ok(entry, v->e[i].command, v->e[i].group);
    }
}

static void run(fixture *fx, const variant *v)
{
    harness_client *c = fx->c[v->who];
    size_t len = v->len != 0 ? v->len : (v->payload != NULL ? strlen(v->payload) : 0);
    bool v5 = v->who == BOB5 || v->who == EVE5;
    cJSON *resp = NULL;

    if (!selected(fx, v->name))
        return;
    ASSERTF(c != NULL, "%s: no client %s in this case", v->name, actor_names[v->who]);
    switch (v->kind) {
    case REQUEST:
        resp = harness_request_bytes(c, v->payload, len, WAIT_MS);
        break;
    case PUBLISH: {
        int qos = v->qos == 2 ? 2 : 1;
        int rc = harness_client_publish_bytes(c, v->topic, v->payload, len, qos, NULL);
        if (v5)
            ASSERTF(rc == 0x87, "%s: MQTT 5 %s got reason 0x%02x, expected 0x87 (not authorized)",
                    v->name, qos == 2 ? "PUBREC" : "PUBACK", (unsigned)rc);
        resp = harness_client_response(c, WAIT_MS);
        break;
    }
    case SUBSCRIBE: {
        int code = harness_client_try_subscribe(c, v->topic, 1);
        ASSERTF(code == (v5 ? 0x87 : 0x80), "%s: SUBACK 0x%02x for %s, expected 0x%02x", v->name,
                (unsigned)code, v->topic, v5 ? 0x87u : 0x80u);
        resp = harness_client_response(c, WAIT_MS);
        break;
    }
    }
    check_entries(v, resp);
    cJSON_Delete(resp);
    carry_on(fx, v->who, v->name);
}

/* Shorthands for the common shapes. */
static void request_error(fixture *fx, const char *name, const char *request, const char *command,
                          const char *group, const char *error)
{
    variant v = {.name = name, .who = BOB, .kind = REQUEST, .payload = request, .n = 1};

    v.e[0] = (expect){command, group, NULL, error};
    run(fx, &v);
}

static void request_bytes_error(fixture *fx, const char *name, const char *bytes, size_t len,
                                const char *error)
{
    variant v = {.name = name, .who = BOB, .kind = REQUEST, .payload = bytes, .len = len, .n = 1};

    v.e[0] = (expect){"request", NULL, NULL, error};
    run(fx, &v);
}

static void publish_error(fixture *fx, const char *name, enum actor who, const char *topic,
                          const char *payload, size_t len, int qos, expect e)
{
    variant v = {.name = name,
                 .who = who,
                 .kind = PUBLISH,
                 .topic = topic,
                 .payload = payload,
                 .len = len,
                 .qos = qos,
                 .n = 1};

    v.e[0] = e;
    run(fx, &v);
}

/* A publish with an invalid cid: the entry may echo it as sent, or not. */
static void publish_bad_cid(fixture *fx, const char *name, enum actor who, const char *payload,
                            int qos, const char *cid)
{
    variant v = {.name = name,
                 .who = who,
                 .kind = PUBLISH,
                 .topic = TOPIC,
                 .payload = payload,
                 .qos = qos,
                 .n = 1,
                 .maybe_cid = cid};

    v.e[0] = (expect){"publish", GROUP, NULL, E_CID};
    run(fx, &v);
}

static void subscribe_error(fixture *fx, const char *name, enum actor who, const char *filter,
                            expect e)
{
    variant v = {.name = name, .who = who, .kind = SUBSCRIBE, .topic = filter, .n = 1};

    v.e[0] = e;
    run(fx, &v);
}

static char *repeat(char ch, size_t n)
{
    char *s = malloc(n + 1);

    if (s == NULL)
        FAILF("out of memory");
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

/* ===========================================================================
 * Cases
 * ========================================================================= */

static void case_malformed_json(fixture *fx)
{
    static const char nul_inside[] = "{\"commands\":[]}\0";

    request_error(fx, "truncated", "{\"commands\":[", "request", NULL, E_MALFORMED);
    request_error(fx, "bare word", "hello", "request", NULL, E_MALFORMED);
    request_error(fx, "single quotes", "{'commands':[]}", "request", NULL, E_MALFORMED);
    request_error(fx, "trailing comma", "{\"commands\":[{\"command\":\"sync\"},]}", "request", NULL,
                  E_MALFORMED);
    request_error(fx, "unquoted key", "{commands:[]}", "request", NULL, E_MALFORMED);
    request_error(fx, "trailing garbage",
                  "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]} and more", "request",
                  NULL, E_MALFORMED);
    request_error(fx, "two objects", "{\"commands\":[]}{\"commands\":[]}", "request", NULL,
                  E_MALFORMED);
    request_bytes_error(fx, "empty payload", "", 0, E_NOT_UTF8_OBJECT);
    request_bytes_error(fx, "not UTF-8", "\xff\xfe{}", 4, E_NOT_UTF8_OBJECT);
    request_bytes_error(fx, "NUL byte", nul_inside, sizeof nul_inside - 1, E_NOT_UTF8_OBJECT);
}

static void case_not_object(fixture *fx)
{
    static const char *const values[] = {
        "[]", "[{\"command\":\"sync\"}]", "42", "\"commands\"", "null", "true"};

    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        request_error(fx, values[i], values[i], "request", NULL, E_NOT_OBJECT);
}

static void case_commands(fixture *fx)
{
    variant empty = {
        .name = "empty array", .who = BOB, .kind = REQUEST, .payload = "{\"commands\":[]}", .n = 0};

    request_error(fx, "no commands", "{}", "request", NULL, E_COMMANDS_MISSING);
    request_error(fx, "command instead", "{\"command\":\"sync\"}", "request", NULL,
                  E_COMMANDS_MISSING);
    request_error(fx, "wrong case", "{\"Commands\":[{\"command\":\"sync\"}]}", "request", NULL,
                  E_COMMANDS_MISSING);
    request_error(fx, "object", "{\"commands\":{\"command\":\"sync\"}}", "request", NULL,
                  E_COMMANDS_ARRAY);
    request_error(fx, "string", "{\"commands\":\"sync\"}", "request", NULL, E_COMMANDS_ARRAY);
    request_error(fx, "null", "{\"commands\":null}", "request", NULL, E_COMMANDS_ARRAY);
    request_error(fx, "number", "{\"commands\":1}", "request", NULL, E_COMMANDS_ARRAY);
    run(fx, &empty); /* not an error: no commands, no entries */
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
    request_error(fx, "frobnicate", "{\"commands\":[{\"command\":\"frobnicate\"}]}", "frobnicate",
                  NULL, E_UNKNOWN);
    request_error(fx, "upper case", "{\"commands\":[{\"command\":\"SYNC\"}]}", "SYNC", NULL,
                  E_UNKNOWN);
    request_error(fx, "empty name", "{\"commands\":[{\"command\":\"\"}]}", "", NULL, E_UNKNOWN);
    request_error(fx, "replay is not a request",
                  "{\"commands\":[{\"command\":\"replay\",\"group\":\"" GROUP "\"}]}", "replay",
                  NULL, E_UNKNOWN);
    run(fx, &mixed);
}

static void case_fields(fixture *fx)
{
    char req[2048];
    char *long_member = repeat('m', 1025);

    request_error(fx, "empty command object", "{\"commands\":[{}]}", "unknown", NULL,
                  E_COMMAND_MISSING);
    request_error(fx, "command not an object", "{\"commands\":[42]}", "unknown", NULL,
                  E_EACH_OBJECT);
    request_error(fx, "command a number", "{\"commands\":[{\"command\":7}]}", "unknown", NULL,
                  E_COMMAND_STRING);
    request_error(fx, "join without group", "{\"commands\":[{\"command\":\"join\"}]}", "join", NULL,
                  E_GROUP_MISSING);
    request_error(fx, "fetch without group", "{\"commands\":[{\"command\":\"fetch\"}]}", "fetch",
                  NULL, E_GROUP_MISSING);
    request_error(fx, "leave group number", "{\"commands\":[{\"command\":\"leave\",\"group\":5}]}",
                  "leave", NULL, E_GROUP_STRING);
    request_error(fx, "fetch group null", "{\"commands\":[{\"command\":\"fetch\",\"group\":null}]}",
                  "fetch", NULL, E_GROUP_STRING);
    request_error(fx, "history group array",
                  "{\"commands\":[{\"command\":\"history\",\"group\":[\"" GROUP "\"]}]}", "history",
                  NULL, E_GROUP_STRING);
    request_error(fx, "ack without group", "{\"commands\":[{\"command\":\"ack\",\"id\":1}]}", "ack",
                  NULL, E_GROUP_MISSING);
    request_error(fx, "ack without id",
                  "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\"}]}", "ack", GROUP,
                  E_ID_MISSING);
    request_error(fx, "ack id string",
                  "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":\"3\"}]}",
                  "ack", GROUP, "id must be an integer from 0 to 2^53-1");
    request_error(fx, "sync replay string",
                  "{\"commands\":[{\"command\":\"sync\",\"replay\":\"false\"}]}", "sync", NULL,
                  E_REPLAY);
    request_error(fx, "sync replay number", "{\"commands\":[{\"command\":\"sync\",\"replay\":0}]}",
                  "sync", NULL, E_REPLAY);
    request_error(fx, "join member number",
                  "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":5}]}",
                  "join", GROUP, E_MEMBER);
    request_error(fx, "join member empty",
                  "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"\"}]}",
                  "join", GROUP, E_MEMBER);
    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"leave\",\"group\":\"" GROUP "\",\"member\":\"%s\"}]}",
             long_member);
    request_error(fx, "leave member too long", req, "leave", GROUP, E_MEMBER);
    request_error(fx, "fetch limit string",
                  "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP
                  "\",\"limit\":\"10\"}]}",
                  "fetch", GROUP, "limit must be an integer from 1 to 2^53-1");
    request_error(fx, "fetch after null",
                  "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":null}]}",
                  "fetch", GROUP, "after must be an integer from 0 to 2^53-1");
    request_error(fx, "history before bool",
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
            request_error(fx, name, req, fields[f].command, GROUP, error);
        }
    }
    /* The bounds themselves are accepted. */
    if (selected(fx, "bounds accepted")) {
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
        carry_on(fx, BOB, "bounds accepted");
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
    char *long_group = repeat('g', 129), *max_group = repeat('h', 128);
    char long_topic[256], long_ack[256];

    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        for (size_t k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s %s", commands[k], groups[g].name);
            snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"%s\",\"group\":%s}]}",
                     commands[k], groups[g].json);
            request_error(fx, name, req, commands[k], NULL, groups[g].error);
        }
    }
    snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"history\",\"group\":\"%s\"}]}",
             long_group);
    request_error(fx, "history 129 bytes", req, "history", NULL, E_GROUP_LONG);
    /* 128 bytes is a valid name: the refusal is about membership. */
    snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"history\",\"group\":\"%s\"}]}",
             max_group);
    request_error(fx, "history 128 bytes", req, "history", max_group, E_NOT_MEMBER);
    /* A request is UTF-8 as a whole: a group that is not is refused with it. */
    request_bytes_error(fx, "fetch not UTF-8",
                        "{\"commands\":[{\"command\":\"fetch\",\"group\":\"\xc3\x28\"}]}", 0,
                        E_NOT_UTF8_OBJECT);

    /* Topics. Mosquitto itself refuses topics with + or #, control
     * characters or invalid UTF-8 in a PUBLISH (it disconnects the client
     * before any plugin sees them), so those reach the plugin only in
     * requests, above. */
    snprintf(long_topic, sizeof long_topic, "chat/%s", long_group);
    snprintf(long_ack, sizeof long_ack, "chat/%s/ack", long_group);
    publish_error(fx, "publish chat/ (empty group)", BOB, "chat/", "hello", 0, 1,
                  (expect){"publish", NULL, NULL, E_GROUP_EMPTY});
    publish_error(fx, "publish 129 bytes", BOB, long_topic, "hello", 0, 1,
                  (expect){"publish", NULL, NULL, E_GROUP_LONG});
    publish_error(fx, "publish 129 bytes MQTT 5", BOB5, long_topic, "hello", 0, 1,
                  (expect){"publish", NULL, NULL, E_GROUP_LONG});
    publish_error(fx, "publish dollar", BOB, "chat/a$b", "hello", 0, 1,
                  (expect){"publish", NULL, NULL, E_GROUP_CHARS});
    publish_error(fx, "publish dollar MQTT 5 QoS 2", BOB5, "chat/a$b", "hello", 0, 2,
                  (expect){"publish", NULL, NULL, E_GROUP_CHARS});
    publish_error(fx, "ack dollar", BOB, "chat/a$b/ack", "1", 0, 1,
                  (expect){"ack", NULL, NULL, E_GROUP_CHARS});
    publish_error(fx, "ack 129 bytes", BOB, long_ack, "1", 0, 1,
                  (expect){"ack", NULL, NULL, E_GROUP_LONG});
    publish_error(fx, "deeper topic", BOB, "chat/" GROUP "/x", "hello", 0, 1,
                  (expect){"publish", NULL, NULL, E_NOT_CHAT_TOPIC});
    subscribe_error(fx, "subscribe dollar", BOB, "chat/a$b",
                    (expect){"subscribe", NULL, NULL, E_GROUP_CHARS});
    subscribe_error(fx, "subscribe 129 bytes MQTT 5", BOB5, long_topic,
                    (expect){"subscribe", NULL, NULL, E_GROUP_LONG});
    subscribe_error(fx, "subscribe chat/ (empty group)", BOB, "chat/",
                    (expect){"subscribe", NULL, NULL, E_GROUP_EMPTY});
    free(long_group);
    free(max_group);
}

static void case_payload_size(fixture *fx)
{
    char *over = repeat('x', MAX_PAYLOAD + 1);
    char *json = repeat(' ', MAX_PAYLOAD + 100);
    char *exact = repeat('y', MAX_PAYLOAD);

    publish_error(fx, "text over max_payload", BOB, TOPIC, over, 0, 1,
                  (expect){"publish", GROUP, NULL, E_TOO_LARGE});
    publish_error(fx, "text over max_payload MQTT 5", BOB5, TOPIC, over, 0, 1,
                  (expect){"publish", GROUP, NULL, E_TOO_LARGE});
    publish_error(fx, "text over max_payload MQTT 5 QoS 2", BOB5, TOPIC, over, 0, 2,
                  (expect){"publish", GROUP, NULL, E_TOO_LARGE});
    /* A JSON object with a cid: the entry echoes it (PROTOCOL.md's error
     * entry, and docs/protocol.md's example of this very error). */
    memcpy(json, "{\"cid\":\"big-1\",\"body\":\"", 23);
    memset(json + 23, 'z', MAX_PAYLOAD + 100 - 25);
    memcpy(json + MAX_PAYLOAD + 100 - 2, "\"}", 2);
    publish_error(fx, "JSON over max_payload echoes cid", BOB, TOPIC, json, 0, 1,
                  (expect){"publish", GROUP, "big-1", E_TOO_LARGE});
    /* Exactly max_payload bytes are accepted. */
    if (selected(fx, "exactly max_payload")) {
        harness_client_publish_bytes(fx->c[BOB], TOPIC, exact, MAX_PAYLOAD, 1, NULL);
        fx->head++;
        carol_expects(fx, fx->head, exact);
        carry_on(fx, BOB, "exactly max_payload");
    }
    free(over);
    free(json);
    free(exact);
}

static void case_payload_encoding(fixture *fx)
{
    static const struct {
        const char *name;
        const char *bytes;
        size_t len;
    } bad[] = {
        {"0xff 0xfe", "\xff\xfe", 2},
        {"NUL byte", "abc\0def", 7},
        {"overlong slash", "\xc0\xaf", 2},
        {"surrogate", "\xed\xa0\x80", 3},
        {"truncated sequence", "ok \xe2\x82", 5},
        {"above U+10FFFF", "\xf4\x90\x80\x80", 4},
        {"JSON with a bad byte", "{\"body\":\"\xff\",\"cid\":\"c-1\"}", 25},
    };
    char *cid65 = repeat('c', 65), *cid64 = repeat('d', 64);
    char payload[256], name[128];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        publish_error(fx, bad[i].name, BOB, TOPIC, bad[i].bytes, bad[i].len, 1,
                      (expect){"publish", GROUP, NULL, E_NEITHER});
        snprintf(name, sizeof name, "%s MQTT 5", bad[i].name);
        publish_error(fx, name, BOB5, TOPIC, bad[i].bytes, bad[i].len, 1,
                      (expect){"publish", GROUP, NULL, E_NEITHER});
    }
    publish_error(fx, "cid number", BOB, TOPIC, "{\"cid\":5,\"body\":\"x\"}", 0, 1,
                  (expect){"publish", GROUP, NULL, E_CID});
    /* An invalid cid string may be echoed as sent, or left out. */
    publish_bad_cid(fx, "cid empty", BOB, "{\"cid\":\"\",\"body\":\"x\"}", 1, "");
    snprintf(payload, sizeof payload, "{\"cid\":\"%s\",\"body\":\"x\"}", cid65);
    publish_bad_cid(fx, "cid 65 bytes", BOB5, payload, 2, cid65);

    /* What is accepted: a cid of 64 bytes, JSON that is not an object and
     * the empty payload are text; the fields of an object are kept as sent. */
    if (selected(fx, "accepted neighbours")) {
        static const struct {
            const char *payload;
            const char *body_json; /* the body as the envelope must spell it */
        } ok[] = {
            {"[1]", "\"body\":\"[1]\""},
            {"42", "\"body\":\"42\""},
            {"", "\"body\":\"\""},
            {"{\"body\":\"x\\u0000y\"}", "\"body\":\"x\\u0000y\""},
        };
        snprintf(payload, sizeof payload, "{\"cid\":\"%s\",\"body\":\"sixty-four\"}", cid64);
        harness_client_publish(fx->c[BOB], TOPIC, payload, 1);
        fx->head++;
        carol_expects(fx, fx->head, "sixty-four");
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
            harness_msg *m;
            harness_client_publish_bytes(fx->c[BOB], TOPIC, ok[i].payload, strlen(ok[i].payload), 1,
                                         NULL);
            fx->head++;
            m = harness_client_receive_if(fx->carol, on_room, NULL, WAIT_MS);
            ASSERTF(m != NULL, "carol did not receive the message %s", ok[i].payload);
            ASSERTF(strstr(m->payload, ok[i].body_json) != NULL,
                    "payload %s: the envelope does not carry %s exactly: %.300s", ok[i].payload,
                    ok[i].body_json, m->payload);
            harness_msg_free(m);
        }
        carry_on(fx, BOB, "accepted neighbours");
    }
    free(cid65);
    free(cid64);
}

/* Bob's cursor in room1 according to sync. */
static int64_t bob_acked(fixture *fx, int64_t *head)
{
    cJSON *resp = harness_request(fx->c[BOB], SYNC_ONLY, WAIT_MS);
    int64_t acked = -1;

    ASSERTF(harness_sync_find(harness_response_only(resp), GROUP, head, &acked, NULL),
            "bob's sync does not list %s", GROUP);
    cJSON_Delete(resp);
    return acked;
}

static void case_acks(fixture *fx)
{
    static const char *const bad[] = {
        "abc", "", " ", "1.5", "0x10", "+5", "-1", "1e3", "5 5", "٣", "12345678901234567890"};
    char name[128];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(name, sizeof name, "ack \"%s\"", bad[i]);
        publish_error(fx, name, BOB, TOPIC "/ack", bad[i], strlen(bad[i]), 1,
                      (expect){"ack", GROUP, NULL, E_ACK});
    }
    publish_error(fx, "ack \"abc\" MQTT 5", BOB5, TOPIC "/ack", "abc", 3, 1,
                  (expect){"ack", GROUP, NULL, E_ACK});
    publish_error(fx, "ack of a group not joined", BOB, "chat/elsewhere/ack", "1", 1, 1,
                  (expect){"ack", "elsewhere", NULL, E_NOT_MEMBER});
    request_error(fx, "ack command negative",
                  "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":-1}]}", "ack",
                  GROUP, "id must be an integer from 0 to 2^53-1");

    /* Above the head: taken as the head, not remembered as more. */
    if (selected(fx, "ack above head")) {
        int64_t head = 0, acked;
        cJSON *resp;
        harness_client_publish(fx->c[BOB], TOPIC "/ack", "999999", 1);
        acked = bob_acked(fx, &head);
        ASSERTF(head == fx->head && acked == fx->head,
                "after an ack of 999999: sync says head %lld acked %lld, expected both %lld",
                (long long)head, (long long)acked, (long long)fx->head);
        /* The next message is unread, and fetch from the cursor returns it. */
        alice_sends(fx, "ack above head");
        acked = bob_acked(fx, &head);
        ASSERTF(head == fx->head && acked == fx->head - 1,
                "a new message after an ack above the head: sync says head %lld acked %lld, "
                "expected %lld and %lld (the cursor must be the old head, not 999999)",
                (long long)head, (long long)acked, (long long)fx->head, (long long)fx->head - 1);
        resp = harness_request(fx->c[BOB],
                               "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\"}]}",
                               WAIT_MS);
        {
            const cJSON *e = harness_response_only(resp);
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
            harness_expect_ok(e, "fetch", GROUP);
            ASSERTF(cJSON_GetArraySize(msgs) == 1 &&
                        harness_json_int(cJSON_GetArrayItem(msgs, 0), "id") == fx->head,
                    "fetch from the cursor after an ack above the head does not return just the "
                    "new message %lld",
                    (long long)fx->head);
        }
        cJSON_Delete(resp);
        /* The same through the ack command: the entry says the cursor. */
        resp = harness_request(fx->c[BOB],
                               "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP
                               "\",\"id\":9007199254740991}]}",
                               WAIT_MS);
        harness_expect_ok(harness_response_only(resp), "ack", GROUP);
        ASSERTF(harness_json_int(harness_response_only(resp), "acked") == fx->head,
                "ack command above the head: acked is not the head %lld", (long long)fx->head);
        cJSON_Delete(resp);
        carry_on(fx, BOB, "ack above head");
    }
    /* Never back, and blanks around the number are fine. */
    if (selected(fx, "ack backwards and with a newline")) {
        int64_t head = 0;
        char top[32];
        snprintf(top, sizeof top, "%lld", (long long)fx->head);
        harness_client_publish(fx->c[BOB], TOPIC "/ack", top, 1);
        harness_client_publish(fx->c[BOB], TOPIC "/ack", "1\n", 1);
        ASSERTF(bob_acked(fx, &head) == fx->head, "an ack of 1 moved the cursor back");
        harness_client_expect_none(fx->c[BOB], 200, "no error for an ack of \"1\\n\"");
        carry_on(fx, BOB, "ack backwards and with a newline");
    }
}

static void case_non_member(fixture *fx)
{
    static const char *const no_access[] = {"fetch", "history"};
    char req[256], name[128];

    for (size_t i = 0; i < 2; i++) {
        snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"%s\",\"group\":\"" GROUP "\"}]}",
                 no_access[i]);
        snprintf(name, sizeof name, "eve %s", no_access[i]);
        {
            variant v = {.name = name, .who = EVE, .kind = REQUEST, .payload = req, .n = 1};
            v.e[0] = (expect){no_access[i], GROUP, NULL, E_NOT_MEMBER};
            run(fx, &v);
        }
        snprintf(name, sizeof name, "anon %s", no_access[i]);
        {
            variant v = {.name = name, .who = ANON, .kind = REQUEST, .payload = req, .n = 1};
            v.e[0] = (expect){no_access[i], GROUP, NULL, E_NO_USERNAME};
            run(fx, &v);
        }
    }
    {
        variant v = {.name = "eve ack command",
                     .who = EVE,
                     .kind = REQUEST,
                     .payload =
                         "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":1}]}",
                     .n = 1};
        v.e[0] = (expect){"ack", GROUP, NULL, E_NOT_MEMBER};
        run(fx, &v);
    }
    {
        variant v = {.name = "eve joins herself",
                     .who = EVE,
                     .kind = REQUEST,
                     .payload = "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\"}]}",
                     .n = 1};
        v.e[0] = (expect){"join", GROUP, NULL, E_ONLY_ADMIN_CLOSED};
        run(fx, &v);
    }
    {
        variant v = {.name = "eve removes bob",
                     .who = EVE,
                     .kind = REQUEST,
                     .payload = "{\"commands\":[{\"command\":\"leave\",\"group\":\"" GROUP
                                "\",\"member\":\"bob\"}]}",
                     .n = 1};
        v.e[0] = (expect){"leave", GROUP, NULL, E_ONLY_ADMIN_OTHER};
        run(fx, &v);
    }
    {
        variant v = {.name = "bob (a member) adds eve",
                     .who = BOB,
                     .kind = REQUEST,
                     .payload = "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP
                                "\",\"member\":\"eve\"}]}",
                     .n = 1};
        v.e[0] = (expect){"join", GROUP, NULL, E_ONLY_ADMIN_OTHER};
        run(fx, &v);
    }
    {
        variant v = {
            .name = "anon sync", .who = ANON, .kind = REQUEST, .payload = SYNC_ONLY, .n = 1};
        v.e[0] = (expect){"sync", NULL, NULL, E_NO_USERNAME};
        run(fx, &v);
    }
    publish_error(fx, "eve publishes", EVE, TOPIC, "let me in", 0, 1,
                  (expect){"publish", GROUP, NULL, E_NOT_MEMBER});
    publish_error(fx, "eve publishes MQTT 5 QoS 2", EVE5, TOPIC, "let me in", 0, 2,
                  (expect){"publish", GROUP, NULL, E_NOT_MEMBER});
    publish_error(fx, "eve publishes with a cid", EVE, TOPIC, "{\"cid\":\"e-1\",\"body\":\"hi\"}",
                  0, 1, (expect){"publish", GROUP, "e-1", E_NOT_MEMBER});
    publish_error(fx, "anon publishes", ANON, TOPIC, "let me in", 0, 1,
                  (expect){"publish", GROUP, NULL, E_NO_USERNAME});
    publish_error(fx, "eve acks", EVE, TOPIC "/ack", "1", 0, 1,
                  (expect){"ack", GROUP, NULL, E_NOT_MEMBER});
    subscribe_error(fx, "eve subscribes", EVE, TOPIC,
                    (expect){"subscribe", GROUP, NULL, E_NOT_MEMBER});
    subscribe_error(fx, "eve subscribes MQTT 5", EVE5, TOPIC,
                    (expect){"subscribe", GROUP, NULL, E_NOT_MEMBER});
    subscribe_error(fx, "anon subscribes", ANON, TOPIC,
                    (expect){"subscribe", GROUP, NULL, E_NO_USERNAME});
    /* sync answers a non-member, but lists nothing of the group. */
    if (selected(fx, "eve sync lists nothing")) {
        cJSON *resp = harness_request(fx->c[EVE], SYNC_ONLY, WAIT_MS);
        const cJSON *e = harness_response_only(resp);
        ASSERTF(!harness_sync_find(e, GROUP, NULL, NULL, NULL), "eve's sync lists %s", GROUP);
        ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "groups")) == 0);
        cJSON_Delete(resp);
        carry_on(fx, EVE, "eve sync lists nothing");
    }
}

/* Bob publishes request (without waiting for its PUBACK, whose ticket goes
 * to *t); meanwhile alice publishes a message to the group and carol must
 * receive it. Returns that round trip in ms. */
static int64_t round_trip_during(fixture *fx, const char *request, harness_ticket *t)
{
    int64_t t0;
    int rc = harness_client_publish_async(fx->c[BOB], HARNESS_CONTROL_TOPIC, request, 1, t);

    ASSERTF(rc == 0, "flood publish failed with Paho code %d", rc);
    t0 = harness_now_ms();
    alice_sends(fx, "flood");
    return harness_now_ms() - t0;
}

static char *many_commands(size_t n, const char *command)
{
    size_t each = strlen(command) + 1;
    char *s = malloc(n * each + 32);
    size_t off = 0;

    if (s == NULL)
        FAILF("out of memory");
    off += (size_t)sprintf(s, "{\"commands\":[");
    for (size_t i = 0; i < n; i++)
        off += (size_t)sprintf(s + off, "%s%s", i ? "," : "", command);
    sprintf(s + off, "]}");
    return s;
}

static void case_flood(fixture *fx)
{
    if (selected(fx, "10000 commands")) {
        char *req =
            many_commands(10000, "{\"command\":\"history\",\"group\":\"" GROUP "\",\"limit\":1}");
        harness_ticket t;
        int64_t t0 = harness_now_ms(), rtt, answer_ms;
        cJSON *resp;
        rtt = round_trip_during(fx, req, &t);
        resp = harness_client_response(fx->c[BOB], 30000);
        answer_ms = harness_now_ms() - t0;
        harness_log("10000 commands (%zu bytes): answered in %lld ms; another client's round "
                    "trip meanwhile %lld ms",
                    strlen(req), (long long)answer_ms, (long long)rtt);
        printf("TIMING 10000-command request: answer %lld ms, other client's round trip %lld ms\n",
               (long long)answer_ms, (long long)rtt);
        harness_client_wait_acked(fx->c[BOB], t, WAIT_MS);
        {
            variant v = {.name = "10000 commands", .n = 1};
            v.e[0] = (expect){"request", NULL, NULL, E_TOO_MANY};
            check_entries(&v, resp);
        }
        ASSERTF(rtt <= FLOOD_BOUND_MS, "another client's round trip took %lld ms during the flood",
                (long long)rtt);
        cJSON_Delete(resp);
        free(req);
        carry_on(fx, BOB, "10000 commands");
    }
    if (selected(fx, "1000 commands")) {
        char *req =
            many_commands(1000, "{\"command\":\"history\",\"group\":\"" GROUP "\",\"limit\":1}");
        cJSON *resp = harness_request(fx->c[BOB], req, 30000);
        ASSERTF(harness_response_count(resp) == 1000, "1000 commands got %d entries",
                harness_response_count(resp));
        for (int i = 0; i < 1000; i++) {
            const cJSON *e = harness_response_entry(resp, i);
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
            harness_expect_ok(e, "history", GROUP);
            ASSERT(cJSON_GetArraySize(msgs) == 1 &&
                   harness_json_int(cJSON_GetArrayItem(msgs, 0), "id") == fx->head);
        }
        cJSON_Delete(resp);
        free(req);
        carry_on(fx, BOB, "1000 commands");
    }
    /* 1000 fetches of full pages: the response stops growing before 1 MiB
     * (issue 9, unbounded answers). */
    if (selected(fx, "1000 fat fetches")) {
        char *body = repeat('f', 2000);
        char *msg = malloc(2100), *req;
        harness_ticket t;
        int64_t t0, rtt, answer_ms;
        int ok = 0, refused = 0;
        cJSON *resp;
        if (msg == NULL)
            FAILF("out of memory");
        snprintf(msg, 2100, "{\"body\":\"%s\"}", body);
        for (int i = 0; i < 100; i++) {
            int rc = harness_client_publish_async(fx->c[BOB], "chat/fat", msg, 1, &t);
            ASSERTF(rc == 0, "publish to chat/fat failed with Paho code %d", rc);
        }
        harness_client_wait_acked(fx->c[BOB], t, WAIT_MS);
        req = many_commands(1000, "{\"command\":\"fetch\",\"group\":\"fat\",\"after\":0}");
        t0 = harness_now_ms();
        rtt = round_trip_during(fx, req, &t);
        resp = harness_client_response(fx->c[BOB], 60000);
        answer_ms = harness_now_ms() - t0;
        harness_client_wait_acked(fx->c[BOB], t, WAIT_MS);
        ASSERTF(harness_response_count(resp) == 1000, "1000 fetches got %d entries",
                harness_response_count(resp));
        for (int i = 0; i < 1000; i++) {
            const cJSON *e = harness_response_entry(resp, i);
            if (cJSON_GetObjectItemCaseSensitive(e, "error") == NULL) {
                ASSERTF(refused == 0, "entry %d succeeds after a refused one", i);
                harness_expect_ok(e, "fetch", "fat");
                ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages")) == 100);
                ok++;
            } else {
                harness_expect_error(e, "fetch", "fat", NULL, E_RESPONSE_TOO_LARGE);
                refused++;
            }
        }
        harness_log("1000 fat fetches: %d answered, %d refused (1 MiB), answer in %lld ms; "
                    "another client's round trip meanwhile %lld ms",
                    ok, refused, (long long)answer_ms, (long long)rtt);
        printf("TIMING 1000 fetches of 100 x 2 KB: answer %lld ms (%d pages, %d refused), other "
               "client's round trip %lld ms\n",
               (long long)answer_ms, ok, refused, (long long)rtt);
        ASSERTF(ok >= 1 && ok <= 5 && refused == 1000 - ok,
                "%d fetches of ~200 KB answered before the 1 MiB limit", ok);
        {
            char *text = cJSON_PrintUnformatted(resp);
            size_t len = text ? strlen(text) : 0;
            free(text);
            ASSERTF(len > 0 && len < 1200000, "answer of %zu bytes, over 1 MiB", len);
        }
        ASSERTF(rtt <= FLOOD_BOUND_MS, "another client's round trip took %lld ms during the flood",
                (long long)rtt);
        cJSON_Delete(resp);
        free(req);
        free(msg);
        free(body);
        carry_on(fx, BOB, "1000 fat fetches");
    }
}

/* ===========================================================================
 * main
 * ========================================================================= */

typedef struct test_case {
    const char *name;
    void (*fn)(fixture *fx);
    bool closed;
} test_case;

static const test_case cases[] = {
    {"malformed_json", case_malformed_json, false},
    {"not_object", case_not_object, false},
    {"commands", case_commands, false},
    {"unknown_command", case_unknown_command, false},
    {"fields", case_fields, false},
    {"numbers", case_numbers, false},
    {"group_names", case_group_names, false},
    {"payload_size", case_payload_size, false},
    {"payload_encoding", case_payload_encoding, false},
    {"acks", case_acks, false},
    {"non_member", case_non_member, true},
    {"flood", case_flood, false},
};

int main(int argc, char **argv)
{
    fixture fx;
    char name[128];
    const test_case *tc = NULL;

    for (size_t i = 0; argc > 1 && i < sizeof cases / sizeof cases[0]; i++)
        if (strcmp(argv[1], cases[i].name) == 0)
            tc = &cases[i];
    if (tc == NULL) {
        fprintf(stderr, "usage: %s <case> [variant]; cases:", argv[0]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            fprintf(stderr, " %s", cases[i].name);
        fputc('\n', stderr);
        return 2;
    }
    memset(&fx, 0, sizeof fx);
    fx.only = argc > 2 ? argv[2] : NULL;
    if (fx.only != NULL && strcmp(fx.only, "--list") == 0) {
        tc->fn(&fx); /* prints the variant names, runs none */
        return 0;
    }
    snprintf(name, sizeof name, "integ_bad_%s", tc->name);
    harness_init(name);
    setup(&fx, NULL, tc->closed, tc->closed);
    tc->fn(&fx);
    ASSERTF(fx.ran > 0, "no variant named \"%s\"", fx.only != NULL ? fx.only : "");
    harness_log("%d variant(s) passed", fx.ran);
    teardown(&fx);
    return harness_pass();
}
