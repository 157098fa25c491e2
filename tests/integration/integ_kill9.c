/* integ_kill9: kill -9 of the broker in the middle of a stream of QoS 1
 * publishes loses none that were acknowledged. After a restart on the same
 * store, a device that joined before the stream catches up on ids 1..head
 * with no gap, in order, holding every message whose PUBACK arrived, each
 * once; the next message gets id head + 1.
 *
 * Usage: integ_kill9 [none|batch|always]: plugin_opt_fsync (default none).
 * With always every publish waits for its sync, so the kill comes sooner. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEND 30000        /* stream length bound: the kill comes long before */
#define KILL_AFTER 2000       /* kill once this message is acknowledged */
#define KILL_AFTER_ALWAYS 200 /* the same with fsync always */
#define PAGE_SIZE 100         /* PROTOCOL.md default */
#define GROUP "stream"
#define TOPIC "chat/" GROUP
#define READER "kill9-reader"
#define SENDER "kill9-sender"
#define CATCHUP_MS 60000

typedef struct seen {
    int *id_of_n;   /* [MAX_SEND + 1]: id that carried message n, 0 if none */
    int64_t prev_n; /* n of the previous envelope */
    int64_t count;  /* envelopes */
    int64_t sent;   /* messages published */
} seen;

static void check_envelope(void *arg, const char *group, const cJSON *env)
{
    seen *s = arg;
    int64_t id = harness_json_int(env, "id");
    int64_t n = harness_json_int(env, "n");
    char cid[32];

    (void)group;
    ASSERTF(n >= 1 && n <= s->sent, "envelope %lld carries n=%lld, but 1..%lld were sent",
            (long long)id, (long long)n, (long long)s->sent);
    ASSERTF(s->id_of_n[n] == 0, "message %lld stored twice: ids %d and %lld", (long long)n,
            s->id_of_n[n], (long long)id);
    /* One publisher at one QoS on one connection: stored in sending order. */
    ASSERTF(n > s->prev_n, "envelope %lld carries message %lld after message %lld", (long long)id,
            (long long)n, (long long)s->prev_n);
    snprintf(cid, sizeof cid, "kill9-%lld", (long long)n);
    ASSERTF(strcmp(harness_json_str(env, "cid"), cid) == 0, "envelope %lld has cid \"%s\"",
            (long long)id, harness_json_str(env, "cid"));
    ASSERTF(strcmp(harness_json_str(env, "from"), SENDER) == 0, "envelope %lld from \"%s\"",
            (long long)id, harness_json_str(env, "from"));
    s->id_of_n[n] = (int)id;
    s->prev_n = n;
    s->count++;
}

int main(int argc, char **argv)
{
    static harness_ticket tickets[MAX_SEND + 1];
    static bool acked[MAX_SEND + 1];
    static int id_of_n[MAX_SEND + 1];
    seen s = {.id_of_n = id_of_n};
    harness_catchup g = {.group = GROUP, .from = 1, .to = -1};
    ts_broker *b;
    harness_client *reader, *snd;
    char payload[128];
    int sent = 0, nacked = 0;
    bool killed = false;
    harness_msg *m;
    cJSON *env;
    const char *fsync = argc > 1 ? argv[1] : "none";
    int kill_after = strcmp(fsync, "always") == 0 ? KILL_AFTER_ALWAYS : KILL_AFTER;
    char opt[32], name[64];
    const char *opts[] = {opt, NULL};

    if (strcmp(fsync, "none") != 0 && strcmp(fsync, "batch") != 0 && strcmp(fsync, "always") != 0) {
        fprintf(stderr, "usage: %s [none|batch|always]\n", argv[0]);
        return 2;
    }
    snprintf(opt, sizeof opt, "fsync %s", fsync);
    snprintf(name, sizeof name, "integ_kill9 (fsync %s)", fsync);
    ts_init(name);
    b = ts_broker_start(opts);

    /* The reader joins before the stream, then goes offline. */
    reader = harness_client_connect(b, READER, NULL);
    harness_client_subscribe(reader, TOPIC, 1);
    harness_client_disconnect(reader);

    /* Up to HARNESS_MAX_WINDOW publishes unacknowledged at once (QoS 1 only,
     * so the broker's receive maximum does not apply); the kill comes right
     * after a publish, with the stream in full flow. */
    snd = harness_client_connect(b, SENDER, NULL);
    harness_client_set_window(snd, HARNESS_MAX_WINDOW);
    for (int k = 1; k <= MAX_SEND && !killed; k++) {
        int rc;
        snprintf(payload, sizeof payload,
                 "{\"body\":\"stream message %d\",\"n\":%d,\"cid\":\"kill9-%d\"}", k, k, k);
        rc = harness_client_publish_async(snd, TOPIC, payload, 1, &tickets[k]);
        ASSERTF(rc == 0, "publish %d failed with Paho code %d before the kill", k, rc);
        sent = k;
        if (k > kill_after && harness_client_acked(snd, tickets[kill_after])) {
            ts_broker_kill(b);
            killed = true;
        }
    }
    ASSERTF(killed, "message %d not acknowledged after %d were sent", kill_after, MAX_SEND);
    ASSERTF(harness_client_wait_lost(snd, 10000), "the sender did not notice the broker's death");
    /* Paho calls back in order on one thread: every PUBACK read before the
     * connection broke has been counted by now. */
    for (int k = 1; k <= sent; k++) {
        acked[k] = harness_client_acked(snd, tickets[k]);
        nacked += acked[k];
    }
    ts_log("killed the broker with %d sent, %d acknowledged, %d in flight", sent, nacked,
           sent - nacked);
    harness_client_destroy(snd);

    ts_broker_restart(b);
    s.sent = sent;
    reader = harness_client_connect(b, READER, NULL);
    harness_client_subscribe(reader, TOPIC, 1);
    harness_catch_up(reader, &g, 1, PAGE_SIZE, CATCHUP_MS, check_envelope, &s);
    ts_log("after the restart: head %lld, %lld messages stored, %lld acknowledged",
           (long long)g.head, (long long)s.count, (long long)nacked);
    ASSERT(s.count == g.head);
    for (int k = 1; k <= sent; k++)
        ASSERTF(!acked[k] || id_of_n[k] != 0,
                "message %d was acknowledged (PUBACK) but is not in the store after kill -9", k);
    ASSERT(g.head >= nacked);

    /* The next message takes the next id: none was reused or skipped. */
    snd = harness_client_connect(b, SENDER, NULL);
    harness_client_publish(snd, TOPIC, "{\"body\":\"after the restart\",\"n\":0}", 1);
    harness_client_disconnect(snd);
    m = harness_client_receive(reader, 5000);
    ASSERTF(m != NULL, "the subscribed reader got no live message after the restart");
    ASSERTF(strcmp(m->topic, TOPIC) == 0, "unexpected message on %s: %.300s", m->topic, m->payload);
    env = harness_json_object(m);
    ASSERTF(harness_json_int(env, "id") == g.head + 1,
            "message after the restart got id %lld, head was %lld",
            (long long)harness_json_int(env, "id"), (long long)g.head);
    cJSON_Delete(env);
    harness_msg_free(m);

    harness_client_disconnect(reader);
    ts_broker_destroy(b);
    return ts_pass();
}
