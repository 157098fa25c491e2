/* chat_client: the client library of mosquitto-chat, on Paho MQTT C's
 * asynchronous API (MQTTAsync).
 *
 * Purpose: an application creates one chat_client per device (one MQTT client
 * id), names the groups it listens to and connects. The library reconnects
 * by itself and, after every connect, resubscribes and sends `sync`, so the
 * plugin's catch-up happens without the application's help. Every message of
 * a listened group reaches on_message exactly once per id and in id order
 * per group, whether it came live, in a replay page or by a fetch the
 * library sent to fill a gap; live messages that arrive ahead of a gap wait
 * until it is filled. The library acks the highest gap-free id per group (at
 * the end of each page, else every ack_every messages or ack_interval_ms)
 * and records the last id shown per group in a small state file, so an
 * application that restarts shows nothing twice. chat_client_send gives each
 * message a fresh `cid` and keeps it until the broker acknowledged it,
 * resending after a reconnect (the plugin drops the duplicate).
 * chat_client_read marks a group read up to an id for the member (on all
 * its devices), coalesced like acks, and the read markers and presence the
 * plugin pushes for listened groups come as events (protocol v1.1).
 * Recalls and edits (v1.2) are applied to what the library hands over and
 * reported to an optional callback (chat_client_set_change). fetch,
 * history, unread, join, leave, recall, edit, receipts and presence are
 * plain blocking calls with results; chat_client_request sends any other
 * command (the admin commands).
 * Both MQTT 3.1.1 and MQTT 5 work; docs/client.md has a complete example.
 *
 * Conventions: functions that can fail return a chat_client_err and put
 * results through pointer parameters; after an error chat_client_reason()
 * tells the calling thread why (the plugin's error text, Paho's, or the
 * system's). Group names follow the protocol (1..128 bytes of UTF-8 without
 * / + # $ or control characters); chat_client_group_error says what is wrong
 * with one. Ids are the plugin's per-group message ids (1, 2, 3 ...).
 *
 * Ownership: chat_client_create/chat_client_destroy are a pair; the options
 * are copied, so the caller's strings may go after create. Results of
 * fetch/history (chat_client_page) and unread (chat_client_group_status) are
 * heap memory of the caller, freed with chat_client_page_free and
 * chat_client_unread_free, and chat_client_request's answer with
 * chat_client_free. A chat_client_message or chat_client_event handed
 * to a callback, and every string in it, lives only during that call.
 *
 * Threading: every function may be called from any thread, concurrently.
 * The library runs one thread of its own (the dispatcher) besides Paho's:
 * Paho's callbacks only queue what they got, so neither the application nor
 * the state file ever blocks Paho's thread. on_message and on_event run on
 * the dispatcher, one at a time; they may call chat_client_send,
 * chat_client_send_json, chat_client_listen and chat_client_read, but not
 * the blocking calls (connect, flush, disconnect, fetch, history, unread,
 * join, leave, recall, edit, receipts, presence, request), which
 * return CHAT_CLIENT_ERR_INVAL there rather than deadlock. A slow callback
 * delays later messages, never the connection. chat_client_destroy must not
 * be called from a callback, nor while another thread is inside a call on
 * the same client.
 */
#ifndef CHAT_CLIENT_H
#define CHAT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------- */

typedef enum chat_client_err {
    CHAT_CLIENT_OK = 0,
    CHAT_CLIENT_ERR_INVAL,    /* bad argument, bad group name, or a call not allowed here */
    CHAT_CLIENT_ERR_NOMEM,    /* out of memory */
    CHAT_CLIENT_ERR_CONNECT,  /* the broker could not be reached */
    CHAT_CLIENT_ERR_TIMEOUT,  /* no answer in time (the client keeps trying to connect) */
    CHAT_CLIENT_ERR_REFUSED,  /* the plugin answered with an error entry, or the broker
                                 refused the connection (CONNACK: credentials, authorisation) */
    CHAT_CLIENT_ERR_PROTOCOL, /* the plugin's answer did not follow the protocol */
    CHAT_CLIENT_ERR_STATE,    /* the state file cannot be read, written or locked */
    CHAT_CLIENT_ERR_FULL,     /* the outbox holds max_outbox unacknowledged messages */
    CHAT_CLIENT_ERR_MQTT,     /* Paho refused an operation */
    CHAT_CLIENT_ERR_CLOSED,   /* the client was disconnected with chat_client_disconnect */
    CHAT_CLIENT_ERR_IN_USE    /* another client (process) holds the state file: the device is
                                 in use */
} chat_client_err;

