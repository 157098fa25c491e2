/* reply.h: everything the plugin sends a client (reply.c): answers and
 * error entries through the client's answer budget, pushes, replay pages,
 * and the page writer that splices stored envelopes into them. reply.c
 * calls nothing of the plugin but the budget (peer_table.c), so every part that
 * answers includes this header and the calls still flow one way. Every
 * function runs on the broker's thread; an sbuf handed to a sending
 * function is emptied by it. */
#ifndef CHAT_REPLY_H
#define CHAT_REPLY_H

#include "plugin.h"

/* Publishes b (a whole {"responses":[...]} text) to client_id alone, on
 * topic (NULL: the response topic), at page_qos, with MQTT 5 Correlation
 * Data when corr is not NULL; b is emptied. */
void chat_reply_send(struct chat_plugin *pl, const char *client_id, const char *topic,
                     const void *corr, uint16_t corr_len, sbuf *b);

/* Pushes payload (len bytes, copied) to client_id on the response topic,
 * through its answer budget (a client over it misses the push: it only
 * saves the client asking). Returns whether it was sent. */
bool chat_push(struct chat_plugin *pl, const char *client_id, const char *payload, size_t len);

/* chat_reply_send on the response topic, without correlation data. */
void chat_send(struct chat_plugin *pl, const char *client_id, sbuf *b);

/* Appends an error entry {"command":cmd,"group":group,"cid":cid,"error":why};
 * group and cid may be NULL. */
void chat_entry_error(sbuf *b, const char *cmd, const char *group, const char *cid,
                      const char *why);

/* Bytes one request's whole answer may take: a megabyte, or one page and
 * its last envelope when that is more. */
size_t chat_answer_cap(const struct chat_config *cfg);

/* Writes one page entry into an sbuf as its messages come, so that a replay
 * splices envelopes straight from the store's iterator into the response. */
struct chat_page_writer {
    sbuf *b;
    uint64_t first, last;
    size_t count;
    uint64_t expect;             /* the id the next message must have; 0: any */
    uint64_t hole_from, hole_to; /* ids found missing (hole_from 0: none) */
};

/* Starts a page entry {"command":command,"group":group,... in b (with the
 * command's correlationData when corr is not NULL); the messages follow
 * through chat_page_add, a chat_msg_fn for the store's scans, which stops
 * the scan at an id other than w->expect (when set) and records the hole. */
void chat_page_begin(struct chat_page_writer *w, sbuf *b, const char *command, const char *group,
                     const char *corr);
int chat_page_add(void *ctx, uint64_t id, const char *data, size_t len);

/* Ends the entry: "first" and "last" when bounds (a forward page; history
 * lists newest first and carries none), "head", "more", "truncated" when
 * set, and the store's incarnation. */
void chat_page_end(struct chat_page_writer *w, uint64_t head, bool more, bool truncated,
                   bool bounds, const char *incarnation);

/* A whole page entry at once (fetch, history) from a page read from the
 * store, as chat_page_begin, chat_page_add and chat_page_end write it. */
void chat_page_entry(sbuf *b, const char *command, const char *group, const char *corr,
                     const chat_page *page, uint64_t head, bool more, bool truncated, bool bounds,
                     const char *incarnation);

/* Sends client_id one entry {"command":"replay","group":group,"id":id,
 * "error":why} (no id when 0) and logs it: its catch-up of group cannot go
 * on as it was. */
void chat_reply_replay_error(struct chat_plugin *pl, const char *client_id, const char *group,
                             uint64_t id, const char *why);

/* Tells client (through its answer budget) that its publish to group was
 * a retry of message id, stored before as (group, its member, cid):
 * {"command":"publish","group","cid","id","duplicate":true}. */
void chat_respond_duplicate(struct chat_plugin *pl, const struct mosquitto *client,
                            const char *group, const char *cid, uint64_t id);

/* Sends a one-entry error response to client (through its answer budget)
 * and logs it. */
void chat_respond_error(struct chat_plugin *pl, const struct mosquitto *client, const char *cmd,
                        const char *group, const char *cid, const char *why);

/* Publishes env (len bytes), message id of group, to the group's topic
 * through the broker (to no client in particular), so that every
 * subscriber's delivery passes chat.c's read check: a stored envelope, to
 * a member. QoS 1, as the original publish's QoS is not known here: each
 * subscriber gets at most its own. The broker copies env. Returns whether
 * the broker took it; a failure is logged ("cannot <what> message ...")
 * and loses nothing: the message is stored, and catch-up brings it. */
bool chat_publish_group(struct chat_plugin *pl, const char *group, uint64_t id, const void *env,
                        size_t len, const char *what);

#endif
