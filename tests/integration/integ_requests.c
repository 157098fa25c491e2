/* integ_requests: the pull API on $CONTROL/chat/v1 against a real broker
 * (page_size 4, admins "boss"):
 *
 *   - join and leave: join answers the head; joining again keeps the start;
 *     leave drops the member's cursors (sync no longer lists the group, fetch
 *     is refused); a re-join starts at the head; only an admin acts on
 *     another member;
 *   - sync: head, acked and unread of every group of the member, from any of
 *     its devices; "replay": false pushes nothing; the default replays every
 *     group with unread messages, and only those;
 *   - fetch: forward pages from the device's cursor by default, or from
 *     `after`, cut to page_size, without moving the cursor; needs membership
 *     and does not join;
 *   - history: backward pages, newest first, with `more`;
 *   - ack: several groups in one request (batch ack), never backwards;
 *   - MQTT 5: a Response Topic and Correlation Data are honoured, still for
 *     the requesting client alone; replay pages stay on the response topic;
 *   - page_bytes bounds fetch and history pages (a second broker). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_SIZE 4
#define WAIT_MS 5000
#define QUIET_MS 500 /* a page or message would come at once; wait this long */

static ts_broker *g_b;

static harness_client *connect_as(ts_broker *b, const char *id, const char *user, int version)
{
    harness_client_opts o = {.client_id = id, .username = user, .mqtt_version = version};

    return harness_client_connect_opts(b, &o);
}

/* Publishes n messages "<group> k" from c to chat/<group>, k from *sent+1. */
static void send_n(harness_client *c, const char *group, int n, int *sent)
{
    char topic[160], payload[160];

    snprintf(topic, sizeof topic, "chat/%s", group);
    for (int i = 0; i < n; i++) {
        (*sent)++;
        snprintf(payload, sizeof payload, "{\"body\":\"%s %d\",\"n\":%d}", group, *sent, *sent);
        harness_client_publish(c, topic, payload, 1);
    }
}

/* Sends one command (a JSON object text) and returns the response. */
static cJSON *command(harness_client *c, const char *cmd)
{
    char req[1024];

    snprintf(req, sizeof req, "{\"commands\":[%s]}", cmd);
    return harness_request(c, req, WAIT_MS);
}

/* sync with replay false; checks group's numbers (listed false: must not
 * be listed). */
static void expect_sync(harness_client *c, const char *group, bool listed, int64_t head,
                        int64_t acked)
{
    cJSON *resp = command(c, "{\"command\":\"sync\",\"replay\":false}");
    int64_t h = -1, a = -1, u = -1;
    bool found = harness_sync_find(harness_response_only(resp), group, &h, &a, &u);

    if (!listed) {
        ASSERTF(!found, "%s: sync lists %s, which it should not", harness_client_id(c), group);
    } else {
        ASSERTF(found, "%s: sync does not list %s", harness_client_id(c), group);
        ASSERTF(h == head && a == acked && u == head - acked,
                "%s: sync of %s says head %lld acked %lld unread %lld, expected %lld/%lld/%lld",
                harness_client_id(c), group, (long long)h, (long long)a, (long long)u,
                (long long)head, (long long)acked, (long long)(head - acked));
    }
    cJSON_Delete(resp);
}

/* Checks a fetch or history entry: its ids are exactly ids[0..n). */
static void expect_page(const cJSON *entry, const char *command_name, const char *group,
                        const int64_t *ids, int n, int64_t head, bool more)
{
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    char *text = cJSON_PrintUnformatted(entry);

    harness_expect_ok(entry, command_name, group);
    ASSERTF(cJSON_GetArraySize(msgs) == n, "%s of %s: %d messages, expected %d: %.500s",
            command_name, group, cJSON_GetArraySize(msgs), n, text);
    for (int i = 0; i < n; i++)
        ASSERTF(harness_json_int(cJSON_GetArrayItem(msgs, i), "id") == ids[i],
                "%s of %s: message %d has id %lld, expected %lld: %.500s", command_name, group, i,
                (long long)harness_json_int(cJSON_GetArrayItem(msgs, i), "id"), (long long)ids[i],
                text);
    ASSERTF(harness_json_int(entry, "head") == head, "%s of %s: head %lld, expected %lld",
            command_name, group, (long long)harness_json_int(entry, "head"), (long long)head);
    ASSERTF(harness_json_bool(entry, "more") == more, "%s of %s: more is %s: %.500s", command_name,
            group, more ? "false" : "true", text);
    ASSERTF(!harness_json_bool(entry, "truncated"), "%s of %s: truncated without retention",
            command_name, group);
    if (strcmp(command_name, "fetch") == 0 && n == 0)
        ASSERTF(cJSON_GetObjectItemCaseSensitive(entry, "first") == NULL &&
                    cJSON_GetObjectItemCaseSensitive(entry, "last") == NULL,
                "empty fetch page of %s with first or last: %.500s", group, text);
    if (strcmp(command_name, "fetch") == 0 && n > 0)
        ASSERTF(harness_json_int(entry, "first") == ids[0] &&
                    harness_json_int(entry, "last") == ids[n - 1],
                "fetch of %s: first/last do not match the messages: %.500s", group, text);
    cJSON_free(text);
}

