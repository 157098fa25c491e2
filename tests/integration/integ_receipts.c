/* integ_receipts: read receipts and presence (protocol v1.1) against a real
 * broker, one case per argv[1]:
 *
 *   markers    read markers move forward only, per member across its
 *              devices, by topic and by command, each acking its device;
 *              above head is head; receipts lists every member in name
 *              order, pages with after and limit ("read by k of n")
 *   errors     a bad read payload, a missing id, a read, receipts or
 *              presence by a non-member: error entries, nothing changes;
 *              the read topic reaches no subscriber, not even "#"
 *   coalesced  one push per group per receipt_interval holds every marker
 *              that moved since the last one, to every subscribed device
 *   presence   online follows subscribe, unsubscribe, clean disconnect and
 *              a takeover; the pushes say who came and went; the presence
 *              command answers who is online and the member count
 *   keepalive  a client that stops answering (a raw socket that sends no
 *              PINGREQ, keep-alive 1 s) goes offline when the broker drops it
 *   restart    after a broker restart everybody is offline until they
 *              subscribe again
 *   nonmember  closed groups: a non-member learns nothing (no count, no
 *              online list, no push), and a member removed by an admin gets
 *              no more pushes and goes offline for the others
 *   acl        behind acl_file: a member the broker does not let read the
 *              group is never online and learns nothing; where the broker
 *              cannot be asked nobody is counted online (fail closed), unless
 *              plugin_opt_read_check members
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define WAIT_MS 5000
#define QUIET_MS 700
#define GROUP "room"

/* ===========================================================================
 * Helpers
 * ========================================================================= */

static harness_client *connect_as(ts_broker *b, const char *id, const char *user, bool pushes)
{
    harness_client_opts o = {.client_id = id, .username = user, .pushes = pushes};
    return harness_client_connect_opts(b, &o);
}

/* Whether m is the answer to the command sent with correlationData arg. */
static bool is_answer_to(const harness_msg *m, void *arg)
{
    char needle[64];
    snprintf(needle, sizeof needle, "\"correlationData\":\"%s\"", (const char *)arg);
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && strstr(m->payload, needle) != NULL;
}

/* Sends one command (a JSON object text without its closing brace) with a
 * fresh correlationData and returns its entry's response, which the caller
 * frees; pushes arriving meanwhile stay queued. */
static cJSON *ask(harness_client *c, const char *cmd)
{
    static int seq;
    char corr[32], req[2048];
    snprintf(corr, sizeof corr, "q%d", ++seq);
    snprintf(req, sizeof req, "{\"commands\":[%s,\"correlationData\":\"%s\"}]}", cmd, corr);
    harness_client_publish(c, HARNESS_CONTROL_TOPIC, req, 1);
    harness_msg *m = harness_client_receive_if(c, is_answer_to, corr, WAIT_MS);
    if (m == NULL)
        FAILF("%s: no answer to %s", harness_client_id(c), req);
    cJSON *root = harness_json_object(m);
    harness_msg_free(m);
    return root;
}

/* Publishes n messages to the group from c. */
static void send_n(harness_client *c, int n)
{
    for (int i = 0; i < n; i++)
        harness_client_publish(c, "chat/" GROUP, "{\"body\":\"hi\"}", 1);
}

/* A read on the topic, at QoS 1 (applied when this returns). */
static void read_topic(harness_client *c, int64_t id)
{
    char payload[32];
    snprintf(payload, sizeof payload, "%lld", (long long)id);
    harness_client_publish(c, "chat/" GROUP "/read", payload, 1);
}

/* The read command; checks the answer's marker and cursor. */
static void read_command(harness_client *c, int64_t id, int64_t want_read, int64_t want_acked)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":%lld",
             (long long)id);
    cJSON *resp = ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "read", GROUP);
    ASSERTF(harness_json_int(e, "read") == want_read && harness_json_int(e, "acked") == want_acked,
            "%s read %lld: read %lld acked %lld, want %lld %lld", harness_client_id(c),
            (long long)id, (long long)harness_json_int(e, "read"),
            (long long)harness_json_int(e, "acked"), (long long)want_read, (long long)want_acked);
    cJSON_Delete(resp);
}

