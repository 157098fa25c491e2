/* integ_idempotent: a publish whose (group, from, cid) is already stored is
 * not stored again, and not delivered again (issue 25, item 7): the publish
 * is acknowledged as usual, no subscriber receives it a second time, and
 * the sender gets {"command":"publish","group","cid","id":<the original
 * id>,"duplicate":true} on the response topic. The same cid is published
 * again and again: from the member's other device over MQTT 5 at QoS 2, 1
 * and 0, after a reconnect of the first device, and after a broker restart
 * (with another body, which must not replace the stored one). Receivers
 * (at QoS 1 and 2) each show every id once and never get a duplicate: the
 * next thing each receives after a retry is a fresh message sent after it.
 * A retry of a message that never went out live (no subscriber when it was
 * stored) is delivered live once, to a member who subscribed since with a
 * filter that replays nothing (#). The cid is scoped by sender and by
 * group: another member's same cid, or the same cid in another group, is
 * a new message. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define WAIT_MS 5000
#define MAX_IDS 16
#define ORIGINAL "{\"cid\":\"sam-1\",\"body\":\"hello once\"}"

/* A receiver that shows each id once. */
typedef struct receiver {
    const char *id;
    const char *user;
    int qos;
    harness_client *c;
    char *shown[MAX_IDS + 1]; /* envelope text per id, as first shown */
    int shown_count;          /* distinct ids shown */
    int duplicates;           /* envelopes of ids already shown */
} receiver;

static harness_client *connect_as(ts_broker *b, const char *id, const char *user, int version)
{
    harness_client_opts o = {.client_id = id, .username = user, .mqtt_version = version};

    return harness_client_connect_opts(b, &o);
}

/* Takes every envelope that arrives within ms, until expect more came. */
static void receive(receiver *r, int expect, int ms)
{
    int64_t deadline = ts_now_ms() + ms;

    for (int got = 0, i = 0; got < expect && i < 1000; i++) {
        int64_t left = deadline - ts_now_ms();
        harness_msg *m = harness_client_receive(r->c, left > 0 ? (int)left : 0);
        cJSON *env;
        int64_t id;
        if (m == NULL)
            FAILF("%s received %d of %d envelopes within %d ms", r->id, got, expect, ms);
        ASSERTF(strcmp(m->topic, TOPIC) == 0, "%s: message on %s: %.300s", r->id, m->topic,
                m->payload);
        env = harness_json_object(m);
        id = harness_json_int(env, "id");
        ASSERTF(id >= 1 && id <= MAX_IDS, "%s: id %lld", r->id, (long long)id);
        if (r->shown[id] != NULL) {
            ASSERTF(strcmp(r->shown[id], m->payload) == 0,
                    "%s: a duplicate of id %lld differs from the original:\n  %s\n  %s", r->id,
                    (long long)id, r->shown[id], m->payload);
            r->duplicates++;
        } else {
            r->shown[id] = strdup(m->payload);
            ASSERT(r->shown[id] != NULL);
            r->shown_count++;
        }
        cJSON_Delete(env);
        harness_msg_free(m);
        got++;
    }
}

static void connect_receivers(ts_broker *b, receiver *rs, int n)
{
    for (int i = 0; i < n; i++) {
        rs[i].c = connect_as(b, rs[i].id, rs[i].user, 4);
        harness_client_subscribe(rs[i].c, TOPIC, rs[i].qos);
    }
}

/* The envelope r shows for id, parsed; the caller frees it. */
static cJSON *shown(receiver *r, int64_t id)
{
    cJSON *env;

    ASSERTF(r->shown[id] != NULL, "%s never showed id %lld", r->id, (long long)id);
    env = cJSON_Parse(r->shown[id]);
    ASSERT(env != NULL);
    return env;
}

/* The answer to a retry: the original id, flagged duplicate. */
static void expect_duplicate(harness_client *sender, const char *cid, int64_t id)
{
    harness_expect_duplicate(sender, GROUP, cid, id, WAIT_MS);
}

/* After a retry, a fresh message from sender: each receiver's next
 * envelope must be that one, so nothing came between. */
