/* test_refusal.c: a refused message is reported to its sender with the
 * plugin's reason and, as the error entry of docs/protocol.md promises
 * ({"command":"publish","group":..,"cid":..,"error":..}), with the cid the
 * library gave it, so the application knows which message failed; and
 * chat_client_flush counts it. Both MQTT 3.1.1 and MQTT 5. */
#include "ct.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_client.h"

static int g_missing_cid; /* refusals reported without the message's cid */

struct seen {
    pthread_mutex_t mu;
    int refused;
    char cid[80];
    char reason[256];
};

static void on_event(void *arg, const chat_client_event *ev)
{
    struct seen *s = arg;

    if (ev->type != CHAT_CLIENT_EV_SEND_REFUSED)
        return;
    pthread_mutex_lock(&s->mu);
    s->refused++;
    snprintf(s->cid, sizeof s->cid, "%s", ev->cid ? ev->cid : "(none)");
    snprintf(s->reason, sizeof s->reason, "%s", ev->reason ? ev->reason : "(none)");
    pthread_mutex_unlock(&s->mu);
}

/* Sends body to group as username and checks the refusal's report. */
static void check_refusal(const ts_broker *b, int version, const char *user, const char *group,
                          const char *body, const char *why)
{
    chat_client_options o = {0};
    struct seen s;
    chat_client *c = NULL;
    char cid[80];
    size_t refused = 0;
    chat_client_err err;
    int64_t deadline;

    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    o.port = ts_broker_port(b);
    o.client_id = user;
    o.username = user;
    o.password = user; /* as the broker knows test users (ts_broker_conf.users) */
    o.mqtt_version = version;
    o.on_event = on_event;
    o.arg = &s;
    CHECK(chat_client_create(&o, &c) == CHAT_CLIENT_OK, "create: %s", chat_client_reason());
    CHECK(chat_client_connect(c, 10000) == CHAT_CLIENT_OK, "connect: %s", chat_client_reason());
    err = chat_client_send(c, group, body, cid, sizeof cid);
    CHECK(err == CHAT_CLIENT_OK, "send: %s", chat_client_strerror(err));
    err = chat_client_flush(c, 10000, &refused);
    CHECK(err == CHAT_CLIENT_OK, "flush: %s", chat_client_strerror(err));
    CHECK(refused == 1, "MQTT %d, %s: flush counted %zu refusals", version, why, refused);
    deadline = ts_now_ms() + 5000;
    while (ts_now_ms() < deadline) {
        int n;
        pthread_mutex_lock(&s.mu);
        n = s.refused;
        pthread_mutex_unlock(&s.mu);
        if (n > 0)
            break;
        ts_sleep_ms(10);
    }
    chat_client_destroy(c);
    CHECK(s.refused == 1, "MQTT %d, %s: %d refusal events", version, why, s.refused);
    CHECK(strcmp(s.reason, why) == 0, "MQTT %d: reason \"%s\", expected \"%s\"", version, s.reason,
          why);
    ts_log("MQTT %d: \"%s\" reported for cid %s (sent as %s)", version, s.reason, s.cid, cid);
    if (strcmp(s.cid, cid) != 0)
        g_missing_cid++;
}

int main(void)
{
    const char *opts[] = {"open_groups false", "admins admin", "max_payload 64", NULL};
    ts_broker *b;
    char big[200];

    ct_init("clients_refusal");
    b = ts_broker_start_users(opts); /* closed groups: verified usernames */
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    for (int version = 4; version <= 5; version++) {
        check_refusal(b, version, "bob", "staff", "let me in", "not a member of the group");
        check_refusal(b, version, "admin", "staff", big, "payload is larger than max_payload");
    }
    ts_broker_destroy(b);
    CHECK(g_missing_cid == 0,
          "PLUGIN BUG: %d of 4 error entries of refused publishes lack the message's cid "
          "(docs/protocol.md, Refused publishes: every rejected publisher gets "
          "{\"command\":\"publish\",\"group\":..,\"cid\":..,\"error\":..})",
          g_missing_cid);
    return ct_pass();
}
