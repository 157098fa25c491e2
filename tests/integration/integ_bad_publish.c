/* integ_bad_publish: bad publishes, acks and floods, one ctest per kind
 * (argv[1]): payloads too large or neither JSON nor text, bad acks, a
 * non-member in a closed group, requests that ask for too much. What every
 * variant must get and keep: integ_bad.h. */
#include "integ_bad.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void case_payload_size(fixture *fx)
{
    char *over = bad_repeat('x', MAX_PAYLOAD + 1);
    char *json = bad_repeat(' ', MAX_PAYLOAD + 100);
    char *exact = bad_repeat('y', MAX_PAYLOAD);

    bad_publish_error(fx, "text over max_payload", BOB, TOPIC, over, 0, 1,
                      (expect){"publish", GROUP, NULL, E_TOO_LARGE});
    bad_publish_error(fx, "text over max_payload MQTT 5", BOB5, TOPIC, over, 0, 1,
                      (expect){"publish", GROUP, NULL, E_TOO_LARGE});
    bad_publish_error(fx, "text over max_payload MQTT 5 QoS 2", BOB5, TOPIC, over, 0, 2,
                      (expect){"publish", GROUP, NULL, E_TOO_LARGE});
    /* A JSON object with a cid: the entry echoes it (PROTOCOL.md's error
     * entry, and docs/protocol.md's example of this very error). */
    memcpy(json, "{\"cid\":\"big-1\",\"body\":\"", 23);
    memset(json + 23, 'z', MAX_PAYLOAD + 100 - 25);
    memcpy(json + MAX_PAYLOAD + 100 - 2, "\"}", 2);
    bad_publish_error(fx, "JSON over max_payload echoes cid", BOB, TOPIC, json, 0, 1,
                      (expect){"publish", GROUP, "big-1", E_TOO_LARGE});
    /* Exactly max_payload bytes are accepted. */
    if (bad_selected(fx, "exactly max_payload")) {
        harness_client_publish_bytes(fx->c[BOB], TOPIC, exact, MAX_PAYLOAD, 1, NULL);
        fx->head++;
        bad_carol_expects(fx, fx->head, exact);
        bad_carry_on(fx, BOB, "exactly max_payload");
    }
    free(over);
    free(json);
    free(exact);
}

static void case_payload_encoding(fixture *fx)
{
    static const struct {
        const char *name;
        const char *bytes;
        size_t len;
    } bad[] = {
        {"0xff 0xfe", "\xff\xfe", 2},
        {"NUL byte", "abc\0def", 7},
        {"overlong slash", "\xc0\xaf", 2},
        {"surrogate", "\xed\xa0\x80", 3},
        {"truncated sequence", "ok \xe2\x82", 5},
        {"above U+10FFFF", "\xf4\x90\x80\x80", 4},
        {"JSON with a bad byte", "{\"body\":\"\xff\",\"cid\":\"c-1\"}", 25},
    };
    char *cid65 = bad_repeat('c', 65), *cid64 = bad_repeat('d', 64);
    char payload[256], name[128];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bad_publish_error(fx, bad[i].name, BOB, TOPIC, bad[i].bytes, bad[i].len, 1,
                          (expect){"publish", GROUP, NULL, E_NEITHER});
        snprintf(name, sizeof name, "%s MQTT 5", bad[i].name);
        bad_publish_error(fx, name, BOB5, TOPIC, bad[i].bytes, bad[i].len, 1,
                          (expect){"publish", GROUP, NULL, E_NEITHER});
    }
    bad_publish_error(fx, "cid number", BOB, TOPIC, "{\"cid\":5,\"body\":\"x\"}", 0, 1,
                      (expect){"publish", GROUP, NULL, E_CID});
    /* An invalid cid string may be echoed as sent, or left out. */
    bad_publish_bad_cid(fx, "cid empty", BOB, "{\"cid\":\"\",\"body\":\"x\"}", 1, "");
    snprintf(payload, sizeof payload, "{\"cid\":\"%s\",\"body\":\"x\"}", cid65);
    bad_publish_bad_cid(fx, "cid 65 bytes", BOB5, payload, 2, cid65);

    /* What is accepted: a cid of 64 bytes, JSON that is not an object and
     * the empty payload are text; the fields of an object are kept as sent. */
    if (bad_selected(fx, "accepted neighbours")) {
        static const struct {
            const char *payload;
            const char *body_json; /* the body as the envelope must spell it */
        } ok[] = {
            {"[1]", "\"body\":\"[1]\""},
            {"42", "\"body\":\"42\""},
            {"", "\"body\":\"\""},
            {"{\"body\":\"x\\u0000y\"}", "\"body\":\"x\\u0000y\""},
        };
        snprintf(payload, sizeof payload, "{\"cid\":\"%s\",\"body\":\"sixty-four\"}", cid64);
        harness_client_publish(fx->c[BOB], TOPIC, payload, 1);
        fx->head++;
        bad_carol_expects(fx, fx->head, "sixty-four");
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
            harness_msg *m;
            harness_client_publish_bytes(fx->c[BOB], TOPIC, ok[i].payload, strlen(ok[i].payload), 1,
                                         NULL);
            fx->head++;
            m = harness_client_receive_if(fx->carol, bad_on_room, NULL, WAIT_MS);
            ASSERTF(m != NULL, "carol did not receive the message %s", ok[i].payload);
            ASSERTF(strstr(m->payload, ok[i].body_json) != NULL,
                    "payload %s: the envelope does not carry %s exactly: %.300s", ok[i].payload,
                    ok[i].body_json, m->payload);
            harness_msg_free(m);
        }
        bad_carry_on(fx, BOB, "accepted neighbours");
    }
    free(cid65);
    free(cid64);
}

