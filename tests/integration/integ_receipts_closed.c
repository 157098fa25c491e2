/* integ_receipts_closed: who may learn receipts and presence, against a
 * real broker (protocol v1.1), one case per argv[1] (ctest
 * integ_receipts_<case>):
 *
 *   nonmember  closed groups: a non-member learns nothing (no count, no
 *              online list, no push), and a member removed by an admin gets
 *              no more pushes and goes offline for the others
 *   acl        behind acl_file: a member the broker does not let read the
 *              group is never online and learns nothing; where the broker
 *              cannot be asked nobody is counted online (fail closed), unless
 *              plugin_opt_read_check members
 *   revoked    a subscribed member whose read right the operator takes away
 *              (acl_file reloaded) is pushed nothing more
 */
#include "integ_receipts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * nonmember: closed groups
 * ========================================================================= */

static void case_nonmember(void)
{
    const char *opts[] = {"receipt_interval 200", "open_groups false", "admins boss", NULL};
    ts_broker *b = ts_broker_start_users(opts); /* closed groups: verified usernames */
    harness_client *boss = rcp_connect(b, "boss1", "boss", false);
    harness_client *alice = rcp_connect(b, "a1", "alice", true);
    harness_client *bob = rcp_connect(b, "b1", "bob", true);
    harness_client *eve = rcp_connect(b, "e1", "eve", true);
    struct rcp_seen sa = {0}, sb = {0};

    cJSON_Delete(
        rcp_ask(boss, "{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"alice\""));
    cJSON_Delete(rcp_ask(boss, "{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"bob\""));
    harness_client_subscribe(alice, "chat/" GROUP, 1);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    ASSERT(harness_client_try_subscribe(eve, "chat/" GROUP, 1) >= 0x80);
    harness_client_subscribe(eve, "#", 0);
    rcp_wait_push(alice, &sa, "bob", 1, 0);

    /* eve learns nothing: no count, no list, no markers, no push */
    rcp_expect_refused(eve, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"", "receipts",
                       "not a member of the group");
    rcp_expect_refused(eve, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                       "not a member of the group");
    rcp_expect_refused(eve, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":0", "read",
                       "not a member of the group");
    harness_client_publish(alice, "chat/" GROUP, "hi", 1);
    rcp_read_topic(alice, 1);
    rcp_wait_push(bob, &sb, "alice", -1, 1);
    rcp_expect_online(alice, "alice bob", 2);
    rcp_expect_no_push(eve, QUIET_MS, "eve is no member");

    /* bob is removed while subscribed: alice sees him go, he is pushed
     * nothing more */
    cJSON_Delete(
        rcp_ask(boss, "{\"command\":\"leave\",\"group\":\"" GROUP "\",\"member\":\"bob\""));
    rcp_wait_push(alice, &sa, "bob", 0, 0);
    rcp_expect_online(alice, "alice", 1);
    while (harness_client_receive_if(bob, rcp_is_push, NULL, 300) != NULL) {
        /* a push built before the removal may still arrive: drain it */
    }
    harness_client_publish(alice, "chat/" GROUP, "again", 1);
    rcp_read_topic(alice, 2);
    rcp_wait_push(alice, &sa, "alice", -1, 2);
    rcp_expect_no_push(bob, QUIET_MS, "bob was removed");
    rcp_expect_no_push(eve, 0, "eve is no member");

    harness_client_disconnect(eve);
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    harness_client_disconnect(boss);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * acl: behind the broker's own access checks
 * ========================================================================= */

/* Users w (may only write chat/GROUP) and x (reads and writes the chat),
 * the same in both files below. */
#define ACL_W_X                                                                                    \
    "user w\n"                                                                                     \
    "topic write chat/" GROUP "\n"                                                                 \
    "topic write $CONTROL/chat/v1\n"                                                               \
    "user x\n"                                                                                     \
    "topic readwrite chat/#\n"                                                                     \
    "topic write $CONTROL/chat/v1\n"

static const char acl_rw[] = "user r\n"
                             "topic readwrite chat/#\n"
                             "topic write $CONTROL/chat/v1\n" ACL_W_X;

/* acl_rw with r's read right taken away. */
static const char acl_r_revoked[] = "user r\n"
                                    "topic write chat/#\n"
                                    "topic write $CONTROL/chat/v1\n" ACL_W_X;

/* A broker with users r (reads and writes the chat) and w (may only write
 * chat/GROUP), behind acl_file. */
static ts_broker *start_rw_broker(const char *const *opts)
{
    ts_broker_conf conf = {
        .plugin_opts = opts,
        .lines = (const char *const[]){"password_file @DIR@/passwd", "acl_file @DIR@/acl", NULL},
        .no_anonymous = true};
    ts_broker *b = ts_broker_create(&conf);
    char path[512];
    snprintf(path, sizeof path, "%s/passwd", ts_broker_dir(b));
    ts_write_file(path, "", 0);
    const char *r[] = {ts_broker_program("mosquitto_passwd"), "-b", path, "r", "rpw", NULL};
    const char *w[] = {ts_broker_program("mosquitto_passwd"), "-b", path, "w", "wpw", NULL};
    const char *x[] = {ts_broker_program("mosquitto_passwd"), "-b", path, "x", "xpw", NULL};
    ts_run_ok(r);
    ts_run_ok(w);
    ts_run_ok(x);
    snprintf(path, sizeof path, "%s/acl", ts_broker_dir(b));
    ts_write_file(path, acl_rw, strlen(acl_rw));
    ts_broker_launch(b);
    return b;
}

static harness_client *connect_pw(ts_broker *b, const char *id, const char *user,
                                  const char *password, bool pushes)
{
    harness_client_opts o = {
        .client_id = id, .username = user, .password = password, .pushes = pushes};
    return harness_client_connect_opts(b, &o);
}

/* The broker's answers, asked through its exported check, or (as on
 * builds that export none, with the test hook) worked out from its
 * acl_file: the same either way. */
static void acl_asked(bool exported)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    if (!exported)
        setenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK", "1", 1);
    ts_broker *b = start_rw_broker(opts);
    harness_client *r = connect_pw(b, "r1", "r", "rpw", true);
    harness_client *w = connect_pw(b, "w1", "w", "wpw", true);
    struct rcp_seen s = {0};

    /* r's subscribe: the broker lets r read, so r joins and is online */
    harness_client_subscribe(r, "chat/" GROUP, 1);
    rcp_wait_push(r, &s, "r", 1, 0);
    /* w joins by publishing; its subscribe passes acl_file (2.0 allows every
     * subscription and checks reads) but it may not read: never online,
     * pushed nothing, told nothing */
    harness_client_publish(w, "chat/" GROUP, "from the sensor", 1);
    harness_client_subscribe(w, "chat/" GROUP, 1);
    rcp_expect_online(r, "r", 2);
    rcp_expect_refused(w, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                       "the broker does not let you read this group");
    rcp_expect_refused(w, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"", "receipts",
                       "the broker does not let you read this group");
    /* nor may it ack or mark read what it never received: the answer,
     * clamped to the head, would tell it the head, and receipts would count
     * it as a reader */
    rcp_expect_refused(w, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":1000000", "read",
                       "the broker does not let you read this group");
    rcp_expect_refused(w, "{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":1000000", "ack",
                       "the broker does not let you read this group");
    rcp_read_topic(r, 1);
    rcp_wait_push(r, &s, "r", -1, 1);
    rcp_expect_no_push(w, QUIET_MS, "w may not read the group");
    harness_client_disconnect(r);
    harness_client_disconnect(w);
    ts_broker_destroy(b);
    unsetenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
}

