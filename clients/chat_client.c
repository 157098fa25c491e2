/* chat_client.c: the public API of the client library: creating and
 * destroying clients, and the calls, which hand their work to the dispatcher
 * thread (dispatch.c) and, when blocking, wait for it. */
#include "client.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GRACE_MS 2000 /* a waiter waits this much past the dispatcher's deadline */

static _Thread_local char tl_reason[REASON_MAX];

/* ===========================================================================
 * Errors
 * ========================================================================= */

const char *chat_client_strerror(chat_client_err err)
{
    switch (err) {
    case CHAT_CLIENT_OK:
        return "success";
    case CHAT_CLIENT_ERR_INVAL:
        return "invalid argument";
    case CHAT_CLIENT_ERR_NOMEM:
        return "out of memory";
    case CHAT_CLIENT_ERR_CONNECT:
        return "cannot connect to the broker";
    case CHAT_CLIENT_ERR_TIMEOUT:
        return "timed out";
    case CHAT_CLIENT_ERR_REFUSED:
        return "refused by the server";
    case CHAT_CLIENT_ERR_PROTOCOL:
        return "unexpected answer from the server";
    case CHAT_CLIENT_ERR_STATE:
        return "state file error";
    case CHAT_CLIENT_ERR_FULL:
        return "too many messages waiting to be sent";
    case CHAT_CLIENT_ERR_MQTT:
        return "MQTT client error";
    case CHAT_CLIENT_ERR_CLOSED:
        return "client closed";
    case CHAT_CLIENT_ERR_IN_USE:
        return "the state file is in use by another client";
    }
    return "unknown error";
}

const char *chat_client_reason(void)
{
    return tl_reason;
}

/* Sets this thread's reason (fmt NULL: none) and returns err. */
static chat_client_err report(chat_client_err err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static chat_client_err report(chat_client_err err, const char *fmt, ...)
{
    va_list ap;

    tl_reason[0] = '\0';
    if (fmt != NULL) {
        va_start(ap, fmt);
        vsnprintf(tl_reason, sizeof tl_reason, fmt, ap);
        va_end(ap);
    }
    return err;
}

/* ===========================================================================
 * Shared helpers (client.h)
 * ========================================================================= */

int64_t chat_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void chat_event_free(struct event *ev)
{
    if (ev == NULL)
        return;
    free(ev->topic);
    free(ev->payload);
    free(ev->text);
    free(ev);
}

void chat_call_free(struct call *call)
{
    if (call == NULL)
        return;
    free(call->group);
    free(call->payload);
    cJSON_Delete(call->entry);
    free(call);
}

void chat_post(chat_client *c, struct event *ev)
{
    ev->next = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->ev_tail != NULL)
        c->ev_tail->next = ev;
    else
        c->ev_head = ev;
    c->ev_tail = ev;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
}

void chat_call_finish(chat_client *c, struct call *call, chat_client_err err, const char *reason)
{
    bool free_it;

    pthread_mutex_lock(&c->mu);
    call->err = err;
    snprintf(call->reason, sizeof call->reason, "%s", reason ? reason : "");
    call->done = true;
    free_it = !call->waited || call->abandoned;
    if (!free_it)
        pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->mu);
    if (free_it)
        chat_call_free(call);
}

/* ===========================================================================
 * Calls
 * ========================================================================= */

static struct call *call_new(enum call_op op)
{
    struct call *call = calloc(1, sizeof *call);

    if (call != NULL)
        call->op = op;
    return call;
}

