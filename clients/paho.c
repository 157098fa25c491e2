/* paho.c: the client library's glue to Paho MQTTAsync (see paho.h). */
#include "paho.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------
 * Callbacks
 * ------------------------------------------------------------------------- */

/* The context of one handle's callbacks. */
struct chat_paho_ctx {
    struct chat_queue *queue;
    uint32_t epoch;
};

/* A zeroed event of kind for ctx, or NULL (then the loss is flagged). */
static struct event *new_event(struct chat_paho_ctx *ctx, enum ev_kind kind)
{
    struct event *ev = chat_event_new(kind, ctx->epoch);

    if (ev == NULL)
        chat_queue_post_lost(ctx->queue);
    return ev;
}

static void post_simple(struct chat_paho_ctx *ctx, enum ev_kind kind, int code, const char *text)
{
    struct event *ev = new_event(ctx, kind);

    if (ev == NULL)
        return;
    ev->code = code;
    if (text != NULL)
        ev->text = strdup(text);
    chat_queue_post(ctx->queue, ev);
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
    struct chat_paho_ctx *ctx = context;
    struct event *ev = chat_event_new(EV_MESSAGE, ctx->epoch);
    size_t tlen = topic_len > 0 ? (size_t)topic_len : strlen(topic);
    size_t plen = m->payloadlen > 0 ? (size_t)m->payloadlen : 0;

    if (ev == NULL)
        return 0;
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
    chat_queue_post(ctx->queue, ev);
    return 1;

fail:
    chat_event_free(ev);
    return 0;
}

