/* integ_access: where mosquitto-chat sits among the broker's access
 * checkers, against a real broker, one case per argv[1] (ctest
 * integ_access_<case>; for the dynsec cases argv[2] is the path of the
 * dynamic-security plugin of the broker under test):
 *
 *   dynsec_first      issue 20.1: dynamic-security loaded before the chat
 *                     plugin: the broker does not start, and says why
 *   dynsec_after      issue 20.1: chat first, dynamic-security after, closed
 *                     groups: a non-member with the chat role gets nothing,
 *                     the wildcard refusal and dynsec's own denials hold
 *   dynsec_no_export  issue 20.2: as on builds that export no access check:
 *                     the read verdict is dynamic-security's own answer
 *                     (history to a reader, not to a writer), and follows
 *                     its changes (mosquitto_ctrl)
 *   admins_unverified issue 21.2: plugin_opt_admins on a broker that checks
 *                     no username: admin commands refused, with a reason,
 *                     and said at start
 *   per_listener      issue 21.3: per_listener_settings true, an anonymous
 *                     and a password listener, mosquitto-chat under each:
 *                     a claimed username is trusted on neither as admin
 *                     unless its listener checks it; a listener without the
 *                     plugin stops the broker
 *   unsolicited       issue 21.6: a device that only subscribed to
 *                     chat/<group> gets no reads or presence pushes
 *                     (mosquitto_sub -C 1 prints the message)
 *   persistent_once   issue 21.7: a persistent session offline while more
 *                     than max_queued_messages were sent gets each message
 *                     once (Paho C, python paho-mqtt), with and without
 *                     subscribing again
 *   admin_inspect     issue 25.2: an admin reads any group's history and
 *                     fetches its pages read-only, without joining it
 *   takeover          Mosquitto 2.1 on: a client id in use belongs to its
 *                     user: another user's connect with it is refused
 *                     (logged), the holder keeps its connection and its
 *                     presence, its own user may take it over, and once
 *                     it has left the id is anyone's; a name claimed on
 *                     an anonymous listener is not the name a password
 *                     listener checked (skipped before 2.1)
 */
#include "integ_dropin_setup.h"
#include "integ_sec.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define GROUP "secret"

static const char *g_dynsec; /* argv[2] of the dynsec cases (other_plugin: its plugin) */

/* ===========================================================================
 * dynamic-security
 * ========================================================================= */

