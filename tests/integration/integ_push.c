/* integ_push: push notifications (protocol v1.2) against a real broker,
 * the real plugin and the loopback push server of tests/support
 * (push_server.h), one case per argv[1] (ctest integ_push_<case>):
 *
 *   register    a UnifiedPush registration (encrypted and plain), read
 *               back, listed by admin members, replaced, removed; the held
 *               answer keeps its place among a request's entries and its
 *               correlationData; one check per device at a time
 *   refused     push off, an endpoint outside push_allow (a longer host, a
 *               user-info trick, http to a name), one that does not answer
 *               as a push server, a registration naming another device, a
 *               member of no group, the bound of devices per member
 *   coalesced   an offline member is notified once per push_interval
 *               however many messages arrive, with the newest id and its
 *               unread count, the content encrypted (RFC 8291) and
 *               decrypted by the server; the figures count it
 *   online      a member online in the group is not notified, nor a sender
 *               for its own message (shown by the later notification that
 *               push_interval would have held back)
 *   gone        410 and 404 remove the registration, and the connected
 *               device hears of it
 *   retry       500, 429 with Retry-After, 413 (again without the text)
 *   matrix      a Matrix gateway: the notify request as the Push Gateway
 *               API v1 has it; a rejected pushkey removes the registration
 *   webhook     an operator's webhook, by name
 *   hang        a gateway that never answers holds up neither the broker
 *               nor another member's notification
 *   kill9       kill -9 between the store and the push: that notification
 *               is lost (at most once), the registration is not, and the
 *               next message's notification counts both unread
 *   membership  the registration goes with the member's last group (leave,
 *               admin delete) and with its device (device expiry)
 *
 * With CHAT_TEST_PG_PORT (scripts/test's pg stage) the broker's store is
 * PostgreSQL and every case runs against it.
 */
#include "harness.h"
#include "push_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_MS 10000
#define G "room"
#define DAY_S 86400L

static ts_push_server *srv;

/* ===========================================================================
 * Helpers
 * ========================================================================= */

/* The push server, started at a case's first need of it. */
static ts_push_server *server(void)
{
    if (!srv) {
        srv = ts_push_server_start();
    }
    return srv;
}

/* Writes an acl_file named acl into b's directory (as integ_sec's
 * helper does). */
static void push_write_acl(ts_broker *b, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/acl", ts_broker_dir(b));
    ts_write_text(path, text);
}

/* The users of these cases, each with its name as password (admin commands
 * need a username the broker verifies). */
static const char *const push_users[] = {"admin", "alice", "bob",    "carol",
                                         "dave",  "zoe",   "xavier", NULL};

/* A broker posting to srv only (push_allow its root), with extra options
 * (NULL-terminated, may be NULL). */
static ts_broker *start_broker(const char *const *extra)
{
    static char allow[96];
    server();
    const char *opts[24];
    size_t n = 0;
    snprintf(allow, sizeof allow, "push_allow http://127.0.0.1:%d/", ts_push_server_port(srv));
    opts[n++] = allow;
    opts[n++] = "admins admin";
    for (size_t i = 0; extra && extra[i] && n + 1 < sizeof opts / sizeof opts[0]; i++) {
        opts[n++] = extra[i];
    }
    opts[n] = NULL;
    ts_broker_conf conf = {.plugin_opts = opts, .users = push_users};
    return ts_broker_start_conf(&conf);
}

static harness_client *connect_as(ts_broker *b, const char *id, const char *user)
{
    harness_client_opts o = {.client_id = id, .username = user};
    return harness_client_connect_opts(b, &o);
}

static bool is_answer_to(const harness_msg *m, void *arg)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"correlationData\":\"%s\"", (const char *)arg);
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && strstr(m->payload, needle) != NULL;
}

/* Sends one command (a JSON object text without its closing brace) with a
 * fresh correlationData and returns the response holding its entry. */
static cJSON *ask(harness_client *c, const char *cmd)
{
    static int seq;
    char corr[32], req[4096];
    snprintf(corr, sizeof corr, "p%d", ++seq);
    snprintf(req, sizeof req, "{\"commands\":[%s,\"correlationData\":\"%s\"}]}", cmd, corr);
    harness_client_publish(c, HARNESS_CONTROL_TOPIC, req, 1);
    harness_msg *m = harness_client_receive_if(c, is_answer_to, corr, WAIT_MS);
    if (!m) {
        FAILF("%s: no answer to %s", harness_client_id(c), req);
    }
    cJSON *root = harness_json_object(m);
    harness_msg_free(m);
    return root;
}

/* cmd's only entry must be the error want, whole (docs/protocol.md). */
static void expect_error(harness_client *c, const char *cmd, const char *want)
{
    cJSON *resp = ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(e, "error");
    ASSERTF(cJSON_IsString(err) && strcmp(err->valuestring, want) == 0,
            "%s: %s answered %s, want the error \"%s\"", harness_client_id(c), cmd,
            cJSON_IsString(err) ? err->valuestring : "no error", want);
    ASSERTF(!cJSON_GetObjectItemCaseSensitive(e, "registered"), "a refusal says registered");
    cJSON_Delete(resp);
}

