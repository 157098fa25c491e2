/* test_push.c: push notifications (protocol v1.2) in the client library and
 * mqchat, against a real broker posting to the loopback push server of
 * tests/support (push_server.h):
 *
 *   - the library: chat_client_push_register (UnifiedPush with keys, then
 *     Matrix in its place), chat_client_push_status, chat_client_push_remove,
 *     a refusal with the plugin's reason, and CHAT_CLIENT_EV_PUSH_DROPPED
 *     when the endpoint answers 410 (the device learns it must register
 *     again); the notification itself arrives decrypted at the server;
 *   - mqchat: push register / status / remove for the device given with
 *     -i, their output and exit status. */
#include "ct.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_client.h"
#include "push_server.h"

#define GROUP "room"
#define WAIT_MS 10000
#define MAX_ARGS 32

static ts_push_server *srv;
static char g_port[16];
static char *g_stdout, *g_stderr;

/* What alice's callbacks saw. */
struct seen {
    pthread_mutex_t mu;
    char dropped[256]; /* the reason of CHAT_CLIENT_EV_PUSH_DROPPED, "" none */
};

static void on_event(void *arg, const chat_client_event *ev)
{
    struct seen *s = arg;
    if (ev->type != CHAT_CLIENT_EV_PUSH_DROPPED) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    snprintf(s->dropped, sizeof s->dropped, "%s", ev->reason ? ev->reason : "(none)");
    pthread_mutex_unlock(&s->mu);
}

static chat_client *make(const ts_broker *b, const char *id, const char *user, struct seen *s)
{
    chat_client_options o = {.port = ts_broker_port(b),
                             .client_id = id,
                             .username = user,
                             .on_event = s ? on_event : NULL,
                             .arg = s};
    chat_client *c = NULL;
    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    CHECK(chat_client_connect(c, WAIT_MS) == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    return c;
}

static void mqchat_run(int expect, ...)
{
    char *argv[MAX_ARGS + 4] = {(char *)MQCHAT_BIN, "-p", g_port, "--quiet"};
    char cmd[2048] = "mqchat";
    int argc = 4, status;
    va_list ap;

    va_start(ap, expect);
    for (const char *a; argc < MAX_ARGS && (a = va_arg(ap, const char *)) != NULL;) {
        argv[argc++] = (char *)a;
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " '%s'", a);
    }
    va_end(ap);
    argv[argc] = NULL;
    status = ct_run_output(argv, NULL, 30000, &g_stdout, &g_stderr);
    CHECK(status == expect, "%s: exit status %d, expected %d; stdout:\n%s\nstderr:\n%s", cmd,
          status, expect, g_stdout, g_stderr);
}

#define mqchat(expect, ...) mqchat_run(expect, __VA_ARGS__, NULL)

static void expect_out(const char *text)
{
    CHECK(strstr(g_stdout, text) != NULL, "stdout lacks \"%s\":\n%s", text, g_stdout);
}

/* ===========================================================================
 * The library
 * ========================================================================= */

