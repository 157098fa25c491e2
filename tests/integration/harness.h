/* harness: Paho MQTT C clients for the integration tests, which run a real
 * mosquitto with the chat plugin (tests/support/broker.h) and drive it with
 * them.
 *
 * A harness_client is a Paho MQTTClient (MQTT 3.1.1 or 5, clean session
 * unless asked) whose incoming messages, delivery notices and connection loss
 * are queued for the test's thread. On top of it: the chat protocol as the
 * tests read it (JSON fields, replay pages, requests and responses, a
 * device's whole catch-up, the store paged through).
 *
 * Failure policy (tests/support/util.h): a test stops at its first failure.
 * A harness function that cannot do its job prints why (Paho codes with
 * MQTTClient_strerror) and fails the test: every broker is stopped, the tail
 * of its log printed and its directory kept. Callers therefore need no error
 * handling, and ASSERT/ASSERTF/FAILF do the same for the test's own checks.
 *
 * Ownership: harness_client_connect/harness_client_disconnect (or _destroy)
 * are a pair. A harness_msg returned by harness_client_receive belongs to the
 * caller, freed with harness_msg_free; a harness_page owns its parsed JSON,
 * freed with harness_page_free; a response (cJSON) is freed with cJSON_Delete.
 *
 * Threading: Paho calls back on its own thread; those callbacks only queue
 * under a mutex and signal a condition variable. Every harness function must
 * be called from the test's main thread. Every wait is bounded in time and
 * every loop in count. Paho's thread unlinks a delivered message from its own
 * queue only after the callback has returned, so a disconnected client's
 * memory and Paho handle are freed only once no client is left (Paho's thread
 * has then stopped), and an MQTT 3.1.1 client first waits for that thread to
 * finish its deliveries (see harness_client_disconnect).
 */
#ifndef CHAT_HARNESS_H
#define CHAT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "broker.h"
#include "chat_proto.h"
#include "util.h"

/* Topic on which the plugin publishes responses and replay pages. */
#define HARNESS_RESPONSE_TOPIC CHAT_PROTO_RESPONSE_TOPIC

/* Topic of requests to the plugin. */
#define HARNESS_CONTROL_TOPIC CHAT_PROTO_CONTROL_TOPIC

/* ---------------------------------------------------------------------------
 * Clients
 * ------------------------------------------------------------------------- */

typedef struct harness_client harness_client;

/* One message received by a client. */
typedef struct harness_msg {
    char *topic;              /* NUL-terminated */
    char *payload;            /* len bytes plus a NUL, for convenience */
    size_t len;               /* bytes of payload, not counting the NUL */
    int qos;                  /* QoS it was delivered with */
    int64_t at_ms;            /* ts_now_ms() when Paho handed it over */
    bool retained;            /* delivered with the retain flag */
    bool has_corr;            /* MQTT 5: it carried Correlation Data */
    char *corr;               /* that data (corr_len bytes plus a NUL), or NULL */
    size_t corr_len;          /* bytes of corr */
    struct harness_msg *next; /* queue link, private */
} harness_msg;

/* A QoS 1 or 2 publish whose completion can be awaited (see
 * harness_client_publish_async); token 0 for QoS 0. */
typedef struct harness_ticket {
    int token;    /* Paho delivery token (the MQTT packet id) */
    uint32_t seq; /* publishes with that token so far, this one included */
} harness_ticket;

/* Connects a clean-session MQTT 3.1.1 client with this client id (and this
 * username, or none if NULL) to b, waiting at most 10 s. Returns the
 * connected client, owned by the caller, freed with harness_client_disconnect
 * or harness_client_destroy. */
harness_client *harness_client_connect(const ts_broker *b, const char *client_id,
                                       const char *username);

