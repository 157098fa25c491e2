/* harness_io.c: what a test's client sends and receives: subscriptions,
 * publishes with a window of unacknowledged ones, and the queue of received
 * messages. */
#include "harness_priv.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Subscribes to count filters; fills codes[i] with what the SUBACK granted
 * (0..2) or its refusal (0x80 under MQTT 3.1.1, the reason code under MQTT
 * 5). Returns a Paho error code if no SUBACK came. */
static int subscribe_codes(harness_client *c, size_t count, const char *const *topics, int qos,
                           int *codes)
{
    int rc;

    if (count > INT_MAX)
        FAILF("too many topics");
    for (size_t i = 0; i < count; i++)
        codes[i] = qos;
    if (c->version != 5) {
        rc = MQTTClient_subscribeMany(c->mc, (int)count, (char *const *)topics, codes);
    } else {
        MQTTResponse r =
            MQTTClient_subscribeMany5(c->mc, (int)count, (char *const *)topics, codes, NULL, NULL);
        rc = r.reasonCode < 0 ? r.reasonCode : MQTTCLIENT_SUCCESS;
        if (rc == MQTTCLIENT_SUCCESS) {
            if (r.reasonCodeCount != (int)count)
                FAILF("client %s: SUBACK with %d reason codes for %zu filters", c->id,
                      r.reasonCodeCount, count);
            for (size_t i = 0; i < count; i++)
                codes[i] = count == 1 ? (int)r.reasonCode : (int)r.reasonCodes[i];
        }
        MQTTResponse_free(r);
    }
    /* Remembered for settle_deliveries. */
    for (size_t i = 0; rc == MQTTCLIENT_SUCCESS && i < count; i++) {
        char **n;
        if (codes[i] < 0 || codes[i] >= 0x80)
            continue;
        if ((n = realloc(c->filters, (c->nfilters + 1) * sizeof *n)) == NULL ||
            (n[c->nfilters] = strdup(topics[i])) == NULL)
            FAILF("out of memory");
        c->filters = n;
        c->nfilters++;
    }
    return rc;
}

void harness_client_subscribe_many(harness_client *c, size_t count, const char *const *topics,
                                   int qos)
{
    int *granted = calloc(count, sizeof *granted);
    int rc;

    if (granted == NULL || count > INT_MAX)
        FAILF("out of memory");
    rc = subscribe_codes(c, count, topics, qos, granted);
    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: subscribe to %s%s (QoS %d): %s (%d)", c->id, topics[0],
              count > 1 ? " and others" : "", qos, harness_paho_strerror(rc), rc);
    for (size_t i = 0; i < count; i++)
        if (granted[i] == MQTT_BAD_SUBSCRIBE || granted[i] < 0 || granted[i] > 2)
            FAILF("client %s: the broker refused the subscription to %s (granted 0x%x)", c->id,
                  topics[i], (unsigned)granted[i]);
    free(granted);
}

int harness_client_try_subscribe(harness_client *c, const char *topic, int qos)
{
    int code = 0;
    int rc = subscribe_codes(c, 1, &topic, qos, &code);

    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: subscribe to %s (QoS %d): no SUBACK: %s (%d)", c->id, topic, qos,
              harness_paho_strerror(rc), rc);
    return code;
}

void harness_client_subscribe(harness_client *c, const char *topic, int qos)
{
    harness_client_subscribe_many(c, 1, &topic, qos);
}

/* Publishes len bytes, with MQTT 5 properties p (may be NULL; ignored under
 * MQTT 3.1.1 except retain), without waiting for the acknowledgement; see
 * harness_client_publish_async. */
static int publish_raw(harness_client *c, const char *topic, const void *payload, size_t len,
                       int qos, const harness_props *p, harness_ticket *ticket)
{
    MQTTClient_deliveryToken token = 0;
    harness_ticket t = {0, 0};
    int retain = p != NULL && p->retain;
    int rc;

    if (len > INT_MAX)
        FAILF("payload too long");
    if (qos > 0) {
        int64_t deadline = ts_now_ms() + CLIENT_TIMEOUT_MS;
        struct timespec ts = harness_deadline_ts(deadline);
        pthread_mutex_lock(&c->mu);
        for (int i = 0;
             i < MAX_WAKEUPS && c->inflight >= c->window && !c->lost && ts_now_ms() < deadline; i++)
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->lost) {
            pthread_mutex_unlock(&c->mu);
            return MQTTCLIENT_DISCONNECTED;
        }
        if (c->inflight >= c->window) {
            pthread_mutex_unlock(&c->mu);
            FAILF("client %s: %d publishes unacknowledged for %d ms", c->id, c->inflight,
                  CLIENT_TIMEOUT_MS);
        }
        c->inflight++;
        pthread_mutex_unlock(&c->mu);
    }
    if (c->version == 5) {
        MQTTProperties props = MQTTProperties_initializer;
        MQTTProperty prop;
        MQTTResponse r;
        if (p != NULL && p->response_topic != NULL) {
            memset(&prop, 0, sizeof prop);
            prop.identifier = MQTTPROPERTY_CODE_RESPONSE_TOPIC;
            prop.value.data.data = (char *)p->response_topic;
            prop.value.data.len = (int)strlen(p->response_topic);
            if (MQTTProperties_add(&props, &prop) != 0)
                FAILF("client %s: cannot add a Response Topic", c->id);
        }
        if (p != NULL && p->corr != NULL) {
            memset(&prop, 0, sizeof prop);
            prop.identifier = MQTTPROPERTY_CODE_CORRELATION_DATA;
            prop.value.data.data = (char *)p->corr;
            prop.value.data.len = (int)p->corr_len;
            if (MQTTProperties_add(&props, &prop) != 0)
                FAILF("client %s: cannot add Correlation Data", c->id);
        }
        r = MQTTClient_publish5(c->mc, topic, (int)len, payload, qos, retain, &props, &token);
        rc = r.reasonCode < 0 ? r.reasonCode : MQTTCLIENT_SUCCESS;
        MQTTResponse_free(r);
        MQTTProperties_free(&props);
    } else {
        rc = MQTTClient_publish(c->mc, topic, (int)len, (void *)payload, qos, retain, &token);
    }
    pthread_mutex_lock(&c->mu);
    if (rc != MQTTCLIENT_SUCCESS) {
        if (qos > 0 && c->inflight > 0)
            c->inflight--;
    } else if (qos > 0) {
        if (token <= 0 || token >= TOKENS) {
            pthread_mutex_unlock(&c->mu);
            FAILF("client %s: Paho returned delivery token %d", c->id, token);
        }
        t.token = token;
        t.seq = ++c->sent[token];
    }
    pthread_mutex_unlock(&c->mu);
    if (ticket != NULL)
        *ticket = t;
    return rc;
}

