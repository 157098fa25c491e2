/* integ_redteam: the red-team attack on the access policy (issues 20 and
 * 21, branch access), one failing case per finding, against a real broker
 * (ctest integ_redteam_<case>; for the dynsec cases argv[2] is the path of
 * the broker's dynamic-security plugin). Each case says what it expects; the
 * repros in the red-team notes show the same by hand on 2.0.11, 2.0.21 and
 * 2.1.2.
 *
 *   hidden_listener  `port` and `bind_address` after a `listener` line
 *                    still make Mosquitto open its default listener (2.1
 *                    even switches the section to it); broker_conf.c does
 *                    not see it. With per_listener_settings true that
 *                    listener loads no mosquitto-chat: the broker must not
 *                    start (it does, and its clients read every group)
 *   psk_file         a psk_file checks no username: with allow_anonymous
 *                    true a client that says `admin` is no admin
 *   identity_plain   use_identity_as_username on a listener without TLS
 *                    checks no username either
 *   nested_include   an include_dir inside an included file (2.0 ignores
 *                    it in silence, 2.1 refuses it) must not make the
 *                    plugin believe it comes before dynamic-security
 *   plugin_use_order 2.1: plugins of a listener register in plugin_load
 *                    order, not plugin_use order: dynamic-security loaded
 *                    first must stop the broker
 *   twice            the plugin named twice in one list (2.1 registers both
 *                    instances): one publish must be stored once
 *   restart_away     a persistent session away across a broker restart
 *                    (Mosquitto's persistence keeps it) gets what was sent
 *                    meanwhile, as it does without a restart
 *   clean_over_persistent  a clean session that takes the client id of
 *                    a persistent one that is away (and had asked for
 *                    pushes) never asked for pushes itself: mosquitto_sub
 *                    prints the group's message, and no push
 *   clean_start_expiry  MQTT 5, Clean Start with a Session Expiry Interval
 *                    (the session outlives the connection; 2.0 reports
 *                    Clean Start only): each message once (paho-mqtt)
 *   expired_session  a persistent session that expired (no event) must not
 *                    make the next connection with its client id miss live
 *                    messages (paho-mqtt)
 */
#include "integ_sec.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *g_dynsec; /* argv[2] of the dynsec cases */

/* A client of listener port with this id (and username, password = it). */
static harness_client *on_port(ts_broker *b, int port, const char *id, const char *user)
{
    harness_client_opts o = {.client_id = id, .username = user, .password = user, .port = port};
    return harness_client_connect_opts(b, &o);
}

/* Makes the directory name in the broker's directory. */
static void mkdir_in(ts_broker *b, const char *name)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", ts_broker_dir(b), name);
    ASSERTF(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* ===========================================================================
 * Where the plugin sits, who is verified
 * ========================================================================= */

static void case_hidden_listener(void)
{
    char port_line[32];
    int port2 = ts_free_port();
    snprintf(port_line, sizeof port_line, "port %d", port2);
    const char *const top[] = {"per_listener_settings true", NULL};
    /* After the plugin: on 2.0 the default listener gets these, the harness's
     * listener keeps the plugin; on 2.1 they start the default listener's
     * section (allow_anonymous is then its own). */
    const char *const after[] = {port_line, "bind_address 127.0.0.1", "allow_anonymous true", NULL};
    ts_broker_conf conf = {.top = top, .after = after};
    ts_broker *b = ts_broker_create(&conf);
    sec_suppress_config_leaks(b);
    int status = ts_broker_try_launch(b);
    if (status == 0) {
        /* It runs: show what a client of the listener without the plugin
         * gets, then fail. */
        harness_client *alice = harness_client_connect(b, "alice", "alice");
        harness_client *spy = on_port(b, port2, "spy", "spy");
        int granted = harness_client_try_subscribe(spy, "chat/#", 1);
        harness_client_publish(alice, "chat/room1", "for members", 1);
        harness_msg *m = granted < 0x80 ? harness_client_receive_if(spy, sec_on_topic,
                                                                    (void *)"chat/room1", WAIT_MS)
                                        : NULL;
        FAILF("the broker started with a listener (port %d) that loads no mosquitto-chat; a "
              "client there was granted chat/# (%d) and %s",
              port2, granted, m ? "received a group's message" : "received nothing");
    }
    ASSERTF(ts_broker_log_count(b, "does not load mosquitto-chat") == 1,
            "no log line naming the listener without the plugin");
    ts_broker_destroy(b);
}

/* A client that names itself admin on b: no admin (unverified). */
static void expect_no_admin(ts_broker *b, const char *what)
{
    harness_client *fake = harness_client_connect(b, "fake-admin", "admin");
    cJSON *resp = harness_request(fake, "{\"commands\":[{\"command\":\"groups\"}]}", WAIT_MS);
    const cJSON *e = harness_response_only(resp);
    ASSERTF(cJSON_GetObjectItemCaseSensitive(e, "error") != NULL,
            "%s: a client that only said it was admin listed the groups as admin", what);
    sec_expect_error_prefix(fake, resp, "groups",
                            "admin commands need a username the broker verifies");
    cJSON_Delete(resp);
    harness_client_disconnect(fake);
}

static void case_psk_file(void)
{
    const char *const lines[] = {"psk_file @DIR@/psk", NULL};
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins admin", NULL},
                           .lines = lines};
    ts_broker *b = ts_broker_create(&conf);
    sec_write_in(b, "psk", "device1:deadbeef\n");
    ts_broker_launch(b);
    expect_no_admin(b, "psk_file");
    ts_broker_destroy(b);
}