/* How to connect a client: harness_client_connect_opts. */
typedef struct harness_client_opts {
    const char *client_id;    /* required */
    const char *username;     /* NULL: none */
    const char *password;     /* NULL: none */
    int mqtt_version;         /* 5: MQTT 5 (clean start); anything else: MQTT 3.1.1 */
    const char *will_topic;   /* NULL: no Will */
    const char *will_payload; /* NUL-terminated; NULL: empty */
    int will_qos;             /* QoS of the Will */
    bool will_retain;         /* retain flag of the Will */
    int max_packet_size;      /* MQTT 5 Maximum Packet Size the client accepts; 0: none */
    int port;                 /* another listener of the broker on 127.0.0.1; 0: its own */
    bool persistent;          /* keep the session: clean session 0 (3.1.1), or clean start 0
                                 and a session expiry of an hour (MQTT 5) */
    bool pushes;              /* ask for the plugin's pushed `reads` and `presence` entries
                                 (protocol v1.2: subscribe to the response topic after the
                                 connect) and keep them; by default none is asked for, and any
                                 that comes is dropped on arrival (see harness_is_push) */
} harness_client_opts;

/* Connects a client as o says (clean session), waiting at most 10 s.
 * Returns the connected client, owned by the caller, freed with
 * harness_client_disconnect or harness_client_destroy; fails the test if the
 * broker refuses. Every other function works on MQTT 5 clients too. */
harness_client *harness_client_connect_opts(const ts_broker *b, const harness_client_opts *o);

/* Tries to connect as o says. Returns 0 and the client in *out, or why the
 * connection was refused, with *out NULL: the CONNACK return code under MQTT
 * 3.1.1 (e.g. 5: not authorized), the CONNACK reason code under MQTT 5 (0x80
 * and above), or a negative Paho code (e.g. the connection was closed). */
int harness_client_try_connect(const ts_broker *b, const harness_client_opts *o,
                               harness_client **out);

/* Subscribes to count topics at once with the given QoS, waiting for the
 * SUBACK (at most 10 s); fails the test if the broker refuses any. */
void harness_client_subscribe_many(harness_client *c, size_t count, const char *const *topics,
                                   int qos);

/* Subscribes to one topic; see harness_client_subscribe_many. */
void harness_client_subscribe(harness_client *c, const char *topic, int qos);

/* Subscribes to one filter and returns the SUBACK's answer: the granted QoS
 * 0..2, or the refusal: 0x80 under MQTT 3.1.1, the reason code (e.g. 0x87 not
 * authorized) under MQTT 5. Fails the test only if no SUBACK comes. */
int harness_client_try_subscribe(harness_client *c, const char *topic, int qos);

/* MQTT 5 properties of a publish (ignored under MQTT 3.1.1, but retain). */
typedef struct harness_props {
    const char *response_topic; /* Response Topic, or NULL */
    const void *corr;           /* Correlation Data (corr_len bytes), or NULL */
    size_t corr_len;
    bool retain; /* the retain flag */
} harness_props;

/* Publishes len arbitrary bytes with props (may be NULL) and, for QoS 1 and
 * 2, waits (at most 10 s) for the broker's acknowledgement. Returns the
 * acknowledgement's reason code under MQTT 5 (0 success, 0x10 no matching
 * subscribers, 0x87 not authorized ...: from the PUBACK, or from a PUBREC
 * that refused a QoS 2 publish, or the PUBCOMP), 0 under MQTT 3.1.1 (whose
 * acks carry none) and for QoS 0. */
int harness_client_publish_bytes(harness_client *c, const char *topic, const void *payload,
                                 size_t len, int qos, const harness_props *props);

/* Publishes a NUL-terminated payload and, for QoS 1 and 2, waits (at most
 * 10 s) for its PUBACK/PUBCOMP. */
void harness_client_publish(harness_client *c, const char *topic, const char *payload, int qos);

/* Publishes without waiting for the acknowledgement; at most the client's
 * window of QoS 1/2 publishes stay unacknowledged (this call waits for room,
 * at most 10 s). Fills *ticket (may be NULL) and returns MQTTCLIENT_SUCCESS,
 * or, when the connection is lost or Paho refuses, the Paho code: the caller
 * decides (a broker killed on purpose is not an error). */
