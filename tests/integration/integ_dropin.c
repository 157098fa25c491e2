/* integ_dropin: loading mosquitto-chat changes nothing outside the chat
 * topics. For one broker setup (argv[1]; for dynsec, argv[2] is the path of
 * mosquitto_dynamic_security.so as the mosquitto package installs it, which
 * CMake finds in the library directories of the build's architecture):
 *
 *   anonymous  allow_anonymous true, no access control;
 *   passwd     password_file (made with mosquitto_passwd) + acl_file;
 *   dynsec     the dynamic-security plugin loaded after ours (its JSON made
 *              from `mosquitto_ctrl dynsec init`), allow_anonymous false;
 *
 * the same scenario runs against the broker with the plugin and against the
 * same configuration without it, and writes a transcript of what happened:
 * who may connect (MQTT 3.1.1 and 5), the SUBACK of every (user, filter), the
 * MQTT 5 PUBACK reason of every (user, topic), every message each subscriber
 * received (topic, payload, QoS, retain flag, copies) from 3.1.1 and MQTT 5
 * publishers, a retained message and a Will, and, with dynsec, an answer on
 * its own $CONTROL topic. The two transcripts must be identical. None of the
 * topics or filters is a chat topic (`chat` alone and `chatty/...` are not
 * under the prefix `chat/`).
 *
 * Then, with the plugin, the chat features work for users the broker lets
 * chat (the ACL lines and roles of docs/protocol.md), and a user the broker
 * does not let near the chat topics gets nothing from the plugin either: a
 * refused subscribe neither joins nor replays, a refused publish is not
 * stored. */
#include "harness.h"
#include "integ_dropin_setup.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 5000
#define QUIET_MS 400 /* a subscriber's queue is complete after this long without a message */
#define MAX_LINES 2000

/* Filters every user subscribes to, and topics every user publishes to. */
static const char *const filters[] = {"a/#",    "a/b",      "+/b",          "#",
                                      "b/#",    "w/only",   "users/u1/#",   "users/u3/#",
                                      "chat",   "chatty/#", "$share/g/a/b", "$CONTROL/#",
                                      "+/room1"};
static const char *const topics[] = {
    "a/b",  "a/c",          "b/x",       "c/d", "w/only", "users/u1/inbox", "users/u3/inbox",
    "chat", "chatty/room1", "news/room1"};
#define NFILTERS (sizeof filters / sizeof filters[0])
#define NTOPICS (sizeof topics / sizeof topics[0])

/* ===========================================================================
 * Transcript
 * ========================================================================= */

typedef struct transcript {
    char *lines[MAX_LINES];
    size_t n;
} transcript;

static void note(transcript *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(transcript *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ASSERTF(t->n < MAX_LINES, "transcript longer than %d lines", MAX_LINES);
    t->lines[t->n] = strdup(buf);
    ASSERT(t->lines[t->n] != NULL);
    t->n++;
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Prints the lines only one transcript has (as multisets) and returns how
 * many there are. */
static size_t print_diff(const transcript *without, const transcript *with)
{
    char **a = malloc((without->n + 1) * sizeof *a), **b = malloc((with->n + 1) * sizeof *b);
    size_t i = 0, j = 0, differ = 0;

    ASSERT(a != NULL && b != NULL);
    memcpy(a, without->lines, without->n * sizeof *a);
    memcpy(b, with->lines, with->n * sizeof *b);
    qsort(a, without->n, sizeof *a, by_text);
    qsort(b, with->n, sizeof *b, by_text);
    while (i < without->n || j < with->n) {
        int c = i == without->n ? 1 : j == with->n ? -1 : strcmp(a[i], b[j]);
        if (c == 0) {
            i++;
            j++;
            continue;
        }
        if (differ++ == 0)
            fprintf(stderr, "transcripts differ (- only without the plugin, + only with it):\n");
        if (c < 0)
            fprintf(stderr, "- %s\n", a[i++]);
        else
            fprintf(stderr, "+ %s\n", b[j++]);
    }
    free(a);
    free(b);
    return differ;
}

static void transcript_free(transcript *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->lines[i]);
    t->n = 0;
}

/* ===========================================================================
 * The scenario
 * ========================================================================= */

static harness_client *login(ts_broker *b, const char *id, const char *user, int version)
{
    char pw[64];
    harness_client_opts o = {.client_id = id, .username = user, .mqtt_version = version};

    if (user != NULL) {
        snprintf(pw, sizeof pw, "%s", dropin_password(user));
        o.password = pw;
    }
    return harness_client_connect_opts(b, &o);
}

static void connect_matrix(ts_broker *b, transcript *t)
{
    static const struct {
        const char *label;
        const char *user;
        const char *password; /* NULL: the user's own */
        int version;
    } rows[] = {
        {"u1, right password, 3.1.1", "u1", NULL, 4},
        {"u2, right password, MQTT 5", "u2", NULL, 5},
        {"u1, wrong password, 3.1.1", "u1", "wrong", 4},
        {"u3, wrong password, MQTT 5", "u3", "wrong", 5},
        {"unknown user, 3.1.1", "nobody", "whatever", 4},
        {"no username, 3.1.1", NULL, NULL, 4},
        {"no username, MQTT 5", NULL, NULL, 5},
    };

    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char id[32];
        harness_client *c = NULL;
        harness_client_opts o = {
            .client_id = id, .username = rows[i].user, .mqtt_version = rows[i].version};
        int rc;
        snprintf(id, sizeof id, "conn-%zu", i);
        if (rows[i].user != NULL)
            o.password =
                rows[i].password != NULL ? rows[i].password : dropin_password(rows[i].user);
        rc = harness_client_try_connect(b, &o, &c);
        note(t, "connect %s -> %d", rows[i].label, rc);
        if (c != NULL)
            harness_client_disconnect(c);
    }
}

