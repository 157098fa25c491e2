/* push.h: push notifications (protocol v1.2, "Push notifications"), as the
 * rest of the plugin sees them: a device registers where it can be woken
 * (the `push` command), and a stored message notifies, through the
 * sender thread, each member of its group that has a registered device
 * and no device online there, after push_delay, at most once per
 * (member, group) per push_interval. The module's files, each calling only
 * those after it:
 *   push.c        state, options, the hook of a stored message, the tick:
 *                 results, the walks that find whom to notify, the sweep
 *   push_cmd.c    the push command and its answers (held while a
 *                 UnifiedPush endpoint is checked)
 *   push_send.c   the sender thread (push_send.h): it also reads each
 *                 registration and builds its request
 *   push_reg.c    a registration: the command's fields, checks, stored
 *                 form, and the notification bodies of each kind
 *   push_url.c, push_crypto.c   URL rules and RFC 8291 (their headers)
 *   push_lib.c    libcurl, loaded at run time (push_lib.h)
 * Its state (struct chat_push) is private (push_priv.h); struct
 * chat_plugin holds a pointer to it, NULL-safe: with push_allow empty the
 * module is off and every function here returns at once.
 *
 * Threading: every function here runs on the broker's thread; only
 * push_send.c runs a thread, which never calls the broker or the store.
 */
#ifndef CHAT_PUSH_H
#define CHAT_PUSH_H

#include "plugin.h"

struct cJSON;
struct chat_push;

/* Whether key (a plugin_opt_ name without the prefix) is one of this
 * module's options, which chat_push_init reads (config.c passes them by). */
bool chat_push_is_option(const char *key);

/* Reads the push_* options and, when push_allow is not empty, starts the
 * sender thread. On a bad value logs a line naming the option and returns
 * MOSQ_ERR_INVAL. pl->push is NULL when push is off. */
int chat_push_init(struct chat_plugin *pl, struct mosquitto_opt *opts, int count);

/* Stops the sender (notifications not yet sent are lost: at most once) and
 * frees the module. Accepts pl->push NULL. */
void chat_push_free(struct chat_plugin *pl);

/* A message was stored in group with id, sent by from (not a duplicate):
 * constant work, whatever the group's size; the tick does the rest. */
void chat_push_stored(struct chat_plugin *pl, const char *group, uint64_t id, const char *from);

/* Message id of group was recalled or edited (protocol v1.2): no
 * notification sent from now on carries its old text (push_body); those
 * still to be decided, deferred or held by the sender take the stored
 * version's (none for a recall). */
void chat_push_changed(struct chat_plugin *pl, const char *group, uint64_t id);

/* One `push` command, as control.c hands it over. */
struct chat_push_req {
    struct chat_plugin *pl;
    struct mosquitto *client;
    const char *member, *device;
    const char *corr; /* the command's correlationData, or NULL */
    sbuf *out;        /* the response being written: one entry is appended, or none when held */
    bool *hold;       /* set when the answer waits for a check: see chat_push_hold */
};

/* Answers c for r: one entry in r->out, or, for a UnifiedPush endpoint
 * that is being checked, none yet and *r->hold set. */
void chat_push_command(const struct chat_push_req *r, const struct cJSON *c);

/* The request whose command set *hold has its whole answer in out (every
 * other entry, the held one's place between them): takes it over (out is
 * emptied) with the reply topic and correlation data to answer with, and
 * sends it with the held entry in its place once the check ends. */
void chat_push_hold(struct chat_plugin *pl, const char *device, const char *topic, const void *corr,
                    uint16_t corr_len, sbuf *out);

/* The client disconnected: an answer held for it goes nowhere (its
 * registration is still stored when the check passes). */
void chat_push_disconnected(struct chat_plugin *pl, const char *client_id);

/* From the tick: takes the sender's results, goes on with the walks that
 * are due (a bounded slice of members), and the sweep of registrations. */
void chat_push_tick(struct chat_plugin *pl, int64_t now_ms);

/* The figures under $SYS/broker/chat/push/ and in `stats`, for stats.c:
 * writes their names ("push/sent" ...) and values and returns how many (0
 * when push is off). */
#define CHAT_PUSH_FIGURES 5
size_t chat_push_figures(struct chat_plugin *pl, const char *names[CHAT_PUSH_FIGURES],
                         uint64_t values[CHAT_PUSH_FIGURES]);

/* Admin `members`: appends ,"push":[{"device","kind","registered"},...]
 * for member to b (nothing when push is off); returns the store's error. */
chat_err chat_push_list_json(struct chat_plugin *pl, const char *member, sbuf *b);

#endif