/* A publish or subscribe of ctx's handle finished. */
static void done(struct chat_paho_ctx *ctx, int token, bool ok, int code)
{
    struct event *ev = new_event(ctx, EV_DONE);

    if (ev == NULL)
        return;
    ev->token = token;
    ev->ok = ok;
    ev->code = code;
    chat_queue_post(ctx->queue, ev);
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
 * Operations (dispatcher thread, the queue's mutex not held)
 * ------------------------------------------------------------------------- */

void chat_paho_init(chat_paho *p, const struct chat_paho_cfg *cfg)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
}

int chat_paho_open(chat_paho *p, int timeout_ms)
{
    MQTTAsync_createOptions co = MQTTAsync_createOptions_initializer;
    MQTTAsync_connectOptions v3 = MQTTAsync_connectOptions_initializer;
    MQTTAsync_connectOptions v5 = MQTTAsync_connectOptions_initializer5;
    MQTTAsync_connectOptions *o = p->cfg.version >= 5 ? &v5 : &v3;
    struct chat_paho_ctx *ctx;
    int rc;

    assert(p->mqtt == NULL && p->ctx == NULL);
    p->epoch++;
    if ((ctx = calloc(1, sizeof *ctx)) == NULL)
        return MQTTASYNC_FAILURE;
    ctx->queue = p->cfg.queue;
    ctx->epoch = p->epoch;
    co.MQTTVersion = p->cfg.version >= 5 ? MQTTVERSION_5 : MQTTVERSION_DEFAULT;
    co.sendWhileDisconnected = 0;
    rc = MQTTAsync_createWithOptions(&p->mqtt, p->cfg.uri, p->cfg.client_id,
                                     MQTTCLIENT_PERSISTENCE_NONE, NULL, &co);
    if (rc != MQTTASYNC_SUCCESS) {
        p->mqtt = NULL;
        free(ctx);
        return rc;
    }
    p->ctx = ctx;
    rc = MQTTAsync_setCallbacks(p->mqtt, ctx, on_connection_lost, on_message, NULL);
    if (rc == MQTTASYNC_SUCCESS && p->cfg.version >= 5)
        rc = MQTTAsync_setDisconnected(p->mqtt, ctx, on_server_disconnect);
    if (rc != MQTTASYNC_SUCCESS)
        return rc;
    o->keepAliveInterval = p->cfg.keepalive_s;
    /* Clean sessions: the plugin's cursors are the session that matters, and
     * every connect resubscribes, which starts the catch-up. */
    if (p->cfg.version >= 5) {
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
    o->context = ctx;
    o->username = p->cfg.username;
    o->password = p->cfg.password;
    o->connectTimeout = timeout_ms > 1000 ? (timeout_ms + 999) / 1000 : 1;
    o->retryInterval = 0;
    o->automaticReconnect = 0; /* see paho.h */
    return MQTTAsync_connect(p->mqtt, o);
}

void chat_paho_set_up(chat_paho *p, bool up)
{
    p->up = up;
}

bool chat_paho_up(const chat_paho *p)
{
    return p->up;
}

bool chat_paho_connected(const chat_paho *p)
{
    return p->mqtt != NULL && MQTTAsync_isConnected(p->mqtt);
}

uint32_t chat_paho_epoch(const chat_paho *p)
{
    return p->epoch;
}

void chat_paho_close(chat_paho *p)
{
    if (p->mqtt != NULL)
        MQTTAsync_destroy(&p->mqtt); /* may call back: events of this epoch */
    p->mqtt = NULL;
    free(p->ctx); /* no callback can use it any more */
    p->ctx = NULL;
    p->up = false;
    p->nops = 0;
    p->epoch++; /* late news of the handle is stale */
}

void chat_paho_free(chat_paho *p)
{
    chat_paho_close(p);
    free(p->ops);
    p->ops = NULL;
    p->cap_ops = 0;
}

int chat_paho_disconnect(chat_paho *p, int timeout_ms)
{
    MQTTAsync_disconnectOptions o = MQTTAsync_disconnectOptions_initializer;

    if (p->mqtt == NULL)
        return MQTTASYNC_DISCONNECTED;
    o.timeout = timeout_ms;
    o.context = p->ctx;
    if (p->cfg.version >= 5) {
        o.onSuccess5 = on_disconnect_done5;
        o.onFailure5 = on_disconnect_fail5;
    } else {
        o.onSuccess = on_disconnect_done;
        o.onFailure = on_disconnect_fail;
    }
    return MQTTAsync_disconnect(p->mqtt, &o);
}

/* Sets Paho's completion callbacks for a tracked operation, after making
 * room to record it (so that recording cannot fail once it is sent). */
static bool track_start(chat_paho *p, MQTTAsync_responseOptions *ro, const struct chat_op *track)
{
    if (track == NULL)
        return true;
    if (p->nops == p->cap_ops) {
        size_t cap = p->cap_ops ? p->cap_ops * 2 : 64;
        struct chat_op *ops = realloc(p->ops, cap * sizeof *ops);
        if (ops == NULL)
            return false;
        p->ops = ops;
        p->cap_ops = cap;
    }
    ro->context = p->ctx;
    if (p->cfg.version >= 5) {
        ro->onSuccess5 = on_done_ok5;
        ro->onFailure5 = on_done_fail5;
    } else {
        ro->onSuccess = on_done_ok;
        ro->onFailure = on_done_fail;
    }
    return true;
}

/* Records a tracked operation that Paho accepted. */
static void track_end(chat_paho *p, const MQTTAsync_responseOptions *ro,
                      const struct chat_op *track)
{
    if (track == NULL)
        return;
    p->ops[p->nops] = *track;
    p->ops[p->nops].token = ro->token;
    p->nops++;
}

int chat_paho_publish(chat_paho *p, const char *topic, const void *payload, size_t len, int qos,
                      const struct chat_op *track)
{
    MQTTAsync_responseOptions ro = MQTTAsync_responseOptions_initializer;
    MQTTAsync_message msg = MQTTAsync_message_initializer;
    int rc;

    if (p->mqtt == NULL)
        return MQTTASYNC_DISCONNECTED;
    if (len > (size_t)INT32_MAX || !track_start(p, &ro, track))
        return MQTTASYNC_FAILURE; /* payloads are far smaller; out of memory */
    msg.payload = (void *)payload;
    msg.payloadlen = (int)len;
    msg.qos = qos;
    msg.retained = 0;
    rc = MQTTAsync_sendMessage(p->mqtt, topic, &msg, &ro);
    if (rc == MQTTASYNC_SUCCESS)
        track_end(p, &ro, track);
    return rc;
}

int chat_paho_subscribe(chat_paho *p, const char *topic, int qos, const struct chat_op *track)
{
    MQTTAsync_responseOptions ro = MQTTAsync_responseOptions_initializer;
    int rc;

    if (p->mqtt == NULL)
        return MQTTASYNC_DISCONNECTED;
    if (!track_start(p, &ro, track))
        return MQTTASYNC_FAILURE;
    rc = MQTTAsync_subscribe(p->mqtt, topic, qos, &ro);
    if (rc == MQTTASYNC_SUCCESS)
        track_end(p, &ro, track);
    return rc;
}

bool chat_paho_take(chat_paho *p, int token, struct chat_op *out)
{
    for (size_t i = 0; i < p->nops; i++) {
        if (p->ops[i].token != token)
            continue;
        *out = p->ops[i];
        p->ops[i] = p->ops[--p->nops];
        return true;
    }
    return false;
}
