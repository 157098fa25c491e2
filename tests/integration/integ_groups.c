/* integ_groups: a device that is a member of 20 groups, offline while each
 * of them gets messages, catches up on all of them when it subscribes again:
 * every id of every group exactly once, in order, in its own group's pages. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROUPS 20
#define PER_GROUP 150 /* two pages each at the default page_size */
#define PAGE_SIZE 100 /* PROTOCOL.md default */
#define DEVICE "groups-device"
#define SENDER "groups-sender"
#define CATCHUP_MS 60000

/* Messages are sent round robin over the groups, so each group's ids are
 * 1..PER_GROUP in sending order: envelope id k carries n == k and names its
 * group in the body. */
static void check_envelope(void *arg, const char *group, const cJSON *env)
{
    int64_t id = harness_json_int(env, "id");
    char body[128];

    (void)arg;
    ASSERTF(harness_json_int(env, "n") == id, "group %s: envelope %lld carries n=%lld", group,
            (long long)id, (long long)harness_json_int(env, "n"));
    snprintf(body, sizeof body, "to %s, number %lld", group, (long long)id);
    ASSERTF(strcmp(harness_json_str(env, "body"), body) == 0, "group %s: envelope %lld body \"%s\"",
            group, (long long)id, harness_json_str(env, "body"));
    ASSERTF(strcmp(harness_json_str(env, "from"), SENDER) == 0, "group %s: from \"%s\"", group,
            harness_json_str(env, "from"));
}

int main(void)
{
    static harness_ticket tickets[GROUPS * PER_GROUP];
    static char names[GROUPS][16], topics[GROUPS][32];
    const char *topic_list[GROUPS];
    harness_catchup g[GROUPS];
    ts_broker *b;
    harness_client *dev, *snd;
    char payload[512];
    int64_t t0, t1 = 0;
    size_t pages = 0;

    ts_init("integ_groups");
    for (int i = 0; i < GROUPS; i++) {
        snprintf(names[i], sizeof names[i], "group%02d", i);
        snprintf(topics[i], sizeof topics[i], "chat/%s", names[i]);
        topic_list[i] = topics[i];
        g[i] = (harness_catchup){.group = names[i], .from = 1, .to = PER_GROUP};
    }
    b = ts_broker_start(NULL);

    /* Join the 20 groups one subscribe at a time, then go offline. */
    dev = harness_client_connect(b, DEVICE, NULL);
    for (int i = 0; i < GROUPS; i++)
        harness_client_subscribe(dev, topics[i], 1);
    harness_expect_quiet(dev, "no page on joining empty groups");
    harness_client_disconnect(dev);

    snd = harness_client_connect(b, SENDER, NULL);
    for (int k = 1; k <= PER_GROUP; k++) {
        for (int i = 0; i < GROUPS; i++) {
            int rc;
            snprintf(payload, sizeof payload, "{\"body\":\"to %s, number %d\",\"n\":%d}", names[i],
                     k, k);
            rc = harness_client_publish_async(snd, topics[i], payload, 1,
                                              &tickets[(k - 1) * GROUPS + i]);
            ASSERTF(rc == 0, "publish %d to %s failed with Paho code %d", k, names[i], rc);
        }
    }
    for (int j = 0; j < GROUPS * PER_GROUP; j++)
        harness_client_wait_acked(snd, tickets[j], 10000);
    ts_log("sent %d messages to each of %d groups", PER_GROUP, GROUPS);
    harness_client_disconnect(snd);

    /* Back online: one SUBSCRIBE for all 20 groups. */
    dev = harness_client_connect(b, DEVICE, NULL);
    t0 = ts_now_ms();
    harness_client_subscribe_many(dev, GROUPS, topic_list, 1);
    harness_catch_up(dev, g, GROUPS, PAGE_SIZE, CATCHUP_MS, check_envelope, NULL);
    for (int i = 0; i < GROUPS; i++) {
        pages += g[i].pages;
        if (g[i].done_ms > t1)
            t1 = g[i].done_ms;
    }
    ts_log("caught up on %d groups x %d messages in %zu pages in %lld ms", GROUPS, PER_GROUP, pages,
           (long long)(t1 - t0));

    harness_client_disconnect(dev);
    ts_broker_destroy(b);
    return ts_pass();
}
