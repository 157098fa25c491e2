/* Unit tests of plugin/retention.c on the publish path: retention_count is
 * applied by each publish itself, so a group keeps exactly that many
 * messages without waiting for a tick's sweep. The plugin runs on a real
 * store with the broker stubbed (plugin_fixture.h: the broker sends ticks,
 * and none comes here), driven through its entry points as the broker
 * would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_fixture.h"

static const char *const opts[] = {"retention_count=3", NULL};

static int setup(void **state)
{
    struct plugin_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    stub_reset();
    if (!plugin_fixture_open(fx, opts)) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct plugin_fixture *fx = *state;
    plugin_fixture_close(fx);
    free(fx);
    stub_reset();
    return 0;
}

/* A subscribe of client to chat/<group>, as the broker asks it: it joins. */
static void subscribe(struct plugin_fixture *fx, struct mosquitto *client, const char *group)
{
    char topic[64];
    snprintf(topic, sizeof(topic), "chat/%s", group);
    struct mosquitto_evt_acl_check ev = {
        .client = client, .topic = topic, .access = MOSQ_ACL_SUBSCRIBE};
    assert_int_equal(chat_on_acl(&fx->pl, &ev), MOSQ_ERR_SUCCESS);
}

/* A publish of client to chat/<group>, stored (the broker then delivers
 * the envelope in its place, and frees it). */
static void publish(struct plugin_fixture *fx, struct mosquitto *client, const char *group)
{
    char topic[64], body[] = "{\"body\":\"hi\"}";
    snprintf(topic, sizeof(topic), "chat/%s", group);
    struct mosquitto_evt_message ev = {.client = client,
                                       .topic = topic,
                                       .payload = body,
                                       .payloadlen = sizeof(body) - 1,
                                       .qos = 1};
    assert_int_equal(chat_on_message(&fx->pl, &ev), MOSQ_ERR_SUCCESS);
    assert_ptr_not_equal(ev.payload, body);
    mosquitto_free(ev.payload);
}

/* With retention_count 3 each publish leaves its group exactly 3 messages,
 * no tick in between: a publish that kept one too many would only be
 * repaired by the next sweep. */
static void test_count_on_publish(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto alice = plugin_client("alice-phone", "alice");

    subscribe(fx, &alice, "g");
    for (uint64_t head = 1; head <= 6; head++) {
        uint64_t first = 0, now = 0;
        publish(fx, &alice, "g");
        assert_int_equal(chat_store_head(fx->pl.store, "g", &now), CHAT_OK);
        assert_int_equal(now, head);
        assert_int_equal(chat_store_first(fx->pl.store, "g", &first), CHAT_OK);
        assert_int_equal(first, head > 3 ? head - 2 : 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_count_on_publish, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
