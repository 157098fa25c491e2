/* admin.c: the admin commands on $CONTROL/chat/v1 (groups, members, stats,
 * delete, compact, backup), answered only for usernames in
 * plugin_opt_admins, and the work they leave to the tick: the rest of a
 * group's deletion, and the end of a store job (backup, compaction).
 *
 * Bounds on the broker's thread: a listing visits at most the request's
 * store records (MAX_WORK in control.c) and fills at most its answer's
 * bytes, then says "more" with the name to go on "after"; a deletion's
 * first step (which makes the group read as empty) runs in the request and
 * the rest from the tick, TICK_BUDGET_MS (admin_jobs.c) per broker loop
 * pass; backups and
 * compactions run on the store's job thread.
 *
 * This file has the dispatch, the listings and stats; delete, compact and
 * backup, and the tick, are in admin_jobs.c (see admin.h). */
#include "access.h"
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT_DEFAULT 100u     /* groups or members per answer */
#define LIMIT_MAX 1000u        /* ... at most */
#define MEMBERS_COUNTED 10000u /* members counted per group in `groups` */
#define DEVICES_LISTED 1000u   /* devices listed per member in `members` */
#define ENTRY_ROOM 4096u       /* bytes kept free for an entry's tail */

static const char *const commands[] = {"groups", "members", "stats", "delete", "compact", "backup"};

bool chat_admin_is_command(const char *cmd)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (!strcmp(cmd, commands[i])) {
            return true;
        }
    }
    return false;
}

/* ===========================================================================
 * Fields and bounds of a listing
 * ========================================================================= */

/* after (optional string) and limit (optional integer 1..LIMIT_MAX). */
static bool paging_fields(const struct chat_admin_req *r, const cJSON *c, const char *group,
                          const char **after, size_t *limit)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(c, "after");
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(c, "limit");
    uint64_t v = LIMIT_DEFAULT;
    if (a && (!cJSON_IsString(a) || strlen(a->valuestring) > CHAT_STORE_MAX_NAME)) {
        chat_admin_fail(r, group, "after must be a name of at most 1024 bytes");
        return false;
    }
    if (l && (!cJSON_IsNumber(l) || !chat_proto_json_int(l->valuedouble, 1, &v) || v > LIMIT_MAX)) {
        chat_admin_fail(r, group, "limit must be an integer from 1 to 1000");
        return false;
    }
    *after = a ? a->valuestring : NULL;
    *limit = (size_t)v;
    return true;
}

/* Whether the request may visit n more store records; counts them. */
static bool spend(const struct chat_admin_req *r, size_t n)
{
    if (*r->work + n > r->work_max) {
        return false;
    }
    *r->work += n;
    return true;
}

/* Room left in the answer for something of about n bytes. */
static bool room(const struct chat_admin_req *r, size_t n)
{
    return r->out->len + n + ENTRY_ROOM <= r->cap;
}

/* ===========================================================================
 * groups, members
 * ========================================================================= */

/* Names a walk handed over: the store's walks must not call the store, so
 * the names are kept and looked at after it. */
struct names {
    char **name;
    uint64_t *num;
    size_t n, cap;
    bool failed;
};

static int keep_name(void *ctx, const char *name, uint64_t num)
{
    struct names *l = ctx;
    char *copy = strdup(name);
    if (!copy) {
        l->failed = true;
        return 1;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **nn = realloc(l->name, cap * sizeof(*nn));
        uint64_t *nu = nn ? realloc(l->num, cap * sizeof(*nu)) : NULL;
        if (nn) {
            l->name = nn;
        }
        if (!nn || !nu) {
            free(copy);
            l->failed = true;
            return 1;
        }
        l->num = nu;
        l->cap = cap;
    }
    l->name[l->n] = copy;
    l->num[l->n++] = num;
    return 0;
}

static void names_free(struct names *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->name[i]);
    }
    free(l->name);
    free(l->num);
}

static int count_one(void *ctx, const char *member, uint64_t joined)
{
    (void)member;
    (void)joined;
    (*(size_t *)ctx)++;
    return 0;
}

/* Ends a listing: "more" and, when there is more, where to go on. */
static void list_end(const struct chat_admin_req *r, bool more, const char *last)
{
    sbuf_puts(r->out, more ? "],\"more\":true" : "],\"more\":false");
    if (more && last) {
        sbuf_puts(r->out, ",\"after\":");
        sbuf_json_str(r->out, last);
    }
    sbuf_add(r->out, "}", 1);
}

