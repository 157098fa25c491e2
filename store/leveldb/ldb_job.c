/* ldb_job: backups, compactions and repairs (see ldb_job.h). */
#include "ldb_job.h"
#include "ldb_copy.h"
#include "ldb_run.h"
#include "ldb_store.h"
#include "store_text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BATCH_BYTES (1u << 20) /* a backup writes its copy in batches of this much */

struct ldb_job {
    ldb *st;
    pthread_t thread;
    pthread_mutex_t mu;
    chat_job_state state; /* under mu */
    atomic_bool cancel;   /* close asks the thread to stop */
    atomic_bool finished; /* the thread has set its result */
    const leveldb_snapshot_t *snap;
    char partial[4096 + 16];
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The job's end: its status and, on failure, why. */
static void finish(struct ldb_job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void finish(struct ldb_job *j, const char *fmt, ...)
{
    pthread_mutex_lock(&j->mu);
    j->state.status = fmt ? CHAT_JOB_FAILED : CHAT_JOB_DONE;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(j->state.error, sizeof(j->state.error), fmt, ap);
        va_end(ap);
    }
    j->state.finished_ms = wall_ms();
    pthread_mutex_unlock(&j->mu);
    atomic_store(&j->finished, true);
}

/* Copies the snapshot into a new store at j->partial, then renames it. */
static void run_backup(struct ldb_job *j)
{
    char *err = NULL;
    char inc[STORE_INCARNATION_LEN + 1];
    key krun, kinc;
    uint64_t records = 0;
    size_t bytes = 0;
    const char *failed = NULL;

    meta_key(&krun, META_RUNNING);
    meta_key(&kinc, META_INCARNATION);
    if (!ldb_new_incarnation(inc)) {
        finish(j, "cannot draw an incarnation for the copy");
        return;
    }
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_options_set_error_if_exists(o, 1);
    leveldb_options_set_compression(o, leveldb_snappy_compression);
    leveldb_t *out = leveldb_open(o, j->partial, &err);
    if (err) {
        finish(j, "cannot create %s: %s", j->partial, err);
        leveldb_free(err);
        leveldb_options_destroy(o);
        return;
    }
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_readoptions_set_snapshot(ro, j->snap);
    leveldb_readoptions_set_verify_checksums(ro, 1);
    leveldb_readoptions_set_fill_cache(ro, 0);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_iterator_t *it = leveldb_create_iterator(j->st->db, ro);
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *k = leveldb_iter_key(it, &klen);
        const char *v = leveldb_iter_value(it, &vlen);
        if (atomic_load(&j->cancel)) {
            failed = "stopped: the store was closed";
            break;
        }
        /* The copy is a store closed cleanly (no run marker), with an
         * incarnation of its own. */
        if ((klen == krun.len && !memcmp(k, krun.buf, klen)) ||
            (klen == kinc.len && !memcmp(k, kinc.buf, klen))) {
            continue;
        }
        leveldb_writebatch_put(wb, k, klen, v, vlen);
        bytes += klen + vlen;
        records++;
        if (bytes >= BATCH_BYTES) {
            leveldb_write(out, wo, wb, &err);
            leveldb_writebatch_clear(wb);
            bytes = 0;
            if (err) {
                break;
            }
            pthread_mutex_lock(&j->mu);
            j->state.records = records;
            pthread_mutex_unlock(&j->mu);
        }
    }
    char *rerr = err ? NULL : iter_error(it);
    leveldb_iter_destroy(it);
    if (!failed && !err && !rerr) {
        /* The last batch is synced, and with it the whole log. */
        leveldb_writebatch_put(wb, kinc.buf, kinc.len, inc, STORE_INCARNATION_LEN);
        leveldb_writeoptions_set_sync(wo, 1);
        leveldb_write(out, wo, wb, &err);
    }
    leveldb_writebatch_destroy(wb);
    leveldb_writeoptions_destroy(wo);
    leveldb_readoptions_destroy(ro);
    leveldb_close(out);
    leveldb_options_destroy(o);
    pthread_mutex_lock(&j->mu);
    j->state.records = records;
    pthread_mutex_unlock(&j->mu);
    if (failed || err || rerr) {
        finish(j, "%s%s%s",
               failed ? failed
               : err  ? "writing the copy: "
                      : "reading the store: ",
               failed ? ""
               : err  ? err
                      : rerr,
               "");
        leveldb_free(err);
        leveldb_free(rerr);
        return;
    }
    if (rename(j->partial, j->state.path) != 0) {
        finish(j, "cannot rename %s to %s: %s", j->partial, j->state.path, strerror(errno));
        return;
    }
    ldb_sync_parent(j->state.path);
    finish(j, NULL);
}

static void *job_main(void *arg)
{
    struct ldb_job *j = arg;
    if (j->state.kind == CHAT_JOB_BACKUP) {
        run_backup(j);
    } else {
        /* LevelDB's C API reports nothing here (see op_compact). */
        leveldb_compact_range(j->st->db, NULL, 0, NULL, 0);
        finish(j, NULL);
    }
    return NULL;
}

