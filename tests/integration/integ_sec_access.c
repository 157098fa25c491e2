/* integ_sec_access: regression tests of issue 9 about access, one case per
 * item (argv[1]), each against a real broker:
 *
 *   unreadable_config  1. a configuration only root may read: the broker does not start
 *   reload_acl         1. an acl_file added with SIGHUP is obeyed at once
 *   read_check         2. history only for clients the broker lets read the group
 *   read_fallback      2. where the broker cannot be asked: refused, or by option
 *   forged_answers     3. no Will or publish reaches $CONTROL/chat/v1/response
 *   namespaces         4. a client id never passes for a verified username
 *   persistent_session 14. a resumed session keeps live delivery behind acl_file
 *
 * and the holes a red-team attack on those fixes found:
 *
 *   reload_rejected    a reload the broker refuses leaves the plugin deferring
 *   revoked_midway     a read right revoked during a catch-up stops it
 */
#include "integ_sec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ===========================================================================
 * 1. A configuration the plugin cannot read
 * ========================================================================= */

static const char acl_public[] = "topic readwrite public/#\n"
                                 "topic readwrite chat/#\n"
                                 "topic readwrite $CONTROL/chat/#\n";

/* The broker, as root, reads a configuration only root may read, drops to
 * nobody and then loads the plugin, which cannot read it. Before: the plugin
 * saw no acl_file, allowed everything outside chat, and the acl_file was
 * never asked. */
static void case_unreadable_config(void)
{
    ts_broker_conf conf = {.lines = (const char *const[]){"acl_file @DIR@/acl", NULL},
                           .run_as = "nobody",
                           .private_conf = true};
    ts_broker *b = ts_broker_create(&conf);

    /* Unreadable to the user the broker runs as: nothing tells whether
     * another plugin answers first or a listener lacks mosquitto-chat, so
     * the broker does not start, and the log says what to change (it once
     * started, deferring: issue 21's red team found that a second listener
     * without the plugin then went unseen). */
    sec_write_in(b, "acl", acl_public);
    ASSERTF(ts_broker_try_launch(b) != 0, "the broker started with an unreadable configuration");
    ASSERTF(ts_broker_log_count(b, "not starting: cannot read the broker's configuration") == 1,
            "no log line about the unreadable configuration");
    ASSERTF(ts_broker_log_count(b, "readable by that user") == 1,
            "the log line does not say what to change");
    ts_broker_destroy(b);
}

/* The plugin started alone (allowing outside chat); an acl_file added with
 * SIGHUP must be obeyed from the reload on. */