static void case_identity_plain(void)
{
    const char *const lines[] = {"use_identity_as_username true", NULL};
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"admins admin", NULL},
                           .lines = lines};
    ts_broker *b = ts_broker_start_conf(&conf);
    expect_no_admin(b, "use_identity_as_username without TLS");
    ts_broker_destroy(b);
}

/* A dynamic-security file with its admin, made by the broker's own
 * mosquitto_ctrl. */
static void dynsec_init(ts_broker *b)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/dynsec.json", ts_broker_dir(b));
    const char *argv[] = {
        ts_broker_program("mosquitto_ctrl"), "dynsec", "init", path, "admin", "admin-pw", NULL};
    ts_run_ok(argv);
}

static void case_nested_include(void)
{
    char text[PATH_MAX * 2 + 128];
    const char *const lines[] = {"include_dir @DIR@/conf.d", NULL};
    ts_broker_conf conf = {.lines = lines};
    ASSERTF(g_dynsec != NULL && g_dynsec[0] != '\0', "no dynamic-security plugin to test with");
    ts_broker *b = ts_broker_create(&conf);
    dynsec_init(b);
    mkdir_in(b, "conf.d");
    mkdir_in(b, "chat.d");
    /* conf.d/00-extra.conf names a directory whose snippet loads chat: 2.0
     * never reads it; conf.d/10-dynsec.conf loads dynamic-security, which
     * the broker so asks before the harness's own chat plugin line. */
    snprintf(text, sizeof text, "include_dir %s/chat.d\n", ts_broker_dir(b));
    sec_write_in(b, "conf.d/00-extra.conf", text);
    snprintf(text, sizeof text, "plugin %s\n", ts_broker_plugin_path());
    sec_write_in(b, "chat.d/chat.conf", text);
    snprintf(text, sizeof text, "plugin %s\nplugin_opt_config_file %s/dynsec.json\n", g_dynsec,
             ts_broker_dir(b));
    sec_write_in(b, "conf.d/10-dynsec.conf", text);
    ASSERTF(ts_broker_try_launch(b) != 0,
            "the broker started with dynamic-security asked before mosquitto-chat (an "
            "include_dir the broker does not read made the plugin believe otherwise)");
    /* 2.1 refuses the nested include_dir itself. */
    ASSERTF(ts_broker_version() >= 20100 ||
                ts_broker_log_count(b, "mosquitto-chat: not starting: the plugin") == 1,
            "the broker stopped, but not because mosquitto-chat saw dynamic-security first");
    ts_broker_destroy(b);
}

