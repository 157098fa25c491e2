/* admin_jobs.c: the admin commands that change the store (delete,
 * compact, backup) and the work they leave to the tick: the rest of a
 * group's deletion, TICK_BUDGET_MS per broker loop pass, and the end of a
 * store job (backup, compaction), which runs on the store's job thread. */
#include "admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DELETE_STEP 1024u   /* records looked at per deletion step */
#define MAX_DELETIONS 1000u /* deletions queued for the tick at once */
#define TICK_BUDGET_MS 5    /* milliseconds of deleting per broker loop pass */
#define RETRY_FIRST_MS 1000 /* the wait after a store error, doubled at each error in a row */
#define RETRY_MAX_MS 60000  /* up to this: one error line a minute at most */

/* The work the admin commands leave to the tick. */
struct chat_admin {
    char **deleting; /* groups whose deletion the tick goes on with, in order */
    size_t n_deleting;
    bool deletions_loaded; /* those a previous run left were queued */
    int64_t retry_at_ms;   /* after a store error: no deletion work before then */
    int64_t retry_gap_ms;  /* the last wait (0: no error since the last success) */
    bool job_running;      /* a store job (backup, compact) is being watched */
};

bool chat_admin_init(struct chat_plugin *pl)
{
    pl->admin = calloc(1, sizeof(*pl->admin));
    return pl->admin != NULL;
}

size_t chat_admin_deletions(const struct chat_plugin *pl)
{
    return pl->admin->n_deleting;
}

/* ===========================================================================
 * delete
 * ========================================================================= */

static bool queued(const struct chat_admin *a, const char *group)
{
    for (size_t i = 0; i < a->n_deleting; i++) {
        if (!strcmp(a->deleting[i], group)) {
            return true;
        }
    }
    return false;
}

static bool enqueue(struct chat_admin *a, const char *group)
{
    if (queued(a, group)) {
        return true;
    }
    char **n = realloc(a->deleting, (a->n_deleting + 1) * sizeof(*n));
    if (!n) {
        return false;
    }
    a->deleting = n;
    if (!(n[a->n_deleting] = strdup(group))) {
        return false;
    }
    a->n_deleting++;
    return true;
}

static void dequeue(struct chat_admin *a, size_t i)
{
    free(a->deleting[i]);
    memmove(a->deleting + i, a->deleting + i + 1, (a->n_deleting - i - 1) * sizeof(char *));
    a->n_deleting--;
}

/* What the rest of the plugin keeps of a deleted group: its catch-ups,
 * pending subscriptions, cached envelope, and who is online in it (its
 * former members are members no more: nothing of it is pushed). */
static void forget_group(struct chat_plugin *pl, const char *group)
{
    chat_replay_stop_group(pl, group);
    chat_pending_forget_group(pl, group);
    chat_envelope_cache_forget(pl, group);
    chat_presence_forget_group(pl, group);
}

void chat_admin_delete(const struct chat_admin_req *r, const cJSON *c)
{
    struct chat_plugin *pl = r->pl;
    char buf[CHAT_GROUP_MAX + 1];
    const char *group = chat_admin_group_field(r, c, buf);
    uint64_t head = 0;
    bool done = false;

    if (!group) {
        return;
    }
    if (!queued(pl->admin, group) && pl->admin->n_deleting >= MAX_DELETIONS) {
        chat_admin_fail(r, group, "too many deletions under way: retry when some have finished");
        return;
    }
    if (!chat_admin_storage_ok(r, group, chat_store_head(pl->store, group, &head))) {
        return;
    }
    /* The first step makes the group read as empty: no message, member or
     * cursor of it counts from here on; the tick removes the records. */
    if (!chat_admin_storage_ok(r, group,
                               chat_store_group_delete(pl->store, group, DELETE_STEP, &done))) {
        return;
    }
    forget_group(pl, group);
    if (!done && !enqueue(pl->admin, group)) {
        chat_admin_fail(r, group, "out of memory");
        return;
    }
    mosquitto_log_printf(MOSQ_LOG_NOTICE, "mosquitto-chat: %s deleted group %s (head %llu)%s",
                         r->device, group, (unsigned long long)head,
                         done ? "" : "; its records go in the background");
    chat_admin_entry_start(r, group);
    sbuf_puts(r->out, ",\"head\":");
    sbuf_u64(r->out, head);
    sbuf_puts(r->out, done ? ",\"done\":true}" : ",\"done\":false}");
}