/* Takes every message that arrives at c until none has come for QUIET_MS,
 * and notes them sorted, with their number of copies. */
static void note_received(transcript *t, harness_client *c, const char *who)
{
    char *got[MAX_LINES];
    size_t n = 0;

    for (int i = 0; i < MAX_LINES; i++) {
        harness_msg *m = harness_client_receive(c, QUIET_MS);
        char line[512];
        if (m == NULL)
            break;
        /* $SYS traffic depends on timing, not on access control. */
        if (strncmp(m->topic, "$SYS/", 5) != 0) {
            snprintf(line, sizeof line, "%s received %s \"%s\" qos %d%s", who, m->topic, m->payload,
                     m->qos, m->retained ? " retained" : "");
            got[n] = strdup(line);
            ASSERT(got[n] != NULL);
            n++;
        }
        harness_msg_free(m);
    }
    qsort(got, n, sizeof got[0], by_text);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && strcmp(got[j], got[i]) == 0)
            j++;
        note(t, "%s x%zu", got[i], j - i);
        i = j;
    }
    for (size_t i = 0; i < n; i++)
        free(got[i]);
}

static void pubsub_matrix(ts_broker *b, enum setup setup, transcript *t)
{
    harness_client *subs[DROPIN_USERS];
    harness_props retain = {.retain = true};
    char id[32], payload[96];

    /* A retained message, before anyone subscribes. */
    {
        harness_client *c = login(b, "retainer", setup == ANONYMOUS ? NULL : "u1", 4);
        harness_client_publish_bytes(c, "a/r", "kept", 4, 1, &retain);
        harness_client_disconnect(c);
    }
    for (int u = 0; u < DROPIN_USERS; u++) {
        snprintf(id, sizeof id, "sub-%s", dropin_users[u]);
        subs[u] = login(b, id, dropin_users[u], 4);
        for (size_t f = 0; f < NFILTERS; f++) {
            int code = harness_client_try_subscribe(subs[u], filters[f], 1);
            note(t, "subscribe %s %s -> 0x%02x", dropin_users[u], filters[f], (unsigned)code);
        }
    }
    for (int u = 0; u < DROPIN_USERS; u++) {
        harness_client *p, *p5;
        snprintf(id, sizeof id, "pub-%s", dropin_users[u]);
        p = login(b, id, dropin_users[u], 4);
        snprintf(id, sizeof id, "pub5-%s", dropin_users[u]);
        p5 = login(b, id, dropin_users[u], 5);
        for (size_t k = 0; k < NTOPICS; k++) {
            int rc;
            snprintf(payload, sizeof payload, "from %s", dropin_users[u]);
            harness_client_publish_bytes(p, topics[k], payload, strlen(payload), 1, NULL);
            snprintf(payload, sizeof payload, "from %s over MQTT 5", dropin_users[u]);
            rc = harness_client_publish_bytes(p5, topics[k], payload, strlen(payload), 1, NULL);
            note(t, "publish %s %s (MQTT 5) -> 0x%02x", dropin_users[u], topics[k], (unsigned)rc);
        }
        harness_client_disconnect(p5);
        harness_client_disconnect(p);
    }
    /* A Will. */
    {
        char pw[64];
        harness_client_opts o = {.client_id = "will-u1",
                                 .username = "u1",
                                 .mqtt_version = 5,
                                 .will_topic = "a/will",
                                 .will_payload = "u1 is gone",
                                 .will_qos = 1};
        snprintf(pw, sizeof pw, "%s", dropin_password("u1"));
        o.password = pw;
        harness_client_disconnect_with_will(harness_client_connect_opts(b, &o));
    }
    for (int u = 0; u < DROPIN_USERS; u++) {
        char who[32];
        snprintf(who, sizeof who, "sub-%s", dropin_users[u]);
        note_received(t, subs[u], who);
        harness_client_disconnect(subs[u]);
    }
}

