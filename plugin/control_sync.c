/* control_sync.c: the commands a device reads with: sync (where it stands
 * in each of its member's groups, and the catch-ups that starts) and the
 * pages of fetch and history; each bounded in store records and bytes (see
 * control.h). */
#include "access.h"
#include "control.h"
#include "reply.h"

#include <stdio.h>
#include <string.h>

struct sync_walk {
    struct chat_control_req *r;
    bool replay;
    bool first;
    bool more;                          /* stopped early: the answer says "more" */
    char last[CHAT_STORE_MAX_NAME + 1]; /* the last group listed */
    const char *after;                  /* list groups after this one, or NULL */
    chat_err rc;
};

/* Where the device's delivery in group stands, as chat_store_cursor_start
 * would start it, without writing a cursor: a client that only counts its
 * unread messages (sync without replay, from a new client id each time)
 * must not leave a key per group behind. */
static chat_err cursor_peek(struct chat_control_req *r, const char *group, uint64_t joined,
                            uint64_t *acked)
{
    bool found = false;
    uint64_t best = 0;
    chat_err rc = chat_store_cursor_get(r->pl->store, group, r->member, r->device, acked, &found);
    if (rc != CHAT_OK || found) {
        return rc;
    }
    *acked = joined;
    rc = chat_store_cursor_max(r->pl->store, group, r->member, &best, &found);
    if (rc == CHAT_OK && found && best > *acked) {
        *acked = best;
    }
    return rc;
}

static int sync_group(void *ctx, const char *group, uint64_t joined)
{
    struct sync_walk *w = ctx;
    struct chat_control_req *r = w->r;
    uint64_t head = 0, acked = 0;

    if (w->after && strcmp(group, w->after) <= 0) {
        return 0;
    }
    /* Bounded in work and in bytes: the rest comes with "after". */
    if (r->work >= r->work_max || r->out->len + 512 + strlen(group) * 6 > r->cap) {
        w->more = true;
        return 1;
    }
    r->work++;
    /* A member whom the broker would not let read the group learns
     * nothing of it here either (write-only access). */
    if (chat_access_decide(r->pl, r->client, group, CHAT_DO_HISTORY).verdict != CHAT_ALLOW) {
        return 0;
    }
    /* Only a catch-up that starts writes the device's cursor; an existing
     * one is marked used (device expiry), at most once a day. */
    w->rc = chat_store_cursor_touch(r->pl->store, group, r->member, r->device, chat_now_ms());
    if (w->rc == CHAT_OK) {
        w->rc = cursor_peek(r, group, joined, &acked);
    }
    if (w->rc == CHAT_OK) {
        w->rc = chat_store_head(r->pl->store, group, &head);
    }
    if (w->rc != CHAT_OK) {
        return 1;
    }
    sbuf_puts(r->out, w->first ? "{\"group\":" : ",{\"group\":");
    w->first = false;
    sbuf_json_str(r->out, group);
    sbuf_puts(r->out, ",\"head\":");
    sbuf_u64(r->out, head);
    sbuf_puts(r->out, ",\"acked\":");
    sbuf_u64(r->out, acked);
    sbuf_puts(r->out, ",\"unread\":");
    sbuf_u64(r->out, head > acked ? head - acked : 0);
    sbuf_add(r->out, "}", 1);
    snprintf(w->last, sizeof(w->last), "%s", group);
    if (w->replay && head > acked) {
        chat_replay_start(r->pl, r->client, group);
    }
    return 0;
}