int harness_client_publish_async(harness_client *c, const char *topic, const char *payload, int qos,
                                 harness_ticket *ticket);

/* The default window: mosquitto's receive maximum (max_inflight_messages,
 * default 20). Past it, mosquitto 2.0 answers a QoS 1/2 publish with reason
 * 0x97 "quota exceeded" and drops it; an MQTT 3.1.1 client sees a plain ack. A
 * QoS 2 publish holds a slot until its PUBREL, a QoS 1 publish none (the
 * broker acks it at once). */
#define HARNESS_DEFAULT_WINDOW 20

/* The largest window harness_client_set_window accepts. */
#define HARNESS_MAX_WINDOW 512

/* Sets how many QoS 1/2 publishes harness_client_publish_async lets go
 * unacknowledged (1..HARNESS_MAX_WINDOW). More than HARNESS_DEFAULT_WINDOW is
 * only safe for QoS 1 streams. */
void harness_client_set_window(harness_client *c, int window);

/* True once the publish of this ticket was acknowledged by the broker (always
 * true for a QoS 0 ticket). */
bool harness_client_acked(harness_client *c, harness_ticket ticket);

/* Waits (at most timeout_ms) until the ticket is acknowledged; fails the test
 * otherwise. */
void harness_client_wait_acked(harness_client *c, harness_ticket ticket, int timeout_ms);

/* Next message received, oldest first, waiting at most timeout_ms; NULL if
 * none came. The caller frees it with harness_msg_free. */
harness_msg *harness_client_receive(harness_client *c, int timeout_ms);

/* Fails the test if any message arrives within timeout_ms; what says what was
 * expected (for the message). */
void harness_client_expect_none(harness_client *c, int timeout_ms, const char *what);

/* Waits at most timeout_ms for the connection to be lost; returns whether it
 * was. */
bool harness_client_wait_lost(harness_client *c, int timeout_ms);

/* Decides which queued messages harness_client_receive_if takes. Called
 * with the client's queue locked: it must not call harness functions. */
typedef bool harness_msg_pred(const harness_msg *m, void *arg);

/* The oldest queued message for which pred(m, arg) holds, waiting at most
 * timeout_ms for one; other messages stay queued in order. NULL if none came.
 * The caller frees it with harness_msg_free. */
harness_msg *harness_client_receive_if(harness_client *c, harness_msg_pred *pred, void *arg,
                                       int timeout_ms);

/* Whether the connection of c was lost (without waiting). */
bool harness_client_is_lost(harness_client *c);

/* MQTT 5 only: sends DISCONNECT with reason 0x04 (disconnect with Will
 * message), so that the broker publishes the client's Will, then destroys c
 * as harness_client_destroy does. */
void harness_client_disconnect_with_will(harness_client *c);

/* The client id c connected with, owned by c. */
const char *harness_client_id(const harness_client *c);

/* Sends DISCONNECT, then destroys c as harness_client_destroy does. An MQTT
 * 3.1.1 client first unsubscribes from "harness/settle" (a filter no test
 * uses) and waits for the UNSUBACK: Paho's MQTTClient_disconnect frees the
 * messages of a clean 3.1.1 session, and it must not do so while Paho's
 * thread is still finishing the delivery of one (which it would free twice).
 * Messages that arrive from then on are dropped. */
void harness_client_disconnect(harness_client *c);

/* Destroys c without a DISCONNECT (use after the broker died), dropping its
 * queued messages and whatever still arrives. Accepts NULL. Its memory and
 * its Paho handle are freed once no client is left: then Paho's thread is
 * stopped (a client Paho still counts as connected is disconnected first)
 * and cannot be inside a callback for it, nor about to touch the handle. */
void harness_client_destroy(harness_client *c);

/* Whether payload (len bytes, on the response topic) holds only entries
 * the plugin pushes unasked (protocol v1.1): `reads`, and `presence`
 * without the `members` of an answer. */
bool harness_is_push(const char *payload, size_t len);

