/* access.h: the plugin's one access policy, and what it rests on. Three
 * files, each calling only those after it:
 *   access.c   who a client is (its identity) and the one decision: may
 *              this client do this action to this group, and why not
 *              (chat_access_decide); every part of the plugin asks it
 *   verdict.c  the broker's read verdict: would the broker's own access
 *              checks let a client read <prefix>/<group> live? Asked of the
 *              broker where it can be, worked out from its configuration
 *              where it cannot, remembered per device
 *   broker.c   what the broker is: its version, its listeners and the
 *              access checkers each listener's clients meet (broker_conf.c),
 *              which listener a client came through
 *
 * Why one decision: who may read a group was decided in eight files;
 * a rule re-derived in one of them drifts from the others. A caller asks
 * chat_access_decide with the action it is about to do and acts on the
 * answer, never on part of it.
 *
 * The rules (docs/protocol.md "Membership and access" says the same for
 * users):
 *   alone:      no other access checker follows mosquitto-chat for the
 *               client's listener (and plugin_opt_acl is not defer): its
 *               answer is the broker's, so the broker's read verdict is
 *               "allowed" for every member.
 *   behind:     another checker follows: an answer "allowed" on a chat topic
 *               defers to it; what the plugin serves itself (history,
 *               lists, presence, catch-up) needs the broker's read verdict
 *               (verdict.c); unknown fails closed, unless plugin_opt_read_check
 *               members.
 *   identity:   a member is its username, else its client id ("~<id>"
 *               where usernames are verified, so that no client id passes
 *               for a user). Closed groups and admin rights need a username
 *               the broker verified for the client's listener.
 *
 * Threading: the broker's thread only (a 2.1 http_api listener may call
 * the access check from its own thread: broker.c answers that without
 * touching any state).
 */
#ifndef CHAT_ACCESS_H
#define CHAT_ACCESS_H

#include "plugin.h"

/* ===========================================================================
 * broker.c: the broker this plugin runs in
 * ========================================================================= */

struct chat_broker_conf;

/* Reads the broker's configuration, finds what the broker exports, and
 * keeps it; false when out of memory. chat_broker_free frees it. */
bool chat_broker_init(struct chat_plugin *pl);
void chat_broker_free(struct chat_plugin *pl);

/* NULL, or why mosquitto-chat must not run in this broker (another checker
 * asked before it, a listener without it, an unreadable configuration with
 * another plugin loaded), as one sentence saying what to change, in buf. */
const char *chat_broker_check(struct chat_plugin *pl, char *buf, size_t len);

/* The client disconnected: the listener remembered for it goes. */
void chat_broker_forget_client(struct chat_plugin *pl, const char *client_id);

/* Whether the caller runs on the broker's own thread (a 2.1 http_api
 * listener asks access checks from its own). */
bool chat_broker_on_thread(const struct chat_plugin *pl);

/* The broker's sys_interval (10 unless set; 0: no $SYS), and whether it
 * runs with per_listener_settings true. */
int chat_broker_sys_interval(const struct chat_plugin *pl);
bool chat_broker_per_listener(const struct chat_plugin *pl);

/* The listener that the k-th mosquitto_plugin_init of this plugin serves,
 * on 2.0 with per_listener_settings true (the broker initialises plugins
 * listener by listener); -1 elsewhere. */
int chat_broker_instance_listener(const struct chat_plugin *pl, unsigned k);

/* Reads the configuration again (SIGHUP) and logs what changed; only ever
 * tightens (see plugin.c's on_reload). */
void chat_broker_reload(struct chat_plugin *pl);

/* The broker is 2.1 or newer (it knows MOSQ_EVT_CLIENT_OFFLINE): set by
 * plugin.c from the events the broker accepted. */
void chat_broker_set_v21(struct chat_plugin *pl, bool v21);
bool chat_broker_v21(const struct chat_plugin *pl);

/* The listener the event being handled came through, where only the
 * registration that fired says it (2.0 with per_listener_settings true:
 * one plugin instance per listener); -1 outside such an event. */
void chat_broker_set_current(struct chat_plugin *pl, int listener);

/* Whether the client meets no other access checker after ours: our answer
 * is then the broker's. */
bool chat_broker_alone(struct chat_plugin *pl, const struct mosquitto *client);

