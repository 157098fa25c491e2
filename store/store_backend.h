/* store_backend: the boundary between chat_store.c, which implements the
 * public interface of chat_store.h, and a backend that keeps the data:
 * leveldb/ (embedded) and pg/ (PostgreSQL, shared by several brokers).
 * Private to store/. Adding an op: its function type here, its pointer in
 * chat_store_ops, the front in chat_store.c, and one function in each
 * backend (for pg/, an SQL function or statement in pg_schema.c).
 *
 * A backend's handle begins with a struct chat_store, the part that every
 * backend has and chat_store.c reads (the error text, the clock, the
 * incarnation); chat_store.c calls the backend through st->ops and never
 * sees the rest, and the backend converts the pointer back to its own type.
 * A backend is picked at open by its name (chat_store_opts.backend) and
 * opened by its constructor, which fills in the common part with
 * store_base_init.
 *
 * Each op has the semantics of the public function of the same name in
 * chat_store.h, out-parameters and error texts included. chat_store.c has
 * already checked what needs no data (said at each op below), so that no
 * backend repeats it; what needs the data (a name too long for a key, a
 * resume point the backend wrote) is the op's. Reads and scans of pages go
 * through one op, scan; chat_store.c builds chat_page copies from it.
 *
 * Threading: as chat_store.h says, one thread calls a store; a backend may
 * run threads of its own (LevelDB's syncer) and guards what they share.
 *
 * What a backend may cache: the LevelDB backend keeps heads, cursors and
 * memberships in memory (chat_cache), which is right only while its
 * process is the store's only writer. A backend whose database other
 * processes write too (PostgreSQL, several brokers) must not take that
 * shortcut: see the list in leveldb/ldb_db.h of what relies on it. pg/
 * caches memberships only, invalidated by notification (pg/pg_db.h).
 */
#ifndef STORE_BACKEND_H
#define STORE_BACKEND_H

#include "chat_store.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Digits of an incarnation (chat_store_incarnation): 128 random bits. */
#define STORE_INCARNATION_LEN 32u

/* The ops, as function types: the ops table holds pointers to them, and a
 * backend declares its functions with them (`store_head_fn ldb_head;`), so
 * that the compiler holds every definition to the one signature here. Each
 * has the contract of the chat_store.h function of the same name; what
 * chat_store.c has checked before the call is said here. */

/* The whole store. close: st is not NULL. sync_state: out is not NULL. */
typedef void store_close_fn(chat_store *st);
typedef chat_err store_stats_fn(chat_store *st, uint64_t *groups, uint64_t *bytes);
typedef chat_err store_compact_fn(chat_store *st);
typedef chat_err store_cid_filter_fn(chat_store *st, chat_cid_filter *out);
/* chat_store_release_memory: true when it asked the allocator to give
 * memory back. */
typedef bool store_release_fn(chat_store *st);
typedef chat_err store_sync_fn(chat_store *st);
typedef chat_err store_sync_async_fn(chat_store *st);
typedef chat_err store_sync_state_fn(chat_store *st, chat_sync_state *out);

/* The message log. append: group, from, env and out are not NULL, nor
 * env's parts unless their length is 0; *out is zeroed. scan: both directions
 * (chat_store_scan_forward and the reads of pages); max_count is not 0, fn is not NULL, *more is
 * false. */
typedef chat_err store_head_fn(chat_store *st, const char *group, uint64_t *head);
typedef chat_err store_first_fn(chat_store *st, const char *group, uint64_t *first);
typedef chat_err store_append_fn(chat_store *st, const char *group, const char *from,
                                 const char *cid, const chat_envelope *env, bool sender_read,
                                 chat_appended *out);
typedef chat_err store_cid_find_fn(chat_store *st, const char *group, const char *from,
                                   const char *cid, uint64_t *id, bool *found);
typedef chat_err store_get_fn(chat_store *st, const char *group, uint64_t id, chat_msg *msg,
                              bool *found);
/* change: group, from, ch, out and applied are not NULL, ch's parts are
 * not NULL unless their length is 0, ch->id is not 0; *out is zeroed and
 * *applied false. cid_of: cid and found are not NULL, *cid is NULL and
 * *found false. */
typedef chat_err store_change_fn(chat_store *st, const char *group, const char *from,
                                 const chat_change *ch, chat_appended *out, bool *applied);
typedef chat_err store_cid_of_fn(chat_store *st, const char *group, uint64_t id, char **cid,
                                 bool *found);
