/* integ_sec.c: helpers of the security regression tests (integ_sec.h). */
#include "integ_sec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void sec_write_in(ts_broker *b, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", ts_broker_dir(b), name);
    ts_write_text(path, text);
}

/* A password file in the broker's directory with user:password pairs. */
void sec_make_passwd(ts_broker *b, const char *const *users)
{
    char path[512];
    snprintf(path, sizeof path, "%s/passwd", ts_broker_dir(b));
    ts_write_file(path, "", 0);
    for (size_t i = 0; users[i] != NULL; i += 2) {
        const char *argv[] = {
            ts_broker_program("mosquitto_passwd"), "-b", path, users[i], users[i + 1], NULL};
        ts_run_ok(argv);
    }
}

harness_client *sec_connect_user(ts_broker *b, const char *id, const char *user,
                                 const char *password)
{
    harness_client_opts o = {.client_id = id, .username = user, .password = password};
    return harness_client_connect_opts(b, &o);
}

/* The only entry of the next response, checked to be an error of command
 * whose text starts with prefix; the response is freed. */
void sec_expect_error_prefix(harness_client *c, const cJSON *resp, const char *command,
                             const char *prefix)
{
    const cJSON *e = harness_response_only(resp);
    const char *cmd = harness_json_str(e, "command");
    const char *err = harness_json_str(e, "error");
    (void)c;
    ASSERTF(cmd != NULL && strcmp(cmd, command) == 0, "entry of %s, expected %s",
            cmd ? cmd : "(none)", command);
    ASSERTF(err != NULL && strncmp(err, prefix, strlen(prefix)) == 0,
            "error \"%s\", expected one starting \"%s\"", err ? err : "(none)", prefix);
}

/* Mosquitto 2.0.11 leaks what config__read allocates in two cases these
 * tests make on purpose: the plugin lines inside a listener with
 * per_listener_settings, and a reload it refuses. Not ours: suppressed by
 * name in the sanitizer run. */
void sec_suppress_config_leaks(ts_broker *b)
{
    ts_broker_suppress_leaks(b, (const char *const[]){"config__read", NULL});
}

bool sec_on_topic(const harness_msg *m, void *arg)
{
    return strcmp(m->topic, (const char *)arg) == 0;
}

/* Fails if a message on topic arrives within ms. */
void sec_expect_none_on(harness_client *c, const char *topic, int ms)
{
    harness_msg *m = harness_client_receive_if(c, sec_on_topic, (void *)topic, ms);
    if (m != NULL)
        FAILF("client %s got %s on %s, expected nothing there", harness_client_id(c), m->payload,
              m->topic);
}

void sec_fence(harness_client *from, harness_client *c, const char *topic, const char *what)
{
    harness_msg *m;

    harness_client_publish(from, topic, "fence", 1);
    m = harness_client_receive(c, WAIT_MS);
    if (m == NULL || strcmp(m->topic, topic) != 0)
        FAILF("client %s (%s) got %s%s%s before the fence on %s", harness_client_id(c), what,
              m ? m->topic : "nothing", m ? ": " : "", m ? m->payload : "", topic);
    harness_msg_free(m);
}