/* The device's cursor in the group, as sync reports it. */
static int64_t cursor_of(harness_client *c)
{
    int64_t acked = -1;
    cJSON *resp = ask(c, "{\"command\":\"sync\",\"replay\":false");
    ASSERTF(harness_sync_find(harness_response_only(resp), GROUP, NULL, &acked, NULL),
            "%s: sync does not list " GROUP, harness_client_id(c));
    cJSON_Delete(resp);
    return acked;
}

/* receipts as "name:id name:id ..." (in the answer's order), its member
 * count and more; extra is appended to the command (e.g. ,"limit":1). */
static void receipts(harness_client *c, const char *extra, char *out, size_t cap, int64_t *members,
                     bool *more)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"%s", extra);
    cJSON *resp = ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    const cJSON *r;
    harness_expect_ok(e, "receipts", GROUP);
    out[0] = '\0';
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(e, "reads"))
    {
        ASSERTF(cJSON_IsNumber(r), "receipts: %s is not a number", r->string);
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s:%lld", n ? " " : "", r->string, (long long)r->valuedouble);
    }
    *members = harness_json_int(e, "members");
    *more = harness_json_bool(e, "more");
    cJSON_Delete(resp);
}

static void expect_receipts(harness_client *c, const char *extra, const char *want,
                            int64_t want_members, bool want_more)
{
    char got[1024];
    int64_t members = -1;
    bool more = !want_more;
    receipts(c, extra, got, sizeof got, &members, &more);
    ASSERTF(strcmp(got, want) == 0 && members == want_members && more == want_more,
            "receipts%s: \"%s\" members %lld more %d; want \"%s\" %lld %d", extra, got,
            (long long)members, more, want, (long long)want_members, want_more);
}

/* The presence command: online names joined with spaces, and the count. */
static void expect_online(harness_client *c, const char *want, int64_t want_members)
{
    char got[1024] = "";
    const cJSON *n;
    cJSON *resp = ask(c, "{\"command\":\"presence\",\"group\":\"" GROUP "\"");
    const cJSON *e = harness_response_only(resp);
    harness_expect_ok(e, "presence", GROUP);
    cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(e, "online"))
    {
        size_t len = strlen(got);
        snprintf(got + len, sizeof got - len, "%s%s", len ? " " : "", cJSON_GetStringValue(n));
    }
    int64_t members = harness_json_int(e, "members");
    ASSERTF(strcmp(got, want) == 0 && members == want_members,
            "presence: online \"%s\" of %lld; want \"%s\" of %lld", got, (long long)members, want,
            (long long)want_members);
    cJSON_Delete(resp);
}

/* The only entry of a refused command: error why, and no other field but
 * command, group and correlationData (nothing learnt). */
static void expect_refused(harness_client *c, const char *cmd, const char *command, const char *why)
{
    cJSON *resp = ask(c, cmd);
    const cJSON *e = harness_response_only(resp);
    const cJSON *f;
    ASSERTF(strcmp(harness_json_str(e, "command"), command) == 0 &&
                strcmp(harness_json_str(e, "error"), why) == 0,
            "%s: expected the error \"%s\"", command, why);
    cJSON_ArrayForEach(f, e)
    {
        ASSERTF(!strcmp(f->string, "command") || !strcmp(f->string, "group") ||
                    !strcmp(f->string, "correlationData") || !strcmp(f->string, "error"),
                "%s: a refusal that says more: field %s", command, f->string);
    }
    cJSON_Delete(resp);
}

static bool is_push(const harness_msg *m, void *arg)
{
    (void)arg;
    return strcmp(m->topic, HARNESS_RESPONSE_TOPIC) == 0 && harness_is_push(m->payload, m->len);
}

/* What the pushes a device got say, folded together. */
#define MEMBERS_MAX 16
struct seen {
    int n;
    char name[MEMBERS_MAX][32];
    int64_t read[MEMBERS_MAX]; /* latest pushed marker, -1 none */
    int online[MEMBERS_MAX];   /* latest pushed state: 1, 0, -1 none */
    int pushes;                /* push messages */
    int reads_entries;         /* reads entries in them */
};

static int seen_slot(struct seen *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0)
            return i;
    ASSERT(s->n < MEMBERS_MAX);
    snprintf(s->name[s->n], sizeof s->name[0], "%s", name);
    s->read[s->n] = -1;
    s->online[s->n] = -1;
    return s->n++;
}

