/* integ_noack: a device that never acks gets exactly replay_window pages, no
 * more and no fewer; replay_timeout seconds later, and not before, it gets
 * the same pages again from its cursor; each ack then lets exactly as many
 * new pages go as it covers.
 *
 * Nothing here is measured as a speed: the plugin sends a window's pages in
 * one go, so the pages it sent are counted behind a barrier
 * (harness_barrier), and the resend is awaited (a bounded wait) and
 * recognised by its first page and by the plugin's log line. The one time
 * checked is a lower bound that slowness cannot break: the resend arrives
 * at least replay_timeout after the subscribe was sent (the plugin starts
 * the device's clock after that). */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 100 /* messages missed: ten pages */
#define PAGE_SIZE 10
#define WINDOW 4            /* replay_window default, PROTOCOL.md */
#define TIMEOUT_MS 2000     /* replay_timeout 2 */
#define RESEND_WAIT_MS 8000 /* replay_timeout 2, scanned once a second, with room */
#define MAX_PAGES 64
#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define DEVICE "noack-device"
#define RESEND_LINE "no ack from " DEVICE " for 2 s, resending from its cursor"

typedef struct rec {
    int64_t first, last;
} rec;

/* Checks one replay page and returns its bounds. */
static rec check_page(const harness_msg *m)
{
    harness_page p;
    rec r;
    int64_t expect;
    const cJSON *env;

    if (!harness_page_parse(m, &p))
        FAILF("unexpected message on %s: %.300s", m->topic, m->payload);
    ASSERTF(strcmp(p.group, GROUP) == 0, "page of group %s", p.group);
    ASSERTF(p.count == PAGE_SIZE, "page %lld..%lld of %zu messages, page_size is %d",
            (long long)p.first, (long long)p.last, p.count, PAGE_SIZE);
    ASSERTF(p.head == N, "page says head %lld", (long long)p.head);
    ASSERTF(p.last - p.first + 1 == (int64_t)p.count, "page %lld..%lld holds %zu messages",
            (long long)p.first, (long long)p.last, p.count);
    expect = p.first;
    cJSON_ArrayForEach(env, p.messages)
    {
        ASSERTF(harness_json_int(env, "id") == expect, "page %lld..%lld: id %lld at %lld",
                (long long)p.first, (long long)p.last, (long long)harness_json_int(env, "id"),
                (long long)expect);
        expect++;
    }
    r.first = p.first;
    r.last = p.last;
    harness_page_free(&p);
    return r;
}

/* The pages the plugin has sent dev so far (behind a barrier), which must be
 * exactly count consecutive pages from id from, and nothing else. A resend
 * that started meanwhile (its first page goes back to the cursor) ends the
 * run: only the pages before it count. Returns the last id of the run. */
static int64_t expect_run(harness_client *dev, int64_t from, int count, const char *why)
{
    harness_msg *m;
    int n = 0;
    int64_t next = from;

    harness_barrier(dev);
    for (int i = 0; i < MAX_PAGES && (m = harness_client_receive(dev, 0)) != NULL; i++) {
        rec r = check_page(m);
        harness_msg_free(m);
        if (n > 0 && r.first != next) {
            ts_log("a resend from %lld began after %d page(s)", (long long)r.first, n);
            break;
        }
        ASSERTF(r.first == next, "%s: page %lld..%lld where one from %lld was due", why,
                (long long)r.first, (long long)r.last, (long long)next);
        n++;
        next = r.last + 1;
    }
    /* A resend may have queued more pages: they are the caller's no more. */
    for (int i = 0; i < MAX_PAGES && (m = harness_client_receive(dev, 0)) != NULL; i++)
        harness_msg_free(m);
    ASSERTF(n == count, "%s: %d page(s) from %lld, expected exactly %d (replay_window %d)", why, n,
            (long long)from, count, WINDOW);
    ts_log("%s: %d page(s), ids %lld..%lld", why, n, (long long)from, (long long)(next - 1));
    return next - 1;
}

int main(void)
{
    static const char *opts[] = {"page_size 10", "replay_timeout 2", NULL};
    ts_broker *b;
    harness_client *dev, *snd;
    char payload[64];
    harness_msg *m;
    rec r;
    long resends;
    int64_t last, subscribed_ms;

    ts_init("integ_noack");
    b = ts_broker_start(opts);

    dev = harness_client_connect(b, DEVICE, NULL);
    harness_client_subscribe(dev, TOPIC, 1);
    harness_client_disconnect(dev);
    snd = harness_client_connect(b, "noack-sender", NULL);
    for (int k = 1; k <= N; k++) {
        snprintf(payload, sizeof payload, "{\"body\":\"noack %d\",\"n\":%d}", k, k);
        harness_client_publish(snd, TOPIC, payload, 1);
    }
    harness_client_disconnect(snd);

    /* Back online, no ack: the subscribe sends exactly a window of pages
     * from the cursor. */
    dev = harness_client_connect(b, DEVICE, NULL);
    subscribed_ms = ts_now_ms();
    harness_client_subscribe(dev, TOPIC, 1);
    expect_run(dev, 1, WINDOW, "after the subscribe");

    /* No ack: after replay_timeout the same window again, from the cursor,
     * and the plugin says why. */
    resends = ts_broker_log_count(b, RESEND_LINE);
    m = harness_client_receive(dev, RESEND_WAIT_MS);
    ASSERTF(m != NULL, "pages not sent again within %d ms (replay_timeout 2 s)", RESEND_WAIT_MS);
    /* Whole seconds on the plugin's side made this 1.0-2.0 s. */
    ASSERTF(m->at_ms - subscribed_ms >= TIMEOUT_MS,
            "pages sent again %lld ms after the subscribe, before replay_timeout (%d ms)",
            (long long)(m->at_ms - subscribed_ms), TIMEOUT_MS);
    ts_log("pages sent again %lld ms after the subscribe", (long long)(m->at_ms - subscribed_ms));
    r = check_page(m);
    harness_msg_free(m);
    ASSERTF(r.first == 1, "the resend starts at %lld, the cursor is 0", (long long)r.first);
    ASSERTF(ts_broker_log_count(b, RESEND_LINE) > resends,
            "pages came again, but the plugin did not log \"%s\"", RESEND_LINE);
    last = expect_run(dev, r.last + 1, WINDOW - 1, "the rest of the resend");

    /* An ack of the first page frees one page of the window: exactly one
     * more page goes, after the window. */
    harness_ack(dev, GROUP, r.last, 1);
    last = expect_run(dev, last + 1, 1, "after acking the first page");

    /* An ack of everything sent frees the whole window. */
    harness_ack(dev, GROUP, last, 1);
    last = expect_run(dev, last + 1, WINDOW, "after acking every page sent");
    ASSERT(last == PAGE_SIZE * (2 * WINDOW + 1));

    harness_client_disconnect(dev);
    ts_broker_destroy(b);
    return ts_pass();
}
