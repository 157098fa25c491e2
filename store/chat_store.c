/* chat_store: the public interface of chat_store.h in front of a backend
 * (store_backend.h): it picks the backend at open, checks the arguments that
 * need no data, builds pages, and passes every other call to the backend's
 * ops. The design note of chat_store.h describes the LevelDB backend's keys
 * and the invariants every backend keeps. */
#include "chat_store.h"
#include "ldb_job.h"
#include "ldb_store.h"
#include "pg_store.h"
#include "store_backend.h"
#include "store_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Errors
 * --------------------------------------------------------------------- */

const char *chat_strerror(chat_err err)
{
    switch (err) {
    case CHAT_OK:
        return "success";
    case CHAT_ENOMEM:
        return "out of memory";
    case CHAT_EINVAL:
        return "invalid argument";
    case CHAT_EIO:
        return "storage I/O error";
    case CHAT_ECORRUPT:
        return "stored record is corrupt";
    case CHAT_ECONFLICT:
        return "id is not the group's next id";
    case CHAT_EFORMAT:
        return "store format is newer than this version reads";
    }
    return "unknown error";
}

const char *chat_store_last_error(const chat_store *st)
{
    return st ? st->last_err : "";
}

/* ------------------------------------------------------------------------
 * Open, close and the whole store
 * --------------------------------------------------------------------- */

/* Repairing is LevelDB's: a database server repairs with its own tools. */
static chat_err repair_elsewhere(const char *path, char **errmsg)
{
    (void)path;
    store_open_error(errmsg, "a PostgreSQL store is repaired with PostgreSQL's own tools", NULL);
    return CHAT_EINVAL;
}

/* What a backend does not offer (yet): its op is NULL. */
static chat_err unsupported(chat_store *st, const char *what)
{
    snprintf(st->last_err, sizeof(st->last_err), "%s is not offered by the %s store", what,
             st->ops->name);
    return CHAT_EINVAL;
}

/* The backends by name; the first is the default. */
static const struct backend {
    const char *name;
    store_open_fn *open;
    store_repair_fn *repair;
} backends[] = {
    {LDB_NAME, ldb_open, ldb_repair},
    {PG_NAME, pg_open, repair_elsewhere},
};

chat_err chat_store_open(const char *path, chat_sync sync, chat_store **out, char **errmsg)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    opts.sync = sync;
    return chat_store_open_opts(path, &opts, out, errmsg);
}

chat_err chat_store_open_opts(const char *path, const chat_store_opts *opts, chat_store **out,
                              char **errmsg)
{
    if (errmsg) {
        *errmsg = NULL;
    }
    if (!path || !opts || !out || opts->sync > CHAT_SYNC_ALWAYS) {
        return CHAT_EINVAL;
    }
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        if (!opts->backend || strcmp(opts->backend, backends[i].name) == 0) {
            return backends[i].open(path, opts, out, errmsg);
        }
    }
    store_open_error(errmsg, "unknown store backend", opts->backend);
    return CHAT_EINVAL;
}

void chat_store_close(chat_store *st)
{
    if (st) {
        st->ops->close(st);
    }
}

const char *chat_store_incarnation(const chat_store *st)
{
    return st ? st->incarnation : "";
}

bool chat_store_recovered(const chat_store *st)
{
    return st && st->recovered;
}

chat_err chat_store_stats(chat_store *st, uint64_t *groups, uint64_t *approx_bytes)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st ? st->ops->stats(st, groups, approx_bytes) : CHAT_EINVAL;
}

chat_err chat_store_compact(chat_store *st)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st ? st->ops->compact(st) : CHAT_EINVAL;
}

chat_err chat_store_sync(chat_store *st)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->sync(st);
}

chat_err chat_store_sync_async(chat_store *st)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->sync_async(st);
}

chat_err chat_store_sync_state(chat_store *st, chat_sync_state *out)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st && out ? st->ops->sync_state(st, out) : CHAT_EINVAL;
}

void chat_store_set_clock(chat_store *st, chat_clock_fn fn, void *ctx)
{
    if (!st) {
        return;
    }
    store_set_clock(st, fn, ctx);
}