/* Runs mosquitto_ctrl dynsec <args...> against b as its admin. */
static void ctrl(ts_broker *b, const char *const *args)
{
    char port[16];
    const char *argv[32] = {ts_broker_program("mosquitto_ctrl"),
                            "-h",
                            "127.0.0.1",
                            "-p",
                            port,
                            "-u",
                            "admin",
                            "-P",
                            dropin_password("admin"),
                            "dynsec"};
    size_t n = 10;
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    for (size_t i = 0; args[i] != NULL && n + 1 < sizeof argv / sizeof argv[0]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    ts_run_ok(argv);
}

/* Gives dynamic-security's client name the role rolename in b's
 * configuration file (b not started yet). */
static void dynsec_give_role(ts_broker *b, const char *name, const char *rolename)
{
    char path[512];
    char *text;
    cJSON *root, *client;
    bool given = false;

    snprintf(path, sizeof path, "%s/dynsec.json", ts_broker_dir(b));
    text = ts_read_file(path, NULL);
    ASSERTF(text != NULL, "no %s", path);
    root = cJSON_Parse(text);
    free(text);
    cJSON_ArrayForEach(client, cJSON_GetObjectItemCaseSensitive(root, "clients"))
    {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(client, "username");
        cJSON *roles = cJSON_GetObjectItemCaseSensitive(client, "roles");
        if (cJSON_IsString(u) && strcmp(u->valuestring, name) == 0) {
            cJSON *r = cJSON_CreateObject();
            if (!cJSON_IsArray(roles))
                roles = cJSON_AddArrayToObject(client, "roles");
            cJSON_AddStringToObject(r, "rolename", rolename);
            cJSON_AddItemToArray(roles, r);
            given = true;
        }
    }
    ASSERTF(given, "no client %s in %s", name, path);
    text = cJSON_Print(root);
    ASSERT(text != NULL);
    ts_write_text(path, text);
    cJSON_free(text);
    cJSON_Delete(root);
}

/* A client of dynamic-security's user name (its password: dropin_password). */
static harness_client *user(ts_broker *b, const char *id, const char *name, int version)
{
    char pw[64];
    snprintf(pw, sizeof pw, "%s", dropin_password(name));
    harness_client_opts o = {
        .client_id = id, .username = name, .password = pw, .mqtt_version = version};
    return harness_client_connect_opts(b, &o);
}

static void case_dynsec_first(void)
{
    ts_broker *b = dropin_create_dynsec(NULL, false);
    int status = ts_broker_try_launch(b);
    ASSERTF(status != 0, "the broker started with dynamic-security asked before mosquitto-chat");
    ASSERTF(ts_broker_log_count(b, "mosquitto-chat: not starting: the plugin") == 1,
            "no log line saying why mosquitto-chat does not start");
    ASSERTF(ts_broker_log_count(b, "put mosquitto-chat's plugin line before every other") == 1,
            "the log line does not say what to change");
    ts_broker_destroy(b);
}

static void case_dynsec_after(void)
{
    static const char *const opts[] = {"open_groups false", "admins admin", NULL};
    ts_broker *b = dropin_create_dynsec(opts, true);
    harness_client *admin, *u1, *u2, *u3;
    cJSON *resp;
    harness_msg *m;

    /* The admin of dynamic-security gets the chat role of docs/protocol.md
     * too, to send requests on $CONTROL/chat/v1: in its file, before the
     * start, since mosquitto_ctrl logs in as admin and a role given to admin
     * at run time makes dynamic-security disconnect admin's clients,
     * mosquitto_ctrl's own among them, at times before its answer. */
    dynsec_give_role(b, "admin", "chatter");
    ts_broker_launch(b);
    admin = user(b, "admin-console", "admin", 5);
    u1 = user(b, "u1-phone", "u1", 5); /* chatter, made a member */
    u2 = user(b, "u2-phone", "u2", 5); /* chatter, not a member */
    u3 = user(b, "u3-phone", "u3", 5); /* no chat rights at dynsec */

    /* The admin's username is dynamic-security's: verified, so admin. */
    resp = harness_request(
        admin, "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"u1\"}]}",
        WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "join", GROUP);
    cJSON_Delete(resp);
    harness_client_subscribe(u1, "chat/" GROUP, 1);
    /* A non-member with the chat role: refused by the plugin, whatever
     * dynamic-security would answer; the wildcard too. */
    ASSERTF(harness_client_try_subscribe(u2, "chat/" GROUP, 1) >= 0x80,
            "a non-member subscribed to a closed group");
    ASSERTF(harness_client_try_subscribe(u2, "chat/#", 1) >= 0x80, "chat/# was granted");
    harness_client_publish(u1, "chat/" GROUP, "for members only", 1);
    m = harness_client_receive_if(u1, sec_on_topic, (void *)"chat/" GROUP, WAIT_MS);
    ASSERTF(m != NULL && strstr(m->payload, "for members only"), "the member missed the message");
    harness_msg_free(m);
    harness_barrier(u2); /* anything the broker had for u2 came before this answer */
    sec_expect_none_on(u2, "chat/" GROUP, 0);
    /* dynamic-security's own denial: u3 may not publish to the chat. */
    (void)harness_client_publish_bytes(u3, "chat/" GROUP, "sneaked", 7, 1, NULL);
    harness_expect_store(admin, GROUP, 1);
    harness_client_disconnect(u3);
    harness_client_disconnect(u2);
    harness_client_disconnect(u1);
    harness_client_disconnect(admin);
    ts_broker_destroy(b);
}

/* As on a build that exports no access check (upstream 2.0.x): the plugin
 * asks dynamic-security's own check, and follows what mosquitto_ctrl
 * changes. */
static void case_dynsec_no_export(void)
{
    if (ts_broker_version() >= 20100) {
        /* 2.1 exports its check, and loads plugins so that
         * dynamic-security's own cannot be called: without the export
         * (the test hook) nothing can be worked out, and history fails
         * closed. */
        setenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK", "1", 1);
        ts_broker *b = dropin_create_dynsec(NULL, true);
        ts_broker_launch(b);
        harness_client *u1 = user(b, "u1-phone", "u1", 4);
        harness_client_publish(u1, "chat/room1", "hello", 1);
        cJSON *resp = harness_request(
            u1, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}", WAIT_MS);
        sec_expect_error_prefix(u1, resp, "history", "history is unavailable");
        cJSON_Delete(resp);
        harness_client_disconnect(u1);
        ts_broker_destroy(b);
        unsetenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
        return;
    }
    setenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK", "1", 1);
    ts_broker *b = dropin_create_dynsec(NULL, true);
    harness_client *u1, *u3;
    cJSON *resp;

    ts_broker_launch(b);
    u1 = user(b, "u1-phone", "u1", 4);
    harness_client_publish(u1, "chat/room1", "hello", 1);
    resp = harness_request(u1, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "history", "room1");
    cJSON_Delete(resp);
    /* u3 gets a role that may send but not receive, and joins by sending. */
    ctrl(b, (const char *const[]){"createRole", "writer", NULL});
    ctrl(b, (const char *const[]){"addRoleACL", "writer", "publishClientSend", "chat/#", "allow",
                                  NULL});
    ctrl(b, (const char *const[]){"addRoleACL", "writer", "subscribePattern", "chat/#", "allow",
                                  NULL});
    ctrl(b, (const char *const[]){"addRoleACL", "writer", "publishClientReceive", "chat/#", "deny",
                                  NULL});
    ctrl(b, (const char *const[]){"addRoleACL", "writer", "publishClientSend", "$CONTROL/chat/v1",
                                  "allow", NULL});
    ctrl(b, (const char *const[]){"addClientRole", "u3", "writer", NULL});
    u3 = user(b, "u3-sensor", "u3", 4);
    harness_client_publish(u3, "chat/room1", "reading 42", 1);
    harness_expect_store(u1, "room1", 2);
    resp = harness_request(u3, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    sec_expect_error_prefix(u3, resp, "history", "the broker does not let you read this group");
    cJSON_Delete(resp);
    /* dynamic-security lets it read now (and disconnects the clients of the
     * role it changed): history follows at once. */
    ctrl(b,
         (const char *const[]){"removeRoleACL", "writer", "publishClientReceive", "chat/#", NULL});
    ctrl(b, (const char *const[]){"addRoleACL", "writer", "publishClientReceive", "chat/#", "allow",
                                  NULL});
    ASSERTF(harness_client_wait_lost(u3, WAIT_MS), "dynamic-security did not disconnect u3");
    harness_client_destroy(u3);
    u3 = user(b, "u3-sensor", "u3", 4);
    resp = harness_request(u3, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "history", "room1");
    cJSON_Delete(resp);
    harness_client_disconnect(u3);
    harness_client_disconnect(u1);
    ts_broker_destroy(b);
    unsetenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
}

/* ===========================================================================
 * Identity: admins and listeners
 * ========================================================================= */

static void case_admins_unverified(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"admins admin", NULL});
    harness_client *fake = harness_client_connect(b, "fake-admin", "admin");
    cJSON *resp = harness_request(fake, "{\"commands\":[{\"command\":\"groups\"}]}", WAIT_MS);
    sec_expect_error_prefix(fake, resp, "groups",
                            "admin commands need a username the broker verifies");
    cJSON_Delete(resp);
    ASSERTF(ts_broker_log_count(b, "usernames not verified by the broker: admin commands and "
                                   "closed groups are refused") == 1,
            "the start log does not say that admin commands are refused");
    harness_client_disconnect(fake);
    ts_broker_destroy(b);

    /* The same with a password file: an admin. */
    b = ts_broker_start_users((const char *const[]){"admins admin", NULL});
    harness_client *real = harness_client_connect(b, "real-admin", "admin");
    resp = harness_request(real, "{\"commands\":[{\"command\":\"groups\"}]}", WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "groups", NULL);
    cJSON_Delete(resp);
    harness_client_disconnect(real);
    ts_broker_destroy(b);
}

