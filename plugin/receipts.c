/* receipts.c: read markers (protocol v1.1, Read receipts): reads published
 * to <prefix>/<group>/read or sent as the `read` command, and the answer
 * to `receipts`. A read moves the member's marker and, in the same store
 * batch, the reading device's cursor: what a member read, the device that
 * says so has received. Markers that moved go to presence.c, which pushes
 * them to the group's subscribers. */
#include "access.h"
#include "reply.h"

#include <stdio.h>
#include <string.h>

const char *chat_read_apply(struct chat_plugin *pl, struct mosquitto *client, const char *group,
                            uint64_t id, bool on_topic, uint64_t *read, uint64_t *acked)
{
    const char *device = mosquitto_client_id(client);
    char member[CHAT_MEMBER_BUF];
    uint64_t marker = 0, cursor = 0;
    bool moved = false, found = false;

    if (!device) {
        return "client has no client id";
    }
    struct chat_decision d =
        chat_access_decide(pl, client, group, on_topic ? CHAT_DO_MARK_TOPIC : CHAT_DO_MARK);
    if (d.verdict != CHAT_ALLOW) {
        chat_replay_stop(pl, device, group); /* nothing it may read goes on */
        return d.why;
    }
    (void)chat_member(pl, client, member); /* admitted: it has a name */
    chat_err rc = chat_store_read_advance(pl->store, group, member, device, id, &marker, &cursor,
                                          &moved, &found);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "read of %s in %s", device, group);
        /* As an ack that cannot be stored (chat.c): the device holds what
         * it read, so its catch-up goes on. */
        chat_replay_acked(pl, client, group, id);
        return "storage error";
    }
    if (!found) {
        return "not a member of the group";
    }
    pl->stats.acks++; /* the ack the read implies was applied with it */
    chat_replay_acked(pl, client, group, cursor);
    if (moved) {
        chat_presence_read(pl, group, member, marker);
    }
    if (read) {
        *read = marker;
    }
    if (acked) {
        *acked = cursor;
    }
    return NULL;
}

const char *chat_read_publish(struct chat_plugin *pl, struct mosquitto_evt_message *ev,
                              const char *group)
{
    uint64_t id = 0;

    if (!chat_ack_parse(ev->payload, ev->payloadlen, &id)) {
        return "read payload must be a decimal message id";
    }
    /* As for acks: published to the read topic (chat_access_decide). */
    const char *why = chat_read_apply(pl, ev->client, group, id, true, NULL, NULL);
    if (why) {
        return why;
    }
    /* Accepted. The read check keeps it from every subscriber; a retained
     * copy would only be one more thing kept for nobody. */
    ev->retain = false;
    return NULL;
}

/* What the walk over the members writes with. */
struct reads_writer {
    sbuf *b;
    size_t cap;
    bool first;
    bool full;                          /* stopped for want of room */
    char last[CHAT_STORE_MAX_NAME + 1]; /* the last member written */
};

static int write_read(void *ctx, const char *member, uint64_t read)
{
    struct reads_writer *w = ctx;
    size_t len = strlen(member);
    if (w->b->len + CHAT_PROTO_JSON_STRING_MAX(len) + 64 > w->cap) {
        w->full = true;
        return 1;
    }
    sbuf_puts(w->b, w->first ? "" : ",");
    w->first = false;
    sbuf_json_str(w->b, member);
    sbuf_add(w->b, ":", 1);
    sbuf_u64(w->b, read);
    memcpy(w->last, member, len + 1);
    return 0;
}

const char *chat_receipts_answer(struct chat_plugin *pl, struct mosquitto *client,
                                 const char *group, const char *after, size_t limit, sbuf *b,
                                 size_t cap)
{
    const char *why = NULL;
    uint64_t members = 0;
    bool more = false;
    struct reads_writer w = {.b = b, .cap = cap, .first = true};

    /* Members only, and (behind other access checkers) only those the
     * broker lets read the group: nobody else learns even the count. */
    if ((why = chat_access_list(pl, client, group, &members)) != NULL) {
        return why;
    }
    size_t mark = b->len;
    sbuf_puts(b, ",\"members\":");
    sbuf_u64(b, members);
    sbuf_puts(b, ",\"reads\":{");
    chat_err rc = chat_store_reads(pl->store, group, after, limit, write_read, &w, &more);
    if (rc != CHAT_OK) {
        b->len = mark;
        chat_log_store_error(pl, rc, "read markers of %s", group);
        return "storage error";
    }
    sbuf_puts(b, more ? "},\"more\":true" : "},\"more\":false");
    if (more && !w.first) {
        /* Where the contract is silent, as sync does: where the next page
         * starts. */
        sbuf_puts(b, ",\"after\":");
        sbuf_json_str(b, w.last);
    }
    return NULL;
}
