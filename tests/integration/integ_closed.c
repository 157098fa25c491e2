/* integ_closed: plugin_opt_open_groups false with plugin_opt_admins. Only
 * members publish, subscribe, ack, fetch and see sync entries; only admins
 * (both of "admin, boss") add and remove members, naming them; clients
 * without a username are refused everything. Removing a member takes effect
 * at once, even on a subscription it already holds; adding it back starts it
 * at the head. Admins manage groups without being members. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define WAIT_MS 5000
#define QUIET_MS 500

#define E_NOT_MEMBER "not a member of the group"
#define E_NO_USERNAME "closed groups admit only clients with a username the broker verifies"

static harness_client *connect_as(ts_broker *b, const char *id, const char *user, int version)
{
    harness_client_opts o = {.client_id = id, .username = user, .mqtt_version = version};

    return harness_client_connect_opts(b, &o);
}

static void expect_one_error(harness_client *c, const char *request, const char *command,
                             const char *group, const char *error)
{
    cJSON *resp = harness_request(c, request, WAIT_MS);

    harness_expect_error(harness_response_only(resp), command, group, NULL, error);
    cJSON_Delete(resp);
}

/* An admin's membership change; returns the head of a join (-1 for leave). */
static int64_t manage(harness_client *admin, const char *command, const char *member)
{
    char req[256];
    cJSON *resp;
    const cJSON *e;
    int64_t head = -1;

    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"%s\",\"group\":\"" GROUP "\",\"member\":\"%s\"}]}",
             command, member);
    resp = harness_request(admin, req, WAIT_MS);
    e = harness_response_only(resp);
    harness_expect_ok(e, command, GROUP);
    ASSERTF(strcmp(harness_json_str(e, "member"), member) == 0, "%s names member %s", command,
            harness_json_str(e, "member"));
    if (strcmp(command, "join") == 0)
        head = harness_json_int(e, "head");
    cJSON_Delete(resp);
    return head;
}

/* Whether c's sync lists room1; fills *acked. */
static bool listed(harness_client *c, int64_t *acked)
{
    cJSON *resp =
        harness_request(c, "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}", WAIT_MS);
    bool found = harness_sync_find(harness_response_only(resp), GROUP, NULL, acked, NULL);

    cJSON_Delete(resp);
    return found;
}

/* The next envelope at c, which must be on room1 with id. */
static void expect_envelope(harness_client *c, int64_t id)
{
    harness_msg *m = harness_client_receive(c, WAIT_MS);
    cJSON *env;

    ASSERTF(m != NULL, "%s: no envelope %lld", harness_client_id(c), (long long)id);
    ASSERTF(strcmp(m->topic, TOPIC) == 0, "%s: message on %s: %.300s", harness_client_id(c),
            m->topic, m->payload);
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == id, "%s: got id %lld, expected %lld",
            harness_client_id(c), (long long)harness_json_int(env, "id"), (long long)id);
    cJSON_Delete(env);
    harness_msg_free(m);
}

/* A publish that must be refused: 0x87 for MQTT 5, and an error entry. */
static void expect_publish_refused(harness_client *c, bool v5, const char *topic,
                                   const char *payload, const char *command, const char *error)
{
    int rc = harness_client_publish_bytes(c, topic, payload, strlen(payload), 1, NULL);
    cJSON *resp;

    if (v5)
        ASSERTF(rc == 0x87, "%s: PUBACK reason 0x%02x, expected 0x87", harness_client_id(c),
                (unsigned)rc);
    resp = harness_client_response(c, WAIT_MS);
    harness_expect_error(harness_response_only(resp), command, GROUP, NULL, error);
    cJSON_Delete(resp);
}

static void expect_subscribe_refused(harness_client *c, bool v5, const char *error)
{
    int code = harness_client_try_subscribe(c, TOPIC, 1);
    cJSON *resp;

    ASSERTF(code == (v5 ? 0x87 : 0x80), "%s: SUBACK 0x%02x for %s", harness_client_id(c),
            (unsigned)code, TOPIC);
    resp = harness_client_response(c, WAIT_MS);
    harness_expect_error(harness_response_only(resp), "subscribe", GROUP, NULL, error);
    cJSON_Delete(resp);
}