static void case_plugin_use_order(void)
{
    char ds[PATH_MAX + 32], chat[PATH_MAX + 32];
    ASSERTF(g_dynsec != NULL && g_dynsec[0] != '\0', "no dynamic-security plugin to test with");
    snprintf(ds, sizeof ds, "plugin_load ds %s", g_dynsec);
    snprintf(chat, sizeof chat, "plugin_load chat %s", ts_broker_plugin_path());
    /* dynamic-security is loaded (and registers) first; the harness's
     * listener names mosquitto-chat first. (2.0 knows no plugin_load: it
     * refuses the file.) */
    const char *const top[] = {ds, "plugin_opt_config_file @DIR@/dynsec.json", chat,
                               "plugin_opt_db_path @DIR@/db", NULL};
    const char *const lines[] = {"plugin_use chat", "plugin_use ds", NULL};
    ts_broker_conf conf = {.top = top, .lines = lines, .without_chat = true};
    ts_broker *b = ts_broker_create(&conf);
    dynsec_init(b);
    int status = ts_broker_try_launch(b);
    ASSERTF(status != 0, "the broker started although dynamic-security registers before "
                         "mosquitto-chat (plugin_load order, not plugin_use order)");
    ASSERTF(ts_broker_version() < 20100 ||
                ts_broker_log_count(b, "mosquitto-chat: not starting: the plugin") == 1,
            "the broker stopped, but not because mosquitto-chat saw dynamic-security first");
    ts_broker_destroy(b);
}