typedef chat_err store_scan_fn(chat_store *st, const char *group, uint64_t from_id, bool forward,
                               size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx,
                               bool *more);
/* scan_page: as scan forward, and head and first; the same checks done. */
typedef chat_err store_scan_page_fn(chat_store *st, const char *group, uint64_t after,
                                    size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx,
                                    bool *more, uint64_t *head, uint64_t *first);

/* Retention and the list of groups. trim: group is not NULL, max_keys is
 * not 0. groups: fn is not NULL, *done is false. */
typedef chat_err store_trim_fn(chat_store *st, const char *group, uint64_t before, size_t max_keys,
                               uint64_t *first_now);
typedef chat_err store_groups_fn(chat_store *st, const char *after, size_t max, chat_head_fn fn,
                                 void *ctx, bool *done);

/* Cursors and devices. expire_devices: resume is not NULL, resume_cap is
 * at least CHAT_STORE_RESUME_MAX, max_keys is not 0, *out is zeroed and
 * *done false. */
typedef chat_err store_cursor_info_fn(chat_store *st, const char *group, const char *member,
                                      const char *device, uint64_t *id, int64_t *last_used,
                                      bool *found);
typedef chat_err store_cursor_advance_fn(chat_store *st, const char *group, const char *member,
                                         const char *device, uint64_t id, uint64_t *now);
typedef chat_err store_cursor_max_fn(chat_store *st, const char *group, const char *member,
                                     uint64_t *id, bool *found);
typedef chat_err store_cursor_start_fn(chat_store *st, const char *group, const char *member,
                                       const char *device, uint64_t *id, bool *found);
typedef chat_err store_cursor_open_fn(chat_store *st, const char *group, const char *member,
                                      const char *device, uint64_t *id, bool *found,
                                      uint64_t *head);
typedef chat_err store_cursor_touch_fn(chat_store *st, const char *group, const char *member,
                                       const char *device, int64_t now_ms);
typedef chat_err store_expire_devices_fn(chat_store *st, int64_t older_than_ms, bool drop_members,
                                         size_t max_keys, char *resume, size_t resume_cap,
                                         chat_expired *out, bool *done);

/* Membership and group deletion. member_groups: fn is not NULL.
 * group_delete: group is not NULL, max_keys is not 0, *done is false. */
typedef chat_err store_member_add_fn(chat_store *st, const char *group, const char *member,
                                     uint64_t *joined);
typedef chat_err store_member_get_fn(chat_store *st, const char *group, const char *member,
                                     uint64_t *joined, bool *found);
/* member_join: group and member are not NULL; device is NULL or at most
 * CHAT_STORE_MAX_NAME bytes. The op writes the membership and the cursor
 * in one transaction (both or neither), so it fails as a whole and has no
 * device_err of its own. */
typedef chat_err store_member_join_fn(chat_store *st, const char *group, const char *member,
                                      const char *device, uint64_t *joined);
typedef chat_err store_member_remove_fn(chat_store *st, const char *group, const char *member);
typedef chat_err store_member_groups_fn(chat_store *st, const char *member, chat_group_fn fn,
                                        void *ctx);
typedef chat_err store_group_delete_fn(chat_store *st, const char *group, size_t max_keys,
                                       bool *done);
typedef chat_err store_member_count_fn(chat_store *st, const char *group, uint64_t *count);

/* Read markers. read_advance: group, member and device are not NULL,
 * the out-parameters are set to 0 and false. reads: group is not NULL, max
 * is not 0, fn is not NULL, *more is false. */
typedef chat_err store_read_advance_fn(chat_store *st, const char *group, const char *member,
                                       const char *device, uint64_t id, uint64_t *read,
                                       uint64_t *acked, bool *moved, bool *found);
typedef chat_err store_read_get_fn(chat_store *st, const char *group, const char *member,
                                   uint64_t *id);
typedef chat_err store_reads_fn(chat_store *st, const char *group, const char *after, size_t max,
                                chat_read_fn fn, void *ctx, bool *more);

/* Push registrations. push_put: member, device and reg are not NULL, len
 * is 1..CHAT_STORE_PUSH_MAX, max_per_member is not 0, *result is
 * CHAT_PUSH_NO_GROUP. push_get: *found is false, *reg NULL. push_remove:
 * *removed is false. push_list, push_members: fn is not NULL; push_members:
 * max is not 0, last_cap at least CHAT_STORE_MAX_NAME + 1, last is "" and
 * *done false. push_expire: as expire_devices. */