/* Bob's cursor in room1 according to sync. */
static int64_t bob_acked(fixture *fx, int64_t *head)
{
    cJSON *resp = harness_request(fx->c[BOB], SYNC_ONLY, WAIT_MS);
    int64_t acked = -1;

    ASSERTF(harness_sync_find(harness_response_only(resp), GROUP, head, &acked, NULL),
            "bob's sync does not list %s", GROUP);
    cJSON_Delete(resp);
    return acked;
}

static void case_acks(fixture *fx)
{
    static const char *const bad[] = {
        "abc", "", " ", "1.5", "0x10", "+5", "-1", "1e3", "5 5", "٣", "12345678901234567890"};
    char name[128];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(name, sizeof name, "ack \"%s\"", bad[i]);
        bad_publish_error(fx, name, BOB, TOPIC "/ack", bad[i], strlen(bad[i]), 1,
                          (expect){"ack", GROUP, NULL, E_ACK});
    }
    bad_publish_error(fx, "ack \"abc\" MQTT 5", BOB5, TOPIC "/ack", "abc", 3, 1,
                      (expect){"ack", GROUP, NULL, E_ACK});
    bad_publish_error(fx, "ack of a group not joined", BOB, "chat/elsewhere/ack", "1", 1, 1,
                      (expect){"ack", "elsewhere", NULL, E_NOT_MEMBER});
    bad_request_error(fx, "ack command negative",
                      "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":-1}]}",
                      "ack", GROUP, "id must be an integer from 0 to 2^53-1");

    /* Above the head: taken as the head, not remembered as more. */
    if (bad_selected(fx, "ack above head")) {
        int64_t head = 0, acked;
        cJSON *resp;
        harness_client_publish(fx->c[BOB], TOPIC "/ack", "999999", 1);
        acked = bob_acked(fx, &head);
        ASSERTF(head == fx->head && acked == fx->head,
                "after an ack of 999999: sync says head %lld acked %lld, expected both %lld",
                (long long)head, (long long)acked, (long long)fx->head);
        /* The next message is unread, and fetch from the cursor returns it. */
        bad_alice_sends(fx, "ack above head");
        acked = bob_acked(fx, &head);
        ASSERTF(head == fx->head && acked == fx->head - 1,
                "a new message after an ack above the head: sync says head %lld acked %lld, "
                "expected %lld and %lld (the cursor must be the old head, not 999999)",
                (long long)head, (long long)acked, (long long)fx->head, (long long)fx->head - 1);
        resp = harness_request(fx->c[BOB],
                               "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\"}]}",
                               WAIT_MS);
        {
            const cJSON *e = harness_response_only(resp);
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
            harness_expect_ok(e, "fetch", GROUP);
            ASSERTF(cJSON_GetArraySize(msgs) == 1 &&
                        harness_json_int(cJSON_GetArrayItem(msgs, 0), "id") == fx->head,
                    "fetch from the cursor after an ack above the head does not return just the "
                    "new message %lld",
                    (long long)fx->head);
        }
        cJSON_Delete(resp);
        /* The same through the ack command: the entry says the cursor. */
        resp = harness_request(fx->c[BOB],
                               "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP
                               "\",\"id\":9007199254740991}]}",
                               WAIT_MS);
        harness_expect_ok(harness_response_only(resp), "ack", GROUP);
        ASSERTF(harness_json_int(harness_response_only(resp), "acked") == fx->head,
                "ack command above the head: acked is not the head %lld", (long long)fx->head);
        cJSON_Delete(resp);
        bad_carry_on(fx, BOB, "ack above head");
    }
    /* Never back, and blanks around the number are fine. */
    if (bad_selected(fx, "ack backwards and with a newline")) {
        int64_t head = 0;
        char top[32];
        snprintf(top, sizeof top, "%lld", (long long)fx->head);
        harness_client_publish(fx->c[BOB], TOPIC "/ack", top, 1);
        harness_client_publish(fx->c[BOB], TOPIC "/ack", "1\n", 1);
        ASSERTF(bob_acked(fx, &head) == fx->head, "an ack of 1 moved the cursor back");
        harness_expect_quiet(fx->c[BOB], "no error for an ack of \"1\\n\"");
        bad_carry_on(fx, BOB, "ack backwards and with a newline");
    }
}