/* Whether every listener's clients meet no other checker after ours. */
bool chat_broker_all_alone(const struct chat_plugin *pl);

/* Whether the broker verified the client's username (its listener checks
 * usernames). Where the broker does not say which listener a client came
 * through, only if every listener does. */
bool chat_broker_verified(struct chat_plugin *pl, const struct mosquitto *client);

/* Logs, once at start, what the plugin found: mode per listener, usernames
 * verified or not, where the read verdict comes from. */
void chat_broker_log(struct chat_plugin *pl);

/* The read verdict's sources, for verdict.c: */

/* Asks the broker's own access check for access to topic, where the broker
 * exports one (2.0.11 as Debian builds it; 2.1 with its own signature).
 * Returns false when it cannot be asked; else *rc holds the answer. */
bool chat_broker_ask(struct chat_plugin *pl, struct mosquitto *client, const char *topic,
                     int access, int *rc);

/* Works out what the checkers after ours would answer for client's access
 * to topic from what the plugin can read of them (dynamic-security's own
 * check on 2.0, the acl_file by the broker's rules). Returns false when some
 * checker of the chain cannot be worked out; else *rc holds the answer. */
bool chat_broker_emulate(struct chat_plugin *pl, struct mosquitto *client, const char *topic,
                         int access, int *rc);

/* Whether the chain after ours holds only checkers whose changes the plugin
 * sees (acl_file: at reload; dynamic-security: through its control topic),
 * so that a remembered verdict may live long. */
bool chat_broker_chain_known(struct chat_plugin *pl, const struct mosquitto *client);

/* Tests and fuzzers (plugin_fixture): the broker as one listener whose
 * clients meet mosquitto-chat alone or behind other checkers, verifying
 * usernames or not, exporting check (2.0's signature) or not (NULL). */
typedef int (*chat_broker_check_fn)(struct mosquitto *client, const char *topic,
                                    uint32_t payloadlen, void *payload, uint8_t qos, bool retain,
                                    int access);
void chat_broker_set_test(struct chat_plugin *pl, bool alone, bool verified,
                          chat_broker_check_fn check);

/* ===========================================================================
 * verdict.c: the broker's read verdict, remembered per device
 * ========================================================================= */

enum chat_bv {
    CHAT_BV_ALLOW = 0, /* the broker would let the client subscribe to and read the group */
    CHAT_BV_DENY,      /* it would not */
    CHAT_BV_UNKNOWN    /* the broker cannot be asked, nor its answer worked out */
};

bool chat_verdict_init(struct chat_plugin *pl);
void chat_verdict_free(struct chat_plugin *pl);

/* The broker's read verdict for client on <prefix>/<group>: asked now
 * (fresh), or as remembered for a while (see verdict.c), which the pushes to
 * every device of a group use. */
enum chat_bv chat_verdict_read(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                               bool fresh);

/* The broker's write verdict for client on <prefix>/<group>, asked now: a
 * recall or an edit publishes a message to the group by request, where the
 * broker's own write check never sees it. */
enum chat_bv chat_verdict_write(struct chat_plugin *pl, struct mosquitto *client,
                                const char *group);

/* The broker's access configuration may have changed (a reload, a
 * dynamic-security command): every remembered verdict is asked again. */
void chat_verdict_changed(struct chat_plugin *pl);

/* The client disconnected, or the group was deleted: its verdicts go. */
void chat_verdict_forget_client(struct chat_plugin *pl, const char *client_id);

/* True while verdict.c asks the broker's own access check: our own access
 * check (plugin.c's on_acl) stands aside for that question. */
bool chat_verdict_probing(const struct chat_plugin *pl);

/* Test hooks: MOSQUITTO_CHAT_TEST_NO_ACL_CHECK=1 in the broker's
 * environment stops the plugin from asking the broker's exported check,
 * MOSQUITTO_CHAT_TEST_NO_EMULATION=1 from working the answer out, as on
 * builds without them. */

/* ===========================================================================
 * access.c: identity and the one decision
 * ========================================================================= */

/* Who a client is in the chat. */
struct chat_identity {
    char member[CHAT_MEMBER_BUF]; /* its member name */
    const char *device;           /* its client id (the client's; NULL if none) */
    bool named;                   /* it connected with a username */
    bool verified;                /* ... that the broker checked */
    bool admin;                   /* verified and listed in plugin_opt_admins */
};