/* Folds one push into s, checking its shape: every entry names GROUP, a
 * reads entry holds numbers that never go back, a presence entry names
 * nobody twice. */
static void fold(struct seen *s, const harness_msg *m)
{
    cJSON *root = harness_json_object(m);
    const cJSON *e, *x;
    s->pushes++;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "responses"))
    {
        const char *cmd = harness_json_str(e, "command");
        ASSERTF(strcmp(harness_json_str(e, "group"), GROUP) == 0, "a push about another group");
        if (strcmp(cmd, "reads") == 0) {
            s->reads_entries++;
            cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(e, "reads"))
            {
                int i = seen_slot(s, x->string);
                ASSERTF(cJSON_IsNumber(x) && x->valuedouble >= (double)s->read[i],
                        "a pushed marker of %s that is not a number or went back", x->string);
                s->read[i] = (int64_t)x->valuedouble;
            }
            continue;
        }
        const cJSON *on = cJSON_GetObjectItemCaseSensitive(e, "online");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "offline");
        ASSERTF(cJSON_IsArray(on) && cJSON_IsArray(off), "a presence push without both lists");
        cJSON_ArrayForEach(x, on) s->online[seen_slot(s, cJSON_GetStringValue(x))] = 1;
        cJSON_ArrayForEach(x, off) s->online[seen_slot(s, cJSON_GetStringValue(x))] = 0;
    }
    cJSON_Delete(root);
}

/* Folds pushes into s until member's pushed state is online (1, 0), or its
 * pushed marker is read (online < 0), within wait_ms. */
static void wait_push_ms(harness_client *c, struct seen *s, const char *member, int online,
                         int64_t read, int wait_ms)
{
    int64_t until = ts_now_ms() + wait_ms;
    for (;;) {
        int i = seen_slot(s, member);
        if ((online >= 0 && s->online[i] == online) || (online < 0 && s->read[i] == read))
            return;
        int64_t left = until - ts_now_ms();
        harness_msg *m = left > 0 ? harness_client_receive_if(c, is_push, NULL, (int)left) : NULL;
        if (m == NULL)
            FAILF("%s: no push said %s is %s", harness_client_id(c), member,
                  online == 1   ? "online"
                  : online == 0 ? "offline"
                                : "read up to the id expected");
        fold(s, m);
        harness_msg_free(m);
    }
}

static void wait_push(harness_client *c, struct seen *s, const char *member, int online,
                      int64_t read)
{
    wait_push_ms(c, s, member, online, read, WAIT_MS);
}

/* Fails if a push comes within ms. */
static void expect_no_push(harness_client *c, int ms, const char *what)
{
    harness_msg *m = harness_client_receive_if(c, is_push, NULL, ms);
    if (m != NULL)
        FAILF("%s: unexpected push (%s): %s", harness_client_id(c), what, m->payload);
}

/* ===========================================================================
 * markers
 * ========================================================================= */

