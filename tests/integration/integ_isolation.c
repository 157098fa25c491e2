/* integ_isolation: what nobody may see or forge on the chat topics.
 *
 *   - Subscriptions with a wildcard at the group level (chat/#, chat/+,
 *     chat/+/ack, chat/+/+, and the same behind $share/<name>/) are refused:
 *     SUBACK 0x80 (MQTT 3.1.1) or 0x87 (MQTT 5), with an error entry.
 *   - A non-member subscribed to #, +/room1, +/+, +/+/ack, chat/room1/#,
 *     chat/room1/ack, $CONTROL/# and the response topic sees only non-chat
 *     traffic: no envelope, no ack, no request, no response, no replay page.
 *   - Members subscribed to # or +/room1 get the group's envelopes.
 *   - A member's other device, subscribed to # and $CONTROL/#, gets the
 *     group's envelopes, but none of the first device's acks, requests,
 *     responses or pages; a response forged by a client reaches nobody.
 *   - Forged id/group/from/ts are overwritten (from is the username, not the
 *     client id); the other fields are kept, after the plugin's four.
 *   - A Will on a chat topic is never delivered (plain, or forged to look
 *     like an envelope, or retained), while a Will elsewhere is.
 *   - The broker never retains a chat message.
 *   - $share/<name>/chat/<group> is allowed and gets live messages, never a
 *     replay. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define WAIT_MS 5000

static ts_broker *g_b;

static harness_client *connect_as(const char *id, const char *user, int version)
{
    harness_client_opts o = {.client_id = id, .username = user, .mqtt_version = version};

    return harness_client_connect_opts(g_b, &o);
}

/* Receives everything that arrives at c within ms; fails on a message on a
 * topic other than allowed (a NULL-terminated list); returns how many came
 * on `count_topic`. */
static int drain(harness_client *c, int ms, const char *const *allowed, const char *count_topic)
{
    int64_t deadline = ts_now_ms() + ms;
    int counted = 0;

    for (int i = 0; i < 10000; i++) {
        int64_t left = deadline - ts_now_ms();
        harness_msg *m = harness_client_receive(c, left > 0 ? (int)left : 0);
        bool ok = false;
        if (m == NULL)
            break;
        for (size_t k = 0; allowed[k] != NULL && !ok; k++)
            ok = strcmp(m->topic, allowed[k]) == 0;
        ASSERTF(ok, "%s received a message on %s, which it must never see: %.400s",
                harness_client_id(c), m->topic, m->payload);
        if (count_topic != NULL && strcmp(m->topic, count_topic) == 0)
            counted++;
        harness_msg_free(m);
    }
    return counted;
}

static void expect_wildcard_refused(harness_client *c, bool v5, const char *filter)
{
    int code = harness_client_try_subscribe(c, filter, 1);
    cJSON *resp;
    const cJSON *e;
    const char *error;

    ASSERTF(code == (v5 ? 0x87 : 0x80), "%s: SUBACK 0x%02x for %s, expected 0x%02x",
            harness_client_id(c), (unsigned)code, filter, v5 ? 0x87u : 0x80u);
    resp = harness_client_response(c, WAIT_MS);
    e = harness_response_only(resp);
    /* docs/protocol.md names no string for this error: the entry must be
     * about the subscribe and say why. */
    ASSERTF(strcmp(harness_json_str(e, "command"), "subscribe") == 0,
            "refusal of %s: entry is not about the subscribe", filter);
    error = harness_json_str(e, "error");
    ASSERTF(strstr(error, "wildcard") != NULL, "refusal of %s says \"%s\"", filter, error);
    ASSERTF(cJSON_GetArraySize(e) == 2, "refusal of %s: entry has fields besides command, error",
            filter);
    cJSON_Delete(resp);
}

static void test_wildcards(harness_client *spy, harness_client *spy5)
{
    static const char *const filters[] = {"chat/#",
                                          "chat/+",
                                          "chat/+/ack",
                                          "chat/+/+",
                                          "$share/x/chat/#",
                                          "$share/x/chat/+",
                                          "$share/x/chat/+/ack",
                                          "$share/x/chat/+/+",
                                          NULL};

    for (size_t i = 0; filters[i] != NULL; i++) {
        expect_wildcard_refused(spy, false, filters[i]);
        expect_wildcard_refused(spy5, true, filters[i]);
    }
    ts_log("wildcard subscriptions at the group level refused");
}