static void join(harness_client *c, const char *group)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "{\"command\":\"join\",\"group\":\"%s\"", group);
    cJSON *resp = ask(c, cmd);
    harness_expect_ok(harness_response_only(resp), "join", group);
    cJSON_Delete(resp);
}

/* Registers c's device with cmd (the push command's fields after
 * "kind"), expecting success and kind back. */
static void register_ok(harness_client *c, const char *fields, const char *kind)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "{\"command\":\"push\",%s", fields);
    cJSON *resp = ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "push", NULL);
    ASSERTF(harness_json_bool(e, "registered") && !strcmp(harness_json_str(e, "kind"), kind),
            "%s: %s answered %s", harness_client_id(c), cmd, cJSON_PrintUnformatted(resp));
    cJSON_Delete(resp);
}

/* A UnifiedPush endpoint at path on srv for c's device, with keys k (NULL:
 * plaintext). */
static void register_up(harness_client *c, const char *path, const ts_push_keys *k)
{
    char url[128], fields[512];
    ts_push_endpoint(srv, path, TS_PUSH_UNIFIEDPUSH, k);
    ts_push_url(srv, path, url, sizeof url);
    if (k) {
        snprintf(fields, sizeof fields,
                 "\"kind\":\"unifiedpush\",\"endpoint\":\"%s\",\"p256dh\":\"%s\",\"auth\":\"%s\"",
                 url, k->p256dh, k->auth_b64);
    } else {
        snprintf(fields, sizeof fields, "\"kind\":\"unifiedpush\",\"endpoint\":\"%s\"", url);
    }
    register_ok(c, fields, "unifiedpush");
}

/* A member's device (id, user) in group G, registered at path (encrypted),
 * then disconnected: offline in G. */
static void offline_member(ts_broker *b, const char *id, const char *user, const char *path)
{
    ts_push_keys k;
    ts_push_keys_new(&k);
    harness_client *c = connect_as(b, id, user);
    join(c, G);
    register_up(c, path, &k);
    harness_client_disconnect(c);
}

/* The kind c's device's registration reads back as. */
static char *status_of(harness_client *c)
{
    static char kind[32];
    cJSON *resp = ask(c, "{\"command\":\"push\"");
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "push", NULL);
    snprintf(kind, sizeof kind, "%s", harness_json_str(e, "kind"));
    ASSERT(harness_json_bool(e, "registered") == (strcmp(kind, "none") != 0));
    cJSON_Delete(resp);
    return kind;
}

/* Waits for the n-th request at path and checks it is a notification of
 * id from `from` with unread (-1: any) that the server found well-formed
 * (decrypted when encrypted). Returns its parsed body. */
static cJSON *expect_note(const char *path, size_t n, int64_t id, const char *from, int64_t unread,
                          ts_push_arrival **out)
{
    ts_push_arrival *a = ts_push_wait(srv, path, n, WAIT_MS);
    ASSERTF(a, "notification %zu at %s did not come", n, path);
    ASSERTF(!a->error[0], "notification %zu at %s: %s", n, path, a->error);
    ASSERTF(!strcmp(a->method, "POST"), "%s at %s", a->method, path);
    cJSON *o = cJSON_Parse(a->body);
    ASSERTF(o, "not JSON: %s", a->body);
    ASSERTF(!strcmp(harness_json_str(o, "group"), G), "group of %s", a->body);
    ASSERTF(harness_json_int(o, "id") == id, "notification %zu at %s: %s, want id %lld", n, path,
            a->body, (long long)id);
    ASSERTF(!strcmp(harness_json_str(o, "from"), from), "from of %s, want %s", a->body, from);
    ASSERTF(unread < 0 || harness_json_int(o, "unread") == unread, "%s: want unread %lld", a->body,
            (long long)unread);
    if (out) {
        *out = a;
    } else {
        ts_push_arrival_free(a);
    }
    return o;
}

/* Asserts that no request follows the n-th at path within ms: one more
 * push than the case expects comes within that (each case says why), so
 * a count taken without this wait could miss it. */
static void expect_no_more(const char *path, size_t n, int ms)
{
    ts_push_arrival *a = ts_push_wait(srv, path, n + 1, ms);
    ASSERTF(!a, "an extra request at %s: %s %s", path, a ? a->method : "", a ? a->body : "");
    ASSERT(ts_push_count(srv, path) == n);
}

static void send_n(harness_client *c, int n, const char *text)
{
    char payload[128];
    snprintf(payload, sizeof payload, "{\"body\":\"%s\"}", text);
    for (int i = 0; i < n; i++) {
        harness_client_publish(c, "chat/" G, payload, 1);
    }
}

/* Whether m announces that the device's registration was dropped. */
static bool is_dropped(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && strstr(m->payload, "\"dropped\":");
}

static int64_t stat_of(harness_client *admin, const char *figure)
{
    cJSON *resp = ask(admin, "{\"command\":\"stats\"");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(harness_response_only(resp), "figures");
    int64_t v = harness_json_int(f, figure);
    cJSON_Delete(resp);
    return v;
}

/* ===========================================================================
 * register, refused
 * ========================================================================= */

