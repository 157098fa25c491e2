/* chat_store: the public interface of chat_store.h in front of a backend
 * (store_backend.h): it picks the backend at open, checks the arguments that
 * need no data, builds pages, and passes every other call to the backend's
 * ops. chat_store.h states the conventions and the promises every backend
 * keeps; the LevelDB backend's keys and invariants are the design note of
 * leveldb/ldb_store.c.
 *
 * This file: errors, open and close, the store as a whole, repair and the
 * messages of other processes; the rest of the interface is in
 * store_log.c (messages and pages), store_members.c (cursors, membership,
 * read markers) and store_ops.c (its operations), all
 * of them over store_backend.h alone. */
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
    case CHAT_EUNAVAIL:
        return "store unavailable for now";
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

chat_err chat_store_stats(chat_store *st, uint64_t *groups, uint64_t *bytes)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->stats(st, groups, bytes);
}

chat_err chat_store_cid_filter(chat_store *st, chat_cid_filter *out)
{
    memset(out, 0, sizeof(*out));
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cid_filter ? st->ops->cid_filter(st, out) : CHAT_EINVAL;
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

bool chat_store_release_memory(chat_store *st)
{
    return st && st->ops->release ? st->ops->release(st) : false;
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

bool chat_store_available(chat_store *st)
{
    return st && (!st->ops->available || st->ops->available(st));
}
