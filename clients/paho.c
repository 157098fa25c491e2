/* paho.c: the client library's glue to Paho MQTTAsync: one MQTTAsync handle
 * per connection, callbacks that only copy what Paho hands over into events
 * for the dispatcher, and the operations the dispatcher starts.
 *
 * Why a handle per connection rather than Paho's automatic reconnect: Paho
 * keeps commands it had not written yet across a reconnect and sends them
 * first, while it fails the ones in flight, so a sender's messages would be
 * stored out of order and requests sent twice; it also retries only on a
 * 3-second tick. Destroying the handle when its connection ends drops
 * everything of that connection at once; the dispatcher resends what is
 * unacknowledged, in order, on the next one.
 *
 * Every callback gets the connection's struct chat_conn as context and tags
 * its event with the connection's epoch, so news from a finished connection
 * is recognised. Paho runs callbacks on its threads holding its own lock;
 * they take mu only to queue and never call Paho. MQTTAsync_destroy takes
 * Paho's lock, so no callback of a handle runs after its destroy returned. */
#include "client.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Callbacks
 * ------------------------------------------------------------------------- */

/* A zeroed event of kind for conn, or NULL (then the loss is flagged). */
static struct event *new_event(struct chat_conn *conn, enum ev_kind kind)
{
    struct event *ev = calloc(1, sizeof *ev);

    if (ev == NULL) {
        pthread_mutex_lock(&conn->c->mu);
        conn->c->lost_news = true;
        pthread_mutex_unlock(&conn->c->mu);
        return NULL;
    }
    ev->kind = kind;
    ev->epoch = conn->epoch;
    return ev;
}

static void post_simple(struct chat_conn *conn, enum ev_kind kind, int code, const char *text)
{
    struct event *ev = new_event(conn, kind);

    if (ev == NULL)
        return;
    ev->code = code;
    if (text != NULL)
        ev->text = strdup(text);
    chat_post(conn->c, ev);
}

static void on_connect_ok(void *context, MQTTAsync_successData *r)
{
    (void)r;
    post_simple(context, EV_CONNECTED, 0, NULL);
}

static void on_connect_ok5(void *context, MQTTAsync_successData5 *r)
{
    (void)r;
    post_simple(context, EV_CONNECTED, 0, NULL);
}

static void on_connect_fail(void *context, MQTTAsync_failureData *r)
{
    post_simple(context, EV_CONNECT_FAILED, r ? r->code : MQTTASYNC_FAILURE, r ? r->message : NULL);
}

static void on_connect_fail5(void *context, MQTTAsync_failureData5 *r)
{
    /* reasonCode: the broker's CONNACK; code: Paho's own failure. */
    post_simple(context, EV_CONNECT_FAILED,
                r ? (r->reasonCode ? (int)r->reasonCode : r->code) : MQTTASYNC_FAILURE,
                r ? r->message : NULL);
}

static void on_connection_lost(void *context, char *cause)
{
    post_simple(context, EV_CONN_LOST, 0, cause);
}

/* MQTT 5: the broker sent DISCONNECT (its reason code says why, e.g. 0x8E
 * when another client took over the session). Paho 1.3.12 calls no
 * connection_lost after this one: the connection is over. */
static void on_server_disconnect(void *context, MQTTProperties *props, enum MQTTReasonCodes rc)
{
    MQTTProperty *p =
        props != NULL ? MQTTProperties_getProperty(props, MQTTPROPERTY_CODE_REASON_STRING) : NULL;
    char text[256] = "";

    if (p != NULL && p->value.data.data != NULL && p->value.data.len > 0)
        snprintf(text, sizeof text, "%.*s", p->value.data.len, p->value.data.data);
    post_simple(context, EV_SERVER_DISCONNECT, (int)rc, text[0] != '\0' ? text : NULL);
}

static void on_disconnect_done(void *context, MQTTAsync_successData *r)
{
    (void)r;
    post_simple(context, EV_DISCONNECTED, 0, NULL);
}

static void on_disconnect_done5(void *context, MQTTAsync_successData5 *r)
{
    (void)r;
    post_simple(context, EV_DISCONNECTED, 0, NULL);
}