/* ===========================================================================
 * compact, backup
 * ========================================================================= */

/* Starts a store job; false (answered) when one runs or it cannot start. */
static bool job_start(const struct chat_admin_req *r, chat_job_kind kind, const char *dest)
{
    chat_job_state js;
    chat_err rc = chat_store_job_state(r->pl->store, &js);
    if (!chat_admin_storage_ok(r, NULL, rc)) {
        return false;
    }
    if (js.status == CHAT_JOB_RUNNING) {
        chat_admin_fail(r, NULL, "a backup or compaction is under way: see stats");
        return false;
    }
    rc = chat_store_job_start(r->pl->store, kind, dest);
    if (rc != CHAT_OK) {
        chat_log_store_error(r->pl, rc, "%s from %s", r->cmd, r->device);
        chat_admin_fail(r, NULL,
                        kind == CHAT_JOB_BACKUP ? "cannot start the backup (the log says why)"
                                                : "cannot start the compaction (the log says why)");
        return false;
    }
    r->pl->admin->job_running = true;
    mosquitto_log_printf(MOSQ_LOG_NOTICE, "mosquitto-chat: %s started by %s%s%s",
                         kind == CHAT_JOB_BACKUP ? "backup" : "compaction", r->device,
                         dest ? " into " : "", dest ? dest : "");
    return true;
}

void chat_admin_compact(const struct chat_admin_req *r)
{
    if (job_start(r, CHAT_JOB_COMPACT, NULL)) {
        chat_admin_entry_start(r, NULL);
        sbuf_puts(r->out, ",\"started\":true}");
    }
}

/* A new directory name under backup_dir: mosquitto-chat-<UTC time>[-n]. */
static bool backup_path(struct chat_plugin *pl, char *out, size_t cap)
{
    char stamp[32];
    time_t t = (time_t)(chat_now_ms() / 1000);
    struct tm tm;
    struct stat sb;
    gmtime_r(&t, &tm);
    (void)strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm); /* 16 characters: they fit */
    for (int i = 0; i < 100; i++) {
        char partial[4200];
        int n = i ? snprintf(out, cap, "%s/mosquitto-chat-%s-%d", pl->cfg.backup_dir, stamp, i)
                  : snprintf(out, cap, "%s/mosquitto-chat-%s", pl->cfg.backup_dir, stamp);
        if (n < 0 || (size_t)n >= cap) {
            return false;
        }
        snprintf(partial, sizeof(partial), "%s.partial", out);
        if (stat(out, &sb) != 0 && stat(partial, &sb) != 0) {
            return true;
        }
    }
    return false;
}

void chat_admin_backup(const struct chat_admin_req *r)
{
    char dest[4096];
    /* The place comes from the broker's configuration alone, never from
     * the request. */
    if (!r->pl->cfg.backup_dir) {
        chat_admin_fail(r, NULL, "backups are not configured: set plugin_opt_backup_dir");
        return;
    }
    if (mkdir(r->pl->cfg.backup_dir, 0700) != 0 && errno != EEXIST) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: cannot create backup_dir %s: %s",
                             r->pl->cfg.backup_dir, strerror(errno));
        chat_admin_fail(r, NULL, "cannot create backup_dir (the log says why)");
        return;
    }
    if (!backup_path(r->pl, dest, sizeof(dest))) {
        chat_admin_fail(r, NULL, "no free backup name under backup_dir");
        return;
    }
    if (job_start(r, CHAT_JOB_BACKUP, dest)) {
        chat_admin_entry_start(r, NULL);
        sbuf_puts(r->out, ",\"path\":");
        sbuf_json_str(r->out, dest);
        sbuf_puts(r->out, ",\"started\":true}");
    }
}

/* ===========================================================================
 * The tick
 * ========================================================================= */