typedef chat_err store_push_put_fn(chat_store *st, const char *member, const char *device,
                                   const void *reg, size_t len, int64_t created_ms,
                                   size_t max_per_member, chat_push_put *result);
typedef chat_err store_push_get_fn(chat_store *st, const char *member, const char *device,
                                   char **reg, size_t *len, int64_t *created_ms, bool *found);
typedef chat_err store_push_remove_fn(chat_store *st, const char *member, const char *device,
                                      const void *if_reg, size_t if_len, bool *removed);
typedef chat_err store_push_list_fn(chat_store *st, const char *member, chat_push_fn fn, void *ctx);
typedef chat_err store_push_members_fn(chat_store *st, const char *group, const char *after,
                                       size_t max, chat_push_member_fn fn, void *ctx, char *last,
                                       size_t last_cap, bool *done);
typedef chat_err store_push_expire_fn(chat_store *st, int64_t older_than_ms, size_t max_keys,
                                      char *resume, size_t resume_cap, size_t *removed, bool *done);

/* Operations (chat_store.h, "Operations"). group_members, member_devices:
 * fn is not NULL, max is not 0, *done is false. deletions, check: fn is not
 * NULL; check: *groups and *problems are 0. job_start: kind is a known
 * kind, dest is not NULL for a backup. job_state: out is not NULL. */
typedef chat_err store_group_members_fn(chat_store *st, const char *group, const char *after,
                                        size_t max, chat_member_fn fn, void *ctx, bool *done);
typedef chat_err store_member_devices_fn(chat_store *st, const char *group, const char *member,
                                         size_t max, chat_device_fn fn, void *ctx, bool *done);
typedef chat_err store_deletions_fn(chat_store *st, chat_head_fn fn, void *ctx);
typedef chat_err store_group_init_fn(chat_store *st, const char *group, uint64_t head);
typedef chat_err store_check_fn(chat_store *st, chat_problem_fn fn, void *ctx, uint64_t *groups,
                                uint64_t *problems);
typedef chat_err store_job_start_fn(chat_store *st, chat_job_kind kind, const char *dest);
typedef chat_err store_job_state_fn(chat_store *st, chat_job_state *out);

/* Messages of other processes (chat_store_follow, chat_store_feed):
 * follow: group is not NULL; feed: fn is not NULL, max is not 0. */
typedef chat_err store_follow_fn(chat_store *st, const char *group, uint64_t after);
typedef size_t store_feed_fn(chat_store *st, size_t max, chat_feed_fn fn, void *ctx);
/* chat_store_available: no database round trip. */
typedef bool store_available_fn(chat_store *st);

/* What a backend implements: every op is required but those whose comment
 * says what NULL means. */
typedef struct chat_store_ops {
    const char *name; /* what chat_store_opts.backend names it by */
    store_close_fn *close;
    store_stats_fn *stats;
    store_compact_fn *compact;
    store_sync_fn *sync;
    store_sync_async_fn *sync_async;
    store_sync_state_fn *sync_state;
    store_head_fn *head;
    store_first_fn *first;
    store_append_fn *append;
    store_cid_find_fn *cid_find;
    store_get_fn *get;
    store_change_fn *change;
    store_cid_of_fn *cid_of;
    store_scan_fn *scan;
    /* NULL: head, first and scan one after the other (LevelDB, from memory
     * but the scan) */
    store_scan_page_fn *scan_page;
    store_trim_fn *trim;
    store_groups_fn *groups;
    store_cursor_info_fn *cursor_info;
    store_cursor_advance_fn *cursor_advance;
    store_cursor_max_fn *cursor_max;
    store_cursor_start_fn *cursor_start;
    store_cursor_open_fn *cursor_open; /* NULL: cursor_start, then head */
    store_cursor_touch_fn *cursor_touch;
    store_expire_devices_fn *expire_devices;
    store_member_add_fn *member_add;
    /* NULL: member_add, then cursor_start, two writes (LevelDB: in the
     * process, neither a round trip; a crash between them leaves a member
     * without a device, which the store has anyway for admins' joins) */
    store_member_join_fn *member_join;
    store_member_get_fn *member_get;
    store_member_remove_fn *member_remove;
    store_member_groups_fn *member_groups;
    store_group_delete_fn *group_delete;
    store_member_count_fn *member_count;
    store_read_advance_fn *read_advance;
    store_read_get_fn *read_get;
    store_reads_fn *reads;
    store_push_put_fn *push_put;
    store_push_get_fn *push_get;
    store_push_remove_fn *push_remove;
    store_push_list_fn *push_list;
    store_push_members_fn *push_members;
    store_push_expire_fn *push_expire;
    store_group_members_fn *group_members;
    store_member_devices_fn *member_devices;
    store_deletions_fn *deletions;
    store_group_init_fn *group_init;
    store_check_fn *check;
    store_job_start_fn *job_start;
    store_job_state_fn *job_state;
    store_cid_filter_fn *cid_filter; /* NULL: the backend has none (PostgreSQL) */
    store_release_fn *release;       /* NULL: nothing to give back (PostgreSQL) */
    store_follow_fn *follow;
    store_feed_fn *feed;
    store_available_fn *available; /* NULL: always (LevelDB, in the process) */
    bool shared;                   /* other processes write the database too (chat_store_shared) */
} chat_store_ops;

