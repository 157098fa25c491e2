/* integ_noack: a device that never acks gets no more than replay_window pages,
 * and, replay_timeout seconds later, the same pages again from its cursor; an
 * ack then moves its window on. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 100 /* messages missed: ten pages */
#define PAGE_SIZE 10
#define WINDOW 4        /* replay_window default, PROTOCOL.md */
#define TIMEOUT_MS 2000 /* plugin_opt_replay_timeout 2 */
#define SLACK_MS 1000   /* a once-a-second timer may fire this much early or late */
#define OBSERVE_MS 6500 /* watch this long after subscribing: three rounds or more */
#define QUIET_MS 300    /* a round is over after this long without a page */
#define MAX_PAGES 64
#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define DEVICE "noack-device"

typedef struct rec {
    int64_t first, last, at_ms;
    size_t count;
} rec;

/* Receives one replay page within timeout_ms into *r, checking it; false if
 * none came. */
static bool next_page(harness_client *c, int timeout_ms, rec *r)
{
    harness_msg *m = harness_client_receive(c, timeout_ms);
    harness_page p;

    if (m == NULL)
        return false;
    if (!harness_page_parse(m, &p))
        FAILF("unexpected message on %s: %.300s", m->topic, m->payload);
    ASSERTF(strcmp(p.group, GROUP) == 0, "page of group %s", p.group);
    ASSERTF(p.count >= 1 && p.count <= PAGE_SIZE, "page of %zu messages", p.count);
    ASSERTF(p.head == N, "page says head %lld", (long long)p.head);
    ASSERTF(p.last - p.first + 1 == (int64_t)p.count, "page %lld..%lld holds %zu messages",
            (long long)p.first, (long long)p.last, p.count);
    {
        int64_t expect = p.first;
        const cJSON *env;
        cJSON_ArrayForEach(env, p.messages)
        {
            ASSERTF(harness_json_int(env, "id") == expect, "page %lld..%lld: id %lld at %lld",
                    (long long)p.first, (long long)p.last, (long long)harness_json_int(env, "id"),
                    (long long)expect);
            expect++;
        }
    }
    r->first = p.first;
    r->last = p.last;
    r->count = p.count;
    r->at_ms = p.at_ms;
    harness_page_free(&p);
    harness_msg_free(m);
    return true;
}

int main(void)
{
    static const char *opts[] = {"page_size 10", "replay_timeout 2", NULL};
    rec pages[MAX_PAGES];
    int npages = 0, rounds = 0, in_round = 0;
    int64_t t0, prev_last = 0, round_end_at = 0, last_of_round = 0;
    ts_broker *b;
    harness_client *dev, *snd;
    char payload[64];
    rec r;

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

    dev = harness_client_connect(b, DEVICE, NULL);
    t0 = ts_now_ms();
    harness_client_subscribe(dev, TOPIC, 1);

    /* Watch without acking. A round starts with a page from the cursor (id
     * 1); within a round pages are consecutive and at most WINDOW. */
    for (int i = 0; i < MAX_PAGES; i++) {
        int64_t left = t0 + OBSERVE_MS - ts_now_ms();
        if (left <= 0 || !next_page(dev, (int)left, &r))
            break;
        ASSERTF(npages < MAX_PAGES - 1, "more than %d pages in %d ms", MAX_PAGES, OBSERVE_MS);
        pages[npages++] = r;
        ts_log("page %lld..%lld at +%lld ms", (long long)r.first, (long long)r.last,
               (long long)(r.at_ms - t0));
        if (r.first == 1) {
            if (rounds == 0) {
                ASSERTF(r.at_ms - t0 <= SLACK_MS, "first page only %lld ms after the subscribe",
                        (long long)(r.at_ms - t0));
            } else {
                ASSERTF(r.at_ms - round_end_at >= TIMEOUT_MS - SLACK_MS,
                        "pages sent again %lld ms after the previous ones, replay_timeout is %d ms",
                        (long long)(r.at_ms - round_end_at), TIMEOUT_MS);
                ASSERTF(r.at_ms - round_end_at <= TIMEOUT_MS + 2 * SLACK_MS,
                        "pages sent again only %lld ms after the previous ones, replay_timeout is "
                        "%d ms",
                        (long long)(r.at_ms - round_end_at), TIMEOUT_MS);
            }
            rounds++;
            in_round = 1;
        } else {
            ASSERTF(rounds > 0, "first page starts at %lld, the cursor is 0", (long long)r.first);
            ASSERTF(r.first == prev_last + 1,
                    "page %lld..%lld after page ending at %lld without an ack", (long long)r.first,
                    (long long)r.last, (long long)prev_last);
            in_round++;
            ASSERTF(in_round <= WINDOW,
                    "%d pages in flight without an ack (replay_window %d), the last at +%lld ms",
                    in_round, WINDOW, (long long)(r.at_ms - t0));
        }
        prev_last = r.last;
        round_end_at = r.at_ms;
    }
    ASSERTF(rounds >= 1, "no page within %d ms of subscribing", OBSERVE_MS);
    ASSERTF(rounds >= 2, "pages not sent again within %d ms (replay_timeout %d ms)", OBSERVE_MS,
            TIMEOUT_MS);
    /* Every round is the same window of pages. */
    {
        int first_round_pages = 0;
        while (first_round_pages < npages &&
               (first_round_pages == 0 || pages[first_round_pages].first != 1))
            first_round_pages++;
        for (int i = 0; i < npages; i++) {
            const rec *same = &pages[i % first_round_pages];
            /* A round still under way at the end of the watch may be short. */
            ASSERTF(pages[i].first == same->first && pages[i].last == same->last,
                    "page %d is %lld..%lld, the first round had %lld..%lld here", i,
                    (long long)pages[i].first, (long long)pages[i].last, (long long)same->first,
                    (long long)same->last);
        }
        ts_log("%d rounds of %d page(s) without acks", rounds, first_round_pages);
    }

    /* Wait for the start of the next round and let it finish, then ack it:
     * the window must move to the page after the acked id. */
    for (int i = 0; i < MAX_PAGES && (i == 0 || r.first != 1); i++)
        ASSERTF(next_page(dev, TIMEOUT_MS + 2 * SLACK_MS, &r), "no further round of pages");
    last_of_round = r.last;
    for (int i = 0; i < WINDOW && next_page(dev, QUIET_MS, &r); i++)
        last_of_round = r.last;
    ts_log("acking %lld", (long long)last_of_round);
    harness_ack(dev, GROUP, last_of_round, 1);
    ASSERTF(next_page(dev, SLACK_MS, &r), "no page within %d ms of acking %lld", SLACK_MS,
            (long long)last_of_round);
    ASSERTF(r.first == last_of_round + 1, "after acking %lld the next page starts at %lld",
            (long long)last_of_round, (long long)r.first);

    harness_client_disconnect(dev);
    ts_broker_destroy(b);
    return ts_pass();
}
