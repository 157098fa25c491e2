/* Private header of the mosquitto-chat plugin: the glue between Mosquitto's
 * plugin events and chat_store.
 *
 * Threading: every function here runs on the broker's one thread, inside a
 * Mosquitto callback; none may block for long, since a slow call stalls every
 * client of the broker.
 *
 * Modules, each calling only those listed after it (no circles; see
 * tests/unit for the checks of each):
 *   plugin.c          the entry points and the dispatch of broker events;
 *                     the making and freeing of every module's state
 *   control.c         requests on $CONTROL/chat/v1 (control.h: its files)
 *   chat.c            the chat topics: publishes, acks, access checks
 *   tick.c            periodic work: fsync batch, the store's health,
 *                     relay, replay timeouts, retention, figures, device
 *                     expiry, deletions and jobs, pushes, clients that
 *                     read nothing disconnected
 *   admin.c           the admin commands (admin.h: admin_jobs.c, the
 *                     deletions and jobs they leave, and admin_entry.c)
 *   stats.c           the figures under $SYS/broker/chat/ (stats.h)
 *   expiry.c          dropping device cursors unused for device_expiry_days
 *   receipts.c        read markers: the read topic and command, receipts
 *   replay.c          catch-up pages with a window of pages in flight
 *   push.c            push notifications to devices that are not connected
 *                     (push.h: its files, push_cmd.c, push_send.c,
 *                     push_reg.c, push_url.c, push_crypto.c, push_lib.c)
 *   relay.c           other brokers' messages to local subscribers (shared
 *                     store)
 *   presence.c        who is online: the events and the command
 *                     (presence.h: its state, shared with presence_push.c,
 *                     the coalesced reads/presence pushes, and
 *                     presence_state.c)
 *   fanout.c          which stored messages went out live (a cid retry of
 *                     one is not delivered twice)
 *   retention.c       deleting old messages in bounded steps
 *   access.c          the one access policy: identity and the decision
 *                     (access.h: with verdict.c, the broker's read verdict
 *                     remembered per device, and broker.c, the broker's
 *                     listeners and checkers, from broker_conf.c, and
 *                     aclfile.c, its acl_file read by its rules)
 *   reply.c           everything sent to a client, and the page writer
 *                     (reply.h, included by the files that answer)
 *   peer_table.c      per client id: pending subscriptions, the groups and
 *                     pushes it subscribed to, persistent sessions away,
 *                     answer budgets
 *   store_health.c    the store opened (again), and the log of its errors
 *   envelope_cache.c  the envelope stored last, for its deliveries
 *   envelope.c, names.c, config.c, hmap.c, sbuf.c, clock.c, then proto/ and
 *   store/
 *
 * State: each module keeps its own, in a struct private to its file (or to
 * its files' private header), made by its _init and freed by its _free
 * (chat_states_init and chat_states_free call them all). struct
 * chat_plugin holds one pointer to each, besides what every module shares
 * (the options, the store, the counters); a module changes another's state
 * only by calling it.
 *
 * Refusals: one way to say "refused, and why".
 *   - A function that may refuse what a client asks returns const char *:
 *     NULL when it accepts, else the reason, a static sentence meant for
 *     the client (never heap memory, never to be freed); its results go out
 *     through pointer parameters (chat_member's name into buf). A caller
 *     passes the reason on unchanged, or answers the client with it.
 *   - A store error is logged where it occurs (chat_log_store_error), and
 *     the reason is "storage error".
 *   - Only the broker-facing entry points (the chat_on_* functions and the
 *     callbacks of plugin.c, with the static on_* handlers of chat.c they
 *     dispatch to) map a refusal to a MOSQ_ERR_* code, and answer the client
 *     with its reason.
 *   - The field readers of control and admin requests (chat_control_*_field,
 *     chat_admin_group_field, chat_*_storage_ok) write the error entry
 *     themselves, and return false (or NULL) once they have.
 *   - Predicates that refuse nobody (chat_is_member, chat_pending_has)
 *     return bool; chat_envelope_build_way, a test hook, keeps its *why
 *     (NULL with no envelope: SPLICE could not splice).
 *
 * Ownership: one struct chat_plugin lives from mosquitto_plugin_init to
 * mosquitto_plugin_cleanup and owns the store, the options and every
 * module's state. Memory handed to the broker comes from
 * mosquitto_malloc; everything else from malloc.
 */
#ifndef CHAT_PLUGIN_H
#define CHAT_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "chat_proto.h"
#include "chat_store.h"
#include "hmap.h"
#include "mosq.h"
#include "sbuf.h"
#include "stats.h"

#define CHAT_EXPORT __attribute__((visibility("default")))

#define CHAT_GROUP_MAX CHAT_PROTO_GROUP_MAX
#define CHAT_CID_MAX CHAT_PROTO_CID_MAX
#define CHAT_CONTROL_PREFIX CHAT_PROTO_CONTROL_PREFIX
#define CHAT_CONTROL_TOPIC CHAT_PROTO_CONTROL_TOPIC
#define CHAT_RESPONSE_TOPIC CHAT_PROTO_RESPONSE_TOPIC

/* How the plugin answers access checks it has no opinion on. Mosquitto 2.0
 * stops at the first callback that does not defer and denies when every one
 * defers, so "defer" is only right when some other checker follows us. */
