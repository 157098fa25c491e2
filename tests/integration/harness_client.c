/* harness_client.c: the life of a Paho MQTTClient client in a test: its
 * callbacks, which only queue for the test's thread, connecting, and
 * disconnecting without freeing what Paho's thread still uses (see
 * harness.h, Threading). */
#include "harness_priv.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PACKET_PUBREC 5    /* MQTT control packet type of PUBREC */
#define STOP_WAIT_MS 10000 /* Paho's thread must have stopped within this */

/* Clients destroyed while another client lives. Paho's MQTTClient runs one
 * thread for all clients. It calls messageArrived without its lock, and after
 * the callback returns it locks again and unlinks the message from the
 * client's Paho queue (MQTTClient_run, in 1.3.12 as upstream). So while that
 * thread runs, neither the harness_client (the callbacks' context) nor its
 * Paho handle may be freed: MQTTClient_destroy would free the handle that
 * thread is about to use (a segfault in ListRemove from MQTTClient_run).
 * Both are kept here, disconnected, until no client is left; then Paho's
 * thread is stopped and they are destroyed and freed (flush_graveyard). */
static struct harness_client *g_graveyard;
static int g_live_clients;

const char *harness_paho_strerror(int rc)
{
    const char *s;

    switch (rc) { /* CONNACK return codes come back as positive values */
    case 1:
        return "connection refused: unacceptable protocol version";
    case 2:
        return "connection refused: identifier rejected";
    case 3:
        return "connection refused: server unavailable";
    case 4:
        return "connection refused: bad user name or password";
    case 5:
        return "connection refused: not authorized";
    default:
        s = MQTTClient_strerror(rc);
        return s != NULL ? s : "unknown error";
    }
}

/* Converts a ts_now_ms() deadline to the condition variable's clock. */
struct timespec harness_deadline_ts(int64_t deadline_ms)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(deadline_ms / 1000);
    ts.tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
    return ts;
}

/* A heap copy of len bytes plus a NUL, or NULL for lack of memory. */
static char *copy_bytes(const void *data, size_t len)
{
    char *copy = malloc(len + 1);

    if (copy != NULL) {
        if (len > 0)
            memcpy(copy, data, len);
        copy[len] = '\0';
    }
    return copy;
}

/* The harness_msg of a Paho message (NULL for lack of memory). */
static harness_msg *copy_message(const harness_client *c, const char *topic, int topic_len,
                                 const MQTTClient_message *msg)
{
    harness_msg *m = calloc(1, sizeof *m);
    const MQTTProperty *corr = NULL;

    if (m == NULL)
        return NULL;
    m->len = msg->payloadlen > 0 ? (size_t)msg->payloadlen : 0;
    m->topic = copy_bytes(topic, topic_len > 0 ? (size_t)topic_len : strlen(topic));
    m->payload = copy_bytes(msg->payload, m->len);
    m->qos = msg->qos;
    m->retained = msg->retained != 0;
    m->at_ms = ts_now_ms();
    if (c->version == 5)
        corr = MQTTProperties_getProperty((MQTTProperties *)&msg->properties,
                                          MQTTPROPERTY_CODE_CORRELATION_DATA);
    if (corr != NULL && corr->value.data.len >= 0) {
        m->corr_len = (size_t)corr->value.data.len;
        m->corr = copy_bytes(corr->value.data.data, m->corr_len);
        m->has_corr = true;
    }
    if (m->topic == NULL || m->payload == NULL || (m->has_corr && m->corr == NULL)) {
        harness_msg_free(m);
        return NULL;
    }
    return m;
}

/* Paho's thread: copies the message into the queue and returns at once.
 * Once the test is done with the client (dropping) the message is freed
 * unread; while an MQTT 3.1.1 client is being disconnected (hands_off) it is
 * not touched at all: MQTTClient_disconnect may be freeing it right now
 * (see settle_deliveries), or Paho's thread unlinks it and it leaks. */
