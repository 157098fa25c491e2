/* integ_catchup: a device offline while 5,000 messages are sent catches up
 * with every id exactly once, in order, in pages never larger than page_size.
 *
 * Usage: integ_catchup [page_size]. Without an argument the plugin runs with
 * its default page_size (100); with one, plugin_opt_page_size is set to it. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5000
#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define DEVICE "catchup-device"
#define SENDER "catchup-sender"
#define DEFAULT_PAGE_SIZE 100 /* PROTOCOL.md */
#define CATCHUP_MS 60000

/* Every envelope carries its message number n == its id: one sender at one
 * QoS on one connection, so the broker accepts them in sending order. */
static void check_envelope(void *arg, const char *group, const cJSON *env)
{
    int64_t id = harness_json_int(env, "id");
    int64_t n = harness_json_int(env, "n");
    char body[64];

    (void)arg;
    (void)group;
    ASSERTF(n == id, "envelope id %lld carries message n=%lld", (long long)id, (long long)n);
    ASSERTF(strcmp(harness_json_str(env, "from"), SENDER) == 0, "envelope %lld from \"%s\"",
            (long long)id, harness_json_str(env, "from"));
    snprintf(body, sizeof body, "catch-up message %lld", (long long)n);
    ASSERTF(strcmp(harness_json_str(env, "body"), body) == 0, "envelope %lld body \"%s\"",
            (long long)id, harness_json_str(env, "body"));
}

int main(int argc, char **argv)
{
    static harness_ticket tickets[N + 1];
    char opt[64];
    const char *opts[] = {NULL, NULL};
    size_t page_size = DEFAULT_PAGE_SIZE;
    ts_broker *b;
    harness_client *dev, *snd;
    harness_catchup g = {.group = GROUP, .from = 1, .to = N};
    char payload[128];
    int64_t t0, t1;

    if (argc > 1) {
        long v = strtol(argv[1], NULL, 10);
        if (v < 1 || v > 100000) {
            fprintf(stderr, "usage: %s [page_size]\n", argv[0]);
            return 2;
        }
        page_size = (size_t)v;
        snprintf(opt, sizeof opt, "page_size %ld", v);
        opts[0] = opt;
    }
    snprintf(payload, sizeof payload, "integ_catchup (page_size %zu)", page_size);
    ts_init(payload);
    b = ts_broker_start(opts);

    /* The device joins (its first subscribe) at head 0, then goes offline. */
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_expect_quiet(dev, "no page on joining an empty group");
    harness_client_disconnect(dev);

    snd = harness_client_connect(b, SENDER, NULL);
    t0 = ts_now_ms();
    for (int k = 1; k <= N; k++) {
        int rc;
        snprintf(payload, sizeof payload, "{\"body\":\"catch-up message %d\",\"n\":%d}", k, k);
        rc = harness_client_publish_async(snd, TOPIC, payload, 1, &tickets[k]);
        ASSERTF(rc == 0, "publish %d failed with Paho code %d", k, rc);
    }
    for (int k = 1; k <= N; k++)
        harness_client_wait_acked(snd, tickets[k], 10000);
    t1 = ts_now_ms();
    ts_log("sent %d QoS 1 messages in %lld ms", N, (long long)(t1 - t0));
    harness_client_disconnect(snd);

    /* Back online: the subscribe starts the catch-up. */
    dev = harness_client_connect(b, DEVICE, NULL);
    t0 = ts_now_ms();
    harness_client_subscribe(dev, TOPIC, 1);
    harness_catch_up(dev, &g, 1, page_size, CATCHUP_MS, check_envelope, NULL);
    t1 = g.done_ms;
    ts_log("caught up on %d messages in %zu pages (largest %zu, page_size %zu) in %lld ms "
           "from the subscribe to the last page",
           N, g.pages, g.largest, page_size, (long long)(t1 - t0));
    ASSERTF(g.pages >= (N + page_size - 1) / page_size, "%zu pages for %d messages", g.pages, N);

    harness_client_disconnect(dev);
    ts_broker_destroy(b);
    return ts_pass();
}