static void on_disconnect_fail(void *context, MQTTAsync_failureData *r)
{
    (void)r;
    post_simple(context, EV_DISCONNECTED, 0, NULL);
}

static void on_disconnect_fail5(void *context, MQTTAsync_failureData5 *r)
{
    (void)r;
    post_simple(context, EV_DISCONNECTED, 0, NULL);
}

/* Copies the message into an event. Returns 1 (Paho frees it) or 0 when
 * out of memory (Paho offers it again later). */
static int on_message(void *context, char *topic, int topic_len, MQTTAsync_message *m)
{
    struct chat_conn *conn = context;
    struct event *ev = calloc(1, sizeof *ev);
    size_t tlen = topic_len > 0 ? (size_t)topic_len : strlen(topic);
    size_t plen = m->payloadlen > 0 ? (size_t)m->payloadlen : 0;

    if (ev == NULL)
        return 0;
    ev->kind = EV_MESSAGE;
    ev->epoch = conn->epoch;
    ev->topic = malloc(tlen + 1);
    ev->payload = malloc(plen + 1);
    if (ev->topic == NULL || ev->payload == NULL)
        goto fail;
    memcpy(ev->topic, topic, tlen);
    ev->topic[tlen] = '\0';
    if (plen > 0)
        memcpy(ev->payload, m->payload, plen);
    ev->payload[plen] = '\0';
    ev->len = plen;
    MQTTAsync_freeMessage(&m);
    MQTTAsync_free(topic);
    chat_post(conn->c, ev);
    return 1;

fail:
    chat_event_free(ev);
    return 0;
}

/* A publish or subscribe of conn finished. */
static void done(struct chat_conn *conn, int token, bool ok, int code)
{
    struct event *ev = new_event(conn, EV_DONE);

    if (ev == NULL)
        return;
    ev->token = token;
    ev->ok = ok;
    ev->code = code;
    chat_post(conn->c, ev);
}

static void on_done_ok(void *context, MQTTAsync_successData *r)
{
    /* A SUBACK of one topic carries the granted QoS (0x80: refused, which
     * Paho reports as a failure; kept here in case). */
    done(context, r ? r->token : 0, true, 0);
}

static void on_done_fail(void *context, MQTTAsync_failureData *r)
{
    done(context, r ? r->token : 0, false, r ? r->code : MQTTASYNC_FAILURE);
}

static void on_done_ok5(void *context, MQTTAsync_successData5 *r)
{
    int code = r ? (int)r->reasonCode : 0;

    done(context, r ? r->token : 0, code < 0x80, code);
}

static void on_done_fail5(void *context, MQTTAsync_failureData5 *r)
{
    /* reasonCode is the broker's (PUBACK, SUBACK); code is Paho's own. */
    done(context, r ? r->token : 0, false,
         r ? (r->reasonCode ? (int)r->reasonCode : r->code) : MQTTASYNC_FAILURE);
}

/* ---------------------------------------------------------------------------
 * Operations (dispatcher thread, mu not held)
 * ------------------------------------------------------------------------- */