static void case_non_member(fixture *fx)
{
    static const char *const no_access[] = {"fetch", "history"};
    char req[256], name[128];

    for (size_t i = 0; i < 2; i++) {
        snprintf(req, sizeof req, "{\"commands\":[{\"command\":\"%s\",\"group\":\"" GROUP "\"}]}",
                 no_access[i]);
        snprintf(name, sizeof name, "eve %s", no_access[i]);
        {
            variant v = {.name = name, .who = EVE, .kind = REQUEST, .payload = req, .n = 1};
            v.e[0] = (expect){no_access[i], GROUP, NULL, E_NOT_MEMBER};
            bad_run(fx, &v);
        }
        snprintf(name, sizeof name, "anon %s", no_access[i]);
        {
            variant v = {.name = name, .who = ANON, .kind = REQUEST, .payload = req, .n = 1};
            v.e[0] = (expect){no_access[i], GROUP, NULL, E_NO_USERNAME};
            bad_run(fx, &v);
        }
    }
    {
        variant v = {.name = "eve ack command",
                     .who = EVE,
                     .kind = REQUEST,
                     .payload =
                         "{\"commands\":[{\"command\":\"ack\",\"group\":\"" GROUP "\",\"id\":1}]}",
                     .n = 1};
        v.e[0] = (expect){"ack", GROUP, NULL, E_NOT_MEMBER};
        bad_run(fx, &v);
    }
    {
        variant v = {.name = "eve joins herself",
                     .who = EVE,
                     .kind = REQUEST,
                     .payload = "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP "\"}]}",
                     .n = 1};
        v.e[0] = (expect){"join", GROUP, NULL, E_ONLY_ADMIN_CLOSED};
        bad_run(fx, &v);
    }
    {
        variant v = {.name = "eve removes bob",
                     .who = EVE,
                     .kind = REQUEST,
                     .payload = "{\"commands\":[{\"command\":\"leave\",\"group\":\"" GROUP
                                "\",\"member\":\"bob\"}]}",
                     .n = 1};
        v.e[0] = (expect){"leave", GROUP, NULL, E_ONLY_ADMIN_OTHER};
        bad_run(fx, &v);
    }
    {
        variant v = {.name = "bob (a member) adds eve",
                     .who = BOB,
                     .kind = REQUEST,
                     .payload = "{\"commands\":[{\"command\":\"join\",\"group\":\"" GROUP
                                "\",\"member\":\"eve\"}]}",
                     .n = 1};
        v.e[0] = (expect){"join", GROUP, NULL, E_ONLY_ADMIN_OTHER};
        bad_run(fx, &v);
    }
    {
        variant v = {
            .name = "anon sync", .who = ANON, .kind = REQUEST, .payload = SYNC_ONLY, .n = 1};
        v.e[0] = (expect){"sync", NULL, NULL, E_NO_USERNAME};
        bad_run(fx, &v);
    }
    bad_publish_error(fx, "eve publishes", EVE, TOPIC, "let me in", 0, 1,
                      (expect){"publish", GROUP, NULL, E_NOT_MEMBER});
    bad_publish_error(fx, "eve publishes MQTT 5 QoS 2", EVE5, TOPIC, "let me in", 0, 2,
                      (expect){"publish", GROUP, NULL, E_NOT_MEMBER});
    bad_publish_error(fx, "eve publishes with a cid", EVE, TOPIC,
                      "{\"cid\":\"e-1\",\"body\":\"hi\"}", 0, 1,
                      (expect){"publish", GROUP, "e-1", E_NOT_MEMBER});
    bad_publish_error(fx, "anon publishes", ANON, TOPIC, "let me in", 0, 1,
                      (expect){"publish", GROUP, NULL, E_NO_USERNAME});
    bad_publish_error(fx, "eve acks", EVE, TOPIC "/ack", "1", 0, 1,
                      (expect){"ack", GROUP, NULL, E_NOT_MEMBER});
    bad_subscribe_error(fx, "eve subscribes", EVE, TOPIC,
                        (expect){"subscribe", GROUP, NULL, E_NOT_MEMBER});
    bad_subscribe_error(fx, "eve subscribes MQTT 5", EVE5, TOPIC,
                        (expect){"subscribe", GROUP, NULL, E_NOT_MEMBER});
    bad_subscribe_error(fx, "anon subscribes", ANON, TOPIC,
                        (expect){"subscribe", GROUP, NULL, E_NO_USERNAME});
    /* sync answers a non-member, but lists nothing of the group. */
    if (bad_selected(fx, "eve sync lists nothing")) {
        cJSON *resp = harness_request(fx->c[EVE], SYNC_ONLY, WAIT_MS);
        const cJSON *e = harness_response_only(resp);
        ASSERTF(!harness_sync_find(e, GROUP, NULL, NULL, NULL), "eve's sync lists %s", GROUP);
        ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "groups")) == 0);
        cJSON_Delete(resp);
        bad_carry_on(fx, EVE, "eve sync lists nothing");
    }
}

