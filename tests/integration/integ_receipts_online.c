/* integ_receipts_online: presence against a real broker (protocol v1.1),
 * one case per argv[1] (ctest integ_receipts_<case>):
 *
 *   presence   online follows subscribe, unsubscribe, clean disconnect and
 *              a takeover; the pushes say who came and went; the presence
 *              command answers who is online and the member count
 *   keepalive  a client that stops answering (a raw socket that sends no
 *              PINGREQ, keep-alive 1 s) goes offline when the broker drops it
 *   restart    after a broker restart everybody is offline until they
 *              subscribe again
 *   flicker    a member who came and went (or went and came back) between
 *              two pushes, while another device asked `presence`: the next
 *              push says where the member stands
 *   persistent a device whose session outlives its connection (MQTT 3.1.1
 *              clean session 0, MQTT 5 session expiry) goes offline when it
 *              leaves: Mosquitto 2.1 tells plugins with
 *              MOSQ_EVT_CLIENT_OFFLINE, not MOSQ_EVT_DISCONNECT
 *   deleted    (issue 21, item 4) after an admin deletes a group, the
 *              devices still subscribed to its topic are online in it no
 *              more: new members who make the group again see only
 *              themselves online, and the former members' devices get none
 *              of the new group's pushes or messages
 */
#include "integ_receipts.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ===========================================================================
 * presence
 * ========================================================================= */

/* Appends an MQTT string (length, bytes). */
static size_t put_str(unsigned char *p, const char *s)
{
    size_t n = strlen(s);
    p[0] = (unsigned char)(n >> 8);
    p[1] = (unsigned char)(n & 0xff);
    memcpy(p + 2, s, n);
    return n + 2;
}

/* Reads from fd until a packet of type (the high nibble) has arrived,
 * within WAIT_MS; other packets are skipped. */
static void raw_expect(int fd, unsigned type)
{
    unsigned char buf[65536];
    size_t have = 0;
    int64_t until = ts_now_ms() + WAIT_MS;
    for (;;) {
        /* whole packets at the front of buf */
        size_t pos = 0;
        while (pos + 2 <= have) {
            size_t len = 0, i = pos + 1;
            int shift = 0;
            while (i < have && (buf[i] & 0x80) && shift < 21) {
                len |= (size_t)(buf[i++] & 0x7f) << shift;
                shift += 7;
            }
            if (i >= have)
                break;
            len |= (size_t)(buf[i++] & 0x7f) << shift;
            if (i + len > have)
                break;
            if ((buf[pos] >> 4) == type)
                return;
            pos = i + len;
        }
        memmove(buf, buf + pos, have - pos);
        have -= pos;
        int64_t left = until - ts_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        ASSERTF(left > 0 && poll(&pfd, 1, (int)left) == 1 && have < sizeof buf,
                "raw client: no packet of type %u", type);
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        ASSERTF(n > 0, "raw client: connection closed while waiting for packet type %u", type);
        have += (size_t)n;
    }
}

/* Sends one packet: the fixed header byte, then body (under 128 bytes). */
static void raw_send(int fd, unsigned char header, const unsigned char *body, size_t bl)
{
    unsigned char p[160];
    ASSERT(bl < 128);
    p[0] = header;
    p[1] = (unsigned char)bl;
    memcpy(p + 2, body, bl);
    ASSERT(write(fd, p, bl + 2) == (ssize_t)(bl + 2));
}

/* Connects a raw MQTT 3.1.1 client (clean session) as (id, user) with
 * keep-alive keepalive_s; returns its socket. It answers nothing the broker
 * sends it, PINGREQ included: with a short keep-alive it is a client that
 * stopped answering. */
static int raw_connect(ts_broker *b, const char *id, const char *user, int keepalive_s)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(ts_broker_port(b))};
    unsigned char body[128];
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    size_t bl = put_str(body, "MQTT");
    body[bl++] = 4;    /* 3.1.1 */
    body[bl++] = 0x82; /* a username, clean session */
    body[bl++] = (unsigned char)(keepalive_s >> 8);
    body[bl++] = (unsigned char)(keepalive_s & 0xff);
    bl += put_str(body + bl, id);
    bl += put_str(body + bl, user);
    raw_send(fd, 0x10, body, bl);
    raw_expect(fd, 2); /* CONNACK */
    return fd;
}

/* SUBSCRIBE (0x82) or UNSUBSCRIBE (0xa2) of chat/GROUP, waiting for the
 * SUBACK or UNSUBACK. */
static void raw_subscription(int fd, bool subscribe)
{
    static unsigned mid;
    unsigned char body[128];
    size_t bl = 0;
    mid++;
    body[bl++] = (unsigned char)(mid >> 8);
    body[bl++] = (unsigned char)(mid & 0xff);
    bl += put_str(body + bl, "chat/" GROUP);
    if (subscribe)
        body[bl++] = 0; /* QoS 0 */
    raw_send(fd, subscribe ? 0x82 : 0xa2, body, bl);
    raw_expect(fd, subscribe ? 9 : 11);
}

