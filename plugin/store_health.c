/* store_health.c: the plugin's store and its health: opened at start, and
 * opened again when a full disk has room once more, or when the process has
 * file descriptors again after it ran out; and the log line of a store
 * error, which notes those conditions as it logs them.
 *
 * LevelDB keeps a write error until the database is reopened, and so does
 * the store (convention 5 of chat_store.h; write-latch in the LevelDB
 * backend's design note). Two such errors mend themselves:
 * a disk that filled up, and a process that ran out of file descriptors
 * (connections take one each: a flood of them left LevelDB unable to open
 * its next write-ahead log, and the store refused every write until the
 * broker restarted, long after the connections had gone). While either
 * lasts, publishes are refused with "storage error" and every read goes on
 * (catch-up, fetch, history); once the filesystem has ROOM_BYTES free again,
 * or ROOM_FDS descriptors can be opened, the tick closes the store and open
 * it anew, without the broker restarting. Any other write error (an I/O
 * error, damage that a compaction found) stays until the broker restarts:
 * reopening a store whose files may be damaged would hide the damage, so it
 * is logged once, and the operator decides. A disk already full at start does not stop the
 * broker either: the plugin runs without a store (every store call fails,
 * see chat_store_close) until it can open it.
 *
 * A shared store (PostgreSQL) mends itself too: during an outage or a
 * failover it has no writer and every call that needs one fails at once,
 * until its thread has connected again. Those errors are logged as the
 * store logs its own connections' (chat_quiet.h): the first in full, each
 * new text up to a few, then one "still down" line a 30 s, and one "back"
 * line once the tick finds the store available again; not a line per
 * refused publish.
 *
 * A shared store that cannot be opened at start for a reason that passes
 * by itself (chat_store_open: CHAT_EUNAVAIL, the database down, starting
 * up or read-only) does not stop the broker either: every non-chat client
 * of the broker would be down because the chat's database is. The plugin
 * runs without its store, as on a disk full at start, while a thread of
 * the store library (chat_store_opener) opens it again at the pace of
 * pg_backoff; the broker's thread never waits for a connection. The tick
 * takes the store the thread opened and installs it as a start would
 * (chat_health_opened); the thread's failures meanwhile are logged as an
 * outage's (chat_quiet). A failure that retrying would not mend (a bad
 * connection string, a login or database refused, a schema of another
 * version) still fails the start. */
#include "chat_quiet.h"
#include "plugin.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* Free space, and free descriptors (at most an eighth of the limit: a log,
 * tables, the manifest, and some for the broker), that let the store
 * reopen; seconds between two looks. */
#define ROOM_BYTES (16u << 20)
#define ROOM_FDS 64
#define RETRY_S 2

struct chat_health {
    bool disk_full;     /* the store's disk filled up */
    bool fds_out;       /* the process ran out of descriptors */
    bool write_fatal;   /* another write error: refused until a restart */
    time_t next_look;   /* when the tick looks at the disk (or descriptors) again */
    bool cidf_logged;   /* the store's cid filter scan was logged */
    int64_t err_second; /* the log's second: store error lines logged in it, */
    unsigned err_lines; /* and those left out */
    unsigned err_dropped;
    chat_quiet outage;         /* the store errors of a shared store without its writer */
    chat_store_opener *opener; /* opens a shared store unavailable at start; NULL once taken */
    uint64_t opener_failures;  /* its failed attempts already reported to outage */
};

/* chat_quiet's sink: the broker's log. */
static void log_line(void *ctx, const char *line)
{
    (void)ctx;
    mosquitto_log_printf(MOSQ_LOG_ERR, "%s", line);
}

bool chat_health_init(struct chat_plugin *pl)
{
    pl->health = calloc(1, sizeof(*pl->health));
    if (!pl->health) {
        return false;
    }
    chat_quiet_init(&pl->health->outage, "PostgreSQL store", NULL, log_line, NULL);
    return true;
}