static void expect_fetch(harness_client *c, const char *cmd, const char *group, int64_t from, int n,
                         int64_t head, bool more)
{
    int64_t ids[PAGE_SIZE + 1];
    cJSON *resp = command(c, cmd);

    for (int i = 0; i < n; i++)
        ids[i] = from + i;
    expect_page(harness_response_only(resp), "fetch", group, ids, n, head, more);
    cJSON_Delete(resp);
}

static void expect_history(harness_client *c, const char *cmd, const char *group, int64_t from,
                           int n, int64_t head, bool more)
{
    int64_t ids[PAGE_SIZE + 1];
    cJSON *resp = command(c, cmd);

    for (int i = 0; i < n; i++)
        ids[i] = from - i;
    expect_page(harness_response_only(resp), "history", group, ids, n, head, more);
    cJSON_Delete(resp);
}

static void expect_entry_int(const cJSON *entry, const char *command_name, const char *group,
                             const char *key, int64_t value)
{
    harness_expect_ok(entry, command_name, group);
    ASSERTF(harness_json_int(entry, key) == value, "%s of %s: %s is %lld, expected %lld",
            command_name, group, key, (long long)harness_json_int(entry, key), (long long)value);
}

/* ===========================================================================
 * join and leave
 * ========================================================================= */

static void test_join_leave(harness_client *alice, harness_client *phone, harness_client *laptop,
                            harness_client *boss, int *sent)
{
    cJSON *resp;
    const cJSON *e;

    ts_log("join and leave");
    resp = command(phone, "{\"command\":\"join\",\"group\":\"room1\"}");
    e = harness_response_only(resp);
    expect_entry_int(e, "join", "room1", "head", 0);
    ASSERTF(strcmp(harness_json_str(e, "member"), "bob") == 0, "join names member %s",
            harness_json_str(e, "member"));
    cJSON_Delete(resp);
    send_n(alice, "room1", 5, sent);
    expect_sync(phone, "room1", true, 5, 0);

    /* Joining again keeps the original start. */
    resp = command(phone, "{\"command\":\"join\",\"group\":\"room1\"}");
    expect_entry_int(harness_response_only(resp), "join", "room1", "head", 5);
    cJSON_Delete(resp);
    expect_sync(phone, "room1", true, 5, 0);
    /* The member's other device sees the same group. */
    expect_sync(laptop, "room1", true, 5, 0);

    /* Leave: cursors dropped, nothing listed, fetch refused. */
    resp = command(phone, "{\"command\":\"leave\",\"group\":\"room1\"}");
    e = harness_response_only(resp);
    harness_expect_ok(e, "leave", "room1");
    ASSERT(strcmp(harness_json_str(e, "member"), "bob") == 0);
    cJSON_Delete(resp);
    expect_sync(phone, "room1", false, 0, 0);
    expect_sync(laptop, "room1", false, 0, 0);
    resp = command(laptop, "{\"command\":\"fetch\",\"group\":\"room1\",\"after\":0}");
    harness_expect_error(harness_response_only(resp), "fetch", "room1", NULL,
                         "not a member of the group");
    cJSON_Delete(resp);

    /* Re-join starts at the head: nothing unread, fetch from the cursor
     * is empty, earlier messages stay reachable with history. */
    send_n(alice, "room1", 3, sent);
    resp = command(phone, "{\"command\":\"join\",\"group\":\"room1\"}");
    expect_entry_int(harness_response_only(resp), "join", "room1", "head", 8);
    cJSON_Delete(resp);
    expect_sync(phone, "room1", true, 8, 8);
    expect_sync(laptop, "room1", true, 8, 8);
    expect_fetch(phone, "{\"command\":\"fetch\",\"group\":\"room1\"}", "room1", 9, 0, 8, false);
    expect_history(phone, "{\"command\":\"history\",\"group\":\"room1\"}", "room1", 8, 4, 8, true);

    /* Only an admin acts on another member. */
    resp = command(alice, "{\"command\":\"leave\",\"group\":\"room1\",\"member\":\"bob\"}");
    harness_expect_error(harness_response_only(resp), "leave", "room1", NULL,
                         "only an admin may add or remove another member");
    cJSON_Delete(resp);
    expect_sync(phone, "room1", true, 8, 8);
    resp = command(boss, "{\"command\":\"leave\",\"group\":\"room1\",\"member\":\"bob\"}");
    e = harness_response_only(resp);
    harness_expect_ok(e, "leave", "room1");
    ASSERT(strcmp(harness_json_str(e, "member"), "bob") == 0);
    cJSON_Delete(resp);
    expect_sync(phone, "room1", false, 0, 0);
    send_n(alice, "room1", 1, sent);
    resp = command(boss, "{\"command\":\"join\",\"group\":\"room1\",\"member\":\"bob\"}");
    e = harness_response_only(resp);
    expect_entry_int(e, "join", "room1", "head", 9);
    ASSERT(strcmp(harness_json_str(e, "member"), "bob") == 0);
    cJSON_Delete(resp);
    expect_sync(phone, "room1", true, 9, 9);
    /* The admin's own membership did not change. */
    expect_sync(boss, "room1", false, 0, 0);
}