static void case_register(void)
{
    ts_broker *b = start_broker(NULL);
    ts_push_keys k;
    char url[128], req[2048];
    harness_client *a1 = connect_as(b, "a1", "alice");
    harness_client *admin = connect_as(b, "adm", "admin");

    join(a1, G);
    ASSERT(!strcmp(status_of(a1), "none"));
    ts_push_keys_new(&k);
    register_up(a1, "/up/a1", &k);
    ASSERT(!strcmp(status_of(a1), "unifiedpush"));
    /* the endpoint was asked, once, by GET */
    ts_push_arrival *g = ts_push_wait(srv, "/up/a1", 1, WAIT_MS);
    ASSERT(g && !strcmp(g->method, "GET") && g->status == 200);
    ts_push_arrival_free(g);
    /* the same endpoint again (an app that registers at each start, new
     * keys): answered without asking it again */
    ts_push_keys k2;
    ts_push_keys_new(&k2);
    register_up(a1, "/up/a1", &k2);
    ASSERTF(ts_push_count(srv, "/up/a1") == 1, "the endpoint was asked %d times",
            (int)ts_push_count(srv, "/up/a1"));
    /* read back, without its keys */
    cJSON *resp = ask(a1, "{\"command\":\"push\"");
    const cJSON *e = harness_response_only(resp);
    ts_push_url(srv, "/up/a1", url, sizeof url);
    ASSERT(!strcmp(harness_json_str(e, "endpoint"), url));
    ASSERT(harness_json_bool(e, "encrypted"));
    ASSERT(!cJSON_GetObjectItemCaseSensitive(e, "auth") &&
           !cJSON_GetObjectItemCaseSensitive(e, "p256dh"));
    cJSON_Delete(resp);
    /* admin members lists it, by origin only */
    resp = ask(admin, "{\"command\":\"members\",\"group\":\"" G "\"");
    char *text = cJSON_PrintUnformatted(resp);
    ASSERTF(strstr(text, "\"push\":[{\"device\":\"a1\",\"kind\":\"unifiedpush\",\"origin\":"),
            "members: %s", text);
    ASSERTF(!strstr(text, "/up/a1"), "members shows the endpoint's path: %s", text);
    free(text);
    cJSON_Delete(resp);

    /* A new one replaces it: plaintext, another path. */
    register_up(a1, "/up/a1-plain", NULL);
    resp = ask(a1, "{\"command\":\"push\"");
    e = harness_response_only(resp);
    ASSERT(!harness_json_bool(e, "encrypted"));
    ASSERT(strstr(harness_json_str(e, "endpoint"), "/up/a1-plain"));
    cJSON_Delete(resp);

    /* The held answer: in its place among the request's entries, with its
     * correlationData (MQTT 3.1.1: in the entry). */
    ts_push_endpoint(srv, "/up/a2", TS_PUSH_UNIFIEDPUSH, NULL);
    ts_push_url(srv, "/up/a2", url, sizeof url);
    harness_client *a2 = connect_as(b, "a2", "alice");
    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"sync\",\"replay\":false},{\"command\":\"push\","
             "\"kind\":\"unifiedpush\",\"endpoint\":\"%s\",\"correlationData\":\"held\"},"
             "{\"command\":\"push\"}]}",
             url);
    resp = harness_request(a2, req, WAIT_MS);
    ASSERT(harness_response_count(resp) == 3);
    harness_expect_ok(harness_response_entry(resp, 0), "sync", NULL);
    e = harness_response_entry(resp, 1);
    harness_expect_ok(e, "push", NULL);
    ASSERT(harness_json_bool(e, "registered") &&
           !strcmp(harness_json_str(e, "correlationData"), "held"));
    /* the status entry was answered before the check ended */
    ASSERT(!harness_json_bool(harness_response_entry(resp, 2), "registered"));
    cJSON_Delete(resp);
    ASSERT(!strcmp(status_of(a2), "unifiedpush"));

    /* One check per device at a time: while its endpoint does not answer,
     * a second registration is refused, and the broker answers others. */
    ts_push_endpoint(srv, "/up/slow", TS_PUSH_UNIFIEDPUSH, NULL);
    ts_push_hang(srv, "/up/slow", true);
    ts_push_url(srv, "/up/slow", url, sizeof url);
    snprintf(req, sizeof req,
             "{\"commands\":[{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\","
             "\"correlationData\":\"slow\"}]}",
             url);
    harness_client_publish(a2, HARNESS_CONTROL_TOPIC, req, 1);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\"",
             url);
    expect_error(a2, cmd, "bad push registration: this device's last one is still being checked");
    harness_barrier(a1);
    ts_push_hang(srv, "/up/slow", false);
    harness_msg *m = harness_client_receive_if(a2, is_answer_to, "slow", WAIT_MS);
    ASSERTF(m && strstr(m->payload, "\"registered\":true"), "the held answer: %s",
            m ? m->payload : "none");
    harness_msg_free(m);

    /* kind none removes it */
    resp = ask(a1, "{\"command\":\"push\",\"kind\":\"none\"");
    e = harness_response_only(resp);
    ASSERT(!harness_json_bool(e, "registered") && !strcmp(harness_json_str(e, "kind"), "none"));
    cJSON_Delete(resp);
    ASSERT(!strcmp(status_of(a1), "none"));
    ASSERT(!strcmp(status_of(a2), "unifiedpush"));
    harness_client_disconnect(a1);
    harness_client_disconnect(a2);
    harness_client_disconnect(admin);
    ts_broker_destroy(b);
}