int main(void)
{
    static const char *const opts[] = {"open_groups false", "admins admin, boss", NULL};
    ts_broker *b;
    harness_client *admin, *boss, *alice, *bob, *eve, *eve5, *anon;
    int64_t acked = -1;

    ts_init("integ_closed");
    b = ts_broker_start_users(opts);
    admin = connect_as(b, "admin-console", "admin", 4);
    boss = connect_as(b, "boss-console", "boss", 4);
    alice = connect_as(b, "alice-phone", "alice", 4);
    bob = connect_as(b, "bob-phone", "bob", 5);
    eve = connect_as(b, "eve-phone", "eve", 4);
    eve5 = connect_as(b, "eve-tablet", "eve", 5);
    anon = connect_as(b, "anon-phone", NULL, 4);

    /* Nobody is a member yet: even subscribing does not join. */
    expect_subscribe_refused(alice, false, E_NOT_MEMBER);
    expect_publish_refused(alice, false, TOPIC, "hello?", "publish", E_NOT_MEMBER);
    ASSERT(!listed(alice, NULL));

    /* Members only through an admin. */
    expect_one_error(alice, "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\"}]}",
                     "join", GROUP, "only an admin may change membership of closed groups");
    ASSERT(manage(admin, "join", "alice") == 0);
    ASSERT(manage(boss, "join", "bob") == 0);
    expect_one_error(
        alice, "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"eve\"}]}",
        "join", GROUP, "only an admin may add or remove another member");
    expect_one_error(alice, "{\"commands\":[{\"command\":\"leave\",\"group\":\"" GROUP "\"}]}",
                     "leave", GROUP, "only an admin may change membership of closed groups");
    ASSERT(listed(alice, &acked) && acked == 0);
    ts_log("admins added alice and bob");

    /* Members use the group; non-members learn nothing of it. */
    harness_client_subscribe(alice, TOPIC, 1);
    harness_client_subscribe(bob, TOPIC, 1);
    ASSERT(harness_client_try_subscribe(eve, "#", 1) == 1); /* allowed, filtered per delivery */
    harness_client_publish(alice, TOPIC, "one", 1);
    expect_envelope(alice, 1);
    expect_envelope(bob, 1);
    harness_ack(bob, GROUP, 1, 1);
    ASSERT(listed(bob, &acked) && acked == 1);
    harness_client_expect_none(eve, QUIET_MS, "no chat message for a non-member subscribed to #");
    ASSERT(!listed(eve, NULL));
    expect_subscribe_refused(eve, false, E_NOT_MEMBER);
    expect_subscribe_refused(eve5, true, E_NOT_MEMBER);
    expect_publish_refused(eve, false, TOPIC, "let me in", "publish", E_NOT_MEMBER);
    expect_publish_refused(eve5, true, TOPIC, "let me in", "publish", E_NOT_MEMBER);
    expect_publish_refused(eve, false, TOPIC "/ack", "1", "ack", E_NOT_MEMBER);
    expect_one_error(eve,
                     "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":0}]}",
                     "fetch", GROUP, E_NOT_MEMBER);
    expect_one_error(eve, "{\"commands\":[{\"command\":\"history\",\"group\":\"" GROUP "\"}]}",
                     "history", GROUP, E_NOT_MEMBER);
    expect_one_error(eve, "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":1}]}",
                     "ack", GROUP, E_NOT_MEMBER);

    /* No username, no access at all. */
    expect_subscribe_refused(anon, false, E_NO_USERNAME);
    expect_publish_refused(anon, false, TOPIC, "hi", "publish", E_NO_USERNAME);
    expect_one_error(anon, "{\"commands\":[{\"command\":\"sync\"}]}", "sync", NULL, E_NO_USERNAME);
    expect_one_error(anon,
                     "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":0}]}",
                     "fetch", GROUP, E_NO_USERNAME);

    /* An admin is not a member by being an admin. */
    expect_publish_refused(admin, false, TOPIC, "admin speaking", "publish", E_NOT_MEMBER);
    ASSERT(!listed(admin, NULL));
    ts_log("non-members and anonymous clients refused");

    /* Removal takes effect at once, on the subscription bob holds too. */
    manage(boss, "leave", "bob");
    ASSERT(!listed(bob, NULL));
    harness_client_publish(alice, TOPIC, "two", 1);
    expect_envelope(alice, 2);
    harness_client_expect_none(bob, QUIET_MS, "no message for a removed member");
    expect_publish_refused(bob, true, TOPIC, "still here?", "publish", E_NOT_MEMBER);
    expect_one_error(bob,
                     "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":0}]}",
                     "fetch", GROUP, E_NOT_MEMBER);
    ts_log("bob removed");

    /* Added back: starts at the head, and his subscription delivers again. */
    harness_client_publish(alice, TOPIC, "three", 1);
    expect_envelope(alice, 3);
    ASSERT(manage(admin, "join", "bob") == 3);
    ASSERT(listed(bob, &acked) && acked == 3);
    harness_client_publish(alice, TOPIC, "four", 1);
    expect_envelope(alice, 4);
    expect_envelope(bob, 4);
    harness_expect_store(bob, GROUP, 4);

    /* eve added by the second admin: now she may. */
    manage(boss, "join", "eve");
    harness_client_subscribe(eve5, TOPIC, 1);
    harness_client_publish(eve5, TOPIC, "eve at last", 1);
    expect_envelope(eve5, 5);
    expect_envelope(alice, 5);
    expect_envelope(bob, 5);
    {
        harness_msg *m = harness_client_receive(eve, WAIT_MS);
        ASSERTF(m != NULL && strcmp(m->topic, TOPIC) == 0,
                "eve's # subscription does not deliver once she is a member");
        harness_msg_free(m);
    }
    ts_log("admins manage membership; members only");

    harness_client_disconnect(anon);
    harness_client_disconnect(eve5);
    harness_client_disconnect(eve);
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    harness_client_disconnect(boss);
    harness_client_disconnect(admin);
    ts_broker_destroy(b);
    return ts_pass();
}