void chat_control_sync(struct chat_control_req *r, const cJSON *c)
{
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(c, "replay");
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(c, "after");
    struct sync_walk w = {.r = r, .first = true, .rc = CHAT_OK};
    if (rep && !cJSON_IsBool(rep)) {
        chat_control_fail(r, "replay must be true or false");
        return;
    }
    if (after && !cJSON_IsString(after)) {
        chat_control_fail(r, "after must be a group name");
        return;
    }
    w.after = after ? after->valuestring : NULL;
    /* PROTOCOL.md: sync starts the catch-up of every group with unread
     * messages; "replay": false asks for the counts alone (lazy clients). */
    w.replay = r->pl->cfg.replay && (!rep || cJSON_IsTrue(rep));
    struct chat_decision d = chat_access_decide(r->pl, r->client, NULL, CHAT_DO_SYNC);
    if (d.verdict != CHAT_ALLOW) {
        chat_control_fail(r, d.why);
        return;
    }
    size_t mark = r->out->len;
    chat_control_entry_start(r);
    /* Ids name messages within one incarnation of the store (see
     * chat_store_incarnation): a client that holds ids of another must
     * start over from its cursor. */
    sbuf_puts(r->out, ",\"incarnation\":");
    sbuf_json_str(r->out, chat_store_incarnation(r->pl->store));
    sbuf_puts(r->out, ",\"groups\":[");
    chat_err rc = chat_store_member_groups(r->pl->store, r->member, sync_group, &w);
    if (w.rc != CHAT_OK || rc != CHAT_OK) {
        r->out->len = mark; /* drop the half-written entry */
        chat_control_storage_ok(r, w.rc != CHAT_OK ? w.rc : rc);
        return;
    }
    sbuf_puts(r->out, "]");
    if (w.more) {
        /* Where the contract is silent: a member of more groups than one
         * answer holds gets them in runs, like history. */
        sbuf_puts(r->out, ",\"more\":true,\"after\":");
        sbuf_json_str(r->out, w.last);
    }
    sbuf_puts(r->out, "}");
}

/* fetch (forward from a cursor) and history (backward from the end). */
void chat_control_page(struct chat_control_req *r, const cJSON *c, bool forward)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t from = 0, limit = 0, head = 0, first = 1;
    bool has_from = false, has_limit = false;
    chat_page *page = NULL;

    if (!chat_control_group_field(r, c, group) ||
        !chat_control_int_field(r, c, forward ? "after" : "before", forward ? 0 : 1, &has_from,
                                &from) ||
        !chat_control_int_field(r, c, "limit", 1, &has_limit, &limit)) {
        return;
    }
    if (r->out->len + r->pl->cfg.page_bytes + 6 * r->pl->cfg.max_payload + 4096 > r->cap) {
        chat_control_fail(r,
                          "response too large: send fewer fetch or history commands per request");
        return;
    }
    /* Members read their groups; an admin inspects any group read-only,
     * without joining (so member counts and "read by k of n" stay as they
     * are) and without a cursor of its own there. */
    struct chat_decision d = chat_access_decide(r->pl, r->client, group, CHAT_DO_INSPECT);
    if (d.verdict != CHAT_ALLOW) {
        chat_control_fail(r, d.why);
        return;
    }
    if (!chat_control_storage_ok(r, chat_store_head(r->pl->store, group, &head)) ||
        !chat_control_storage_ok(r, chat_store_first(r->pl->store, group, &first))) {
        return;
    }
    if (!has_from && forward && !d.member) {
        from = 0; /* an admin inspecting: from the oldest message kept */
    } else if (!has_from && forward) {
        bool found = false;
        if (!chat_control_storage_ok(r, chat_store_cursor_start(r->pl->store, group, r->member,
                                                                r->device, &from, &found))) {
            return;
        }
    } else if (!has_from) {
        from = head + 1;
    }
    if (!has_limit || limit > r->pl->cfg.page_size) {
        limit = r->pl->cfg.page_size;
    }
    r->work += (size_t)limit;
    chat_err rc = forward ? chat_store_read_forward(r->pl->store, group, from, (size_t)limit,
                                                    r->pl->cfg.page_bytes, &page)
                          : chat_store_read_backward(r->pl->store, group, from, (size_t)limit,
                                                     r->pl->cfg.page_bytes, &page);
    if (!chat_control_storage_ok(r, rc)) {
        return;
    }
    if (forward) {
        bool truncated = from + 1 < first;
        chat_page_entry(r->out, "fetch", group, r->corr, page, head, page->more, truncated, true,
                        chat_store_incarnation(r->pl->store));
    } else {
        bool truncated = !page->more && first > 1;
        chat_page_entry(r->out, "history", group, r->corr, page, head, page->more, truncated, false,
                        chat_store_incarnation(r->pl->store));
    }
    chat_page_destroy(page);
}
