/* integ_kill9_two: kill -9 of the broker in the middle of two streams of
 * QoS 1 publishes (two publishers, two groups, interleaved), with the
 * plugin's fsync mode given as the argument (none, batch, always). After a
 * restart on the same store every publish that was acknowledged (PUBACK)
 * before the kill is there, once, in sending order, ids 1..head dense in
 * each group; the next publish takes head + 1. A process crash loses
 * nothing that reached the kernel, so the claim is the same for every mode
 * (what `always` adds, against a power loss, cannot be shown by killing a
 * process: see the incarnation tests of the store).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEND 20000  /* per publisher: the kill comes long before */
#define KILL_AFTER 1500 /* kill once this message of each publisher is acknowledged */
#define WINDOW 200      /* QoS 1 publishes unacknowledged at once, per publisher */
#define CATCHUP_MS 60000
#define PUBLISHERS 2

struct stream {
    const char *group;
    const char *sender;
    harness_client *c;
    harness_ticket *tickets; /* [MAX_SEND + 1] */
    bool *acked;             /* [MAX_SEND + 1]: PUBACK seen before the kill */
    int *id_of_n;            /* [MAX_SEND + 1]: id that carried message n */
    int sent;
    int64_t prev_n, count;
};

static void check_envelope(void *arg, const char *group, const cJSON *env)
{
    struct stream *all = arg, *s = strcmp(group, all[0].group) == 0 ? &all[0] : &all[1];
    int64_t id = harness_json_int(env, "id");
    int64_t n = harness_json_int(env, "n");
    char cid[48];

    ASSERTF(strcmp(group, s->group) == 0, "envelope of an unknown group %s", group);
    ASSERTF(n >= 1 && n <= s->sent, "%s: envelope %lld carries n=%lld, but 1..%d were sent",
            s->group, (long long)id, (long long)n, s->sent);
    ASSERTF(s->id_of_n[n] == 0, "%s: message %lld stored twice: ids %d and %lld", s->group,
            (long long)n, s->id_of_n[n], (long long)id);
    ASSERTF(n > s->prev_n, "%s: envelope %lld carries message %lld after message %lld", s->group,
            (long long)id, (long long)n, (long long)s->prev_n);
    snprintf(cid, sizeof cid, "%s-%lld", s->sender, (long long)n);
    ASSERTF(strcmp(harness_json_str(env, "cid"), cid) == 0, "%s: envelope %lld has cid \"%s\"",
            s->group, (long long)id, harness_json_str(env, "cid"));
    ASSERTF(strcmp(harness_json_str(env, "from"), s->sender) == 0, "%s: envelope %lld from %s",
            s->group, (long long)id, harness_json_str(env, "from"));
    s->id_of_n[n] = (int)id;
    s->prev_n = n;
    s->count++;
}

/* Every field from zero: the counts and prev_n start a stream's checks. */
static void stream_init(struct stream *s, const char *group, const char *sender)
{
    *s = (struct stream){.group = group, .sender = sender};
    s->tickets = calloc(MAX_SEND + 1, sizeof *s->tickets);
    s->acked = calloc(MAX_SEND + 1, sizeof *s->acked);
    s->id_of_n = calloc(MAX_SEND + 1, sizeof *s->id_of_n);
    ASSERT(s->tickets && s->acked && s->id_of_n);
}

static void stream_free(struct stream *s)
{
    free(s->tickets);
    free(s->acked);
    free(s->id_of_n);
}