static void case_markers(void)
{
    ts_broker *b = ts_broker_start(NULL);
    harness_client *a1 = connect_as(b, "a1", "alice", false);
    harness_client *a2 = connect_as(b, "a2", "alice", false);
    harness_client *bob = connect_as(b, "b1", "bob", false);
    harness_client *carol = connect_as(b, "c1", "carol", false);

    harness_client_subscribe(a1, "chat/" GROUP, 1);
    harness_client_subscribe(a2, "chat/" GROUP, 1);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    harness_client_subscribe(carol, "chat/" GROUP, 1);
    send_n(bob, 10);
    expect_receipts(a1, "", "alice:0 bob:0 carol:0", 3, false);

    /* by topic, then by command from another device: forward only, the
     * member's marker over its devices, each device's cursor its own */
    read_topic(a1, 6);
    expect_receipts(bob, "", "alice:6 bob:0 carol:0", 3, false);
    ASSERT(cursor_of(a1) == 6);
    read_command(a2, 4, 6, 4);
    ASSERT(cursor_of(a2) == 4);
    read_topic(a1, 2);
    read_command(a1, 5, 6, 6);
    expect_receipts(carol, "", "alice:6 bob:0 carol:0", 3, false);
    read_command(a2, 8, 8, 8);
    /* above head is head */
    read_command(bob, 1000, 10, 10);
    read_topic(carol, 3);
    expect_receipts(a2, "", "alice:8 bob:10 carol:3", 3, false);

    /* paging in name order; the count is the whole group's */
    expect_receipts(a1, ",\"limit\":2", "alice:8 bob:10", 3, true);
    expect_receipts(a1, ",\"limit\":2,\"after\":\"bob\"", "carol:3", 3, false);
    expect_receipts(a1, ",\"after\":\"b\"", "bob:10 carol:3", 3, false);
    expect_receipts(a1, ",\"limit\":5000", "alice:8 bob:10 carol:3", 3, false);

    /* markers survive a restart (they are stored) */
    harness_client_destroy(a1);
    harness_client_destroy(a2);
    harness_client_destroy(bob);
    harness_client_destroy(carol);
    ts_broker_stop(b);
    ts_broker_restart(b);
    carol = connect_as(b, "c1", "carol", false);
    expect_receipts(carol, "", "alice:8 bob:10 carol:3", 3, false);
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
    harness_client *alice = connect_as(b, "a1", "alice", false);
    harness_client *eve = connect_as(b, "e1", "eve", false);

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    harness_client_subscribe(eve, "#", 0);
    send_n(alice, 3);

    /* a bad payload: an error entry, no change, nothing delivered */
    harness_client_publish(alice, "chat/" GROUP "/read", "two", 1);
    cJSON *resp = harness_client_response(alice, WAIT_MS);
    harness_expect_error(harness_response_only(resp), "read", GROUP, NULL,
                         "read payload must be a decimal message id");
    cJSON_Delete(resp);
    expect_refused(alice, "{\"command\":\"read\",\"group\":\"" GROUP "\"", "read", "id is missing");
    expect_refused(alice, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":-1", "read",
                   "id must be an integer from 0 to 2^53-1");
    expect_refused(alice, "{\"command\":\"receipts\",\"group\":\"" GROUP "\",\"after\":5",
                   "receipts", "after must be a member name");
    expect_refused(alice, "{\"command\":\"receipts\",\"group\":\"" GROUP "\",\"limit\":0",
                   "receipts", "limit must be an integer from 1 to 2^53-1");
    read_topic(alice, 2);
    expect_receipts(alice, "", "alice:2", 1, false);

    /* eve is no member: refused, told nothing (a read command does not
     * join; her reads and requests change nothing) */
    expect_refused(eve, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":1", "read",
                   "not a member of the group");
    expect_refused(eve, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"", "receipts",
                   "not a member of the group");
    expect_refused(eve, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                   "not a member of the group");
    expect_receipts(alice, "", "alice:2", 1, false);

    /* the read topic reaches nobody, not even "#" */
    read_topic(alice, 3);
    harness_client_expect_none(eve, QUIET_MS, "nothing: reads are never delivered");
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
    harness_client *watch1 = connect_as(b, "w1", "walt", true);
    harness_client *watch2 = connect_as(b, "w2", "walt", true);
    harness_client *r[4];
    const char *names[4] = {"ann", "ben", "cat", "dan"};
    struct seen s1 = {0}, s2 = {0};

    harness_client_subscribe(watch1, "chat/" GROUP, 1);
    harness_client_subscribe(watch2, "chat/" GROUP, 1);
    for (int i = 0; i < 4; i++) {
        char id[16];
        snprintf(id, sizeof id, "r-%s", names[i]);
        r[i] = connect_as(b, id, names[i], false);
        harness_client_subscribe(r[i], "chat/" GROUP, 1);
    }
    send_n(r[0], 20);
    /* the first push (presence) goes at once; wait for it, then the next
     * one is a full interval away */
    wait_push(watch1, &s1, "dan", 1, 0);
    /* a burst of reads, some members twice */
    int64_t t0 = ts_now_ms();
    read_topic(r[0], 5);
    read_topic(r[1], 7);
    read_topic(r[0], 9);
    read_topic(r[2], 3);
    read_topic(r[3], 12);
    read_topic(r[2], 2); /* back: nothing moves */
    read_topic(r[3], 15);
    int64_t burst = ts_now_ms() - t0;
    int before1 = s1.reads_entries;
    /* every marker that moved, with its latest value, reaches both devices */
    wait_push(watch1, &s1, "ann", -1, 9);
    wait_push(watch1, &s1, "ben", -1, 7);
    wait_push(watch1, &s1, "cat", -1, 3);
    wait_push(watch1, &s1, "dan", -1, 15);
    wait_push(watch2, &s2, "ann", -1, 9);
    wait_push(watch2, &s2, "ben", -1, 7);
    wait_push(watch2, &s2, "cat", -1, 3);
    wait_push(watch2, &s2, "dan", -1, 15);
    ts_log("7 reads in %lld ms reached each device in %d reads entries", (long long)burst,
           s1.reads_entries - before1);
    /* Coalescing: the burst took far less than the 2 s interval (measured,
     * not assumed), so at most two pushes (one may have gone at the burst's
     * start) carry its seven reads. */
    if (burst < 500)
        ASSERTF(s1.reads_entries - before1 <= 2, "%d reads entries for one burst",
                s1.reads_entries - before1);
    /* nothing moved since: nothing more is pushed */
    expect_no_push(watch1, 2500, "no marker moved");
    for (int i = 0; i < 4; i++)
        harness_client_disconnect(r[i]);
    harness_client_disconnect(watch1);
    harness_client_disconnect(watch2);
    ts_broker_destroy(b);
}

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
    harness_client *alice = connect_as(b, "a1", "alice", true);
    harness_client *asker = connect_as(b, "a2", "alice", false);
    struct seen s = {0};

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    wait_push(alice, &s, "alice", 1, 0);
    expect_online(asker, "alice", 1);

    /* subscribe (bob's raw device can unsubscribe) */
    int raw = raw_connect(b, "b-raw", "bob", 60);
    raw_subscription(raw, true);
    wait_push(alice, &s, "bob", 1, 0);
    expect_online(asker, "alice bob", 2);
    /* a second device of bob's: still one member online */
    harness_client *bob2 = connect_as(b, "b2", "bob", false);
    harness_client_subscribe(bob2, "chat/" GROUP, 1);
    expect_online(asker, "alice bob", 2);
    /* one device unsubscribes: bob stays; the other disconnects: bob goes */
    raw_subscription(raw, false);
    expect_online(asker, "alice bob", 2);
    harness_client_disconnect(bob2);
    wait_push(alice, &s, "bob", 0, 0);
    expect_online(asker, "alice", 2);
    /* back, then an unsubscribe */
    raw_subscription(raw, true);
    wait_push(alice, &s, "bob", 1, 0);
    raw_subscription(raw, false);
    wait_push(alice, &s, "bob", 0, 0);
    expect_online(asker, "alice", 2);
    close(raw);

    /* a takeover: the old connection's disconnect, then the new one's
     * subscribe (a clean session subscribes again) */
    harness_client *bob = connect_as(b, "b1", "bob", false);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    wait_push(alice, &s, "bob", 1, 0);
    harness_client *bob_again = connect_as(b, "b1", "bob", false);
    ASSERT(harness_client_wait_lost(bob, WAIT_MS));
    harness_client_destroy(bob);
    wait_push(alice, &s, "bob", 0, 0);
    harness_client_subscribe(bob_again, "chat/" GROUP, 1);
    wait_push(alice, &s, "bob", 1, 0);
    expect_online(asker, "alice bob", 2);

    /* a shared subscription is no person online; carol joins by publishing
     * and is a member, offline */
    harness_client *carol = connect_as(b, "c1", "carol", false);
    harness_client_subscribe(carol, "$share/s/chat/" GROUP, 1);
    harness_client_publish(carol, "chat/" GROUP, "hello", 1);
    expect_online(asker, "alice bob", 3);

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
    harness_client *alice = connect_as(b, "a1", "alice", true);
    harness_client *asker = connect_as(b, "a2", "alice", false);
    struct seen s = {0};

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    int fd = raw_connect(b, "b-raw", "bob", 1);
    raw_subscription(fd, true);
    wait_push(alice, &s, "bob", 1, 0);
    expect_online(asker, "alice bob", 2);
    /* bob sends nothing more, not even PINGREQ: after 1.5 keep-alives the
     * broker drops him, and he goes offline (Mosquitto 2.0 looks at
     * keep-alives every 5 s) */
    wait_push_ms(alice, &s, "bob", 0, 0, 20000);
    expect_online(asker, "alice", 2);
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
    harness_client *alice = connect_as(b, "a1", "alice", false);
    harness_client *bob = connect_as(b, "b1", "bob", false);

    harness_client_subscribe(alice, "chat/" GROUP, 1);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    expect_online(alice, "alice bob", 2);
    ts_broker_stop(b);
    harness_client_destroy(alice);
    harness_client_destroy(bob);
    ts_broker_restart(b);

    /* nobody is online until they subscribe again */
    harness_client *asker = connect_as(b, "a2", "alice", false);
    expect_online(asker, "", 2);
    bob = connect_as(b, "b1", "bob", true);
    struct seen s = {0};
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    wait_push(bob, &s, "bob", 1, 0);
    expect_online(asker, "bob", 2);
    harness_client_disconnect(bob);
    harness_client_disconnect(asker);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * nonmember: closed groups
 * ========================================================================= */