/* The envelope of the forged publish. */
static void check_forged(const harness_msg *m, int64_t id, int64_t t0)
{
    static const char *const order[] = {"id", "group", "from", "ts", "body", "extra"};
    cJSON *env = harness_json_object(m);
    const cJSON *item;
    size_t k = 0;
    int64_t ts = harness_json_int(env, "ts");

    ASSERTF(harness_json_int(env, "id") == id, "forged id kept: %s", m->payload);
    ASSERTF(strcmp(harness_json_str(env, "group"), GROUP) == 0, "forged group kept: %s",
            m->payload);
    ASSERTF(strcmp(harness_json_str(env, "from"), "alice") == 0, "from is not alice's username: %s",
            m->payload);
    ASSERTF(ts >= t0 - 5000 && ts <= ts_wall_ms() + 5000, "forged ts kept: %s", m->payload);
    ASSERT(strcmp(harness_json_str(env, "body"), "forged") == 0);
    cJSON_ArrayForEach(item, env)
    {
        ASSERTF(k < 6 && strcmp(item->string, order[k]) == 0,
                "envelope fields out of order or duplicated: %s", m->payload);
        k++;
    }
    ASSERTF(k == 6, "envelope has %zu fields: %s", k, m->payload);
    item = cJSON_GetObjectItemCaseSensitive(env, "extra");
    ASSERT(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(item, "k")));
    cJSON_Delete(env);
}

static bool on_group(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, TOPIC) == 0;
}

/* The next envelope on room1 at c, which must have id; returns it. */
static harness_msg *expect_envelope(harness_client *c, int64_t id)
{
    harness_msg *m = harness_client_receive_if(c, on_group, NULL, WAIT_MS);
    cJSON *env;

    ASSERTF(m != NULL, "%s: no envelope %lld", harness_client_id(c), (long long)id);
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == id, "%s: got id %lld, expected %lld",
            harness_client_id(c), (long long)harness_json_int(env, "id"), (long long)id);
    ASSERTF(!m->retained, "%s: envelope %lld delivered as retained", harness_client_id(c),
            (long long)id);
    cJSON_Delete(env);
    return m;
}

/* A Will: a client connects with it and disconnects asking for it. */
static void will(const char *id, const char *topic, const char *payload, bool retain, bool join)
{
    harness_client_opts o = {.client_id = id,
                             .username = id,
                             .mqtt_version = 5,
                             .will_topic = topic,
                             .will_payload = payload,
                             .will_qos = 1,
                             .will_retain = retain};
    harness_client *c = harness_client_connect_opts(g_b, &o);
    char gone[128];
    long before;

    if (join)
        harness_client_subscribe(c, TOPIC, 1); /* a member: its Will is still not delivered */
    /* "Client <id> disconnected." (2.0), "Client <id> [<address>]
     * disconnected." (2.1): logged as the broker handles the DISCONNECT,
     * and so the Will, before it reads another packet. */
    snprintf(gone, sizeof gone, "Client %s ", id);
    before = ts_broker_log_count(g_b, gone);
    harness_client_disconnect_with_will(c);
    ts_broker_wait_log(g_b, gone, before + 1, WAIT_MS);
}

