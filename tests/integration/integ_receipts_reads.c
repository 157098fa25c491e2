/* integ_receipts_reads: read markers against a real broker (protocol v1.1),
 * one case per argv[1] (ctest integ_receipts_<case>):
 *
 *   markers    read markers move forward only, per member across its
 *              devices, by topic and by command, each acking its device;
 *              above head is head; receipts lists every member in name
 *              order, pages with after and limit ("read by k of n")
 *   errors     a bad read payload, a missing id, a read, receipts or
 *              presence by a non-member: error entries, nothing changes;
 *              the read topic reaches no subscriber, not even "#"
 *   coalesced  one push per group per receipt_interval holds every marker
 *              that moved since the last one, to every subscribed device;
 *              a read that moves no marker pushes nothing
 *   own        a member's own messages are read by that member (issue 25,
 *              item 6): a plain MQTT client that sends and never acks or
 *              reads has its marker at its last message (receipts, sync's
 *              unread 0 on each of its devices; not pushed), while its
 *              device cursors stay where delivery left them (its own
 *              messages still reach its devices)
 */
#include "integ_receipts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * markers
 * ========================================================================= */

static void case_markers(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *a1 = rcp_connect(b, "a1", "alice", false);
    harness_client *a2 = rcp_connect(b, "a2", "alice", false);
    harness_client *bob = rcp_connect(b, "b1", "bob", false);
    harness_client *carol = rcp_connect(b, "c1", "carol", false);

    harness_client_subscribe(a1, "chat/" GROUP, 1);
    harness_client_subscribe(a2, "chat/" GROUP, 1);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    harness_client_subscribe(carol, "chat/" GROUP, 1);
    rcp_send_n(bob, 10);
    /* bob has read what he sent (issue 25, item 6) */
    rcp_expect_receipts(a1, "", "alice:0 bob:10 carol:0", 3, false);

    /* by topic, then by command from another device: forward only, the
     * member's marker over its devices, each device's cursor its own */
    rcp_read_topic(a1, 6);
    rcp_expect_receipts(bob, "", "alice:6 bob:10 carol:0", 3, false);
    ASSERT(rcp_cursor_of(a1) == 6);
    rcp_read_command(a2, 4, 6, 4);
    ASSERT(rcp_cursor_of(a2) == 4);
    rcp_read_topic(a1, 2);
    rcp_read_command(a1, 5, 6, 6);
    rcp_expect_receipts(carol, "", "alice:6 bob:10 carol:0", 3, false);
    rcp_read_command(a2, 8, 8, 8);
    /* above head is head */
    rcp_read_command(bob, 1000, 10, 10);
    rcp_read_topic(carol, 3);
    rcp_expect_receipts(a2, "", "alice:8 bob:10 carol:3", 3, false);

    /* paging in name order; the count is the whole group's */
    rcp_expect_receipts(a1, ",\"limit\":2", "alice:8 bob:10", 3, true);
    rcp_expect_receipts(a1, ",\"limit\":2,\"after\":\"bob\"", "carol:3", 3, false);
    rcp_expect_receipts(a1, ",\"after\":\"b\"", "bob:10 carol:3", 3, false);
    rcp_expect_receipts(a1, ",\"limit\":5000", "alice:8 bob:10 carol:3", 3, false);

    /* markers survive a restart (they are stored) */
    harness_client_destroy(a1);
    harness_client_destroy(a2);
    harness_client_destroy(bob);
    harness_client_destroy(carol);
    ts_broker_stop(b);
    ts_broker_restart(b);
    carol = rcp_connect(b, "c1", "carol", false);
    rcp_expect_receipts(carol, "", "alice:8 bob:10 carol:3", 3, false);
    ts_log("read by k of n for message 8: alice and bob, 2 of 3");
    harness_client_disconnect(carol);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * errors
 * ========================================================================= */

static void case_errors(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *alice = rcp_connect(b, "a1", "alice", false);
    harness_client *eve = rcp_connect(b, "e1", "eve", false);

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    harness_client_subscribe(eve, "#", 0);
    rcp_send_n(alice, 3);

    /* a bad payload: an error entry, no change, nothing delivered */
    harness_client_publish(alice, "chat/" GROUP "/read", "two", 1);
    cJSON *resp = harness_client_response(alice, WAIT_MS);
    harness_expect_error(harness_response_only(resp), "read", GROUP, NULL,
                         "read payload must be a decimal message id");
    cJSON_Delete(resp);
    rcp_expect_refused(alice, "{\"command\":\"read\",\"group\":\"" GROUP "\"", "read",
                       "id is missing");
    rcp_expect_refused(alice, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":-1", "read",
                       "id must be an integer from 0 to 2^53-1");
    rcp_expect_refused(alice, "{\"command\":\"receipts\",\"group\":\"" GROUP "\",\"after\":5",
                       "receipts", "after must be a member name");
    rcp_expect_refused(alice, "{\"command\":\"receipts\",\"group\":\"" GROUP "\",\"limit\":0",
                       "receipts", "limit must be an integer from 1 to 2^53-1");
    /* alice has read what she sent; a read below changes nothing */
    rcp_read_topic(alice, 2);
    rcp_expect_receipts(alice, "", "alice:3", 1, false);

    /* eve is no member: refused, told nothing (a read command does not
     * join; her reads and requests change nothing) */
    rcp_expect_refused(eve, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":1", "read",
                       "not a member of the group");
    rcp_expect_refused(eve, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"", "receipts",
                       "not a member of the group");
    rcp_expect_refused(eve, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                       "not a member of the group");
    rcp_expect_receipts(alice, "", "alice:3", 1, false);

    /* the read topic reaches nobody, not even "#" */
    rcp_read_topic(alice, 3);
    harness_expect_quiet(eve, "nothing: reads are never delivered");
    harness_client_disconnect(alice);
    harness_client_disconnect(eve);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * coalesced
 * ========================================================================= */

static void case_coalesced(void)
{
    const char *opts[] = {"receipt_interval 2000", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *watch1 = rcp_connect(b, "w1", "walt", true);
    harness_client *watch2 = rcp_connect(b, "w2", "walt", true);
    harness_client *r[4];
    const char *names[4] = {"ann", "ben", "cat", "dan"};
    struct rcp_seen s1 = {0}, s2 = {0};

    harness_client_subscribe(watch1, "chat/" GROUP, 1);
    harness_client_subscribe(watch2, "chat/" GROUP, 1);
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "r-%s", names[i]);
        r[i] = rcp_connect(b, id, names[i], false);
        harness_client_subscribe(r[i], "chat/" GROUP, 1);
    }
    /* A sender of its own, whose marker its messages move, not the four
     * readers'. */
    harness_client *sam = rcp_connect(b, "r-sam", "sam", false);
    rcp_send_n(sam, 20);
    /* the first push (presence) goes at once; wait for it, then the next
     * one is a full interval away */
    rcp_wait_push(watch1, &s1, "dan", 1, 0);
    /* a burst of reads, some members twice */
    int64_t t0 = ts_now_ms();
    rcp_read_topic(r[0], 5);
    rcp_read_topic(r[1], 7);
    rcp_read_topic(r[0], 9);
    rcp_read_topic(r[2], 3);
    rcp_read_topic(r[3], 12);
    rcp_read_topic(r[2], 2); /* back: nothing moves */
    rcp_read_topic(r[3], 15);
    int64_t burst = ts_now_ms() - t0;
    int before1 = s1.reads_entries;
    /* every marker that moved, with its latest value, reaches both devices */
    rcp_wait_push(watch1, &s1, "ann", -1, 9);
    rcp_wait_push(watch1, &s1, "ben", -1, 7);
    rcp_wait_push(watch1, &s1, "cat", -1, 3);
    rcp_wait_push(watch1, &s1, "dan", -1, 15);
    rcp_wait_push(watch2, &s2, "ann", -1, 9);
    rcp_wait_push(watch2, &s2, "ben", -1, 7);
    rcp_wait_push(watch2, &s2, "cat", -1, 3);
    rcp_wait_push(watch2, &s2, "dan", -1, 15);
    ts_log("7 reads in %lld ms reached each device in %d reads entries", (long long)burst,
           s1.reads_entries - before1);
    /* Coalescing: the burst took far less than the 2 s interval (measured,
     * not assumed), so at most two pushes (one may have gone at the burst's
     * start) carry its seven reads. */
    if (burst < 500)
        ASSERTF(s1.reads_entries - before1 <= 2, "%d reads entries for one burst",
                s1.reads_entries - before1);
    /* Reads that move no marker after its push, by topic and by command
     * (the marker as pushed, one below it): nothing more is pushed. A
     * push used to forget what it said, so each of these said it again. */
    rcp_read_topic(r[0], 9);
    rcp_read_topic(r[1], 2);
    rcp_read_command(r[3], 15, 15, 15);
    rcp_expect_no_push(watch1, 2500, "no marker moved");
    for (int i = 0; i < 4; i++)
        harness_client_disconnect(r[i]);
    harness_client_disconnect(sam);
    harness_client_disconnect(watch1);
    harness_client_disconnect(watch2);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * own
 * ========================================================================= */

/* sync's head, acked and unread for GROUP, as c's device sees them. */
static void sync_of(harness_client *c, int64_t *head, int64_t *acked, int64_t *unread)
{
    cJSON *resp =
        harness_request(c, "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}", WAIT_MS);
    ASSERTF(harness_sync_find(harness_response_only(resp), GROUP, head, acked, unread),
            "%s: sync does not list " GROUP, harness_client_id(c));
    cJSON_Delete(resp);
}

static void case_own(void)
{
    ts_broker *b = ts_broker_start(NULL);
    /* alice: a plain client that publishes and never acks nor reads */
    harness_client *alice = rcp_connect(b, "alice-pub", "alice", false);
    harness_client *bob = rcp_connect(b, "b1", "bob", false);
    int64_t head = 0, acked = -1, unread = -1;

    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_read_topic(bob, 0);
    rcp_send_n(alice, 5);
    rcp_read_topic(bob, 5);
    rcp_send_n(alice, 200);
    /* receipts says alice read all she sent, bob up to 5 */
    rcp_expect_receipts(bob, "", "alice:205 bob:5", 2, false);
    /* her device: nothing unread, its cursor where it joined (0) */
    sync_of(alice, &head, &acked, &unread);
    ASSERTF(head == 205 && acked == 0 && unread == 0,
            "alice's sync: head %lld acked %lld unread %lld, want 205 0 0", (long long)head,
            (long long)acked, (long long)unread);
    /* bob: 200 unread */
    sync_of(bob, &head, &acked, &unread);
    ASSERTF(head == 205 && unread == 200, "bob's sync: head %lld unread %lld, want 205 200",
            (long long)head, (long long)unread);
    /* another device of alice: nothing unread either, and her messages
     * still reach it (delivery counts what a device received) */
    harness_client *alice2 = rcp_connect(b, "alice-tablet", "alice", false);
    sync_of(alice2, &head, &acked, &unread);
    ASSERTF(unread == 0, "alice's second device: %lld unread", (long long)unread);
    harness_client_subscribe(alice, "chat/" GROUP, 1);
    {
        harness_msg *m = harness_client_receive(alice, WAIT_MS);
        harness_page p;
        ASSERTF(m != NULL && harness_page_parse(m, &p) && p.first == 1,
                "alice's subscribe replayed nothing from #1: her cursor moved");
        harness_page_free(&p);
        harness_msg_free(m);
    }
    ts_log("alice sent 205 without acking: receipts alice:205, her sync unread 0, her cursor 0");
    harness_client_disconnect(alice);
    harness_client_disconnect(alice2);
    harness_client_disconnect(bob);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"markers", case_markers},
    {"errors", case_errors},
    {"coalesced", case_coalesced},
    {"own", case_own},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_receipts_", cases, sizeof cases / sizeof cases[0]);
}
