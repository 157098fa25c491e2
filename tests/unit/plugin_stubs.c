/* plugin_stubs.c: the broker's plugin API, stubbed for unit tests and
 * fuzzers (see plugin_stubs.h). */
#include "plugin_stubs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    struct stub_publish *pubs;
    size_t npubs, cap;
    int publish_fail;
    long alloc_left; /* -1: never fail */
    char *log[STUB_LOG_LINES];
    int log_level[STUB_LOG_LINES];
    size_t nlog; /* lines logged since the last clear; the last STUB_LOG_LINES are kept */
    struct stub_callback cbs[STUB_CALLBACKS];
    size_t ncbs;
    long cb_fail_at;
    int cb_fail_rc;
    int acl_answer;
    unsigned acl_calls;
    unsigned kicks;
    char *kick_last;
    void (*kick_hook)(void *ctx, const char *clientid);
    void *kick_ctx;
    int kick_rc;
} S = {.alloc_left = -1, .cb_fail_at = -1};

/* ===========================================================================
 * The stubs' own controls
 * ========================================================================= */

static void publish_free(struct stub_publish *p)
{
    free(p->client_id);
    free(p->topic);
    free(p->payload);
    free(p->corr);
}

void stub_publishes_clear(void)
{
    for (size_t i = 0; i < S.npubs; i++) {
        publish_free(&S.pubs[i]);
    }
    free(S.pubs);
    S.pubs = NULL;
    S.npubs = S.cap = 0;
}

void stub_log_clear(void)
{
    for (size_t i = 0; i < STUB_LOG_LINES; i++) {
        free(S.log[i]);
        S.log[i] = NULL;
    }
    S.nlog = 0;
}

void stub_reset(void)
{
    stub_publishes_clear();
    stub_log_clear();
    S.publish_fail = MOSQ_ERR_SUCCESS;
    S.alloc_left = -1;
    S.ncbs = 0;
    S.cb_fail_at = -1;
    S.acl_answer = MOSQ_ERR_SUCCESS;
    S.acl_calls = 0;
    S.kicks = 0;
    free(S.kick_last);
    S.kick_last = NULL;
    S.kick_hook = NULL;
    S.kick_ctx = NULL;
    S.kick_rc = MOSQ_ERR_SUCCESS;
}

unsigned stub_kick_count(void)
{
    return S.kicks;
}

const char *stub_kick_last(void)
{
    return S.kick_last;
}

void stub_kick_set(void (*hook)(void *ctx, const char *clientid), void *ctx, int rc)
{
    S.kick_hook = hook;
    S.kick_ctx = ctx;
    S.kick_rc = rc;
}

size_t stub_publish_count(void)
{
    return S.npubs;
}

const struct stub_publish *stub_publish_get(size_t i)
{
    return i < S.npubs ? &S.pubs[i] : NULL;
}

void stub_publish_fail_next(int rc)
{
    S.publish_fail = rc;
}

void stub_alloc_fail_after(long n)
{
    S.alloc_left = n;
}

size_t stub_log_count(void)
{
    return S.nlog < STUB_LOG_LINES ? S.nlog : STUB_LOG_LINES;
}

/* Line i of those kept, oldest first. */
static size_t log_slot(size_t i)
{
    size_t first = S.nlog < STUB_LOG_LINES ? 0 : S.nlog - STUB_LOG_LINES;
    return (first + i) % STUB_LOG_LINES;
}

const char *stub_log_line(size_t i)
{
    return i < stub_log_count() ? S.log[log_slot(i)] : NULL;
}

bool stub_log_has(int level, const char *substring)
{
    for (size_t i = 0; i < stub_log_count(); i++) {
        size_t k = log_slot(i);
        if ((level < 0 || S.log_level[k] == level) && strstr(S.log[k], substring)) {
            return true;
        }
    }
    return false;
}

size_t stub_callback_count(void)
{
    return S.ncbs;
}

