/* control.h: private to the requests on $CONTROL/chat/v1, five files,
 * each calling only those listed after it:
 *   control.c         a request: its checks and bounds, the dispatch of its
 *                     commands (admin ones to admin.c), and the answer
 *   control_change.c  recall and edit: a stored message changed, and the
 *                     message that carries the change
 *   control_sync.c    sync, fetch and history: where a device stands and
 *                     the pages it reads
 *   control_member.c  join, leave, ack, read, and the receipts and presence
 *                     lists
 *   control_entry.c   the entries they answer with, and the fields more
 *                     than one of them reads
 * The rest of the plugin sees only chat_on_control, and the making and
 * freeing of control_change.c's state (plugin.h). Every
 * command function appends exactly one entry to r->out, an error entry
 * included, and runs on the broker's thread. */
#ifndef CHAT_CONTROL_H
#define CHAT_CONTROL_H

#include "plugin.h"

#include <cjson/cJSON.h>

/* One command being answered; control.c fills it per request and sets
 * cmd, group and corr per command. */
struct chat_control_req {
    struct chat_plugin *pl;
    struct mosquitto *client;
    const char *member;
    const char *device;
    sbuf *out;
    const char *cmd;
    const char *group; /* validated, or NULL */
    const char *corr;  /* the command's correlationData, echoed in its entry, or NULL */
    size_t work;       /* store records visited by the request so far */
    size_t work_max;   /* ... at most (MAX_WORK in control.c) */
    size_t cap;        /* bytes the whole answer may take (chat_answer_cap) */
    bool hold;         /* a push registration holds the answer (push.h) */
    bool nuls;         /* the request held \u0000, read as U+0001 (control.c) */
};

/* control_entry.c */

/* Opens r's entry: {"command":<r->cmd>, then "group" when r->group is set
 * and "correlationData" when r->corr is; the caller writes the rest and the
 * closing brace. */
void chat_control_entry_start(struct chat_control_req *r);

/* Appends a whole error entry {..., "error":why} and logs it at debug
 * level: a refusal is the client's business. why is not kept. */
void chat_control_fail(struct chat_control_req *r, const char *why);

/* Reads c's optional integer field name, in [lo, 2^53-1], into *out, and
 * whether it is there into *present. Returns false (and answers) when it
 * is present but not such an integer. */
bool chat_control_int_field(struct chat_control_req *r, const cJSON *c, const char *name,
                            uint64_t lo, bool *present, uint64_t *out);

/* Validates c's required "group" field, copies it into buf (of
 * CHAT_GROUP_MAX + 1 bytes) and points r->group at buf. Returns false (and
 * answers) when it is missing or not a valid group name. */
bool chat_control_group_field(struct chat_control_req *r, const cJSON *c, char *buf);

/* True when rc is CHAT_OK; otherwise logs the store's error and answers
 * "storage error". */
bool chat_control_storage_ok(struct chat_control_req *r, chat_err rc);

/* control_member.c: each answers command c for r. join and leave name the
 * caller, or with "member" someone else (admins only); list answers
 * receipts (receipts set) or presence. */
void chat_control_join(struct chat_control_req *r, const cJSON *c);
void chat_control_leave(struct chat_control_req *r, const cJSON *c);
void chat_control_ack(struct chat_control_req *r, const cJSON *c);
void chat_control_read(struct chat_control_req *r, const cJSON *c);
void chat_control_list(struct chat_control_req *r, const cJSON *c, bool receipts);

/* control_sync.c: sync (and the catch-ups it starts), and a page of fetch
 * (forward set: forward from a cursor) or history (backward from the
 * end). Both stop within r->work_max and r->cap. */
void chat_control_sync(struct chat_control_req *r, const cJSON *c);
void chat_control_page(struct chat_control_req *r, const cJSON *c, bool forward);

/* control_change.c: recall (recall set) or edit of a message of a group,
 * with the answer {"recalled"|"edited": N, "by": M}; the new message M is
 * published to the group's subscribers through the broker. */
void chat_control_change(struct chat_control_req *r, const cJSON *c, bool recall);

#endif