/* A static English description of err. */
const char *chat_client_strerror(chat_client_err err);

/* Why the last failed call of this thread failed: the plugin's error text
 * (CHAT_CLIENT_ERR_REFUSED), Paho's message, the system's, or the bad
 * argument. Thread-local storage, valid until the thread's next call into the
 * library; "" if there is nothing to add. */
const char *chat_client_reason(void);

/* NULL if group is a valid group name, else a static reason (the plugin's
 * wording). */
const char *chat_client_group_error(const char *group);

/* ---------------------------------------------------------------------------
 * Messages and events
 * ------------------------------------------------------------------------- */

/* One stored message (an envelope). The strings point into memory owned by
 * whoever hands the message over: the library during on_message, the page in
 * a chat_client_page. */
typedef struct chat_client_message {
    const char *group; /* the group, never NULL */
    uint64_t id;       /* the plugin's id, 1, 2, 3 ... */
    const char *from;  /* the member who sent it ("" if the envelope lacks it) */
    int64_t ts;        /* milliseconds since the epoch, set by the plugin */
    const char *body;  /* the "body" field if it is a string, else NULL */
    const char *cid;   /* the sender's client message id, or NULL */
    const char *json;  /* the whole envelope as compact JSON, NUL-terminated: its
                          text as the plugin sent it, blanks between tokens left
                          out (string escapes stay as sent) */
    /* Recall and edit (protocol v1.2). A message either is one that was
     * changed (its current version: recalled or edited) or carries a change
     * of an earlier one (recall or edit set), or neither. */
    uint64_t recall; /* this message recalls message `recall` of the group; 0: it does not */
    uint64_t edit;   /* this message edits message `edit`: its fields are the new ones; 0:
                        it does not */
    bool recalled;   /* this message was recalled: what is left is its tombstone (id, group,
                        from, ts), body NULL */
    int64_t edited;  /* this message was edited, last at this time (ms); 0: never */
} chat_client_message;

/* Called exactly once per id of every listened group, in id order per group,
 * on the dispatcher thread. Return true once the message is handled: the id
 * is then recorded as shown (the state file written) and acked in time.
 * Return false when the application cannot take it (its output failed, it
 * wants no more): delivery halts for good on this client, this message and
 * every later one staying unshown and unacked, so that a new client (after a
 * restart) starts with it. */
typedef bool chat_client_message_fn(void *arg, const chat_client_message *m);

typedef enum chat_client_event_type {
    CHAT_CLIENT_EV_CONNECTED,      /* connected (again); subscriptions and sync follow */
    CHAT_CLIENT_EV_DISCONNECTED,   /* the connection was lost (reason, code); the library
                                      reconnects */
    CHAT_CLIENT_EV_CATCHUP,        /* a replay page or gap fetch of group was applied */
    CHAT_CLIENT_EV_SEND_REFUSED,   /* the plugin refused message cid in group: reason */
    CHAT_CLIENT_EV_LISTEN_REFUSED, /* the plugin refused the subscription to group: reason */
    CHAT_CLIENT_EV_TRUNCATED,      /* retention removed ids of group before id: skipped */
    CHAT_CLIENT_EV_ERROR,          /* something the application should log: reason */
    CHAT_CLIENT_EV_READ,           /* member has read group up to id (a pushed read marker) */
    CHAT_CLIENT_EV_PRESENCE,       /* member came online in group (online) or went offline */
    CHAT_CLIENT_EV_PUSH_DROPPED    /* the plugin dropped this device's push registration:
                                      reason (its endpoint answered 404/410, or a Matrix
                                      gateway rejected the pushkey); register again */
} chat_client_event_type;