const struct stub_callback *stub_callback_find(int event)
{
    for (size_t i = 0; i < S.ncbs; i++) {
        if (S.cbs[i].event == event) {
            return &S.cbs[i];
        }
    }
    return NULL;
}

void stub_callback_fail_at(long n, int rc)
{
    S.cb_fail_at = n;
    S.cb_fail_rc = rc;
}

int stub_acl_check(struct mosquitto *client, const char *topic, uint32_t payloadlen, void *payload,
                   uint8_t qos, bool retain, int access)
{
    (void)client;
    (void)topic;
    (void)payloadlen;
    (void)payload;
    (void)qos;
    (void)retain;
    (void)access;
    S.acl_calls++;
    return S.acl_answer;
}

void stub_acl_set_answer(int rc)
{
    S.acl_answer = rc;
}

unsigned stub_acl_calls(void)
{
    return S.acl_calls;
}

/* ===========================================================================
 * Memory
 * ========================================================================= */

static bool alloc_ok(void)
{
    if (S.alloc_left < 0) {
        return true;
    }
    if (S.alloc_left == 0) {
        return false;
    }
    S.alloc_left--;
    return true;
}

void *mosquitto_malloc(size_t size)
{
    return alloc_ok() ? malloc(size) : NULL;
}

void *mosquitto_calloc(size_t nmemb, size_t size)
{
    return alloc_ok() ? calloc(nmemb, size) : NULL;
}

void *mosquitto_realloc(void *ptr, size_t size)
{
    return alloc_ok() ? realloc(ptr, size) : NULL;
}

char *mosquitto_strdup(const char *s)
{
    return alloc_ok() ? strdup(s) : NULL;
}

void mosquitto_free(void *mem)
{
    free(mem);
}

/* ===========================================================================
 * Logging
 * ========================================================================= */

void mosquitto_log_printf(int level, const char *fmt, ...)
{
    va_list ap;
    char *line = NULL;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !(line = malloc((size_t)n + 1))) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, (size_t)n + 1, fmt, ap);
    va_end(ap);
    const char *echo = getenv("STUB_LOG");
    if (echo && echo[0] == '1') {
        fprintf(stderr, "log %d: %s\n", level, line);
    }
    size_t k = S.nlog % STUB_LOG_LINES;
    free(S.log[k]);
    S.log[k] = line;
    S.log_level[k] = level;
    S.nlog++;
}

/* ===========================================================================
 * Clients
 * ========================================================================= */

const char *mosquitto_client_address(const struct mosquitto *client)
{
    return client->address;
}

bool mosquitto_client_clean_session(const struct mosquitto *client)
{
    return client->clean_session;
}

const char *mosquitto_client_id(const struct mosquitto *client)
{
    return client->id;
}

int mosquitto_client_keepalive(const struct mosquitto *client)
{
    return client->keepalive;
}

void *mosquitto_client_certificate(const struct mosquitto *client)
{
    (void)client;
    return NULL;
}

int mosquitto_client_protocol(const struct mosquitto *client)
{
    (void)client;
    return mp_mqtt;
}

int mosquitto_client_protocol_version(const struct mosquitto *client)
{
    return client->protocol_version;
}

int mosquitto_client_sub_count(const struct mosquitto *client)
{
    (void)client;
    return 0;
}

const char *mosquitto_client_username(const struct mosquitto *client)
{
    return client->username;
}

int mosquitto_set_username(struct mosquitto *client, const char *username)
{
    client->username = username;
    return MOSQ_ERR_SUCCESS;
}

int mosquitto_kick_client_by_clientid(const char *clientid, bool with_will)
{
    (void)with_will;
    S.kicks++;
    free(S.kick_last);
    S.kick_last = clientid ? strdup(clientid) : NULL;
    if (S.kick_hook) {
        S.kick_hook(S.kick_ctx, clientid);
    }
    return S.kick_rc;
}

int mosquitto_kick_client_by_username(const char *username, bool with_will)
{
    (void)username;
    (void)with_will;
    return MOSQ_ERR_SUCCESS;
}

