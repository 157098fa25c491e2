/* control_member.c: the commands on a member's place in a group: join and
 * leave, ack and read (its cursor and read marker), and the receipts and
 * presence lists of the group's members (see control.h). */
#include "access.h"
#include "control.h"

#include <string.h>

/* The reason to refuse a "member" field, or NULL. */
static const char *member_field_error(const cJSON *m, bool joining)
{
    static const char *const bad = "member must be a non-empty string of at most 1024 bytes";
    size_t len = cJSON_IsString(m) ? strlen(m->valuestring) : 0;
    if (len == 0 || len > CHAT_PROTO_NAME_MAX) {
        return bad;
    }
    /* A join names a member by the rule of every member name (proto/,
     * which mqchat-store import applies too): one a client could connect
     * as. A leave may name one that an older version let in. */
    if (joining) {
        return chat_proto_member_error(m->valuestring, len);
    }
    return chat_proto_utf8_valid(m->valuestring, len) ? NULL : bad;
}

/* join/leave name the caller, or with "member" someone else (admins only,
 * and only admins in closed groups). */
static bool target_member(struct chat_control_req *r, const cJSON *c, bool joining,
                          const char **member, bool *is_admin)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(c, "member");
    struct chat_decision a = chat_access_decide(r->pl, r->client, NULL, CHAT_DO_ADMIN);
    bool admin = a.verdict == CHAT_ALLOW;
    const char *why = NULL;

    *member = r->member;
    if (m) {
        if ((why = member_field_error(m, joining)) != NULL) {
            chat_control_fail(r, why);
            return false;
        }
        *member = m->valuestring;
    }
    if (strcmp(*member, r->member) != 0 && !admin) {
        chat_control_fail(r, a.why ? a.why : "only an admin may add or remove another member");
        return false;
    }
    if (!r->pl->cfg.open_groups && !admin) {
        chat_control_fail(r,
                          a.why ? a.why : "only an admin may change membership of closed groups");
        return false;
    }
    *is_admin = admin;
    return true;
}

void chat_control_join(struct chat_control_req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    const char *member = NULL;
    uint64_t joined = 0, head = 0;
    bool admin = false;
    if (!chat_control_group_field(r, c, group) || !target_member(r, c, true, &member, &admin)) {
        return;
    }
    struct chat_decision d = chat_access_decide(r->pl, r->client, group, CHAT_DO_JOIN);
    if (!admin && d.verdict != CHAT_ALLOW) {
        chat_control_fail(r, d.why);
        return;
    }
    /* Joining oneself joins the asking device too, in the same store call;
     * a member an admin adds has no device until one of its own uses the
     * group. */
    const char *device = !strcmp(member, r->member) ? r->device : NULL;
    if (!chat_control_storage_ok(r, chat_join_group(r->pl, group, member, device, &joined)) ||
        !chat_control_storage_ok(r, chat_store_head(r->pl->store, group, &head))) {
        return;
    }
    chat_control_entry_start(r);
    sbuf_puts(r->out, ",\"member\":");
    sbuf_json_str(r->out, member);
    sbuf_puts(r->out, ",\"head\":");
    sbuf_u64(r->out, head);
    sbuf_add(r->out, "}", 1);
}

void chat_control_leave(struct chat_control_req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    const char *member = NULL;
    bool admin = false;
    if (!chat_control_group_field(r, c, group) || !target_member(r, c, false, &member, &admin)) {
        return;
    }
    if (!chat_control_storage_ok(r, chat_store_member_remove(r->pl->store, group, member))) {
        return;
    }
    chat_replay_stop_member(r->pl, member, group);
    chat_presence_left(r->pl, member, group);
    chat_control_entry_start(r);
    sbuf_puts(r->out, ",\"member\":");
    sbuf_json_str(r->out, member);
    sbuf_add(r->out, "}", 1);
}

/* ack and read: the command's group and its (required) id; false when
 * either is missing or bad, after answering the caller. */
static bool group_and_id(struct chat_control_req *r, const cJSON *c, char group[CHAT_GROUP_MAX + 1],
                         uint64_t *id)
{
    bool present = false;

    if (!chat_control_group_field(r, c, group) ||
        !chat_control_int_field(r, c, "id", 0, &present, id)) {
        return false;
    }
    if (!present) {
        chat_control_fail(r, "id is missing");
        return false;
    }
    return true;
}

void chat_control_ack(struct chat_control_req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t id = 0, now = 0;
    const char *why = NULL;
    if (!group_and_id(r, c, group, &id)) {
        return;
    }
    if ((why = chat_apply_ack(r->pl, r->client, group, id, false, &now)) != NULL) {
        chat_control_fail(r, why);
        return;
    }
    chat_control_entry_start(r);
    sbuf_puts(r->out, ",\"acked\":");
    sbuf_u64(r->out, now);
    sbuf_add(r->out, "}", 1);
}

/* read: as ack, and the member's read marker with it (receipts.c). */
void chat_control_read(struct chat_control_req *r, const cJSON *c)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t id = 0, read = 0, acked = 0;
    const char *why = NULL;
    if (!group_and_id(r, c, group, &id)) {
        return;
    }
    if ((why = chat_read_apply(r->pl, r->client, group, id, false, &read, &acked)) != NULL) {
        chat_control_fail(r, why);
        return;
    }
    chat_control_entry_start(r);
    sbuf_puts(r->out, ",\"read\":");
    sbuf_u64(r->out, read);
    sbuf_puts(r->out, ",\"acked\":");
    sbuf_u64(r->out, acked);
    sbuf_add(r->out, "}", 1);
}

/* receipts and presence: a list of the group's members in name order,
 * paged with after and limit (receipts.c, presence.c write it). */
void chat_control_list(struct chat_control_req *r, const cJSON *c, bool receipts)
{
    char group[CHAT_GROUP_MAX + 1];
    uint64_t limit = CHAT_PROTO_LIST_MAX;
    bool has_limit = false;
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(c, "after");
    if (!chat_control_group_field(r, c, group) ||
        !chat_control_int_field(r, c, "limit", 1, &has_limit, &limit)) {
        return;
    }
    if (after && (!cJSON_IsString(after) || strlen(after->valuestring) > CHAT_STORE_MAX_NAME)) {
        chat_control_fail(r, "after must be a member name");
        return;
    }
    if (limit > CHAT_PROTO_LIST_MAX) {
        limit = CHAT_PROTO_LIST_MAX;
    }
    r->work += (size_t)limit;
    size_t mark = r->out->len;
    chat_control_entry_start(r);
    const char *a = after ? after->valuestring : NULL;
    const char *why =
        receipts ? chat_receipts_answer(r->pl, r->client, group, a, (size_t)limit, r->out, r->cap)
                 : chat_presence_answer(r->pl, r->client, group, a, (size_t)limit, r->out, r->cap);
    if (why) {
        r->out->len = mark;
        chat_control_fail(r, why);
        return;
    }
    sbuf_add(r->out, "}", 1);
}