void chat_health_free(struct chat_plugin *pl)
{
    if (pl->health) {
        /* Before anything it could still hand over goes: joins its thread
         * (an attempt in progress ends within its connect_timeout). */
        chat_store_opener_stop(pl->health->opener);
        pl->health->opener = NULL;
        chat_quiet_destroy(&pl->health->outage);
    }
    free(pl->health);
    pl->health = NULL;
}

static bool disk_full(const char *why)
{
    return why && strstr(why, "No space left on device") != NULL;
}

/* Whether why is the store's latched write error (invariant write-latch): its first
 * report ("writing <key>: ...") or a refusal that follows it. LevelDB only:
 * PostgreSQL's errors are per transaction. */
static bool write_latched(const char *why)
{
    return why && (strncmp(why, "writing ", 8) == 0 ||
                   strstr(why, "writes refused until the store is reopened") != NULL);
}

static bool fds_out(const char *why)
{
    return why && strstr(why, "Too many open files") != NULL;
}

/* Whether ROOM_FDS descriptors (an eighth of the limit, if less) can be
 * opened now; they are closed again at once. */
static bool fds_free(void)
{
    struct rlimit rl;
    int fds[ROOM_FDS];
    int n = 0, want = ROOM_FDS;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur / 8 < (rlim_t)want) {
        want = rl.rlim_cur / 8 > 4 ? (int)(rl.rlim_cur / 8) : 4;
    }
    while (n < want && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
        n++;
    }
    for (int i = 0; i < n; i++) {
        close(fds[i]);
    }
    return n == want;
}

static bool shared(const struct chat_plugin *pl)
{
    return !strcmp(pl->cfg.store, "postgresql");
}

const char *chat_health_where(const struct chat_plugin *pl)
{
    /* The connection string may hold a password: it is never logged. */
    return shared(pl) ? "in PostgreSQL" : pl->cfg.db_path;
}

/* Opens the store; verify reads every block first (at start only: on the
 * broker's thread, later, it would stall every client). */
static chat_err open_store(struct chat_plugin *pl, bool verify, char **errmsg)
{
    struct chat_health *h = pl->health;
    chat_store_opts so = CHAT_STORE_OPTS_INIT;
    struct timespec t0, t1;
    so.sync = pl->cfg.fsync;
    so.write_buffer_size = (size_t)pl->cfg.write_buffer_mb << 20;
    so.verify = verify;
    so.backend = pl->cfg.store;
    /* Tests fake a reboot (see chat_store_recovered) with another boot id. */
    so.boot_id = getenv("MOSQUITTO_CHAT_TEST_BOOT_ID");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    chat_err rc = chat_store_open_opts(shared(pl) ? pl->cfg.pg_conninfo : pl->cfg.db_path, &so,
                                       &pl->store, errmsg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    h->cidf_logged = false;
    /* Device cursors are stamped with the plugin's clock (a test may shift
     * it: see chat_clock_init). */
    chat_store_set_clock(pl->store, chat_store_clock, NULL);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (rc == CHAT_OK && verify && !shared(pl) && took >= 1.0) {
        /* A slow start has a reason the operator can see, and a way out. */
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: read every block of store \"%s\" in %.1f s "
                             "(plugin_opt_verify_store false skips this check)",
                             pl->cfg.db_path, took);
    }
    if (rc == CHAT_EUNAVAIL && shared(pl) && !h->opener) {
        /* A connection may wait for connect_timeout: retried on a thread,
         * never on the broker's. */
        chat_err orc = chat_store_opener_start(pl->cfg.pg_conninfo, &so, &h->opener);
        if (orc != CHAT_OK) {
            free(*errmsg);
            *errmsg = NULL;
            return orc;
        }
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             "mosquitto-chat: cannot open store \"%s\": %s; running without it "
                             "until the database answers: publishes and the requests that need "
                             "the store are refused with \"storage error\" meanwhile; retrying "
                             "in the background (every 2 s at most)",
                             chat_health_where(pl),
                             errmsg && *errmsg ? *errmsg : chat_strerror(rc));
        free(*errmsg);
        *errmsg = NULL;
        pl->store = NULL;
        return CHAT_OK;
    }
    if (rc != CHAT_OK && errmsg && disk_full(*errmsg)) {
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             "mosquitto-chat: cannot open store \"%s\": %s; running without it "
                             "(publishes refused) until the disk has room",
                             pl->cfg.db_path, *errmsg);
        free(*errmsg);
        *errmsg = NULL;
        pl->store = NULL;
        h->disk_full = true;
        return CHAT_OK;
    }
    return rc;
}