/* Frees a received message. Accepts NULL. */
void harness_msg_free(harness_msg *m);

/* ---------------------------------------------------------------------------
 * JSON and the chat protocol
 * ------------------------------------------------------------------------- */

/* Parses m's payload as a JSON object; fails the test otherwise. The caller
 * frees the result with cJSON_Delete. */
cJSON *harness_json_object(const harness_msg *m);

/* obj[key] as an integer (a JSON number with no fraction); fails the test if
 * it is missing or is not one. */
int64_t harness_json_int(const cJSON *obj, const char *key);

/* obj[key] as a string, owned by obj; fails the test if missing or not one. */
const char *harness_json_str(const cJSON *obj, const char *key);

/* obj[key] as a boolean; missing counts as false; any other type fails. */
bool harness_json_bool(const cJSON *obj, const char *key);

/* One replay page: {"responses":[{"command":"replay", ...}]}. */
typedef struct harness_page {
    cJSON *root;           /* the whole parsed message, owned */
    const cJSON *messages; /* the envelopes, oldest first, owned by root */
    const char *group;     /* owned by root */
    int64_t first;         /* id of the first message */
    int64_t last;          /* id of the last message */
    int64_t head;          /* the group's head when the page was built */
    bool more;             /* more messages follow */
    bool truncated;        /* retention deleted unacked messages */
    size_t count;          /* envelopes in messages */
    int64_t at_ms;         /* when it was received (harness_now_ms) */
} harness_page;

/* If m is a message on HARNESS_RESPONSE_TOPIC holding a replay page, fills *p
 * and returns true; returns false for a message on another topic. Fails the
 * test for a response that is not exactly one well-formed replay entry (an
 * error entry included). Free *p with harness_page_free. */
bool harness_page_parse(const harness_msg *m, harness_page *p);

/* Frees what *p owns. Accepts a zeroed page. */
void harness_page_free(harness_page *p);

/* Publishes a cumulative ack of id for group on chat/<group>/ack with qos;
 * for QoS 1/2 waits for the broker's acknowledgement. */
void harness_ack(harness_client *c, const char *group, int64_t id, int qos);

/* Called with every envelope a catch-up delivers, in order. */
typedef void harness_envelope_fn(void *arg, const char *group, const cJSON *envelope);

/* The expected catch-up of one group. */
typedef struct harness_catchup {
    const char *group; /* in: group name */
    int64_t from;      /* in: first id expected (the device's cursor + 1) */
    int64_t to;        /* in: last id expected, i.e. the head; < 0: learn it from the pages */
    int qos;           /* in: QoS every page must come with (the plugin's page_qos) */
    size_t pages;      /* out: pages received */
    size_t largest;    /* out: envelopes in the largest page */
    int64_t head;      /* out: head reported by the pages (to, if none came) */
    int64_t done_ms;   /* out: ts_now_ms() when its last page arrived (0: none) */
} harness_catchup;

/* Receives replay pages on c until every group got ids from..to, acking each
 * page's `last` on chat/<group>/ack as it arrives (QoS 0), and checks that
 * every id comes exactly once, in order, in pages of 1..page_size envelopes
 * whose first/last/head/more agree with their envelopes, and that every
 * envelope names its group and carries `from` and `ts`, and that every page
 * came with the group's qos. Calls fn (may be
 * NULL) with each envelope. Fails on a message on any other topic, and if
 * not done within timeout_ms. Then acks each group's head again at QoS 1 (so
 * the broker has applied every ack when this returns) and fails if the
 * plugin sent another page (see harness_barrier). */
void harness_catch_up(harness_client *c, harness_catchup *groups, size_t ngroups, size_t page_size,
                      int timeout_ms, harness_envelope_fn *fn, void *arg);

/* ---------------------------------------------------------------------------
 * Requests on $CONTROL/chat/v1 and their responses
 *
 * A response is the parsed {"responses":[...]} object, owned by the caller,
 * freed with cJSON_Delete. Waiting for one takes the oldest message on the
 * response topic that is not a replay page; replay pages and messages on
 * other topics stay queued for later receives.
 * ------------------------------------------------------------------------- */