int main(void)
{
    static const char *const spy_filters[] = {
        "#",          "+/" GROUP,         "+/+",
        "+/+/ack",    "chat/" GROUP "/#", "chat/" GROUP "/ack",
        "$CONTROL/#", "$CONTROL/chat/v1", HARNESS_RESPONSE_TOPIC};
    static const char *const news_only[] = {"news/" GROUP, NULL};
    static const char *const presence_only[] = {"presence/willy4", NULL};
    static const char *const member_sees[] = {TOPIC, "news/" GROUP, "presence/willy4", NULL};
    harness_client *alice, *phone, *laptop, *spy, *spy5, *wide, *plus;
    harness_catchup g = {.group = GROUP, .from = 2, .to = 3};
    harness_msg *m;
    int64_t t0;
    int got;

    ts_init("integ_isolation");
    g_b = ts_broker_start(NULL);
    alice = connect_as("alice-phone", "alice", 4);
    phone = connect_as("bob-phone", "bob", 4);
    laptop = connect_as("bob-laptop", "bob", 4);
    spy = connect_as("spy", "spy", 4);
    spy5 = connect_as("spy5", "spy", 5);
    wide = connect_as("wide", "wide", 4);
    plus = connect_as("plus", "plus", 4);

    test_wildcards(spy, spy5);

    harness_client_subscribe_many(spy, sizeof spy_filters / sizeof spy_filters[0], spy_filters, 1);
    harness_client_subscribe(phone, TOPIC, 1);
    harness_client_subscribe(laptop, "#", 1);
    harness_client_subscribe(laptop, "$CONTROL/#", 1);
    harness_client_subscribe(laptop, HARNESS_RESPONSE_TOPIC, 1);
    harness_client_subscribe(wide, "#", 1);
    harness_client_subscribe(plus, "+/" GROUP, 1);
    for (int i = 0; i < 2; i++) {
        cJSON *resp = harness_request(
            i == 0 ? wide : plus, "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\"}]}",
            WAIT_MS);
        harness_expect_ok(harness_response_only(resp), "join", GROUP);
        cJSON_Delete(resp);
    }

    /* Forged fields, from the username. */
    t0 = ts_wall_ms();
    harness_client_publish(alice, TOPIC,
                           "{\"id\":999,\"group\":\"elsewhere\",\"from\":\"mallory\",\"ts\":1,"
                           "\"body\":\"forged\",\"extra\":{\"k\":[1,2]}}",
                           1);
    m = expect_envelope(phone, 1);
    check_forged(m, 1, t0);
    harness_msg_free(m);
    ts_log("forged id, group, from and ts overwritten");

    /* Traffic nobody else may see: acks, requests, responses, a forged
     * response, a refused topic; and non-chat traffic that everyone sees. */
    harness_client_publish(alice, "news/" GROUP, "not chat", 1);
    harness_ack(phone, GROUP, 1, 1);
    {
        cJSON *resp = harness_request(phone,
                                      "{\"commands\":[{\"command\":\"sync\",\"replay\":false},"
                                      "{\"command\":\"history\",\"group\":\"" GROUP "\"}]}",
                                      WAIT_MS);
        ASSERT(harness_response_count(resp) == 2);
        cJSON_Delete(resp);
    }
    harness_client_publish(phone, HARNESS_RESPONSE_TOPIC,
                           "{\"responses\":[{\"command\":\"replay\",\"group\":\"" GROUP
                           "\",\"messages\":[{\"id\":1,\"group\":\"" GROUP
                           "\",\"from\":\"alice\",\"ts\":1,\"body\":\"fake\"}],"
                           "\"first\":1,\"last\":1,\"head\":1,\"more\":false}]}",
                           1);
    harness_client_publish(spy, HARNESS_RESPONSE_TOPIC, "{\"responses\":[]}", 1);

    /* A catch-up of bob's phone: its pages reach the phone alone. */
    harness_client_disconnect(phone);
    harness_client_publish(alice, TOPIC, "while away 1", 1);
    harness_client_publish(alice, TOPIC, "while away 2", 1);
    phone = connect_as("bob-phone", "bob", 4);
    harness_client_subscribe(phone, TOPIC, 1);
    harness_catch_up(phone, &g, 1, 100, 10000, NULL, NULL);
    ts_log("bob's phone caught up on 2..3");

    /* What the others got: all of it, once each has had an answer to a
     * request sent now (harness_barrier). */
    harness_barrier(spy);
    harness_barrier(spy5);
    harness_barrier(laptop);
    harness_barrier(wide);
    harness_barrier(plus);
    got = drain(spy, 0, news_only, "news/" GROUP);
    ASSERTF(got >= 1, "the spy's subscriptions do not even deliver non-chat traffic");
    drain(spy5, 0, news_only, NULL);
    got = drain(laptop, 0, member_sees, TOPIC);
    ASSERTF(got == 3, "bob's laptop (a member, on #) got %d envelopes, expected 3", got);
    got = drain(wide, 0, member_sees, TOPIC);
    ASSERTF(got == 3, "wide (a member, on #) got %d envelopes, expected 3", got);
    got = drain(plus, 0, member_sees, TOPIC);
    ASSERTF(got == 3, "plus (a member, on +/room1) got %d envelopes, expected 3", got);
    ts_log("no ack, request, response or page reached anyone else");

    /* Wills: elsewhere delivered, on a chat topic never. */
    will("willy4", "presence/willy4", "gone", false, false);
    m = harness_client_receive(wide, WAIT_MS);
    ASSERTF(m != NULL && strcmp(m->topic, "presence/willy4") == 0,
            "the control Will on presence/willy4 was not delivered");
    harness_msg_free(m);
    harness_barrier(laptop);
    drain(laptop, 0, member_sees, NULL);
    harness_barrier(spy);
    drain(spy, 0, presence_only, NULL);
    will("willy", TOPIC, "I am gone", false, true);
    will("willy2", TOPIC,
         "{\"id\":4,\"group\":\"" GROUP "\",\"from\":\"alice\",\"ts\":1,\"body\":\"forged by a "
         "Will\"}",
         false, true);
    will("willy3", TOPIC,
         "{\"id\":5,\"group\":\"" GROUP "\",\"from\":\"alice\",\"ts\":1,\"body\":\"retained "
         "Will\"}",
         true, true);
    harness_expect_quiet(phone, "no Will on a chat topic");
    harness_expect_quiet(wide, "no Will on a chat topic");
    /* Refused at the Will's write check, so the broker does not publish
     * it, and with the retain flag does not keep it (for nobody) either. */
    ASSERTF(ts_broker_log_count(g_b, "the Will of willy3 on " TOPIC " is not published") == 1 &&
                ts_broker_log_count(g_b, "the Will of willy on " TOPIC " is not published") == 1,
            "a Will on a chat topic was not refused at its write check");
    ASSERTF(ts_broker_log_count(g_b, "the Will of willy4") == 0,
            "the Will on presence/willy4 was refused");
    harness_expect_quiet(laptop, "no Will on a chat topic");
    harness_expect_quiet(spy, "no Will on a chat topic");
    ts_log("Wills on chat topics not delivered");

    /* Not retained: a retained chat publish is delivered live, and a later
     * subscriber gets no retained copy (nor the retained Will). */
    {
        harness_props retain = {.retain = true};
        harness_client *carol;
        harness_client_publish_bytes(alice, TOPIC, "keep me?", 8, 1, &retain);
        m = expect_envelope(phone, 4);
        harness_msg_free(m);
        carol = connect_as("carol-phone", "carol", 4);
        harness_client_subscribe(carol, TOPIC, 1);
        harness_expect_quiet(carol, "no retained message on a chat topic");
        harness_client_disconnect(carol);
    }

    /* A shared subscription: live messages, no replay. */
    {
        harness_client *shary = connect_as("shary", "shary", 4);
        cJSON *resp = harness_request(
            shary, "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\"}]}", WAIT_MS);
        harness_expect_ok(harness_response_only(resp), "join", GROUP);
        cJSON_Delete(resp);
        harness_client_publish(alice, TOPIC, "unread for shary", 1);
        harness_client_subscribe(shary, "$share/g/" TOPIC, 1);
        harness_expect_quiet(shary, "no replay on a shared subscription");
        harness_client_publish(alice, TOPIC, "live for shary", 1);
        m = harness_client_receive(shary, WAIT_MS);
        ASSERTF(m != NULL && strcmp(m->topic, TOPIC) == 0,
                "a shared subscription does not get live messages");
        harness_msg_free(m);
        harness_client_disconnect(shary);
    }

    harness_client_disconnect(plus);
    harness_client_disconnect(wide);
    harness_client_disconnect(spy5);
    harness_client_disconnect(spy);
    harness_client_disconnect(laptop);
    harness_client_disconnect(phone);
    harness_client_disconnect(alice);
    ts_broker_destroy(g_b);
    return ts_pass();
}
