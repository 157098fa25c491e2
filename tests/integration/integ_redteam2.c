/* integ_redteam2: the second red team's findings on the v1.2 merge (recall
 * and edit, push notifications, cid retries), one case per finding, each
 * failing on the code before its fix (branch redteam2; the repros are in
 * the red team's notes):
 *   nul_keys      a publish whose key spells one of the plugin's keys up to
 *                 a \u0000 ("recall\u0000": 1, "from\u0000", "cid\u0000")
 *                 was stored as sent, and every reader that ends a key at
 *                 its NUL (cJSON: the plugin, the client library, mqchat)
 *                 took it for a recall of another member's message: such
 *                 keys are dropped, as the plugin's own are
 *   qos2_copies   a QoS 2 publish whose PUBREL is held back, then its retry
 *   qos2_copies_reversed   (same cid) under a new packet id on the same
 *                 session: both copies were released, and each subscriber
 *                 got the message twice live; now once, whichever PUBREL
 *                 comes first
 *   push_recalled with push_body, a notification deferred by push_interval
 *                 went out with the text of a message recalled meanwhile,
 *                 and so did one the sender was retrying
 *   edit_nul      an edit holding \u0000 was stored with U+0001 instead, in
 *                 silence: now refused, and the message is unchanged
 *   change_read   the message M that carries a member's recall or edit did
 *                 not move its read marker, as its publish does (issue 25):
 *                 every device of the member counted M, and what came
 *                 before it, unread, and receipts showed the others it had
 *                 not read them
 */
#include "harness.h"
#include "integ_sec.h"
#include "push_server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GROUP "room1"
#define TOPIC "chat/" GROUP

/* ------------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

static harness_client *connect_as(ts_broker *b, const char *id, const char *user)
{
    harness_client_opts o = {.client_id = id, .username = user};
    return harness_client_connect_opts(b, &o);
}

/* The next envelope c receives live on TOPIC, parsed with cJSON (a reader
 * that ends a key at its NUL). */
static cJSON *live(harness_client *c)
{
    harness_msg *m = harness_client_receive_if(c, sec_on_topic, (void *)TOPIC, WAIT_MS);
    ASSERTF(m != NULL, "%s received no message on " TOPIC, harness_client_id(c));
    cJSON *env = harness_json_object(m);
    harness_msg_free(m);
    return env;
}

/* Sends one command (a JSON object text) and returns its entry (detached;
 * the caller frees it). */
static cJSON *command(harness_client *c, const char *cmd)
{
    char req[4096];
    snprintf(req, sizeof(req), "{\"commands\":[%s]}", cmd);
    cJSON *resp = harness_request(c, req, WAIT_MS);
    cJSON *e = cJSON_Duplicate(harness_response_only(resp), true);
    cJSON_Delete(resp);
    ASSERT(e != NULL);
    return e;
}

/* ------------------------------------------------------------------------
 * nul_keys
 * --------------------------------------------------------------------- */

static void case_nul_keys(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = connect_as(b, "alice-phone", "alice");
    harness_client *mallory = connect_as(b, "mallory-phone", "mallory");
    harness_client *bob = connect_as(b, "bob-phone", "bob");
    harness_client_subscribe(bob, TOPIC, 1);
    harness_client_publish(alice, TOPIC, "{\"body\":\"mine\",\"cid\":\"a-1\"}", 1);
    cJSON *n = live(bob);
    ASSERT(harness_json_int(n, "id") == 1);
    cJSON_Delete(n);
    harness_client_publish(mallory, TOPIC,
                           "{\"body\":\"x\",\"recall\\u0000\":1,\"edit\\u0000z\":1,"
                           "\"from\\u0000\":\"alice\",\"cid\\u0000\":\"a-1\",\"recalled\\u0000\":"
                           "true,\"keep\\u0000\":2}",
                           1);
    cJSON *m = live(bob);
    char *text = cJSON_PrintUnformatted(m);
    ASSERTF(harness_json_int(m, "id") == 2, "%s", text);
    static const char *const forged[] = {"recall", "edit", "cid", "recalled", "edited"};
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        ASSERTF(cJSON_GetObjectItemCaseSensitive(m, forged[i]) == NULL,
                "a reader that ends keys at a NUL finds \"%s\" in %s", forged[i], text);
    }
    ASSERTF(strcmp(harness_json_str(m, "from"), "mallory") == 0, "%s", text);
    ASSERTF(harness_json_int(m, "keep") == 2, "another key with \\u0000 stays: %s", text);
    free(text);
    cJSON_Delete(m);
    /* alice's message is hers, unchanged, and still hers to change */
    cJSON *e =
        command(alice, "{\"command\":\"edit\",\"group\":\"" GROUP "\",\"id\":1,\"body\":\"y\"}");
    harness_expect_ok(e, "edit", GROUP);
    cJSON_Delete(e);
    harness_client_disconnect(alice);
    harness_client_disconnect(mallory);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* ------------------------------------------------------------------------
 * qos2_copies
 * --------------------------------------------------------------------- */