static void case_twice(void)
{
    char again[PATH_MAX + 16];
    snprintf(again, sizeof again, "plugin %s", ts_broker_plugin_path());
    const char *const after[] = {again, NULL};
    ts_broker_conf conf = {.after = after};
    ts_broker *b = ts_broker_create(&conf);
    if (ts_broker_try_launch(b) != 0) {
        /* 2.0 refuses the second registration: fine. */
        ts_broker_destroy(b);
        return;
    }
    harness_client *alice = harness_client_connect(b, "alice", "alice");
    harness_client_publish(alice, "chat/room1", "once", 1);
    cJSON *resp = harness_request(
        alice, "{\"commands\":[{\"command\":\"history\",\"group\":\"room1\"}]}", WAIT_MS);
    const cJSON *e = harness_response_only(resp);
    int stored = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages"));
    ASSERTF(stored == 1, "one publish was stored %d times (head %lld)", stored,
            (long long)harness_json_int(e, "head"));
    cJSON_Delete(resp);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * Persistent sessions
 * ========================================================================= */

#define AWAY 5 /* messages sent while the device is away */

static void case_restart_away(void)
{
    const char *const lines[] = {"persistence true", "persistence_location @DIR@/", NULL};
    ts_broker_conf conf = {.lines = lines};
    ts_broker *b = ts_broker_start_conf(&conf);
    harness_client *alice = harness_client_connect(b, "alice", "alice");
    harness_client_opts po = {.client_id = "bob-sensor", .username = "bob", .persistent = true};
    harness_client *bob = harness_client_connect_opts(b, &po);

    harness_client_subscribe(bob, "chat/room1", 1);
    harness_client_publish(alice, "chat/room1", "before", 1);
    harness_msg *m = harness_client_receive_if(bob, sec_on_topic, (void *)"chat/room1", WAIT_MS);
    ASSERT(m != NULL);
    harness_msg_free(m);
    harness_ack(bob, "room1", 1, 1);
    harness_client_disconnect(bob);
    for (int i = 0; i < AWAY; i++)
        harness_client_publish(alice, "chat/room1", "while away", 1);
    harness_client_disconnect(alice);
    ts_broker_stop(b);
    ts_broker_restart(b);
    /* It comes back as mosquitto_sub -c does: no subscribe, no sync; one
     * publish of its own elsewhere is the event 2.0 needs to see it back. */
    bob = harness_client_connect_opts(b, &po);
    harness_client_publish(bob, "sensors/bob", "hello", 1);
    harness_catchup g = {.group = "room1", .from = 2, .to = AWAY + 1, .qos = 0};
    harness_catch_up(bob, &g, 1, 100, 10000, NULL, NULL);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

static bool is_presence_of(const harness_msg *m, void *arg)
{
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 &&
           strstr(m->payload, "\"command\":\"presence\"") && strstr(m->payload, arg);
}

static bool is_reads_push(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 &&
           strstr(m->payload, "\"command\":\"reads\"");
}

static void case_clean_over_persistent(void)
{
    ts_broker *b = ts_broker_start((const char *const[]){"receipt_interval 100", NULL});
    harness_client_opts ao = {.client_id = "alice", .username = "alice", .pushes = true};
    harness_client *alice = harness_client_connect_opts(b, &ao);
    harness_client_subscribe(alice, "chat/room1", 1);
    /* bob's device once kept a session and asked for pushes. */
    harness_client_opts po = {
        .client_id = "bob-sensor", .username = "bob", .persistent = true, .pushes = true};
    harness_client *bob = harness_client_connect_opts(b, &po);
    harness_client_subscribe(bob, "chat/room1", 1);
    harness_client_disconnect(bob);
    harness_msg *m =
        harness_client_receive_if(alice, is_presence_of, (void *)"\"offline\":[\"bob\"]", WAIT_MS);
    ASSERTF(m != NULL, "no push said that bob went offline");
    harness_msg_free(m);
    /* Now the same client id, a clean session, subscribed to the group only. */
    char port[16], out[PATH_MAX], err[PATH_MAX];
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    snprintf(out, sizeof out, "%s/sub.out", ts_broker_dir(b));
    snprintf(err, sizeof err, "%s/sub.err", ts_broker_dir(b));
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
                          "-W",
                          "3",
                          "-v",
                          NULL};
    pid_t sub = ts_spawn(argv, NULL, NULL, out, err);
    m = harness_client_receive_if(alice, is_presence_of, (void *)"\"online\":[\"bob\"]", WAIT_MS);
    ASSERTF(m != NULL, "no push said that bob's mosquitto_sub came online");
    harness_msg_free(m);
    harness_client_publish(alice, "chat/room1", "first message", 1);
    cJSON *resp = harness_request(
        alice, "{\"commands\":[{\"command\":\"read\",\"group\":\"room1\",\"id\":1}]}", WAIT_MS);
    cJSON_Delete(resp);
    m = harness_client_receive_if(alice, is_reads_push, NULL, WAIT_MS);
    ASSERTF(m != NULL, "no reads push after alice's read marker");
    harness_msg_free(m);
    /* mosquitto_sub stops after 3 s (-W), writing what it got. */
    (void)ts_wait(sub, WAIT_MS);
    char *printed = ts_read_file(out, NULL);
    ASSERTF(printed && strstr(printed, "first message"), "mosquitto_sub printed: %s",
            printed ? printed : "(nothing)");
    ASSERTF(!strstr(printed, "\"command\":\"presence\"") &&
                !strstr(printed, "\"command\":\"reads\""),
            "a clean session that never asked for pushes got them: %s", printed);
    free(printed);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

static void run_sessions_py(ts_broker *b, const char *what, int timeout_ms)
{
    char port[16], err[PATH_MAX];
    snprintf(port, sizeof port, "%d", ts_broker_port(b));
    snprintf(err, sizeof err, "%s/sessions.err", ts_broker_dir(b));
    char *const argv[] = {(char *)"/usr/bin/python3", (char *)REDTEAM_SESSIONS_PY, (char *)what,
                          port, NULL};
    int status = ts_run(argv, NULL, NULL, err, timeout_ms);
    if (status != 0) {
        char *text = ts_read_file(err, NULL);
        FAILF("redteam_sessions.py %s failed (status %d): %s", what, status,
              text ? text : "(no output)");
    }
}

static void case_clean_start_expiry(void)
{
    ts_broker *b = ts_broker_start(NULL);
    run_sessions_py(b, "clean_start_expiry", 100000);
    ts_broker_destroy(b);
}

static void case_expired_session(void)
{
    ts_broker *b = ts_broker_start(NULL);
    run_sessions_py(b, "expired_session", 60000);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * main
 * ========================================================================= */

static const ts_case cases[] = {
    {"hidden_listener", case_hidden_listener},
    {"psk_file", case_psk_file},
    {"identity_plain", case_identity_plain},
    {"nested_include", case_nested_include},
    {"plugin_use_order", case_plugin_use_order},
    {"twice", case_twice},
    {"restart_away", case_restart_away},
    {"clean_over_persistent", case_clean_over_persistent},
    {"clean_start_expiry", case_clean_start_expiry},
    {"expired_session", case_expired_session},
};

int main(int argc, char **argv)
{
    if (argc > 2) {
        g_dynsec = argv[2];
        argc = 2;
    }
    return ts_run_case(argc, argv, "integ_redteam_", cases, sizeof cases / sizeof cases[0]);
}
