/* chat_client.c: the client object's life (create, destroy) and the calls
 * that connect, listen and send, which hand their work to the dispatcher
 * thread (dispatch.c) through api.c. */
#include "chat_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "dispatch.h"
#include "proto.h"

/* ===========================================================================
 * Lifecycle
 * ========================================================================= */

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s != NULL ? s : dflt);
}

/* Fills c->rand_prefix with 16 random hex digits (cids must never repeat
 * for one member, across clients and restarts) and returns a seed for the
 * reconnect jitter. */
static unsigned random_prefix(chat_client *c)
{
    unsigned char b[8];
    unsigned seed;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && read(fd, b, sizeof b) == (ssize_t)sizeof b;

    if (fd >= 0)
        close(fd);
    if (!ok) {
        struct timespec ts;
        uint64_t v;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (uint64_t)ts.tv_sec * 1000000007u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        v ^= (uint64_t)(uintptr_t)c;
        memcpy(b, &v, sizeof b);
    }
    for (size_t i = 0; i < sizeof b; i++)
        snprintf(c->rand_prefix + 2 * i, 3, "%02x", b[i]);
    memcpy(&seed, b, sizeof seed);
    return seed;
}

static chat_client_err check_options(const chat_client_options *o)
{
    if (o == NULL || o->client_id == NULL || o->client_id[0] == '\0')
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "client_id is required");
    if (o->port < 0 || o->port > 65535)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "port must be 1..65535");
    if (o->mqtt_version != 0 && o->mqtt_version != 4 && o->mqtt_version != 5)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "mqtt_version must be 4 (3.1.1) or 5");
    if (o->send_qos < 0 || o->send_qos > 2 || o->listen_qos < 0 || o->listen_qos > 2)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "send_qos and listen_qos must be 1 or 2");
    if (o->keepalive_s < 0 || o->reconnect_max_s < 0 || o->ack_interval_ms < 0 ||
        o->gap_timeout_ms < 0 || o->request_timeout_ms < 0)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "times must not be negative");
    if (o->topic_prefix != NULL &&
        (o->topic_prefix[0] == '\0' || strpbrk(o->topic_prefix, "/+#") != NULL))
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "topic_prefix must be one topic level");
    return CHAT_CLIENT_OK;
}