static void qos2_copies(bool reversed)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *bob = connect_as(b, "bob-phone", "bob");
    harness_client_subscribe(bob, TOPIC, 2);
    harness_client *fence = connect_as(b, "fence", "carol");
    int fd = sec_deaf_client(b, "sam");
    const char *payload = "{\"cid\":\"s-1\",\"body\":\"once\"}";
    /* the first copy: stored, its PUBREL held back */
    sec_deaf_publish_qos2(fd, 1, TOPIC, payload);
    sec_deaf_barrier(b, fd, "sam");
    /* the app's retry under a new packet id: a duplicate, carried too */
    sec_deaf_publish_qos2(fd, 2, TOPIC, payload);
    sec_deaf_barrier(b, fd, "sam");
    sec_deaf_pubrel(fd, reversed ? 2 : 1);
    sec_deaf_pubrel(fd, reversed ? 1 : 2);
    sec_deaf_barrier(b, fd, "sam");
    cJSON *env = live(bob);
    ASSERT(harness_json_int(env, "id") == 1);
    ASSERT(strcmp(harness_json_str(env, "body"), "once") == 0);
    cJSON_Delete(env);
    /* nothing else is on its way to bob before a fence sent now at the
     * QoS the second copy would have (Mosquitto queues a client's messages
     * of one QoS in order): the second copy never comes */
    harness_client_publish(fence, TOPIC, "fence", 2);
    env = live(bob);
    char *text = cJSON_PrintUnformatted(env);
    ASSERTF(harness_json_int(env, "id") == 2, "bob got %s, not the fence (message 2)", text);
    free(text);
    cJSON_Delete(env);
    close(fd);
    harness_client_disconnect(fence);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

static void case_qos2_copies(void)
{
    qos2_copies(false);
}

static void case_qos2_copies_reversed(void)
{
    qos2_copies(true);
}

/* ------------------------------------------------------------------------
 * push_recalled
 * --------------------------------------------------------------------- */

/* The n-th notification at the webhook path, parsed (the caller frees it). */
static cJSON *note(ts_push_server *srv, const char *path, size_t n)
{
    ts_push_arrival *a = ts_push_wait(srv, path, n, 15000);
    ASSERTF(a != NULL, "notification %zu did not come", n);
    ASSERTF(!a->error[0], "notification %zu: %s", n, a->error);
    cJSON *o = cJSON_Parse(a->body);
    ASSERTF(cJSON_IsObject(o), "notification %zu: %s", n, a->body);
    ts_push_arrival_free(a);
    return o;
}