static void case_acl(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    acl_asked(true);
    acl_asked(false);

    /* Where the broker can neither be asked nor worked out (no exported
     * check, and a checker the plugin cannot read): nobody is counted
     * online, nor told; with read_check members, members are. */
    setenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK", "1", 1);
    setenv("MOSQUITTO_CHAT_TEST_NO_EMULATION", "1", 1);
    ts_broker *b = start_rw_broker(opts);
    harness_client *r = connect_pw(b, "r1", "r", "rpw", true);
    struct rcp_seen s = {0};
    harness_client_publish(r, "chat/" GROUP, "hello", 1); /* joins */
    harness_client_subscribe(r, "chat/" GROUP, 1);
    rcp_expect_no_push(r, QUIET_MS, "not counted online: the broker cannot be asked");
    rcp_expect_refused(r, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                       "history is unavailable: this broker cannot tell mosquitto-chat whether you "
                       "may read the group (see plugin_opt_read_check)");
    harness_client_disconnect(r);
    ts_broker_destroy(b);
    const char *members[] = {"receipt_interval 200", "read_check members", NULL};
    b = start_rw_broker(members);
    r = connect_pw(b, "r1", "r", "rpw", true);
    s = (struct rcp_seen){0};
    harness_client_publish(r, "chat/" GROUP, "hello", 1);
    harness_client_subscribe(r, "chat/" GROUP, 1);
    rcp_wait_push(r, &s, "r", 1, 0);
    rcp_expect_online(r, "r", 1);
    unsetenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
    unsetenv("MOSQUITTO_CHAT_TEST_NO_EMULATION");
    harness_client_disconnect(r);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * revoked: a read right taken away while subscribed
 * ========================================================================= */

static void case_revoked(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker *b = start_rw_broker(opts);
    harness_client *r = connect_pw(b, "r1", "r", "rpw", true);
    struct rcp_seen sr = {0}, sx = {0};
    char path[512];

    harness_client_subscribe(r, "chat/" GROUP, 1);
    rcp_wait_push(r, &sr, "r", 1, 0);
    /* the operator takes r's read right away; r stays subscribed */
    snprintf(path, sizeof path, "%s/acl", ts_broker_dir(b));
    ts_write_file(path, acl_r_revoked, strlen(acl_r_revoked));
    ts_broker_reload(b);
    rcp_expect_refused(r, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                       "the broker does not let you read this group");
    /* x comes online: x is told, r is not */
    harness_client *x = connect_pw(b, "x1", "x", "xpw", true);
    harness_client_subscribe(x, "chat/" GROUP, 1);
    rcp_wait_push(x, &sx, "x", 1, 0);
    rcp_expect_no_push(r, QUIET_MS, "r may no longer read the group");
    harness_client_disconnect(x);
    harness_client_disconnect(r);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"revoked", case_revoked},
    {"nonmember", case_nonmember},
    {"acl", case_acl},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_receipts_", cases, sizeof cases / sizeof cases[0]);
}