/* dynamic-security answers on its own $CONTROL topic. */
static void dynsec_control(ts_broker *b, transcript *t)
{
    static const char req[] = "{\"commands\":[{\"command\":\"getClient\",\"username\":\"u1\"}]}";
    harness_client *admin = login(b, "admin-console", "admin", 4);
    harness_msg *m;

    harness_client_subscribe(admin, "$CONTROL/dynamic-security/v1/response", 1);
    harness_client_publish(admin, "$CONTROL/dynamic-security/v1", req, 1);
    m = harness_client_receive(admin, WAIT_MS);
    if (m == NULL) {
        note(t, "dynsec getClient -> no answer");
    } else {
        cJSON *root = harness_json_object(m);
        const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "responses"), 0);
        const cJSON *client = cJSON_GetObjectItemCaseSensitive(e, "data");
        client = cJSON_GetObjectItemCaseSensitive(client, "client");
        note(t, "dynsec getClient on %s -> %s, username %s", m->topic,
             cJSON_GetObjectItemCaseSensitive(e, "error") != NULL ? "error" : "ok",
             cJSON_IsObject(client) ? harness_json_str(client, "username") : "(none)");
        cJSON_Delete(root);
        harness_msg_free(m);
    }
    harness_client_disconnect(admin);
}

static void run_scenario(enum setup setup, bool with_chat, transcript *t)
{
    ts_broker *b = dropin_start(setup, with_chat);

    ts_log("scenario %s the plugin", with_chat ? "with" : "without");
    if (setup != ANONYMOUS)
        connect_matrix(b, t);
    pubsub_matrix(b, setup, t);
    if (setup == DYNSEC)
        dynsec_control(b, t);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * Chat with access control
 * ========================================================================= */

static void expect_envelope(harness_client *c, int64_t id, const char *from)
{
    harness_msg *m = harness_client_receive(c, WAIT_MS);
    cJSON *env;

    ASSERTF(m != NULL, "%s: no chat message", harness_client_id(c));
    ASSERTF(strcmp(m->topic, "chat/room1") == 0, "%s: message on %s", harness_client_id(c),
            m->topic);
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == id && strcmp(harness_json_str(env, "from"), from) == 0,
            "%s: expected id %lld from %s, got %s", harness_client_id(c), (long long)id, from,
            m->payload);
    cJSON_Delete(env);
    harness_msg_free(m);
}