/* per_listener_settings true: the harness's listener stays anonymous; a
 * second one checks passwords. mosquitto-chat is loaded under both. */
static void case_per_listener(void)
{
    char second[64], plugin[PATH_MAX + 16];
    int port2 = ts_free_port();
    snprintf(second, sizeof second, "listener %d 127.0.0.1", port2);
    snprintf(plugin, sizeof plugin, "plugin %s", ts_broker_plugin_path());
    const char *const top[] = {"per_listener_settings true", NULL};
    const char *const after[] = {second, "password_file @DIR@/passwd", "allow_anonymous false",
                                 plugin, NULL};
    ts_broker_conf conf = {
        .plugin_opts = (const char *const[]){"admins admin", NULL}, .top = top, .after = after};
    ts_broker *b = ts_broker_create(&conf);
    sec_make_passwd(b, (const char *const[]){"admin", "admin-pw", NULL});
    sec_suppress_config_leaks(b); /* 2.0.11: plugin lines inside listeners */
    ts_broker_launch(b);

    /* On the anonymous listener anyone may claim "admin": no admin. */
    harness_client *fake = harness_client_connect(b, "fake-admin", "admin");
    cJSON *resp = harness_request(fake, "{\"commands\":[{\"command\":\"groups\"}]}", WAIT_MS);
    sec_expect_error_prefix(fake, resp, "groups",
                            "admin commands need a username the broker verifies");
    cJSON_Delete(resp);
    /* On the password listener the same name is the admin's. */
    harness_client_opts o = {
        .client_id = "real-admin", .username = "admin", .password = "admin-pw", .port = port2};
    harness_client *real = harness_client_connect_opts(b, &o);
    resp = harness_request(real, "{\"commands\":[{\"command\":\"groups\"}]}", WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "groups", NULL);
    cJSON_Delete(resp);
    /* Both listeners' clients are one chat: a message crosses. */
    harness_client_subscribe(real, "chat/lobby", 1);
    harness_client_publish(fake, "chat/lobby", "hi from the anonymous side", 1);
    harness_msg *m = harness_client_receive_if(real, sec_on_topic, (void *)"chat/lobby", WAIT_MS);
    ASSERTF(m != NULL && strstr(m->payload, "anonymous side"),
            "the message did not cross listeners");
    /* The name claimed on the anonymous listener is not the admin's: its
     * sender is named by its client id. */
    ASSERTF(strstr(m->payload, "\"from\":\"~fake-admin\"") != NULL, "sender named in %s",
            m->payload);
    harness_msg_free(m);
    harness_client_disconnect(real);
    harness_client_disconnect(fake);
    ts_broker_destroy(b);

    /* A listener without the plugin: its clients would chat unchecked. */
    const char *const bare[] = {second, NULL};
    ts_broker_conf c2 = {.top = top, .after = bare};
    b = ts_broker_create(&c2);
    ASSERTF(ts_broker_try_launch(b) != 0, "the broker started with a listener without the plugin");
    ASSERTF(ts_broker_log_count(b, "does not load mosquitto-chat") == 1,
            "no log line naming the listener without the plugin");
    ts_broker_destroy(b);
}