/* What happened; fields that do not apply are NULL or 0. */
typedef struct chat_client_event {
    chat_client_event_type type;
    const char *group;  /* CATCHUP, SEND_REFUSED, LISTEN_REFUSED, TRUNCATED, READ, PRESENCE,
                           maybe ERROR */
    const char *cid;    /* SEND_REFUSED */
    const char *reason; /* SEND_REFUSED, LISTEN_REFUSED, ERROR, PUSH_DROPPED; DISCONNECTED:
                           the broker's reason (MQTT 5) or Paho's, if any */
    uint64_t id;        /* CATCHUP: last id shown; TRUNCATED: the oldest id still kept;
                           READ: the member's read marker */
    uint64_t head;      /* CATCHUP: the group's head; caught up when id == head */
    uint64_t pages;     /* CATCHUP: pages and fetches applied in this catch-up so far */
    uint64_t messages;  /* CATCHUP: messages shown in this catch-up so far */
    int code;           /* DISCONNECTED: the reason code of the broker's DISCONNECT packet
                           (MQTT 5 only; 0x8E: another client connected with the same client
                           id), 0 when the connection just ended, as it always does with
                           MQTT 3.1.1 and with Mosquitto before 2.0.15 on a takeover */
    const char *member; /* READ, PRESENCE: whom it is about */
    bool online;        /* PRESENCE: came online (true) or went offline */
} chat_client_event;

/* Called on the dispatcher thread for each event. */
typedef void chat_client_event_fn(void *arg, const chat_client_event *ev);

/* Recall and edit (protocol v1.2): a change of a message already sent. A
 * change is itself a message of the group, M, with the next id, that
 * recalls or edits an earlier message N; N's stored copy is then its new
 * version. The library hands the application every id in order as ever,
 * and:
 *   - calls on_change (chat_client_set_change) with the change just before
 *     it hands M to on_message (whose recall or edit field names N), so that
 *     an application updates what it shows of N; N always came first, or
 *     lies before where this device's delivery began, or was removed by
 *     retention: an application that does not hold N ignores the change;
 *   - applies a change to N when N has not reached on_message yet (held
 *     behind a gap when M arrives): on_message then gets N's new version;
 *   - never applies a change to a recalled N, nor an edit to an N whose
 *     `edited` is later than the edit's time: a catch-up brings N's latest
 *     version, then the older changes that led to it. An application that
 *     holds N applies the same rule (on_change's ts against the `edited`
 *     of the N it holds), as docs/client.md shows.
 * A message in a fetch or history page is its current version already. */
typedef enum chat_client_change_type {
    CHAT_CLIENT_RECALLED = 1, /* N was recalled: show it as gone ("Message recalled") */
    CHAT_CLIENT_EDITED        /* N was edited: show its new fields */
} chat_client_change_type;

typedef struct chat_client_change {
    chat_client_change_type type;
    const char *group;  /* the group */
    uint64_t id;        /* N, the message changed */
    uint64_t by;        /* M, the message that carries the change */
    const char *member; /* who changed it: N's sender, or (a recall) an admin */
    int64_t ts;         /* when (M's ts; an edit's "edited") */
    const char *body;   /* EDITED: N's new body if a string, else NULL */
    const char *json;   /* M's envelope; EDITED: its fields but id, group, from, ts and edit
                           are N's new ones */
} chat_client_change;

/* Called on the dispatcher thread, in id order with on_message, as above;
 * the change and its strings live only during the call. Like on_message,
 * it may be called again for the same change when the process restarts
 * before M was recorded as shown. */
typedef void chat_client_change_fn(void *arg, const chat_client_change *ch);