/* Bob publishes request (without waiting for its PUBACK, whose ticket goes
 * to *t); meanwhile alice publishes a message to the group and carol must
 * receive it (a bounded wait: the broker serves others during the flood).
 * Returns that round trip in ms, for the log only: speed is measured in
 * bench/, never asserted here. */
static int64_t round_trip_during(fixture *fx, const char *request, harness_ticket *t)
{
    int64_t t0;
    int rc = harness_client_publish_async(fx->c[BOB], HARNESS_CONTROL_TOPIC, request, 1, t);

    ASSERTF(rc == 0, "flood publish failed with Paho code %d", rc);
    t0 = ts_now_ms();
    bad_alice_sends(fx, "flood");
    return ts_now_ms() - t0;
}

static char *many_commands(size_t n, const char *command)
{
    size_t each = strlen(command) + 1;
    char *s = malloc(n * each + 32);
    size_t off = 0;

    if (s == NULL)
        FAILF("out of memory");
    off += (size_t)sprintf(s, "{\"commands\":[");
    for (size_t i = 0; i < n; i++)
        off += (size_t)sprintf(s + off, "%s%s", i ? "," : "", command);
    sprintf(s + off, "]}");
    return s;
}

static void case_flood(fixture *fx)
{
    if (bad_selected(fx, "10000 commands")) {
        char *req =
            many_commands(10000, "{\"command\":\"history\",\"group\":\"" GROUP "\",\"limit\":1}");
        harness_ticket t;
        int64_t t0 = ts_now_ms(), rtt, answer_ms;
        cJSON *resp;
        rtt = round_trip_during(fx, req, &t);
        resp = harness_client_response(fx->c[BOB], 30000);
        answer_ms = ts_now_ms() - t0;
        ts_log("10000 commands (%zu bytes): answered in %lld ms; another client's round "
               "trip meanwhile %lld ms",
               strlen(req), (long long)answer_ms, (long long)rtt);
        printf("TIMING 10000-command request: answer %lld ms, other client's round trip %lld ms\n",
               (long long)answer_ms, (long long)rtt);
        harness_client_wait_acked(fx->c[BOB], t, WAIT_MS);
        {
            variant v = {.name = "10000 commands", .n = 1};
            v.e[0] = (expect){"request", NULL, NULL, E_TOO_MANY};
            bad_check_entries(&v, resp);
        }
        cJSON_Delete(resp);
        free(req);
        bad_carry_on(fx, BOB, "10000 commands");
    }
    if (bad_selected(fx, "1000 commands")) {
        char *req =
            many_commands(1000, "{\"command\":\"history\",\"group\":\"" GROUP "\",\"limit\":1}");
        cJSON *resp = harness_request(fx->c[BOB], req, 30000);
        ASSERTF(harness_response_count(resp) == 1000, "1000 commands got %d entries",
                harness_response_count(resp));
        for (int i = 0; i < 1000; i++) {
            const cJSON *e = harness_response_entry(resp, i);
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
            harness_expect_ok(e, "history", GROUP);
            ASSERT(cJSON_GetArraySize(msgs) == 1 &&
                   harness_json_int(cJSON_GetArrayItem(msgs, 0), "id") == fx->head);
        }
        cJSON_Delete(resp);
        free(req);
        bad_carry_on(fx, BOB, "1000 commands");
    }
    /* 1000 fetches of full pages: the response stops growing before 1 MiB
     * (issue 9, unbounded answers). */
    if (bad_selected(fx, "1000 fat fetches")) {
        char *body = bad_repeat('f', 2000);
        char *msg = malloc(2100), *req;
        harness_ticket t;
        int64_t t0, rtt, answer_ms;
        int ok = 0, refused = 0;
        cJSON *resp;
        if (msg == NULL)
            FAILF("out of memory");
        snprintf(msg, 2100, "{\"body\":\"%s\"}", body);
        for (int i = 0; i < 100; i++) {
            int rc = harness_client_publish_async(fx->c[BOB], "chat/fat", msg, 1, &t);
            ASSERTF(rc == 0, "publish to chat/fat failed with Paho code %d", rc);
        }
        harness_client_wait_acked(fx->c[BOB], t, WAIT_MS);
        req = many_commands(1000, "{\"command\":\"fetch\",\"group\":\"fat\",\"after\":0}");
        t0 = ts_now_ms();
        rtt = round_trip_during(fx, req, &t);
        resp = harness_client_response(fx->c[BOB], 60000);
        answer_ms = ts_now_ms() - t0;
        harness_client_wait_acked(fx->c[BOB], t, WAIT_MS);
        ASSERTF(harness_response_count(resp) == 1000, "1000 fetches got %d entries",
                harness_response_count(resp));
        for (int i = 0; i < 1000; i++) {
            const cJSON *e = harness_response_entry(resp, i);
            if (cJSON_GetObjectItemCaseSensitive(e, "error") == NULL) {
                ASSERTF(refused == 0, "entry %d succeeds after a refused one", i);
                harness_expect_ok(e, "fetch", "fat");
                ASSERT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages")) == 100);
                ok++;
            } else {
                harness_expect_error(e, "fetch", "fat", NULL, E_RESPONSE_TOO_LARGE);
                refused++;
            }
        }
        ts_log("1000 fat fetches: %d answered, %d refused (1 MiB), answer in %lld ms; "
               "another client's round trip meanwhile %lld ms",
               ok, refused, (long long)answer_ms, (long long)rtt);
        printf("TIMING 1000 fetches of 100 x 2 KB: answer %lld ms (%d pages, %d refused), other "
               "client's round trip %lld ms\n",
               (long long)answer_ms, ok, refused, (long long)rtt);
        ASSERTF(ok >= 1 && ok <= 5 && refused == 1000 - ok,
                "%d fetches of ~200 KB answered before the 1 MiB limit", ok);
        {
            char *text = cJSON_PrintUnformatted(resp);
            size_t len = text ? strlen(text) : 0;
            free(text);
            ASSERTF(len > 0 && len < 1200000, "answer of %zu bytes, over 1 MiB", len);
        }
        cJSON_Delete(resp);
        free(req);
        free(msg);
        free(body);
        bad_carry_on(fx, BOB, "1000 fat fetches");
    }
}

static const bad_case cases[] = {
    {"payload_size", case_payload_size, false},
    {"payload_encoding", case_payload_encoding, false},
    {"acks", case_acks, false},
    {"non_member", case_non_member, true},
    {"flood", case_flood, false},
};

int main(int argc, char **argv)
{
    return bad_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