/* ===========================================================================
 * sync, fetch, history, ack
 * ========================================================================= */

static void test_sync_replay(harness_client *alice, harness_client *phone, int *sent)
{
    harness_catchup g[2] = {{.group = "room2", .from = 3, .to = 6},
                            {.group = "room3", .from = 1, .to = 3}};
    cJSON *resp;

    ts_log("sync with and without replay");
    resp = harness_request(phone,
                           "{\"commands\":[{\"command\":\"join\",\"group\":\"room2\"},"
                           "{\"command\":\"join\",\"group\":\"room3\"}]}",
                           WAIT_MS);
    ASSERT(harness_response_count(resp) == 2);
    expect_entry_int(harness_response_entry(resp, 0), "join", "room2", "head", 0);
    expect_entry_int(harness_response_entry(resp, 1), "join", "room3", "head", 0);
    cJSON_Delete(resp);
    send_n(alice, "room2", 6, sent);
    send_n(alice, "room3", 3, sent);
    harness_ack(phone, "room2", 2, 1);

    expect_sync(phone, "room1", true, 9, 9);
    expect_sync(phone, "room2", true, 6, 2);
    expect_sync(phone, "room3", true, 3, 0);
    harness_expect_quiet(phone, "no replay page after sync with replay false");

    /* The default replays room2 and room3, not room1 (nothing unread). */
    resp = command(phone, "{\"command\":\"sync\"}");
    {
        const cJSON *e = harness_response_only(resp);
        int64_t h, a;
        ASSERT(harness_sync_find(e, "room2", &h, &a, NULL) && h == 6 && a == 2);
        ASSERT(harness_sync_find(e, "room3", &h, &a, NULL) && h == 3 && a == 0);
    }
    cJSON_Delete(resp);
    harness_catch_up(phone, g, 2, PAGE_SIZE, 10000, NULL, NULL);
    ts_log("sync replayed room2 in %zu page(s) and room3 in %zu", g[0].pages, g[1].pages);
    expect_sync(phone, "room2", true, 6, 6);
    expect_sync(phone, "room3", true, 3, 3);

    /* Nothing unread: even an explicit replay pushes nothing. */
    resp = command(phone, "{\"command\":\"sync\",\"replay\":true}");
    harness_expect_ok(harness_response_only(resp), "sync", NULL);
    cJSON_Delete(resp);
    harness_expect_quiet(phone, "no page when nothing is unread");
}