/* Hands an unwaited call to the dispatcher, which frees it. */
static chat_client_err post_call(chat_client *c, struct call *call)
{
    struct event *ev = calloc(1, sizeof *ev);

    if (ev == NULL) {
        chat_call_free(call);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    call->deadline = chat_now_ms() + c->request_timeout_ms;
    ev->kind = EV_CALL;
    ev->call = call;
    chat_post(c, ev);
    return CHAT_CLIENT_OK;
}

static bool on_dispatcher(const chat_client *c)
{
    return c->thread_started && pthread_equal(pthread_self(), c->thread);
}

/* Runs a blocking call: hands it to the dispatcher, waits until it is done
 * or its deadline (plus a grace) passed. On OK the caller reads the results
 * and frees call; otherwise call is freed here (or by the dispatcher if
 * abandoned) and this thread's reason is set. */
static chat_client_err run_call(chat_client *c, struct call *call, int timeout_ms)
{
    struct event *ev;
    int64_t until;
    chat_client_err err;

    if (on_dispatcher(c)) {
        chat_call_free(call);
        return report(CHAT_CLIENT_ERR_INVAL, "blocking calls cannot be made from a callback");
    }
    if ((ev = calloc(1, sizeof *ev)) == NULL) {
        chat_call_free(call);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    if (timeout_ms <= 0)
        timeout_ms = c->request_timeout_ms;
    call->waited = true;
    call->timeout_ms = timeout_ms;
    call->deadline = chat_now_ms() + timeout_ms;
    until = call->deadline + GRACE_MS;
    ev->kind = EV_CALL;
    ev->call = call;
    chat_post(c, ev);

    pthread_mutex_lock(&c->mu);
    for (int i = 0; !call->done && i < 1000000 && chat_now_ms() < until; i++) {
        struct timespec ts;
        ts.tv_sec = (time_t)(until / 1000);
        ts.tv_nsec = (long)(until % 1000) * 1000000L;
        pthread_cond_timedwait(&c->done, &c->mu, &ts);
    }
    if (!call->done) {
        call->abandoned = true; /* the dispatcher frees it */
        pthread_mutex_unlock(&c->mu);
        return report(CHAT_CLIENT_ERR_TIMEOUT, "no answer within %d ms", timeout_ms);
    }
    pthread_mutex_unlock(&c->mu);
    err = call->err;
    if (err != CHAT_CLIENT_OK) {
        report(err, "%s", call->reason);
        chat_call_free(call);
    }
    return err;
}

/* ===========================================================================
 * Lifecycle
 * ========================================================================= */

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s != NULL ? s : dflt);
}

/* Fills c->cid_prefix with 16 random hex digits: cids must never repeat for
 * one member, across clients and restarts. */
static void random_prefix(chat_client *c)
{
    unsigned char b[8];
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
        snprintf(c->cid_prefix + 2 * i, 3, "%02x", b[i]);
    memcpy(&c->rng, b, sizeof c->rng);
}