/* ------------------------------------------------------------------------
 * The message log
 * --------------------------------------------------------------------- */

chat_err chat_store_head(chat_store *st, const char *group, uint64_t *head)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->head(st, group, head);
}

chat_err chat_store_first(chat_store *st, const char *group, uint64_t *first)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->first(st, group, first);
}

chat_err chat_store_append(chat_store *st, const char *group, const char *from, const char *cid,
                           const chat_envelope *env, chat_appended *out)
{
    if (!out) {
        return CHAT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || !from || !env || (!env->head && env->head_len) || (!env->mid && env->mid_len) ||
        (!env->tail && env->tail_len)) {
        return CHAT_EINVAL;
    }
    chat_err rc = st->ops->append(st, group, from, cid, env, out);
    if (rc != CHAT_OK) {
        free(out->env);
        out->env = NULL;
    }
    return rc;
}

chat_err chat_store_cid_find(chat_store *st, const char *group, const char *from, const char *cid,
                             uint64_t *id, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cid_find(st, group, from, cid, id, found);
}

chat_err chat_store_get(chat_store *st, const char *group, uint64_t id, chat_msg *msg, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->get(st, group, id, msg, found);
}

chat_err chat_store_scan_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx,
                                 bool *more)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *more = false;
    if (max_count == 0 || !fn) {
        return CHAT_EINVAL;
    }
    return st->ops->scan(st, group, after, true, max_count, max_bytes, fn, ctx, more);
}

void chat_page_destroy(chat_page *page)
{
    if (!page) {
        return;
    }
    for (size_t i = 0; i < page->count; i++) {
        free(page->msgs[i].data);
    }
    free(page->msgs);
    free(page);
}

/* A page as a scan fills it. */
struct page_builder {
    chat_page *page;
    size_t cap;
    bool failed; /* out of memory: the scan stopped */
};

/* A scan callback: appends a copy of the message to the page, or stops the
 * scan when memory runs out (and says so in failed: a stopped scan returns
 * CHAT_OK). */
static int page_push(void *ctx, uint64_t id, const char *v, size_t vlen)
{
    struct page_builder *pb = ctx;
    chat_page *page = pb->page;
    if (page->count == pb->cap) {
        size_t ncap = pb->cap ? pb->cap * 2 : 16;
        chat_msg *n = realloc(page->msgs, ncap * sizeof(*n));
        if (!n) {
            pb->failed = true;
            return 1;
        }
        page->msgs = n;
        pb->cap = ncap;
    }
    chat_msg *m = &page->msgs[page->count];
    m->data = malloc(vlen + 1);
    if (!m->data) {
        pb->failed = true;
        return 1;
    }
    memcpy(m->data, v, vlen);
    m->data[vlen] = '\0';
    m->len = vlen;
    m->id = id;
    page->count++;
    page->bytes += vlen;
    return 0;
}

static chat_err read_page(chat_store *st, const char *group, uint64_t from_id, bool forward,
                          size_t max_count, size_t max_bytes, chat_page **out)
{
    struct page_builder pb = {NULL, 0, false};
    *out = NULL;
    if (max_count == 0) {
        return CHAT_EINVAL;
    }
    pb.page = calloc(1, sizeof(chat_page));
    if (!pb.page) {
        return CHAT_ENOMEM;
    }
    chat_err rc = st->ops->scan(st, group, from_id, forward, max_count, max_bytes, page_push, &pb,
                                &pb.page->more);
    if (rc == CHAT_OK && pb.failed) {
        rc = CHAT_ENOMEM;
    }
    if (rc != CHAT_OK) {
        chat_page_destroy(pb.page);
        return rc;
    }
    *out = pb.page;
    return CHAT_OK;
}

chat_err chat_store_read_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_page **out)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return read_page(st, group, after, true, max_count, max_bytes, out);
}

chat_err chat_store_read_backward(chat_store *st, const char *group, uint64_t before,
                                  size_t max_count, size_t max_bytes, chat_page **out)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return read_page(st, group, before, false, max_count, max_bytes, out);
}

