/* Unit tests of what a publish leaves behind in the plugin and the store,
 * driven through the plugin's entry points (chat_on_message, chat_on_acl,
 * chat_on_control) as the broker calls them, on a real store with the
 * broker stubbed (plugin_fixture.h) and no tick:
 *
 *   - the envelope a publish stored is kept for the deliveries' checks
 *     (plugin/chat.c); an admin `delete` of its group forgets it
 *     (plugin/admin_jobs.c), so a copy of a deleted message (a Will that
 *     imitates it) is not delivered to whoever joins the group again;
 *   - retention_count is applied by the publish itself (plugin/retention.c):
 *     the group keeps exactly that many messages before any tick's sweep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_fixture.h"

static int open_with(void **state, const char *const *opts)
{
    struct plugin_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    stub_reset();
    if (!plugin_fixture_open(fx, opts, NULL)) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int setup_admin(void **state)
{
    static const char *const opts[] = {"admins=root", NULL};
    return open_with(state, opts);
}

static int setup_retention(void **state)
{
    static const char *const opts[] = {"retention_count=3", NULL};
    return open_with(state, opts);
}

static int teardown(void **state)
{
    struct plugin_fixture *fx = *state;
    plugin_fixture_close(fx);
    free(fx);
    stub_reset();
    return 0;
}

/* The broker's access check of client on chat/<group> (SUBSCRIBE: it joins;
 * READ: a delivery of payload); returns the plugin's answer. */
static int access_check(struct plugin_fixture *fx, struct mosquitto *client, const char *group,
                        int access, const char *payload, size_t len)
{
    char topic[64];
    snprintf(topic, sizeof(topic), "chat/%s", group);
    struct mosquitto_evt_acl_check ev = {.client = client,
                                         .topic = topic,
                                         .payload = payload,
                                         .payloadlen = (uint32_t)len,
                                         .access = access,
                                         .qos = 1};
    return chat_on_acl(&fx->pl, &ev);
}

/* A publish of client to chat/<group>: stored. Returns the envelope the
 * broker would deliver in its place (malloc'd, *len bytes). */
static char *publish(struct plugin_fixture *fx, struct mosquitto *client, const char *group,
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
    mosquitto_free(ev.payload); /* the broker's, once delivered */
    return env;
}

/* An admin deletes group through $CONTROL/chat/v1; the answer is no error. */
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
    assert_null(strstr(stub_publish_get(before)->payload, "\"error\""));
}

/* A deleted message is not delivered from memory: the envelope the
 * deliveries of its publish read is forgotten with its group, so a copy of
 * it (a Will that imitates it) is refused to a member who joins again. */
static void test_delete_forgets_envelope(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    struct mosquitto bob = plugin_client("bob-phone", "bob");
    size_t len = 0;

    assert_int_equal(access_check(fx, &alice, "g", MOSQ_ACL_SUBSCRIBE, NULL, 0), MOSQ_ERR_SUCCESS);
    assert_int_equal(access_check(fx, &bob, "g", MOSQ_ACL_SUBSCRIBE, NULL, 0), MOSQ_ERR_SUCCESS);
    char *env = publish(fx, &alice, "g", &len);
    /* the delivery of the publish to bob, a member */
    assert_int_equal(access_check(fx, &bob, "g", MOSQ_ACL_READ, env, len), MOSQ_ERR_SUCCESS);

    delete_group(fx, "g");
    assert_int_equal(access_check(fx, &bob, "g", MOSQ_ACL_SUBSCRIBE, NULL, 0), MOSQ_ERR_SUCCESS);
    assert_int_equal(access_check(fx, &bob, "g", MOSQ_ACL_READ, env, len), MOSQ_ERR_ACL_DENIED);
    free(env);
}

/* With retention_count 3 each publish leaves its group exactly 3 messages:
 * the publish trims, no tick's sweep is needed. */
static void test_retention_on_publish(void **state)
{
    struct plugin_fixture *fx = *state;
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    size_t len = 0;

    assert_int_equal(access_check(fx, &alice, "g", MOSQ_ACL_SUBSCRIBE, NULL, 0), MOSQ_ERR_SUCCESS);
    for (uint64_t head = 1; head <= 6; head++) {
        uint64_t first = 0, now = 0;
        free(publish(fx, &alice, "g", &len));
        assert_int_equal(chat_store_head(fx->pl.store, "g", &now), CHAT_OK);
        assert_int_equal(now, head);
        assert_int_equal(chat_store_first(fx->pl.store, "g", &first), CHAT_OK);
        assert_int_equal(first, head > 3 ? head - 2 : 1);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_delete_forgets_envelope, setup_admin, teardown),
        cmocka_unit_test_setup_teardown(test_retention_on_publish, setup_retention, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
