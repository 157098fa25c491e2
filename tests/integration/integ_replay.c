/* integ_replay: what replay pages promise beyond their order, and options no
 * other test sets. One ctest per case (argv[1], see `cases` below), each on
 * its own broker:
 *
 *   page_bytes     pages (replay and fetch) hold at most page_bytes bytes of
 *                  envelopes, and as many as fit;
 *   truncated      after retention_count removed messages a device never
 *                  acked, its first replay page, the first fetch page and the
 *                  last history page say "truncated", and no other does;
 *   retention_days messages older than retention_days go (the plugin's
 *                  clock runs two days ahead: ts_broker_shift_clock),
 *                  younger ones stay;
 *   page_qos1/2    pages come at page_qos;
 *   prefix         topic_prefix moves the chat under another first level;
 *                  chat/<group> is then an ordinary topic;
 *   resubscribe    a new subscribe restarts an outstanding replay within
 *                  the window (pages in flight count), up to the new head;
 *   turns          groups take turns in one device's window;
 *   budget         replay_budget: many devices of one member catch up at
 *                  once; every one gets a page before any device has acked
 *                  anything (none waits for the others to finish), each gets
 *                  every id once and in order, and the plugin's figures show
 *                  that no pass of the broker's loop carried more than the
 *                  budget and the page that crossed it;
 *   inflight       replay_inflight: a device alone gets its window up to
 *                  the pages in flight over all devices; another device
 *                  still gets its first page at once, and no second while
 *                  the total is reached; an ack gives its places back; a
 *                  device that leaves gives back what it had in flight; the
 *                  plugin's figure of pages in flight is 0 once every
 *                  device has caught up, each with every id once, in order;
 *   budget_empty   an empty request of a device waiting for its turn is
 *                  answered only once its turns have served it (its window
 *                  full), after those pages, while the other devices took
 *                  theirs; the 17th such request of one client is refused at
 *                  once; a client that disconnects with answers held gets
 *                  none of them, not even in its kept session.
 *
 * The pages the plugin sent are counted behind a barrier (harness_barrier),
 * never after a wait. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_MS 10000
#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define DEVICE "replay-device"
#define MAX_PAGES 64

/* ===========================================================================
 * Helpers
 * ========================================================================= */

/* The device joins group at head 0 (its first subscribe) and goes away. */
static void join_and_leave(ts_broker *b, const char *topic)
{
    harness_client *dev = harness_client_connect(b, DEVICE, NULL);

    harness_client_subscribe(dev, topic, 1);
    harness_client_disconnect(dev);
}

/* Publishes n messages to topic at QoS 1, each with a body of body_len
 * bytes ("k<n>" padded with dots), and waits for every PUBACK. */
static void publish_n(ts_broker *b, const char *topic, int n, size_t body_len)
{
    harness_client *snd = harness_client_connect(b, "replay-sender", NULL);
    harness_ticket t = {0, 0};
    char *body = malloc(body_len + 1), *payload = malloc(body_len + 64);

    ASSERT(body != NULL && payload != NULL);
    harness_client_set_window(snd, 100);
    for (int k = 1; k <= n; k++) {
        int len = snprintf(body, body_len + 1, "k%d", k);
        if ((size_t)len < body_len) {
            memset(body + len, '.', body_len - (size_t)len);
            body[body_len] = '\0';
        }
        snprintf(payload, body_len + 64, "{\"body\":\"%s\"}", body);
        ASSERT(harness_client_publish_async(snd, topic, payload, 1, &t) == 0);
    }
    harness_client_wait_acked(snd, t, WAIT_MS);
    harness_client_disconnect(snd);
    free(body);
    free(payload);
}

/* Bytes of an envelope as the store holds it: compact JSON, as the plugin
 * writes it and cJSON prints it again. */
static size_t envelope_bytes(const cJSON *env)
{
    char *text = cJSON_PrintUnformatted(env);
    size_t len = text != NULL ? strlen(text) : 0;

    ASSERT(text != NULL);
    cJSON_free(text);
    return len;
}

/* The replay pages queued for c behind a barrier, into pages (at most max);
 * live envelopes on TOPIC are dropped, anything else queued fails the test.
 * Returns how many. */
static size_t take_pages(harness_client *c, harness_page *pages, size_t max)
{
    harness_msg *m;
    size_t n = 0;

    harness_barrier(c);
    for (size_t i = 0; i < MAX_PAGES && (m = harness_client_receive(c, 0)) != NULL; i++) {
        ASSERTF(n < max, "more than %zu pages", max);
        if (strcmp(m->topic, TOPIC) == 0) {
            harness_msg_free(m);
            continue;
        }
        if (!harness_page_parse(m, &pages[n]))
            FAILF("unexpected message on %s: %.300s", m->topic, m->payload);
        n++;
        harness_msg_free(m);
    }
    return n;
}

static void free_pages(harness_page *pages, size_t n)
{
    for (size_t i = 0; i < n; i++)
        harness_page_free(&pages[i]);
}

/* ===========================================================================
 * page_bytes
 * ========================================================================= */

#define PB_BYTES 2048 /* plugin_opt_page_bytes */
#define PB_COUNT 60   /* messages of about 330 bytes: six to a page */
#define PB_BODY 200