static void cmd_groups(const struct chat_admin_req *r, const cJSON *c)
{
    struct chat_plugin *pl = r->pl;
    struct names l = {0};
    const char *after = NULL, *last = NULL;
    size_t limit = 0, listed = 0;
    bool done = false;

    if (!paging_fields(r, c, NULL, &after, &limit)) {
        return;
    }
    limit = limit < r->work_max - *r->work ? limit : r->work_max - *r->work;
    if (limit == 0 || !spend(r, limit)) {
        chat_admin_fail(r, NULL,
                        "request too large: it asks for too much work at once; send fewer commands "
                        "per request");
        return;
    }
    chat_err rc = chat_store_groups(pl->store, after, limit, keep_name, &l, &done);
    if (l.failed) {
        names_free(&l);
        chat_admin_fail(r, NULL, "out of memory");
        return;
    }
    if (!chat_admin_storage_ok(r, NULL, rc)) {
        names_free(&l);
        return;
    }
    size_t mark = r->out->len;
    chat_admin_entry_start(r, NULL);
    sbuf_puts(r->out, ",\"groups\":[");
    for (size_t i = 0; i < l.n; i++) {
        uint64_t first = 1;
        size_t members = 0, budget = r->work_max - *r->work;
        bool all = false;
        if (budget == 0 || !room(r, 6 * strlen(l.name[i]) + 128)) {
            break;
        }
        budget = budget < MEMBERS_COUNTED ? budget : MEMBERS_COUNTED;
        rc = chat_store_first(pl->store, l.name[i], &first);
        if (rc == CHAT_OK) {
            rc = chat_store_group_members(pl->store, l.name[i], NULL, budget, count_one, &members,
                                          &all);
        }
        if (rc != CHAT_OK) {
            r->out->len = mark;
            names_free(&l);
            chat_admin_storage_ok(r, NULL, rc);
            return;
        }
        if (!all && budget < MEMBERS_COUNTED && listed > 0) {
            break; /* the request's budget ran short: this group opens the next page */
        }
        (void)spend(r, members);
        sbuf_puts(r->out, listed++ ? ",{\"group\":" : "{\"group\":");
        sbuf_json_str(r->out, l.name[i]);
        sbuf_puts(r->out, ",\"head\":");
        sbuf_u64(r->out, l.num[i]);
        sbuf_puts(r->out, ",\"first\":");
        sbuf_u64(r->out, first);
        sbuf_puts(r->out, ",\"members\":");
        sbuf_u64(r->out, members);
        if (!all) {
            /* Where the contract is silent: a count cut short says so. */
            sbuf_puts(r->out, ",\"members_capped\":true");
        }
        sbuf_add(r->out, "}", 1);
        last = l.name[i];
    }
    list_end(r, !done || listed < l.n, last ? last : after);
    names_free(&l);
}

struct device_list {
    const struct chat_admin_req *r;
    size_t count;
};

static int put_device(void *ctx, const char *device, uint64_t acked, int64_t used)
{
    struct device_list *dl = ctx;
    sbuf *b = dl->r->out;
    sbuf_puts(b, dl->count++ ? ",{\"device\":" : "{\"device\":");
    sbuf_json_str(b, device);
    sbuf_puts(b, ",\"acked\":");
    sbuf_u64(b, acked);
    sbuf_puts(b, ",\"used\":");
    sbuf_u64(b, used > 0 ? (uint64_t)used : 0);
    sbuf_add(b, "}", 1);
    /* Out of room: stop here, the member's entry says so. */
    return room(dl->r, 6 * (size_t)CHAT_STORE_MAX_NAME) ? 0 : 1;
}

