/* integ_one_copy: the store holds one copy per message, not one per member.
 * The same messages are sent to a group with 1 member device and, on a fresh
 * broker, with 50; with the brokers stopped (so that LevelDB has closed its
 * files) the two stores' sizes differ by at most 10%. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 1000        /* messages sent */
#define BODY 400      /* bytes of body each: pseudo-random, so not compressible */
#define MANY 50       /* member devices in the second run */
#define PAGE_SIZE 100 /* PROTOCOL.md default */
#define GROUP "big"
#define TOPIC "chat/" GROUP
#define SENDER "one-copy-sender"
#define CATCHUP_MS 30000

/* The body of message k: the same in both runs. */
static void body_of(int k, char *buf)
{
    uint32_t x = 2654435761u * (uint32_t)k + 12345u;

    for (int i = 0; i < BODY; i++) {
        x = x * 1664525u + 1013904223u;
        buf[i] = (char)('a' + (x >> 24) % 26);
    }
    buf[BODY] = '\0';
}

static void check_envelope(void *arg, const char *group, const cJSON *env)
{
    char body[BODY + 1];
    int64_t id = harness_json_int(env, "id");

    (void)arg;
    (void)group;
    body_of((int)id, body);
    ASSERTF(strcmp(harness_json_str(env, "body"), body) == 0, "envelope %lld has another body",
            (long long)id);
}

/* Runs one broker with `members` member devices, sends the N messages and
 * returns the size of the store once the broker has stopped. */
static uint64_t store_size(int members)
{
    static harness_ticket tickets[N + 1];
    char id[32], payload[BODY + 64], body[BODY + 1];
    harness_catchup g = {.group = GROUP, .from = 1, .to = N};
    ts_broker *b = ts_broker_start(NULL);
    harness_client *c;
    uint64_t bytes;

    for (int i = 0; i < members; i++) {
        snprintf(id, sizeof id, "member-%02d", i);
        c = harness_client_connect(b, id, NULL);
        harness_client_subscribe(c, TOPIC, 1);
        harness_client_disconnect(c);
    }
    c = harness_client_connect(b, SENDER, NULL);
    for (int k = 1; k <= N; k++) {
        int rc;
        body_of(k, body);
        snprintf(payload, sizeof payload, "{\"body\":\"%s\",\"n\":%d}", body, k);
        rc = harness_client_publish_async(c, TOPIC, payload, 1, &tickets[k]);
        ASSERTF(rc == 0, "publish %d failed with Paho code %d", k, rc);
    }
    for (int k = 1; k <= N; k++)
        harness_client_wait_acked(c, tickets[k], 10000);
    harness_client_disconnect(c);

    /* The members are real members: the last one catches up on all N. */
    snprintf(id, sizeof id, "member-%02d", members - 1);
    c = harness_client_connect(b, id, NULL);
    harness_client_subscribe(c, TOPIC, 1);
    harness_catch_up(c, &g, 1, PAGE_SIZE, CATCHUP_MS, check_envelope, NULL);
    harness_client_disconnect(c);

    ts_broker_stop(b);
    bytes = ts_dir_bytes(ts_broker_db_path(b));
    ts_log("%d member device(s): store of %llu bytes after %d messages of %d bytes", members,
           (unsigned long long)bytes, N, BODY);
    ts_broker_destroy(b);
    return bytes;
}

int main(void)
{
    uint64_t one, many;

    ts_init("integ_one_copy");
    one = store_size(1);
    many = store_size(MANY);
    ASSERTF(one >= (uint64_t)N * BODY, "the store (%llu bytes) is smaller than the bodies sent",
            (unsigned long long)one);
    ASSERTF(many * 10 <= one * 11 && many * 10 >= one * 9,
            "store of %llu bytes with %d members, %llu with 1: more than 10%% apart",
            (unsigned long long)many, MANY, (unsigned long long)one);
    ts_log("store size with %d members is %.1f%% of the size with 1", MANY,
           100.0 * (double)many / (double)one);
    return ts_pass();
}