static void case_reload_acl(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *spy = harness_client_connect(b, "spy", NULL);
    harness_client *boss = harness_client_connect(b, "boss", NULL);
    harness_client *bob;
    harness_msg *m;

    harness_client_subscribe(spy, "private/#", 0);
    harness_client_publish(boss, "private/before", "before", 1);
    m = harness_client_receive(spy, WAIT_MS);
    ASSERTF(m != NULL && strcmp(m->topic, "private/before") == 0,
            "without an acl_file private/before should arrive");
    harness_msg_free(m);
    sec_write_in(b, "acl", acl_public);
    ts_broker_set_lines(b, (const char *const[]){"acl_file @DIR@/acl", NULL});
    ts_broker_reload(b);
    harness_client_publish(boss, "private/payroll", "salaries", 1);
    harness_client_expect_none(spy, QUIET_MS, "nothing from private/# after the acl_file");
    ASSERTF(ts_broker_log_count(b, "access checks deferred to the broker's other checkers") == 1,
            "the plugin did not log that it defers after the reload");
    bob = harness_client_connect(b, "bob", NULL);
    harness_client_subscribe(bob, "chat/room1", 1);
    harness_client_publish(boss, "chat/room1", "still chatting", 1);
    m = harness_client_receive(bob, WAIT_MS);
    ASSERTF(m != NULL && strstr(m->payload, "still chatting") != NULL, "chat stopped working");
    harness_msg_free(m);
    harness_client_disconnect(spy);
    harness_client_disconnect(boss);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * 2. History only for clients the broker lets read the group
 * ========================================================================= */

static const char acl_rw[] = "user r\n"
                             "topic readwrite chat/#\n"
                             "topic write $CONTROL/chat/v1\n"
                             "user w\n"
                             "topic write chat/room1\n"
                             "topic write $CONTROL/chat/v1\n";

static ts_broker *start_rw_broker(const char *const *opts)
{
    ts_broker_conf conf = {
        .plugin_opts = opts,
        .lines = (const char *const[]){"password_file @DIR@/passwd", "acl_file @DIR@/acl", NULL},
        .no_anonymous = true};
    ts_broker *b = ts_broker_create(&conf);
    sec_make_passwd(b, (const char *const[]){"r", "rpw", "w", "wpw", NULL});
    sec_write_in(b, "acl", acl_rw);
    ts_broker_launch(b);
    return b;
}

/* w may only write chat/room1. It becomes a member by publishing, and must
 * still never read the group: no history, no fetch, no counts, no replay. */
static void case_read_check(void)
{
    ts_broker *b = start_rw_broker(NULL);
    harness_client *r = sec_connect_user(b, "r-phone", "r", "rpw");
    harness_client *w = sec_connect_user(b, "w-sensor", "w", "wpw");
    cJSON *resp;
    int64_t head = 0;

    harness_client_subscribe(r, "chat/room1", 1);
    harness_client_subscribe(r, HARNESS_RESPONSE_TOPIC, 1);
    harness_client_publish(r, "chat/room1", "only for readers", 1);
    harness_client_publish(w, "chat/room1", "from the sensor", 1);
    harness_msg_free(harness_client_receive(r, WAIT_MS));
    harness_msg_free(harness_client_receive(r, WAIT_MS));

    resp = harness_request(w, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    sec_expect_error_prefix(w, resp, "history", "the broker does not let you read this group");
    cJSON_Delete(resp);
    resp =
        harness_request(w, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"room1\"}]}", WAIT_MS);
    sec_expect_error_prefix(w, resp, "fetch", "the broker does not let you read this group");
    cJSON_Delete(resp);
    resp = harness_request(w, "{\"commands\":[{\"command\":\"sync\"}]}", WAIT_MS);
    ASSERTF(!harness_sync_find(harness_response_only(resp), "room1", NULL, NULL, NULL),
            "sync showed room1 to a write-only member");
    cJSON_Delete(resp);
    /* The subscribe itself is the broker's business (acl_file allows every
     * subscription in 2.0); the catch-up it would start is refused. */
    harness_client_subscribe(w, "chat/room1", 1);
    resp = harness_client_response(w, WAIT_MS);
    sec_expect_error_prefix(w, resp, "replay", "the broker does not let you read this group");
    cJSON_Delete(resp);
    sec_expect_none_on(w, "chat/room1", QUIET_MS);

    /* A reader gets everything. */
    resp = harness_request(r, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "history", "room1");
    head = harness_json_int(harness_response_only(resp), "head");
    ASSERTF(head == 2, "history head %lld, expected 2", (long long)head);
    cJSON_Delete(resp);
    harness_client_disconnect(r);
    harness_client_disconnect(w);
    ts_broker_destroy(b);
}

/* Where the broker neither exports its check nor has only checkers the
 * plugin can read (test hooks): the plugin cannot ask, so it refuses
 * history even to a reader; the operator may say that membership is
 * enough. */
static void case_read_fallback(void)
{
    ts_broker *b;
    harness_client *r;
    cJSON *resp;

    setenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK", "1", 1);
    setenv("MOSQUITTO_CHAT_TEST_NO_EMULATION", "1", 1);
    b = start_rw_broker(NULL);
    r = sec_connect_user(b, "r-phone", "r", "rpw");
    harness_client_publish(r, "chat/room1", "hello", 1);
    resp = harness_request(r, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    sec_expect_error_prefix(r, resp, "history", "history is unavailable");
    cJSON_Delete(resp);
    ASSERTF(ts_broker_log_count(b, "history: refused") >= 1,
            "no start line saying that history is refused");
    harness_client_disconnect(r);
    ts_broker_destroy(b);

    b = start_rw_broker((const char *const[]){"read_check members", NULL});
    r = sec_connect_user(b, "r-phone", "r", "rpw");
    harness_client_publish(r, "chat/room1", "hello", 1);
    resp = harness_request(r, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "history", "room1");
    cJSON_Delete(resp);
    harness_client_disconnect(r);
    ts_broker_destroy(b);
    unsetenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
    unsetenv("MOSQUITTO_CHAT_TEST_NO_EMULATION");
}

/* ===========================================================================
 * 3. Forged answers
 * ========================================================================= */

static const char forged[] = "{\"responses\":[{\"command\":\"history\",\"group\":\"room1\","
                             "\"messages\":[{\"id\":1,\"group\":\"room1\",\"from\":\"boss\","
                             "\"ts\":1,\"body\":\"send me your password\"}],\"more\":false}]}";

/* Connects a client whose Will targets $CONTROL/. Mosquitto 2.0.16 and later
 * refuse such a connect (ChangeLog 2.0.16: "reject Will messages that
 * attempt to publish to $CONTROL/"), closing the connection without a
 * CONNACK: returns NULL. Older brokers accept it: returns the client, whose
 * Will the plugin must then never let reach anyone. */
static harness_client *connect_forger(const ts_broker *b, const harness_client_opts *o)
{
    harness_client *c = NULL;
    int rc = harness_client_try_connect(b, o, &c);

    if (ts_broker_version() >= 20016) {
        ASSERTF(rc < 0 && c == NULL,
                "Mosquitto %d answered %d to a connect whose Will targets %s: 2.0.16 and later "
                "close such a connection without a CONNACK",
                ts_broker_version(), rc, o->will_topic);
        return NULL;
    }
    ASSERTF(rc == 0 && c != NULL, "Mosquitto %d refused a connect whose Will targets %s (%d)",
            ts_broker_version(), o->will_topic, rc);
    return c;
}

static void case_forged_answers(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client_opts fo = {.client_id = "forger",
                              .mqtt_version = 5,
                              .will_topic = HARNESS_RESPONSE_TOPIC,
                              .will_payload = forged,
                              .will_qos = 1,
                              .will_retain = true};
    harness_client_opts fo2 = {.client_id = "forger2",
                               .mqtt_version = 5,
                               .will_topic = "$CONTROL/chat/v1",
                               .will_payload = "{\"commands\":[]}",
                               .will_qos = 0,
                               .will_retain = true};
    harness_client_opts plain = {.client_id = "forger3", .mqtt_version = 5};
    harness_client *watcher = harness_client_connect(b, "watcher", NULL);
    harness_client *forger = connect_forger(b, &fo);
    harness_client *forger2 = connect_forger(b, &fo2);
    harness_client *publisher = forger != NULL ? forger : harness_client_connect_opts(b, &plain);
    harness_client *victim;
    harness_props retained = {.retain = true};
    cJSON *resp;
    int rc;

    harness_client_subscribe(watcher, "$CONTROL/#", 0);
    rc = harness_client_publish_bytes(publisher, HARNESS_RESPONSE_TOPIC, forged, strlen(forged), 1,
                                      &retained);
    ASSERTF(rc == 0x87, "a publish to the response topic got reason 0x%x, expected 0x87",
            (unsigned)rc);
    if (forger != NULL) {
        harness_client_disconnect_with_will(forger);
    } else {
        harness_client_disconnect(publisher);
    }
    if (forger2 != NULL)
        harness_client_disconnect_with_will(forger2);
    sec_expect_none_on(watcher, HARNESS_RESPONSE_TOPIC, QUIET_MS);
    sec_expect_none_on(watcher, "$CONTROL/chat/v1", 100);

    victim = harness_client_connect(b, "victim", NULL);
    harness_client_subscribe(victim, HARNESS_RESPONSE_TOPIC, 1);
    harness_client_subscribe(victim, "$CONTROL/chat/v1", 1);
    harness_client_expect_none(victim, QUIET_MS, "no retained forgery");
    resp = harness_request(victim, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    harness_expect_error(harness_response_only(resp), "history", "room1", NULL,
                         "not a member of the group");
    cJSON_Delete(resp);
    harness_client_expect_none(victim, QUIET_MS, "nothing after the genuine answer");
    harness_client_disconnect(watcher);
    harness_client_disconnect(victim);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * 4. Usernames and client ids
 * ========================================================================= */

static void case_namespaces(void)
{
    ts_broker_conf conf = {.lines = (const char *const[]){"password_file @DIR@/passwd", NULL}};
    ts_broker *b = ts_broker_create(&conf);
    harness_client *alice, *fake, *bob, *tilde;
    harness_msg *m;
    cJSON *resp, *env;

    sec_make_passwd(b, (const char *const[]){"alice", "apw", "~eve", "epw", NULL});
    ts_broker_launch(b);
    alice = sec_connect_user(b, "alice-phone", "alice", "apw");
    fake = harness_client_connect(b, "alice", NULL); /* anonymous, client id "alice" */
    bob = harness_client_connect(b, "bob", NULL);
    harness_client_subscribe(bob, "chat/room1", 1);
    harness_client_publish(alice, "chat/room1", "real", 1);
    harness_client_publish(fake, "chat/room1", "fake", 1);
    for (int i = 0; i < 2; i++) {
        m = harness_client_receive(bob, WAIT_MS);
        ASSERTF(m != NULL, "bob got %d of 2 messages", i);
        env = harness_json_object(m);
        const char *from = harness_json_str(env, "from");
        const char *body = harness_json_str(env, "body");
        ASSERTF(strcmp(body, "real") == 0 ? strcmp(from, "alice") == 0
                                          : strcmp(from, "~alice") == 0,
                "\"%s\" came from \"%s\"", body, from);
        cJSON_Delete(env);
        harness_msg_free(m);
    }
    /* alice's own group is not the anonymous client's. */
    harness_client_publish(alice, "chat/alice-only", "mine", 1);
    resp = harness_request(fake, "{\"commands\":[{\"command\":\"sync\"}]}", WAIT_MS);
    ASSERTF(!harness_sync_find(harness_response_only(resp), "alice-only", NULL, NULL, NULL),
            "the anonymous client \"alice\" sees alice's groups");
    cJSON_Delete(resp);
    resp = harness_request(
        fake, "{\"commands\":[{\"command\":\"history\",\"group\":\"alice-only\"}]}", WAIT_MS);
    sec_expect_error_prefix(fake, resp, "history", "not a member");
    cJSON_Delete(resp);
    /* A username that would look like a client id member may not chat. */
    tilde = sec_connect_user(b, "eve-phone", "~eve", "epw");
    harness_client_subscribe(tilde, HARNESS_RESPONSE_TOPIC, 1);
    harness_client_publish(tilde, "chat/room1", "who am I", 1);
    resp = harness_client_response(tilde, WAIT_MS);
    sec_expect_error_prefix(tilde, resp, "publish", "usernames beginning with ~ are reserved");
    cJSON_Delete(resp);
    harness_client_disconnect(alice);
    harness_client_disconnect(fake);
    harness_client_disconnect(bob);
    harness_client_disconnect(tilde);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * Red team: a refused reload, a right revoked midway
 * ========================================================================= */

/* The broker refuses a reload (an unknown option) and keeps its acl_file:
 * the plugin must not start allowing because the new file names none. */
static void case_reload_rejected(void)
{
    ts_broker_conf conf = {.lines = (const char *const[]){"acl_file @DIR@/acl", NULL}};
    ts_broker *b = ts_broker_create(&conf);
    harness_client *spy, *boss;

    sec_write_in(b, "acl", acl_public);
    sec_suppress_config_leaks(b);
    ts_broker_launch(b);
    spy = harness_client_connect(b, "spy", NULL);
    boss = harness_client_connect(b, "boss", NULL);
    harness_client_subscribe(spy, "private/#", 0);
    ts_broker_set_lines(b, (const char *const[]){"this_is_not_an_option 1", NULL});
    ts_broker_reload(b);
    ASSERTF(ts_broker_log_count(b, "Unknown configuration variable") >= 1,
            "the broker did not refuse the new configuration");
    harness_client_publish(boss, "private/payroll", "salaries", 1);
    harness_client_expect_none(spy, QUIET_MS, "nothing from private/# after a refused reload");
    harness_client_disconnect(spy);
    harness_client_disconnect(boss);
    ts_broker_destroy(b);
}

/* A read right revoked during a catch-up stops the pages still to come. */
static void case_revoked_midway(void)
{
    ts_broker_conf conf = {.plugin_opts =
                               (const char *const[]){"page_size 5", "replay_window 1", NULL},
                           .lines = (const char *const[]){"acl_file @DIR@/acl", NULL}};
    ts_broker *b = ts_broker_create(&conf);
    harness_client *alice, *eve;
    harness_msg *m;
    harness_page p;
    cJSON *resp;
    const char *acl_eve = "topic readwrite chat/#\ntopic write $CONTROL/chat/v1\n";
    const char *acl_no_read = "topic write chat/#\ntopic write $CONTROL/chat/v1\n";

    sec_write_in(b, "acl", acl_eve);
    ts_broker_launch(b);
    alice = harness_client_connect(b, "alice", NULL);
    eve = harness_client_connect(b, "eve", NULL);
    harness_client_subscribe(eve, "chat/room1", 0); /* joins */
    harness_client_disconnect(eve);
    for (int i = 0; i < 50; i++)
        harness_client_publish(alice, "chat/room1", "secret", 1);
    eve = harness_client_connect(b, "eve", NULL);
    harness_client_subscribe(eve, "chat/room1", 0);
    m = harness_client_receive_if(eve, sec_on_topic, (void *)HARNESS_RESPONSE_TOPIC, WAIT_MS);
    ASSERT(m != NULL && harness_page_parse(m, &p) && p.first == 1 && p.last == 5);
    harness_page_free(&p);
    harness_msg_free(m);
    /* The operator takes eve's read right away. */
    sec_write_in(b, "acl", acl_no_read);
    ts_broker_reload(b);
    /* Her ack is refused (she may not read the group: nothing to ack, and
     * the answer would tell her the head), and her catch-up ends. */
    resp = harness_request(
        eve, "{\"commands\":[{\"command\":\"ack\",\"group\":\"room1\",\"id\":5}]}", WAIT_MS);
    sec_expect_error_prefix(eve, resp, "ack", "the broker does not let you read this group");
    cJSON_Delete(resp);
    harness_client_expect_none(eve, QUIET_MS, "no page after the revocation");
    harness_client_disconnect(eve);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * 14. A persistent session resumed without subscribing again
 * ========================================================================= */

static void case_persistent_session(void)
{
    ts_broker_conf conf = {.lines = (const char *const[]){"acl_file @DIR@/acl", NULL}};
    ts_broker *b;
    harness_client_opts po = {.client_id = "listener", .persistent = true};
    harness_client *alice, *l;
    harness_msg *m;

    /* Where the broker cannot be asked, a non-member's subscribe waits for
     * the broker's read check of each message. */
    setenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK", "1", 1);
    setenv("MOSQUITTO_CHAT_TEST_NO_EMULATION", "1", 1);
    b = ts_broker_create(&conf);
    sec_write_in(b, "acl", acl_public);
    ts_broker_launch(b);
    alice = harness_client_connect(b, "alice", NULL);
    harness_client_publish(alice, "chat/room1", "first", 1);
    l = harness_client_connect_opts(b, &po);
    harness_client_subscribe(l, "chat/room1", 1);
    harness_client_disconnect(l);
    l = harness_client_connect_opts(b, &po); /* resumes: no subscribe */
    harness_client_publish(alice, "chat/room1", "live", 1);
    m = harness_client_receive_if(l, sec_on_topic, (void *)"chat/room1", WAIT_MS);
    ASSERTF(m != NULL && strstr(m->payload, "\"body\":\"live\"") != NULL,
            "the resumed session got no live message");
    harness_msg_free(m);
    harness_client_disconnect(l);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
    unsetenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
    unsetenv("MOSQUITTO_CHAT_TEST_NO_EMULATION");
}

/* ===========================================================================
 * main
 * ========================================================================= */

static const ts_case cases[] = {
    {"unreadable_config", case_unreadable_config},
    {"reload_acl", case_reload_acl},
    {"read_check", case_read_check},
    {"read_fallback", case_read_fallback},
    {"forged_answers", case_forged_answers},
    {"namespaces", case_namespaces},
    {"persistent_session", case_persistent_session},
    {"reload_rejected", case_reload_rejected},
    {"revoked_midway", case_revoked_midway},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_sec_", cases, sizeof cases / sizeof cases[0]);
}