enum chat_acl_mode {
    CHAT_ACL_AUTO = 0, /* decided from the broker's configuration at start */
    CHAT_ACL_ALLOW,    /* we are the only access checker: allow */
    CHAT_ACL_DEFER     /* acl_file, dynamic-security or another plugin decides */
};

/* Where the right to read a group's history comes from while another access
 * checker follows us (CHAT_ACL_DEFER); see chat_may_read. */
enum chat_read_check {
    CHAT_READ_BROKER = 0, /* ask the broker's access checks; refuse when we cannot */
    CHAT_READ_MEMBERS     /* the operator says every member may read its groups */
};

struct chat_config {
    char *db_path;
    char *store;       /* "leveldb" or "postgresql" (plugin_opt_store) */
    char *pg_conninfo; /* libpq connection string, with store postgresql */
    char *topic_prefix;
    size_t prefix_len;
    size_t page_size;
    size_t page_bytes;
    int page_qos;
    unsigned replay_window;
    unsigned replay_timeout;  /* seconds */
    unsigned replay_budget;   /* messages paged per pass of the broker's loop; 0: no bound */
    unsigned replay_inflight; /* unacked pages over all devices for a device's 2nd on; 0: none */
    unsigned replay_share;    /* % of the rest of a pass's CPU the pages may take beyond it */
    size_t max_payload;
    chat_sync fsync;
    unsigned write_buffer_mb; /* LevelDB's memtable, MiB (plugin_opt_write_buffer_mb) */
    bool replay;
    bool open_groups;
    bool verify_store; /* read every block of the store at start (plugin_opt_verify_store) */
    char **admins;     /* NULL-terminated */
    uint64_t retention_count;
    uint64_t retention_days;
    enum chat_acl_mode acl_mode;
    bool acl_auto;                   /* acl_mode follows the broker's configuration */
    enum chat_read_check read_check; /* plugin_opt_read_check */
    unsigned receipt_interval;       /* ms between two pushes of one group (0: every tick) */
    /* Some listener verifies usernames (or the broker's configuration could
     * not be read): a member without a username is named "~<client id>",
     * and usernames that start with "~" may not chat, so that no client id
     * passes for a user. Set by broker.c from the broker's configuration. */
    bool tilde_names;
    uint64_t device_expiry_days; /* 0: never */
    unsigned recall_seconds;     /* a sender's recall within this (0: none); admins any time */
    unsigned edit_seconds;       /* a sender's edit within this (0: none) */
    char *backup_dir;            /* NULL: backups refused */
    int sys_interval;            /* the broker's (chat_broker_conf), for stats.c */
};

/* The plugin: what mosquitto_plugin_init makes and mosquitto_plugin_cleanup
 * frees. It holds the things every module shares (the options, the store,
 * the counters) and one pointer to each module's own state, whose fields
 * only that module's file sees (habit 17 of STYLE.md): another module acts
 * on that state through the owner's functions, never by a field. */
struct chat_tick;
struct chat_health;
struct chat_broker;
struct chat_verdicts;
struct chat_envelope_cache;
struct chat_peers;
struct chat_replay;
struct chat_presence;
struct chat_relay;
struct chat_retention;
struct chat_expiry;
struct chat_admin;
struct chat_push;
struct chat_takeover;
struct chat_changes;

struct chat_plugin {
    mosquitto_plugin_id_t *pid;
    struct chat_config cfg;
    chat_store *store;                     /* opened (and reopened) by store_health.c; NULL while it
                                              cannot be, when every store call fails */
    struct chat_stats stats;               /* counters every module bumps in place (stats.h) */
    struct chat_tick *tick;                /* tick.c */
    struct chat_health *health;            /* store_health.c */
    struct chat_broker *broker;            /* broker.c (access.h) */
    struct chat_verdicts *verdicts;        /* verdict.c (access.h) */
    struct chat_envelope_cache *envelopes; /* envelope_cache.c */
    struct chat_peers *peers;              /* peer_table.c */
    struct chat_replay *replay;            /* replay.c */
    struct chat_presence *presence;        /* presence.h */
    struct chat_fanout *fanout;            /* fanout.c */
    struct chat_relay *relay;              /* relay.c; NULL unless the store is shared */
    struct chat_retention *retention;      /* retention.c */
    struct chat_expiry *expiry;            /* expiry.c */
    struct chat_admin *admin;              /* admin_jobs.c */
    struct chat_push *push;                /* push.h; NULL while push is off */
    struct chat_takeover *takeover;        /* takeover.c */
    struct chat_changes *changes;          /* control_change.c */
};

/* What a topic under the prefix names. */
enum chat_topic_kind {
    CHAT_TOPIC_NONE = 0, /* not under the prefix: none of our business */
    CHAT_TOPIC_GROUP,    /* <prefix>/<group> */
    CHAT_TOPIC_ACK,      /* <prefix>/<group>/ack */
    CHAT_TOPIC_READ,     /* <prefix>/<group>/read */
    CHAT_TOPIC_BAD       /* under the prefix but none of the above */
};

/* config.c */

/* Reads plugin_opt_* options into cfg (defaults first). On a bad value logs
 * a line naming the option and returns MOSQ_ERR_INVAL. cfg owns its strings:
 * free them with chat_config_free. */