static void case_nonmember(void)
{
    const char *opts[] = {"receipt_interval 200", "open_groups false", "admins boss", NULL};
    ts_broker *b = ts_broker_start(opts);
    harness_client *boss = connect_as(b, "boss1", "boss", false);
    harness_client *alice = connect_as(b, "a1", "alice", true);
    harness_client *bob = connect_as(b, "b1", "bob", true);
    harness_client *eve = connect_as(b, "e1", "eve", true);
    struct seen sa = {0}, sb = {0};

    cJSON_Delete(ask(boss, "{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"alice\""));
    cJSON_Delete(ask(boss, "{\"command\":\"join\",\"group\":\"" GROUP "\",\"member\":\"bob\""));
    harness_client_subscribe(alice, "chat/" GROUP, 1);
    harness_client_subscribe(bob, "chat/" GROUP, 1);
    ASSERT(harness_client_try_subscribe(eve, "chat/" GROUP, 1) >= 0x80);
    harness_client_subscribe(eve, "#", 0);
    wait_push(alice, &sa, "bob", 1, 0);

    /* eve learns nothing: no count, no list, no markers, no push */
    expect_refused(eve, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"", "receipts",
                   "not a member of the group");
    expect_refused(eve, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                   "not a member of the group");
    expect_refused(eve, "{\"command\":\"read\",\"group\":\"" GROUP "\",\"id\":0", "read",
                   "not a member of the group");
    harness_client_publish(alice, "chat/" GROUP, "hi", 1);
    read_topic(alice, 1);
    wait_push(bob, &sb, "alice", -1, 1);
    expect_online(alice, "alice bob", 2);
    expect_no_push(eve, QUIET_MS, "eve is no member");

    /* bob is removed while subscribed: alice sees him go, he is pushed
     * nothing more */
    cJSON_Delete(ask(boss, "{\"command\":\"leave\",\"group\":\"" GROUP "\",\"member\":\"bob\""));
    wait_push(alice, &sa, "bob", 0, 0);
    expect_online(alice, "alice", 1);
    while (harness_client_receive_if(bob, is_push, NULL, 300) != NULL) {
        /* a push built before the removal may still arrive: drain it */
    }
    harness_client_publish(alice, "chat/" GROUP, "again", 1);
    read_topic(alice, 2);
    wait_push(alice, &sa, "alice", -1, 2);
    expect_no_push(bob, QUIET_MS, "bob was removed");
    expect_no_push(eve, 0, "eve is no member");

    harness_client_disconnect(eve);
    harness_client_disconnect(bob);
    harness_client_disconnect(alice);
    harness_client_disconnect(boss);
    ts_broker_destroy(b);
}