/* ===========================================================================
 * Publishing
 * ========================================================================= */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int mosquitto_broker_publish_copy(const char *clientid, const char *topic, int payloadlen,
                                  const void *payload, int qos, bool retain,
                                  mosquitto_property *properties)
{
    struct stub_publish p = {0};
    void *corr = NULL;
    uint16_t corr_len = 0;

    if (S.publish_fail != MOSQ_ERR_SUCCESS) {
        int rc = S.publish_fail;
        S.publish_fail = MOSQ_ERR_SUCCESS;
        return rc;
    }
    if (!topic || payloadlen < 0 || (payloadlen > 0 && !payload) || qos < 0 || qos > 2) {
        return MOSQ_ERR_INVAL;
    }
    if (S.npubs == S.cap) {
        size_t cap = S.cap ? 2 * S.cap : 16;
        struct stub_publish *n = realloc(S.pubs, cap * sizeof(*n));
        if (!n) {
            return MOSQ_ERR_NOMEM;
        }
        S.pubs = n;
        S.cap = cap;
    }
    mosquitto_property_read_binary(properties, MQTT_PROP_CORRELATION_DATA, &corr, &corr_len, false);
    p.client_id = dup_or_null(clientid);
    p.topic = strdup(topic);
    p.payload = malloc((size_t)payloadlen + 1);
    if ((clientid && !p.client_id) || !p.topic || !p.payload) {
        publish_free(&p);
        free(corr);
        return MOSQ_ERR_NOMEM;
    }
    if (payloadlen) {
        memcpy(p.payload, payload, (size_t)payloadlen);
    }
    p.payload[payloadlen] = '\0';
    p.len = (size_t)payloadlen;
    p.qos = qos;
    p.retain = retain;
    p.corr = corr;
    p.corr_len = corr_len;
    S.pubs[S.npubs++] = p;
    /* The broker owns the properties once the call succeeds. */
    mosquitto_property_free_all(&properties);
    return MOSQ_ERR_SUCCESS;
}

int mosquitto_broker_publish(const char *clientid, const char *topic, int payloadlen, void *payload,
                             int qos, bool retain, mosquitto_property *properties)
{
    int rc = mosquitto_broker_publish_copy(clientid, topic, payloadlen, payload, qos, retain,
                                           properties);
    /* On success the broker owns (and frees) the payload; on failure the
     * caller keeps it. */
    if (rc == MOSQ_ERR_SUCCESS) {
        mosquitto_free(payload);
    }
    return rc;
}

/* ===========================================================================
 * Callbacks
 * ========================================================================= */

int mosquitto_callback_register(mosquitto_plugin_id_t *identifier, int event,
                                MOSQ_FUNC_generic_callback cb_func, const void *event_data,
                                void *userdata)
{
    (void)identifier;
    if (S.cb_fail_at == 0) {
        S.cb_fail_at = -1;
        return S.cb_fail_rc;
    }
    if (S.cb_fail_at > 0) {
        S.cb_fail_at--;
    }
    for (size_t i = 0; i < S.ncbs; i++) {
        if (S.cbs[i].event == event && S.cbs[i].cb == cb_func) {
            return MOSQ_ERR_ALREADY_EXISTS;
        }
    }
    if (S.ncbs == STUB_CALLBACKS) {
        return MOSQ_ERR_NOMEM;
    }
    S.cbs[S.ncbs++] = (struct stub_callback){event, cb_func, event_data, userdata};
    return MOSQ_ERR_SUCCESS;
}

int mosquitto_callback_unregister(mosquitto_plugin_id_t *identifier, int event,
                                  MOSQ_FUNC_generic_callback cb_func, const void *event_data)
{
    (void)identifier;
    (void)event_data;
    for (size_t i = 0; i < S.ncbs; i++) {
        if (S.cbs[i].event == event && S.cbs[i].cb == cb_func) {
            S.cbs[i] = S.cbs[--S.ncbs];
            return MOSQ_ERR_SUCCESS;
        }
    }
    return MOSQ_ERR_NOT_FOUND;
}
