/* integ_restart: a device's cursor survives a broker restart. After a full
 * catch-up with acks and a restart on the same store, the device gets no page
 * when it subscribes again; messages sent later are replayed from exactly
 * where it left off. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 500
#define LATER 5
#define PAGE_SIZE 100 /* PROTOCOL.md default */
#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define DEVICE "restart-device"
#define SENDER "restart-sender"
#define CATCHUP_MS 30000

static void send_range(ts_broker *b, int from, int to)
{
    static harness_ticket tickets[N + LATER + 1];
    harness_client *snd = harness_client_connect(b, SENDER, NULL);
    char payload[96];

    for (int k = from; k <= to; k++) {
        int rc;
        snprintf(payload, sizeof payload, "{\"body\":\"restart message %d\",\"n\":%d}", k, k);
        rc = harness_client_publish_async(snd, TOPIC, payload, 1, &tickets[k]);
        ASSERTF(rc == 0, "publish %d failed with Paho code %d", k, rc);
    }
    for (int k = from; k <= to; k++)
        harness_client_wait_acked(snd, tickets[k], 10000);
    harness_client_disconnect(snd);
}

static void check_envelope(void *arg, const char *group, const cJSON *env)
{
    (void)arg;
    (void)group;
    ASSERTF(harness_json_int(env, "n") == harness_json_int(env, "id"),
            "envelope %lld carries n=%lld", (long long)harness_json_int(env, "id"),
            (long long)harness_json_int(env, "n"));
}

int main(void)
{
    ts_broker *b;
    harness_client *dev;
    harness_catchup g = {.group = GROUP, .from = 1, .to = N};

    ts_init("integ_restart");
    b = ts_broker_start(NULL);

    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_client_disconnect(dev);
    send_range(b, 1, N);

    /* Full catch-up; harness_catch_up's last ack is QoS 1, so the broker has
     * applied every ack when it returns. */
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_catch_up(dev, &g, 1, PAGE_SIZE, CATCHUP_MS, check_envelope, NULL);
    ts_log("caught up on %d messages in %zu pages; restarting the broker", N, g.pages);
    harness_client_disconnect(dev);

    ts_broker_stop(b);
    ts_broker_restart(b);

    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_expect_quiet(dev, "no page after a restart: the device had acked everything");
    harness_client_disconnect(dev);
    ts_log("no page after the restart");

    /* The cursor is exactly at N: later messages come from N + 1. */
    send_range(b, N + 1, N + LATER);
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    g = (harness_catchup){.group = GROUP, .from = N + 1, .to = N + LATER};
    harness_catch_up(dev, &g, 1, PAGE_SIZE, CATCHUP_MS, check_envelope, NULL);
    ASSERTF(g.pages == 1, "%zu pages for %d messages", g.pages, LATER);
    harness_client_disconnect(dev);

    ts_broker_destroy(b);
    return ts_pass();
}