/* Fills *id for client. Returns NULL, or why the client may not chat at
 * all (no client id, a name too long, a reserved "~" username). */
const char *chat_identity_of(struct chat_plugin *pl, const struct mosquitto *client,
                             struct chat_identity *id);

/* What a client is about to do to a group. */
enum chat_action {
    CHAT_DO_SEND = 0,   /* publish to <prefix>/<group> (joins an open group) */
    CHAT_DO_SUBSCRIBE,  /* a subscription to <prefix>/<group> */
    CHAT_DO_DELIVER,    /* receive a stored envelope live */
    CHAT_DO_HISTORY,    /* a replay page, fetch, history, the group's line in sync */
    CHAT_DO_INSPECT,    /* history read-only by an admin, or else as HISTORY */
    CHAT_DO_MARK,       /* an ack or a read marker sent as a request */
    CHAT_DO_MARK_TOPIC, /* ... published to <prefix>/<group>/ack or /read */
    CHAT_DO_LIST,       /* receipts, the presence answer: who the members are */
    CHAT_DO_ONLINE,     /* be counted online in the group */
    CHAT_DO_PUSH,       /* a device counted online receives the group's reads/presence push */
    CHAT_DO_JOIN,       /* a `join` request for oneself (the caller adds the member) */
    CHAT_DO_SYNC,       /* `sync`: the client's groups (group NULL; each line asks HISTORY) */
    CHAT_DO_ADMIN,      /* an admin command (group may be NULL) */
    CHAT_DO_CHANGE,     /* recall or edit one's own message (v1.2): a new message by request */
    CHAT_ACTIONS
};

enum chat_verdict {
    CHAT_DENY = 0, /* refused: why says why */
    CHAT_ALLOW     /* allowed as far as mosquitto-chat is concerned */
};

struct chat_decision {
    enum chat_verdict verdict;
    const char *why; /* CHAT_DENY: a static sentence for the client */
    bool joined;     /* the decision made the client a member (an open group) */
    bool pending;    /* SUBSCRIBE, DELIVER: let through without membership, for the
                        broker's own read check of each live message to decide */
    bool member;     /* the client is a member of the group (after joining) */
};

/* The one decision: may client do action to group? Reads the store
 * (membership, and joins an open group where the action joins), the
 * broker's configuration and read verdict; logs store errors (why is then
 * "storage error"). group is a checked name (NULL for CHAT_DO_ADMIN). */
struct chat_decision chat_access_decide(struct chat_plugin *pl, struct mosquitto *client,
                                        const char *group, enum chat_action action);

/* Whether the plugin may wake members who are not connected (push
 * notifications, v1.2: who wrote, how many unread, with push_body what):
 * NULL where its own answer is the broker's on every listener, or where
 * plugin_opt_read_check members says every member may read its groups;
 * else the reason. Behind other checkers the broker can be asked only
 * about a connected client, so a member whose read right was taken away
 * would otherwise be told of what it may not read. */
const char *chat_access_wake(const struct chat_plugin *pl);

/* What a list of group's members (receipts, presence) asks: the decision
 * CHAT_DO_LIST, then *members receives their count. Returns NULL, or the
 * reason to refuse (nobody else learns who the members are, nor how many). */
const char *chat_access_list(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                             uint64_t *members);

/* The answer for an access check that mosquitto-chat allows (a chat topic
 * it lets the client use, or any other topic): on 2.0 MOSQ_ERR_SUCCESS
 * alone, MOSQ_ERR_PLUGIN_DEFER behind other checkers (they decide); on 2.1
 * CHAT_PLUGIN_IGNORE (the others decide, and with none the broker's
 * default). */
int chat_access_pass(struct chat_plugin *pl, const struct mosquitto *client);

/* The answer to an access check the plugin itself put to the broker's
 * chain to learn the broker's verdict (verdict.c, while probing): the
 * checkers after ours decide; on 2.1 CHAT_PLUGIN_IGNORE (with none
 * answering, the broker's default), on 2.0 MOSQ_ERR_PLUGIN_DEFER. */
int chat_access_aside(const struct chat_plugin *pl);

#endif