int chat_paho_open(chat_client *c, uint32_t epoch, int timeout_ms)
{
    MQTTAsync_createOptions co = MQTTAsync_createOptions_initializer;
    MQTTAsync_connectOptions v3 = MQTTAsync_connectOptions_initializer;
    MQTTAsync_connectOptions v5 = MQTTAsync_connectOptions_initializer5;
    MQTTAsync_connectOptions *o = c->mqtt_version >= 5 ? &v5 : &v3;
    struct chat_conn *conn;
    int rc;

    assert(c->mqtt == NULL && c->conn == NULL);
    if ((conn = calloc(1, sizeof *conn)) == NULL)
        return MQTTASYNC_FAILURE;
    conn->c = c;
    conn->epoch = epoch;
    co.MQTTVersion = c->mqtt_version >= 5 ? MQTTVERSION_5 : MQTTVERSION_DEFAULT;
    co.sendWhileDisconnected = 0;
    rc = MQTTAsync_createWithOptions(&c->mqtt, c->uri, c->client_id, MQTTCLIENT_PERSISTENCE_NONE,
                                     NULL, &co);
    if (rc != MQTTASYNC_SUCCESS) {
        c->mqtt = NULL;
        free(conn);
        return rc;
    }
    c->conn = conn;
    rc = MQTTAsync_setCallbacks(c->mqtt, conn, on_connection_lost, on_message, NULL);
    if (rc == MQTTASYNC_SUCCESS && c->mqtt_version >= 5)
        rc = MQTTAsync_setDisconnected(c->mqtt, conn, on_server_disconnect);
    if (rc != MQTTASYNC_SUCCESS)
        return rc;
    o->keepAliveInterval = c->keepalive_s;
    /* Clean sessions: the plugin's cursors are the session that matters, and
     * every connect resubscribes, which starts the catch-up. */
    if (c->mqtt_version >= 5) {
        o->cleanstart = 1;
        o->onSuccess5 = on_connect_ok5;
        o->onFailure5 = on_connect_fail5;
        o->MQTTVersion = MQTTVERSION_5;
    } else {
        o->cleansession = 1;
        o->onSuccess = on_connect_ok;
        o->onFailure = on_connect_fail;
        o->MQTTVersion = MQTTVERSION_3_1_1;
    }
    o->context = conn;
    o->username = c->username;
    o->password = c->password;
    o->connectTimeout = timeout_ms > 1000 ? (timeout_ms + 999) / 1000 : 1;
    o->retryInterval = 0;
    o->automaticReconnect = 0; /* see the top of this file */
    return MQTTAsync_connect(c->mqtt, o);
}

void chat_paho_close(chat_client *c)
{
    if (c->mqtt != NULL)
        MQTTAsync_destroy(&c->mqtt); /* may call back: events of this epoch */
    c->mqtt = NULL;
    free(c->conn); /* no callback can use it any more */
    c->conn = NULL;
}

int chat_paho_disconnect(chat_client *c, int timeout_ms)
{
    MQTTAsync_disconnectOptions o = MQTTAsync_disconnectOptions_initializer;

    if (c->mqtt == NULL)
        return MQTTASYNC_DISCONNECTED;
    o.timeout = timeout_ms;
    o.context = c->conn;
    if (c->mqtt_version >= 5) {
        o.onSuccess5 = on_disconnect_done5;
        o.onFailure5 = on_disconnect_fail5;
    } else {
        o.onSuccess = on_disconnect_done;
        o.onFailure = on_disconnect_fail;
    }
    return MQTTAsync_disconnect(c->mqtt, &o);
}

/* Sets Paho's completion callbacks (or none). */
static void set_callbacks(const chat_client *c, MQTTAsync_responseOptions *ro, bool track)
{
    if (!track)
        return;
    ro->context = c->conn;
    if (c->mqtt_version >= 5) {
        ro->onSuccess5 = on_done_ok5;
        ro->onFailure5 = on_done_fail5;
    } else {
        ro->onSuccess = on_done_ok;
        ro->onFailure = on_done_fail;
    }
}

int chat_paho_publish(chat_client *c, const char *topic, const void *payload, size_t len, int qos,
                      bool track, int *token)
{
    MQTTAsync_responseOptions ro = MQTTAsync_responseOptions_initializer;
    MQTTAsync_message msg = MQTTAsync_message_initializer;
    int rc;

    if (c->mqtt == NULL)
        return MQTTASYNC_DISCONNECTED;
    if (len > (size_t)INT32_MAX)
        return MQTTASYNC_FAILURE; /* never: payloads are far smaller */
    set_callbacks(c, &ro, track);
    msg.payload = (void *)payload;
    msg.payloadlen = (int)len;
    msg.qos = qos;
    msg.retained = 0;
    rc = MQTTAsync_sendMessage(c->mqtt, topic, &msg, &ro);
    if (token != NULL)
        *token = ro.token;
    return rc;
}

int chat_paho_subscribe(chat_client *c, const char *topic, int qos, int *token)
{
    MQTTAsync_responseOptions ro = MQTTAsync_responseOptions_initializer;
    int rc;

    if (c->mqtt == NULL)
        return MQTTASYNC_DISCONNECTED;
    set_callbacks(c, &ro, true);
    rc = MQTTAsync_subscribe(c->mqtt, topic, qos, &ro);
    *token = ro.token;
    return rc;
}