/* Publishes request (a JSON text) to $CONTROL/chat/v1 at QoS 1, waits for
 * the PUBACK and returns the response, waiting at most timeout_ms; fails the
 * test if none comes or it is not exactly {"responses":[...]}. */
cJSON *harness_request(harness_client *c, const char *request, int timeout_ms);

/* The same for a request of len arbitrary bytes. */
cJSON *harness_request_bytes(harness_client *c, const void *request, size_t len, int timeout_ms);

/* Waits at most timeout_ms for the next response on HARNESS_RESPONSE_TOPIC
 * (e.g. the error entry of a refused publish); fails if none comes. */
cJSON *harness_client_response(harness_client *c, int timeout_ms);

/* The same on another topic (an MQTT 5 Response Topic); NULL means
 * HARNESS_RESPONSE_TOPIC. */
cJSON *harness_client_response_on(harness_client *c, const char *topic, int timeout_ms);

/* Sends the plugin an empty request ({"commands":[]}) at QoS 1 and waits for
 * its empty answer, which the plugin sends after every page and answer it
 * queued for c before (and, while c's device waits for its catch-up's turn
 * under replay_budget, once its turns have served it): those have then
 * arrived, since the broker delivers one client's messages of one QoS in
 * order and the plugin sends pages and answers at one QoS (page_qos). So a
 * test counts what the plugin sent, or finds that it sent nothing, without
 * waiting for time to pass. Live messages of other clients at that QoS that
 * the broker took before the request (their publisher's acknowledgement
 * came) have arrived too. The answer is consumed; everything else stays
 * queued. */
void harness_barrier(harness_client *c);

/* harness_barrier, then fails if any message is queued; what says what was
 * expected (for the message). */
void harness_expect_quiet(harness_client *c, const char *what);

/* Entries in a response. */
int harness_response_count(const cJSON *resp);

/* Entry i of a response, owned by resp; fails if there is none. */
const cJSON *harness_response_entry(const cJSON *resp, int i);

/* The one entry of a response; fails unless there is exactly one. */
const cJSON *harness_response_only(const cJSON *resp);

/* Fails unless entry is a success entry (no "error") of command, and, if
 * group is not NULL, names group. */
void harness_expect_ok(const cJSON *entry, const char *command, const char *group);

/* Fails unless entry is exactly {"command":command, "group":group,
 * "cid":cid, "error":error}, with no group (cid) field when group (cid) is
 * NULL, and nothing else. */
void harness_expect_error(const cJSON *entry, const char *command, const char *group,
                          const char *cid, const char *error);

/* Waits (at most timeout_ms) for the plugin's answer to a retry by c: fails
 * unless it is exactly {"command":"publish","group":group,"cid":cid,
 * "id":id,"duplicate":true} (issue 25, item 7). */
void harness_expect_duplicate(harness_client *c, const char *group, const char *cid, int64_t id,
                              int timeout_ms);

/* Checks, as member c, that the store serves every message of group: fetch
 * pages from after=0 return ids 1..head each once in order, history pages
 * from the head return head..1, and every page reports head. Fails
 * otherwise. */
void harness_expect_store(harness_client *c, const char *group, int64_t head);

/* The same after retention: the store serves ids first..head of group, and
 * says "truncated" where it should (first > 1): on the fetch page after 0 and
 * on the last history page. */
void harness_expect_store_from(harness_client *c, const char *group, int64_t first, int64_t head);

/* Looks up group in a sync entry ({"command":"sync","groups":[...]}),
 * checking the entry's shape and that unread = head - max(acked, read).
 * Returns whether the group is listed, with its numbers in *head, *acked, *unread
 * (each may be NULL). */
bool harness_sync_find(const cJSON *entry, const char *group, int64_t *head, int64_t *acked,
                       int64_t *unread);

#endif