/* Checks that messages (envelopes) hold at most PB_BYTES bytes (one message
 * alone may be larger), and, if more follow, that the next one would not
 * have fitted. next is that next envelope's size (0: none follows). */
static void check_bytes(const cJSON *messages, size_t next, const char *what)
{
    const cJSON *env;
    size_t bytes = 0, count = 0;

    cJSON_ArrayForEach(env, messages)
    {
        bytes += envelope_bytes(env);
        count++;
    }
    ASSERTF(count >= 1, "%s: an empty page", what);
    ASSERTF(count == 1 || bytes <= PB_BYTES, "%s: %zu messages of %zu bytes, page_bytes is %d",
            what, count, bytes, PB_BYTES);
    ASSERTF(next == 0 || bytes + next > PB_BYTES,
            "%s: %zu messages of %zu bytes, and the next one (%zu bytes) would have fitted in %d",
            what, count, bytes, next, PB_BYTES);
}

static void case_page_bytes(void)
{
    const char *opts[] = {"page_bytes 2048", "replay_window 64", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_page pages[MAX_PAGES];
    harness_client *dev;
    size_t n;
    int64_t next = 1;
    cJSON *resp;
    const cJSON *entry;

    join_and_leave(b, TOPIC);
    publish_n(b, TOPIC, PB_COUNT, PB_BODY);
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    /* A window of 64 pages: the whole catch-up goes at once. */
    n = take_pages(dev, pages, MAX_PAGES);
    for (size_t i = 0; i < n; i++) {
        char what[64];
        const cJSON *following = i + 1 < n ? cJSON_GetArrayItem(pages[i + 1].messages, 0) : NULL;
        snprintf(what, sizeof what, "replay page %lld..%lld", (long long)pages[i].first,
                 (long long)pages[i].last);
        ASSERTF(pages[i].first == next, "%s where one from %lld was due", what, (long long)next);
        check_bytes(pages[i].messages, following != NULL ? envelope_bytes(following) : 0, what);
        next = pages[i].last + 1;
    }
    ASSERTF(next == PB_COUNT + 1, "the replay ended at %lld of %d", (long long)next - 1, PB_COUNT);
    ts_log("%d messages in %zu replay pages of at most %d bytes", PB_COUNT, n, PB_BYTES);
    ASSERTF(n >= PB_COUNT / 8, "%zu pages: page_bytes %d holds fewer than 8 such messages", n,
            PB_BYTES);

    /* fetch pages too. */
    resp = harness_request(
        dev, "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP "\",\"after\":0}]}",
        WAIT_MS);
    entry = harness_response_only(resp);
    harness_expect_ok(entry, "fetch", GROUP);
    check_bytes(cJSON_GetObjectItemCaseSensitive(entry, "messages"),
                envelope_bytes(cJSON_GetArrayItem(pages[1].messages, 0)), "fetch after 0");
    ASSERT(harness_json_bool(entry, "more"));
    cJSON_Delete(resp);
    free_pages(pages, n);
    harness_client_disconnect(dev);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * truncated, retention_days
 * ========================================================================= */

static void case_truncated(void)
{
    const char *opts[] = {"retention_count 20", "page_size 10", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_page pages[MAX_PAGES];
    harness_client *dev;
    size_t n;

    join_and_leave(b, TOPIC);
    publish_n(b, TOPIC, 50, 10);
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    n = take_pages(dev, pages, MAX_PAGES);
    ASSERTF(n == 2 && pages[0].first == 31 && pages[0].truncated && pages[1].last == 50,
            "replay after retention: %zu page(s), the first from %lld, truncated %d (expected 2 "
            "pages 31..50, the first truncated)",
            n, n ? (long long)pages[0].first : -1LL, n ? pages[0].truncated : -1);
    ASSERTF(!pages[1].truncated, "replay page %lld..%lld says truncated", (long long)pages[1].first,
            (long long)pages[1].last);
    free_pages(pages, n);
    harness_ack(dev, GROUP, 50, 1);
    harness_expect_quiet(dev, "no page once everything kept was acked");
    /* fetch and history say it too, where they reach the gap. */
    harness_expect_store_from(dev, GROUP, 31, 50);
    harness_client_disconnect(dev);
    /* Acked to the head, the device gets nothing more. */
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_expect_quiet(dev, "no page for a device that acked the head");
    harness_client_disconnect(dev);
    ts_broker_destroy(b);
}

#define DAY_S 86400

/* The oldest id of group the store still serves to c, from history. */
static int64_t oldest_kept(harness_client *c)
{
    cJSON *resp = harness_request(c,
                                  "{\"commands\":[{\"command\":\"fetch\",\"group\":\"" GROUP
                                  "\",\"after\":0,\"limit\":1}]}",
                                  WAIT_MS);
    const cJSON *entry = harness_response_only(resp);
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(entry, "messages"), 0);
    int64_t id;

    harness_expect_ok(entry, "fetch", GROUP);
    id = first != NULL ? harness_json_int(first, "id") : 0;
    cJSON_Delete(resp);
    return id;
}

/* On LevelDB even in the PostgreSQL stage (CHAT_TEST_PG_PORT): the
 * plugin's clock hook does not move the stamps a PostgreSQL store gives. */
static void case_retention_days(void)
{
    const char *opts[] = {"retention_days 1", "store leveldb", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *dev;
    harness_msg *m;
    cJSON *env;
    int64_t oldest = 0, deadline;

    join_and_leave(b, TOPIC);
    publish_n(b, TOPIC, 10, 10);

    /* Half a day later (as the broker sees it) nothing is old enough. */
    ts_broker_stop(b);
    ts_broker_shift_clock(b, DAY_S / 2);
    ts_broker_restart(b);
    publish_n(b, TOPIC, 1, 10);
    dev = harness_client_connect(b, "replay-reader", NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_expect_store(dev, GROUP, 11);
    harness_client_disconnect(dev);

    /* Two days later the first ten are over a day old; the eleventh, sent
     * half a day later, is a day and a half old: all go. A new message
     * stays, and its ts is the broker's clock. */
    ts_broker_stop(b);
    ts_broker_shift_clock(b, 2 * DAY_S);
    ts_broker_restart(b);
    dev = harness_client_connect(b, "replay-reader", NULL);
    harness_client_subscribe(dev, TOPIC, 0);
    harness_client_publish(dev, TOPIC, "{\"body\":\"new\"}", 0);
    m = harness_client_receive(dev, WAIT_MS);
    ASSERTF(m != NULL && strcmp(m->topic, TOPIC) == 0, "no envelope of the new message");
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == 12, "the new message has id %lld",
            (long long)harness_json_int(env, "id"));
    ASSERTF(harness_json_int(env, "ts") > ts_wall_ms() + DAY_S * 1000LL,
            "ts %lld: the plugin's clock is not two days ahead (its test hook)",
            (long long)harness_json_int(env, "ts"));
    cJSON_Delete(env);
    harness_msg_free(m);
    /* The sweep runs on the broker's own schedule: wait for its effect. */
    deadline = ts_now_ms() + WAIT_MS;
    for (int i = 0; i < 1000 && (oldest = oldest_kept(dev)) != 12 && ts_now_ms() < deadline; i++)
        ts_sleep_ms(50);
    ASSERTF(oldest == 12, "retention_days 1: the oldest message kept two days on is %lld",
            (long long)oldest);
    harness_expect_store_from(dev, GROUP, 12, 12);
    harness_client_disconnect(dev);
    /* The device that never acked is told. */
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    {
        harness_page pages[MAX_PAGES];
        size_t n = take_pages(dev, pages, MAX_PAGES);
        ASSERTF(n == 1 && pages[0].first == 12 && pages[0].truncated,
                "replay after retention_days: %zu page(s), first %lld, truncated %d", n,
                n ? (long long)pages[0].first : -1LL, n ? pages[0].truncated : -1);
        free_pages(pages, n);
    }
    harness_client_disconnect(dev);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * page_qos
 * ========================================================================= */

static void page_qos(int qos)
{
    char opt[32];
    const char *opts[] = {opt, "page_size 50", NULL};
    ts_broker *b;
    harness_catchup g = {.group = GROUP, .from = 1, .to = 300, .qos = qos};
    harness_client *dev;
    harness_msg *m;
    cJSON *resp;

    snprintf(opt, sizeof opt, "page_qos %d", qos);
    b = ts_broker_start(opts);
    join_and_leave(b, TOPIC);
    publish_n(b, TOPIC, 300, 10);
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_catch_up(dev, &g, 1, 50, WAIT_MS, NULL, NULL);
    ASSERTF(g.pages == 6, "%zu pages of 50 for 300 messages", g.pages);
    /* Answers come at page_qos too. */
    harness_client_publish(dev, HARNESS_CONTROL_TOPIC,
                           "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}", 1);
    m = harness_client_receive(dev, WAIT_MS);
    ASSERTF(m != NULL && strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0, "no answer to sync");
    ASSERTF(m->qos == qos, "the answer came with QoS %d, page_qos is %d", m->qos, qos);
    resp = harness_json_object(m);
    ASSERT(harness_sync_find(harness_response_only(resp), GROUP, NULL, NULL, NULL));
    cJSON_Delete(resp);
    harness_msg_free(m);
    harness_client_disconnect(dev);
    ts_broker_destroy(b);
}

static void case_page_qos1(void)
{
    page_qos(1);
}

static void case_page_qos2(void)
{
    page_qos(2);
}

/* ===========================================================================
 * prefix
 * ========================================================================= */

static void case_prefix(void)
{
    const char *opts[] = {"topic_prefix talk", "page_size 10", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_catchup g = {.group = GROUP, .from = 1, .to = 25};
    harness_client *dev, *plain;
    harness_msg *m;
    cJSON *env;

    join_and_leave(b, "talk/" GROUP);
    publish_n(b, "talk/" GROUP, 25, 10);
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, "talk/" GROUP, 1);
    /* harness_catch_up acks on chat/<group>/ack: ack by hand here. */
    for (int i = 0; i < 3; i++) {
        harness_page p;
        m = harness_client_receive(dev, WAIT_MS);
        ASSERTF(m != NULL, "page %d of the catch-up under talk/ did not come", i + 1);
        ASSERT(harness_page_parse(m, &p));
        ASSERTF(p.first == 10 * i + 1 && strcmp(p.group, GROUP) == 0, "page %lld..%lld of %s",
                (long long)p.first, (long long)p.last, p.group);
        {
            char last[32];
            snprintf(last, sizeof last, "%lld", (long long)p.last);
            harness_client_publish(dev, "talk/" GROUP "/ack", last, 1);
        }
        harness_page_free(&p);
        harness_msg_free(m);
    }
    harness_expect_quiet(dev, "no page after the catch-up under talk/");
    (void)g;
    /* Live: the envelope comes on talk/room1. */
    harness_client_publish(dev, "talk/" GROUP, "{\"body\":\"live\"}", 1);
    m = harness_client_receive(dev, WAIT_MS);
    ASSERTF(m != NULL && strcmp(m->topic, "talk/" GROUP) == 0, "no live envelope on talk/room1");
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == 26, "live message id %lld",
            (long long)harness_json_int(env, "id"));
    cJSON_Delete(env);
    harness_msg_free(m);
    /* chat/room1 is an ordinary topic now: the payload as sent, no id. */
    plain = harness_client_connect(b, "plain", NULL);
    harness_client_subscribe(plain, TOPIC, 1);
    harness_client_publish(dev, TOPIC, "just text", 1);
    m = harness_client_receive(plain, WAIT_MS);
    ASSERTF(m != NULL && strcmp(m->payload, "just text") == 0,
            "chat/room1 with topic_prefix talk: got %s", m != NULL ? m->payload : "nothing");
    harness_msg_free(m);
    harness_expect_store(dev, GROUP, 26);
    harness_client_disconnect(plain);
    harness_client_disconnect(dev);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * resubscribe, turns
 * ========================================================================= */

/* Checks that pages[0..n) are count pages of group, consecutive from id
 * from, each of size ids. Returns the last id. */
static int64_t expect_pages(const harness_page *pages, size_t n, const char *group, int64_t from,
                            size_t count, int size, const char *why)
{
    int64_t next = from;

    ASSERTF(n == count, "%s: %zu page(s), expected %zu", why, n, count);
    for (size_t i = 0; i < n; i++) {
        ASSERTF(strcmp(pages[i].group, group) == 0 && pages[i].first == next &&
                    pages[i].last == next + size - 1,
                "%s: page %zu is %s %lld..%lld, expected %s %lld..%lld", why, i, pages[i].group,
                (long long)pages[i].first, (long long)pages[i].last, group, (long long)next,
                (long long)(next + size - 1));
        next += size;
    }
    return next - 1;
}

/* The pages the plugin sent dev so far must be count pages of GROUP of ten,
 * consecutive from id from. */
static void expect_run(harness_client *dev, int64_t from, size_t count, const char *why)
{
    harness_page pages[MAX_PAGES];
    size_t n = take_pages(dev, pages, MAX_PAGES);

    expect_pages(pages, n, GROUP, from, count, 10, why);
    free_pages(pages, n);
}

static void case_resubscribe(void)
{
    ts_broker_conf conf = {.plugin_opts = (const char *const[]){"page_size 10", NULL}};
    ts_broker *b = ts_broker_create(&conf);
    harness_client *dev;

    /* Mosquitto 2.0.11 leaks a second subscription to one filter: not
     * ours, and the point of this case. */
    ts_broker_suppress_leaks(b, (const char *const[]){"sub__add", NULL});
    ts_broker_launch(b);
    join_and_leave(b, TOPIC);
    publish_n(b, TOPIC, 100, 10);
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 0);
    expect_run(dev, 1, 4, "after the subscribe");
    /* Nothing acked, the window full: a new subscribe restarts the
     * catch-up, but pages in flight count (a client repeating subscribes
     * gets no window after window). */
    harness_client_subscribe(dev, TOPIC, 0);
    expect_run(dev, 1, 0, "after a second subscribe with the window full");
    /* An ack frees what it covers. */
    harness_ack(dev, GROUP, 20, 1);
    expect_run(dev, 41, 2, "after acking 20");
    /* Twenty more come live meanwhile; a new subscribe takes the catch-up
     * on to the new head. */
    publish_n(b, TOPIC, 20, 10);
    harness_client_subscribe(dev, TOPIC, 0);
    expect_run(dev, 61, 0, "after a subscribe at cursor 20, the window full");
    harness_ack(dev, GROUP, 60, 1);
    expect_run(dev, 61, 4, "after acking 60");
    harness_ack(dev, GROUP, 100, 1);
    expect_run(dev, 101, 2, "after acking 100: up to the head of the restart");
    harness_ack(dev, GROUP, 120, 1);
    harness_expect_quiet(dev, "no page after acking the head");
    harness_client_disconnect(dev);
    ts_broker_destroy(b);
}

#define TURN_GROUPS 3

static void case_turns(void)
{
    const char *opts[] = {"page_size 5", NULL};
    static const char *const topics[TURN_GROUPS] = {"chat/ga", "chat/gb", "chat/gc"};
    ts_broker *b = ts_broker_start(opts);
    harness_page pages[MAX_PAGES];
    harness_client *dev;
    int per_group[TURN_GROUPS] = {0};
    int64_t next[TURN_GROUPS];
    size_t n;
    const char *first_group;
    int64_t last;

    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe_many(dev, TURN_GROUPS, topics, 1);
    harness_client_disconnect(dev);
    for (int i = 0; i < TURN_GROUPS; i++)
        publish_n(b, topics[i], 30, 10);
    /* One subscribe for the three: the group started first fills the
     * window. */
    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe_many(dev, TURN_GROUPS, topics, 1);
    n = take_pages(dev, pages, MAX_PAGES);
    ASSERTF(n == 4, "%zu pages after the subscribe, replay_window is 4", n);
    first_group = pages[0].group;
    last = expect_pages(pages, n, first_group, 1, 4, 5, "the first window");
    {
        char group[64];
        snprintf(group, sizeof group, "%s", first_group);
        free_pages(pages, n);
        /* Acking all four frees the window: the groups take turns in it. */
        harness_ack(dev, group, last, 1);
        for (int i = 0; i < TURN_GROUPS; i++)
            next[i] = strcmp(topics[i] + 5, group) == 0 ? last + 1 : 1;
    }
    n = take_pages(dev, pages, MAX_PAGES);
    ASSERTF(n == 4, "%zu pages after acking the first window, replay_window is 4", n);
    for (size_t i = 0; i < n; i++) {
        int k = 0;
        while (k < TURN_GROUPS && strcmp(topics[k] + 5, pages[i].group) != 0)
            k++;
        ASSERTF(k < TURN_GROUPS, "page of group %s", pages[i].group);
        ASSERTF(pages[i].first == next[k], "page %zu: %s from %lld, expected from %lld", i,
                pages[i].group, (long long)pages[i].first, (long long)next[k]);
        ASSERTF(i == 0 || strcmp(pages[i].group, pages[i - 1].group) != 0,
                "pages %zu and %zu both of %s: the groups do not take turns", i - 1, i,
                pages[i].group);
        next[k] = pages[i].last + 1;
        per_group[k]++;
    }
    for (int k = 0; k < TURN_GROUPS; k++)
        ASSERTF(per_group[k] >= 1, "no page of %s in a window of 4 shared by %d groups",
                topics[k] + 5, TURN_GROUPS);
    ts_log("the second window: %s %s %s %s", pages[0].group, pages[1].group, pages[2].group,
           pages[3].group);
    free_pages(pages, n);
    harness_client_disconnect(dev);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * budget
 * ========================================================================= */

#define BUDGET_DEVICES 8
#define BUDGET_MESSAGES 30 /* 6 pages of 5 for each device */

/* A figure of the admin command stats. */
static int64_t stat_of(harness_client *admin, const char *figure)
{
    cJSON *resp = harness_request(admin, "{\"commands\":[{\"command\":\"stats\"}]}", WAIT_MS);
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "stats", NULL);
    int64_t v = harness_json_int(cJSON_GetObjectItemCaseSensitive(e, "figures"), figure);
    cJSON_Delete(resp);
    return v;
}

static harness_client *user_client(ts_broker *b, const char *id, const char *name)
{
    harness_client_opts o = {.client_id = id, .username = name};
    return harness_client_connect_opts(b, &o);
}

/* Devices bob-0.. of bob (ids[i], ndev of them) join TOPIC at head 0 and
 * go away; carol then sends messages k1..k<n> and has every PUBACK. */
static void join_bobs_then_fill(ts_broker *b, char (*ids)[16], int ndev, int n)
{
    harness_ticket t = {0, 0};
    for (int i = 0; i < ndev; i++) {
        snprintf(ids[i], sizeof ids[i], "bob-%d", i);
        harness_client *dev = user_client(b, ids[i], "bob");
        harness_client_subscribe(dev, TOPIC, 1);
        harness_client_disconnect(dev);
    }
    harness_client *snd = user_client(b, "carol-sender", "carol");
    harness_client_set_window(snd, 100);
    for (int k = 1; k <= n; k++) {
        char payload[64];
        snprintf(payload, sizeof payload, "{\"body\":\"k%d\"}", k);
        ASSERT(harness_client_publish_async(snd, TOPIC, payload, 1, &t) == 0);
    }
    harness_client_wait_acked(snd, t, WAIT_MS);
    harness_client_disconnect(snd);
}

static void case_budget(void)
{
    /* replay_share left at its default (0): the budget in messages alone
     * is what a pass carries, and what the figures count. */
    const char *opts[] = {"admins alice", "page_size 5", "replay_window 2", "replay_budget 5",
                          NULL};
    ts_broker *b = ts_broker_start_users(opts);
    harness_client *dev[BUDGET_DEVICES], *alice;
    char ids[BUDGET_DEVICES][16];
    int64_t next[BUDGET_DEVICES];

    /* Every device of bob joins at head 0 and goes away. */
    join_bobs_then_fill(b, ids, BUDGET_DEVICES, BUDGET_MESSAGES);

    /* They all come back. Each subscribe finds the budget (one page a pass)
     * spent or others waiting: the devices take turns. */
    for (int i = 0; i < BUDGET_DEVICES; i++) {
        dev[i] = user_client(b, ids[i], "bob");
        harness_client_subscribe(dev[i], TOPIC, 1);
    }
    /* Nobody acks yet, so nobody finishes: a device that waited for the
     * others to finish would never get its first page here. */
    for (int i = 0; i < BUDGET_DEVICES; i++) {
        harness_msg *m = harness_client_receive(dev[i], WAIT_MS);
        harness_page p;
        ASSERTF(m != NULL, "device %s got no page while no device had acked", ids[i]);
        ASSERTF(harness_page_parse(m, &p), "device %s: a message on %s", ids[i], m->topic);
        ASSERTF(p.first == 1 && p.count >= 1 && p.count <= 5, "device %s: first page %lld..%lld",
                ids[i], (long long)p.first, (long long)p.last);
        next[i] = p.last + 1;
        harness_page_free(&p);
        harness_msg_free(m);
    }
    /* Then each catches up in turn, acking as it goes: every id once, in
     * order, in pages of at most page_size. */
    for (int i = 0; i < BUDGET_DEVICES; i++) {
        harness_catchup g = {.group = GROUP, .from = next[i], .to = BUDGET_MESSAGES, .qos = 0};
        harness_catch_up(dev[i], &g, 1, 5, WAIT_MS, NULL, NULL);
    }
    alice = user_client(b, "alice-cli", "alice");
    int64_t pass_max = stat_of(alice, "pages/pass_max_messages");
    int64_t turns = stat_of(alice, "catchups/turns");
    ts_log("most messages in one pass: %lld; devices that waited for a turn: %lld",
           (long long)pass_max, (long long)turns);
    /* The budget, and the one page of 5 that crosses it. */
    ASSERTF(pass_max >= 1 && pass_max <= 5 + 5 - 1, "a pass carried %lld messages, budget 5",
            (long long)pass_max);
    /* Each subscribe sent one page, which spent the pass's budget, and the
     * window had room for another. */
    ASSERTF(turns >= BUDGET_DEVICES, "%lld turns for %d devices", (long long)turns, BUDGET_DEVICES);
    ASSERT(stat_of(alice, "catchups/waiting") == 0);
    harness_client_disconnect(alice);
    for (int i = 0; i < BUDGET_DEVICES; i++)
        harness_client_disconnect(dev[i]);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * inflight
 * ========================================================================= */

#define INFLIGHT_DEVICES 3
#define INFLIGHT_MESSAGES 40 /* 8 pages of 5 */

static void case_inflight(void)
{
    /* replay_budget 0: pages go as soon as there is room, so the window and
     * the pages in flight over all devices alone say what a device gets. */
    const char *opts[] = {"admins alice",    "page_size 5",       "replay_window 4",
                          "replay_budget 0", "replay_inflight 3", NULL};
    ts_broker *b = ts_broker_start_users(opts);
    harness_client *dev[INFLIGHT_DEVICES], *alice;
    harness_page pages[MAX_PAGES];
    char ids[INFLIGHT_DEVICES][16];
    int64_t next[INFLIGHT_DEVICES];
    size_t n;

    join_bobs_then_fill(b, ids, INFLIGHT_DEVICES, INFLIGHT_MESSAGES);
    alice = user_client(b, "alice-cli", "alice");

    /* Alone, bob-0 gets three pages of its window of four: the total. */
    dev[0] = user_client(b, ids[0], "bob");
    harness_client_subscribe(dev[0], TOPIC, 1);
    n = take_pages(dev[0], pages, MAX_PAGES);
    next[0] = expect_pages(pages, n, GROUP, 1, 3, 5, "bob-0 alone, replay_inflight 3") + 1;
    free_pages(pages, n);
    /* The others get their first page though three are in flight: no
     * catch-up waits for another's acks. And only that one. */
    for (int i = 1; i < INFLIGHT_DEVICES; i++) {
        dev[i] = user_client(b, ids[i], "bob");
        harness_client_subscribe(dev[i], TOPIC, 1);
        n = take_pages(dev[i], pages, MAX_PAGES);
        next[i] = expect_pages(pages, n, GROUP, 1, 1, 5, "a device beside bob-0's three") + 1;
        free_pages(pages, n);
    }
    ASSERT(stat_of(alice, "pages/inflight") == 3 + INFLIGHT_DEVICES - 1);
    /* bob-0 acks its three: five in flight less three leaves two, so it
     * gets one page (its first again), and not a second at three. */
    harness_ack(dev[0], GROUP, next[0] - 1, 1);
    n = take_pages(dev[0], pages, MAX_PAGES);
    next[0] = expect_pages(pages, n, GROUP, next[0], 1, 5, "bob-0 after its ack") + 1;
    free_pages(pages, n);
    ASSERT(stat_of(alice, "pages/inflight") == 3);
    /* bob-2 leaves with its page in flight: its place is given back (the
     * same client id comes back, so its old connection is gone). */
    harness_client_disconnect(dev[2]);
    dev[2] = user_client(b, ids[2], "bob");
    ASSERT(stat_of(alice, "pages/inflight") == 2);
    harness_client_subscribe(dev[2], TOPIC, 1);
    n = take_pages(dev[2], pages, MAX_PAGES);
    next[2] = expect_pages(pages, n, GROUP, 1, 1, 5, "bob-2 back, from its cursor") + 1;
    free_pages(pages, n);

    /* Each acks the page it holds and catches up, acking as it goes: every
     * id once, in order. */
    for (int i = 0; i < INFLIGHT_DEVICES; i++) {
        harness_catchup g = {.group = GROUP, .from = next[i], .to = INFLIGHT_MESSAGES, .qos = 0};
        harness_ack(dev[i], GROUP, next[i] - 1, 1);
        harness_catch_up(dev[i], &g, 1, 5, WAIT_MS, NULL, NULL);
    }
    ASSERT(stat_of(alice, "pages/inflight") == 0);
    ASSERT(stat_of(alice, "catchups/active") == 0);
    harness_client_disconnect(alice);
    for (int i = 0; i < INFLIGHT_DEVICES; i++)
        harness_client_disconnect(dev[i]);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * budget_empty
 * ========================================================================= */

#define EMPTY_DEVICES 8   /* bob-0..bob-7 */
#define EMPTY_WINDOW 8    /* plugin_opt_replay_window */
#define EMPTY_MESSAGES 60 /* 12 pages of 5: nobody finishes without acking */
#define EMPTY_HELD 16     /* CHAT_PROTO_HELD_EMPTY_MAX */
#define EMPTY_GONE 6      /* the device that disconnects with answers held */
#define EMPTY_WAITER 7    /* the device whose empty requests are held */
#define EMPTY_ANSWER "{\"responses\":[]}"
#define EMPTY_SYNC "{\"commands\":[{\"command\":\"sync\"}]}"

static bool is_empty_answer(const harness_msg *m)
{
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && strcmp(m->payload, EMPTY_ANSWER) == 0;
}

/* Whether m is the answer to EMPTY_SYNC (one sync entry). */
static bool is_sync_answer(const harness_msg *m)
{
    cJSON *root = cJSON_ParseWithLength(m->payload, m->len);
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "responses"), 0);
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
    bool sync = cJSON_IsString(cmd) && strcmp(cmd->valuestring, "sync") == 0 &&
                cJSON_GetObjectItemCaseSensitive(e, "error") == NULL;
    cJSON_Delete(root);
    return sync;
}

/* Publishes {"commands":[]} from c with Correlation Data corr at qos (1:
 * waits for the PUBACK; 0: does not, and the requests still come in order). */
static void empty_request(harness_client *c, const char *corr, int qos)
{
    harness_props props = {.corr = corr, .corr_len = strlen(corr)};
    ASSERT(harness_client_publish_bytes(c, HARNESS_CONTROL_TOPIC, "{\"commands\":[]}", 15, qos,
                                        &props) == 0);
}

static harness_client *v5_client(ts_broker *b, const char *id, bool persistent)
{
    harness_client_opts o = {
        .client_id = id, .username = "bob", .mqtt_version = 5, .persistent = persistent};
    return harness_client_connect_opts(b, &o);
}

static void case_budget_empty(void)
{
    /* A page a pass (page_size 5, budget 5). Pages at QoS 0 (the
     * default): no PUBACK of a page starts a pass, so passes come with the
     * clients' requests and the broker's idle wake-ups (100 ms), and the
     * waiter's requests, sent at once, are all read long before its window
     * fills. */
    const char *opts[] = {"page_size 5", "replay_window 8", "replay_budget 5", NULL};
    ts_broker *b = ts_broker_start_users(opts);
    harness_client *dev[EMPTY_DEVICES], *snd, *w;
    char ids[EMPTY_DEVICES][16];
    harness_ticket t = {0, 0};

    for (int i = 0; i < EMPTY_DEVICES; i++) {
        snprintf(ids[i], sizeof ids[i], "bob-%d", i);
        dev[i] = v5_client(b, ids[i], i == EMPTY_GONE);
        harness_client_subscribe(dev[i], TOPIC, 1);
        harness_client_disconnect(dev[i]);
    }
    snd = user_client(b, "carol-sender", "carol");
    harness_client_set_window(snd, 100);
    for (int k = 1; k <= EMPTY_MESSAGES; k++) {
        char payload[64];
        snprintf(payload, sizeof payload, "{\"body\":\"k%d\"}", k);
        ASSERT(harness_client_publish_async(snd, TOPIC, payload, 1, &t) == 0);
    }
    harness_client_wait_acked(snd, t, WAIT_MS);
    harness_client_disconnect(snd);

    /* They all come back without subscribing (the kept session of the one
     * that will go away may start its catch-up at once), then ask for
     * their catch-ups together: a sync each, at QoS 0, without waiting, so
     * that the queue of turns forms within a pass or two, before the
     * requests below, each of which takes a pass of the broker's loop (it
     * reads one packet of a client a pass), and so a turn. */
    for (int i = 0; i < EMPTY_DEVICES; i++)
        dev[i] = v5_client(b, ids[i], i == EMPTY_GONE);
    for (int i = 0; i < EMPTY_DEVICES; i++)
        ASSERT(harness_client_publish_bytes(dev[i], HARNESS_CONTROL_TOPIC, EMPTY_SYNC,
                                            strlen(EMPTY_SYNC), 0, NULL) == 0);
    /* Three answers held, then gone (its session kept). */
    empty_request(dev[EMPTY_GONE], "g0", 0);
    empty_request(dev[EMPTY_GONE], "g1", 0);
    empty_request(dev[EMPTY_GONE], "g2", 0);
    harness_client_disconnect(dev[EMPTY_GONE]);
    dev[EMPTY_GONE] = NULL;
    /* Sixteen held, the seventeenth refused: the waiter's window takes
     * about EMPTY_WINDOW rounds of seven devices, far more turns than its
     * seventeen requests take passes. */
    w = dev[EMPTY_WAITER];
    int64_t asked_ms = ts_now_ms();
    for (int k = 0; k <= EMPTY_HELD; k++) {
        char corr[16];
        snprintf(corr, sizeof corr, "f%02d", k);
        empty_request(w, corr, 0);
    }

    /* What comes to the waiter, in order: its pages up to its window, the
     * refusal of the 17th (at once) among them, and only then the sixteen
     * answers, in the order asked. Nobody acks, so no page follows them. */
    size_t pages = 0, pages_at_answer = 0;
    int answers = 0;
    bool refused = false;
    int64_t answered_ms = 0;
    while (answers < EMPTY_HELD) {
        harness_msg *m = harness_client_receive(w, 2 * WAIT_MS);
        harness_page p;
        ASSERTF(m != NULL, "%s: %zu pages and %d of %d answers, then nothing", ids[EMPTY_WAITER],
                pages, answers, EMPTY_HELD);
        if (is_empty_answer(m)) {
            char corr[16];
            snprintf(corr, sizeof corr, "f%02d", answers);
            ASSERTF(m->has_corr && m->corr_len == 3 && memcmp(m->corr, corr, 3) == 0,
                    "answer %d: correlation data %.*s, expected %s", answers, (int)m->corr_len,
                    m->corr ? m->corr : "", corr);
            if (answers++ == 0) {
                answered_ms = m->at_ms;
                pages_at_answer = pages;
            }
        } else if (is_sync_answer(m)) {
            /* the answer to its sync */
        } else if (strstr(m->payload, "\"error\"") != NULL) {
            cJSON *resp = harness_json_object(m);
            ASSERTF(!refused && answers == 0, "unexpected %.300s", m->payload);
            harness_expect_error(harness_response_only(resp), "request", NULL, NULL,
                                 CHAT_PROTO_ERR_EMPTY_HELD);
            ASSERTF(m->has_corr && m->corr_len == 3 && memcmp(m->corr, "f16", 3) == 0,
                    "the refusal is not the answer to the 17th request");
            refused = true;
            cJSON_Delete(resp);
        } else {
            ASSERTF(harness_page_parse(m, &p), "unexpected message on %s", m->topic);
            ASSERTF(answers == 0, "a page (%lld..%lld) after an answer to an empty request",
                    (long long)p.first, (long long)p.last);
            ASSERTF(p.first == (int64_t)(5 * pages + 1), "page %zu from %lld", pages,
                    (long long)p.first);
            pages++;
            harness_page_free(&p);
        }
        harness_msg_free(m);
    }
    ASSERTF(refused, "the 17th empty request of %s was not refused", ids[EMPTY_WAITER]);
    ASSERTF(pages_at_answer == EMPTY_WINDOW,
            "the answers came after %zu pages, not once the window (%d) was full", pages_at_answer,
            EMPTY_WINDOW);
    harness_expect_quiet(w, "nothing after the window and the answers");

    /* While the waiter waited, the others took turns: pages came to them
     * between its requests and its answers. */
    int between = 0;
    for (int i = 0; i < EMPTY_DEVICES; i++) {
        harness_msg *m;
        if (i == EMPTY_WAITER || dev[i] == NULL)
            continue;
        while ((m = harness_client_receive(dev[i], 0)) != NULL) {
            harness_page p;
            if (!is_sync_answer(m) && harness_page_parse(m, &p)) {
                between += m->at_ms > asked_ms && m->at_ms < answered_ms;
                harness_page_free(&p);
            }
            harness_msg_free(m);
        }
    }
    ts_log("the waiter's answers after %lld ms; %d pages of others meanwhile",
           (long long)(answered_ms - asked_ms), between);
    ASSERTF(between >= EMPTY_DEVICES - 2, "%d pages of other devices while %s waited", between,
            ids[EMPTY_WAITER]);

    /* The device that went away with three answers held comes back to its
     * session: none of them comes, only the answer to its new request (and
     * the broker stops without a leak: ts_broker_destroy). */
    dev[EMPTY_GONE] = v5_client(b, ids[EMPTY_GONE], true);
    empty_request(dev[EMPTY_GONE], "probe", 1);
    for (;;) {
        harness_msg *m = harness_client_receive(dev[EMPTY_GONE], 2 * WAIT_MS);
        ASSERTF(m != NULL, "%s: no answer to its request after coming back", ids[EMPTY_GONE]);
        if (is_empty_answer(m)) {
            bool probe = m->has_corr && m->corr_len == 5 && memcmp(m->corr, "probe", 5) == 0;
            ASSERTF(probe, "%s got an answer held before its disconnect (%.*s)", ids[EMPTY_GONE],
                    (int)m->corr_len, m->corr ? m->corr : "");
            harness_msg_free(m);
            break;
        }
        harness_msg_free(m);
    }
    for (int i = 0; i < EMPTY_DEVICES; i++)
        harness_client_disconnect(dev[i]);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * main
 * ========================================================================= */

static const ts_case cases[] = {
    {"page_bytes", case_page_bytes},
    {"truncated", case_truncated},
    {"retention_days", case_retention_days},
    {"page_qos1", case_page_qos1},
    {"page_qos2", case_page_qos2},
    {"prefix", case_prefix},
    {"resubscribe", case_resubscribe},
    {"turns", case_turns},
    {"budget", case_budget},
    {"inflight", case_inflight},
    {"budget_empty", case_budget_empty},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_replay_", cases, sizeof cases / sizeof cases[0]);
}