chat_err chat_store_trim(chat_store *st, const char *group, uint64_t before, size_t max_keys,
                         uint64_t *first_now)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || max_keys == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->trim(st, group, before, max_keys, first_now);
}

chat_err chat_store_groups(chat_store *st, const char *after, size_t max, chat_head_fn fn,
                           void *ctx, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!fn) {
        return CHAT_EINVAL;
    }
    return st->ops->groups(st, after, max, fn, ctx, done);
}

/* ------------------------------------------------------------------------
 * Cursors and devices
 * --------------------------------------------------------------------- */

chat_err chat_store_cursor_info(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *id, int64_t *last_used, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_info(st, group, member, device, id, last_used, found);
}

chat_err chat_store_cursor_get(chat_store *st, const char *group, const char *member,
                               const char *device, uint64_t *id, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_info(st, group, member, device, id, NULL, found);
}

chat_err chat_store_cursor_advance(chat_store *st, const char *group, const char *member,
                                   const char *device, uint64_t id, uint64_t *now)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_advance(st, group, member, device, id, now);
}

chat_err chat_store_cursor_max(chat_store *st, const char *group, const char *member, uint64_t *id,
                               bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_max(st, group, member, id, found);
}

chat_err chat_store_cursor_start(chat_store *st, const char *group, const char *member,
                                 const char *device, uint64_t *id, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_start(st, group, member, device, id, found);
}

chat_err chat_store_cursor_touch(chat_store *st, const char *group, const char *member,
                                 const char *device, int64_t now_ms)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cursor_touch(st, group, member, device, now_ms);
}

chat_err chat_store_expire_devices(chat_store *st, int64_t older_than_ms, size_t max_keys,
                                   char *resume, size_t resume_cap, size_t *removed, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *removed = 0;
    *done = false;
    if (!resume || resume_cap < CHAT_STORE_RESUME_MAX || max_keys == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->expire_devices(st, older_than_ms, max_keys, resume, resume_cap, removed, done);
}

/* ------------------------------------------------------------------------
 * Membership
 * --------------------------------------------------------------------- */

chat_err chat_store_member_add(chat_store *st, const char *group, const char *member,
                               uint64_t *joined)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->member_add(st, group, member, joined);
}

chat_err chat_store_member_get(chat_store *st, const char *group, const char *member,
                               uint64_t *joined, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->member_get(st, group, member, joined, found);
}

chat_err chat_store_member_remove(chat_store *st, const char *group, const char *member)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->member_remove(st, group, member);
}

chat_err chat_store_member_groups(chat_store *st, const char *member, chat_group_fn fn, void *ctx)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return fn ? st->ops->member_groups(st, member, fn, ctx) : CHAT_EINVAL;
}

chat_err chat_store_group_delete(chat_store *st, const char *group, size_t max_keys, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!group || max_keys == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->group_delete(st, group, max_keys, done);
}

chat_err chat_store_member_count(chat_store *st, const char *group, uint64_t *count)
{
    *count = 0;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->member_count) {
        return unsupported(st, "member count");
    }
    return group ? st->ops->member_count(st, group, count) : CHAT_EINVAL;
}

/* ------------------------------------------------------------------------
 * Read markers
 * --------------------------------------------------------------------- */

chat_err chat_store_read_advance(chat_store *st, const char *group, const char *member,
                                 const char *device, uint64_t id, uint64_t *read, uint64_t *acked,
                                 bool *moved, bool *found)
{
    uint64_t r = 0, a = 0;
    bool m = false, f = false;
    chat_err rc = CHAT_EINVAL;
    if (!st) {
        rc = CHAT_EIO; /* closed: see chat_store.h */
    } else if (!st->ops->read_advance) {
        rc = unsupported(st, "read markers");
    } else if (group && member && device) {
        rc = st->ops->read_advance(st, group, member, device, id, &r, &a, &m, &f);
    }
    if (read) {
        *read = r;
    }
    if (acked) {
        *acked = a;
    }
    if (moved) {
        *moved = m;
    }
    *found = f;
    return rc;
}