static void library(ts_broker *b)
{
    struct seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ts_push_keys k;
    char url[128], gw[128];
    char *answer = NULL;
    bool registered = true;
    chat_client *alice = make(b, "alice-phone", "alice", &s);

    /* not a member of any group yet: refused, with the plugin's reason */
    ts_push_keys_new(&k);
    ts_push_endpoint(srv, "/up/alice", TS_PUSH_UNIFIEDPUSH, &k);
    ts_push_url(srv, "/up/alice", url, sizeof url);
    chat_client_push up = {
        .kind = "unifiedpush", .endpoint = url, .p256dh = k.p256dh, .auth = k.auth_b64};
    CHECK(chat_client_push_register(alice, &up) == CHAT_CLIENT_ERR_REFUSED &&
              strcmp(chat_client_reason(), "bad push registration: join a group first") == 0,
          "register before joining: %s", chat_client_reason());
    CHECK(chat_client_join(alice, GROUP, NULL, NULL) == CHAT_CLIENT_OK, "join: %s",
          chat_client_reason());
    chat_client_push outside = {.kind = "unifiedpush", .endpoint = "https://push.example/up"};
    CHECK(chat_client_push_register(alice, &outside) == CHAT_CLIENT_ERR_REFUSED &&
              strcmp(chat_client_reason(), "endpoint not allowed") == 0,
          "outside push_allow: %s", chat_client_reason());
    chat_client_push half = {.kind = "unifiedpush", .endpoint = url, .p256dh = k.p256dh};
    CHECK(chat_client_push_register(alice, &half) == CHAT_CLIENT_ERR_INVAL, "p256dh without auth");

    CHECK(chat_client_push_register(alice, &up) == CHAT_CLIENT_OK, "register: %s",
          chat_client_reason());
    CHECK(chat_client_push_status(alice, &registered, &answer) == CHAT_CLIENT_OK && registered,
          "status: %s", chat_client_reason());
    CHECK(strstr(answer, "\"kind\":\"unifiedpush\"") && strstr(answer, url) &&
              strstr(answer, "\"encrypted\":true") && !strstr(answer, "correlationData") &&
              !strstr(answer, k.auth_b64),
          "status answer: %s", answer);
    chat_client_free(answer);

    /* A Matrix pushkey in its place. */
    ts_push_endpoint(srv, "/_matrix/push/v1/notify", TS_PUSH_MATRIX, NULL);
    ts_push_url(srv, "/_matrix/push/v1/notify", gw, sizeof gw);
    chat_client_push mx = {
        .kind = "matrix", .url = gw, .app_id = "com.example.chat", .pushkey = "fcm-token-1"};
    CHECK(chat_client_push_register(alice, &mx) == CHAT_CLIENT_OK, "matrix: %s",
          chat_client_reason());
    CHECK(chat_client_push_status(alice, &registered, &answer) == CHAT_CLIENT_OK && registered &&
              strstr(answer, "\"pushkey\":\"fcm-token-1\""),
          "status after matrix: %s", answer ? answer : chat_client_reason());
    chat_client_free(answer);
    CHECK(chat_client_push_remove(alice) == CHAT_CLIENT_OK, "remove: %s", chat_client_reason());
    CHECK(chat_client_push_status(alice, &registered, NULL) == CHAT_CLIENT_OK && !registered,
          "still registered after remove");
    CHECK(chat_client_push_remove(alice) == CHAT_CLIENT_OK, "removing nothing");

    /* The endpoint says it is gone: the device hears of it as an event. */
    CHECK(chat_client_push_register(alice, &up) == CHAT_CLIENT_OK, "register again: %s",
          chat_client_reason());
    ts_push_answer(srv, "/up/alice", 410, -1);
    chat_client *bob = make(b, "bob-laptop", "bob", NULL);
    char cid[80];
    CHECK(chat_client_send(bob, GROUP, "wake up", cid, sizeof cid) == CHAT_CLIENT_OK, "send: %s",
          chat_client_reason());
    CHECK(chat_client_flush(bob, WAIT_MS, NULL) == CHAT_CLIENT_OK, "flush: %s",
          chat_client_reason());
    ts_push_arrival *a = NULL;
    for (size_t n = 1; n <= 4 && (a == NULL || strcmp(a->method, "POST") != 0); n++) {
        ts_push_arrival_free(a);
        a = ts_push_wait(srv, "/up/alice", n, WAIT_MS);
        CHECK(a != NULL, "no notification at /up/alice");
    }
    CHECK(a->status == 410 && a->encrypted && strstr(a->body, "\"from\":\"bob\""),
          "the notification: status %d, %s (%s)", a->status, a->body, a->error);
    ts_push_arrival_free(a);
    int64_t deadline = ts_now_ms() + WAIT_MS;
    for (;;) {
        pthread_mutex_lock(&s.mu);
        bool got = s.dropped[0] != '\0';
        pthread_mutex_unlock(&s.mu);
        if (got)
            break;
        CHECK(ts_now_ms() < deadline, "no CHAT_CLIENT_EV_PUSH_DROPPED");
        ts_sleep_ms(10);
    }
    CHECK(strstr(s.dropped, "410") != NULL, "dropped: %s", s.dropped);
    CHECK(chat_client_push_status(alice, &registered, NULL) == CHAT_CLIENT_OK && !registered,
          "registered after 410");
    CHECK(chat_client_disconnect(bob, 5000) == CHAT_CLIENT_OK, "disconnect bob");
    chat_client_destroy(bob);
    CHECK(chat_client_disconnect(alice, 5000) == CHAT_CLIENT_OK, "disconnect alice");
    chat_client_destroy(alice);
}

/* ===========================================================================
 * mqchat
 * ========================================================================= */

static void cli(void)
{
    char url[128];
    ts_push_endpoint(srv, "/up/carol", TS_PUSH_UNIFIEDPUSH, NULL);
    ts_push_url(srv, "/up/carol", url, sizeof url);
    mqchat(0, "-u", "carol", "join", GROUP);
    mqchat(0, "-u", "carol", "-i", "carol-phone", "push", "status");
    expect_out("carol-phone: no push registration");
    mqchat(0, "-u", "carol", "-i", "carol-phone", "push", "register", "unifiedpush", url);
    expect_out("carol-phone: registered for unifiedpush push");
    mqchat(0, "-u", "carol", "-i", "carol-phone", "push", "status");
    expect_out("carol-phone: unifiedpush endpoint=");
    expect_out(url);
    mqchat(0, "-u", "carol", "-i", "carol-phone", "--json", "push", "status");
    expect_out("\"registered\":true");
    /* another device of carol's has none */
    mqchat(0, "-u", "carol", "-i", "carol-tablet", "push", "status");
    expect_out("carol-tablet: no push registration");
    mqchat(3, "-u", "carol", "-i", "carol-phone", "push", "register", "webhook", "nope");
    mqchat(2, "-u", "carol", "push", "register", "matrix", url);
    mqchat(0, "-u", "carol", "-i", "carol-phone", "push", "remove");
    mqchat(0, "-u", "carol", "-i", "carol-phone", "push", "status");
    expect_out("carol-phone: no push registration");
}

int main(void)
{
    char allow[96];
    ct_init("clients_push");
    srv = ts_push_server_start();
    snprintf(allow, sizeof allow, "push_allow http://127.0.0.1:%d/", ts_push_server_port(srv));
    ts_broker *b = ts_broker_start((const char *const[]){allow, "push_delay 100", NULL});
    snprintf(g_port, sizeof g_port, "%d", ts_broker_port(b));
    library(b);
    cli();
    ts_broker_destroy(b);
    ts_push_server_stop(srv);
    free(g_stdout);
    free(g_stderr);
    return ct_pass();
}