static chat_client_err check_options(const chat_client_options *o)
{
    if (o == NULL || o->client_id == NULL || o->client_id[0] == '\0')
        return report(CHAT_CLIENT_ERR_INVAL, "client_id is required");
    if (o->port < 0 || o->port > 65535)
        return report(CHAT_CLIENT_ERR_INVAL, "port must be 1..65535");
    if (o->mqtt_version != 0 && o->mqtt_version != 4 && o->mqtt_version != 5)
        return report(CHAT_CLIENT_ERR_INVAL, "mqtt_version must be 4 (3.1.1) or 5");
    if (o->send_qos < 0 || o->send_qos > 2 || o->listen_qos < 0 || o->listen_qos > 2)
        return report(CHAT_CLIENT_ERR_INVAL, "send_qos and listen_qos must be 1 or 2");
    if (o->keepalive_s < 0 || o->reconnect_max_s < 0 || o->ack_interval_ms < 0 ||
        o->gap_timeout_ms < 0 || o->request_timeout_ms < 0)
        return report(CHAT_CLIENT_ERR_INVAL, "times must not be negative");
    if (o->topic_prefix != NULL &&
        (o->topic_prefix[0] == '\0' || strpbrk(o->topic_prefix, "/+#") != NULL))
        return report(CHAT_CLIENT_ERR_INVAL, "topic_prefix must be one topic level");
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_create(const chat_client_options *opts, chat_client **out)
{
    pthread_condattr_t ca;
    chat_client *c;
    chat_client_err err;
    char why[REASON_MAX];
    int rc;

    if (out == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "out is NULL");
    *out = NULL;
    if ((err = check_options(opts)) != CHAT_CLIENT_OK)
        return err;
    if ((c = calloc(1, sizeof *c)) == NULL)
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    c->port = opts->port ? opts->port : 1883;
    c->mqtt_version = opts->mqtt_version == 5 ? 5 : 4;
    c->keepalive_s = opts->keepalive_s ? opts->keepalive_s : 30;
    c->reconnect_max_s = opts->reconnect_max_s ? opts->reconnect_max_s : 16;
    c->send_qos = opts->send_qos ? opts->send_qos : 1;
    c->listen_qos = opts->listen_qos ? opts->listen_qos : 1;
    c->ack_every = opts->ack_every ? opts->ack_every : 100;
    c->ack_interval_ms = opts->ack_interval_ms ? opts->ack_interval_ms : 1000;
    c->gap_timeout_ms = opts->gap_timeout_ms ? opts->gap_timeout_ms : 3000;
    c->request_timeout_ms = opts->request_timeout_ms ? opts->request_timeout_ms : 10000;
    c->connect_timeout_ms = c->request_timeout_ms;
    c->max_outbox = opts->max_outbox ? opts->max_outbox : 10000;
    c->max_held = opts->max_held ? opts->max_held : 100000;
    c->on_message = opts->on_message;
    c->on_event = opts->on_event;
    c->arg = opts->arg;
    random_prefix(c);
    if ((c->host = dup_or(opts->host, "127.0.0.1")) == NULL ||
        (c->client_id = strdup(opts->client_id)) == NULL ||
        (opts->username != NULL && (c->username = strdup(opts->username)) == NULL) ||
        (opts->password != NULL && (c->password = strdup(opts->password)) == NULL) ||
        (c->prefix = dup_or(opts->topic_prefix, "chat")) == NULL ||
        (opts->state_path != NULL && (c->state_path = strdup(opts->state_path)) == NULL) ||
        (c->uri = malloc(strlen(c->host) + 32)) == NULL) {
        err = report(CHAT_CLIENT_ERR_NOMEM, NULL);
        goto fail;
    }
    /* An IPv6 address needs brackets in Paho's URI. */
    sprintf(c->uri, strchr(c->host, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", c->host, c->port);
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wake, &ca);
    pthread_cond_init(&c->done, &ca);
    pthread_condattr_destroy(&ca);
    c->sync_ready = true;
    if (c->state_path != NULL) {
        err = chat_state_open(c->state_path, &c->state, why, sizeof why);
        if (err != CHAT_CLIENT_OK) {
            report(err, "%s", why);
            goto fail;
        }
        snprintf(c->incarnation, sizeof c->incarnation, "%s", chat_state_incarnation(c->state));
    }
    if ((err = chat_dispatch_load(c)) != CHAT_CLIENT_OK) {
        report(err, NULL);
        goto fail;
    }
    if ((rc = pthread_create(&c->thread, NULL, chat_dispatch_main, c)) != 0) {
        err = report(CHAT_CLIENT_ERR_NOMEM, "pthread_create: %s", strerror(rc));
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
        pthread_mutex_lock(&c->mu);
        c->stopping = true;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        c->thread_started = false;
    }
    /* Destroying a handle may call back, which queues: close it first. */
    chat_paho_close(c);
    while (c->ev_head != NULL) {
        struct event *ev = c->ev_head;
        c->ev_head = ev->next;
        if (ev->call != NULL)
            chat_call_finish(c, ev->call, CHAT_CLIENT_ERR_CLOSED, NULL);
        chat_event_free(ev);
    }
    chat_dispatch_free(c);
    chat_state_close(c->state);
    if (c->sync_ready) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->wake);
        pthread_cond_destroy(&c->done);
    }
    free(c->host);
    free(c->client_id);
    free(c->username);
    free(c->password);
    free(c->prefix);
    free(c->state_path);
    free(c->uri);
    free(c);
}

/* run_call for calls without results. */
static chat_client_err run_simple(chat_client *c, struct call *call, int timeout_ms)
{
    chat_client_err err = run_call(c, call, timeout_ms);

    if (err == CHAT_CLIENT_OK) {
        chat_call_free(call);
        tl_reason[0] = '\0';
    }
    return err;
}