/* ===========================================================================
 * acl: behind the broker's own access checks
 * ========================================================================= */

static const char acl_rw[] = "user r\n"
                             "topic readwrite chat/#\n"
                             "topic write $CONTROL/chat/v1\n"
                             "user w\n"
                             "topic write chat/" GROUP "\n"
                             "topic write $CONTROL/chat/v1\n";

/* A broker with users r (reads and writes the chat) and w (may only write
 * chat/GROUP), behind acl_file. */
static ts_broker *start_rw_broker(const char *const *opts)
{
    ts_broker_conf conf = {
        .plugin_opts = opts,
        .lines = (const char *const[]){"password_file @DIR@/passwd", "acl_file @DIR@/acl", NULL},
        .no_anonymous = true};
    ts_broker *b = ts_broker_create(&conf);
    char path[512];
    snprintf(path, sizeof path, "%s/passwd", ts_broker_dir(b));
    ts_write_file(path, "", 0);
    const char *r[] = {"mosquitto_passwd", "-b", path, "r", "rpw", NULL};
    const char *w[] = {"mosquitto_passwd", "-b", path, "w", "wpw", NULL};
    ts_run_ok(r);
    ts_run_ok(w);
    snprintf(path, sizeof path, "%s/acl", ts_broker_dir(b));
    ts_write_file(path, acl_rw, strlen(acl_rw));
    ts_broker_launch(b);
    return b;
}