static void job_free(ldb *st)
{
    struct ldb_job *j = st->job;
    if (!j) {
        return;
    }
    pthread_join(j->thread, NULL);
    if (j->snap) {
        leveldb_release_snapshot(st->db, j->snap);
    }
    pthread_mutex_destroy(&j->mu);
    free(j);
    st->job = NULL;
}

chat_err ldb_job_start(chat_store *cs, chat_job_kind kind, const char *dest)
{
    ldb *st = ldb_of(cs);
    struct stat sb;
    if (st->job && !atomic_load(&st->job->finished)) {
        store_set_text(cs->last_err, sizeof(cs->last_err), "a %s is under way",
                       st->job->state.kind == CHAT_JOB_BACKUP ? "backup" : "compaction");
        return CHAT_EINVAL;
    }
    job_free(st);
    struct ldb_job *j = calloc(1, sizeof(*j));
    if (!j) {
        return CHAT_ENOMEM;
    }
    j->st = st;
    j->state.kind = kind;
    j->state.status = CHAT_JOB_RUNNING;
    j->state.started_ms = wall_ms();
    if (kind == CHAT_JOB_BACKUP) {
        int n = snprintf(j->state.path, sizeof(j->state.path), "%s", dest);
        snprintf(j->partial, sizeof(j->partial), "%s.partial", dest);
        if (n < 0 || (size_t)n >= sizeof(j->state.path) || stat(dest, &sb) == 0 ||
            stat(j->partial, &sb) == 0) {
            store_set_text(cs->last_err, sizeof(cs->last_err),
                           "backup destination too long or already there: %s", dest);
            free(j);
            return CHAT_EINVAL;
        }
        /* The copy is the store as it is now, whatever is written meanwhile. */
        j->snap = leveldb_create_snapshot(st->db);
    }
    pthread_mutex_init(&j->mu, NULL);
    st->job = j;
    if (pthread_create(&j->thread, NULL, job_main, j) != 0) {
        if (j->snap) {
            leveldb_release_snapshot(st->db, j->snap);
        }
        pthread_mutex_destroy(&j->mu);
        free(j);
        st->job = NULL;
        store_set_text(cs->last_err, sizeof(cs->last_err), "cannot start the job's thread");
        return CHAT_EIO;
    }
    return CHAT_OK;
}

chat_err ldb_job_state(chat_store *cs, chat_job_state *out)
{
    ldb *st = ldb_of(cs);
    struct ldb_job *j = st->job;
    if (!j) {
        memset(out, 0, sizeof(*out));
        return CHAT_OK;
    }
    pthread_mutex_lock(&j->mu);
    *out = j->state;
    pthread_mutex_unlock(&j->mu);
    return CHAT_OK;
}

void ldb_job_stop(ldb *st)
{
    if (st->job) {
        atomic_store(&st->job->cancel, true);
        job_free(st);
    }
}

/* ------------------------------------------------------------------------
 * Repair
 * --------------------------------------------------------------------- */

chat_err ldb_repair(const char *path, char **errmsg)
{
    char lock[4096 + 8];
    char *err = NULL;
    chat_err rc = CHAT_OK;
    struct stat sb;

    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        store_open_error(errmsg, path, "no such store directory");
        return CHAT_EINVAL;
    }
    /* RepairDB takes no lock of its own: hold LevelDB's, as an open would,
     * so that the store of a running broker is refused, not rewritten
     * under it. */
    snprintf(lock, sizeof(lock), "%s/LOCK", path);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fd < 0 || fcntl(fd, F_SETLK, &fl) != 0) {
        store_open_error(errmsg, "the store is in use (stop the broker first)",
                         strerror(fd < 0 ? errno : errno));
        if (fd >= 0) {
            close(fd);
        }
        return CHAT_EIO;
    }
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_compression(o, leveldb_snappy_compression);
    leveldb_repair_db(o, path, &err);
    leveldb_options_destroy(o);
    close(fd); /* releases the lock: the open below takes LevelDB's own */
    if (err) {
        store_open_error(errmsg, "repair", err);
        leveldb_free(err);
        return CHAT_EIO;
    }
    chat_store *cs = NULL;
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    rc = ldb_open(path, &opts, &cs, errmsg);
    if (rc != CHAT_OK) {
        return rc;
    }
    /* Records may be gone, and with them ids that would be given again:
     * clients must start over from their cursors. */
    ldb *st = ldb_of(cs);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    if (!ldb_new_incarnation(cs->incarnation)) {
        store_open_error(errmsg, "cannot draw a store incarnation", "/dev/urandom gave too little");
        rc = CHAT_EIO;
    } else {
        ldb_put_meta(wb, META_INCARNATION, cs->incarnation, STORE_INCARNATION_LEN);
        leveldb_write(st->db, st->wopt_sync, wb, &err);
        if (err) {
            store_open_error(errmsg, "writing the new incarnation", err);
            leveldb_free(err);
            rc = CHAT_EIO;
        }
    }
    leveldb_writebatch_destroy(wb);
    chat_store_close(cs);
    return rc;
}
