/* integ_receipts: what the tests of read receipts and presence (protocol
 * v1.1) share: integ_receipts_reads.c (markers, errors, coalesced),
 * integ_receipts_online.c (presence, keepalive, restart) and
 * integ_receipts_closed.c (nonmember, acl). Clients of one user, commands
 * matched to their answers by correlationData, the expected receipts and
 * online lists, and the pushes a device got folded together. Every function
 * fails the test when it cannot do its job (tests/support/util.h). */
#ifndef CHAT_INTEG_RECEIPTS_H
#define CHAT_INTEG_RECEIPTS_H

#include "harness.h"

#include <stdbool.h>
#include <stdint.h>

#define WAIT_MS 5000
#define QUIET_MS 700
#define GROUP "room"

/* What the pushes a device got say, folded together. */
#define MEMBERS_MAX 16
struct rcp_seen {
    int n;
    char name[MEMBERS_MAX][32];
    int64_t read[MEMBERS_MAX]; /* latest pushed marker, -1 none */
    int online[MEMBERS_MAX];   /* latest pushed state: 1, 0, -1 none */
    int pushes;                /* push messages */
    int reads_entries;         /* reads entries in them */
};

/* Connects as (id, user); pushes: it asks for the plugin's pushes. */
harness_client *rcp_connect(ts_broker *b, const char *id, const char *user, bool pushes);

/* Sends one command (a JSON object text without its closing brace) with a
 * fresh correlationData and returns its entry's response, which the caller
 * frees; pushes arriving meanwhile stay queued. */
cJSON *rcp_ask(harness_client *c, const char *cmd);

/* Publishes n messages to the group from c. */
void rcp_send_n(harness_client *c, int n);

/* A read on the topic, at QoS 1 (applied when this returns). */
void rcp_read_topic(harness_client *c, int64_t id);

/* The read command; checks the answer's marker and cursor. */
void rcp_read_command(harness_client *c, int64_t id, int64_t want_read, int64_t want_acked);

/* The device's cursor in the group, as sync reports it. */
int64_t rcp_cursor_of(harness_client *c);

/* Fails unless receipts (extra appended to the command, e.g. ,"limit":1)
 * answers want ("name:id name:id ..." in the answer's order), the member
 * count and more. */
void rcp_expect_receipts(harness_client *c, const char *extra, const char *want,
                         int64_t want_members, bool want_more);

/* Fails unless the presence command answers want (online names joined with
 * spaces) and the member count. */
void rcp_expect_online(harness_client *c, const char *want, int64_t want_members);

/* Fails unless the only entry of cmd is the error why of command, with no
 * other field but command, group and correlationData (nothing learnt). */
void rcp_expect_refused(harness_client *c, const char *cmd, const char *command, const char *why);

/* harness_msg_pred: m is a push of the plugin's. */
bool rcp_is_push(const harness_msg *m, void *arg);

/* Folds pushes into s until member's pushed state is online (1, 0), or its
 * pushed marker is read (online < 0), within wait_ms (rcp_wait_push:
 * WAIT_MS). */
void rcp_wait_push_ms(harness_client *c, struct rcp_seen *s, const char *member, int online,
                      int64_t read, int wait_ms);
void rcp_wait_push(harness_client *c, struct rcp_seen *s, const char *member, int online,
                   int64_t read);

/* Fails if a push comes within ms. */
void rcp_expect_no_push(harness_client *c, int ms, const char *what);

#endif