static int queue_deletion(void *ctx, const char *group, uint64_t unused)
{
    (void)unused;
    return enqueue(ctx, group) ? 0 : 1;
}

/* Logs the end of a store job once. */
static void watch_job(struct chat_plugin *pl)
{
    chat_job_state js;
    if (!pl->admin->job_running || chat_store_job_state(pl->store, &js) != CHAT_OK ||
        js.status == CHAT_JOB_RUNNING) {
        return;
    }
    pl->admin->job_running = false;
    if (js.status == CHAT_JOB_FAILED) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: %s failed: %s",
                             js.kind == CHAT_JOB_BACKUP ? "backup" : "compaction", js.error);
    } else if (js.kind == CHAT_JOB_BACKUP) {
        mosquitto_log_printf(
            MOSQ_LOG_NOTICE, "mosquitto-chat: backup written to %s (%llu records, %lld ms)",
            js.path, (unsigned long long)js.records, (long long)(js.finished_ms - js.started_ms));
    } else {
        mosquitto_log_printf(MOSQ_LOG_NOTICE, "mosquitto-chat: compaction done (%lld ms)",
                             (long long)(js.finished_ms - js.started_ms));
    }
}

/* A deletion could not go on (the store away, PostgreSQL aborting a step
 * in a deadlock): the queue waits, and the wait doubles while errors
 * follow each other, so that a store that stays away costs one log line a
 * minute, and one that comes back sees the work resumed without a
 * restart. */
static void deletion_wait(struct chat_admin *a, int64_t now_ms)
{
    a->retry_gap_ms = a->retry_gap_ms == 0                  ? RETRY_FIRST_MS
                      : a->retry_gap_ms >= RETRY_MAX_MS / 2 ? RETRY_MAX_MS
                                                            : a->retry_gap_ms * 2;
    a->retry_at_ms = now_ms + a->retry_gap_ms;
}

/* The group at the front goes to the back: after an error the others get
 * their turn first, in case the error is that group's alone. */
static void rotate(struct chat_admin *a)
{
    char *first = a->deleting[0];
    memmove(a->deleting, a->deleting + 1, (a->n_deleting - 1) * sizeof(*a->deleting));
    a->deleting[a->n_deleting - 1] = first;
}

void chat_admin_tick(struct chat_plugin *pl, int64_t now_ms)
{
    struct chat_admin *a = pl->admin;
    watch_job(pl);
    if (now_ms < a->retry_at_ms) {
        return;
    }
    if (!a->deletions_loaded) {
        /* Deletions a previous run began and did not finish: listed again
         * after an error (a broker that started without its store). */
        chat_err rc = chat_store_deletions(pl->store, queue_deletion, a);
        if (rc != CHAT_OK) {
            chat_log_store_error(pl, rc, "listing the deletions under way");
            deletion_wait(a, now_ms);
            return;
        }
        a->deletions_loaded = true;
    }
    int64_t start = chat_now_ms();
    while (a->n_deleting > 0 && chat_now_ms() - start < TICK_BUDGET_MS) {
        bool done = false;
        chat_err rc = chat_store_group_delete(pl->store, a->deleting[0], DELETE_STEP, &done);
        if (rc != CHAT_OK) {
            /* Kept in the queue (and in the store, for the next run). */
            deletion_wait(a, now_ms);
            chat_log_store_error(pl, rc, "deletion of group %s (tried again in %lld s)",
                                 a->deleting[0], (long long)(a->retry_gap_ms / 1000));
            rotate(a);
            return;
        }
        a->retry_gap_ms = 0;
        if (done) {
            mosquitto_log_printf(MOSQ_LOG_INFO, "mosquitto-chat: group %s: deletion finished",
                                 a->deleting[0]);
            dequeue(a, 0);
        }
    }
}

void chat_admin_free(struct chat_plugin *pl)
{
    struct chat_admin *a = pl->admin;
    if (!a) {
        return;
    }
    while (a->n_deleting > 0) {
        dequeue(a, a->n_deleting - 1);
    }
    free(a->deleting);
    free(a);
    pl->admin = NULL;
}