/* ===========================================================================
 * Pushes and persistent sessions
 * ========================================================================= */

static bool is_presence_of(const harness_msg *m, void *arg)
{
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 &&
           strstr(m->payload, "\"command\":\"presence\"") && strstr(m->payload, arg);
}

static void case_unsolicited(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"receipt_interval 100", NULL});
    harness_client_opts ao = {.client_id = "alice", .username = "alice", .pushes = true};
    harness_client *alice = harness_client_connect_opts(b, &ao);
    harness_client_subscribe(alice, "chat/room1", 1);
    char port[16], out[PATH_MAX], err[PATH_MAX];
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    snprintf(out, sizeof out, "%s/sub.out", ts_broker_dir(b));
    snprintf(err, sizeof err, "%s/sub.err", ts_broker_dir(b));
    /* bob's device subscribes to the group alone, with mosquitto_sub. */
    char *const argv[] = {(char *)"mosquitto_sub",
                          "-h",
                          "127.0.0.1",
                          "-p",
                          port,
                          "-i",
                          "bob-sensor",
                          "-u",
                          "bob",
                          "-q",
                          "1",
                          "-t",
                          "chat/room1",
                          "-C",
                          "1",
                          "-v",
                          NULL};
    pid_t sub = ts_spawn(argv, NULL, NULL, out, err);

    /* Its subscription counts it online; the push that says so goes to
     * every device of the group that asked for pushes (alice), and came to
     * bob's device as well before PROTOCOL v1.2, printed first. */
    harness_msg *m = harness_client_receive_if(alice, is_presence_of, (void *)"\"bob\"", WAIT_MS);
    ASSERTF(m != NULL, "no push said that bob's mosquitto_sub came online");
    harness_msg_free(m);
    harness_client_publish(alice, "chat/room1", "first message", 1);
    ASSERTF(ts_wait(sub, WAIT_MS) == 0, "mosquitto_sub did not exit after one message");
    char *printed = ts_read_file(out, NULL);
    ASSERTF(printed && strncmp(printed, "chat/room1 {\"id\":1,", 19) == 0 &&
                strstr(printed, "first message"),
            "mosquitto_sub -C 1 printed something else first: %s", printed ? printed : "(nothing)");
    free(printed);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