int chat_config_parse(struct chat_config *cfg, struct mosquitto_opt *opts, int count);
void chat_config_free(struct chat_config *cfg);
bool chat_config_is_admin(const struct chat_config *cfg, const char *username);

/* Logs, at info level, one line with every option in cfg and where the
 * store is (chat_health_where); broker.c logs what it found of the
 * broker. */
void chat_config_log(const struct chat_config *cfg, const char *where);

/* names.c */

/* Counts the \u0000 escapes in the JSON text s[0..len) and, when with is
 * not NULL, overwrites each escape's four hex digits with it. cJSON would
 * decode \u0000 into a NUL that silently cuts a string short. */
size_t chat_nul_escapes(char *s, size_t len, const char *with);

/* Classifies topic. For GROUP, ACK and READ, *group and *group_len name
 * the group inside topic. */
enum chat_topic_kind chat_topic_parse(const struct chat_config *cfg, const char *topic,
                                      const char **group, size_t *group_len);

/* The member a client speaks as, written into buf: its username where the
 * broker checked it (or checks none), else its client id, prefixed with "~"
 * where some listener verifies usernames (chat_config.tilde_names), so that
 * no client id, nor a username a listener did not check, passes for a user.
 * Returns NULL, or the reason when the client may not chat under that name
 * (buf then holds nothing). chat_member (access.c) asks the broker whether
 * client's username was verified; chat_member_name (names.c) is the rule. */
#define CHAT_MEMBER_BUF (CHAT_STORE_MAX_NAME + 2)
const char *chat_member(struct chat_plugin *pl, const struct mosquitto *client,
                        char buf[CHAT_MEMBER_BUF]);
const char *chat_member_name(bool tilde_names, bool user_verified, const char *user, const char *id,
                             char buf[CHAT_MEMBER_BUF]);

/* envelope.c */

/* Builds the envelope for a publish as the store's template (chat_envelope:
 * the store fills in the id and the time). Returns NULL on success: *env is
 * the malloc'd, NUL-terminated text that *tpl points into (an envelope with
 * 0 for both), and *cid (if the payload had one) a malloc'd string; the
 * caller frees both, after the append. On a bad payload returns the reason
 * (static), with NULL in *env; *cid may still be set, to echo it in the
 * error. */
const char *chat_envelope_build(const void *payload, size_t len, const char *group,
                                const char *from, char **env, chat_envelope *tpl, char **cid);

/* The envelope as chat_envelope_build prints it, with id and ts_ms in place
 * of its zeros (*env malloc'd, the rest as there), built the way given: by
 * splicing the payload's members after the plugin's fields where it can
 * (ANY, what the broker runs), else by printing cJSON's tree of it. SPLICE
 * and TREE take one way only, for the tests and fuzzers that check both
 * give the same envelope; where SPLICE cannot splice, *env and *why stay
 * NULL. */
enum chat_envelope_way { CHAT_ENVELOPE_ANY = 0, CHAT_ENVELOPE_SPLICE, CHAT_ENVELOPE_TREE };
void chat_envelope_build_way(enum chat_envelope_way way, const void *payload, size_t len,
                             uint64_t id, const char *group, const char *from, int64_t ts_ms,
                             char **env, char **cid, const char **why);

/* The cid of a payload that is a JSON object of at most max_len bytes with a
 * string cid, malloc'd (caller frees), else NULL. For error entries of
 * publishes refused before their envelope was built. */
char *chat_payload_cid(const void *payload, size_t len, size_t max_len);

/* What the checks of a recall or an edit (control_change.c) read from a
 * stored envelope. */
struct chat_envelope_facts {
    char from[CHAT_MEMBER_BUF]; /* its sender */
    int64_t ts;                 /* when it was stored */
    char cid[CHAT_CID_MAX + 1]; /* its cid, when has_cid */
    bool has_cid;
    bool recalled;                        /* it is a tombstone ("recalled": true) */
    bool change;                          /* it carries a recall or an edit */
    uint64_t edit_of;                     /* it carries an edit of this id (0: it carries none) */
    uint64_t edits[CHAT_PROTO_EDITS_MAX]; /* the messages its "edits" lists (its */
    size_t nedits;                        /* edits' carriers), each once */
    bool edits_over;                      /* the list names more than CHAT_PROTO_EDITS_MAX */
};

/* Reads them from the envelope env (len bytes). Returns NULL, or the
 * reason when env is not an envelope this plugin wrote. */
const char *chat_envelope_facts(const char *env, size_t len, struct chat_envelope_facts *f);

/* The texts of a change of message id of group (whose facts are f) made by
 * member by, as chat_store_change takes them (ch's parts; the caller sets
 * ch->expect): with fields NULL a recall (N's tombstone, and M with
 * "recall": id), else an edit to the fields of the edit command fields,
 * but for the command's own and the plugin's (N's new version with them
 * and "edited": <M's ts>, and M with "edit": id and them), at most max
 * bytes of them. Returns NULL with every part in *buf (mosquitto_malloc'd:
 * the caller frees it with mosquitto_free), or the reason. */
struct cJSON;
const char *chat_envelope_change(const struct chat_envelope_facts *f, const char *group,
                                 const char *by, uint64_t id, const struct cJSON *fields,
                                 size_t max, chat_change *ch, char **buf);

