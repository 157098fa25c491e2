/* Unit tests of what an admin `delete` makes the rest of the plugin forget
 * (plugin/admin_jobs.c): the group's catch-ups, its pending subscriptions,
 * its cached envelope (and no other group's), and who is online in it, so
 * that nothing of a deleted group is delivered or pushed from memory (a
 * copy of a deleted message is refused to whoever joins again). The
 * plugin runs on a real store with the broker stubbed (plugin_fixture.h),
 * driven through its entry points as the broker would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "plugin_fixture.h"
#include "store_backend.h"

static const char *const opts[] = {"admins=root", "receipt_interval=0", "page_size=1", NULL};

static int setup(void **state)
{
    struct plugin_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    stub_reset();
    if (!plugin_fixture_open(fx, opts)) {
        free(fx);
        return -1;
    }
    /* Admin rights rest on a username the broker verifies. */
    chat_broker_set_test(&fx->pl, true, true, NULL);
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

/* A subscribe (SUBSCRIBE) or unsubscribe of client to chat/<group>, as the
 * broker asks it; the plugin is the only access checker here. */
static void acl(struct plugin_fixture *fx, struct mosquitto *client, const char *group, int access)
{
    char topic[64];
    snprintf(topic, sizeof(topic), "chat/%s", group);
    struct mosquitto_evt_acl_check ev = {.client = client, .topic = topic, .access = access};
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

/* The same publish; returns a copy of the envelope the broker delivers in
 * its place (malloc'd, *len bytes). */
static char *publish_copy(struct plugin_fixture *fx, struct mosquitto *client, const char *group,
                          size_t *len)
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
    char *env = malloc(ev.payloadlen);
    assert_non_null(env);
    memcpy(env, ev.payload, ev.payloadlen);
    *len = ev.payloadlen;
    mosquitto_free(ev.payload);
    return env;
}

/* The broker's read check of a delivery of payload on chat/<group> to
 * client (a publish's, or a Will's); returns the plugin's answer. */
static int delivery(struct plugin_fixture *fx, struct mosquitto *client, const char *group,
                    const char *payload, size_t len)
{
    char topic[64];
    snprintf(topic, sizeof(topic), "chat/%s", group);
    struct mosquitto_evt_acl_check ev = {.client = client,
                                         .topic = topic,
                                         .payload = payload,
                                         .payloadlen = (uint32_t)len,
                                         .access = MOSQ_ACL_READ,
                                         .qos = 1};
    return chat_on_acl(&fx->pl, &ev);
}

/* Root deletes group through $CONTROL/chat/v1; the answer says so. */
static void delete_group(struct plugin_fixture *fx, const char *group)
{
    struct mosquitto root = plugin_client("root-dev", "root");
    char req[128];
    int n = snprintf(req, sizeof(req), "{\"commands\":[{\"command\":\"delete\",\"group\":\"%s\"}]}",
                     group);
    struct mosquitto_evt_control ev = {
        .client = &root, .topic = CHAT_CONTROL_TOPIC, .payload = req, .payloadlen = (uint32_t)n};
    size_t before = stub_publish_count();
    assert_int_equal(chat_on_control(&fx->pl, &ev), MOSQ_ERR_SUCCESS);
    assert_int_equal(stub_publish_count(), before + 1);
    const struct stub_publish *p = stub_publish_get(before);
    assert_string_equal(p->client_id, "root-dev");
    assert_null(strstr(p->payload, "\"error\""));
    assert_non_null(strstr(p->payload, "\"done\""));
}

/* Runs presence's pushes until a tick sends nothing more: each tick is
 * bounded in time too, and a slow machine (valgrind) may need several. */
static void push_all(struct plugin_fixture *fx)
{
    for (int i = 0; i < 100; i++) {
        size_t before = stub_publish_count();
        chat_presence_tick(&fx->pl, chat_now_ms());
        if (stub_publish_count() == before) {
            return;
        }
    }
    fail_msg("presence kept pushing for 100 ticks");
}

/* Publishes to client_id since the last stub_publishes_clear. */
static size_t publishes_to(const char *client_id)
{
    size_t n = 0;
    for (size_t i = 0; i < stub_publish_count(); i++) {
        const struct stub_publish *p = stub_publish_get(i);
        n += p->client_id && !strcmp(p->client_id, client_id);
    }
    return n;
}