static void case_refused(void)
{
    char url[128], cmd[1024];
    /* Push off: no push_allow. */
    ts_broker *off = ts_broker_start(NULL);
    server();
    harness_client *c = connect_as(off, "x1", "xavier");
    expect_error(c, "{\"command\":\"push\"", "push is not enabled");
    expect_error(c, "{\"command\":\"push\",\"kind\":\"none\"", "push is not enabled");
    harness_client_disconnect(c);
    ts_broker_destroy(off);

    ts_broker *b = start_broker(NULL);
    harness_client *a1 = connect_as(b, "a1", "alice");
    harness_client *a2 = connect_as(b, "a2", "alice");
    harness_client *z1 = connect_as(b, "z1", "zoe");
    /* a member of no group */
    ts_push_endpoint(srv, "/up/z1", TS_PUSH_UNIFIEDPUSH, NULL);
    snprintf(cmd, sizeof cmd, "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\"",
             ts_push_url(srv, "/up/z1", url, sizeof url));
    expect_error(z1, cmd, "bad push registration: join a group first");
    join(a1, G);

    /* outside push_allow: http://127.0.0.1:<port>/ */
    static const char *const outside[] = {
        "https://push.example/up",
        "http://127.0.0.1:1/up",
        "http://127.0.0.2/up",
    };
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        snprintf(cmd, sizeof cmd,
                 "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\"", outside[i]);
        expect_error(a1, cmd, "endpoint not allowed");
    }
    /* user info, http to a name, a file */
    snprintf(cmd, sizeof cmd,
             "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"http://127.0.0.1:%d@"
             "evil.example/\"",
             ts_push_server_port(srv));
    expect_error(a1, cmd, "bad push registration: not a URL (or one with a user name or password)");
    expect_error(a1,
                 "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"http://"
                 "localhost/up\"",
                 "bad push registration: the URL must be https (http only to a loopback "
                 "address)");
    expect_error(a1,
                 "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"file:///etc/"
                 "passwd\"",
                 "bad push registration: the URL must be https (or http to a loopback address)");
    expect_error(a1,
                 "{\"command\":\"push\",\"kind\":\"matrix\",\"url\":\"https://gw.example/n\","
                 "\"app_id\":\"a\",\"pushkey\":\"k\"",
                 "endpoint not allowed");
    /* an endpoint that does not answer as a push server: 404, or 200 with
     * something else; nothing is stored */
    ts_push_endpoint(srv, "/up/not-up", TS_PUSH_UNIFIEDPUSH, NULL);
    ts_push_discovery(srv, "/up/not-up", 404);
    snprintf(cmd, sizeof cmd, "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\"",
             ts_push_url(srv, "/up/not-up", url, sizeof url));
    expect_error(a1, cmd, "endpoint did not answer as a push server");
    ts_push_discovery(srv, "/up/not-up", 0);
    expect_error(a1, cmd, "endpoint did not answer as a push server");
    snprintf(cmd, sizeof cmd, "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\"",
             ts_push_url(srv, "/nowhere", url, sizeof url));
    expect_error(a1, cmd, "endpoint did not answer as a push server");
    ASSERT(!strcmp(status_of(a1), "none"));

    /* A device registers, and removes, its own registration only. */
    register_up(a1, "/up/a1", NULL);
    snprintf(cmd, sizeof cmd,
             "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\",\"device\":\"a1\"",
             ts_push_url(srv, "/up/a2", url, sizeof url));
    expect_error(a2, cmd,
                 "bad push registration: a device registers itself only (no device or member "
                 "field)");
    expect_error(a2, "{\"command\":\"push\",\"kind\":\"none\",\"device\":\"a1\"",
                 "bad push registration: a device registers itself only (no device or member "
                 "field)");
    cJSON_Delete(ask(a2, "{\"command\":\"push\",\"kind\":\"none\""));
    ASSERT(!strcmp(status_of(a2), "none"));
    ASSERT(!strcmp(status_of(a1), "unifiedpush"));
    /* a bad key */
    snprintf(cmd, sizeof cmd,
             "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"%s\",\"p256dh\":"
             "\"BAAA\",\"auth\":\"AAAAAAAAAAAAAAAAAAAAAA\"",
             url);
    expect_error(a2, cmd,
                 "bad push registration: p256dh must be a P-256 public key (65 bytes, "
                 "uncompressed) in base64url");
    ASSERT(!strcmp(status_of(a1), "unifiedpush"));

    /* At most 16 devices of one member (matrix: no check to wait for). */
    char fields[512];
    snprintf(fields, sizeof fields,
             "\"kind\":\"matrix\",\"url\":\"%s\",\"app_id\":\"com.example\",\"pushkey\":\"k\"",
             ts_push_url(srv, "/_matrix/push/v1/notify", url, sizeof url));
    for (int i = 2; i <= 16; i++) {
        char id[16];
        snprintf(id, sizeof id, "a%d", i);
        harness_client *d = i == 2 ? a2 : connect_as(b, id, "alice");
        register_ok(d, fields, "matrix");
        if (d != a2) {
            harness_client_disconnect(d);
        }
    }
    harness_client *a17 = connect_as(b, "a17", "alice");
    snprintf(cmd, sizeof cmd, "{\"command\":\"push\",%s", fields);
    expect_error(a17, cmd,
                 "bad push registration: 16 devices of this member are registered already; "
                 "remove one (kind none, from that device)");
    /* ... and one of them may still replace its own */
    register_ok(a2, fields, "matrix");
    harness_client_disconnect(a17);
    harness_client_disconnect(z1);
    harness_client_disconnect(a2);
    harness_client_disconnect(a1);
    ts_broker_destroy(b);

    /* Behind the broker's own access checks (an acl_file) the plugin cannot
     * ask whether a member who is not connected may still read a group: no
     * registration, unless plugin_opt_read_check members says every member
     * may; the status and the removal still answer. */
    static const char *const acl_lines[] = {"acl_file @DIR@/acl", NULL};
    for (int members_read = 0; members_read < 2; members_read++) {
        static char allow[96];
        snprintf(allow, sizeof allow, "push_allow http://127.0.0.1:%d/", ts_push_server_port(srv));
        const char *opts[] = {allow, members_read ? "read_check members" : NULL, NULL};
        ts_broker_conf conf = {.plugin_opts = opts, .users = push_users, .lines = acl_lines};
        ts_broker *behind = ts_broker_create(&conf);
        push_write_acl(behind, "pattern readwrite chat/#\n"
                               "pattern write $CONTROL/chat/v1\n");
        ts_broker_launch(behind);
        if (!members_read) {
            ts_broker_wait_log(behind, "push notifications are off on this broker", 1, WAIT_MS);
        }
        harness_client *c1 = connect_as(behind, "c1", "carol");
        harness_client_publish(c1, "chat/" G, "hello", 1); /* joins, as the acl_file allows */
        ts_push_endpoint(srv, "/_matrix/push/v1/notify", TS_PUSH_MATRIX, NULL);
        snprintf(fields, sizeof fields,
                 "\"kind\":\"matrix\",\"url\":\"%s\",\"app_id\":\"com.example\",\"pushkey\":"
                 "\"k\"",
                 ts_push_url(srv, "/_matrix/push/v1/notify", url, sizeof url));
        snprintf(cmd, sizeof cmd, "{\"command\":\"push\",%s", fields);
        if (members_read) {
            register_ok(c1, fields, "matrix");
        } else {
            expect_error(c1, cmd,
                         "push notifications are off on this broker: behind its own access "
                         "checks mosquitto-chat cannot ask whether a member who is not connected "
                         "may read a group (see plugin_opt_read_check)");
            ASSERT(!strcmp(status_of(c1), "none"));
        }
        ASSERT(ts_broker_log_count(behind, "mosquitto-chat: push notifications are off") ==
               (members_read ? 0 : 1));
        harness_client_disconnect(c1);
        ts_broker_destroy(behind);
    }
}