/* The tombstone of message id of group, the carrier of an edit of message
 * n whose facts are f, that a recall of n writes over it: id, group, from,
 * ts, "edit": n and "recalled": true, nothing of the text it carried.
 * Returns it mosquitto_malloc'd (the caller frees it with mosquitto_free)
 * with its length in *len, or NULL when memory runs out. */
char *chat_envelope_carrier_tombstone(const struct chat_envelope_facts *f, const char *group,
                                      uint64_t id, uint64_t n, size_t *len);

/* Parses a cumulative ack (or read) payload (decimal digits only). */
bool chat_ack_parse(const void *payload, size_t len, uint64_t *id);

/* chat.c: the chat topics */

int chat_on_message(struct chat_plugin *pl, struct mosquitto_evt_message *ev);
/* A Will (plugin.c knows when a write check is one) on a chat topic or
 * under $CONTROL/chat/: logged, and refused (true). */
bool chat_will_refused(struct chat_plugin *pl, const struct mosquitto *client, const char *topic);
/* An access check of the chat topics. Only on the broker's thread, and
 * never for verdict.c's own question to the broker: plugin.c's on_acl
 * answers those before it calls this. */
int chat_on_acl(struct chat_plugin *pl, struct mosquitto_evt_acl_check *ev);

/* Applies an ack from client for group; moves the cursor and the replay.
 * on_topic: published to <prefix>/<group>/ack, which behind other access
 * checkers joins an open group (chat_access_decide, CHAT_DO_MARK_TOPIC),
 * else a request. Returns NULL (*now, may be NULL, receives the cursor), or
 * the reason it was refused. */
const char *chat_apply_ack(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                           uint64_t id, bool on_topic, uint64_t *now);

/* A persistent session came back without subscribing again
 * (chat_peer_back): its groups' catch-up and presence start again. */
void chat_client_back(struct chat_plugin *pl, struct mosquitto *client);

/* A persistent session the peer table does not know (the broker restarted,
 * or it was forgotten to make room): the catch-up of every group of its
 * member in which this device has a cursor starts. */
void chat_client_resume(struct chat_plugin *pl, struct mosquitto *client);

/* envelope_cache.c: the envelope stored last, for its deliveries' read
 * checks */

bool chat_envelope_cache_init(struct chat_plugin *pl);
void chat_envelope_cache_free(struct chat_plugin *pl);

/* Keeps env (len bytes, malloc'd: the cache takes it), the envelope of id
 * just stored in group, in place of the one before. */
void chat_envelope_cache_put(struct chat_plugin *pl, const char *group, uint64_t id, char *env,
                             size_t len);

/* When the cache holds (group, id) and answers alone (within two ticks of
 * its store or renewal): true, and *same says whether payload is that
 * envelope byte for byte. */
bool chat_envelope_cache_lookup(const struct chat_plugin *pl, const char *group, uint64_t id,
                                const void *payload, size_t len, bool *same);

/* The group was deleted: its envelope is forgotten. */
void chat_envelope_cache_forget(struct chat_plugin *pl, const char *group);

/* The store holds stored (len bytes) as (group, id): if the cache holds
 * (group, id), it answers again for two ticks when that is its envelope,
 * else it is forgotten. */
void chat_envelope_cache_renew(struct chat_plugin *pl, const char *group, uint64_t id,
                               const void *stored, size_t len);

/* From the tick, every tick: from the second tick after it was stored (or
 * renewed), the envelope no longer answers alone (lookup says it does not
 * hold it; a check reads the store and renews it). */
void chat_envelope_cache_tick(struct chat_plugin *pl);

/* The envelope held (*len its length), or NULL: for tests and fuzzers,
 * which deliver it as the broker would. */
const char *chat_envelope_cache_last(const struct chat_plugin *pl, size_t *len);

/* receipts.c: read markers */

/* A publish to <prefix>/<group>/read: applies it as chat_read_apply does,
 * joining as acks do, and keeps it from being retained. Returns NULL, or
 * the reason to refuse it (chat_on_message answers the client). */
const char *chat_read_publish(struct chat_plugin *pl, struct mosquitto_evt_message *ev,
                              const char *group);

/* Applies a read of id by client in group (on_topic as chat_apply_ack): moves the member's read
 * marker and the device's cursor (an ack up to id) forward, the replay with it, and tells
 * presence.c of a marker that moved. join as chat_apply_ack. Returns NULL, *read and *acked (may be
 * NULL) receiving the marker and the cursor after; or the reason it was refused. */
const char *chat_read_apply(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                            uint64_t id, bool on_topic, uint64_t *read, uint64_t *acked);

/* Appends the fields of a `receipts` answer for client in group to b
 * (members, reads, more, and after when more): the members after `after`
 * (NULL: from the first), at most limit, while b stays under cap. Returns
 * NULL, or a static reason to refuse (not a member, storage error) with
 * nothing written. */
const char *chat_receipts_answer(struct chat_plugin *pl, struct mosquitto *client,
                                 const char *group, const char *after, size_t limit, sbuf *b,
                                 size_t cap);

/* presence.c, presence_push.c, presence_state.c: who is online, and the
 * pushes (see the design note of presence.h) */

bool chat_presence_init(struct chat_plugin *pl);
void chat_presence_free(struct chat_plugin *pl);

/* A subscription of client to <prefix>/<group> (not a shared one) that we
 * allowed: counted when the broker lets client read the group
 * (chat_may_read), else (it cannot be asked) not, failing closed. */