int harness_client_publish_async(harness_client *c, const char *topic, const char *payload, int qos,
                                 harness_ticket *ticket)
{
    return publish_raw(c, topic, payload, strlen(payload), qos, NULL, ticket);
}

int harness_client_publish_bytes(harness_client *c, const char *topic, const void *payload,
                                 size_t len, int qos, const harness_props *props)
{
    harness_ticket t;
    int rc = publish_raw(c, topic, payload, len, qos, props, &t);
    int reason;

    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: publish to %s (QoS %d, %zu bytes): %s (%d)", c->id, topic, qos, len,
              harness_paho_strerror(rc), rc);
    harness_client_wait_acked(c, t, CLIENT_TIMEOUT_MS);
    if (t.token == 0 || c->version != 5)
        return 0;
    pthread_mutex_lock(&c->mu);
    reason = c->reason[t.token];
    pthread_mutex_unlock(&c->mu);
    return reason;
}

void harness_client_set_window(harness_client *c, int window)
{
    if (window < 1 || window > HARNESS_MAX_WINDOW)
        FAILF("client %s: window %d out of 1..%d", c->id, window, HARNESS_MAX_WINDOW);
    pthread_mutex_lock(&c->mu);
    c->window = window;
    pthread_mutex_unlock(&c->mu);
}

void harness_client_publish(harness_client *c, const char *topic, const char *payload, int qos)
{
    harness_ticket t;
    int rc = harness_client_publish_async(c, topic, payload, qos, &t);

    if (rc != MQTTCLIENT_SUCCESS)
        FAILF("client %s: publish to %s (QoS %d): %s (%d)", c->id, topic, qos,
              harness_paho_strerror(rc), rc);
    harness_client_wait_acked(c, t, CLIENT_TIMEOUT_MS);
}

bool harness_client_acked(harness_client *c, harness_ticket ticket)
{
    bool acked;

    if (ticket.token == 0)
        return true;
    pthread_mutex_lock(&c->mu);
    acked = c->done[ticket.token] >= ticket.seq;
    pthread_mutex_unlock(&c->mu);
    return acked;
}

void harness_client_wait_acked(harness_client *c, harness_ticket ticket, int timeout_ms)
{
    int64_t deadline = ts_now_ms() + timeout_ms;
    struct timespec ts = harness_deadline_ts(deadline);
    bool acked, lost;

    if (ticket.token == 0)
        return;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS && c->done[ticket.token] < ticket.seq && !c->lost &&
                    ts_now_ms() < deadline;
         i++)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    acked = c->done[ticket.token] >= ticket.seq;
    lost = c->lost;
    pthread_mutex_unlock(&c->mu);
    if (!acked)
        FAILF("client %s: publish with token %d not acknowledged: %s", c->id, ticket.token,
              lost ? "connection lost" : "timed out");
}

harness_msg *harness_client_receive(harness_client *c, int timeout_ms)
{
    int64_t deadline = ts_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct timespec ts = harness_deadline_ts(deadline);
    harness_msg *m;
    bool oom;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS && c->head == NULL && ts_now_ms() < deadline; i++)
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    m = c->head;
    if (m != NULL) {
        c->head = m->next;
        if (c->head == NULL)
            c->tail = NULL;
        m->next = NULL;
    }
    oom = c->oom;
    pthread_mutex_unlock(&c->mu);
    if (oom)
        FAILF("client %s: a received message was dropped for lack of memory", c->id);
    return m;
}

void harness_client_expect_none(harness_client *c, int timeout_ms, const char *what)
{
    harness_msg *m = harness_client_receive(c, timeout_ms);

    if (m != NULL)
        FAILF("client %s: expected %s, but got a message on %s: %.400s", c->id, what, m->topic,
              m->payload);
}

harness_msg *harness_client_receive_if(harness_client *c, harness_msg_pred *pred, void *arg,
                                       int timeout_ms)
{
    int64_t deadline = ts_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct timespec ts = harness_deadline_ts(deadline);
    harness_msg *found = NULL;
    bool oom;

    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < MAX_WAKEUPS; i++) {
        harness_msg *prev = NULL;
        for (harness_msg *m = c->head; m != NULL && found == NULL; prev = m, m = m->next) {
            if (!pred(m, arg))
                continue;
            if (prev != NULL)
                prev->next = m->next;
            else
                c->head = m->next;
            if (c->tail == m)
                c->tail = prev;
            m->next = NULL;
            found = m;
        }
        if (found != NULL || ts_now_ms() >= deadline)
            break;
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    oom = c->oom;
    pthread_mutex_unlock(&c->mu);
    if (oom)
        FAILF("client %s: a received message was dropped for lack of memory", c->id);
    return found;
}