static int on_message(void *context, char *topic, int topic_len, MQTTClient_message *msg)
{
    harness_client *c = context;
    harness_msg *m;
    bool dropping, hands_off;

    pthread_mutex_lock(&c->mu);
    dropping = c->dropping;
    hands_off = c->hands_off;
    pthread_mutex_unlock(&c->mu);
    if (hands_off)
        return 1;
    /* c->pushes is set before the connect and never changes. */
    if (!dropping && !c->pushes &&
        (topic_len > 0 ? (size_t)topic_len : strlen(topic)) == strlen(HARNESS_RESPONSE_TOPIC) &&
        memcmp(topic, HARNESS_RESPONSE_TOPIC, strlen(HARNESS_RESPONSE_TOPIC)) == 0 &&
        harness_is_push(msg->payload, msg->payloadlen > 0 ? (size_t)msg->payloadlen : 0)) {
        MQTTClient_freeMessage(&msg);
        MQTTClient_free(topic);
        return 1;
    }
    m = dropping ? NULL : copy_message(c, topic, topic_len, msg);
    pthread_mutex_lock(&c->mu);
    if (m != NULL) {
        if (c->tail != NULL)
            c->tail->next = m;
        else
            c->head = m;
        c->tail = m;
    } else if (!dropping) {
        c->oom = true;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    MQTTClient_freeMessage(&msg);
    MQTTClient_free(topic);
    return 1;
}

static void on_lost(void *context, char *cause)
{
    harness_client *c = context;

    pthread_mutex_lock(&c->mu);
    c->lost = true;
    snprintf(c->cause, sizeof c->cause, "%s", cause != NULL ? cause : "no reason given");
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* MQTT 5 only: every PUBACK and PUBCOMP (followed by on_delivered) and every
 * PUBREC that refuses a QoS 2 publish (which ends its exchange: no
 * on_delivered follows, so it counts as the acknowledgement here). */
static void on_published(void *context, int token, int packet_type, MQTTProperties *props,
                         enum MQTTReasonCodes reason)
{
    harness_client *c = context;

    (void)props;
    pthread_mutex_lock(&c->mu);
    if (token > 0 && token < TOKENS) {
        c->reason[token] = (uint8_t)reason;
        if (packet_type == PACKET_PUBREC) {
            c->done[token]++;
            if (c->inflight > 0)
                c->inflight--;
        }
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_delivered(void *context, MQTTClient_deliveryToken token)
{
    harness_client *c = context;

    pthread_mutex_lock(&c->mu);
    if (token > 0 && token < TOKENS)
        c->done[token]++;
    if (c->inflight > 0)
        c->inflight--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Frees a client's memory; Paho must no longer call back into it. */
static void free_client(harness_client *c)
{
    harness_msg *m = c->head;

    for (int i = 0; m != NULL && i < INT_MAX; i++) {
        harness_msg *next = m->next;
        harness_msg_free(m);
        m = next;
    }
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    for (size_t i = 0; i < c->nfilters; i++)
        free(c->filters[i]);
    free(c->filters);
    free(c->sent);
    free(c->done);
    free(c->reason);
    free(c);
}

/* Creates and connects a client as o says. Returns 0 with *out set, or the
 * refusal: a CONNACK return code (MQTT 3.1.1: 1..5), a CONNACK reason code
 * (MQTT 5: 0x80 and above) or a negative Paho code, with *out NULL. */
static int connect_client(const ts_broker *b, const harness_client_opts *o, harness_client **out)
{
    MQTTClient_connectOptions opts = MQTTClient_connectOptions_initializer;
    MQTTClient_connectOptions opts5 = MQTTClient_connectOptions_initializer5;
    MQTTClient_createOptions create = MQTTClient_createOptions_initializer;
    MQTTClient_willOptions will = MQTTClient_willOptions_initializer;
    MQTTClient_connectOptions *co;
    pthread_condattr_t attr;
    harness_client *c = calloc(1, sizeof *c);
    const char *client_id = o->client_id;
    char uri[64];
    int rc;

    *out = NULL;
    if (c == NULL || (c->sent = calloc(TOKENS, sizeof *c->sent)) == NULL ||
        (c->done = calloc(TOKENS, sizeof *c->done)) == NULL ||
        (c->reason = calloc(TOKENS, sizeof *c->reason)) == NULL)
        FAILF("out of memory");
    snprintf(c->id, sizeof c->id, "%s", client_id);
    c->window = HARNESS_DEFAULT_WINDOW;
    c->version = o->mqtt_version == 5 ? 5 : 4;
    c->pushes = o->pushes;
    c->persistent = o->persistent;
    if (pthread_mutex_init(&c->mu, NULL) != 0 || pthread_condattr_init(&attr) != 0 ||
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&c->cv, &attr) != 0)
        FAILF("cannot create a mutex or condition variable");
    pthread_condattr_destroy(&attr);

    snprintf(uri, sizeof uri, "tcp://127.0.0.1:%d", o->port > 0 ? o->port : ts_broker_port(b));
    create.MQTTVersion = c->version == 5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1;
    rc = MQTTClient_createWithOptions(&c->mc, uri, client_id, MQTTCLIENT_PERSISTENCE_NONE, NULL,
                                      &create);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: MQTTClient_create(%s): %s (%d)", client_id, uri,
              harness_paho_strerror(rc), rc);
    g_live_clients++;
    rc = MQTTClient_setCallbacks(c->mc, c, on_lost, on_message, on_delivered);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: MQTTClient_setCallbacks: %s (%d)", client_id, harness_paho_strerror(rc),
              rc);
    if (c->version == 5 && (rc = MQTTClient_setPublished(c->mc, c, on_published)) != 0)
        FAILF("client %s: MQTTClient_setPublished: %s (%d)", client_id, harness_paho_strerror(rc),
              rc);

    co = c->version == 5 ? &opts5 : &opts;
    co->keepAliveInterval = 30;
    if (c->version == 5) {
        co->cleansession = 0;
        co->cleanstart = o->persistent ? 0 : 1;
    } else {
        co->cleansession = o->persistent ? 0 : 1;
    }
    co->reliable = 0;
    co->username = o->username;
    /* A broker that verifies usernames (ts_broker_conf.users) knows each
     * test user with its name as password; one that does not ignores it. */
    co->password = o->password != NULL ? o->password : o->username;
    co->connectTimeout = CLIENT_TIMEOUT_MS / 1000;
    co->MQTTVersion = c->version == 5 ? MQTTVERSION_5 : MQTTVERSION_3_1_1;
    /* Above our own window, so that Paho never blocks a publish (it would
     * poll in 100 ms steps). */
    co->maxInflightMessages = 2 * HARNESS_MAX_WINDOW;
    if (o->will_topic != NULL) {
        will.topicName = o->will_topic;
        will.message = o->will_payload != NULL ? o->will_payload : "";
        will.qos = o->will_qos;
        will.retained = o->will_retain;
        co->will = &will;
    }
    if (c->version == 5) {
        MQTTProperties props = MQTTProperties_initializer;
        MQTTProperty p;
        MQTTResponse r;
        if (o->max_packet_size > 0) {
            p.identifier = MQTTPROPERTY_CODE_MAXIMUM_PACKET_SIZE;
            p.value.integer4 = (unsigned)o->max_packet_size;
            if (MQTTProperties_add(&props, &p) != 0)
                FAILF("cannot add the Maximum Packet Size property");
        }
        if (o->persistent) {
            p.identifier = MQTTPROPERTY_CODE_SESSION_EXPIRY_INTERVAL;
            p.value.integer4 = 3600;
            if (MQTTProperties_add(&props, &p) != 0)
                FAILF("cannot add the Session Expiry Interval property");
        }
        r = MQTTClient_connect5(c->mc, co, &props, NULL);
        rc = r.reasonCode;
        MQTTResponse_free(r);
        MQTTProperties_free(&props);
    } else {
        rc = MQTTClient_connect(c->mc, co);
    }
    if (rc != MQTTCLIENT_SUCCESS) {
        harness_client_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

int harness_client_try_connect(const ts_broker *b, const harness_client_opts *o,
                               harness_client **out)
{
    return connect_client(b, o, out);
}

harness_client *harness_client_connect_opts(const ts_broker *b, const harness_client_opts *o)
{
    harness_client *c = NULL;
    int rc = connect_client(b, o, &c);

    if (rc != 0)
        FAILF("client %s (MQTT %s, user %s): connect to 127.0.0.1:%d: %s (%d)", o->client_id,
              o->mqtt_version == 5 ? "5" : "3.1.1", o->username != NULL ? o->username : "(none)",
              o->port > 0 ? o->port : ts_broker_port(b), harness_paho_strerror(rc), rc);
    /* PROTOCOL.md v1.2: the reads and presence pushes go to a device that
     * subscribed to the response topic itself. */
    if (o->pushes)
        harness_client_subscribe(c, HARNESS_RESPONSE_TOPIC, 1);
    return c;
}

harness_client *harness_client_connect(const ts_broker *b, const char *client_id,
                                       const char *username)
{
    harness_client_opts o = {.client_id = client_id, .username = username};

    return harness_client_connect_opts(b, &o);
}

bool harness_client_wait_lost(harness_client *c, int timeout_ms)
{
    int64_t deadline = ts_now_ms() + timeout_ms;
    struct timespec ts = harness_deadline_ts(deadline);
    bool lost;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS && !c->lost && ts_now_ms() < deadline; i++)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    return lost;
}

bool harness_client_is_lost(harness_client *c)
{
    bool lost;

    pthread_mutex_lock(&c->mu);
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    return lost;
}

/* The filter of the UNSUBSCRIBE with which settle_deliveries waits for Paho's
 * thread: no test subscribes to it, so unsubscribing changes nothing. */
#define SETTLE_TOPIC "harness/settle"

/* Readies c for MQTTClient_disconnect, from the test's thread.
 *
 * MQTTClient_disconnect of a clean MQTT 3.1.1 session frees every message
 * still on the client's Paho queue. Paho's thread unlinks a message from that
 * queue only after on_message has returned (and freed it), under its own lock
 * and without telling anyone. A test that disconnects right after receiving a
 * message (harness_client_receive wakes up inside on_message) would free that
 * message a second time: a double free or heap-use-after-free between
 * MQTTClient_emptyMessageQueue and MQTTClient_freeMessage.
 *
 * So: first mark c (on_message leaves every later message alone), then make
 * one round trip that Paho's thread completes only after every delivery
 * begun before the mark: the UNSUBACK of an UNSUBSCRIBE of SETTLE_TOPIC.
 * Paho's thread reads one packet per turn and posts the UNSUBACK at the end
 * of that turn, after the turn's delivery and its unlinking.
 *
 * The plugin's pushes (protocol v1.1) come unasked at any time to a client
 * subscribed to a group, and one that arrived after the mark would be left
 * alone and leak. So a clean session first unsubscribes from every filter
 * it has (freeing what arrives meanwhile, as it drops it): past that
 * UNSUBACK the plugin pushes it nothing more. A persistent session keeps
 * its subscriptions for its next connection. An MQTT 5
 * client needs no round trip (Paho keeps its queue on disconnect, and its
 * handle lives until the thread stops: see g_graveyard), nor does a lost or
 * closed connection (Paho's thread emptied the queue itself, in turn). */
static void settle_deliveries(harness_client *c)
{
    int rc;

    pthread_mutex_lock(&c->mu);
    c->dropping = true;
    pthread_mutex_unlock(&c->mu);
    if (c->version != 5 && !c->persistent && c->nfilters > 0 && !harness_client_is_lost(c) &&
        MQTTClient_isConnected(c->mc) && c->nfilters <= INT_MAX) {
        rc = MQTTClient_unsubscribeMany(c->mc, (int)c->nfilters, c->filters);
        if (rc != MQTTCLIENT_SUCCESS && !harness_client_is_lost(c))
            fprintf(stderr, "client %s: warning: no UNSUBACK of its filters: %s (%d)\n", c->id,
                    harness_paho_strerror(rc), rc);
    }
    pthread_mutex_lock(&c->mu);
    c->hands_off = c->version != 5;
    pthread_mutex_unlock(&c->mu);
    if (c->version == 5 || harness_client_is_lost(c) || !MQTTClient_isConnected(c->mc))
        return;
    rc = MQTTClient_unsubscribe(c->mc, SETTLE_TOPIC);
    if (rc != MQTTCLIENT_SUCCESS && !harness_client_is_lost(c))
        fprintf(stderr, "client %s: warning: no UNSUBACK before the disconnect: %s (%d)\n", c->id,
                harness_paho_strerror(rc), rc);
}

void harness_client_disconnect_with_will(harness_client *c)
{
    int rc;

    if (c->version != 5)
        FAILF("client %s: only an MQTT 5 client can ask for its Will on disconnect", c->id);
    settle_deliveries(c);
    rc = MQTTClient_disconnect5(c->mc, 1000, MQTTREASONCODE_DISCONNECT_WITH_WILL_MESSAGE, NULL);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: disconnect with Will: %s (%d)", c->id, harness_paho_strerror(rc), rc);
    harness_client_destroy(c);
}

const char *harness_client_id(const harness_client *c)
{
    return c->id;
}

void harness_client_disconnect(harness_client *c)
{
    int rc;
    bool lost;

    settle_deliveries(c);
    rc = MQTTClient_disconnect(c->mc, 1000);
    pthread_mutex_lock(&c->mu);
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    if (rc != MQTTCLIENT_SUCCESS && !lost)
        FAILF("client %s: disconnect: %s (%d)", c->id, harness_paho_strerror(rc), rc);
    harness_client_destroy(c);
}

#define STOP_WAIT_MS 10000 /* Paho's thread must have stopped within this */

/* Once no client lives: stops Paho's thread, then destroys the Paho handles
 * of the buried clients and frees them (see g_graveyard). */
static void flush_graveyard(void)
{
    harness_client *c;
    int rc = MQTTCLIENT_FAILURE, n = 0;

    /* A client destroyed without a DISCONNECT may still be connected as far
     * as Paho knows (its broker died unnoticed): disconnect it, so that
     * Paho's thread has no connection left. */
    c = g_graveyard;
    for (int i = 0; c != NULL && i < INT_MAX; i++, c = c->buried) {
        n++;
        if (MQTTClient_isConnected(c->mc)) {
            settle_deliveries(c);
            MQTTClient_disconnect(c->mc, 0);
        }
    }
    /* MQTTClient_disconnect stops Paho's thread, and waits for it, when no
     * handle is connected any more. The last connection may have ended
     * without one (lost, or refused): this call makes sure. */
    MQTTClient_disconnect(g_graveyard->mc, 0);
    /* MQTTClient_receive refuses (MQTTCLIENT_FAILURE) while Paho's thread
     * runs; on a disconnected handle it then says MQTTCLIENT_DISCONNECTED. */
    for (int i = 0; i < STOP_WAIT_MS / 10; i++) {
        char *topic = NULL;
        int topic_len = 0;
        MQTTClient_message *msg = NULL;

        rc = MQTTClient_receive(g_graveyard->mc, &topic, &topic_len, &msg, 0);
        if (msg != NULL)
            MQTTClient_freeMessage(&msg);
        if (topic != NULL)
            MQTTClient_free(topic);
        if (rc != MQTTCLIENT_FAILURE)
            break;
        ts_sleep_ms(10);
    }
    if (rc == MQTTCLIENT_FAILURE) {
        /* Freeing now could crash that thread: leak them instead. */
        fprintf(stderr,
                "warning: Paho's thread still runs %d ms after the last disconnect; "
                "%d client(s) left unfreed\n",
                STOP_WAIT_MS, n);
        g_graveyard = NULL;
        return;
    }
    for (int i = 0; g_graveyard != NULL && i < INT_MAX; i++) {
        harness_client *next = g_graveyard->buried;
        MQTTClient_destroy(&g_graveyard->mc);
        free_client(g_graveyard);
        g_graveyard = next;
    }
}

void harness_client_destroy(harness_client *c)
{
    if (c == NULL)
        return;
    /* No MQTTClient_destroy yet: Paho's thread may be about to use the handle
     * (see g_graveyard). What still arrives is dropped. */
    pthread_mutex_lock(&c->mu);
    c->dropping = true;
    pthread_mutex_unlock(&c->mu);
    g_live_clients--;
    c->buried = g_graveyard;
    g_graveyard = c;
    if (g_live_clients == 0)
        flush_graveyard();
}

void harness_msg_free(harness_msg *m)
{
    if (m == NULL)
        return;
    free(m->topic);
    free(m->payload);
    free(m->corr);
    free(m);
}