/* ===========================================================================
 * coalesced, online
 * ========================================================================= */

static void case_coalesced(void)
{
    ts_broker *b =
        start_broker((const char *const[]){"push_delay 1000", "push_interval 3000", NULL});
    ts_push_arrival *first = NULL, *second = NULL;
    offline_member(b, "a1", "alice", "/up/a1");
    harness_client *bob = connect_as(b, "b1", "bob");
    harness_client *admin = connect_as(b, "adm", "admin");

    /* A burst: one notification, of the newest of it. */
    send_n(bob, 5, "burst");
    cJSON *o = expect_note("/up/a1", 2, 5, "bob", 5, &first); /* 1: the discovery GET */
    ASSERT(first->encrypted && !strcmp(first->encoding, "aes128gcm"));
    ASSERTF(!cJSON_GetObjectItemCaseSensitive(o, "body"), "a text without push_body: %s",
            first->body);
    cJSON_Delete(o);
    /* More within the interval: held back until it ends, then one
     * notification of the newest, counting every unread message. */
    send_n(bob, 3, "more");
    o = expect_note("/up/a1", 3, 8, "bob", 8, &second);
    cJSON_Delete(o);
    ASSERTF(second->at_ms - first->at_ms >= 2000,
            "the second notification came %lld ms after the first (push_interval 3000)",
            (long long)(second->at_ms - first->at_ms));
    /* Nothing more: a push too many for these messages would come by the
     * end of the interval that follows (push_interval and a second). */
    expect_no_more("/up/a1", 3, 4000);
    ASSERT(stat_of(admin, "push/sent") >= 1);
    ASSERT(stat_of(admin, "push/failed") == 0);
    ts_push_arrival_free(first);
    ts_push_arrival_free(second);
    harness_client_disconnect(bob);
    harness_client_disconnect(admin);
    ts_broker_destroy(b);
}