void chat_presence_subscribed(struct chat_plugin *pl, struct mosquitto *client, const char *group);

/* The device unsubscribed from <prefix>/<group>, disconnected (every
 * group), or its member left group (every device of member). */
void chat_presence_unsubscribed(struct chat_plugin *pl, const char *client_id, const char *group);
void chat_presence_disconnected(struct chat_plugin *pl, const char *client_id);
void chat_presence_left(struct chat_plugin *pl, const char *member, const char *group);

/* The group was deleted: nothing of it is pushed any more. */
void chat_presence_forget_group(struct chat_plugin *pl, const char *group);

/* Whether one of member's devices is online in group (push.c: nobody
 * online is woken instead). */
bool chat_presence_online(struct chat_plugin *pl, const char *group, const char *member);

/* member's read marker in group is read (after a read of one of its
 * devices): the next push says so, unless a push said it already. */
void chat_presence_read(struct chat_plugin *pl, const char *group, const char *member,
                        uint64_t read);

/* Appends the fields of a `presence` answer (online, members, and more
 * and after when the list goes on) as chat_receipts_answer does. */
const char *chat_presence_answer(struct chat_plugin *pl, struct mosquitto *client,
                                 const char *group, const char *after, size_t limit, sbuf *b,
                                 size_t cap);

/* Marks the devices online in their groups used today (device expiry: a
 * device connected and subscribed is in use, however idle), as a subscribe
 * does (chat_store_cursor_start), once a day per device and group, until
 * deadline_ms (chat_now_ms(); one at least). Returns true when every one
 * is; from expiry.c, whose sweep waits until then. */
bool chat_presence_stamp(struct chat_plugin *pl, int64_t deadline_ms);

/* Sends the pushes that are due, within a bounded amount of work; from the
 * tick. now_ms: chat_now_ms(). */
void chat_presence_tick(struct chat_plugin *pl, int64_t now_ms);

/* fanout.c: which stored messages have gone out to subscribers */

/* Creates and frees the state (false: out of memory). */
bool chat_fanout_init(struct chat_plugin *pl);
void chat_fanout_free(struct chat_plugin *pl);

/* A new message (group, id) was stored from a publish at qos: not out yet
 * (QoS 2 goes out at the PUBREL). */
void chat_fanout_stored(struct chat_plugin *pl, const char *group, uint64_t id, int qos);

/* A delivery of the stored envelope (group, id) is being checked, of the
 * copy whose payload the broker holds at payload (compared, never read): it
 * went out. Returns false when another copy of it went out already (a
 * retry that carried it too, see chat_fanout_retry): this one must not. */
bool chat_fanout_seen(struct chat_plugin *pl, const char *group, uint64_t id, const void *payload);

/* A retry of (group, id) came (its cid was stored already). True when the
 * message is known not to have gone out to anyone yet: the retry must
 * carry it, and from now on only the first of its copies to be fanned out
 * goes out (chat_fanout_seen). False once it went out, and for messages no
 * longer remembered (see fanout.c). */
bool chat_fanout_retry(struct chat_plugin *pl, const char *group, uint64_t id);

/* Joins member to group (chat_store_member_join) and, when device is not
 * NULL, gives that device its cursor at the join, in the same store call
 * (one transaction and one round trip on PostgreSQL): the membership then
 * has a device whose expiry can take it (device expiry, open groups), even
 * when that device only publishes. Returns the membership's result, for
 * the caller to log or answer; *joined (may be NULL) receives the id it
 * joined at. A cursor that failed after the membership was written is
 * logged here, and the membership stands. */
chat_err chat_join_group(struct chat_plugin *pl, const char *group, const char *member,
                         const char *device, uint64_t *joined);

/* access.c, verdict.c, broker.c: the one access policy (access.h) */

/* peer_table.c: per client id state between events */

bool chat_peers_init(struct chat_plugin *pl);
void chat_peers_free(struct chat_plugin *pl);

/* Peers in the table, those kept for disconnected persistent sessions, and
 * whether client_id has one (for tests). */
size_t chat_peers_count(const struct chat_plugin *pl);
unsigned chat_peers_gone(const struct chat_plugin *pl);
bool chat_peer_known(const struct chat_plugin *pl, const char *client_id);

/* A subscription to <prefix>/<group> by a non-member, seen while another
 * access checker follows us: it may yet be refused after our answer, so it
 * neither joins nor replays; it only lets live messages through to that
 * client, for the broker's own read check to decide on. At most 256 groups
 * per client; 1000 disconnected persistent sessions keep theirs. */
bool chat_pending_has(struct chat_plugin *pl, const char *client_id, const char *group);
void chat_pending_add(struct chat_plugin *pl, const char *client_id, const char *group);
void chat_pending_remove(struct chat_plugin *pl, const char *client_id, const char *group);

/* Forgets every client's pending subscription to group (its deletion). */
void chat_pending_forget_group(struct chat_plugin *pl, const char *group);

/* The chat groups a device subscribed to (not shared): set on subscribe,
 * cleared on unsubscribe (on = false); kept while a persistent session is
 * away, so that its catch-up restarts when it comes back without
 * subscribing again. At most 1024 per client. chat_peer_each_group calls fn
 * once per group (fn returns true to stop). */
void chat_peer_subscribed(struct chat_plugin *pl, const char *client_id, const char *group,
                          bool on);
