/* ldb_run: the run marker and the incarnation (see ldb_run.h). */
#include "ldb_run.h"
#include "store_text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BOOT_ID_MAX 64u

/* The kernel's id of this boot, "" when it cannot be read (then every
 * unclean shutdown counts as one that may have lost writes). */
static void read_boot_id(char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (!f) {
        return;
    }
    if (!fgets(out, (int)cap, f)) {
        out[0] = '\0';
    }
    (void)fclose(f); /* only read */
    out[strcspn(out, "\r\n")] = '\0';
}

bool ldb_new_incarnation(char out[STORE_INCARNATION_LEN + 1])
{
    unsigned char r[STORE_INCARNATION_LEN / 2] = {0}; /* formatted even when the read fails */
    size_t got = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < sizeof(r)) {
        ssize_t n = read(fd, r + got, sizeof(r) - got);
        if (n <= 0 && errno != EINTR) {
            break;
        }
        got += n > 0 ? (size_t)n : 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    for (size_t i = 0; i < sizeof(r); i++) {
        snprintf(out + 2 * i, 3, "%02x", r[i]);
    }
    return got == sizeof(r);
}

/* Counts the groups ('H' records): once, for a store from before the
 * '#groups' record. */
static chat_err count_groups(ldb *st, uint64_t *n)
{
    char *err = NULL;
    char tag = TAG_HEAD;
    *n = 0;
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, &tag, 1); !(err = iter_error(it)) && leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen < 1 || kb[0] != TAG_HEAD) {
            break;
        }
        (*n)++;
    }
    leveldb_iter_destroy(it);
    return err ? ldb_read_error(st, err, "counting the groups") : CHAT_OK;
}

/* Reads the '#format' record: CHAT_OK with *older set for a store of an
 * older version than this code writes (one from before the record is
 * version 1), CHAT_EFORMAT for a newer version than this code reads.
 * Before any write: a newer layout must not be written by older code. */
static chat_err check_format(ldb *st, bool *older, char **errmsg)
{
    char *v = NULL, why[160];
    size_t len = 0;
    uint64_t version;
    chat_err rc = ldb_get_meta(st, META_FORMAT, &v, &len);

    *older = rc == CHAT_OK && !v;
    if (rc != CHAT_OK || !v) {
        return rc;
    }
    version = len == 8 ? get_u64(v) : 0;
    leveldb_free(v);
    *older = version != 0 && version < LDB_FORMAT;
    if (version == 0) {
        store_set_text(why, sizeof(why),
                       "the store's format record (%zu bytes) holds no version number", len);
        store_open_error(errmsg, "damaged store", why);
        return CHAT_ECORRUPT;
    }
    if (version > LDB_FORMAT) {
        store_set_text(why, sizeof(why),
                       "format version %llu, newer than this mosquitto-chat reads (%u): run the "
                       "newer version that wrote it, or restore a backup",
                       (unsigned long long)version, LDB_FORMAT);
        store_open_error(errmsg, "store written by a newer mosquitto-chat", why);
        return CHAT_EFORMAT;
    }
    return CHAT_OK;
}

chat_err ldb_run_start(ldb *st, const char *boot_override, char **errmsg)
{
    char boot[BOOT_ID_MAX], prev_boot[BOOT_ID_MAX], val[BOOT_ID_MAX + 1];
    char *run = NULL, *inc = NULL, *grp = NULL, *err = NULL;
    size_t run_len = 0, inc_len = 0, grp_len = 0;
    bool fresh = false, count = false, old_format = false;
    leveldb_writebatch_t *wb = NULL;
    chat_err rc;

    if (boot_override) {
        store_set_text(boot, sizeof(boot), "%s", boot_override);
    } else {
        read_boot_id(boot, sizeof(boot));
    }
    rc = check_format(st, &old_format, errmsg);
    if (rc == CHAT_OK) {
        rc = ldb_get_meta(st, META_RUNNING, &run, &run_len);
    }
    if (rc == CHAT_OK) {
        rc = ldb_get_meta(st, META_INCARNATION, &inc, &inc_len);
    }
    if (rc == CHAT_OK) {
        rc = ldb_get_meta(st, META_GROUPS, &grp, &grp_len);
    }
    if (rc != CHAT_OK) {
        goto fail;
    }
    if (inc && inc_len == STORE_INCARNATION_LEN) {
        memcpy(st->base.incarnation, inc, STORE_INCARNATION_LEN);
        st->base.incarnation[STORE_INCARNATION_LEN] = '\0';
    } else {
        /* a new store, or one from before incarnations */
        fresh = true;
    }
    if (run && !fresh) {
        /* The previous run did not close: a process crash loses nothing
         * that reached the kernel, but a machine that restarted since may
         * have lost writes that were not synced, unless every write was. */
        size_t n = run_len > 1 ? run_len - 1 : 0;
        n = n < sizeof(prev_boot) ? n : sizeof(prev_boot) - 1;
        memcpy(prev_boot, run_len > 1 ? run + 1 : "", n);
        prev_boot[n] = '\0';
        bool rebooted = !boot[0] || !prev_boot[0] || strcmp(boot, prev_boot) != 0;
        st->base.recovered = rebooted && (run_len < 1 || run[0] != (char)CHAT_SYNC_ALWAYS);
    }
    if ((fresh || st->base.recovered) && !ldb_new_incarnation(st->base.incarnation)) {
        store_open_error(errmsg, "cannot draw a store incarnation", "/dev/urandom gave too little");
        rc = CHAT_EIO;
        goto fail;
    }
    if (grp && grp_len == 8) {
        st->groups = get_u64(grp);
    } else {
        rc = count_groups(st, &st->groups);
        count = true;
        if (rc != CHAT_OK) {
            goto fail;
        }
    }
    wb = leveldb_writebatch_create();
    val[0] = (char)st->sync;
    memcpy(val + 1, boot, strlen(boot) + 1); /* the NUL fits: boot is a string of BOOT_ID_MAX */
    ldb_put_meta(wb, META_RUNNING, val, 1 + strlen(boot));
    if (fresh || st->base.recovered) {
        ldb_put_meta(wb, META_INCARNATION, st->base.incarnation, STORE_INCARNATION_LEN);
    }
    if (count) {
        put_u64(val, st->groups);
        ldb_put_meta(wb, META_GROUPS, val, 8);
    }
    if (old_format) {
        /* A new store, or an older one, which version 2 reads as it is
         * (its 'H' records hold the heads, its 'K' records are deleted
         * with their messages): from this synced write on, before any
         * append leaves an 'H' behind its messages, code that would read
         * 'H' as the head refuses the store. */
        put_u64(val, LDB_FORMAT);
        ldb_put_meta(wb, META_FORMAT, val, 8);
    }
    leveldb_write(st->db, st->wopt_sync, wb, &err);
    if (err) {
        store_open_error(errmsg, "writing the run marker", err);
        leveldb_free(err);
        rc = CHAT_EIO;
        goto fail;
    }
    st->running = true;

fail:
    if (rc != CHAT_OK) {
        store_open_error(errmsg, "reading the store's run records", st->base.last_err);
    }
    if (wb) {
        leveldb_writebatch_destroy(wb);
    }
    leveldb_free(run);
    leveldb_free(inc);
    leveldb_free(grp);
    return rc;
}

void ldb_run_end(ldb *st)
{
    key k;
    char *err = NULL;
    meta_key(&k, META_RUNNING);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_delete(wb, k.buf, k.len);
    leveldb_write(st->db, st->wopt_sync, wb, &err);
    leveldb_writebatch_destroy(wb);
    leveldb_free(err);
}