chat_err chat_store_read_get(chat_store *st, const char *group, const char *member, uint64_t *id)
{
    *id = 0;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->read_get) {
        return unsupported(st, "read markers");
    }
    return group && member ? st->ops->read_get(st, group, member, id) : CHAT_EINVAL;
}

chat_err chat_store_reads(chat_store *st, const char *group, const char *after, size_t max,
                          chat_read_fn fn, void *ctx, bool *more)
{
    *more = false;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || !fn || max == 0) {
        return CHAT_EINVAL;
    }
    if (!st->ops->reads) {
        return unsupported(st, "read markers");
    }
    return st->ops->reads(st, group, after, max, fn, ctx, more);
}

/* ------------------------------------------------------------------------
 * Operations
 * --------------------------------------------------------------------- */

chat_err chat_store_group_members(chat_store *st, const char *group, const char *after, size_t max,
                                  chat_member_fn fn, void *ctx, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!group || !fn || max == 0) {
        return CHAT_EINVAL;
    }
    if (!st->ops->group_members) {
        return unsupported(st, "group members");
    }
    return st->ops->group_members(st, group, after, max, fn, ctx, done);
}

chat_err chat_store_member_devices(chat_store *st, const char *group, const char *member,
                                   size_t max, chat_device_fn fn, void *ctx, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!group || !member || !fn || max == 0) {
        return CHAT_EINVAL;
    }
    if (!st->ops->member_devices) {
        return unsupported(st, "member devices");
    }
    return st->ops->member_devices(st, group, member, max, fn, ctx, done);
}

chat_err chat_store_deletions(chat_store *st, chat_head_fn fn, void *ctx)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->deletions) {
        return unsupported(st, "deletions");
    }
    return fn ? st->ops->deletions(st, fn, ctx) : CHAT_EINVAL;
}

chat_err chat_store_group_init(chat_store *st, const char *group, uint64_t head)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->group_init) {
        return unsupported(st, "group init");
    }
    return group ? st->ops->group_init(st, group, head) : CHAT_EINVAL;
}

chat_err chat_store_check(chat_store *st, chat_problem_fn fn, void *ctx, uint64_t *groups,
                          uint64_t *problems)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!fn || !groups || !problems) {
        return CHAT_EINVAL;
    }
    *groups = 0;
    *problems = 0;
    if (!st->ops->check) {
        return unsupported(st, "check");
    }
    return st->ops->check(st, fn, ctx, groups, problems);
}

chat_err chat_store_job_start(chat_store *st, chat_job_kind kind, const char *dest)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st || (kind != CHAT_JOB_BACKUP && kind != CHAT_JOB_COMPACT) ||
        (kind == CHAT_JOB_BACKUP && (!dest || !dest[0]))) {
        return CHAT_EINVAL;
    }
    if (!st->ops->job_start) {
        return unsupported(st, "job start");
    }
    return st->ops->job_start(st, kind, dest);
}

chat_err chat_store_job_state(chat_store *st, chat_job_state *out)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!st->ops->job_state) {
        return unsupported(st, "job state");
    }
    return st && out ? st->ops->job_state(st, out) : CHAT_EINVAL;
}

chat_err chat_store_repair(const char *path, const char *backend, char **errmsg)
{
    if (errmsg) {
        *errmsg = NULL;
    }
    if (!path) {
        return CHAT_EINVAL;
    }
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        if (!backend || strcmp(backend, backends[i].name) == 0) {
            return backends[i].repair(path, errmsg);
        }
    }
    store_open_error(errmsg, "unknown store backend", backend);
    return CHAT_EINVAL;
}

/* ------------------------------------------------------------------------
 * Messages of other processes
 * --------------------------------------------------------------------- */

bool chat_store_shared(const chat_store *st)
{
    return st && st->ops->shared;
}

chat_err chat_store_follow(chat_store *st, const char *group, uint64_t after)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return group ? st->ops->follow(st, group, after) : CHAT_EINVAL;
}

size_t chat_store_feed(chat_store *st, size_t max, chat_feed_fn fn, void *ctx)
{
    return st && fn && max ? st->ops->feed(st, max, fn, ctx) : 0;
}
