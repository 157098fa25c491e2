/* integ_devices: where a device's delivery starts (PROTOCOL.md, Names:
 * device). A member's first device starts where the member joined; a second
 * device starts at the most advanced cursor of the member's other devices;
 * each device then keeps its own cursor. A member who joins late gets no
 * older message pushed. */
#include "harness.h"

#include <stdio.h>

#define GROUP "devices"
#define TOPIC "chat/" GROUP
#define MEMBER "carol" /* a username shared by two client ids */
#define PHONE "carol-phone"
#define LAPTOP "carol-laptop"
#define PAGE_SIZE 100
#define CATCHUP_MS 20000

static void send_n(ts_broker *b, int from, int to)
{
    harness_client *snd = harness_client_connect(b, "devices-sender", NULL);
    char payload[64];
    for (int k = from; k <= to; k++) {
        snprintf(payload, sizeof payload, "{\"body\":\"m%d\",\"n\":%d}", k, k);
        harness_client_publish(snd, TOPIC, payload, 1);
    }
    harness_client_disconnect(snd);
}

/* Connects device, subscribes, and expects exactly ids from..to by replay
 * (from > to: no page at all), acking as it goes. */
static void catch_up(ts_broker *b, const char *device, int64_t from, int64_t to)
{
    harness_client *c = harness_client_connect(b, device, MEMBER);
    harness_client_subscribe(c, TOPIC, 1);
    if (from > to) {
        harness_expect_quiet(c, "no page: the device holds everything");
    } else {
        harness_catchup g = {.group = GROUP, .from = from, .to = to};
        harness_catch_up(c, &g, 1, PAGE_SIZE, CATCHUP_MS, NULL, NULL);
        ts_log("%s caught up on %lld..%lld in %zu pages", device, (long long)from, (long long)to,
               g.pages);
    }
    harness_client_disconnect(c);
}

int main(void)
{
    ts_init("integ_devices");
    ts_broker *b = ts_broker_start(NULL);

    /* Messages before carol joins are not pushed to her. */
    send_n(b, 1, 5);
    catch_up(b, PHONE, 6, 5);

    /* The phone was away for 6..30 and catches up on them. */
    send_n(b, 6, 30);
    catch_up(b, PHONE, 6, 30);

    /* The laptop is new: it starts at the phone's cursor (30), not at the
     * join (5), so it gets 31..40 only. */
    send_n(b, 31, 40);
    catch_up(b, LAPTOP, 31, 40);

    /* The phone's cursor is its own: still at 30. */
    catch_up(b, PHONE, 31, 40);

    /* Both are up to date now. */
    catch_up(b, LAPTOP, 41, 40);
    catch_up(b, PHONE, 41, 40);

    /* A late member's device gets no older message, but live ones. */
    harness_client *dave = harness_client_connect(b, "dave-phone", "dave");
    harness_client_subscribe(dave, TOPIC, 1);
    harness_expect_quiet(dave, "no page for a member who just joined");
    send_n(b, 41, 41);
    harness_msg *m = harness_client_receive(dave, 5000);
    ASSERTF(m != NULL, "dave got no live message");
    cJSON *env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == 41, "dave got id %lld, not 41",
            (long long)harness_json_int(env, "id"));
    cJSON_Delete(env);
    harness_msg_free(m);
    harness_client_disconnect(dave);

    ts_broker_destroy(b);
    return ts_pass();
}