/* Called on the dispatcher thread, with the options' arg, just before the
 * library records ids as shown in the state file (which comes before their
 * ack): an application that buffers what on_message handed it (stdio, a
 * database batch) makes it durable here, so that the state file never
 * claims what a crash would lose. Return false when that failed: nothing is
 * recorded or acked, and the library calls it again later. */
typedef bool chat_client_commit_fn(void *arg);

/* ---------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------- */

/* Start from chat_client_options o = {0}: every zero or NULL field takes the
 * default named here. */
typedef struct chat_client_options {
    const char *host;                   /* broker host name or address; "127.0.0.1" */
    int port;                           /* broker port; 1883 */
    const char *client_id;              /* required: the MQTT client id, i.e. the device */
    const char *username;               /* MQTT username, or NULL; it is the member name if set */
    const char *password;               /* MQTT password, or NULL */
    int mqtt_version;                   /* 4 (MQTT 3.1.1, the default) or 5 */
    int keepalive_s;                    /* MQTT keep-alive in seconds; 30 */
    int reconnect_max_s;                /* longest pause between reconnect attempts; 16 */
    const char *topic_prefix;           /* the plugin's topic_prefix; "chat" */
    const char *state_path;             /* state file (last id shown per group); NULL: none */
    int send_qos;                       /* QoS of chat_client_send: 1 or 2; 1 */
    int listen_qos;                     /* QoS of the group subscriptions: 1 or 2; 1 */
    size_t ack_every;                   /* ack after this many messages shown; 100 */
    int ack_interval_ms;                /* ... or this long after the first unacked one; 1000 */
    int gap_timeout_ms;                 /* fetch a gap that no replay filled after this; 3000 */
    int request_timeout_ms;             /* default deadline of blocking calls; 10000 */
    size_t max_outbox;                  /* unacknowledged sends held at most; 10000 */
    size_t max_held;                    /* messages held ahead of gaps, per group; 100000 */
    chat_client_message_fn *on_message; /* may be NULL (a sender only) */
    chat_client_event_fn *on_event;     /* may be NULL */
    void *arg;                          /* passed to both callbacks */
} chat_client_options;

/* ---------------------------------------------------------------------------
 * Lifecycle
 * ------------------------------------------------------------------------- */

typedef struct chat_client chat_client;

/* Creates a client: copies opts, opens and locks the state file (created on
 * the first message shown) and starts the dispatcher thread, without
 * connecting. Returns CHAT_CLIENT_ERR_INVAL for bad options, _IN_USE if
 * another process holds the state file (it runs this device already), _STATE
 * if the state file cannot be read, _MQTT if Paho refuses. On success *out is the client, freed
 * with chat_client_destroy. */
chat_client_err chat_client_create(const chat_client_options *opts, chat_client **out);

/* Sets the commit hook (chat_client_commit_fn; NULL: none). Call it after
 * chat_client_create and before chat_client_listen and chat_client_connect:
 * the dispatcher reads it without a lock. Returns CHAT_CLIENT_ERR_INVAL when
 * c is NULL. */
chat_client_err chat_client_set_commit(chat_client *c, chat_client_commit_fn *fn);

/* Sets the change hook (chat_client_change_fn; NULL: none), called with
 * the options' arg. Call it as chat_client_set_commit, after create and
 * before listen and connect. Returns CHAT_CLIENT_ERR_INVAL when c is NULL. */
chat_client_err chat_client_set_change(chat_client *c, chat_client_change_fn *fn);

/* Disconnects if connected (as chat_client_disconnect with a short
 * deadline), stops the dispatcher and frees c. Messages still in the outbox
 * are dropped: call chat_client_flush first. Accepts NULL. Never from a
 * callback. */
void chat_client_destroy(chat_client *c);