static void case_online(void)
{
    ts_broker *b =
        start_broker((const char *const[]){"push_delay 200", "push_interval 60000", NULL});
    offline_member(b, "a1", "alice", "/up/a1");
    offline_member(b, "c1", "carol", "/up/c1");
    offline_member(b, "d1", "dave", "/up/d1");
    /* carol online in the group, on another device */
    harness_client *c2 = connect_as(b, "c2", "carol");
    harness_client_subscribe(c2, "chat/" G, 1);
    /* alice sends, from a device that is not subscribed (so alice is
     * offline), and has it as read on that device */
    harness_client *a2 = connect_as(b, "a2", "alice");
    send_n(a2, 1, "mine");
    harness_ack(a2, G, 1, 1);
    /* dave's notification of it: the walk that decided alice and carol
     * (before dave, in name order, in one tick) is over */
    cJSON_Delete(expect_note("/up/d1", 2, 1, "alice", 1, NULL));
    /* carol goes offline; bob sends */
    harness_client_disconnect(c2);
    harness_client *bob = connect_as(b, "b1", "bob");
    send_n(bob, 1, "yours");
    /* Each one's first notification is of bob's message 2: had either been
     * notified of message 1, push_interval (60 s) would hold this one back
     * past the wait. */
    cJSON_Delete(expect_note("/up/a1", 2, 2, "bob", 1, NULL));
    cJSON_Delete(expect_note("/up/c1", 2, 2, "bob", 2, NULL));
    /* Nothing more: push_interval holds back any later one, so a push too
     * many would come in the walk that sent these (ten idle ticks cover
     * it); the first wait covers the second's time. */
    expect_no_more("/up/a1", 2, 1000);
    expect_no_more("/up/c1", 2, 0);
    harness_client_disconnect(a2);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * gone, retry
 * ========================================================================= */

static void case_gone(void)
{
    ts_broker *b = start_broker((const char *const[]){"push_delay 100", "push_interval 0", NULL});
    harness_client *admin = connect_as(b, "adm", "admin");
    /* alice's device stays connected (not in the group): it hears of it */
    harness_client *a1 = connect_as(b, "a1", "alice");
    harness_client_subscribe(a1, HARNESS_RESPONSE_TOPIC, 1);
    join(a1, G);
    register_up(a1, "/up/a1", NULL);
    ts_push_answer(srv, "/up/a1", 410, -1);
    harness_client *c1 = connect_as(b, "c1", "carol");
    harness_client_subscribe(c1, HARNESS_RESPONSE_TOPIC, 1);
    join(c1, G);
    register_up(c1, "/up/c1", NULL);
    ts_push_answer(srv, "/up/c1", 404, -1);
    harness_client *bob = connect_as(b, "b1", "bob");
    send_n(bob, 1, "hello");
    ts_push_arrival *a = ts_push_wait(srv, "/up/a1", 2, WAIT_MS);
    ASSERT(a && a->status == 410);
    ts_push_arrival_free(a);
    harness_msg *m = harness_client_receive_if(a1, is_dropped, NULL, WAIT_MS);
    ASSERTF(m && strstr(m->payload, "\"registered\":false") && strstr(m->payload, "HTTP 410"),
            "no notice of the dropped registration: %s", m ? m->payload : "none");
    harness_msg_free(m);
    ASSERT(!strcmp(status_of(a1), "none"));
    a = ts_push_wait(srv, "/up/c1", 2, WAIT_MS);
    ASSERT(a && a->status == 404);
    ts_push_arrival_free(a);
    m = harness_client_receive_if(c1, is_dropped, NULL, WAIT_MS);
    ASSERTF(m && strstr(m->payload, "HTTP 404"), "no notice of the dropped registration: %s",
            m ? m->payload : "none");
    harness_msg_free(m);
    ASSERT(!strcmp(status_of(c1), "none"));
    ASSERT(stat_of(admin, "push/removed") == 2);
    harness_client_disconnect(bob);
    harness_client_disconnect(c1);
    harness_client_disconnect(a1);
    harness_client_disconnect(admin);
    ts_broker_destroy(b);
}

static void case_retry(void)
{
    ts_broker *b = start_broker(
        (const char *const[]){"push_delay 100", "push_interval 0", "push_body true", NULL});
    ts_push_arrival *a[5] = {NULL};
    offline_member(b, "a1", "alice", "/up/a1");
    ts_push_answer(srv, "/up/a1", 500, -1);
    ts_push_answer(srv, "/up/a1", 429, 1);
    ts_push_answer(srv, "/up/a1", 413, -1);
    harness_client *bob = connect_as(b, "b1", "bob");
    send_n(bob, 1, "hello there");
    for (size_t i = 2; i <= 5; i++) {
        cJSON *o = expect_note("/up/a1", i, 1, "bob", 1, &a[i - 1]);
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(o, "body");
        if (i < 5) {
            ASSERTF(cJSON_IsString(text) && !strcmp(text->valuestring, "hello there"),
                    "attempt %zu: %s", i - 1, a[i - 1]->body);
        } else {
            /* after 413, once more without the text */
            ASSERTF(!text, "the retry after 413 still has the text: %s", a[i - 1]->body);
        }
        cJSON_Delete(o);
    }
    ASSERT(a[1]->status == 500 && a[2]->status == 429 && a[3]->status == 413 &&
           a[4]->status == 201);
    ASSERTF(a[3]->at_ms - a[2]->at_ms >= 900, "Retry-After 1 was not waited for (%lld ms)",
            (long long)(a[3]->at_ms - a[2]->at_ms));
    for (size_t i = 1; i < 5; i++) {
        ts_push_arrival_free(a[i]);
    }
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * matrix, webhook
 * ========================================================================= */

static void case_matrix(void)
{
    ts_broker *b = start_broker(
        (const char *const[]){"push_delay 100", "push_interval 0", "push_body true", NULL});
    const char *path = "/_matrix/push/v1/notify";
    char url[128], fields[512];
    harness_client *a1 = connect_as(b, "a1", "alice");
    harness_client_subscribe(a1, HARNESS_RESPONSE_TOPIC, 1);
    join(a1, G);
    ts_push_endpoint(srv, path, TS_PUSH_MATRIX, NULL);
    snprintf(fields, sizeof fields,
             "\"kind\":\"matrix\",\"url\":\"%s\",\"app_id\":\"com.example.chat.ios\",\"pushkey\":"
             "\"alice-token\"",
             ts_push_url(srv, path, url, sizeof url));
    register_ok(a1, fields, "matrix");
    harness_client *bob = connect_as(b, "b1", "bob");
    send_n(bob, 1, "hi alice");

    ts_push_arrival *a = ts_push_wait(srv, path, 1, WAIT_MS);
    ASSERTF(a && !a->error[0], "matrix: %s", a ? a->error : "no request");
    cJSON *root = cJSON_Parse(a->body);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "notification");
    ASSERT(!strcmp(harness_json_str(n, "room_id"), G));
    ASSERT(!strcmp(harness_json_str(n, "event_id"), G "/1"));
    ASSERT(!strcmp(harness_json_str(n, "sender"), "bob"));
    ASSERT(harness_json_int(cJSON_GetObjectItemCaseSensitive(n, "counts"), "unread") == 1);
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(n, "devices"), 0);
    ASSERT(!strcmp(harness_json_str(d, "app_id"), "com.example.chat.ios"));
    ASSERT(!strcmp(harness_json_str(d, "pushkey"), "alice-token"));
    ASSERT(!strcmp(harness_json_str(cJSON_GetObjectItemCaseSensitive(n, "content"), "body"),
                   "hi alice"));
    cJSON_Delete(root);
    ts_push_arrival_free(a);

    /* The gateway rejects the pushkey: the registration goes. */
    ts_push_reject(srv, path, "alice-token");
    send_n(bob, 1, "again");
    a = ts_push_wait(srv, path, 2, WAIT_MS);
    ASSERT(a && a->status == 200);
    ts_push_arrival_free(a);
    harness_msg *m = harness_client_receive_if(a1, is_dropped, NULL, WAIT_MS);
    ASSERTF(m && strstr(m->payload, "rejected"), "no notice of the rejected pushkey: %s",
            m ? m->payload : "none");
    harness_msg_free(m);
    ASSERT(!strcmp(status_of(a1), "none"));
    harness_client_disconnect(bob);
    harness_client_disconnect(a1);
    ts_broker_destroy(b);
}