void chat_peer_each_group(struct chat_plugin *pl, const char *client_id,
                          bool (*fn)(void *ctx, const char *group), void *ctx);

/* PROTOCOL.md v1.2: the device subscribed to $CONTROL/chat/v1/response
 * itself (on), or unsubscribed (off): it asked for the reads and presence
 * pushes. chat_peer_pushes says whether it did. */
void chat_peer_wants_pushes(struct chat_plugin *pl, const char *client_id, bool on);
bool chat_peer_pushes(struct chat_plugin *pl, const char *client_id);

/* How a client went away. */
enum chat_gone {
    CHAT_GONE_ENDED,   /* its session ended with it (clean session, session expiry 0) */
    CHAT_GONE_OFFLINE, /* its session is kept: a persistent session went offline */
    CHAT_GONE_REPLACED /* a newer connection with its client id took its session over */
};

/* The client went away (how). A persistent session's peer stays, with
 * what it subscribed to, while the table keeps fewer than 10,000 such
 * peers (invariant kept-sessions). */
void chat_peer_disconnected(struct chat_plugin *pl, const struct mosquitto *client,
                            enum chat_gone how);

/* Whether client is the connection a persistent session left behind (the
 * broker still checks deliveries to it, to queue them). */
bool chat_peer_offline(struct chat_plugin *pl, const struct mosquitto *client);

/* Called with every event of a client (own: one of its own doing, not a
 * delivery to it): true once when client is a persistent session come back
 * (a new connection of an offline peer's client id that resumes it; a
 * delivery to the connection it left is not one); the caller then restarts
 * what it had (chat_peer_each_group). A new connection that starts clean
 * ends the session away instead (the broker dropped it): false, and it is
 * forgotten. */
bool chat_peer_back(struct chat_plugin *pl, const struct mosquitto *client, bool own);

/* Makes a peer for client, connected, when it has none: true when it made
 * one (the first event of a persistent session the table does not know). */
bool chat_peer_note(struct chat_plugin *pl, const struct mosquitto *client);

/* May the client be sent an answer to what it sent (a request, a publish)?
 * The plugin cannot see how much of what it sent a client has read, so
 * answers draw on a budget that refills with time: over it, a few short
 * "slow down" errors a second, then nothing (logged). A client that goes on
 * sending for a second past that, its requests dropped unanswered, is sent
 * nothing more and is disconnected at the broker's next tick
 * (chat_peers_kick). chat_budget_left asks the same for a push, which is
 * none of the client's doing: true while the budget lasts, without using
 * the client's errors or counting towards its disconnect.
 * chat_budget_spend charges one message sent of bytes bytes: its bytes and
 * a fixed cost per message. */
enum chat_budget { CHAT_BUDGET_OK, CHAT_BUDGET_SLOW_DOWN, CHAT_BUDGET_DROP };
enum chat_budget chat_budget_check(struct chat_plugin *pl, const char *client_id);
bool chat_budget_left(struct chat_plugin *pl, const char *client_id);
void chat_budget_spend(struct chat_plugin *pl, const char *client_id, size_t bytes);

/* Disconnects the clients chat_budget_check found reading nothing (at most
 * 64 a call), each with a log line. Only from the broker's tick: a
 * disconnect runs the plugin's disconnect callback at once, and must not
 * happen inside an event of the client itself, nor while the broker walks
 * its clients or subscriptions. */
void chat_peers_kick(struct chat_plugin *pl);

/* takeover.c (Mosquitto 2.1 on): a client id belongs to one user at a
 * time. chat_takeover_connected records the user of a connection the broker
 * authenticated, chat_takeover_gone its end, chat_takeover_tick (at the
 * start of each tick) forgets the ids that ended before it. Whether a
 * CONNECT claiming username for client's id is refused (and logged): that id
 * is held by another user's connection, or was until earlier in this pass,
 * with answers that may still be queued for it. */
bool chat_takeover_init(struct chat_plugin *pl);
void chat_takeover_free(struct chat_plugin *pl);
void chat_takeover_connected(struct chat_plugin *pl, const struct mosquitto *client);
void chat_takeover_gone(struct chat_plugin *pl, const struct mosquitto *client);
void chat_takeover_tick(struct chat_plugin *pl);
bool chat_takeover_refused(struct chat_plugin *pl, const struct mosquitto *client,
                           const char *username);
/* Whether client is the connection that holds its id, or the plugin knows
 * of none: false for a connection the broker refused, whose end must not
 * touch the holder's state. */
bool chat_takeover_holder(struct chat_plugin *pl, const struct mosquitto *client);

/* control.c: $CONTROL/chat/v1 */
int chat_on_control(struct chat_plugin *pl, struct mosquitto_evt_control *ev);

/* control_change.c: creates and frees what recall and edit keep from one
 * call to the next (the edit carriers published in the current pass of the
 * broker's loop); false when out of memory. */
bool chat_control_change_init(struct chat_plugin *pl);
void chat_control_change_free(struct chat_plugin *pl);

/* admin.c, admin_jobs.c, admin_entry.c: the admin commands (groups,
 * members, stats, delete, compact, backup) and the work they leave to the
 * tick */