/* Connects and waits until connected, at most timeout_ms (<= 0: the
 * request_timeout_ms option). Returns CHAT_CLIENT_ERR_CONNECT if the first
 * attempt failed (the broker cannot be reached; chat_client_reason says
 * why), _REFUSED if the broker refused it (CONNACK: bad credentials, not
 * authorised), and _TIMEOUT if none finished in time; in every case the
 * client keeps trying in the background, pausing between attempts (from
 * 250 ms, doubling up to reconnect_max_s), until chat_client_disconnect or
 * chat_client_destroy: CHAT_CLIENT_EV_CONNECTED reports success, and
 * CHAT_CLIENT_EV_ERROR each refusal by the broker. Calling it again waits
 * again (and tries at once if no attempt is under way). Once connected it
 * reconnects for ever. The client id must be unique on the broker: a second
 * connection with the same id takes over, and the broker disconnects the
 * first (see chat_client_event's code). */
chat_client_err chat_client_connect(chat_client *c, int timeout_ms);

/* Sends pending acks, waits (at most timeout_ms) for the broker to take them
 * and disconnects; no reconnect follows. Unsent messages stay in the outbox
 * and go out on the next chat_client_connect. */
chat_client_err chat_client_disconnect(chat_client *c, int timeout_ms);

/* ---------------------------------------------------------------------------
 * Listening and sending
 * ------------------------------------------------------------------------- */

/* Listens to group from now on: subscribes (now if connected, else at the
 * next connect) and delivers its messages to on_message. The first time a
 * group is seen (no state file entry) delivery starts after the device's
 * cursor as the plugin reports it; older messages stay reachable with
 * chat_client_history. Listening to a group twice is a no-op. Non-blocking;
 * callable from callbacks. */
chat_client_err chat_client_listen(chat_client *c, const char *group);

/* Queues the text message body (UTF-8) for group, as {"body": body, "cid":
 * <fresh cid>}, and returns at once; the library publishes it at send_qos
 * when connected and keeps it until the broker acknowledged it. If cid is
 * not NULL, the cid chosen is copied there (cid_size >= 65 holds any).
 * Returns CHAT_CLIENT_ERR_FULL when max_outbox messages wait. A refusal by
 * the plugin comes later as CHAT_CLIENT_EV_SEND_REFUSED and is counted by
 * chat_client_flush. Callable from callbacks. */
chat_client_err chat_client_send(chat_client *c, const char *group, const char *body, char *cid,
                                 size_t cid_size);

/* The same for a JSON object text (its fields are kept). A string "cid"
 * field in it is kept (so an application can retry across restarts without
 * duplicates); otherwise a fresh one is added. */
chat_client_err chat_client_send_json(chat_client *c, const char *group, const char *json,
                                      char *cid, size_t cid_size);

/* Marks group as read up to id by this member (over all its devices:
 * the plugin keeps one read marker per member, which only moves forward),
 * and acks this device up to id. Non-blocking and coalesced like acks: the
 * highest id asked for goes out on <prefix>/<group>/read at once, then at
 * most every ack_interval_ms, and before a disconnect. For a listened group
 * nothing beyond the last id shown goes out (it waits until shown), so the
 * device's cursor never passes what the application saw. Callable from
 * callbacks. */
chat_client_err chat_client_read(chat_client *c, const char *group, uint64_t id);

/* Waits until every message sent so far was acknowledged by the broker and
 * the plugin has answered a request sent after them, at most timeout_ms (<=
 * 0: request_timeout_ms). *refused (may be NULL) gets the number of messages
 * the plugin refused since the previous flush (MQTT 5: PUBACK reason codes;
 * MQTT 3.1.1: the plugin's error entries); each refusal is also reported as
 * CHAT_CLIENT_EV_SEND_REFUSED with the plugin's reason (with MQTT 5, unless
 * the connection broke before the error entry came). */
chat_client_err chat_client_flush(chat_client *c, int timeout_ms, size_t *refused);

/* ---------------------------------------------------------------------------
 * Requests: blocking, at most request_timeout_ms; not from callbacks
 * ------------------------------------------------------------------------- */