static void fresh_next(harness_client *sender, receiver *rs, int n, const char *body, int64_t id)
{
    char payload[128];

    snprintf(payload, sizeof(payload), "{\"body\":\"%s\"}", body);
    harness_client_publish(sender, TOPIC, payload, 1);
    for (int i = 0; i < n; i++) {
        int before = rs[i].shown_count;
        receive(&rs[i], 1, WAIT_MS);
        ASSERTF(rs[i].shown_count == before + 1 && rs[i].shown[id] != NULL &&
                    strstr(rs[i].shown[id], body) != NULL,
                "%s: after the retry, the next message was not #%lld (%s)", rs[i].id, (long long)id,
                body);
    }
}

int main(void)
{
    static receiver rs[2] = {{.id = "rita-phone", .user = "rita", .qos = 1},
                             {.id = "rob-phone", .user = "rob", .qos = 2}};
    ts_broker *b;
    harness_client *sam, *sam5, *sue;
    int rc;
    int64_t next = 4;

    ts_init("integ_idempotent");
    b = ts_broker_start(NULL);
    connect_receivers(b, rs, 2);

    /* 1. The original, then two other messages. */
    sam = connect_as(b, "sam-phone", "sam", 4);
    harness_client_publish(sam, TOPIC, ORIGINAL, 1);
    harness_client_publish(sam, TOPIC, "{\"cid\":\"sam-2\",\"body\":\"second\"}", 1);
    harness_client_publish(sam, TOPIC, "no cid", 1);
    for (int i = 0; i < 2; i++)
        receive(&rs[i], 3, WAIT_MS);

    /* 2. Again from sam's other device, MQTT 5, at QoS 2, 1 and 0: the same
     * member, so the same (group, from, cid). Acknowledged (reason 0),
     * answered, delivered to nobody. QoS 2 goes out at the PUBREL, after
     * the message event: the read check stops it there. */
    sam5 = connect_as(b, "sam-laptop", "sam", 5);
    for (int qos = 2; qos >= 0; qos--) {
        char body[32];
        rc = harness_client_publish_bytes(sam5, TOPIC, ORIGINAL, strlen(ORIGINAL), qos, NULL);
        ASSERTF(rc == 0, "the QoS %d retry got reason 0x%02x: a duplicate is accepted", qos,
                (unsigned)rc);
        expect_duplicate(sam5, "sam-1", 1);
        snprintf(body, sizeof(body), "after the QoS %d retry", qos);
        fresh_next(sam5, rs, 2, body, next++);
    }
    harness_client_disconnect(sam5);
    /* ... and from the first device after a reconnect, MQTT 3.1.1. */
    harness_client_disconnect(sam);
    sam = connect_as(b, "sam-phone", "sam", 4);
    harness_client_publish(sam, TOPIC, "{\"cid\":\"sam-2\",\"body\":\"second\"}", 1);
    expect_duplicate(sam, "sam-2", 2);
    fresh_next(sam, rs, 2, "after the reconnect", next++);
    ts_log("retries at QoS 0, 1 and 2 answered as duplicates, delivered to nobody");

    /* Receivers ack what they hold, then the broker restarts. */
    for (int i = 0; i < 2; i++) {
        harness_ack(rs[i].c, GROUP, next - 1, 1);
        harness_client_disconnect(rs[i].c);
    }
    harness_client_disconnect(sam);
    ts_broker_stop(b);
    ts_broker_restart(b);
    connect_receivers(b, rs, 2);
    for (int i = 0; i < 2; i++)
        harness_expect_quiet(rs[i].c, "no page: everything was acked");

    /* 3. After the restart, with another body: the stored one stays, and
     * nobody receives it. */
    sam = connect_as(b, "sam-phone", "sam", 4);
    harness_client_publish(sam, TOPIC, "{\"cid\":\"sam-1\",\"body\":\"hello again?\"}", 1);
    expect_duplicate(sam, "sam-1", 1);
    fresh_next(sam, rs, 2, "after the restart", next++);
    ts_log("retry after a restart answered as a duplicate, delivered to nobody");

    /* 4. A retry of a message that never went out live: rita leaves, sam
     * sends with nobody subscribed, rita comes back on '#' (which replays
     * nothing) and sam's retry reaches her, once. */
    harness_client_disconnect(rs[0].c);
    harness_client_disconnect(rs[1].c);
    harness_client_publish(sam, TOPIC, "{\"cid\":\"sam-3\",\"body\":\"to nobody online\"}", 1);
    rs[0].c = connect_as(b, rs[0].id, rs[0].user, 4);
    harness_client_subscribe(rs[0].c, "#", 1);
    harness_client_publish(sam, TOPIC, "{\"cid\":\"sam-3\",\"body\":\"to nobody online\"}", 1);
    expect_duplicate(sam, "sam-3", next);
    receive(&rs[0], 1, WAIT_MS);
    ASSERTF(rs[0].shown[next] != NULL && strstr(rs[0].shown[next], "to nobody online"),
            "the retry of a message that never went out did not reach rita live");
    next++;
    harness_client_publish(sam, TOPIC, "{\"cid\":\"sam-3\",\"body\":\"to nobody online\"}", 1);
    expect_duplicate(sam, "sam-3", next - 1);
    harness_expect_quiet(rs[0].c, "the second retry went out live again");
    harness_ack(rs[0].c, GROUP, next - 1, 1);
    harness_client_disconnect(rs[0].c);
    connect_receivers(b, rs, 2);
    /* Rob missed it live: it is his by catch-up (his cursor is behind). */
    {
        harness_msg *m = harness_client_receive(rs[1].c, WAIT_MS);
        ASSERTF(m != NULL && strstr(m->payload, "to nobody online") != NULL,
                "rob's catch-up did not bring the message he missed");
        harness_msg_free(m);
    }
    harness_ack(rs[1].c, GROUP, next - 1, 1);
    harness_expect_quiet(rs[0].c, "rita holds everything");
    ts_log("a retry of a message that never went out is delivered live once");

    /* The cid belongs to its sender and its group. */
    sue = connect_as(b, "sue-phone", "sue", 4);
    harness_client_publish(sue, TOPIC, "{\"cid\":\"sam-1\",\"body\":\"sue's own\"}", 1);
    harness_client_publish(sam, "chat/room2", ORIGINAL, 1);
    for (int i = 0; i < 2; i++) {
        receive(&rs[i], 1, WAIT_MS);
        harness_expect_quiet(rs[i].c, "nothing more");
    }

    for (int i = 0; i < 2; i++) {
        cJSON *env = shown(&rs[i], 1);
        ASSERTF(rs[i].duplicates == 0, "%s received %d duplicates", rs[i].id, rs[i].duplicates);
        ASSERT(strcmp(harness_json_str(env, "cid"), "sam-1") == 0);
        ASSERT(strcmp(harness_json_str(env, "from"), "sam") == 0);
        ASSERT(strcmp(harness_json_str(env, "body"), "hello once") == 0);
        cJSON_Delete(env);
        env = shown(&rs[i], next);
        ASSERT(strcmp(harness_json_str(env, "from"), "sue") == 0);
        ASSERT(strcmp(harness_json_str(env, "cid"), "sam-1") == 0);
        cJSON_Delete(env);
    }

    /* One id in the store for sam's cid. */
    harness_expect_store(rs[0].c, GROUP, next);
    {
        cJSON *resp = harness_request(
            rs[0].c, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":0}]}",
            WAIT_MS);
        const cJSON *env;
        int sams = 0;
        cJSON_ArrayForEach(
            env, cJSON_GetObjectItemCaseSensitive(harness_response_only(resp), "messages"))
        {
            const cJSON *cid = cJSON_GetObjectItemCaseSensitive(env, "cid");
            if (cJSON_IsString(cid) && strcmp(cid->valuestring, "sam-1") == 0 &&
                strcmp(harness_json_str(env, "from"), "sam") == 0)
                sams++;
        }
        ASSERTF(sams == 1, "the store holds %d messages of sam with cid sam-1", sams);
        cJSON_Delete(resp);
    }
    {
        cJSON *resp = harness_request(
            sam, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"room2\",\"after\":0}]}",
            WAIT_MS);
        const cJSON *msgs =
            cJSON_GetObjectItemCaseSensitive(harness_response_only(resp), "messages");
        ASSERTF(cJSON_GetArraySize(msgs) == 1 &&
                    harness_json_int(cJSON_GetArrayItem(msgs, 0), "id") == 1,
                "the same cid in room2 is not message 1 of room2");
        cJSON_Delete(resp);
    }

    for (int i = 0; i < 2; i++) {
        harness_client_disconnect(rs[i].c);
        for (int k = 0; k <= MAX_IDS; k++)
            free(rs[i].shown[k]);
    }
    harness_client_disconnect(sue);
    harness_client_disconnect(sam);
    ts_broker_destroy(b);
    return ts_pass();
}