/* One admin command being answered: what control.c hands admin.c. */
struct chat_admin_req {
    struct chat_plugin *pl;
    struct mosquitto *client;
    const char *device;
    const char *cmd;  /* the command's name */
    const char *corr; /* its correlationData, or NULL */
    sbuf *out;        /* the response being written: one entry is appended */
    size_t *work;     /* store records the request has visited, raised here */
    size_t work_max;  /* at most this many */
    size_t cap;       /* bytes the whole answer may take */
};

/* Whether cmd names an admin command. */
bool chat_admin_is_command(const char *cmd);

/* Answers one admin command c (a JSON object): an entry in r->out, an error
 * entry for a client that is not an admin. */
void chat_admin_run(const struct chat_admin_req *r, const struct cJSON *c);

/* From the tick, at now_ms (chat_now_ms): goes on with deletions (a
 * bounded slice; after a store error, again once a wait that doubles from
 * 1 s to 60 s has passed) and reports the end of a store job in the log. */
void chat_admin_tick(struct chat_plugin *pl, int64_t now_ms);

/* Creates and frees what the admin commands leave to the tick: the
 * deletion queue and the store job watched. */
bool chat_admin_init(struct chat_plugin *pl);
void chat_admin_free(struct chat_plugin *pl);

/* expiry.c */

bool chat_expiry_init(struct chat_plugin *pl);
void chat_expiry_free(struct chat_plugin *pl);

/* Advances the device expiry sweep by a bounded slice; from the tick. */
void chat_expiry_tick(struct chat_plugin *pl, time_t now);

/* replay.c: catch-up of connected devices */

/* Starts (or restarts from the cursor) the catch-up of client on group. */
void chat_replay_start(struct chat_plugin *pl, struct mosquitto *client, const char *group);

/* The device's cursor moved to acked: frees window room, sends more. */
void chat_replay_acked(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                       uint64_t acked);

/* Drops a device's replay state (disconnect, leave). group NULL: all. */
void chat_replay_stop(struct chat_plugin *pl, const char *client_id, const char *group);

/* Drops the replay state of every device of member (NULL: any) in group
 * (leave); a device left with other groups goes on with them. */
void chat_replay_stop_member(struct chat_plugin *pl, const char *member, const char *group);

/* Drops the replay state of every device in group (its deletion). */
void chat_replay_stop_group(struct chat_plugin *pl, const char *group);

/* client sent an empty request ({"commands":[]}), to be answered on topic
 * (NULL: the response topic) with Correlation Data corr (corr_len bytes;
 * NULL: none). If its device waits for its turn (replay_budget), the answer
 * is held, with copies of topic and corr, and replay.c sends it once the
 * device's turns have served it (invariant held-while-queued in replay.c):
 * *held is set, NULL returned. Otherwise *held is false and the caller
 * answers now (NULL returned), or refuses with the error string returned:
 * CHAT_PROTO_ERR_EMPTY_HELD when CHAT_PROTO_HELD_EMPTY_MAX are held for the
 * client already, or "out of memory". */
const char *chat_replay_hold_empty(struct chat_plugin *pl, const struct mosquitto *client,
                                   const char *topic, const void *corr, uint16_t corr_len,
                                   bool *held);

/* client_id disconnected: the answers held for it are freed unsent. Call
 * before chat_replay_stop, which answers what is still held. */
void chat_replay_held_drop(struct chat_plugin *pl, const char *client_id);

/* Devices with replay pages in flight; devices with any replay state. */
unsigned chat_replay_active(struct chat_plugin *pl);
size_t chat_replay_devices(const struct chat_plugin *pl);

/* Figures of replay_budget: devices waiting for their turn now; devices
 * that had to wait for one since start; the most messages one pass of the
 * broker's loop carried in pages since start (that pass's ended). */
size_t chat_replay_waiting(const struct chat_plugin *pl);
uint64_t chat_replay_turns(const struct chat_plugin *pl);
uint64_t chat_replay_pass_max(const struct chat_plugin *pl);
/* Replay pages unacked now over all devices (replay_inflight). */
uint64_t chat_replay_inflight(const struct chat_plugin *pl);

/* Ends a pass of the broker's loop for replay_budget: gives the new pass's
 * budget to the devices waiting for a turn; then, once a second, resends
 * stalled pages. Called from the tick, every tick. */
void chat_replay_tick(struct chat_plugin *pl, int64_t now_ms);

/* Creates and frees the catch-ups' state. */
bool chat_replay_init(struct chat_plugin *pl);
void chat_replay_free(struct chat_plugin *pl);

/* retention.c */

bool chat_retention_init(struct chat_plugin *pl);
void chat_retention_free(struct chat_plugin *pl);

/* Applies retention_count to group, whose head is now head. */
void chat_retention_count(struct chat_plugin *pl, const char *group, uint64_t head);

/* Advances the retention_days sweep by a bounded step; from the tick. */
void chat_retention_tick(struct chat_plugin *pl, time_t now);

/* store_health.c: the store, opened at start and again when a full disk has room,
 * or when descriptors are free again after the process ran out */

/* Creates and frees the store's health: what failed, and the log's
 * count of store errors. The free stops the opener thread (waiting for an
 * attempt in progress: at most PostgreSQL's connect_timeout). */
bool chat_health_init(struct chat_plugin *pl);
void chat_health_free(struct chat_plugin *pl);