/* Messages of one fetch or history answer. */
typedef struct chat_client_page {
    chat_client_message *messages; /* fetch: oldest first; history: newest first */
    size_t count;
    uint64_t head;  /* the group's head when the plugin answered */
    bool more;      /* fetch: messages follow; history: older ones exist */
    bool truncated; /* retention removed messages in the range asked for */
    void *priv;     /* the memory behind the strings; private */
} chat_client_page;

/* Frees a page and everything its messages point to. Accepts NULL. */
void chat_client_page_free(chat_client_page *p);

/* Fetches up to limit (0: the plugin's page_size) messages of group with ids
 * above after, oldest first. Messages of a listened group also reach
 * on_message if they are the next ones due. *out is freed with
 * chat_client_page_free. */
chat_client_err chat_client_fetch(chat_client *c, const char *group, uint64_t after, size_t limit,
                                  chat_client_page **out);

/* Fetches up to limit (0: the plugin's page_size) messages of group with ids
 * below before (0: the newest), newest first. *out is freed with
 * chat_client_page_free. */
chat_client_err chat_client_history(chat_client *c, const char *group, uint64_t before,
                                    size_t limit, chat_client_page **out);

/* One group of the member, as `sync` reports it for this device. */
typedef struct chat_client_group_status {
    char *group;
    uint64_t head;   /* highest id */
    uint64_t acked;  /* this device's cursor */
    uint64_t unread; /* head - acked */
} chat_client_group_status;

/* Lists every group of the member with its unread count for this device (a
 * `sync` without replay). *list (an array of *count entries, NULL when none)
 * is freed with chat_client_unread_free. */
chat_client_err chat_client_unread(chat_client *c, chat_client_group_status **list, size_t *count);

/* Frees what chat_client_unread returned. Accepts NULL. */
void chat_client_unread_free(chat_client_group_status *list, size_t count);

/* Joins group (or, for an admin, adds member; NULL: oneself). Joining a
 * group the member is in already changes nothing. *head (may be NULL) gets
 * the group's head when the plugin answered (its highest id, 0 for an empty
 * group); for a new member, that is also where its cursor starts. */
chat_client_err chat_client_join(chat_client *c, const char *group, const char *member,
                                 uint64_t *head);

/* Leaves group (or, for an admin, removes member; NULL: oneself). */
chat_client_err chat_client_leave(chat_client *c, const char *group, const char *member);

/* Recalls message id of group (protocol v1.2): the sender within the
 * plugin's recall_seconds, an admin at any time. *by (may be NULL) gets the
 * id of the message that carries the recall. A refusal is
 * CHAT_CLIENT_ERR_REFUSED with the plugin's reason (`too late to recall`,
 * `only its sender may recall this message`, `already recalled`, `no such
 * message` ...). */
chat_client_err chat_client_recall(chat_client *c, const char *group, uint64_t id, uint64_t *by);

/* Edits message id of group: its fields become body (UTF-8 text) and, when
 * fields_json is not NULL, the fields of that JSON object (its own "body",
 * if any, giving way to body), as the sender within the plugin's
 * edit_seconds. *by as for chat_client_recall. */
chat_client_err chat_client_edit(chat_client *c, const char *group, uint64_t id, const char *body,
                                 const char *fields_json, uint64_t *by);

/* One member's read marker. */
typedef struct chat_client_read_marker {
    char *member;
    uint64_t id; /* the highest id it has read, 0: nothing yet */
} chat_client_read_marker;

/* Every member of group (members only may ask) with its read marker, in
 * byte order of the names, and the member count in *members (may be NULL):
 * "read by k of n" for message N is the number of markers >= N, of n. The
 * library asks page after page. *list (an array of *count entries, NULL
 * when none) is freed with chat_client_receipts_free. */
chat_client_err chat_client_receipts(chat_client *c, const char *group,
                                     chat_client_read_marker **list, size_t *count,
                                     uint64_t *members);

