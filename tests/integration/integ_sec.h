/* integ_sec: what the security regression tests (integ_sec_access.c,
 * integ_sec_bounds.c, integ_sec_store.c: issue 9 and the red-team holes
 * after it) share: brokers with users, expected errors, and a raw MQTT
 * client that never reads what the broker sends it. Every function fails
 * the test when it cannot do its job (tests/support/util.h). */
#ifndef CHAT_INTEG_SEC_H
#define CHAT_INTEG_SEC_H

#include "harness.h"

#define WAIT_MS 5000 /* an answer must come within this */

/* Writes text to the file name in the broker's directory. */
void sec_write_in(ts_broker *b, const char *name, const char *text);

/* A password file <dir>/passwd with the user, password pairs of users
 * (NULL-terminated), made with mosquitto_passwd. */
void sec_make_passwd(ts_broker *b, const char *const *users);

/* Connects as id with this username and password. */
harness_client *sec_connect_user(ts_broker *b, const char *id, const char *user,
                                 const char *password);

/* Fails unless resp's one entry is an error of command starting with
 * prefix. */
void sec_expect_error_prefix(harness_client *c, const cJSON *resp, const char *command,
                             const char *prefix);

/* Mosquitto 2.0.11 leaks what config__read allocates in two cases these
 * tests make on purpose: the plugin lines inside a listener with
 * per_listener_settings, and a reload it refuses. Not ours: suppressed by
 * name in the sanitizer run (ts_broker_suppress_leaks). */
void sec_suppress_config_leaks(ts_broker *b);

/* harness_msg_pred: m is on the topic arg. */
bool sec_on_topic(const harness_msg *m, void *arg);

/* Fails if a message on topic reaches c within ms. */
void sec_expect_none_on(harness_client *c, const char *topic, int ms);

/* Shows that nothing from from is still on its way to c: from publishes a
 * fence on topic (QoS 1, which c's subscriptions must match at the QoS of
 * what is checked), and the next message c gets must be that fence; fails
 * otherwise, with what (what must not have come). The broker handles one
 * publisher's messages in order and queues them for c in order. */
void sec_fence(harness_client *from, harness_client *c, const char *topic, const char *what);

/* The resident set of process pid, in kB. */
long sec_rss_kb(int pid);

/* A client that connects (MQTT 3.1.1, id) over a raw socket and never reads
 * what the broker sends: returns the socket, closed by the caller. */
int sec_deaf_client(const ts_broker *b, const char *id);

/* What a deaf client sends: a QoS 0 PUBLISH, a SUBSCRIBE (QoS 0) and an
 * UNSUBSCRIBE with packet id mid. */
void sec_deaf_publish(int fd, const char *topic, const char *payload);
void sec_deaf_subscribe(int fd, uint16_t mid, const char *filter);
void sec_deaf_unsubscribe(int fd, uint16_t mid, const char *filter);

/* Sends the same QoS 0 PUBLISH over and over, as fast as the broker takes
 * it, until the broker closes the connection (returns true) or timeout_ms
 * passed (false). */
bool sec_deaf_flood(int fd, const char *topic, const char *payload, int timeout_ms);

/* A QoS 2 PUBLISH with packet id mid, and the PUBREL of mid: a deaf
 * client holds a QoS 2 publish unreleased for as long as it likes. */
void sec_deaf_publish_qos2(int fd, uint16_t mid, const char *topic, const char *payload);
void sec_deaf_pubrel(int fd, uint16_t mid);

/* Sends a PINGREQ as deaf client id and waits (at most 30 s) until the
 * broker logs it. The broker handles one connection's packets in order:
 * everything the client sent before has been handled then. */
void sec_deaf_barrier(const ts_broker *b, int fd, const char *id);

#endif