long sec_rss_kb(int pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if ((f = fopen(path, "r")) == NULL)
        FAILF("cannot read %s", path);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static size_t put_varint(unsigned char *p, size_t v)
{
    size_t n = 0;
    do {
        unsigned char byte = v % 128;
        v /= 128;
        p[n++] = byte | (v ? 0x80 : 0);
    } while (v);
    return n;
}

static void send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    int64_t deadline = ts_now_ms() + WAIT_MS;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (ts_now_ms() > deadline)
                FAILF("the broker stopped reading our requests");
            ts_sleep_ms(5);
            continue;
        }
        if (n <= 0)
            FAILF("send: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

/* An MQTT 3.1.1 client on a raw socket that never reads what it is sent. */
int sec_deaf_client(const ts_broker *b, const char *id)
{
    struct sockaddr_in a;
    unsigned char pkt[256];
    size_t idlen = strlen(id), n = 0;
    int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;

    ASSERT(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)ts_broker_port(b));
    ASSERTF(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s", strerror(errno));
    pkt[n++] = 0x10;
    n += put_varint(pkt + n, 12 + idlen);
    memcpy(pkt + n, "\0\4MQTT\4\2\0\x3c", 10);
    n += 10;
    pkt[n++] = (unsigned char)(idlen >> 8);
    pkt[n++] = (unsigned char)idlen;
    memcpy(pkt + n, id, idlen);
    n += idlen;
    send_all(fd, pkt, n);
    return fd;
}

void sec_deaf_publish(int fd, const char *topic, const char *payload)
{
    size_t tlen = strlen(topic), plen = strlen(payload), n = 0;
    unsigned char *pkt = malloc(tlen + plen + 16);
    ASSERT(pkt != NULL);
    pkt[n++] = 0x30;
    n += put_varint(pkt + n, 2 + tlen + plen);
    pkt[n++] = (unsigned char)(tlen >> 8);
    pkt[n++] = (unsigned char)tlen;
    memcpy(pkt + n, topic, tlen);
    n += tlen;
    memcpy(pkt + n, payload, plen);
    n += plen;
    send_all(fd, pkt, n);
    free(pkt);
}

/* Sends a SUBSCRIBE (type 0x82, with a QoS 0 options byte) or UNSUBSCRIBE
 * (0xA2) of one filter with packet id mid. */
static void send_filter(int fd, unsigned char type, uint16_t mid, const char *filter)
{
    size_t flen = strlen(filter), n = 0;
    bool sub = type == 0x82;
    unsigned char pkt[300];

    ASSERT(flen < 256);
    pkt[n++] = type;
    n += put_varint(pkt + n, 2 + 2 + flen + sub);
    pkt[n++] = (unsigned char)(mid >> 8);
    pkt[n++] = (unsigned char)mid;
    pkt[n++] = (unsigned char)(flen >> 8);
    pkt[n++] = (unsigned char)flen;
    memcpy(pkt + n, filter, flen);
    n += flen;
    if (sub)
        pkt[n++] = 0;
    send_all(fd, pkt, n);
}

void sec_deaf_barrier(const ts_broker *b, int fd, const char *id)
{
    static const unsigned char pingreq[] = {0xC0, 0x00};
    char line[160];
    long before;

    snprintf(line, sizeof line, "Received PINGREQ from %s", id);
    before = ts_broker_log_count(b, line);
    send_all(fd, pingreq, sizeof pingreq);
    ts_broker_wait_log(b, line, before + 1, 30000);
}

bool sec_deaf_flood(int fd, const char *topic, const char *payload, int timeout_ms)
{
    size_t tlen = strlen(topic), plen = strlen(payload), n = 0, len, off = 0;
    unsigned char one[300];
    unsigned char *batch;
    int64_t deadline = ts_now_ms() + timeout_ms;
    bool closed = false;

    ASSERT(tlen + plen + 16 <= sizeof one);
    one[n++] = 0x30;
    n += put_varint(one + n, 2 + tlen + plen);
    one[n++] = (unsigned char)(tlen >> 8);
    one[n++] = (unsigned char)tlen;
    memcpy(one + n, topic, tlen);
    n += tlen;
    memcpy(one + n, payload, plen);
    n += plen;
    /* whole packets, 200 at a time: a partial send resumes where it stopped */
    len = 200 * n;
    batch = malloc(len);
    ASSERT(batch != NULL);
    for (size_t i = 0; i < 200; i++)
        memcpy(batch + i * n, one, n);
    for (long sends = 0; !closed && ts_now_ms() < deadline && sends < 100000000L; sends++) {
        ssize_t w = send(fd, batch + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            off = (off + (size_t)w) % len;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* the broker is behind: wait until it reads (or closes) */
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            (void)poll(&pfd, 1, 100);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            closed = w < 0 && (errno == EPIPE || errno == ECONNRESET);
            if (!closed)
                FAILF("send: %s", w < 0 ? strerror(errno) : "nothing sent");
        }
    }
    free(batch);
    return closed;
}

void sec_deaf_subscribe(int fd, uint16_t mid, const char *filter)
{
    send_filter(fd, 0x82, mid, filter);
}

void sec_deaf_unsubscribe(int fd, uint16_t mid, const char *filter)
{
    send_filter(fd, 0xA2, mid, filter);
}

void sec_deaf_publish_qos2(int fd, uint16_t mid, const char *topic, const char *payload)
{
    size_t tlen = strlen(topic), plen = strlen(payload), n = 0;
    unsigned char *pkt = malloc(tlen + plen + 16);
    ASSERT(pkt != NULL);
    pkt[n++] = 0x34;
    n += put_varint(pkt + n, 2 + tlen + 2 + plen);
    pkt[n++] = (unsigned char)(tlen >> 8);
    pkt[n++] = (unsigned char)tlen;
    memcpy(pkt + n, topic, tlen);
    n += tlen;
    pkt[n++] = (unsigned char)(mid >> 8);
    pkt[n++] = (unsigned char)mid;
    memcpy(pkt + n, payload, plen);
    n += plen;
    send_all(fd, pkt, n);
    free(pkt);
}

void sec_deaf_pubrel(int fd, uint16_t mid)
{
    const unsigned char pkt[4] = {0x62, 0x02, (unsigned char)(mid >> 8), (unsigned char)mid};
    send_all(fd, pkt, sizeof pkt);
}