chat_err chat_health_open(struct chat_plugin *pl, char **errmsg)
{
    return open_store(pl, pl->cfg.verify_store, errmsg);
}

bool chat_health_opened(struct chat_plugin *pl)
{
    if (!pl->store) {
        return true; /* again when it opens */
    }
    if (!pl->relay && !chat_relay_init(pl)) {
        chat_relay_free(pl); /* none, rather than one half made */
        return false;
    }
    if (chat_store_recovered(pl->store)) {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: the store \"%s\" was not closed cleanly and the "
                             "machine restarted since: its last unsynced writes may be lost, so "
                             "its ids start a new incarnation (%s) and clients start over from "
                             "their cursors",
                             pl->cfg.db_path, chat_store_incarnation(pl->store));
    }
    return true;
}

/* From the tick, while the opener runs: reports its new failures to the
 * outage's log, and installs the store once it is open. */
static void opener_tick(struct chat_plugin *pl)
{
    struct chat_health *h = pl->health;
    char last[CHAT_QUIET_TEXT_MAX];
    uint64_t failures = 0;
    chat_store *st = chat_store_opener_take(h->opener, &failures, last, sizeof(last));
    for (; h->opener_failures < failures; h->opener_failures++) {
        chat_quiet_fail(&h->outage, "opening the store: %s", last);
    }
    if (!st) {
        return;
    }
    chat_store_opener_stop(h->opener);
    h->opener = NULL;
    pl->store = st;
    h->cidf_logged = false;
    chat_store_set_clock(pl->store, chat_store_clock, NULL);
    if (!chat_health_opened(pl)) {
        /* Out of memory for the relay: without it other brokers' messages
         * would not reach this broker's subscribers live; catch-up still
         * would. Said once; the store is installed all the same. */
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory for the relay of "
                                           "store \"in PostgreSQL\": live delivery from other "
                                           "brokers is off until the broker restarts");
    }
    chat_quiet_ok(&h->outage);
    mosquitto_log_printf(MOSQ_LOG_NOTICE, "mosquitto-chat: store \"%s\" open: publishing resumes",
                         chat_health_where(pl));
}

/* A store call failed for why (chat_store_last_error): notes a full disk,
 * descriptors run out, or a write error that stays. */
static void health_failed(struct chat_plugin *pl, const char *why)
{
    struct chat_health *h = pl->health;
    if (!h->disk_full && disk_full(why)) {
        h->disk_full = true;
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             "mosquitto-chat: the disk of \"%s\" is full: publishes are refused "
                             "until it has room again; reads go on",
                             pl->cfg.db_path);
    }
    if (!h->fds_out && fds_out(why)) {
        struct rlimit rl = {0, 0};
        (void)getrlimit(RLIMIT_NOFILE, &rl);
        h->fds_out = true;
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             "mosquitto-chat: the broker ran out of file descriptors (its limit "
                             "is %llu: ulimit -n, or LimitNOFILE of its systemd unit): the store "
                             "\"%s\" cannot open its files and publishes are refused until "
                             "descriptors are free again; reads go on. Raise the limit, or set "
                             "max_connections well below it (docs/scaling.md)",
                             (unsigned long long)rl.rlim_cur, pl->cfg.db_path);
    }
    if (!h->write_fatal && !h->disk_full && !h->fds_out && !shared(pl) && write_latched(why)) {
        h->write_fatal = true;
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             "mosquitto-chat: the store \"%s\" failed a write (%s): publishes are "
                             "refused until the broker restarts; reads go on. Not a full disk: "
                             "look at the disk and the store before restarting (\"When the store "
                             "fails\" in mosquitto-chat's protocol.md)",
                             pl->cfg.db_path, why);
    }
}