static void chat_works(enum setup setup)
{
    ts_broker *b = dropin_start(setup, true);
    harness_client *c1 = login(b, "chat-u1", "u1", 4);
    harness_client *c2 = login(b, "chat-u2", "u2", 5);
    cJSON *resp;
    int64_t head = -1;

    ts_log("chat with %s", setup == ANONYMOUS ? "no access control"
                           : setup == PASSWD  ? "password_file and acl_file"
                                              : "dynamic-security");
    ASSERTF(ts_broker_log_count(b, "another plugin is loaded before mosquitto-chat") == 0,
            "the plugin warns about the plugin order although it is loaded first");
    harness_client_subscribe(c1, "chat/room1", 1);
    harness_client_subscribe(c2, "chat/room1", 1);
    harness_client_publish(c2, "chat/room1", "hello from u2", 1);
    expect_envelope(c1, 1, "u2");
    expect_envelope(c2, 1, "u2");
    harness_ack(c1, "room1", 1, 1);
    resp = harness_request(c1,
                           "{\"commands\":[{\"command\":\"sync\",\"replay\":false},"
                           "{\"command\":\"history\",\"group\":\"room1\"}]}",
                           WAIT_MS);
    ASSERT(harness_response_count(resp) == 2);
    ASSERT(harness_sync_find(harness_response_entry(resp, 0), "room1", &head, NULL, NULL) &&
           head == 1);
    harness_expect_ok(harness_response_entry(resp, 1), "history", "room1");
    cJSON_Delete(resp);

    if (setup != ANONYMOUS) {
        /* u3 may not use the chat topics: the broker refuses, and the
         * plugin must not act on what the broker refused. */
        harness_client *c3 = login(b, "chat-u3", "u3", 4), *c3b;
        int code;
        harness_client_publish(c2, "chat/room1", "before u3 tries", 1);
        expect_envelope(c1, 2, "u2");
        expect_envelope(c2, 2, "u2");
        /* dynamic-security refuses the subscription; Mosquitto 2.0's
         * acl_file grants every subscription and refuses each delivery. */
        code = harness_client_try_subscribe(c3, "chat/room1", 1);
        ts_log("u3's subscription to chat/room1: SUBACK 0x%02x", (unsigned)code);
        if (setup == DYNSEC)
            ASSERTF(code == 0x80, "u3's subscription to chat/room1: SUBACK 0x%02x, expected 0x80",
                    (unsigned)code);
        harness_client_publish(c3, "chat/room1", "u3 sneaks in", 1);
        harness_expect_quiet(c1, "nothing from u3, whom the broker refused");
        /* Had the refused subscription joined u3, this message would be
         * unread for u3, and u3's next subscription would replay it. */
        harness_client_publish(c2, "chat/room1", "not for u3", 1);
        expect_envelope(c1, 3, "u2");
        expect_envelope(c2, 3, "u2");
        /* Another device of u3 (Mosquitto 2.0.11 leaks a subscription
         * made twice by one client, which would trip LeakSanitizer). */
        c3b = login(b, "chat-u3-laptop", "u3", 4);
        code = harness_client_try_subscribe(c3b, "chat/room1", 1);
        if (setup == DYNSEC)
            ASSERTF(code == 0x80, "u3's second device: SUBACK 0x%02x, expected 0x80",
                    (unsigned)code);
        harness_expect_quiet(c3b, "no replay page, no message for a user the broker keeps off "
                                  "chat/room1");
        harness_client_disconnect(c3b);
        resp = harness_request(
            c3, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"room1\",\"after\":0}]}",
            WAIT_MS);
        harness_expect_error(harness_response_only(resp), "fetch", "room1", NULL,
                             "not a member of the group");
        cJSON_Delete(resp);
        resp = harness_request(c3, "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}",
                               WAIT_MS);
        ASSERTF(!harness_sync_find(harness_response_only(resp), "room1", NULL, NULL, NULL),
                "u3 became a member of room1 by a subscription the broker refused");
        cJSON_Delete(resp);
        harness_expect_store(c1, "room1", 3);
        harness_client_disconnect(c3);
    }
    harness_client_disconnect(c2);
    harness_client_disconnect(c1);
    ts_broker_destroy(b);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"anonymous", "passwd", "dynsec"};
    transcript with = {.n = 0}, without = {.n = 0};
    enum setup setup = ANONYMOUS;
    char name[64];
    size_t differ;

    for (int i = 0; i < 3; i++)
        if (argc > 1 && strcmp(argv[1], names[i]) == 0)
            setup = (enum setup)i;
    if (argc < 2 || strcmp(argv[1], names[setup]) != 0 || (setup == DYNSEC && argc < 3)) {
        fprintf(stderr, "usage: %s anonymous|passwd|dynsec <mosquitto_dynamic_security.so>\n",
                argv[0]);
        return 2;
    }
    snprintf(name, sizeof name, "integ_dropin_%s", names[setup]);
    ts_init(name);
    if (setup == DYNSEC) {
        ASSERTF(access(argv[2], R_OK) == 0,
                "the dynamic-security plugin is not at \"%s\" (found by CMake when the build was "
                "configured; is the mosquitto package installed?)",
                argv[2]);
        dropin_use_dynsec(argv[2]);
    }

    run_scenario(setup, false, &without);
    run_scenario(setup, true, &with);
    printf("transcript with the plugin:\n");
    for (size_t i = 0; i < with.n; i++)
        printf("  %s\n", with.lines[i]);
    differ = print_diff(&without, &with);
    if (differ == 0)
        ts_log("%zu transcript lines identical with and without the plugin", with.n);
    transcript_free(&with);
    transcript_free(&without);

    chat_works(setup);
    if (differ != 0)
        FAILF("loading mosquitto-chat changed %zu line(s) of what happens outside the chat topics "
              "(%s); see the differences above",
              differ, names[setup]);
    return ts_pass();
}