static void test_delete_forgets(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    struct mosquitto bob = plugin_client("bob-phone", "bob");
    struct mosquitto tablet = plugin_client("bob-tablet", "bob");
    size_t len = 0;

    /* Alice and Bob subscribe (and so join); Bob's tablet comes after
     * three messages and catches up on them, one page at a time. */
    acl(fx, &alice, "g", MOSQ_ACL_SUBSCRIBE);
    acl(fx, &bob, "g", MOSQ_ACL_SUBSCRIBE);
    publish(fx, &alice, "h");
    for (int i = 0; i < 3; i++) {
        publish(fx, &alice, "g");
    }
    acl(fx, &tablet, "g", MOSQ_ACL_SUBSCRIBE);
    assert_int_equal(chat_replay_devices(&fx->pl), 1);
    chat_pending_add(&fx->pl, "carol-phone", "g");
    assert_true(chat_pending_has(&fx->pl, "carol-phone", "g"));
    push_all(fx); /* the pushes of the subscribes go out */

    /* Another group's deletion leaves g's cached envelope alone. */
    delete_group(fx, "h");
    assert_non_null(chat_envelope_cache_last(&fx->pl, &len));
    assert_int_equal(chat_replay_devices(&fx->pl), 1);

    delete_group(fx, "g");
    assert_null(chat_envelope_cache_last(&fx->pl, &len));
    assert_int_equal(chat_replay_devices(&fx->pl), 0);
    assert_false(chat_pending_has(&fx->pl, "carol-phone", "g"));

    /* Nobody is online in a deleted group: Bob leaving it (both his
     * devices) tells Alice nothing. */
    push_all(fx);
    stub_publishes_clear();
    acl(fx, &bob, "g", MOSQ_ACL_UNSUBSCRIBE);
    acl(fx, &tablet, "g", MOSQ_ACL_UNSUBSCRIBE);
    push_all(fx);
    assert_int_equal(publishes_to("alice-phone"), 0);
}

/* The store's deletions listing and group_delete, failing while
 * fail_lists or fail_steps > 0 (counting down): what a deadlock PostgreSQL
 * aborts, or a store away, looks like to the tick. lists counts the
 * listings tried. */
static const chat_store_ops *real_ops;
/* The store's ops with those two replaced: static, since the fixture's
 * teardown closes the store through them when an assertion ends the test
 * before it puts real_ops back. */
static chat_store_ops failing_ops;
static int fail_steps, fail_lists, lists;

static chat_err failing_deletions(chat_store *st, chat_head_fn fn, void *ctx)
{
    lists++;
    if (fail_lists > 0) {
        fail_lists--;
        return CHAT_EIO;
    }
    return real_ops->deletions(st, fn, ctx);
}

static chat_err failing_group_delete(chat_store *st, const char *group, size_t max_keys, bool *done)
{
    if (fail_steps > 0) {
        fail_steps--;
        return CHAT_EIO;
    }
    return real_ops->group_delete(st, group, max_keys, done);
}

/* The listing of deletions a previous run left, which a broker that
 * started without its store could not read, is tried again once a wait has
 * passed; so is a background step that meets a store error, which keeps
 * the group queued (waits of 1 s, then 2 s, then 4 s: doubled while errors
 * follow each other), without a restart or a second delete. */