static harness_client *connect_pw(ts_broker *b, const char *id, const char *user,
                                  const char *password, bool pushes)
{
    harness_client_opts o = {
        .client_id = id, .username = user, .password = password, .pushes = pushes};
    return harness_client_connect_opts(b, &o);
}

static void case_acl(void)
{
    const char *opts[] = {"receipt_interval 200", NULL};
    ts_broker *b = start_rw_broker(opts);
    harness_client *r = connect_pw(b, "r1", "r", "rpw", true);
    harness_client *w = connect_pw(b, "w1", "w", "wpw", true);
    struct seen s = {0};

    /* r's subscribe: the broker lets r read, so r joins and is online */
    harness_client_subscribe(r, "chat/" GROUP, 1);
    wait_push(r, &s, "r", 1, 0);
    /* w joins by publishing; its subscribe passes acl_file (2.0 allows every
     * subscription and checks reads) but it may not read: never online,
     * pushed nothing, told nothing */
    harness_client_publish(w, "chat/" GROUP, "from the sensor", 1);
    harness_client_subscribe(w, "chat/" GROUP, 1);
    expect_online(r, "r", 2);
    expect_refused(w, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                   "the broker does not let you read this group");
    expect_refused(w, "{\"command\":\"receipts\",\"group\":\"" GROUP "\"", "receipts",
                   "the broker does not let you read this group");
    read_topic(r, 1);
    wait_push(r, &s, "r", -1, 1);
    expect_no_push(w, QUIET_MS, "w may not read the group");
    harness_client_disconnect(r);
    harness_client_disconnect(w);
    ts_broker_destroy(b);

    /* As on an upstream build, where the broker cannot be asked: nobody is
     * counted online, nor told; with read_check members, members are. */
    setenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK", "1", 1);
    b = start_rw_broker(opts);
    r = connect_pw(b, "r1", "r", "rpw", true);
    harness_client_publish(r, "chat/" GROUP, "hello", 1); /* joins */
    harness_client_subscribe(r, "chat/" GROUP, 1);
    expect_no_push(r, QUIET_MS, "not counted online: the broker cannot be asked");
    expect_refused(r, "{\"command\":\"presence\",\"group\":\"" GROUP "\"", "presence",
                   "history is unavailable: this broker cannot tell mosquitto-chat whether you "
                   "may read the group (see plugin_opt_read_check)");
    harness_client_disconnect(r);
    ts_broker_destroy(b);
    const char *members[] = {"receipt_interval 200", "read_check members", NULL};
    b = start_rw_broker(members);
    r = connect_pw(b, "r1", "r", "rpw", true);
    s = (struct seen){0};
    harness_client_publish(r, "chat/" GROUP, "hello", 1);
    harness_client_subscribe(r, "chat/" GROUP, 1);
    wait_push(r, &s, "r", 1, 0);
    expect_online(r, "r", 1);
    unsetenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
    harness_client_disconnect(r);
    ts_broker_destroy(b);
}

static const ts_case cases[] = {
    {"markers", case_markers},     {"errors", case_errors},
    {"coalesced", case_coalesced}, {"presence", case_presence},
    {"keepalive", case_keepalive}, {"restart", case_restart},
    {"nonmember", case_nonmember}, {"acl", case_acl},
};

int main(int argc, char **argv)
{
    return ts_run_case(argc, argv, "integ_receipts_", cases, sizeof cases / sizeof cases[0]);
}
