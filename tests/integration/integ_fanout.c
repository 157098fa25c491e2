/* integ_fanout: three subscribers (QoS 0, 1, 2) receive every message of one
 * sender publishing at QoS 0, 1 and 2 mixed, as envelopes with ids exactly
 * 1..N, each once, increasing within each QoS level, `from` the sender's
 * client id whatever the payload claimed. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 300 /* messages sent */
#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define SENDER "fanout-sender"
#define RECEIVE_MS 30000 /* all N must arrive within this */

/* What a subscriber saw. */
typedef struct sub {
    const char *id; /* client id */
    int qos;        /* subscription QoS */
    harness_client *c;
    int count;          /* envelopes received */
    int k_of_id[N + 1]; /* message number k carried by envelope id, 0 if not seen */
    int64_t last_id[3]; /* highest id seen per publish QoS (k % 3) */
} sub;

/* Message k is published at QoS k % 3; every fifth is plain text, the rest a
 * JSON object that tries to forge the plugin's fields. */
static int qos_of(int k)
{
    return k % 3;
}

static bool plain(int k)
{
    return k % 5 == 0;
}

static void payload_of(int k, char *buf, size_t size)
{
    if (plain(k))
        snprintf(buf, size, "plain text number %d", k);
    else
        snprintf(buf, size,
                 "{\"body\":\"json number %d\",\"n\":%d,\"from\":\"mallory\",\"id\":999999,"
                 "\"group\":\"elsewhere\",\"ts\":1}",
                 k, k);
}

/* The message number an envelope carries, checking its body. */
static int number_of(const cJSON *env)
{
    const char *body = harness_json_str(env, "body");
    char expect[128];
    int k;

    if (cJSON_GetObjectItemCaseSensitive(env, "n") != NULL) {
        k = (int)harness_json_int(env, "n");
        ASSERTF(k >= 1 && k <= N && !plain(k), "bad n %d", k);
        snprintf(expect, sizeof expect, "json number %d", k);
    } else {
        ASSERTF(sscanf(body, "plain text number %d", &k) == 1, "unexpected body \"%s\"", body);
        ASSERTF(k >= 1 && k <= N && plain(k), "bad plain message number %d", k);
        snprintf(expect, sizeof expect, "plain text number %d", k);
    }
    ASSERTF(strcmp(body, expect) == 0, "body \"%s\", expected \"%s\"", body, expect);
    return k;
}

static void take(sub *s, harness_msg *m, int64_t t_start)
{
    cJSON *env;
    int64_t id, ts;
    int k;

    ASSERTF(strcmp(m->topic, TOPIC) == 0, "%s: unexpected message on %s: %.300s", s->id, m->topic,
            m->payload);
    env = harness_json_object(m);
    id = harness_json_int(env, "id");
    ASSERTF(id >= 1 && id <= N, "%s: id %lld outside 1..%d: %s", s->id, (long long)id, N,
            m->payload);
    ASSERTF(s->k_of_id[id] == 0, "%s: id %lld received twice: %s", s->id, (long long)id,
            m->payload);
    ASSERTF(strcmp(harness_json_str(env, "group"), GROUP) == 0, "%s: wrong group: %s", s->id,
            m->payload);
    ASSERTF(strcmp(harness_json_str(env, "from"), SENDER) == 0,
            "%s: `from` is not the sender's client id: %s", s->id, m->payload);
    ts = harness_json_int(env, "ts");
    ASSERTF(ts >= t_start - 5000 && ts <= ts_wall_ms() + 5000,
            "%s: ts %lld is not the time of sending: %s", s->id, (long long)ts, m->payload);
    k = number_of(env);
    ASSERTF(m->qos <= s->qos && m->qos <= qos_of(k), "%s: delivered at QoS %d: %s", s->id, m->qos,
            m->payload);
    ASSERTF(id > s->last_id[qos_of(k)],
            "%s: id %lld (QoS %d) after id %lld of the same QoS: out of order", s->id,
            (long long)id, qos_of(k), (long long)s->last_id[qos_of(k)]);
    s->last_id[qos_of(k)] = id;
    s->k_of_id[id] = k;
    s->count++;
    cJSON_Delete(env);
}

int main(void)
{
    static sub subs[3] = {{.id = "fanout-sub-q0", .qos = 0},
                          {.id = "fanout-sub-q1", .qos = 1},
                          {.id = "fanout-sub-q2", .qos = 2}};
    harness_ticket tickets[N + 1];
    ts_broker *b;
    harness_client *snd;
    int64_t t_start, deadline;
    char payload[256];

    ts_init("integ_fanout");
    b = ts_broker_start(NULL);
    for (int i = 0; i < 3; i++) {
        subs[i].c = harness_client_connect(b, subs[i].id, NULL);
        harness_client_subscribe(subs[i].c, TOPIC, subs[i].qos);
    }
    /* The group is empty: joining it must not bring a page. */
    for (int i = 0; i < 3; i++)
        harness_expect_quiet(subs[i].c, "nothing before the first send");

    snd = harness_client_connect(b, SENDER, NULL);
    t_start = ts_wall_ms();
    for (int k = 1; k <= N; k++) {
        int rc;
        payload_of(k, payload, sizeof payload);
        rc = harness_client_publish_async(snd, TOPIC, payload, qos_of(k), &tickets[k]);
        ASSERTF(rc == 0, "publish %d failed with Paho code %d", k, rc);
    }
    for (int k = 1; k <= N; k++)
        harness_client_wait_acked(snd, tickets[k], 10000);
    ts_log("sent %d messages at QoS 0/1/2 mixed", N);

    deadline = ts_now_ms() + RECEIVE_MS;
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 10 * N && subs[i].count < N; j++) {
            int64_t left = deadline - ts_now_ms();
            harness_msg *m = harness_client_receive(subs[i].c, left > 0 ? (int)left : 0);
            ASSERTF(m != NULL, "%s received %d of %d envelopes within %d ms", subs[i].id,
                    subs[i].count, N, RECEIVE_MS);
            take(&subs[i], m, t_start);
            harness_msg_free(m);
        }
        ASSERT(subs[i].count == N);
        ts_log("%s (QoS %d) received all %d envelopes", subs[i].id, subs[i].qos, N);
    }
    for (int i = 0; i < 3; i++)
        harness_expect_quiet(subs[i].c, "no envelope beyond N");

    /* Ids are 1..N each once (count == N with no duplicate and none out of
     * range); every subscriber saw the same message under the same id, and
     * every message number under exactly one id. */
    {
        static int seen_k[N + 1];
        for (int64_t id = 1; id <= N; id++) {
            int k = subs[0].k_of_id[id];
            ASSERTF(k != 0, "id %lld never received", (long long)id);
            ASSERTF(subs[1].k_of_id[id] == k && subs[2].k_of_id[id] == k,
                    "id %lld carries messages %d/%d/%d at the three subscribers", (long long)id, k,
                    subs[1].k_of_id[id], subs[2].k_of_id[id]);
            ASSERTF(seen_k[k] == 0, "message %d stored twice (ids %d and %lld)", k, seen_k[k],
                    (long long)id);
            seen_k[k] = (int)id;
        }
    }

    harness_client_disconnect(snd);
    for (int i = 0; i < 3; i++)
        harness_client_disconnect(subs[i].c);
    ts_broker_destroy(b);
    return ts_pass();
}
