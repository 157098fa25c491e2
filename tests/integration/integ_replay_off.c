/* integ_replay_off: with plugin_opt_replay false nothing is pushed. A device
 * that subscribes after missing messages, or sends sync (which would start a
 * catch-up), gets no replay page; sync still reports the unread counts, and
 * the device pulls with fetch (from its cursor by default) and history, acks,
 * and keeps receiving live messages. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define WAIT_MS 5000

static harness_client *connect_as(ts_broker *b, const char *id, const char *user)
{
    harness_client_opts o = {.client_id = id, .username = user};

    return harness_client_connect_opts(b, &o);
}

static void expect_unread(harness_client *c, int64_t head, int64_t acked)
{
    cJSON *resp = harness_request(c, "{\"commands\":[{\"command\":\"sync\"}]}", WAIT_MS);
    int64_t h = -1, a = -1;

    ASSERTF(harness_sync_find(harness_response_only(resp), GROUP, &h, &a, NULL),
            "sync does not list %s", GROUP);
    ASSERTF(h == head && a == acked, "sync: head %lld acked %lld, expected %lld and %lld",
            (long long)h, (long long)a, (long long)head, (long long)acked);
    cJSON_Delete(resp);
}

/* fetch from the device's cursor (no `after`): ids from..from+n-1. */
static void expect_fetch(harness_client *c, const char *req, int64_t from, int n, bool more)
{
    cJSON *resp = harness_request(c, req, WAIT_MS);
    const cJSON *e = harness_response_only(resp);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");

    harness_expect_ok(e, "fetch", GROUP);
    ASSERTF(cJSON_GetArraySize(msgs) == n, "fetch returned %d messages, expected %d",
            cJSON_GetArraySize(msgs), n);
    for (int i = 0; i < n; i++)
        ASSERT(harness_json_int(cJSON_GetArrayItem(msgs, i), "id") == from + i);
    ASSERT(harness_json_bool(e, "more") == more);
    cJSON_Delete(resp);
}

int main(void)
{
    static const char *const opts[] = {"replay false", "page_size 4", NULL};
    ts_broker *b;
    harness_client *alice, *phone, *laptop;
    harness_msg *m;
    char payload[64];

    ts_init("integ_replay_off");
    b = ts_broker_start(opts);
    alice = connect_as(b, "alice", "alice");

    /* bob joins by subscribing, then goes away while alice sends 6. */
    phone = connect_as(b, "bob-phone", "bob");
    harness_client_subscribe(phone, TOPIC, 1);
    harness_client_disconnect(phone);
    for (int i = 1; i <= 6; i++) {
        snprintf(payload, sizeof payload, "missed %d", i);
        harness_client_publish(alice, TOPIC, payload, 1);
    }

    /* Back: subscribing pushes nothing, nor does sync (which asks for a
     * replay by default). */
    phone = connect_as(b, "bob-phone", "bob");
    harness_client_subscribe(phone, TOPIC, 1);
    harness_expect_quiet(phone, "no replay page on subscribe with replay false");
    expect_unread(phone, 6, 0);
    harness_expect_quiet(phone, "no replay page on sync with replay false");
    ts_log("nothing pushed on subscribe or sync");

    /* Pull: fetch from the cursor, page by page; ack; fetch again. */
    expect_fetch(phone, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\"}]}", 1, 4,
                 true);
    expect_fetch(phone,
                 "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":4}]}", 5,
                 2, false);
    harness_ack(phone, GROUP, 4, 1);
    expect_unread(phone, 6, 4);
    expect_fetch(phone, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\"}]}", 5, 2,
                 false);
    harness_ack(phone, GROUP, 6, 1);
    expect_unread(phone, 6, 6);
    harness_expect_quiet(phone, "nothing pushed by acks");

    /* Live messages still flow to subscribers. */
    harness_client_publish(alice, TOPIC, "live one", 1);
    m = harness_client_receive(phone, WAIT_MS);
    ASSERTF(m != NULL && strcmp(m->topic, TOPIC) == 0, "no live message with replay false");
    {
        cJSON *env = harness_json_object(m);
        ASSERT(harness_json_int(env, "id") == 7);
        ASSERT(strcmp(harness_json_str(env, "body"), "live one") == 0);
        cJSON_Delete(env);
    }
    harness_msg_free(m);

    /* Another device of bob: its subscribe pushes nothing either; history
     * serves everything. */
    laptop = connect_as(b, "bob-laptop", "bob");
    harness_client_subscribe(laptop, TOPIC, 1);
    harness_expect_quiet(laptop, "no page for a new device with replay false");
    harness_expect_store(laptop, GROUP, 7);
    ts_log("fetch and history serve all 7 messages");

    harness_client_disconnect(laptop);
    harness_client_disconnect(phone);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
    return ts_pass();
}