static void case_presence(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *alice = rcp_connect(b, "a1", "alice", true);
    harness_client *asker = rcp_connect(b, "a2", "alice", false);
    struct rcp_seen s = {0};

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    rcp_wait_push(alice, &s, "alice", 1, 0);
    rcp_expect_online(asker, "alice", 1);

    /* subscribe (bob's raw device can unsubscribe) */
    int raw = raw_connect(b, "b-raw", "bob", 60);
    raw_subscription(raw, true);
    rcp_wait_push(alice, &s, "bob", 1, 0);
    rcp_expect_online(asker, "alice bob", 2);
    /* a second device of bob's: still one member online */
    harness_client *bob2 = rcp_connect(b, "b2", "bob", false);
    harness_client_subscribe(bob2, "chat/" GROUP, 1);
    rcp_expect_online(asker, "alice bob", 2);
    /* one device unsubscribes: bob stays; the other disconnects: bob goes */
    raw_subscription(raw, false);
    rcp_expect_online(asker, "alice bob", 2);
    harness_client_disconnect(bob2);
    rcp_wait_push(alice, &s, "bob", 0, 0);
    rcp_expect_online(asker, "alice", 2);
    /* back, then an unsubscribe */
    raw_subscription(raw, true);
    rcp_wait_push(alice, &s, "bob", 1, 0);
    raw_subscription(raw, false);
    rcp_wait_push(alice, &s, "bob", 0, 0);
    rcp_expect_online(asker, "alice", 2);
    close(raw);

    /* a takeover: the old connection's disconnect, then the new one's
     * subscribe (a clean session subscribes again) */
    harness_client *bob = rcp_connect(b, "b1", "bob", false);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_wait_push(alice, &s, "bob", 1, 0);
    harness_client *bob_again = rcp_connect(b, "b1", "bob", false);
    ASSERT(harness_client_wait_lost(bob, WAIT_MS));
    harness_client_destroy(bob);
    rcp_wait_push(alice, &s, "bob", 0, 0);
    harness_client_subscribe(bob_again, "chat/" GROUP, 1);
    rcp_wait_push(alice, &s, "bob", 1, 0);
    rcp_expect_online(asker, "alice bob", 2);

    /* a shared subscription is no person online; carol joins by publishing
     * and is a member, offline */
    harness_client *carol = rcp_connect(b, "c1", "carol", false);
    harness_client_subscribe(carol, "$share/s/chat/" GROUP, 1);
    harness_client_publish(carol, "chat/" GROUP, "hello", 1);
    rcp_expect_online(asker, "alice bob", 3);

    harness_client_disconnect(carol);
    harness_client_disconnect(bob_again);
    harness_client_disconnect(asker);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * keepalive: a raw MQTT 3.1.1 client that goes silent
 * ========================================================================= */

static void case_keepalive(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *alice = rcp_connect(b, "a1", "alice", true);
    harness_client *asker = rcp_connect(b, "a2", "alice", false);
    struct rcp_seen s = {0};

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    int fd = raw_connect(b, "b-raw", "bob", 1);
    raw_subscription(fd, true);
    rcp_wait_push(alice, &s, "bob", 1, 0);
    rcp_expect_online(asker, "alice bob", 2);
    /* bob sends nothing more, not even PINGREQ: after 1.5 keep-alives the
     * broker drops him, and he goes offline (Mosquitto 2.0 looks at
     * keep-alives every 5 s) */
    rcp_wait_push_ms(alice, &s, "bob", 0, 0, 20000);
    rcp_expect_online(asker, "alice", 2);
    ASSERT(ts_broker_log_count(b, "b-raw") > 0);
    close(fd);
    harness_client_disconnect(asker);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * restart
 * ========================================================================= */

static void case_restart(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *alice = rcp_connect(b, "a1", "alice", false);
    harness_client *bob = rcp_connect(b, "b1", "bob", false);

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_expect_online(alice, "alice bob", 2);
    ts_broker_stop(b);
    harness_client_destroy(alice);
    harness_client_destroy(bob);
    ts_broker_restart(b);

    /* nobody is online until they subscribe again */
    harness_client *asker = rcp_connect(b, "a2", "alice", false);
    rcp_expect_online(asker, "", 2);
    bob = rcp_connect(b, "b1", "bob", true);
    struct rcp_seen s = {0};
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_wait_push(bob, &s, "bob", 1, 0);
    rcp_expect_online(asker, "bob", 2);
    harness_client_disconnect(bob);
    harness_client_disconnect(asker);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * flicker
 * ========================================================================= */

static void case_flicker(void)
{
    const char *opts[] = {"receipt_interval 2000", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *alice = rcp_connect(b, "a1", "alice", true);
    harness_client *asker = rcp_connect(b, "a2", "alice", false);
    struct rcp_seen s = {0};

    /* the first change after a quiet interval goes out at once: the next
     * ones wait for the interval's end */
    harness_client_subscribe(alice, "chat/" GROUP, 1);
    rcp_wait_push(alice, &s, "alice", 1, 0);
    /* bob comes; asked meanwhile, the broker says he is online; he goes
     * before the next push */
    harness_client *bob = rcp_connect(b, "b1", "bob", false);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_expect_online(asker, "alice bob", 2);
    harness_client_disconnect(bob);
    rcp_expect_online(asker, "alice", 2);
    /* a device that heard "bob online" from that answer must hear that he
     * went: the push says so */
    rcp_wait_push(alice, &s, "bob", 0, 0);

    /* and the other way: bob online and pushed, then gone and back within
     * an interval, the answer in between saying offline */
    bob = rcp_connect(b, "b1", "bob", false);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_wait_push(alice, &s, "bob", 1, 0);
    harness_client_disconnect(bob);
    rcp_expect_online(asker, "alice", 2);
    bob = rcp_connect(b, "b1", "bob", false);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_expect_online(asker, "alice bob", 2);
    s = (struct rcp_seen){0};
    rcp_wait_push(alice, &s, "bob", 1, 0);

    harness_client_disconnect(bob);
    harness_client_disconnect(asker);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * persistent
 * ========================================================================= */

static void case_persistent(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker_conf conf = {.plugin_opts = opts};
    ts_broker *b = ts_broker_create(&conf);
    /* Mosquitto 2.0.11 leaks, at exit, the subscription a resumed session
     * makes again (sub__add): not ours, suppressed by name in the
     * sanitizer run. */
    ts_broker_suppress_leaks(b, (const char *const[]){"sub__add", NULL});
    ts_broker_launch(b);
    harness_client *alice = rcp_connect(b, "a1", "alice", true);
    harness_client *asker = rcp_connect(b, "a2", "alice", false);
    struct rcp_seen s = {0};

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    rcp_wait_push(alice, &s, "alice", 1, 0);
    for (int version = 4; version <= 5; version++) {
        harness_client_opts o = {
            .client_id = "b-kept", .username = "bob", .mqtt_version = version, .persistent = true};
        harness_client *bob = harness_client_connect_opts(b, &o);

        ts_log("bob's device keeps its session (MQTT %s)", version == 5 ? "5" : "3.1.1");
        harness_client_subscribe(bob, "chat/" GROUP, 1);
        rcp_wait_push(alice, &s, "bob", 1, 0);
        rcp_expect_online(asker, "alice bob", 2);
        harness_client_disconnect(bob);
        rcp_wait_push(alice, &s, "bob", 0, 0);
        rcp_expect_online(asker, "alice", 2);
    }
    harness_client_disconnect(asker);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * deleted: admin delete forgets the group's presence (issue 21, item 4)
 * ========================================================================= */

/* Takes every message c has queued (after a barrier: all the broker sent
 * before it). */
static void drain(harness_client *c)
{
    harness_barrier(c);
    for (int i = 0; i < 10000; i++) {
        harness_msg *m = harness_client_receive(c, 0);
        if (!m)
            return;
        harness_msg_free(m);
    }
    FAILF("%s: more than 10000 messages queued", harness_client_id(c));
}

static void case_deleted(void)
{
    const char *opts[] = {"receipt_interval 200", "admins admin", NULL};
    ts_broker *b = ts_broker_start_users(opts);
    harness_client *alice = rcp_connect(b, "a1", "alice", true);
    harness_client *bob = rcp_connect(b, "b1", "bob", true);
    harness_client *admin = rcp_connect(b, "adm", "admin", false);
    struct rcp_seen s = {0}, sc = {0};

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    rcp_wait_push(alice, &s, "bob", 1, 0);
    rcp_expect_online(alice, "alice bob", 2);
    drain(alice);
    drain(bob);

    cJSON *resp = rcp_ask(admin, "{\"command\":\"delete\",\"group\":\"" GROUP "\"");
    harness_expect_ok(harness_response_only(resp), "delete", GROUP);
    cJSON_Delete(resp);

    /* carol makes the group again; alice and bob, still subscribed to its
     * topic at the broker, are neither members nor online in it */
    harness_client *carol = rcp_connect(b, "c1", "carol", true);
    harness_client_subscribe(carol, "chat/" GROUP, 1);
    rcp_wait_push(carol, &sc, "carol", 1, 0);
    rcp_expect_online(carol, "carol", 1);
    rcp_send_n(carol, 1);
    /* carol's push and message went out before her own answer comes */
    harness_barrier(carol);
    harness_expect_quiet(alice, "nothing of the deleted group's successor for alice");
    harness_expect_quiet(bob, "nothing of the deleted group's successor for bob");
    ASSERTF(sc.n == 1, "carol's pushes named %d members, want herself alone", sc.n);

    harness_client_disconnect(carol);
    harness_client_disconnect(admin);
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"flicker", case_flicker}, {"presence", case_presence},     {"keepalive", case_keepalive},
    {"restart", case_restart}, {"persistent", case_persistent}, {"deleted", case_deleted},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_receipts_", cases, sizeof cases / sizeof cases[0]);
}