static void case_push_recalled(void)
{
    ts_push_server *srv = ts_push_server_start();
    char allow[96], hooks[160];
    int port = ts_push_server_port(srv);
    snprintf(allow, sizeof allow, "push_allow http://127.0.0.1:%d/", port);
    snprintf(hooks, sizeof hooks,
             "push_webhooks ops=http://127.0.0.1:%d/hook ops2=http://127.0.0.1:%d/hook2", port,
             port);
    ts_push_endpoint(srv, "/hook", TS_PUSH_WEBHOOK, NULL);
    ts_push_endpoint(srv, "/hook2", TS_PUSH_WEBHOOK, NULL);
    ts_broker *b = ts_broker_start((const char *const[]){
        allow, hooks, "push_body true", "push_delay 100", "push_interval 3000", NULL});
    /* bob in room1 on /hook, carol in room2 on /hook2; both offline */
    harness_client *bob = connect_as(b, "bob-phone", "bob");
    harness_client_subscribe(bob, TOPIC, 1);
    cJSON *e = command(bob, "{\"command\":\"push\",\"kind\":\"webhook\",\"name\":\"ops\"}");
    ASSERT(harness_json_bool(e, "registered"));
    cJSON_Delete(e);
    harness_client_disconnect(bob);
    harness_client *carol = connect_as(b, "carol-phone", "carol");
    harness_client_subscribe(carol, "chat/room2", 1);
    e = command(carol, "{\"command\":\"push\",\"kind\":\"webhook\",\"name\":\"ops2\"}");
    ASSERT(harness_json_bool(e, "registered"));
    cJSON_Delete(e);
    harness_client_disconnect(carol);
    harness_client *alice = connect_as(b, "alice-phone", "alice");
    harness_client_subscribe(alice, TOPIC, 1);
    harness_client_subscribe(alice, "chat/room2", 1);

    /* 1. deferred by bob's push_interval, then recalled */
    harness_client_publish(alice, TOPIC, "{\"body\":\"hello\"}", 1);
    cJSON *o = note(srv, "/hook", 1);
    ASSERT(harness_json_int(o, "id") == 1);
    cJSON_Delete(o);
    harness_client_publish(alice, TOPIC, "{\"body\":\"secret two\"}", 1);
    ts_broker_wait_log(b, "notification of bob in " GROUP " deferred", 1, WAIT_MS);
    e = command(alice, "{\"command\":\"recall\",\"group\":\"" GROUP "\",\"id\":2}");
    harness_expect_ok(e, "recall", GROUP);
    cJSON_Delete(e);
    o = note(srv, "/hook", 2);
    char *text = cJSON_PrintUnformatted(o);
    ASSERTF(harness_json_int(o, "id") == 2, "%s", text);
    ASSERTF(strstr(text, "secret") == NULL, "a recalled message's text was pushed: %s", text);
    free(text);
    cJSON_Delete(o);

    /* 2. the sender retrying it (503, Retry-After 5 s) when it is recalled */
    ts_push_answer(srv, "/hook2", 503, 5);
    harness_client_publish(alice, "chat/room2", "{\"body\":\"secret three\"}", 1);
    o = note(srv, "/hook2", 1); /* answered 503 */
    ASSERT(harness_json_int(o, "id") == 1);
    cJSON_Delete(o);
    e = command(alice, "{\"command\":\"recall\",\"group\":\"room2\",\"id\":1}");
    harness_expect_ok(e, "recall", "room2");
    cJSON_Delete(e);
    o = note(srv, "/hook2", 2); /* the retry */
    text = cJSON_PrintUnformatted(o);
    ASSERTF(harness_json_int(o, "id") == 1, "%s", text);
    ASSERTF(strstr(text, "secret") == NULL, "a recalled message's text was pushed: %s", text);
    free(text);
    cJSON_Delete(o);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
    ts_push_server_stop(srv);
}

/* ------------------------------------------------------------------------
 * edit_nul
 * --------------------------------------------------------------------- */

static void case_edit_nul(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = connect_as(b, "alice-phone", "alice");
    harness_client_subscribe(alice, TOPIC, 1);
    harness_client_publish(alice, TOPIC, "{\"body\":\"a\\u0000b\"}", 1);
    cJSON *n = live(alice);
    ASSERT(harness_json_int(n, "id") == 1);
    cJSON_Delete(n);
    cJSON *e = command(alice, "{\"command\":\"edit\",\"group\":\"" GROUP
                              "\",\"id\":1,\"body\":\"c\\u0000d\"}");
    harness_expect_error(e, "edit", GROUP, NULL, "edit fields cannot hold \\u0000");
    cJSON_Delete(e);
    e = command(alice, "{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":0}");
    harness_expect_ok(e, "fetch", GROUP);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
    ASSERT(cJSON_GetArraySize(msgs) == 1);
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(msgs, 0), "body");
    /* cJSON ends the string at its NUL: "a", never "a\u0001b" or "c..." */
    ASSERTF(cJSON_IsString(body) && strcmp(body->valuestring, "a") == 0, "the message changed: %s",
            cJSON_IsString(body) ? body->valuestring : "?");
    cJSON_Delete(e);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ------------------------------------------------------------------------
 * change_read
 * --------------------------------------------------------------------- */

