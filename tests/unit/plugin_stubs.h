/* plugin_stubs: the broker's side of Mosquitto's plugin API, stubbed, so that
 * the plugin's own .c files link into unit tests and fuzzers without a broker
 * (as Mosquitto's test/unit/stubs.c stands in for the broker's internals).
 *
 * What the stubs do:
 *   - clients are struct mosquitto values the test fills in (client id,
 *     username, clean session, ...); mosquitto_client_* read them;
 *   - mosquitto_broker_publish records what was published to whom (payload,
 *     topic, QoS, Correlation Data) and takes ownership as the broker does;
 *   - mosquitto_log_printf keeps the last lines (STUB_LOG=1 in the
 *     environment also prints them to stderr);
 *   - mosquitto_malloc and friends are malloc, with a failure to inject;
 *   - callback registration is recorded, with a failure to inject;
 *   - stub_acl_check stands in for the broker's own access check (set
 *     with chat_broker_set_test), answering what the test sets.
 * MQTT 5 properties and mosquitto_pub_topic_check are the real ones from
 * libmosquitto, which the plugin links as well.
 *
 * Ownership: recorded publishes and log lines belong to the stubs until
 * stub_reset. Threading: none; one test thread.
 */
#ifndef CHAT_PLUGIN_STUBS_H
#define CHAT_PLUGIN_STUBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mosq.h"

/* A client as the broker would describe it to a plugin. */
struct mosquitto {
    const char *id;       /* NULL: a client without one */
    const char *username; /* NULL: none */
    const char *address;
    bool clean_session;
    int protocol_version; /* 3, 4 or 5 */
    int keepalive;
};

/* One call of mosquitto_broker_publish. */
struct stub_publish {
    char *client_id; /* NULL: to every subscriber */
    char *topic;
    char *payload; /* NUL-terminated copy */
    size_t len;
    int qos;
    bool retain;
    void *corr; /* MQTT 5 Correlation Data, or NULL */
    uint16_t corr_len;
};

/* One call of mosquitto_callback_register still registered. */
struct stub_callback {
    int event;
    MOSQ_FUNC_generic_callback cb;
    const void *event_data;
    void *userdata;
};

#define STUB_LOG_LINES 64
#define STUB_CALLBACKS 32

/* Forgets every recorded publish, log line and callback, and every failure
 * set to happen. */
void stub_reset(void);

/* Publishes recorded since the last stub_reset or stub_publishes_clear,
 * oldest first; NULL past the last. */
size_t stub_publish_count(void);
const struct stub_publish *stub_publish_get(size_t i);
void stub_publishes_clear(void);

/* Makes the next mosquitto_broker_publish fail with rc (the broker then
 * still owns nothing: the plugin frees). */
void stub_publish_fail_next(int rc);

/* Makes mosquitto_malloc, _calloc, _realloc and _strdup fail from the
 * (n+1)-th call on (n = 0: the next one); -1 never. */
void stub_alloc_fail_after(long n);

/* The log: lines kept (the last STUB_LOG_LINES), and whether a line with
 * level and substring was logged (level -1: any). */
size_t stub_log_count(void);
const char *stub_log_line(size_t i);
bool stub_log_has(int level, const char *substring);
void stub_log_clear(void);

/* Callbacks currently registered. Makes the n-th call (0: the next) of
 * mosquitto_callback_register fail with rc; -1: none. */
size_t stub_callback_count(void);
const struct stub_callback *stub_callback_find(int event);
void stub_callback_fail_at(long n, int rc);

/* mosquitto_kick_client_by_clientid: the calls since the last stub_reset,
 * the client id of the last (NULL: none), and what the next ones do: call
 * hook(ctx, clientid) first, as the broker runs the plugin's disconnect
 * callback within the call (NULL: nothing), then answer rc
 * (MOSQ_ERR_SUCCESS by default). */
unsigned stub_kick_count(void);
const char *stub_kick_last(void);
void stub_kick_set(void (*hook)(void *ctx, const char *clientid), void *ctx, int rc);

/* The broker's own access check, as chat_broker_set_test takes
 * it: answers stub_acl_answer (MOSQ_ERR_SUCCESS by default) and counts its calls. */
int stub_acl_check(struct mosquitto *client, const char *topic, uint32_t payloadlen, void *payload,
                   uint8_t qos, bool retain, int access);
void stub_acl_set_answer(int rc);
unsigned stub_acl_calls(void);

#endif
