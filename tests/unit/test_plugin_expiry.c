/* Unit tests of device expiry in the plugin (plugin/expiry.c, and the
 * marking of online devices in plugin/presence.c, issue 21 item 8): a
 * device connected and subscribed is marked used once a day, each group
 * once, a new subscription first (invariant stamp-queue); the marking goes
 * in bounded slices; the sweep waits for it; in open groups a member goes
 * with its last device, and one online stays. The plugin runs on a real
 * store with the broker stubbed (plugin_fixture.h), its clock moved by the
 * test hook MOSQUITTO_CHAT_TEST_CLOCK_SHIFT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_fixture.h"

#define DAY_S 86400L

/* Without catch-ups a subscribe marks nothing: only the marking of online
 * devices does. */
static const char *const opts[] = {"replay=false", NULL};

static int setup(void **state)
{
    struct plugin_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    stub_reset();
    unsetenv("MOSQUITTO_CHAT_TEST_CLOCK_SHIFT");
    chat_clock_init();
    if (!plugin_fixture_open(fx, opts)) {
        free(fx);
        return -1;
    }
    /* the store stamps with the plugin's clock, as store_health.c sets it */
    chat_store_set_clock(fx->pl.store, chat_store_clock, NULL);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct plugin_fixture *fx = *state;
    plugin_fixture_close(fx);
    free(fx);
    stub_reset();
    unsetenv("MOSQUITTO_CHAT_TEST_CLOCK_SHIFT");
    chat_clock_init();
    return 0;
}

/* The plugin's clock, days ahead of the real one from now on. */
static void shift_days(long days)
{
    char v[32];
    snprintf(v, sizeof(v), "%ld", days * DAY_S);
    setenv("MOSQUITTO_CHAT_TEST_CLOCK_SHIFT", v, 1);
    chat_clock_init();
}

static void subscribe(struct plugin_fixture *fx, struct mosquitto *client, const char *group)
{
    char topic[64];
    snprintf(topic, sizeof(topic), "chat/%s", group);
    struct mosquitto_evt_acl_check ev = {
        .client = client, .topic = topic, .access = MOSQ_ACL_SUBSCRIBE};
    assert_int_equal(chat_on_acl(&fx->pl, &ev), MOSQ_ERR_SUCCESS);
}

/* The day (since the epoch) of the device's last use in group. */
static int64_t used_day(struct plugin_fixture *fx, const char *group, const char *member,
                        const char *device)
{
    uint64_t id = 0;
    int64_t used = -1;
    bool found = false;
    assert_int_equal(
        chat_store_cursor_info(fx->pl.store, group, member, device, &id, &used, &found), CHAT_OK);
    assert_true(found);
    return used / 86400000;
}

static bool member(struct plugin_fixture *fx, const char *group, const char *name)
{
    uint64_t joined = 0;
    bool found = false;
    assert_int_equal(chat_store_member_get(fx->pl.store, group, name, &joined, &found), CHAT_OK);
    return found;
}

static void test_online_marked_once_a_day(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto a = plugin_client("a-phone", NULL), b = plugin_client("b-phone", NULL);
    int64_t today = chat_now_ms() / 86400000;

    /* subscribing joins, and the device that joins has its cursor */
    subscribe(fx, &a, "g1");
    subscribe(fx, &a, "g2");
    subscribe(fx, &b, "g1");
    assert_int_equal(used_day(fx, "g1", "a-phone", "a-phone"), today);
    assert_true(chat_presence_stamp(&fx->pl, chat_now_ms() + 1000));

    /* 60 days on: a is still online in both groups, b went away */
    chat_presence_disconnected(&fx->pl, "b-phone");
    shift_days(60);
    stub_log_clear();
    assert_true(chat_presence_stamp(&fx->pl, chat_now_ms() + 1000));
    assert_true(stub_log_has(MOSQ_LOG_DEBUG, "2 devices online in a group marked used"));
    assert_int_equal(used_day(fx, "g1", "a-phone", "a-phone"), today + 60);
    assert_int_equal(used_day(fx, "g2", "a-phone", "a-phone"), today + 60);
    assert_int_equal(used_day(fx, "g1", "b-phone", "b-phone"), today);

    /* the same day again: nothing to do */
    stub_log_clear();
    assert_true(chat_presence_stamp(&fx->pl, chat_now_ms() + 1000));
    assert_false(stub_log_has(MOSQ_LOG_DEBUG, "marked used"));

    /* a new subscription goes first, though a (done) comes before it */
    subscribe(fx, &b, "g2");
    assert_true(chat_presence_stamp(&fx->pl, chat_now_ms() + 1000));
    assert_true(stub_log_has(MOSQ_LOG_DEBUG, "1 devices online in a group marked used"));
    assert_int_equal(used_day(fx, "g2", "b-phone", "b-phone"), today + 60);
}

static void test_marking_in_slices(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto c[6];
    char id[6][16];

    for (int i = 0; i < 6; i++) {
        snprintf(id[i], sizeof(id[i]), "dev-%d", i);
        c[i] = plugin_client(id[i], NULL);
        subscribe(fx, &c[i], "g");
        subscribe(fx, &c[i], "h");
    }
    assert_true(chat_presence_stamp(&fx->pl, chat_now_ms() + 1000));
    shift_days(10);
    /* a deadline already past: one group of one device per call */
    int calls = 0;
    while (!chat_presence_stamp(&fx->pl, 0) && calls < 100) {
        calls++;
    }
    assert_int_equal(calls, 11);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(used_day(fx, "g", id[i], id[i]), chat_now_ms() / 86400000);
        assert_int_equal(used_day(fx, "h", id[i], id[i]), chat_now_ms() / 86400000);
    }
    /* devices that leave meanwhile are out of the queue (valgrind) */
    chat_presence_unsubscribed(&fx->pl, "dev-0", "g");
    chat_presence_disconnected(&fx->pl, "dev-1");
    shift_days(11);
    assert_true(chat_presence_stamp(&fx->pl, chat_now_ms() + 1000));
    assert_int_equal(used_day(fx, "g", "dev-0", "dev-0"), chat_now_ms() / 86400000 - 1);
    assert_int_equal(used_day(fx, "h", "dev-0", "dev-0"), chat_now_ms() / 86400000);
}

static void test_sweep_takes_members_of_open_groups(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto online = plugin_client("online", NULL), gone = plugin_client("gone", NULL);
    struct mosquitto sensor = plugin_client("sensor", NULL);
    char topic[] = "chat/g", body[] = "21.5";

    subscribe(fx, &online, "g");
    subscribe(fx, &gone, "g");
    /* a publish joins too, with the publishing device */
    struct mosquitto_evt_message ev = {
        .client = &sensor, .topic = topic, .payload = body, .payloadlen = 4, .qos = 1};
    assert_int_equal(chat_on_message(&fx->pl, &ev), MOSQ_ERR_SUCCESS);
    mosquitto_free(ev.payload);
    chat_presence_disconnected(&fx->pl, "gone");

    /* 91 days on: the tick marks the online device, then sweeps */
    shift_days(91);
    stub_log_clear();
    for (int i = 0; i < 100 && !stub_log_has(MOSQ_LOG_INFO, "device expiry: dropped"); i++) {
        chat_expiry_tick(&fx->pl, time(NULL));
    }
    assert_true(stub_log_has(MOSQ_LOG_INFO, "dropped 2 device cursors and 2 members (open groups"));
    assert_true(member(fx, "g", "online"));
    assert_false(member(fx, "g", "gone"));
    assert_false(member(fx, "g", "sensor"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_online_marked_once_a_day, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marking_in_slices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_takes_members_of_open_groups, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