static void case_webhook(void)
{
    char hooks[160];
    snprintf(hooks, sizeof hooks, "push_webhooks ops=http://127.0.0.1:%d/hook",
             ts_push_server_port(server()));
    ts_broker *b =
        start_broker((const char *const[]){"push_delay 100", "push_interval 0", hooks, NULL});
    ts_push_endpoint(srv, "/hook", TS_PUSH_WEBHOOK, NULL);
    harness_client *a1 = connect_as(b, "a1", "alice");
    join(a1, G);
    expect_error(a1, "{\"command\":\"push\",\"kind\":\"webhook\",\"name\":\"other\"",
                 "bad push registration: no such webhook (see the operator's "
                 "push_webhooks)");
    register_ok(a1, "\"kind\":\"webhook\",\"name\":\"ops\"", "webhook");
    harness_client_disconnect(a1);
    /* a plaintext UnifiedPush endpoint beside it */
    harness_client *c1 = connect_as(b, "c1", "carol");
    join(c1, G);
    register_up(c1, "/up/c1", NULL);
    harness_client_disconnect(c1);

    harness_client *bob = connect_as(b, "b1", "bob");
    send_n(bob, 1, "hook");
    ts_push_arrival *a = NULL;
    cJSON *o = expect_note("/hook", 1, 1, "bob", 1, &a);
    ASSERT(!strcmp(harness_json_str(o, "member"), "alice"));
    ASSERT(!strcmp(harness_json_str(o, "device"), "a1"));
    ASSERT(!a->encrypted);
    cJSON_Delete(o);
    ts_push_arrival_free(a);
    o = expect_note("/up/c1", 2, 1, "bob", 1, &a);
    ASSERT(!a->encrypted && !a->encoding[0]);
    ASSERTF(!cJSON_GetObjectItemCaseSensitive(o, "member"), "UnifiedPush says who: %s", a->body);
    cJSON_Delete(o);
    ts_push_arrival_free(a);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * hang, kill9, membership
 * ========================================================================= */

static void case_hang(void)
{
    ts_broker *b = start_broker((const char *const[]){"push_delay 100", "push_interval 0", NULL});
    offline_member(b, "a1", "alice", "/up/slow");
    offline_member(b, "c1", "carol", "/up/fast");
    ts_push_hang(srv, "/up/slow", true);
    harness_client *bob = connect_as(b, "b1", "bob");
    send_n(bob, 1, "one");
    /* carol's comes while alice's gateway holds its request */
    cJSON_Delete(expect_note("/up/fast", 2, 1, "bob", 1, NULL));
    /* the broker goes on: publishes are stored, requests answered */
    send_n(bob, 1, "two");
    harness_expect_store(bob, G, 2);
    cJSON_Delete(expect_note("/up/fast", 3, 2, "bob", 2, NULL));
    ASSERT(ts_push_count(srv, "/up/slow") == 1); /* only its discovery */
    ts_push_hang(srv, "/up/slow", false);
    ts_push_arrival *a = ts_push_wait(srv, "/up/slow", 2, WAIT_MS);
    ASSERT(a && a->status == 201);
    ts_push_arrival_free(a);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

static void case_kill9(void)
{
    ts_broker *b = start_broker((const char *const[]){"push_delay 3000", "push_interval 0", NULL});
    offline_member(b, "a1", "alice", "/up/a1");
    harness_client *bob = connect_as(b, "b1", "bob");
    /* stored and acknowledged, then the broker dies before push_delay */
    send_n(bob, 1, "lost");
    ts_broker_kill(b);
    harness_client_destroy(bob);
    ASSERT(ts_push_count(srv, "/up/a1") == 1); /* the discovery only */
    ts_broker_restart(b);
    bob = connect_as(b, "b1", "bob");
    send_n(bob, 1, "after");
    /* The registration is still there; the first notification is of
     * message 2 and counts message 1 unread: 1's own was lost. */
    cJSON_Delete(expect_note("/up/a1", 2, 2, "bob", 2, NULL));
    /* Nothing more: a push too many (1's after all, or 2's again) would
     * come by the next walk, push_delay later (and a second). */
    expect_no_more("/up/a1", 2, 4000);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* Whether the admin's members listing of group shows device's
 * registration. */
static bool listed(harness_client *admin, const char *group, const char *device)
{
    char cmd[128], needle[64];
    snprintf(cmd, sizeof cmd, "{\"command\":\"members\",\"group\":\"%s\"", group);
    snprintf(needle, sizeof needle, "{\"device\":\"%s\",\"kind\"", device);
    cJSON *resp = ask(admin, cmd);
    char *text = cJSON_PrintUnformatted(resp);
    bool found = strstr(text, needle) != NULL;
    free(text);
    cJSON_Delete(resp);
    return found;
}

static void case_membership(void)
{
    const char *const opts[] = {"push_delay 100", NULL};
    ts_broker *b = start_broker(opts);
    harness_client *admin = connect_as(b, "adm", "admin");
    /* leave of the only group */
    harness_client *a1 = connect_as(b, "a1", "alice");
    join(a1, "g1");
    register_up(a1, "/up/a1", NULL);
    cJSON_Delete(ask(a1, "{\"command\":\"leave\",\"group\":\"g1\""));
    ASSERT(!strcmp(status_of(a1), "none"));
    /* admin delete: of one group of two, then of the last */
    harness_client *c1 = connect_as(b, "c1", "carol");
    join(c1, "g1");
    join(c1, "g2");
    register_up(c1, "/up/c1", NULL);
    cJSON_Delete(ask(admin, "{\"command\":\"delete\",\"group\":\"g1\""));
    ASSERT(!strcmp(status_of(c1), "unifiedpush"));
    ASSERT(listed(admin, "g2", "c1"));
    cJSON_Delete(ask(admin, "{\"command\":\"delete\",\"group\":\"g2\""));
    /* a small group's deletion ends in its first step or the next tick */
    bool left = true;
    for (int i = 0; i < 500 && left; i++) {
        left = strcmp(status_of(c1), "none") != 0;
        if (left) {
            ts_sleep_ms(20);
        }
    }
    ASSERTF(!left, "carol's registration outlived the deletion of her last group");
    harness_client_disconnect(c1);
    harness_client_disconnect(a1);
    /* device expiry: the device's cursors go after 90 days unused, and in
     * open groups its member with its last one, and the registration with
     * the member, in the same write (push-with-member; in closed groups the
     * push sweep takes a registration whose device has no cursor left:
     * store_push_cases.c) */
    harness_client *d1 = connect_as(b, "d1", "dave");
    harness_client_subscribe(d1, "chat/g3", 1); /* joins, with a cursor */
    register_up(d1, "/up/d1", NULL);
    harness_client_disconnect(d1);
    harness_client_disconnect(admin);
    ts_broker_stop(b);
    ts_broker_shift_clock(b, 91L * DAY_S);
    ts_broker_restart(b);
    admin = connect_as(b, "adm", "admin");
    bool still = true;
    for (int i = 0; i < 500 && still; i++) {
        still = listed(admin, "g3", "d1");
        if (still) {
            ts_sleep_ms(20);
        }
    }
    ASSERTF(!still, "dave's registration outlived its device");
    ASSERT(ts_broker_log_count(b, "dropped 1 device cursors and 1 members (open groups") == 1);
    harness_client_disconnect(admin);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"register", case_register},
    {"refused", case_refused},
    {"coalesced", case_coalesced},
    {"online", case_online},
    {"gone", case_gone},
    {"retry", case_retry},
    {"matrix", case_matrix},
    {"webhook", case_webhook},
    {"hang", case_hang},
    {"kill9", case_kill9},
    {"membership", case_membership},
};

int main(int argc, char **argv)
{
    int rc = ts_run_case(argc, argv, "integ_push_", cases, sizeof cases / sizeof cases[0]);
    ts_push_server_stop(srv);
    return rc;
}