static void test_fetch_history(harness_client *alice, harness_client *phone, int *sent)
{
    cJSON *resp;

    ts_log("fetch and history");
    send_n(alice, "room2", 5, sent); /* room2: head 11, phone's cursor 6 */
    expect_fetch(phone, "{\"command\":\"fetch\",\"group\":\"room2\"}", "room2", 7, 4, 11, true);
    expect_fetch(phone, "{\"command\":\"fetch\",\"group\":\"room2\",\"after\":10}", "room2", 11, 1,
                 11, false);
    expect_fetch(phone, "{\"command\":\"fetch\",\"group\":\"room2\",\"after\":0,\"limit\":2}",
                 "room2", 1, 2, 11, true);
    expect_fetch(phone, "{\"command\":\"fetch\",\"group\":\"room2\",\"after\":2,\"limit\":100}",
                 "room2", 3, PAGE_SIZE, 11, true);
    expect_fetch(phone, "{\"command\":\"fetch\",\"group\":\"room2\",\"after\":11}", "room2", 12, 0,
                 11, false);
    /* Fetch does not move the cursor. */
    expect_sync(phone, "room2", true, 11, 6);

    expect_history(phone, "{\"command\":\"history\",\"group\":\"room2\"}", "room2", 11, 4, 11,
                   true);
    expect_history(phone, "{\"command\":\"history\",\"group\":\"room2\",\"before\":8}", "room2", 7,
                   4, 11, true);
    expect_history(phone, "{\"command\":\"history\",\"group\":\"room2\",\"before\":4}", "room2", 3,
                   3, 11, false);
    expect_history(phone, "{\"command\":\"history\",\"group\":\"room2\",\"before\":2,\"limit\":5}",
                   "room2", 1, 1, 11, false);
    expect_history(phone, "{\"command\":\"history\",\"group\":\"room2\",\"limit\":2}", "room2", 11,
                   2, 11, true);
    expect_history(phone, "{\"command\":\"history\",\"group\":\"room2\",\"before\":1}", "room2", 0,
                   0, 11, false);

    /* A group the member is not in: refused, and not joined. */
    send_n(alice, "room9", 2, sent);
    resp = command(phone, "{\"command\":\"fetch\",\"group\":\"room9\",\"after\":0}");
    harness_expect_error(harness_response_only(resp), "fetch", "room9", NULL,
                         "not a member of the group");
    cJSON_Delete(resp);
    resp = command(phone, "{\"command\":\"history\",\"group\":\"room9\"}");
    harness_expect_error(harness_response_only(resp), "history", "room9", NULL,
                         "not a member of the group");
    cJSON_Delete(resp);
    expect_sync(phone, "room9", false, 0, 0);
}

static void test_batch_ack(harness_client *alice, harness_client *phone, int *sent)
{
    cJSON *resp;

    ts_log("batch ack");
    send_n(alice, "room1", 1, sent); /* room1 head 10, cursor 9 */
    send_n(alice, "room3", 2, sent); /* room3 head 5, cursor 3 */
    resp = harness_request(phone,
                           "{\"commands\":[{\"command\":\"ack\",\"group\":\"room1\",\"id\":10},"
                           "{\"command\":\"ack\",\"group\":\"room2\",\"id\":9},"
                           "{\"command\":\"ack\",\"group\":\"room3\",\"id\":4},"
                           "{\"command\":\"ack\",\"group\":\"room2\",\"id\":1}]}",
                           WAIT_MS);
    ASSERT(harness_response_count(resp) == 4);
    expect_entry_int(harness_response_entry(resp, 0), "ack", "room1", "acked", 10);
    expect_entry_int(harness_response_entry(resp, 1), "ack", "room2", "acked", 9);
    expect_entry_int(harness_response_entry(resp, 2), "ack", "room3", "acked", 4);
    expect_entry_int(harness_response_entry(resp, 3), "ack", "room2", "acked", 9);
    cJSON_Delete(resp);
    expect_sync(phone, "room1", true, 10, 10);
    expect_sync(phone, "room2", true, 11, 9);
    expect_sync(phone, "room3", true, 5, 4);
    /* The cursor is what fetch starts from. */
    expect_fetch(phone, "{\"command\":\"fetch\",\"group\":\"room2\"}", "room2", 10, 2, 11, false);
    harness_expect_quiet(phone, "an ack pushes nothing");
}

/* ===========================================================================
 * MQTT 5 request/response
 * ========================================================================= */

static bool on_topic(const harness_msg *m, void *arg)
{
    return strcmp(m->topic, (const char *)arg) == 0;
}