#define OFFLINE_MESSAGES 1500 /* above Mosquitto's max_queued_messages (1000) */

struct once {
    int64_t seen[OFFLINE_MESSAGES + 2];
    int64_t twice;
};

static void count_envelope(void *arg, const char *group, const cJSON *env)
{
    struct once *o = arg;
    int64_t id = harness_json_int(env, "id");
    (void)group;
    if (id >= 1 && id <= OFFLINE_MESSAGES + 1 && o->seen[id]++ > 0)
        o->twice++;
}

/* A persistent session comes back after OFFLINE_MESSAGES were sent:
 * resubscribe says whether it subscribes again (else it sends sync, as the
 * contract asks of persistent sessions). */
/* A broker for sessions that outlive their connections. Mosquitto 2.0.11
 * leaks, at exit, the subscription a resumed session makes again to a
 * filter it holds (sub__add): not ours, suppressed by name in the
 * sanitizer run. */
static ts_broker *start_sessions_broker(void)
{
    ts_broker *b = ts_broker_create(NULL);
    ts_broker_suppress_leaks(b, (const char *const[]){"sub__add", NULL});
    ts_broker_launch(b);
    return b;
}

static void persistent_once(bool resubscribe, int version)
{
    ts_broker *b = start_sessions_broker();
    harness_client *alice = harness_client_connect(b, "alice", "alice");
    harness_client_opts po = {
        .client_id = "bob-phone", .username = "bob", .persistent = true, .mqtt_version = version};
    harness_client *bob = harness_client_connect_opts(b, &po);
    struct once *o = calloc(1, sizeof *o);
    ASSERT(o != NULL);

    harness_client_subscribe(bob, "chat/room1", 1);
    harness_client_publish(alice, "chat/room1", "before", 1);
    harness_msg *m = harness_client_receive_if(bob, sec_on_topic, (void *)"chat/room1", WAIT_MS);
    ASSERT(m != NULL);
    harness_msg_free(m);
    harness_ack(bob, "room1", 1, 1);
    harness_client_disconnect(bob);
    for (int i = 0; i < OFFLINE_MESSAGES; i++)
        harness_client_publish(alice, "chat/room1", "while away", 1);
    bob = harness_client_connect_opts(b, &po);
    if (resubscribe) {
        harness_client_subscribe(bob, "chat/room1", 1);
    } else {
        cJSON *resp = harness_request(bob, "{\"commands\":[{\"command\":\"sync\"}]}", WAIT_MS);
        cJSON_Delete(resp);
    }
    harness_catchup g = {.group = "room1", .from = 2, .to = OFFLINE_MESSAGES + 1};
    harness_catch_up(bob, &g, 1, 100, 60000, count_envelope, o);
    for (int64_t id = 2; id <= OFFLINE_MESSAGES + 1; id++)
        ASSERTF(o->seen[id] == 1, "message %lld came %lld times", (long long)id,
                (long long)o->seen[id]);
    ASSERTF(o->twice == 0, "%lld messages came twice", (long long)o->twice);
    free(o);
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* The same with Debian's python3-paho-mqtt (persistent_once.py). */
static void persistent_once_python(void)
{
    ts_broker *b = start_sessions_broker();
    harness_client *alice = harness_client_connect(b, "alice", "alice");
    char port[16], last[16];
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    snprintf(last, sizeof last, "%d", OFFLINE_MESSAGES + 1);
    char *const sub[] = {(char *)"/usr/bin/python3", (char *)PERSISTENT_ONCE_PY,
                         (char *)"subscribe",        port,
                         (char *)"py-phone",         NULL};
    ASSERTF(ts_run(sub, NULL, NULL, NULL, 30000) == 0, "the python client did not subscribe");
    for (int i = 0; i < OFFLINE_MESSAGES; i++)
        harness_client_publish(alice, "chat/room1", "while away", 1);
    char *const resume[] = {(char *)"/usr/bin/python3",
                            (char *)PERSISTENT_ONCE_PY,
                            (char *)"resume",
                            port,
                            (char *)"py-phone",
                            (char *)"2",
                            last,
                            NULL};
    char err[PATH_MAX];
    snprintf(err, sizeof err, "%s/python.err", ts_broker_dir(b));
    if (ts_run(resume, NULL, NULL, err, 90000) != 0) {
        char *why = ts_read_file(err, NULL);
        FAILF("the python client did not get each message once: %s", why ? why : "");
    }
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

static void case_persistent_once(void)
{
    persistent_once(true, 4);
    persistent_once(false, 4);
    persistent_once(true, 5);
    persistent_once_python();
}

/* ===========================================================================
 * Admins inspect
 * ========================================================================= */

static void case_admin_inspect(void)
{
    ts_broker *b = ts_broker_start_users((const char *const[]){"admins admin", NULL});
    harness_client *alice = harness_client_connect(b, "alice", "alice");
    harness_client *admin = harness_client_connect(b, "admin-cli", "admin");
    cJSON *resp;

    harness_client_publish(alice, "chat/room1", "one", 1);
    harness_client_publish(alice, "chat/room1", "two", 1);
    resp = harness_request(admin,
                           "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"},"
                           "{\"command\":\"fetch\",\"group\":\"room1\",\"limit\":1}]}",
                           WAIT_MS);
    const cJSON *h = harness_response_entry(resp, 0), *f = harness_response_entry(resp, 1);
    harness_expect_ok(h, "history", "room1");
    harness_expect_ok(f, "fetch", "room1");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(h, "messages");
    ASSERTF(cJSON_GetArraySize(msgs) == 2, "history holds %d messages", cJSON_GetArraySize(msgs));
    ASSERTF(harness_json_int(f, "first") == 1 && harness_json_int(f, "last") == 1,
            "the admin's fetch did not start at the oldest message");
    cJSON_Delete(resp);
    /* Not a member: the count stays 1 (alice), and the admin has no sync line. */
    resp = harness_request(alice, "{\"commands\":[{\"command\":\"receipts\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    ASSERTF(harness_json_int(harness_response_only(resp), "members") == 1,
            "the admin's inspection made it a member");
    cJSON_Delete(resp);
    /* A non-admin may not inspect a group it is not a member of. */
    harness_client *bob = harness_client_connect(b, "bob", "bob");
    resp = harness_request(bob, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    sec_expect_error_prefix(bob, resp, "history", "not a member of the group");
    cJSON_Delete(resp);
    harness_client_disconnect(bob);
    harness_client_disconnect(admin);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * main
 * ========================================================================= */

/* ===========================================================================
 * another plugin that checks no access (2.1)
 * ========================================================================= */

/* Mosquitto 2.1 with a plugin after mosquitto-chat that checks no access
 * (2.1's own sparkplug-aware, argv[2]): the configuration scan cannot tell
 * it from a checker, so the plugin used to defer everything it allows, and
 * with no checker to answer, 2.1 denied every topic outside chat, and chat
 * itself (Mosquitto's own test/broker 09-plugin-evt-*, 15-persist-*,
 * 20-sparkplug-aware failed only with the plugin). On 2.1 it now answers
 * "no opinion": the broker decides as without it, and the plugin's own
 * refusals still hold. */
static void case_other_plugin(void)
{
    if (ts_broker_version() < 20100)
        ts_skip("Mosquitto %d: no \"no opinion\" answer before 2.1", ts_broker_version());
    if (g_dynsec == NULL || access(g_dynsec, R_OK) != 0)
        ts_skip("no plugin that checks no access (%s)", g_dynsec ? g_dynsec : "none given");
    char line[PATH_MAX + 16];
    snprintf(line, sizeof line, "plugin %s", g_dynsec);
    const char *const after[] = {line, NULL};
    ts_broker_conf conf = {.after = after};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client_opts o = {.client_id = "op-a", .mqtt_version = 5};
    harness_client *a = harness_client_connect_opts(b, &o);
    harness_msg *m;

    /* outside chat: what the broker allows with no checker */
    ASSERTF(harness_client_try_subscribe(a, "plain/topic", 1) < 0x80,
            "a subscription outside chat was refused");
    ASSERTF(harness_client_publish_bytes(a, "plain/topic", "plain", 5, 1, NULL) < 0x80,
            "a publish outside chat was refused");
    m = harness_client_receive_if(a, sec_on_topic, (void *)"plain/topic", WAIT_MS);
    ASSERTF(m != NULL, "the message outside chat did not arrive");
    harness_msg_free(m);
    /* a chat group: joined by subscribing, messages live */
    harness_client_subscribe(a, "chat/room1", 1);
    harness_client_publish(a, "chat/room1", "{\"body\":\"live\"}", 1);
    m = harness_client_receive_if(a, sec_on_topic, (void *)"chat/room1", WAIT_MS);
    ASSERTF(m != NULL && strstr(m->payload, "live"), "the chat message did not arrive");
    harness_msg_free(m);
    /* what the plugin serves itself follows the broker's read verdict,
     * which the broker gives as it would without mosquitto-chat */
    cJSON *resp = harness_request(
        a, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}", WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "history", "room1");
    cJSON_Delete(resp);
    /* the plugin's own refusals: a forged answer and the wildcard */
    ASSERTF(harness_client_publish_bytes(a, "$CONTROL/chat/v1/response", "{}", 2, 1, NULL) >= 0x80,
            "a publish to the response topic was accepted");
    ASSERTF(harness_client_try_subscribe(a, "chat/#", 1) >= 0x80, "chat/# was granted");
    harness_client_disconnect(a);
    ts_broker_destroy(b);
}

/* Mosquitto 2.1 sends the plugin's answers to a client id at the start of
 * its next pass, so a connection that took the id over in between got what
 * was meant for the one it replaced (takeover.c): another user's CONNECT
 * with a client id in use is refused, the holder stays, and its own user
 * may still take it over (a phone back on the network). */
static void case_takeover(void)
{
    if (ts_broker_version() < 20100)
        ts_skip("Mosquitto %d: answers to a client id leave before the next connect",
                ts_broker_version());
    ts_broker *b = ts_broker_start(NULL);
    harness_client_opts ao = {.client_id = "tk-phone", .username = "alice"};
    harness_client_opts eo = {.client_id = "tk-phone", .username = "eve"};
    harness_client_opts no = {.client_id = "tk-phone"};
    harness_client_opts bo = {.client_id = "tk-bob", .username = "bob"};
    harness_client *alice = harness_client_connect_opts(b, &ao);
    harness_client *bob = harness_client_connect_opts(b, &bo);
    harness_client *eve = NULL;
    harness_msg *m;
    cJSON *resp;

    harness_client_subscribe(alice, "chat/room1", 1);
    harness_client_subscribe(bob, "chat/room1", 1);
    long refusals = ts_broker_log_count(b, "refused a connection as eve with client id tk-phone");
    int rc = harness_client_try_connect(b, &eo, &eve);
    ASSERTF(rc == 5 && eve == NULL, "eve's connect with alice's client id: %d, expected 5", rc);
    ASSERTF(ts_broker_log_count(b, "refused a connection as eve with client id tk-phone") >
                refusals,
            "the refusal was not logged");
    rc = harness_client_try_connect(b, &no, &eve);
    ASSERTF(rc == 5 && eve == NULL, "a connect with no username and alice's client id: %d", rc);
    /* alice is still connected and served, and the refused connections'
     * ends took nothing of hers: presence still counts her online */
    harness_client_publish(alice, "chat/room1", "{\"body\":\"still here\"}", 1);
    m = harness_client_receive_if(alice, sec_on_topic, (void *)"chat/room1", WAIT_MS);
    ASSERTF(m != NULL && strstr(m->payload, "still here"), "alice lost her connection");
    harness_msg_free(m);
    resp = harness_request(bob, "{\"commands\":[{\"command\":\"presence\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    char *text = cJSON_PrintUnformatted(resp);
    ASSERTF(strstr(text, "\"alice\"") && !strstr(text, "\"offline\":[\"alice\""),
            "a refused connect took alice offline: %s", text);
    free(text);
    cJSON_Delete(resp);
    /* alice's own new connection takes the id over */
    harness_client *again = harness_client_connect_opts(b, &ao);
    harness_client_subscribe(again, "chat/room1", 1);
    harness_client_destroy(alice);
    /* once alice is gone, and the broker has passed a tick, the id is free */
    harness_client_disconnect(again);
    harness_client *other = NULL;
    /* each refused attempt is a round trip: a pass of the broker's loop */
    for (int i = 0; i < 50 && (rc = harness_client_try_connect(b, &eo, &other)) == 5; i++) {
    }
    ASSERTF(rc == 0 && other != NULL, "eve cannot use the client id after alice left: %d", rc);
    harness_client_disconnect(other);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);

    /* per_listener_settings: a password listener and an anonymous one. The
     * name alice claimed on the anonymous listener is nobody's: it does not
     * take over the id of the alice the password listener checked. */
    char second[64], plugin[PATH_MAX + 16];
    int port2 = ts_free_port();
    snprintf(second, sizeof second, "listener %d 127.0.0.1", port2);
    snprintf(plugin, sizeof plugin, "plugin %s", ts_broker_plugin_path());
    const char *const top[] = {"per_listener_settings true", NULL};
    const char *const after[] = {second, "password_file @DIR@/passwd", "allow_anonymous false",
                                 plugin, NULL};
    ts_broker_conf conf = {.top = top, .after = after};
    b = ts_broker_create(&conf);
    sec_make_passwd(b, (const char *const[]){"alice", "alice-pw", NULL});
    ts_broker_launch(b);
    harness_client_opts checked = {
        .client_id = "tk-phone", .username = "alice", .password = "alice-pw", .port = port2};
    harness_client_opts claimed = {.client_id = "tk-phone", .username = "alice"};
    alice = harness_client_connect_opts(b, &checked);
    eve = NULL;
    rc = harness_client_try_connect(b, &claimed, &eve);
    ASSERTF(rc == 5 && eve == NULL,
            "alice's name claimed on the anonymous listener took her id over: %d", rc);
    /* her own checked connection still may */
    again = harness_client_connect_opts(b, &checked);
    harness_client_destroy(alice);
    harness_client_disconnect(again);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"dynsec_first", case_dynsec_first},         {"dynsec_after", case_dynsec_after},
    {"dynsec_no_export", case_dynsec_no_export}, {"admins_unverified", case_admins_unverified},
    {"per_listener", case_per_listener},         {"unsolicited", case_unsolicited},
    {"persistent_once", case_persistent_once},   {"admin_inspect", case_admin_inspect},
    {"other_plugin", case_other_plugin},         {"takeover", case_takeover},
};

int main(int argc, char **argv)
{
    if (argc > 2) {
        g_dynsec = argv[2];
        dropin_use_dynsec(g_dynsec);
        argc = 2;
    }
    return ts_run_case(argc, argv, "integ_access_", cases, sizeof cases / sizeof cases[0]);
}