/* Frees what chat_client_receipts returned. Accepts NULL. */
void chat_client_receipts_free(chat_client_read_marker *list, size_t count);

/* Who of group is online now (members only may ask): the names, in byte
 * order, and the member count in *members (may be NULL). *online (an
 * array of *count strings, NULL when none) is freed with
 * chat_client_presence_free. Changes after it come as
 * CHAT_CLIENT_EV_PRESENCE for listened groups. */
chat_client_err chat_client_presence(chat_client *c, const char *group, char ***online,
                                     size_t *count, uint64_t *members);

/* Frees what chat_client_presence returned. Accepts NULL. */
void chat_client_presence_free(char **online, size_t count);

/* ---------------------------------------------------------------------------
 * Push notifications (protocol v1.2): waking this device while it has no
 * connection
 * ------------------------------------------------------------------------- */

/* Where this device (the client id) is woken; the fields of its kind are
 * required, the others NULL. The plugin keeps one registration per device
 * (a new one replaces it) and only within the operator's push_allow. */
typedef struct chat_client_push {
    const char *kind;     /* "unifiedpush", "matrix" or "webhook" */
    const char *endpoint; /* unifiedpush: the distributor's endpoint URL */
    const char *p256dh;   /* unifiedpush, optional: the device's P-256 public key and ... */
    const char *auth;     /* ... auth secret (base64url): the content is then encrypted
                             (RFC 8291) for this device alone */
    const char *url;      /* matrix: the push gateway's notify URL (e.g. Sygnal's
                             https://.../_matrix/push/v1/notify) */
    const char *app_id;   /* matrix: the app id the gateway knows (at most 64 bytes) */
    const char *pushkey;  /* matrix: the device's token (FCM token, APNs device token) */
    const char *name;     /* webhook: one of the operator's push_webhooks */
} chat_client_push;

/* Registers this device for push notifications. The plugin asks a
 * UnifiedPush endpoint whether it is a push server before it answers (up
 * to 5 s). Refusals are CHAT_CLIENT_ERR_REFUSED with the plugin's reason:
 * "push is not enabled", "endpoint not allowed", "endpoint did not answer
 * as a push server", "bad push registration: <why>" (e.g. join a group
 * first). Register again after every CHAT_CLIENT_EV_PUSH_DROPPED, and
 * whenever the distributor or the push token gives a new endpoint. */
chat_client_err chat_client_push_register(chat_client *c, const chat_client_push *reg);

/* Removes this device's registration (nothing to remove is not an error). */
chat_client_err chat_client_push_remove(chat_client *c);

/* This device's registration: *registered, and (answer_json not NULL) the
 * plugin's entry as compact JSON ({"command":"push","kind",...,
 * "registered"}: the endpoint or url, app_id, pushkey or name as
 * registered, never the keys), freed with chat_client_free. */
chat_client_err chat_client_push_status(chat_client *c, bool *registered, char **answer_json);

/* Sends any one command of the protocol (docs/protocol.md, "Requests") and
 * waits for its entry: the admin commands (groups, members, stats, delete,
 * compact, backup) and any the plugin learns later. command_json is one
 * JSON object with a string "command" of at most 40 bytes and no
 * "correlationData" (the library sets its own), e.g.
 * {"command":"members","group":"room1"}. On CHAT_CLIENT_OK *answer_json is
 * the plugin's entry for it as compact JSON, without the library's
 * correlationData: heap memory freed with chat_client_free. An error entry
 * is CHAT_CLIENT_ERR_REFUSED with its "error" in chat_client_reason (an
 * admin command from a non-admin: "only an admin may <command>"); a command
 * that is not an object of that shape is CHAT_CLIENT_ERR_INVAL. */
chat_client_err chat_client_request(chat_client *c, const char *command_json, char **answer_json);

/* Frees memory the library handed over (chat_client_request's answer).
 * Accepts NULL. */
void chat_client_free(void *p);

#endif