/* c's sync of GROUP: its unread, and head in *head. */
static int64_t unread_of(harness_client *c, int64_t *head)
{
    cJSON *e = command(c, "{\"command\":\"sync\",\"replay\":false}");
    int64_t unread = -1;
    ASSERTF(harness_sync_find(e, GROUP, head, NULL, &unread), "%s: sync does not list " GROUP,
            harness_client_id(c));
    cJSON_Delete(e);
    return unread;
}

/* member's read marker, as c's receipts show it. */
static int64_t marker_of(harness_client *c, const char *member)
{
    cJSON *e = command(c, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"}");
    harness_expect_ok(e, "receipts", GROUP);
    const cJSON *r =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "reads"), member);
    ASSERTF(cJSON_IsNumber(r), "receipts list no %s", member);
    int64_t v = (int64_t)r->valuedouble;
    cJSON_Delete(e);
    return v;
}

/* A change by alice: the entry's "by" (M), which must be head. */
static int64_t change_by(harness_client *alice, const char *cmd, const char *what)
{
    cJSON *e = command(alice, cmd);
    harness_expect_ok(e, what, GROUP);
    int64_t m = harness_json_int(e, "by");
    cJSON_Delete(e);
    return m;
}

static void case_change_read(void)
{
    ts_broker *b = ts_broker_start(NULL);
    /* alice: a plain client that never acks nor reads (her cursor stays
     * where she joined), and a second device of hers */
    harness_client *alice = connect_as(b, "alice-phone", "alice");
    harness_client *bob = connect_as(b, "bob-phone", "bob");
    int64_t head = 0;

    harness_client_publish(alice, TOPIC, "{\"body\":\"one\"}", 1);
    harness_client_publish(alice, TOPIC, "{\"body\":\"two\"}", 1);
    harness_client_publish(bob, TOPIC, "{\"body\":\"hi\"}", 1);
    /* bob's message is the one she has not read */
    ASSERTF(unread_of(alice, &head) == 1 && head == 3, "alice's sync before: head %lld",
            (long long)head);
    int64_t m =
        change_by(alice, "{\"command\":\"recall\",\"group\":\"" GROUP "\",\"id\":1}", "recall");
    ASSERT(m == 4);
    int64_t unread = unread_of(alice, &head);
    ASSERTF(unread == 0 && head == 4, "after her recall alice has %lld unread of head %lld",
            (long long)unread, (long long)head);
    ASSERTF(marker_of(bob, "alice") == 4, "bob's receipts: alice read %lld, not her recall",
            (long long)marker_of(bob, "alice"));
    /* an edit, after bob wrote again; on a device of hers that joined
     * before it */
    harness_client *tablet = connect_as(b, "alice-tablet", "alice");
    harness_client_publish(bob, TOPIC, "{\"body\":\"and?\"}", 1);
    ASSERT(unread_of(tablet, &head) == 1 && head == 5);
    m = change_by(alice, "{\"command\":\"edit\",\"group\":\"" GROUP "\",\"id\":2,\"body\":\"2\"}",
                  "edit");
    ASSERT(m == 6);
    unread = unread_of(tablet, &head);
    ASSERTF(unread == 0 && head == 6, "after her edit alice's tablet has %lld unread of head %lld",
            (long long)unread, (long long)head);
    ASSERT(marker_of(bob, "alice") == 6);
    ASSERT(marker_of(alice, "bob") == 5);
    harness_client_disconnect(alice);
    harness_client_disconnect(tablet);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

int main(int argc, char **argv)
{
    static const ts_case cases[] = {
        {"nul_keys", case_nul_keys},
        {"qos2_copies", case_qos2_copies},
        {"qos2_copies_reversed", case_qos2_copies_reversed},
        {"push_recalled", case_push_recalled},
        {"edit_nul", case_edit_nul},
        {"change_read", case_change_read},
    };
    return ts_run_case(argc, argv, "integ_redteam2_", cases, sizeof cases / sizeof cases[0]);
}