static void test_delete_retries(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    chat_store *st = fx->pl.store;
    const int64_t t0 = 1000000;

    /* More records than the request's first step takes (DELETE_STEP). */
    for (int i = 0; i < 2100; i++) {
        publish(fx, &alice, "big");
    }
    delete_group(fx, "big");
    assert_int_equal(chat_admin_deletions(&fx->pl), 1);

    /* A restart: the queue is empty, and only the listing of what the
     * previous run left can find the group. */
    chat_admin_free(&fx->pl);
    assert_true(chat_admin_init(&fx->pl));
    assert_int_equal(chat_admin_deletions(&fx->pl), 0);
    real_ops = st->ops;
    failing_ops = *st->ops;
    failing_ops.deletions = failing_deletions;
    failing_ops.group_delete = failing_group_delete;
    st->ops = &failing_ops;
    lists = 0;
    fail_lists = 1;
    fail_steps = 2;

    /* The listing fails and waits 1 s. */
    chat_admin_tick(&fx->pl, t0);
    assert_int_equal(lists, 1);
    assert_int_equal(chat_admin_deletions(&fx->pl), 0);
    chat_admin_tick(&fx->pl, t0 + 999);
    assert_int_equal(lists, 1); /* still waiting: nothing tried */
    assert_int_equal(fail_steps, 2);

    /* Listed at t0 + 1 s; its steps fail twice in a row (the second after
     * the 2 s wait) and the group stays queued. */
    chat_admin_tick(&fx->pl, t0 + 1000);
    assert_int_equal(lists, 2);
    assert_int_equal(fail_steps, 1);
    assert_int_equal(chat_admin_deletions(&fx->pl), 1);
    chat_admin_tick(&fx->pl, t0 + 2999);
    assert_int_equal(fail_steps, 1);
    chat_admin_tick(&fx->pl, t0 + 3000);
    assert_int_equal(fail_steps, 0);
    assert_int_equal(chat_admin_deletions(&fx->pl), 1);

    /* The third wait is 4 s; then the deletion goes on to its end, each
     * tick a slice. */
    chat_admin_tick(&fx->pl, t0 + 6999);
    assert_int_equal(chat_admin_deletions(&fx->pl), 1);
    for (int i = 0; i < 10000 && chat_admin_deletions(&fx->pl) > 0; i++) {
        chat_admin_tick(&fx->pl, t0 + 7000);
    }
    st->ops = real_ops;
    assert_int_equal(chat_admin_deletions(&fx->pl), 0);
    assert_int_equal(lists, 2); /* listed once the store answered, not again */
}

/* What forgetting the envelope is for: a copy of a deleted message (a Will
 * that imitates it) is refused to a member who joins the group again, as
 * the deleted message itself would be, instead of passing the read check
 * from memory. */
/* The envelope stored last answers its deliveries' checks alone for two
 * ticks (a change's M is delivered at the start of the next pass); later
 * checks (a kept session's queue at its reconnect, a QoS 2 publish's
 * deliveries at its PUBREL) read the store, which another broker's recall
 * may have rewritten since (redteam4, f_pg_cache_recall.py): the envelope
 * answers again only if the store still holds it. */
static void test_cache_ages(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    size_t len = 0;
    bool same = false;

    acl(fx, &alice, "g", MOSQ_ACL_SUBSCRIBE);
    publish(fx, &alice, "g");
    const char *env = chat_envelope_cache_last(&fx->pl, &len);
    assert_non_null(env);
    char *copy = test_malloc(len);
    memcpy(copy, env, len);
    assert_true(chat_envelope_cache_lookup(&fx->pl, "g", 1, copy, len, &same));
    assert_true(same);
    chat_tick_from_broker(&fx->pl);
    assert_true(chat_envelope_cache_lookup(&fx->pl, "g", 1, copy, len, &same));
    chat_tick_from_broker(&fx->pl);
    assert_false(chat_envelope_cache_lookup(&fx->pl, "g", 1, copy, len, &same));

    /* The store still holds it: it answers again, for two ticks. */
    chat_envelope_cache_renew(&fx->pl, "g", 1, copy, len);
    assert_true(chat_envelope_cache_lookup(&fx->pl, "g", 1, copy, len, &same));
    assert_true(same);
    chat_tick_from_broker(&fx->pl);
    chat_tick_from_broker(&fx->pl);
    assert_false(chat_envelope_cache_lookup(&fx->pl, "g", 1, copy, len, &same));

    /* The store holds something else now (another broker's recall): the
     * envelope is forgotten. */
    copy[len - 1] = ' ';
    chat_envelope_cache_renew(&fx->pl, "g", 1, copy, len);
    assert_null(chat_envelope_cache_last(&fx->pl, &len));
    test_free(copy);
}

static void test_delete_refuses_copy(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    struct mosquitto bob = plugin_client("bob-phone", "bob");
    size_t len = 0;

    acl(fx, &alice, "g", MOSQ_ACL_SUBSCRIBE);
    acl(fx, &bob, "g", MOSQ_ACL_SUBSCRIBE);
    char *env = publish_copy(fx, &alice, "g", &len);
    assert_int_equal(delivery(fx, &bob, "g", env, len), MOSQ_ERR_SUCCESS);

    delete_group(fx, "g");
    acl(fx, &bob, "g", MOSQ_ACL_SUBSCRIBE); /* joins again */
    assert_int_equal(delivery(fx, &bob, "g", env, len), MOSQ_ERR_ACL_DENIED);
    free(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_delete_forgets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_retries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_refuses_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cache_ages, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