struct store_job; /* store_job.c */

/* The part of every backend's handle that chat_store.c reads. */
struct chat_store {
    const chat_store_ops *ops;
    chat_clock_fn clock; /* chat_store_set_clock: stamps a device's last use */
    void *clock_ctx;
    bool recovered;                              /* chat_store_recovered */
    char incarnation[STORE_INCARNATION_LEN + 1]; /* chat_store_incarnation, set at open */
    char last_err[CHAT_STORE_ERROR_MAX];         /* chat_store_last_error */
    struct store_job *job; /* the running or last maintenance job (store_job.h), or NULL */
};

/* Fills in the common part of a new handle: its ops, the default clock, no
 * error yet, no incarnation yet (the backend draws or reads it). */
void store_base_init(chat_store *st, const chat_store_ops *ops);

/* chat_store_set_clock: fn, or the default clock when fn is NULL. */
void store_set_clock(chat_store *st, chat_clock_fn fn, void *ctx);

/* What a backend does not offer (yet): its op is NULL. Says so in
 * st->last_err, naming what, and returns CHAT_EINVAL. */
chat_err store_unsupported(chat_store *st, const char *what);

/* The envelope of env with id and ts filled in, as chat_envelope says,
 * NUL-terminated, into out->env (malloc'd) and out->len; CHAT_ENOMEM when
 * memory runs out. */
chat_err store_envelope_fill(const chat_envelope *env, uint64_t id, int64_t ts, chat_appended *out);

/* The new version of a changed message, as chat_change says (ch->before,
 * then when ch->stamp the time ts in decimal and ch->after, then when
 * ch->stamp_id too M's id in decimal and ch->last), into *out (malloc'd,
 * NUL-terminated, for the caller to free) and *len; CHAT_ENOMEM when
 * memory runs out. */
chat_err store_version_fill(const chat_change *ch, int64_t ts, uint64_t id, char **out,
                            size_t *len);

/* A malloc'd copy of the len bytes at p with a NUL after them (the
 * envelopes a read or a duplicate append hands out), for the caller to
 * free; NULL when memory runs out. */
char *store_dup_bytes(const char *p, size_t len);

/* The stack of a thread of the store's own (the cid filter's scan, LevelDB's
 * syncer, a maintenance job): 512 KiB. They call LevelDB's C API, the file
 * system and libpq, nothing deep; the process default (RLIMIT_STACK, 8 MiB
 * on Debian) would be address space reserved for nothing, which a device
 * that caps the broker's virtual size pays for. */
#define STORE_THREAD_STACK (512u << 10)

/* pthread_create with a STORE_THREAD_STACK stack: starts fn(arg) in *t.
 * Returns 0, or pthread_create's error. */
int store_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

/* The store clock's time, in ms since the epoch. */
static inline int64_t store_now_ms(const chat_store *st)
{
    return st->clock(st->clock_ctx);
}

/* The backends, each behind its constructor: opens the store at path with
 * opts (already checked: sync is a chat_sync) and on success sets *out;
 * on failure *errmsg, when errmsg is not NULL, may receive a malloc'd
 * reason (chat_store_open_opts has set it to NULL). */
typedef chat_err store_open_fn(const char *path, const chat_store_opts *opts, chat_store **out,
                               char **errmsg);

/* A backend's chat_store_repair: path is not NULL, *errmsg (when errmsg is
 * not NULL) is NULL. */
typedef chat_err store_repair_fn(const char *path, char **errmsg);

#endif