/* Once per open, when the store's cid filter has been filled (or failed
 * to be): the operator sees its size, its time, and that a failure only
 * costs speed. Backends without one (PostgreSQL) say nothing. */
static void log_cid_filter(struct chat_plugin *pl)
{
    struct chat_health *h = pl->health;
    chat_cid_filter f;
    if (h->cidf_logged || !pl->store) {
        return;
    }
    if (chat_store_cid_filter(pl->store, &f) != CHAT_OK) {
        h->cidf_logged = true;
        return;
    }
    if (!f.done) {
        return;
    }
    h->cidf_logged = true;
    if (f.ready) {
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: cid filter of store \"%s\" ready: %llu cids "
                             "read in %llu ms",
                             pl->cfg.db_path, (unsigned long long)f.keys, (unsigned long long)f.ms);
    } else {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: cid filter of store \"%s\" not filled (a read "
                             "error); every cid is looked up in the store until it is reopened",
                             pl->cfg.db_path);
    }
}

void chat_health_tick(struct chat_plugin *pl, time_t now)
{
    struct chat_health *h = pl->health;
    struct statvfs fs;
    char *errmsg = NULL;

    if (h->opener) {
        opener_tick(pl);
    }
    log_cid_filter(pl);
    if (shared(pl) && chat_store_available(pl->store)) {
        chat_quiet_ok(&h->outage); /* the "back" line, when it was down */
    }
    if ((!h->disk_full && !h->fds_out) || now < h->next_look || shared(pl)) {
        return;
    }
    h->next_look = now + RETRY_S;
    if (h->disk_full && (statvfs(pl->cfg.db_path, &fs) != 0 ||
                         (uint64_t)fs.f_bavail * fs.f_frsize < (uint64_t)ROOM_BYTES)) {
        return;
    }
    if (h->fds_out && !fds_free()) {
        return;
    }
    /* Room again: LevelDB forgets its write error only when reopened. */
    chat_store_close(pl->store);
    pl->store = NULL;
    chat_err rc = open_store(pl, false, &errmsg);
    if (rc != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: cannot open store \"%s\" again: %s",
                             pl->cfg.db_path, errmsg ? errmsg : chat_strerror(rc));
        free(errmsg);
        return;
    }
    if (pl->store) {
        h->disk_full = false;
        h->fds_out = false;
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: store \"%s\" open again: publishing resumes",
                             pl->cfg.db_path);
    }
}

/* ===========================================================================
 * The log line of a store error
 * ========================================================================= */

/* Store error lines per second at most: a client publishing as fast as it
 * can while the disk is full must not fill the broker's log too. */
#define ERR_LINES_PER_SECOND 10u

void chat_log_store_error(struct chat_plugin *pl, chat_err rc, const char *fmt, ...)
{
    struct chat_health *h = pl->health;
    char what[512];
    va_list ap;
    int64_t second = chat_now_ms() / 1000;
    const char *detail = pl->store ? chat_store_last_error(pl->store) : "the store is closed";

    if (!pl->store && h->opener) {
        /* Not open yet: the opener's failures say why (opener_tick), and
         * the refusals of clients' requests are logged where they occur. */
        return;
    }
    health_failed(pl, detail);
    if (rc == CHAT_EIO && shared(pl) && pl->store && !chat_store_available(pl->store)) {
        /* An outage: one line per publish refused would flood the log. */
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        chat_quiet_fail(&h->outage, "%s: %s%s%s%s", what, chat_strerror(rc), detail[0] ? " (" : "",
                        detail, detail[0] ? ")" : "");
        return;
    }
    if (second != h->err_second) {
        if (h->err_dropped) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: %u more store errors not logged (at most %u "
                                 "lines a second)",
                                 h->err_dropped, ERR_LINES_PER_SECOND);
        }
        h->err_second = second;
        h->err_lines = 0;
        h->err_dropped = 0;
    }
    if (h->err_lines >= ERR_LINES_PER_SECOND) {
        h->err_dropped++;
        return;
    }
    h->err_lines++;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: %s: %s%s%s%s", what, chat_strerror(rc),
                         detail[0] ? " (" : "", detail, detail[0] ? ")" : "");
}