static void cmd_members(const struct chat_admin_req *r, const cJSON *c)
{
    struct chat_plugin *pl = r->pl;
    char buf[CHAT_GROUP_MAX + 1];
    struct names l = {0};
    const char *group = chat_admin_group_field(r, c, buf), *after = NULL, *last = NULL;
    size_t limit = 0, listed = 0;
    bool done = false;

    if (!group || !paging_fields(r, c, group, &after, &limit)) {
        return;
    }
    limit = limit < r->work_max - *r->work ? limit : r->work_max - *r->work;
    if (limit == 0 || !spend(r, limit)) {
        chat_admin_fail(r, group,
                        "request too large: it asks for too much work at once; send fewer "
                        "commands per request");
        return;
    }
    chat_err rc = chat_store_group_members(pl->store, group, after, limit, keep_name, &l, &done);
    if (l.failed) {
        names_free(&l);
        chat_admin_fail(r, group, "out of memory");
        return;
    }
    if (!chat_admin_storage_ok(r, group, rc)) {
        names_free(&l);
        return;
    }
    size_t mark = r->out->len;
    chat_admin_entry_start(r, group);
    sbuf_puts(r->out, ",\"members\":[");
    for (size_t i = 0; i < l.n; i++) {
        size_t budget = r->work_max - *r->work;
        bool all = false;
        if (budget == 0 || !room(r, 12 * (size_t)CHAT_STORE_MAX_NAME)) {
            break;
        }
        budget = budget < DEVICES_LISTED ? budget : DEVICES_LISTED;
        /* The read marker of protocol v1.1, as receipts shows it. */
        uint64_t read = 0;
        rc = chat_store_read_get(pl->store, group, l.name[i], &read);
        if (rc != CHAT_OK) {
            r->out->len = mark;
            names_free(&l);
            chat_admin_storage_ok(r, group, rc);
            return;
        }
        size_t entry_mark = r->out->len;
        sbuf_puts(r->out, listed ? ",{\"member\":" : "{\"member\":");
        sbuf_json_str(r->out, l.name[i]);
        sbuf_puts(r->out, ",\"joined\":");
        sbuf_u64(r->out, l.num[i]);
        sbuf_puts(r->out, ",\"read\":");
        sbuf_u64(r->out, read);
        sbuf_puts(r->out, ",\"devices\":[");
        struct device_list dl = {r, 0};
        rc = chat_store_member_devices(pl->store, group, l.name[i], budget, put_device, &dl, &all);
        if (rc != CHAT_OK) {
            r->out->len = mark;
            names_free(&l);
            chat_admin_storage_ok(r, group, rc);
            return;
        }
        if (!all && budget < DEVICES_LISTED && listed > 0) {
            r->out->len = entry_mark; /* out of budget: this member opens the next page */
            break;
        }
        listed++;
        (void)spend(r, dl.count);
        sbuf_add(r->out, "]", 1);
        if (!all) {
            sbuf_puts(r->out, ",\"devices_capped\":true");
        }
        sbuf_add(r->out, "}", 1);
        last = l.name[i];
    }
    list_end(r, !done || listed < l.n, last ? last : after);
    names_free(&l);
}

/* ===========================================================================
 * stats
 * ========================================================================= */

static const char *job_kind(chat_job_kind k)
{
    return k == CHAT_JOB_BACKUP ? "backup" : k == CHAT_JOB_COMPACT ? "compact" : "none";
}

static const char *job_status(chat_job_status s)
{
    switch (s) {
    case CHAT_JOB_RUNNING:
        return "running";
    case CHAT_JOB_DONE:
        return "done";
    case CHAT_JOB_FAILED:
        return "failed";
    default:
        return "idle";
    }
}

static void cmd_stats(const struct chat_admin_req *r)
{
    chat_job_state js;
    chat_err rc = chat_store_job_state(r->pl->store, &js);
    if (!chat_admin_storage_ok(r, NULL, rc)) {
        return;
    }
    chat_admin_entry_start(r, NULL);
    sbuf_puts(r->out, ",\"figures\":{");
    chat_stats_json(r->pl, r->out);
    sbuf_puts(r->out, "},\"deletions\":");
    sbuf_u64(r->out, chat_admin_deletions(r->pl));
    sbuf_puts(r->out, ",\"job\":{\"kind\":");
    sbuf_json_str(r->out, job_kind(js.kind));
    sbuf_puts(r->out, ",\"state\":");
    sbuf_json_str(r->out, job_status(js.status));
    if (js.kind == CHAT_JOB_BACKUP) {
        sbuf_puts(r->out, ",\"path\":");
        sbuf_json_str(r->out, js.path);
        sbuf_puts(r->out, ",\"records\":");
        sbuf_u64(r->out, js.records);
    }
    if (js.status == CHAT_JOB_FAILED) {
        sbuf_puts(r->out, ",\"error\":");
        sbuf_json_str(r->out, js.error);
    }
    sbuf_puts(r->out, "}}");
}

/* ===========================================================================
 * Dispatch and the tick
 * ========================================================================= */

void chat_admin_run(const struct chat_admin_req *r, const cJSON *c)
{
    struct chat_decision d = chat_access_decide(r->pl, r->client, NULL, CHAT_DO_ADMIN);
    if (d.verdict != CHAT_ALLOW) {
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "group");
        bool named =
            cJSON_IsString(g) && !chat_proto_group_error(g->valuestring, strlen(g->valuestring));
        char why[64];
        snprintf(why, sizeof(why), "only an admin may %s", r->cmd);
        chat_admin_fail(r, named ? g->valuestring : NULL, d.why ? d.why : why);
        return;
    }
    if (!strcmp(r->cmd, "groups")) {
        cmd_groups(r, c);
    } else if (!strcmp(r->cmd, "members")) {
        cmd_members(r, c);
    } else if (!strcmp(r->cmd, "stats")) {
        cmd_stats(r);
    } else if (!strcmp(r->cmd, "delete")) {
        chat_admin_delete(r, c);
    } else if (!strcmp(r->cmd, "compact")) {
        chat_admin_compact(r);
    } else {
        chat_admin_backup(r);
    }
}