chat_client_err chat_client_connect(chat_client *c, int timeout_ms)
{
    struct call *call;

    if (c == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    if ((call = call_new(CALL_CONNECT)) == NULL)
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    return run_simple(c, call, timeout_ms);
}

chat_client_err chat_client_disconnect(chat_client *c, int timeout_ms)
{
    struct call *call;

    if (c == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    if ((call = call_new(CALL_DISCONNECT)) == NULL)
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    return run_simple(c, call, timeout_ms);
}

/* ===========================================================================
 * Listening and sending
 * ========================================================================= */

/* Checks c and group; sets the reason. */
static chat_client_err check_group(const chat_client *c, const char *group)
{
    const char *why;

    if (c == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    if ((why = chat_client_group_error(group)) != NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "%s", why);
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_listen(chat_client *c, const char *group)
{
    struct call *call;
    chat_client_err err = check_group(c, group);

    if (err != CHAT_CLIENT_OK)
        return err;
    if ((call = call_new(CALL_LISTEN)) == NULL || (call->group = strdup(group)) == NULL) {
        chat_call_free(call);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    return post_call(c, call);
}

/* Queues the message object msg (taken) for group; a "cid" string in it is
 * kept, else a fresh one is added. */
static chat_client_err queue_send(chat_client *c, const char *group, cJSON *msg, char *cid,
                                  size_t cid_size)
{
    const cJSON *have = cJSON_GetObjectItemCaseSensitive(msg, "cid");
    struct call *call = call_new(CALL_SEND);
    chat_client_err err = CHAT_CLIENT_ERR_NOMEM;
    bool full;

    if (call == NULL || (call->group = strdup(group)) == NULL)
        goto fail;
    if (have != NULL) {
        size_t len = cJSON_IsString(have) ? strlen(have->valuestring) : 0;
        if (len == 0 || len > CHAT_CID_MAX) {
            err = report(CHAT_CLIENT_ERR_INVAL, "cid must be a string of 1 to 64 bytes");
            goto fail;
        }
        memcpy(call->cid, have->valuestring, len + 1);
    }
    pthread_mutex_lock(&c->mu);
    full = c->outbox_len >= c->max_outbox;
    if (!full) {
        c->outbox_len++;
        if (have == NULL)
            snprintf(call->cid, sizeof call->cid, "%s-%llu", c->cid_prefix,
                     (unsigned long long)++c->cid_counter);
    }
    pthread_mutex_unlock(&c->mu);
    if (full) {
        err = report(CHAT_CLIENT_ERR_FULL, "%zu messages wait for the broker", c->max_outbox);
        goto fail;
    }
    if ((have == NULL && !cJSON_AddStringToObject(msg, "cid", call->cid)) ||
        (call->payload = cJSON_PrintUnformatted(msg)) == NULL) {
        pthread_mutex_lock(&c->mu);
        c->outbox_len--;
        pthread_mutex_unlock(&c->mu);
        goto fail;
    }
    if (cid != NULL && cid_size > 0)
        snprintf(cid, cid_size, "%s", call->cid);
    cJSON_Delete(msg);
    if ((err = post_call(c, call)) != CHAT_CLIENT_OK) {
        pthread_mutex_lock(&c->mu);
        c->outbox_len--;
        pthread_mutex_unlock(&c->mu);
        return err;
    }
    return CHAT_CLIENT_OK;

fail:
    if (err == CHAT_CLIENT_ERR_NOMEM)
        report(err, NULL);
    cJSON_Delete(msg);
    chat_call_free(call);
    return err;
}

chat_client_err chat_client_send(chat_client *c, const char *group, const char *body, char *cid,
                                 size_t cid_size)
{
    chat_client_err err = check_group(c, group);
    cJSON *msg;

    if (err != CHAT_CLIENT_OK)
        return err;
    if (body == NULL || !chat_proto_utf8_valid(body, strlen(body)))
        return report(CHAT_CLIENT_ERR_INVAL, "body must be UTF-8 text");
    if ((msg = cJSON_CreateObject()) == NULL || !cJSON_AddStringToObject(msg, "body", body)) {
        cJSON_Delete(msg);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    return queue_send(c, group, msg, cid, cid_size);
}

chat_client_err chat_client_send_json(chat_client *c, const char *group, const char *json,
                                      char *cid, size_t cid_size)
{
    chat_client_err err = check_group(c, group);
    cJSON *msg;

    if (err != CHAT_CLIENT_OK)
        return err;
    if (json == NULL || !chat_proto_utf8_valid(json, strlen(json)))
        return report(CHAT_CLIENT_ERR_INVAL, "the message must be UTF-8 JSON");
    msg = cJSON_Parse(json);
    if (!cJSON_IsObject(msg)) {
        cJSON_Delete(msg);
        return report(CHAT_CLIENT_ERR_INVAL, "the message must be a JSON object");
    }
    return queue_send(c, group, msg, cid, cid_size);
}

chat_client_err chat_client_flush(chat_client *c, int timeout_ms, size_t *refused)
{
    struct call *call;
    chat_client_err err;

    if (refused != NULL)
        *refused = 0;
    if (c == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "client is NULL");
    if ((call = call_new(CALL_FLUSH)) == NULL)
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    if ((err = run_call(c, call, timeout_ms)) != CHAT_CLIENT_OK)
        return err;
    if (refused != NULL)
        *refused = call->refused;
    chat_call_free(call);
    return report(CHAT_CLIENT_OK, NULL);
}

/* ===========================================================================
 * Requests
 * ========================================================================= */

/* Runs one command named command about group (may be NULL), written in o
 * (emptied). On OK *entry is the response entry, freed by the caller with
 * cJSON_Delete. */
static chat_client_err request(chat_client *c, const char *command, const char *group, chat_obj *o,
                               cJSON **entry)
{
    struct call *call = call_new(CALL_REQUEST);
    char *cmd = chat_obj_end(o);
    chat_client_err err;

    *entry = NULL;
    if (call == NULL || cmd == NULL || (group != NULL && (call->group = strdup(group)) == NULL)) {
        free(cmd);
        chat_call_free(call);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    call->payload = cmd;
    call->command = command;
    if ((err = run_call(c, call, 0)) != CHAT_CLIENT_OK)
        return err;
    *entry = call->entry;
    call->entry = NULL;
    chat_call_free(call);
    tl_reason[0] = '\0';
    return CHAT_CLIENT_OK;
}

/* Starts the command {"command": name, "group": group (unless NULL)} in o. */
static void command_begin(chat_obj *o, const char *name, const char *group)
{
    chat_obj_str(o, "command", name);
    if (group != NULL)
        chat_obj_str(o, "group", group);
}

struct page_priv {
    cJSON *entry; /* the response entry: the messages' strings point into it */
    char **json;  /* each message's printed envelope */
    size_t n;
};

void chat_client_page_free(chat_client_page *p)
{
    struct page_priv *pv;

    if (p == NULL)
        return;
    pv = p->priv;
    if (pv != NULL) {
        for (size_t i = 0; i < pv->n; i++)
            cJSON_free(pv->json[i]);
        free(pv->json);
        cJSON_Delete(pv->entry);
        free(pv);
    }
    free(p->messages);
    free(p);
}

/* Turns a fetch or history entry (taken) into a page. */
static chat_client_err make_page(cJSON *entry, chat_client_page **out)
{
    chat_client_page *p = calloc(1, sizeof *p);
    struct page_priv *pv = calloc(1, sizeof *pv);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    const cJSON *item;
    size_t n = (size_t)cJSON_GetArraySize(msgs);

    if (p == NULL || pv == NULL) {
        free(p);
        free(pv);
        cJSON_Delete(entry);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    p->priv = pv;
    pv->entry = entry;
    if (!cJSON_IsArray(msgs) ||
        !chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "head"), 0, &p->head)) {
        chat_client_page_free(p);
        return report(CHAT_CLIENT_ERR_PROTOCOL, "answer without messages or head");
    }
    p->more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "more"));
    p->truncated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "truncated"));
    if (n > 0 && ((p->messages = calloc(n, sizeof *p->messages)) == NULL ||
                  (pv->json = calloc(n, sizeof *pv->json)) == NULL)) {
        chat_client_page_free(p);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    cJSON_ArrayForEach(item, msgs)
    {
        char *json = cJSON_PrintUnformatted(item);
        if (json == NULL) {
            chat_client_page_free(p);
            return report(CHAT_CLIENT_ERR_NOMEM, NULL);
        }
        pv->json[pv->n++] = json;
        if (!chat_envelope_view(item, json, &p->messages[p->count])) {
            chat_client_page_free(p);
            return report(CHAT_CLIENT_ERR_PROTOCOL, "not an envelope: %.200s", json);
        }
        p->count++;
    }
    *out = p;
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_fetch(chat_client *c, const char *group, uint64_t after, size_t limit,
                                  chat_client_page **out)
{
    chat_client_err err = check_group(c, group);
    chat_obj o = {0};
    cJSON *entry = NULL;

    if (out == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "out is NULL");
    *out = NULL;
    if (err != CHAT_CLIENT_OK)
        return err;
    command_begin(&o, "fetch", group);
    /* "after" is always sent: its default would be the device's cursor. */
    chat_obj_u64(&o, "after", after);
    if (limit > 0)
        chat_obj_u64(&o, "limit", limit);
    if ((err = request(c, "fetch", group, &o, &entry)) != CHAT_CLIENT_OK)
        return err;
    return make_page(entry, out);
}

chat_client_err chat_client_history(chat_client *c, const char *group, uint64_t before,
                                    size_t limit, chat_client_page **out)
{
    chat_client_err err = check_group(c, group);
    chat_obj o = {0};
    cJSON *entry = NULL;

    if (out == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "out is NULL");
    *out = NULL;
    if (err != CHAT_CLIENT_OK)
        return err;
    command_begin(&o, "history", group);
    if (before > 0)
        chat_obj_u64(&o, "before", before);
    if (limit > 0)
        chat_obj_u64(&o, "limit", limit);
    if ((err = request(c, "history", group, &o, &entry)) != CHAT_CLIENT_OK)
        return err;
    return make_page(entry, out);
}

void chat_client_unread_free(chat_client_group_status *list, size_t count)
{
    for (size_t i = 0; list != NULL && i < count; i++)
        free(list[i].group);
    free(list);
}

chat_client_err chat_client_unread(chat_client *c, chat_client_group_status **list, size_t *count)
{
    chat_obj o = {0};
    cJSON *entry = NULL;
    const cJSON *groups, *e;
    chat_client_group_status *l = NULL;
    size_t n = 0;
    chat_client_err err;

    if (c == NULL || list == NULL || count == NULL)
        return report(CHAT_CLIENT_ERR_INVAL, "NULL argument");
    *list = NULL;
    *count = 0;
    command_begin(&o, "sync", NULL);
    chat_obj_bool(&o, "replay", false);
    if ((err = request(c, "sync", NULL, &o, &entry)) != CHAT_CLIENT_OK)
        return err;
    groups = cJSON_GetObjectItemCaseSensitive(entry, "groups");
    if (!cJSON_IsArray(groups)) {
        cJSON_Delete(entry);
        return report(CHAT_CLIENT_ERR_PROTOCOL, "sync answer without groups");
    }
    if (cJSON_GetArraySize(groups) > 0 &&
        (l = calloc((size_t)cJSON_GetArraySize(groups), sizeof *l)) == NULL) {
        cJSON_Delete(entry);
        return report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    cJSON_ArrayForEach(e, groups)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "group");
        chat_client_group_status *s = &l[n];
        if (!cJSON_IsString(name) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "head"), 0, &s->head) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "acked"), 0, &s->acked) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "unread"), 0, &s->unread)) {
            err = report(CHAT_CLIENT_ERR_PROTOCOL, "bad sync entry");
            goto fail;
        }
        if ((s->group = strdup(name->valuestring)) == NULL) {
            err = report(CHAT_CLIENT_ERR_NOMEM, NULL);
            goto fail;
        }
        n++;
    }
    cJSON_Delete(entry);
    *list = l;
    *count = n;
    return CHAT_CLIENT_OK;

fail:
    cJSON_Delete(entry);
    chat_client_unread_free(l, n);
    return err;
}

/* join and leave. */
static chat_client_err membership(chat_client *c, const char *command, const char *group,
                                  const char *member, uint64_t *head)
{
    chat_client_err err = check_group(c, group);
    chat_obj o = {0};
    cJSON *entry = NULL;

    if (err != CHAT_CLIENT_OK)
        return err;
    command_begin(&o, command, group);
    if (member != NULL)
        chat_obj_str(&o, "member", member);
    if ((err = request(c, command, group, &o, &entry)) != CHAT_CLIENT_OK)
        return err;
    if (head != NULL && !chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "head"), 0, head)) {
        cJSON_Delete(entry);
        return report(CHAT_CLIENT_ERR_PROTOCOL, "join answer without head");
    }
    cJSON_Delete(entry);
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_join(chat_client *c, const char *group, const char *member,
                                 uint64_t *head)
{
    return membership(c, "join", group, member, head);
}

chat_client_err chat_client_leave(chat_client *c, const char *group, const char *member)
{
    return membership(c, "leave", group, member, NULL);
}