static void test_mqtt5(ts_broker *b, harness_client *alice, int *sent)
{
    static const char corr[] = {'c', 'o', 'r', 'r', '\0', '-', '4', '2'};
    harness_client *tablet = connect_as(b, "bob-tablet", "bob", 5);
    harness_client *spy = connect_as(b, "spy", "spy", 4);
    harness_props props = {
        .response_topic = "replies/bob-tablet", .corr = corr, .corr_len = sizeof corr};
    const char *sync = "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}";
    /* bob-tablet is new: it starts at the phone's cursors (room2 9, room3 4). */
    harness_catchup g[2] = {{.group = "room2", .from = 10, .to = 11},
                            {.group = "room3", .from = 5, .to = 6}};
    harness_msg *m;
    cJSON *resp;

    ts_log("MQTT 5 Response Topic and Correlation Data");
    harness_client_subscribe(spy, "replies/#", 1);
    harness_client_subscribe(spy, "#", 1);
    harness_client_subscribe(tablet, "replies/bob-tablet", 1);

    harness_client_publish_bytes(tablet, HARNESS_CONTROL_TOPIC, sync, strlen(sync), 1, &props);
    m = harness_client_receive_if(tablet, on_topic, (void *)"replies/bob-tablet", WAIT_MS);
    ASSERTF(m != NULL, "no answer on the Response Topic replies/bob-tablet");
    ASSERTF(m->has_corr && m->corr_len == sizeof corr && memcmp(m->corr, corr, sizeof corr) == 0,
            "the answer does not carry the request's Correlation Data (has %d, %zu bytes)",
            m->has_corr, m->corr_len);
    {
        cJSON *root = harness_json_object(m);
        ASSERT(harness_sync_find(harness_response_only(root), "room2", NULL, NULL, NULL));
        cJSON_Delete(root);
    }
    harness_msg_free(m);
    harness_expect_quiet(tablet, "one answer, on the Response Topic only");
    harness_client_expect_none(spy, 0, "no answer to another client's request");

    /* Without a Response Topic: the response topic. */
    resp = harness_request(tablet, sync, WAIT_MS);
    harness_expect_ok(harness_response_only(resp), "sync", NULL);
    cJSON_Delete(resp);

    /* Replay pages always go to the response topic, whatever the request
     * named. */
    send_n(alice, "room3", 1, sent);
    {
        const char *replay = "{\"commands\":[{\"command\":\"sync\"}]}";
        harness_client_publish_bytes(tablet, HARNESS_CONTROL_TOPIC, replay, strlen(replay), 1,
                                     &props);
    }
    m = harness_client_receive_if(tablet, on_topic, (void *)"replies/bob-tablet", WAIT_MS);
    ASSERTF(m != NULL, "no answer to sync on the Response Topic");
    ASSERT(m->has_corr && m->corr_len == sizeof corr);
    harness_msg_free(m);
    harness_catch_up(tablet, g, 2, PAGE_SIZE, 10000, NULL, NULL);
    harness_client_expect_none(spy, QUIET_MS, "nothing of bob's requests, answers or pages");
    harness_client_disconnect(spy);
    harness_client_disconnect(tablet);
}

/* ===========================================================================
 * page_bytes
 * ========================================================================= */

