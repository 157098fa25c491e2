/* integ_bad: the fixture of the bad-input tests of issue 3
 * (integ_bad_requests.c, integ_bad_publish.c): every bad input gets a clear
 * error and loses nothing. One ctest per kind of bad input (argv[1]); each
 * runs a table of named variants against one broker. For every variant:
 *
 *   - the client that sent it gets exactly the error entries docs/protocol.md
 *     lists, on $CONTROL/chat/v1/response (an MQTT 5 publisher also reason
 *     0x87 in its PUBACK/PUBREC, an MQTT 5 subscriber 0x87 in its SUBACK, an
 *     MQTT 3.1.1 subscriber 0x80);
 *   - it stays connected: its next request is answered, and nothing else
 *     came before that answer;
 *   - another client carries on: a message published meanwhile reaches a
 *     subscriber of the group, with the next id (so the bad input stored and
 *     delivered nothing);
 *   - the store still serves every earlier message: a member fetches ids
 *     1..head and pages back through head..1.
 *
 * argv[2], if given, runs only the variant of that name (for diagnosis);
 * "--list" prints the names of the case's variants. */
#ifndef CHAT_INTEG_BAD_H
#define CHAT_INTEG_BAD_H

#include "harness.h"

#define GROUP "room1"
#define TOPIC "chat/" GROUP
#define WAIT_MS 5000      /* every answer must come within this */
#define MAX_PAYLOAD 65536 /* plugin_opt_max_payload default */
#define SYNC_ONLY "{\"commands\":[{\"command\":\"sync\",\"replay\":false}]}"

/* Error strings of docs/protocol.md. */
#define E_MALFORMED "malformed JSON"
#define E_NOT_UTF8_OBJECT "request must be a UTF-8 JSON object"
#define E_NOT_OBJECT "request must be a JSON object"
#define E_COMMANDS_MISSING "commands is missing"
#define E_COMMANDS_ARRAY "commands must be an array"
#define E_EACH_OBJECT "each command must be a JSON object"
#define E_COMMAND_MISSING "command is missing"
#define E_COMMAND_STRING "command must be a string"
#define E_UNKNOWN "unknown command"
#define E_GROUP_MISSING "group is missing"
#define E_GROUP_STRING "group must be a string"
#define E_GROUP_EMPTY "group name is empty"
#define E_GROUP_LONG "group name is longer than 128 bytes"
#define E_GROUP_CONTROL "group name contains a control character"
#define E_GROUP_CHARS "group name contains one of / + # $"
#define E_ID_MISSING "id is missing"
#define E_REPLAY "replay must be true or false"
#define E_MEMBER "member must be a non-empty string of at most 1024 bytes"
#define E_TOO_LARGE "payload is larger than max_payload"
#define E_NEITHER "payload is neither a JSON object nor UTF-8 text"
#define E_CID "cid must be a string of 1 to 64 bytes"
#define E_NOT_MEMBER "not a member of the group"
#define E_NO_USERNAME "closed groups admit only clients with a username the broker verifies"
#define E_NOT_CHAT_TOPIC                                                                           \
    "not a chat topic: publish to chat/<group>, chat/<group>/ack or chat/<group>/read"
#define E_ACK "ack payload must be a decimal message id"
#define E_ONLY_ADMIN_OTHER "only an admin may add or remove another member"
#define E_ONLY_ADMIN_CLOSED "only an admin may change membership of closed groups"
#define E_TOO_MANY "too many commands in one request (at most 1000)"
#define E_RESPONSE_TOO_LARGE "response too large: send fewer fetch or history commands per request"

/* Who sends a variant's bad input. */
enum actor { BOB, BOB5, EVE, EVE5, ANON, ACTORS };

enum kind { REQUEST, PUBLISH, SUBSCRIBE };

/* One expected response entry: error NULL means a success entry. */
typedef struct expect {
    const char *command;
    const char *group;
    const char *cid;
    const char *error;
} expect;

typedef struct variant {
    const char *name;
    enum actor who;
    enum kind kind;
    const char *topic;     /* PUBLISH: the topic; SUBSCRIBE: the filter */
    const char *payload;   /* REQUEST, PUBLISH: the payload */
    size_t len;            /* its bytes; 0: strlen(payload) */
    int qos;               /* PUBLISH: QoS 1 or 2 (0 counts as 1) */
    expect e[4];           /* the entries expected, in order */
    const char *maybe_cid; /* an invalid cid the first entry may echo or leave out */
    int n;                 /* how many */
} variant;

typedef struct fixture {
    ts_broker *b;
    harness_client *c[ACTORS]; /* the senders of bad input (NULL: not in this case) */
    harness_client *alice;     /* member: publishes a message after each variant */
    harness_client *carol;     /* member subscribed to chat/room1: must receive it */
    harness_client *admin;     /* closed groups: the admin */
    bool closed;               /* open_groups false */
    int64_t head;              /* messages stored in room1 */
    int sent;                  /* messages alice sent */
    const char *only;          /* run only this variant */
    int ran;                   /* variants run */
} fixture;

/* harness_msg_pred: m is on chat/room1. */
bool bad_on_room(const harness_msg *m, void *arg);

/* Carol must receive the envelope id with body on chat/room1 next. */
void bad_carol_expects(fixture *fx, int64_t id, const char *body);

/* Alice sends one message; carol must get it as the next id. */
void bad_alice_sends(fixture *fx, const char *label);

/* Starts the broker with opts and the clients; closed: open_groups false,
 * where admin adds the members. */
void bad_setup(fixture *fx, const char *const *opts, bool closed, bool with_eve);

/* Disconnects every client and destroys the broker. */
void bad_teardown(fixture *fx);

/* After a variant: the sender is still connected and answered, with
 * nothing before the answer; another client carries on; the store serves
 * every earlier message. */
void bad_carry_on(fixture *fx, enum actor who, const char *name);

/* Whether the variant name runs (argv[2] selects one); with "--list" prints
 * it instead. Counts the variants run. */
bool bad_selected(fixture *fx, const char *name);

/* Fails unless resp holds exactly the entries v expects. */
void bad_check_entries(const variant *v, const cJSON *resp);

/* Sends v's bad input as its actor, checks the answer (and an MQTT 5
 * reason code) and that everything carries on (bad_carry_on). */
void bad_run(fixture *fx, const variant *v);

/* Shorthands for the common shapes. */
void bad_request_error(fixture *fx, const char *name, const char *request, const char *command,
                       const char *group, const char *error);

void bad_request_bytes_error(fixture *fx, const char *name, const char *bytes, size_t len,
                             const char *error);

void bad_publish_error(fixture *fx, const char *name, enum actor who, const char *topic,
                       const char *payload, size_t len, int qos, expect e);

/* A publish with an invalid cid: the entry may echo it as sent, or not. */
void bad_publish_bad_cid(fixture *fx, const char *name, enum actor who, const char *payload,
                         int qos, const char *cid);

void bad_subscribe_error(fixture *fx, const char *name, enum actor who, const char *filter,
                         expect e);

/* n copies of ch and a NUL, freed by the caller with free(). */
char *bad_repeat(char ch, size_t n);

/* One kind of bad input: its variants, run by fn against the fixture. */
typedef struct bad_case {
    const char *name;
    void (*fn)(fixture *fx);
    bool closed; /* open_groups false, and eve (not a member) connected */
} bad_case;

/* The main of a bad-input program: runs the case argv[1] names (see the top
 * of this header); returns main's status. */
int bad_main(int argc, char **argv, const bad_case *cases, size_t count);

#endif