/* Opens pl->store at start, reading every block first unless
 * plugin_opt_verify_store is false. A disk already full is not an error:
 * pl->store stays NULL (every store call fails) until the tick can open
 * it. Nor is a PostgreSQL store that cannot be opened for a reason that
 * passes by itself (CHAT_EUNAVAIL: the database down, starting up or
 * read-only): pl->store stays NULL while a thread retries the open
 * (chat_store_opener), and the tick installs the store it opened. Any
 * other failure is returned, with *errmsg to free. */
chat_err chat_health_open(struct chat_plugin *pl, char **errmsg);

/* What start does once pl->store is open, and the tick once it installs a
 * store opened later: the relay of a shared store, the warning of a store
 * that recovered from a crash. false when out of memory. */
bool chat_health_opened(struct chat_plugin *pl);

/* Where the store is, for log lines: db_path, or "in PostgreSQL" (never the
 * connection string, which may hold a password). */
const char *chat_health_where(const struct chat_plugin *pl);

/* From the tick: opens the store again once its full disk has room, or
 * once descriptors are free again; installs a PostgreSQL store the opener
 * thread opened, logging its failures meanwhile as an outage's; logs the
 * "back" line of a shared store's outage once it is available again. */
void chat_health_tick(struct chat_plugin *pl, time_t now);

/* Logs a store error at error level: "mosquitto-chat: <fmt...>: <error>
 * (<what the store said, with the keys concerned>)", at most 10 lines a
 * second (then a count of those left out), and notes a full disk,
 * descriptors run out or a write error that stays (see store_health.c).
 * A shared store's CHAT_EIO while it is not available (an outage, a
 * failover) is logged as chat_quiet.h says instead: a few lines an
 * outage, not one per call. Nothing is logged while a PostgreSQL store
 * unavailable at start is not open yet: the opener's failures say why. */
void chat_log_store_error(struct chat_plugin *pl, chat_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* relay.c: a shared store's messages from other brokers */

/* Creates the relay's state when the store is shared; false when out of
 * memory. chat_relay_free frees it. */
bool chat_relay_init(struct chat_plugin *pl);
void chat_relay_free(struct chat_plugin *pl);

/* Publishes what other brokers stored in followed groups; from the tick. */
void chat_relay_tick(struct chat_plugin *pl);

/* Follows group (a local client subscribed to it) from head on. */
void chat_relay_follow(struct chat_plugin *pl, const char *group, uint64_t head);

/* When (group, id) was relayed by the last two ticks: true, and *same says
 * whether payload is that envelope byte for byte. */
bool chat_relay_lookup(struct chat_plugin *pl, const char *group, uint64_t id, const void *payload,
                       size_t len, bool *same);

/* clock.c */

/* Milliseconds since the epoch, for envelopes, retention, device expiry
 * and the store's last-use stamps: the real time, shifted by the seconds in
 * the environment variable MOSQUITTO_CHAT_TEST_CLOCK_SHIFT (a test hook,
 * read once by chat_clock_init at init; tests move the plugin into the
 * future to see devices expire). */
int64_t chat_now_ms(void);
void chat_clock_init(void);

/* chat_now_ms as a chat_clock_fn, for chat_store_set_clock. */
int64_t chat_store_clock(void *ctx);

/* The calling thread's CPU time in microseconds (the broker's thread, for
 * the tick's and the replay budget's figures): a system call, not a vDSO
 * read, so callers read it sparingly. */
int64_t chat_thread_cpu_us(void);

/* tick.c */

bool chat_tick_init(struct chat_plugin *pl);
void chat_tick_free(struct chat_plugin *pl);

/* The broker's tick: notes that the broker sends ticks (chat_tick_set_seen)
 * and runs the periodic work: fsync batch, the store's health, relay,
 * replay timeouts, retention, figures, device expiry, deletions and jobs,
 * pushes; then disconnects the clients that read nothing (chat_peers_kick). */
void chat_tick_from_broker(struct chat_plugin *pl);

/* A client event: runs the periodic work (at most every 200 ms) while the
 * broker has sent no tick; disconnects nobody (a client found reading
 * nothing stays silenced instead: chat_budget_check). */
void chat_tick_from_event(struct chat_plugin *pl);

/* Notes that the broker sends ticks, without running the work (a test
 * fixture, which stands for such a broker); chat_tick_seen says whether it
 * does (then fsync batch syncs from the tick alone). */
void chat_tick_set_seen(struct chat_plugin *pl);
bool chat_tick_seen(const struct chat_plugin *pl);

/* The pass of the broker's loop the plugin is in: a number that grows by
 * one each time the tick's work runs, so that two calls within one pass
 * get the same number. The broker's tick comes once a pass, between its
 * client events; without it (chat_tick_seen false) the work runs from a
 * client event (chat_tick_from_event), so that one number spans the
 * passes of about 200 ms and may change in the middle of a pass. */
uint64_t chat_tick_pass(const struct chat_plugin *pl);

/* Logs the longest tick and the longest gap between two ticks (at
 * cleanup). */
void chat_tick_report(struct chat_plugin *pl);

/* plugin.c */

/* Creates every module's state but the relay's (chat_relay_init, once the
 * store is open), as mosquitto_plugin_init does; false when out of memory.
 * chat_states_free frees them all, the relay's included, and accepts a
 * plugin whose states were made in part. */
bool chat_states_init(struct chat_plugin *pl);
void chat_states_free(struct chat_plugin *pl);

#endif
