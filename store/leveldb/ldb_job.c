/* ldb_job: backups, compactions and repairs (see ldb_job.h). */
#include "ldb_job.h"
#include "ldb_copy.h"
#include "ldb_run.h"
#include "ldb_store.h"
#include "store_job.h"
#include "store_text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BATCH_BYTES (1u << 20) /* a backup writes its copy in batches of this much */

/* Copies the snapshot into a new store at the job's ".partial", then
 * renames it to its dest. */
static void run_backup(store_job *j, ldb *st, const leveldb_snapshot_t *snap)
{
    char *err = NULL;
    char inc[STORE_INCARNATION_LEN + 1];
    key krun, kinc;
    uint64_t records = 0;
    size_t bytes = 0;
    const char *failed = NULL;
    const char *partial = store_job_partial(j), *dest = store_job_dest(j);

    meta_key(&krun, META_RUNNING);
    meta_key(&kinc, META_INCARNATION);
    if (!ldb_new_incarnation(inc)) {
        store_job_finish(j, "cannot draw an incarnation for the copy");
        return;
    }
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    leveldb_options_set_error_if_exists(o, 1);
    leveldb_options_set_compression(o, leveldb_snappy_compression);
    leveldb_t *out = leveldb_open(o, partial, &err);
    if (err) {
        store_job_finish(j, "cannot create %s: %s", partial, err);
        leveldb_free(err);
        leveldb_options_destroy(o);
        return;
    }
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_readoptions_set_snapshot(ro, snap);
    leveldb_readoptions_set_verify_checksums(ro, 1);
    leveldb_readoptions_set_fill_cache(ro, 0);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, ro);
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *k = leveldb_iter_key(it, &klen);
        const char *v = leveldb_iter_value(it, &vlen);
        if (store_job_cancelled(j)) {
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
            store_job_set_records(j, records);
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
    store_job_set_records(j, records);
    if (failed || err || rerr) {
        store_job_finish(j, "%s%s%s",
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
    if (rename(partial, dest) != 0) {
        store_job_finish(j, "cannot rename %s to %s: %s", partial, dest, strerror(errno));
        return;
    }
    ldb_sync_parent(dest);
    store_job_finish(j, NULL);
}

static void job_run(store_job *j, chat_store *cs, void *taken)
{
    ldb *st = ldb_of(cs);
    if (store_job_kind(j) == CHAT_JOB_BACKUP) {
        run_backup(j, st, taken);
    } else {
        /* LevelDB's C API reports nothing here (see op_compact); a failed
         * compaction (an I/O error, a block that fails its checksum) stays
         * as its background error, which a write of an empty batch (an
         * empty record in the log, no key) returns. */
        leveldb_writebatch_t *wb = leveldb_writebatch_create();
        char *err = NULL;
        leveldb_compact_range(st->db, NULL, 0, NULL, 0);
        leveldb_write(st->db, st->wopt_lazy, wb, &err);
        leveldb_writebatch_destroy(wb);
        if (err) {
            store_job_finish(j, "%s", err);
            leveldb_free(err);
        } else {
            store_job_finish(j, NULL);
        }
    }
}

/* The copy is the store as it is at the start, whatever is written
 * meanwhile: the snapshot is taken on the owner's thread. */
static void *job_take(chat_store *cs, chat_job_kind kind)
{
    ldb *st = ldb_of(cs);
    return kind == CHAT_JOB_BACKUP ? (void *)leveldb_create_snapshot(st->db) : NULL;
}

static void job_give_back(chat_store *cs, void *taken)
{
    ldb *st = ldb_of(cs);
    leveldb_release_snapshot(st->db, taken);
}

static const store_job_work ldb_work = {job_run, job_take, job_give_back};

chat_err ldb_job_start(chat_store *cs, chat_job_kind kind, const char *dest)
{
    return store_job_start(cs, &ldb_work, kind, dest);
}

/* ------------------------------------------------------------------------
 * Repair
 * --------------------------------------------------------------------- */

/* Whether the directory holds any of LevelDB's files (CURRENT, a
 * manifest, a table or a write-ahead log): what RepairDB rebuilds a store
 * from. Without one it would make a new, empty store, which repair must not
 * (only import creates a store). */
static bool has_store_files(const char *path)
{
    static const char *const exts[] = {".ldb", ".sst", ".log"};
    bool found = false;
    DIR *d = opendir(path);
    for (struct dirent *e; d && !found && (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        found = !strcmp(e->d_name, "CURRENT") || !strncmp(e->d_name, "MANIFEST-", 9);
        for (size_t i = 0; !found && i < sizeof(exts) / sizeof(exts[0]); i++) {
            found = n > 4 && !strcmp(e->d_name + n - 4, exts[i]);
        }
    }
    if (d) {
        closedir(d);
    }
    return found;
}

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
    if (!has_store_files(path)) {
        store_open_error(errmsg, path, "no store in this directory (no LevelDB files)");
        return CHAT_EINVAL;
    }
    /* RepairDB takes no lock of its own: hold LevelDB's, as an open would,
     * so that the store of a running broker is refused, not rewritten
     * under it. */
    snprintf(lock, sizeof(lock), "%s/LOCK", path);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fd < 0 || fcntl(fd, F_SETLK, &fl) != 0) {
        store_open_error(errmsg, "the store is in use (stop the broker first)", strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return CHAT_EIO;
    }
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_compression(o, leveldb_snappy_compression);
    /* LevelDB's repair checks a table's block checksums only with paranoid
     * checks: without them it kept a garbled block, and the store it
     * "repaired" was refused at the next open all the same. */
    leveldb_options_set_paranoid_checks(o, 1);
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