static void test_page_bytes(void)
{
    static const char *const opts[] = {"page_bytes 1024", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *alice = connect_as(b, "alice", "alice", 4);
    harness_client *bob = connect_as(b, "bob-phone", "bob", 4);
    char payload[2600], *body;
    int64_t next = 1, head = 7;
    cJSON *resp;

    ts_log("page_bytes 1024");
    resp = command(bob, "{\"command\":\"join\",\"group\":\"big\"}");
    harness_expect_ok(harness_response_only(resp), "join", "big");
    cJSON_Delete(resp);
    for (int i = 1; i <= 7; i++) {
        size_t n = i == 4 ? 2000 : 300; /* message 4 alone exceeds page_bytes */
        body = malloc(n + 1);
        ASSERT(body != NULL);
        memset(body, 'a' + i, n);
        body[n] = '\0';
        snprintf(payload, sizeof payload, "{\"body\":\"%s\"}", body);
        harness_client_publish(alice, "chat/big", payload, 1);
        free(body);
    }
    /* Forward: every page within 1024 bytes of envelopes, except a lone
     * envelope larger than that; all ids once, in order. */
    for (int pages = 0; next <= head && pages < 20; pages++) {
        char req[160];
        const cJSON *e, *msgs, *env;
        size_t bytes = 0;
        int n;
        snprintf(req, sizeof req,
                 "{\"commands\":[{\"command\":\"fetch\",\"group\":\"big\",\"after\":%lld}]}",
                 (long long)(next - 1));
        resp = harness_request(bob, req, WAIT_MS);
        e = harness_response_only(resp);
        harness_expect_ok(e, "fetch", "big");
        msgs = cJSON_GetObjectItemCaseSensitive(e, "messages");
        n = cJSON_GetArraySize(msgs);
        ASSERTF(n >= 1, "empty fetch page at %lld", (long long)next);
        cJSON_ArrayForEach(env, msgs)
        {
            char *text = cJSON_PrintUnformatted(env);
            bytes += strlen(text);
            cJSON_free(text);
            ASSERT(harness_json_int(env, "id") == next);
            next++;
        }
        ASSERTF(n == 1 || bytes <= 1024, "fetch page of %d envelopes holds %zu bytes", n, bytes);
        ASSERTF(n < 7, "page_bytes did not bound the page (%d envelopes)", n);
        ASSERT(harness_json_bool(e, "more") == (next <= head));
        cJSON_Delete(resp);
    }
    ASSERT(next == head + 1);
    /* Backward too. */
    resp = command(bob, "{\"command\":\"history\",\"group\":\"big\"}");
    {
        const cJSON *e = harness_response_only(resp);
        int n = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "messages"));
        harness_expect_ok(e, "history", "big");
        ASSERTF(n >= 1 && n < 4 && harness_json_bool(e, "more"),
                "history page of %d messages under page_bytes 1024", n);
    }
    cJSON_Delete(resp);
    harness_client_disconnect(alice);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

/* Each command may carry correlationData, said back in its entry, whatever
 * the entry: an answer, a page or an error. */
static void test_correlation(harness_client *phone)
{
    cJSON *resp = harness_request(
        phone,
        "{\"commands\":[{\"command\":\"fetch\",\"group\":\"room1\",\"correlationData\":\"f-1\"},"
        "{\"command\":\"sync\",\"replay\":false,\"correlationData\":\"s-2\"},"
        "{\"command\":\"history\",\"group\":\"nowhere\",\"correlationData\":\"h-3\"},"
        "{\"command\":\"ack\",\"group\":\"room1\",\"id\":0},"
        "{\"command\":\"sync\",\"correlationData\":7}]}",
        WAIT_MS);
    static const char *const want[] = {"f-1", "s-2", "h-3", NULL, NULL};
    ASSERT(harness_response_count(resp) == 5);
    for (int i = 0; i < 5; i++) {
        const cJSON *e = harness_response_entry(resp, i);
        const cJSON *corr = cJSON_GetObjectItemCaseSensitive(e, "correlationData");
        if (want[i] == NULL)
            ASSERTF(corr == NULL, "entry %d carries a correlationData it was not given", i);
        else
            ASSERTF(cJSON_IsString(corr) && strcmp(corr->valuestring, want[i]) == 0,
                    "entry %d does not say back correlationData %s", i, want[i]);
    }
    harness_expect_error(harness_response_entry(resp, 4), "sync", NULL, NULL,
                         "correlationData must be a string of at most 256 bytes");
    cJSON_Delete(resp);
}

int main(void)
{
    static const char *const opts[] = {"page_size 4", "admins boss", NULL};
    harness_client *alice, *phone, *laptop, *boss;
    int sent = 0;

    ts_init("integ_requests");
    g_b = ts_broker_start_users(opts); /* admin rights: verified usernames */
    alice = connect_as(g_b, "alice", "alice", 4);
    phone = connect_as(g_b, "bob-phone", "bob", 4);
    laptop = connect_as(g_b, "bob-laptop", "bob", 4);
    boss = connect_as(g_b, "boss", "boss", 4);

    test_join_leave(alice, phone, laptop, boss, &sent);
    test_sync_replay(alice, phone, &sent);
    test_fetch_history(alice, phone, &sent);
    test_batch_ack(alice, phone, &sent);
    test_mqtt5(g_b, alice, &sent);
    test_correlation(phone);
    harness_client_expect_none(laptop, 0, "nothing for a device that asked nothing");

    harness_client_disconnect(alice);
    harness_client_disconnect(phone);
    harness_client_disconnect(laptop);
    harness_client_disconnect(boss);
    ts_broker_destroy(g_b);
    test_page_bytes();
    return ts_pass();
}