int main(int argc, char **argv)
{
    struct stream st[PUBLISHERS];
    harness_catchup g[PUBLISHERS];
    ts_broker *b;
    harness_client *reader;
    char opt[32], name[64], payload[160], topic[64];
    bool killed = false;
    int nacked = 0;

    if (argc != 2 ||
        (strcmp(argv[1], "none") && strcmp(argv[1], "batch") && strcmp(argv[1], "always"))) {
        fprintf(stderr, "usage: %s none|batch|always\n", argv[0]);
        return 2;
    }
    snprintf(name, sizeof name, "integ_kill9_two_%s", argv[1]);
    ts_init(name);
    snprintf(opt, sizeof opt, "fsync %s", argv[1]);
    b = ts_broker_start((const char *const[]){opt, NULL});
    stream_init(&st[0], "fs1", "fs-sender1");
    stream_init(&st[1], "fs2", "fs-sender2");

    /* The reader joins both groups before the streams, then goes offline. */
    reader = harness_client_connect(b, "fs-reader", NULL);
    harness_client_subscribe(reader, "chat/fs1", 1);
    harness_client_subscribe(reader, "chat/fs2", 1);
    harness_client_disconnect(reader);

    for (int p = 0; p < PUBLISHERS; p++) {
        st[p].c = harness_client_connect(b, st[p].sender, NULL);
        harness_client_set_window(st[p].c, WINDOW);
    }
    /* Interleaved, one message of each in turn; the kill comes right after
     * a publish, once message KILL_AFTER of both is acknowledged. */
    for (int k = 1; k <= MAX_SEND && !killed; k++) {
        for (int p = 0; p < PUBLISHERS; p++) {
            int rc;
            snprintf(topic, sizeof topic, "chat/%s", st[p].group);
            snprintf(payload, sizeof payload,
                     "{\"body\":\"%s message %d\",\"n\":%d,\"cid\":\"%s-%d\"}", st[p].group, k, k,
                     st[p].sender, k);
            rc = harness_client_publish_async(st[p].c, topic, payload, 1, &st[p].tickets[k]);
            ASSERTF(rc == 0, "publish %d of %s failed with Paho code %d before the kill", k,
                    st[p].sender, rc);
            st[p].sent = k;
        }
        if (k > KILL_AFTER && harness_client_acked(st[0].c, st[0].tickets[KILL_AFTER]) &&
            harness_client_acked(st[1].c, st[1].tickets[KILL_AFTER])) {
            ts_broker_kill(b);
            killed = true;
        }
    }
    ASSERTF(killed, "message %d not acknowledged after %d were sent", KILL_AFTER, MAX_SEND);
    for (int p = 0; p < PUBLISHERS; p++) {
        int acked = 0;
        ASSERTF(harness_client_wait_lost(st[p].c, 10000), "%s did not notice the broker's death",
                st[p].sender);
        /* Paho calls back in order on one thread: every PUBACK read before
         * the connection broke has been counted by now. */
        for (int k = 1; k <= st[p].sent; k++) {
            st[p].acked[k] = harness_client_acked(st[p].c, st[p].tickets[k]);
            acked += st[p].acked[k];
        }
        ts_log("%s: killed with %d sent, %d acknowledged", st[p].sender, st[p].sent, acked);
        nacked += acked;
        harness_client_destroy(st[p].c);
    }

    ts_broker_restart(b);
    reader = harness_client_connect(b, "fs-reader", NULL);
    harness_client_subscribe(reader, "chat/fs1", 1);
    harness_client_subscribe(reader, "chat/fs2", 1);
    for (int p = 0; p < PUBLISHERS; p++)
        g[p] = (harness_catchup){.group = st[p].group, .from = 1, .to = -1};
    harness_catch_up(reader, g, PUBLISHERS, 100, CATCHUP_MS, check_envelope, st);
    for (int p = 0; p < PUBLISHERS; p++) {
        ASSERT(st[p].count == g[p].head);
        for (int k = 1; k <= st[p].sent; k++)
            ASSERTF(!st[p].acked[k] || st[p].id_of_n[k] != 0,
                    "%s: message %d was acknowledged (PUBACK) but is not in the store after "
                    "kill -9 with fsync %s",
                    st[p].group, k, argv[1]);
        ts_log("%s: head %lld after the restart", st[p].group, (long long)g[p].head);
    }
    ts_log("every one of %d acknowledged messages is there, once, in order", nacked);

    /* The next message of each group takes the next id. */
    for (int p = 0; p < PUBLISHERS; p++) {
        harness_client *c = harness_client_connect(b, st[p].sender, NULL);
        harness_msg *m;
        cJSON *env;
        snprintf(topic, sizeof topic, "chat/%s", st[p].group);
        harness_client_publish(c, topic, "{\"body\":\"after the restart\",\"n\":0}", 1);
        harness_client_disconnect(c);
        m = harness_client_receive(reader, 5000);
        ASSERTF(m != NULL && strcmp(m->topic, topic) == 0, "no live message on %s", topic);
        env = harness_json_object(m);
        ASSERTF(harness_json_int(env, "id") == g[p].head + 1, "%s: id %lld after head %lld",
                st[p].group, (long long)harness_json_int(env, "id"), (long long)g[p].head);
        cJSON_Delete(env);
        harness_msg_free(m);
    }
    harness_client_disconnect(reader);
    ts_broker_destroy(b);
    for (int p = 0; p < PUBLISHERS; p++)
        stream_free(&st[p]);
    return ts_pass();
}