/* Copies the options' strings into c. */
static bool copy_strings(chat_client *c, const chat_client_options *o)
{
    int port = o->port ? o->port : 1883;

    if ((c->host = dup_or(o->host, "127.0.0.1")) == NULL ||
        (c->client_id = strdup(o->client_id)) == NULL ||
        (o->username != NULL && (c->username = strdup(o->username)) == NULL) ||
        (o->password != NULL && (c->password = strdup(o->password)) == NULL) ||
        (c->prefix = dup_or(o->topic_prefix, CHAT_PROTO_DEFAULT_PREFIX)) == NULL ||
        (o->state_path != NULL && (c->state_path = strdup(o->state_path)) == NULL) ||
        (c->uri = malloc(strlen(c->host) + 32)) == NULL)
        return false;
    /* An IPv6 address needs brackets in Paho's URI. */
    sprintf(c->uri, strchr(c->host, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", c->host, port);
    return true;
}

/* Sets up the modules, the options' defaults applied. */
static void wire(chat_client *c, const chat_client_options *o, unsigned seed)
{
    struct chat_paho_cfg paho = {.queue = &c->queue,
                                 .uri = c->uri,
                                 .client_id = c->client_id,
                                 .username = c->username,
                                 .password = c->password,
                                 .version = o->mqtt_version == 5 ? 5 : 4,
                                 .keepalive_s = o->keepalive_s ? o->keepalive_s : 30};
    struct chat_conn_cfg conn = {.paho = &c->paho,
                                 .queue = &c->queue,
                                 .calls = &c->calls,
                                 .notify = &c->notify,
                                 .reconnect_max_s = o->reconnect_max_s ? o->reconnect_max_s : 16};
    struct chat_outbox_cfg outbox = {.paho = &c->paho,
                                     .notify = &c->notify,
                                     .prefix = c->prefix,
                                     .cid_prefix = c->rand_prefix,
                                     .max = o->max_outbox ? o->max_outbox : 10000,
                                     .qos = o->send_qos ? o->send_qos : 1};
    struct chat_delivery_cfg delivery = {.groups = &c->groups,
                                         .paho = &c->paho,
                                         .notify = &c->notify,
                                         .state = c->state,
                                         .prefix = c->prefix,
                                         .on_message = o->on_message,
                                         .arg = o->arg,
                                         .ack_every = o->ack_every ? o->ack_every : 100,
                                         .ack_interval_ms =
                                             o->ack_interval_ms ? o->ack_interval_ms : 1000,
                                         .listen_qos = o->listen_qos ? o->listen_qos : 1};
    struct chat_receipts_cfg receipts = {.groups = &c->groups,
                                         .paho = &c->paho,
                                         .notify = &c->notify,
                                         .prefix = c->prefix,
                                         .interval_ms =
                                             o->ack_interval_ms ? o->ack_interval_ms : 1000,
                                         .state = c->state != NULL};
    struct chat_requests_cfg requests = {.paho = &c->paho,
                                         .queue = &c->queue,
                                         .notify = &c->notify,
                                         .groups = &c->groups,
                                         .corr_prefix = c->rand_prefix,
                                         .timeout_ms = c->request_timeout_ms};

    c->notify = (chat_notify){.on_event = o->on_event, .arg = o->arg};
    chat_paho_init(&c->paho, &paho);
    chat_conn_init(&c->conn, &conn, c->request_timeout_ms, seed);
    chat_outbox_init(&c->outbox, &outbox);
    c->groups.max_held = o->max_held ? o->max_held : 100000;
    chat_delivery_init(&c->delivery, &delivery);
    chat_receipts_init(&c->receipts, &receipts);
    chat_requests_init(&c->requests, &requests);
    c->responses = (chat_responses){.requests = &c->requests,
                                    .delivery = &c->delivery,
                                    .groups = &c->groups,
                                    .outbox = &c->outbox,
                                    .paho = &c->paho,
                                    .queue = &c->queue,
                                    .notify = &c->notify,
                                    .receipts = &c->receipts};
}

chat_client_err chat_client_create(const chat_client_options *opts, chat_client **out)
{
    chat_client *c;
    chat_client_err err;
    char why[CHAT_REASON_MAX];
    unsigned seed;
    int rc;

    if (out == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "out is NULL");
    *out = NULL;
    if ((err = check_options(opts)) != CHAT_CLIENT_OK)
        return err;
    if ((c = calloc(1, sizeof *c)) == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    c->request_timeout_ms = opts->request_timeout_ms ? opts->request_timeout_ms : 10000;
    c->gap_timeout_ms = opts->gap_timeout_ms ? opts->gap_timeout_ms : 3000;
    seed = random_prefix(c);
    if (!copy_strings(c, opts) || !chat_queue_init(&c->queue)) {
        err = chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
        goto fail;
    }
    if (c->state_path != NULL &&
        (err = chat_state_open(c->state_path, &c->state, why, sizeof why)) != CHAT_CLIENT_OK) {
        chat_api_report(err, "%s", why);
        goto fail;
    }
    wire(c, opts, seed);
    if ((err = chat_groups_load(&c->groups, c->state)) != CHAT_CLIENT_OK) {
        chat_api_report(err, NULL);
        goto fail;
    }
    if ((rc = pthread_create(&c->thread, NULL, chat_dispatch_main, c)) != 0) {
        err = chat_api_report(CHAT_CLIENT_ERR_NOMEM, "pthread_create: %s", strerror(rc));
        goto fail;
    }
    c->thread_started = true;
    *out = c;
    return CHAT_CLIENT_OK;

fail:
    chat_client_destroy(c);
    return err;
}

void chat_client_destroy(chat_client *c)
{
    if (c == NULL)
        return;
    if (c->thread_started) {
        (void)chat_client_disconnect(c, 1000);
        chat_queue_stop(&c->queue);
        pthread_join(c->thread, NULL);
        c->thread_started = false;
    }
    /* Destroying the handle may call back, which queues: close it before
     * the queue. */
    chat_dispatch_free(c);
    chat_queue_destroy(&c->queue);
    chat_state_close(c->state);
    free(c->host);
    free(c->client_id);
    free(c->username);
    free(c->password);
    free(c->prefix);
    free(c->state_path);
    free(c->uri);
    free(c);
}

/* chat_api_run for calls without results. */
static chat_client_err run_simple(chat_client *c, enum call_op op, int timeout_ms)
{
    struct call *call;
    chat_client_err err;

    if (c == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    if ((call = chat_call_new(op)) == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    if ((err = chat_api_run(c, call, timeout_ms)) == CHAT_CLIENT_OK)
        chat_call_free(call);
    return err;
}

chat_client_err chat_client_set_commit(chat_client *c, chat_client_commit_fn *fn)
{
    if (c == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    /* Read by the dispatcher only once a listen or connect call has reached
     * it through the queue, whose lock orders this store before the read. */
    c->delivery.cfg.on_commit = fn;
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_set_change(chat_client *c, chat_client_change_fn *fn)
{
    if (c == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    /* As on_commit: read by the dispatcher after the queue's lock. */
    c->delivery.cfg.on_change = fn;
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_connect(chat_client *c, int timeout_ms)
{
    return run_simple(c, CALL_CONNECT, timeout_ms);
}

chat_client_err chat_client_disconnect(chat_client *c, int timeout_ms)
{
    return run_simple(c, CALL_DISCONNECT, timeout_ms);
}

/* ===========================================================================
 * Listening and sending
 * ========================================================================= */

chat_client_err chat_client_listen(chat_client *c, const char *group)
{
    struct call *call;
    chat_client_err err = chat_api_check_group(c, group);

    if (err != CHAT_CLIENT_OK)
        return err;
    if ((call = chat_call_new(CALL_LISTEN)) == NULL || (call->group = strdup(group)) == NULL) {
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    return chat_api_post(c, call);
}

/* A send of group with cid (NULL: a fresh one), admitted to the outbox, or
 * NULL with *err and the reason set. */
static struct call *send_call(chat_client *c, const char *group, const char *cid,
                              chat_client_err *err)
{
    struct call *call = chat_call_new(CALL_SEND);

    if (call == NULL || (call->group = strdup(group)) == NULL) {
        chat_call_free(call);
        *err = chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
        return NULL;
    }
    if (cid != NULL)
        snprintf(call->cid, sizeof call->cid, "%s", cid);
    if (!chat_outbox_admit(&c->outbox, call->cid)) {
        chat_call_free(call);
        *err = chat_api_report(CHAT_CLIENT_ERR_FULL, "%zu messages wait for the broker",
                               c->outbox.cfg.max);
        return NULL;
    }
    return call;
}

/* Hands an admitted send whose payload (may be NULL: out of memory) is set
 * to the dispatcher; its cid goes to cid (may be NULL). */
static chat_client_err send_post(chat_client *c, struct call *call, char *cid, size_t cid_size)
{
    chat_client_err err;

    if (call->payload == NULL) {
        chat_outbox_release(&c->outbox);
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    if (cid != NULL && cid_size > 0)
        snprintf(cid, cid_size, "%s", call->cid);
    if ((err = chat_api_post(c, call)) != CHAT_CLIENT_OK)
        chat_outbox_release(&c->outbox);
    return err;
}

chat_client_err chat_client_send(chat_client *c, const char *group, const char *body, char *cid,
                                 size_t cid_size)
{
    chat_client_err err = chat_api_check_group(c, group);
    struct call *call;
    chat_obj o = {0};

    if (err != CHAT_CLIENT_OK)
        return err;
    if (body == NULL || !chat_proto_utf8_valid(body, strlen(body)))
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "body must be UTF-8 text");
    if ((call = send_call(c, group, NULL, &err)) == NULL)
        return err;
    chat_obj_str(&o, "body", body);
    chat_obj_str(&o, "cid", call->cid);
    call->payload = chat_obj_end(&o);
    return send_post(c, call, cid, cid_size);
}

chat_client_err chat_client_send_json(chat_client *c, const char *group, const char *json,
                                      char *cid, size_t cid_size)
{
    chat_client_err err = chat_api_check_group(c, group);
    const cJSON *have;
    struct call *call;
    cJSON *msg;

    if (err != CHAT_CLIENT_OK)
        return err;
    if (json == NULL || !chat_proto_utf8_valid(json, strlen(json)))
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "the message must be UTF-8 JSON");
    msg = cJSON_Parse(json);
    if (!cJSON_IsObject(msg)) {
        cJSON_Delete(msg);
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "the message must be a JSON object");
    }
    /* A cid of the application's is kept, so that it can retry across
     * restarts without duplicates. */
    have = cJSON_GetObjectItemCaseSensitive(msg, "cid");
    if (have != NULL && (!cJSON_IsString(have) || have->valuestring[0] == '\0' ||
                         strlen(have->valuestring) > CHAT_PROTO_CID_MAX)) {
        cJSON_Delete(msg);
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "cid must be a string of 1 to 64 bytes");
    }
    if ((call = send_call(c, group, have ? have->valuestring : NULL, &err)) == NULL) {
        cJSON_Delete(msg);
        return err;
    }
    if (have != NULL || cJSON_AddStringToObject(msg, "cid", call->cid) != NULL)
        call->payload = cJSON_PrintUnformatted(msg);
    cJSON_Delete(msg);
    return send_post(c, call, cid, cid_size);
}

chat_client_err chat_client_read(chat_client *c, const char *group, uint64_t id)
{
    struct call *call;
    chat_client_err err = chat_api_check_group(c, group);

    if (err != CHAT_CLIENT_OK)
        return err;
    if ((call = chat_call_new(CALL_READ)) == NULL || (call->group = strdup(group)) == NULL) {
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    call->id = id;
    return chat_api_post(c, call);
}

chat_client_err chat_client_flush(chat_client *c, int timeout_ms, size_t *refused)
{
    struct call *call;
    chat_client_err err;

    if (refused != NULL)
        *refused = 0;
    if (c == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    if ((call = chat_call_new(CALL_FLUSH)) == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    if ((err = chat_api_run(c, call, timeout_ms)) != CHAT_CLIENT_OK)
        return err;
    if (refused != NULL)
        *refused = call->refused;
    chat_call_free(call);
    return CHAT_CLIENT_OK;
}
