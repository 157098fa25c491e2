/* ldb_store: the LevelDB backend's constructor and ops table, and the ops
 * of the whole store: close, figures, compaction, syncs (see ldb_store.h).
 * Its design note comes first: the key layout of the whole backend and the
 * invariants its modules keep, which every file of store/leveldb/ cites by
 * name.
 *
 * Design note: the key layout (ldb_keys.h encodes it; every integer is 8
 * bytes big-endian, so that byte order is id order and a seek plus a
 * forward scan reads a page):
 *
 *   'H' g            -> floor (8)             the group exists (it had a message); the head
 *                                             is the highest of this, first - 1 and the
 *                                             group's newest 'M' id (dense-ids)
 *   'F' g            -> first (8)             lowest id still kept (retention)
 *   'M' g id         -> envelope bytes        one copy per message: its current version
 *                                             (a recall or an edit rewrites it, one-copy)
 *   'C' g m d        -> cursor (8) used (8)   last id device d of member m acked, and
 *                                             when the device was last used (ms; older
 *                                             stores: the cursor alone, used = 0)
 *   'X' g m          -> max (8)               highest cursor any device of m has had
 *   'J' g m          -> joined (8) [gen (8)]  member m joined when head was this; gen
 *                                             when it joined during a deletion of g
 *   'G' m g          -> joined (8) [gen (8)]  the same, indexed by member
 *   'I' g m cid      -> id (8)                (group, from, cid) already stored
 *   'K' g id         -> m cid                 the 'I' key of message id, for its deletion
 *   'D' g            -> gen (8) bound (8) key a deletion of g under way: its generation,
 *                                             head + 1 when it began, its resume key
 *   'R' g m          -> read (8)              highest id member m has read (0: none yet),
 *                                             from its join on; m bare, so that a group's
 *                                             members come out in name order
 *   'N' g            -> count (8)             members of g (no record: none)
 *   'P' m d          -> created (8) reg       the push registration of device d of
 *                                             member m (push-with-member): bytes the
 *                                             store does not read, and when it was made (ms)
 *   '#' "deletions"  -> gen (8)               the last deletion's generation
 *   '#' "groups"     -> count (8)             the number of 'H' records (groups)
 *   '#' "incarnation"-> 32 hex digits         see chat_store_incarnation
 *   '#' "running"    -> mode (1) boot id      a run under way (incarnation-first)
 *   '#' "format"     -> version (8)           the key layout's version: 2 since 'H' is
 *                                             a floor (issue 16); a store without it is
 *                                             version 1, read as it is and marked 2
 *   '#' "receipts"   -> 1 (1)                 'R' and 'N' are kept (a store from before
 *                                             gets them once, at open)
 *
 * where g, m, d and cid are length-prefixed strings (two bytes, big-endian),
 * so that no key is a prefix of another with a different meaning; the
 * exceptions are the g ending a 'G' key and the m ending an 'R' key, stored
 * bare so that a member's groups, and a group's members, come out in byte
 * order of their names.
 *
 * Invariants, by name. dense-ids, kept-range, cursor-forward, the
 * read-forward part of read-markers, change-atomic, one-copy and
 * cid-reserved are the promises of chat_store.h, here in terms of the
 * keys; the others are this backend's own (member-pairs and deletable-keys
 * are how its keys stay consistent, write-latch and incarnation-first how
 * it deals with its files). The modules that keep
 * each one are named in brackets. (PostgreSQL keeps the promises in
 * transactions, dense-ids by the group's counter row lock, and has no
 * files of its own to deal with: see docs/postgresql.md.)
 *
 *   dense-ids          Ids of a group are 1..head with no gap, and no id is
 *                      given twice. The head is not written with each
 *                      message (it cost a record per message, format 2): it
 *                      is max('H', first - 1, the newest 'M' id). 'H' is
 *                      written with the group's first message (and counted
 *                      in '#groups' in that batch) and by a deletion's first
 *                      step; retention's step that takes the newest message
 *                      moves 'F' to head + 1 in its batch. So a crash at any
 *                      point leaves a head at least every id ever given.
 *                      [ldb_log, ldb_trim, ldb_delete]
 *   kept-range         first <= head + 1; every id in [first, head] has an
 *                      'M' record, and no read returns an id below first.
 *                      [ldb_log, ldb_trim, ldb_delete]
 *   cursor-forward     A cursor never moves back and never exceeds head;
 *                      'X' g m is at least every cursor of m's devices,
 *                      written in the batch that moves one (a store from
 *                      before 'X' computes it once from the cursors).
 *                      [ldb_cursor]
 *   member-pairs       'J' g m exists if and only if 'G' m g exists.
 *                      [ldb_member, ldb_delete, ldb_cursor (device expiry
 *                      drops a member with its last cursor)]
 *   write-latch        The first WRITE error wins: after a failed write (or
 *                      a failed background sync) every write is refused
 *                      with CHAT_EIO until the store is reopened, since
 *                      LevelDB may hold part of what it was given. A failed
 *                      READ (a damaged block, caught by LevelDB's
 *                      checksums, which every read verifies) fails that
 *                      call only: one bad block must not stop every publish
 *                      to every group. (LevelDB itself still stops all
 *                      writes if one of its background compactions hits the
 *                      damage; that store then needs repair.) [ldb_db,
 *                      ldb_syncer]
 *   deletable-keys     Every key has a way to be deleted: an 'I' entry has
 *                      its 'K' reverse (written in the message's batch,
 *                      deleted with the message); an 'I' without one
 *                      (stores from before 'K') counts only while its id is
 *                      at least first, and a group deletion removes it. A
 *                      member's records ('J', 'G', 'R', 'X', its 'C' and
 *                      its part of 'N') go when it leaves, with its group,
 *                      and, where the caller's groups are open, with its
 *                      last device cursor (device expiry, which deletes
 *                      'C' records unused for a period): a member that
 *                      joined by using a group always has a device.
 *                      [ldb_log, ldb_trim, ldb_delete, ldb_member,
 *                      ldb_cursor]
 *   incarnation-first  A new incarnation is on disk before the first write
 *                      that could reuse an id: chat_store_open syncs it
 *                      with this run's marker before it returns, and only a
 *                      clean close (everything synced) removes the marker.
 *                      [ldb_run]
 *   read-markers       'R' g m exists if and only if m is a member of g
 *                      whose membership counts, and 'N' g is the number of
 *                      them: both are written in the batches that add and
 *                      remove members (device expiry's included); a group
 *                      deletion's first batch drops 'N' (no earlier
 *                      membership counts from then on) and its walk the old
 *                      'R' records. A read marker never
 *                      moves back and never exceeds head; it moves in the
 *                      batch that moves the reading device's cursor to it
 *                      (read-forward). [ldb_member, ldb_delete, ldb_read]
 *   change-atomic      A change of message N (recall, edit) puts N's new
 *                      version over 'M' g N and M, the message that carries
 *                      it, under 'M' g head + 1 in one batch: both or
 *                      neither after a crash. [ldb_change]
 *   one-copy           A change adds no key but M's: N keeps its one 'M'
 *                      record (rewritten), its 'I' and 'K' keys, so every
 *                      read, retention and a deletion see only the current
 *                      version, and deletable-keys holds as for any
 *                      message. [ldb_change]
 *   cid-reserved       N's 'I' entry stays while N is kept, whatever its
 *                      version: a retry of its cid is a duplicate answered
 *                      with the current version (ldb_append reads 'M' g N
 *                      through the entry). [ldb_change, ldb_log]
 *   push-with-member   'P' m d exists only while m has a membership that
 *                      counts: the batch that removes m's last one (a
 *                      leave, a group deletion's walk) deletes m's 'P'
 *                      records, and a put for a member of no group writes
 *                      nothing. [ldb_push, ldb_member, ldb_delete]
 */
#include "ldb_store.h"
#include "chat_mono.h"
#include "ldb_change.h"
#include "ldb_cidf.h"
#include "ldb_cursor.h"
#include "ldb_damage.h"
#include "ldb_db.h"
#include "ldb_admin.h"
#include "ldb_delete.h"
#include "ldb_job.h"
#include "store_job.h"
#include "ldb_log.h"
#include "ldb_member.h"
#include "ldb_push.h"
#include "ldb_read.h"
#include "ldb_run.h"
#include "ldb_syncer.h"
#include "ldb_trim.h"
#include "store_text.h"

#include <dirent.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* LevelDB's memtable when the caller sets none: 32 MiB, two at most while
 * one is written out (64 MiB). Every append also looks its cid up, which
 * LevelDB 1.23 answers by asking each level's file that spans the key's
 * range (a Bloom filter each): a lookup that asks two files counts a
 * "seek" against the first, and a few hundred of those make LevelDB
 * compact that file into the next level. With the chat's keys every new
 * table spans a group's whole range, so that compaction rewrites all of
 * level 2, once per memtable written out: the fewer memtables, the less
 * compaction. Measured (issue 16; 20,000 msg/s, 1 member, fsync none,
 * 40 s, 800,000 messages, 160 MB store; two runs each), 8 MiB: 98-102
 * memtables, 972-1,083 MB written by compactions, 42.1-43.6 us of broker
 * CPU per message (all threads); 32 MiB: 24, 523 MB, 28.9-33.3 us;
 * 64 MiB: 12, 448 MB, 30.4-30.7 us. Block size (16 KiB), max_file_size
 * (8, 32 MiB) and no compression changed nothing or wrote more. */
#define LDB_WRITE_BUFFER_DEFAULT (32u << 20)

/* What LevelDB's memory must fall by for chat_store_release_memory to
 * trim: a memtable written out (half of the least write_buffer_mb). */
#define RELEASE_MIN (512u << 10)
#define RELEASE_LATEST_US 30000000ll

/* Entries of the value cache: about 100 bytes each. */
#define CACHE_ENTRIES 262144u

/* The bytes of the store's files (LevelDB's tables, write-ahead log,
 * manifest, and our markers: a few dozen files in one directory). LevelDB's
 * own estimate (leveldb_approximate_sizes) counts only its tables: it reads
 * 0 until the first memtable is written out, and misses the log. */
static uint64_t dir_bytes(const char *path)
{
    struct stat sb;
    uint64_t sum = 0;
    DIR *d = opendir(path);
    if (!d) {
        return 0;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode)) {
            sum += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
    return sum;
}

static chat_err op_stats(chat_store *cs, uint64_t *groups, uint64_t *bytes)
{
    ldb *st = ldb_of(cs);
    if (groups) {
        *groups = st->groups;
    }
    if (bytes) {
        *bytes = dir_bytes(st->path);
    }
    return CHAT_OK;
}

static void op_close(chat_store *cs)
{
    ldb *st = ldb_of(cs);
    ldb_syncer_stop(st);
    store_job_stop(cs);
    /* Its scan reads the database: joined before the database closes. */
    ldb_cidf_destroy(st->cidf);
    st->cidf = NULL;
    if (st->db && st->running && !atomic_load(&st->failed) && ldb_sync_all_logs(st->path)) {
        /* A clean close: everything is on disk, and the next open must not
         * take this run for one that lost writes (invariant incarnation-first). A close
         * after a write error leaves the marker. */
        ldb_run_end(st);
    }
    if (st->db) {
        leveldb_close(st->db);
    }
    free(st->path);
    leveldb_writebatch_destroy(st->append_wb);
    leveldb_writeoptions_destroy(st->wopt_sync);
    leveldb_writeoptions_destroy(st->wopt_lazy);
    leveldb_writeoptions_destroy(st->wopt);
    leveldb_readoptions_destroy(st->ropt);
    leveldb_options_destroy(st->options);
    leveldb_filterpolicy_destroy(st->filter);
    leveldb_cache_destroy(st->lru);
    chat_cache_destroy(st->cache);
    free(st);
}

static chat_err op_sync_state(chat_store *cs, chat_sync_state *out)
{
    ldb *st = ldb_of(cs);
    if (!st->sync_thread) {
        return CHAT_EINVAL;
    }
    ldb_syncer_state(st->sync_thread, out);
    return CHAT_OK;
}

static chat_err op_sync(chat_store *cs)
{
    ldb *st = ldb_of(cs);
    if (!st->dirty) {
        return CHAT_OK;
    }
    /* A synced write of an empty batch fsyncs the log, and with it every
     * unsynced record before it. */
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    chat_err rc = ldb_write_batch(st, wb, st->wopt_sync, NULL);
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK) {
        st->dirty = false;
    }
    return rc;
}

static chat_err op_sync_async(chat_store *cs)
{
    ldb *st = ldb_of(cs);
    if (atomic_load(&st->failed)) {
        return ldb_refused(st);
    }
    if (!st->sync_thread) {
        return op_sync(cs);
    }
    if (!st->dirty) {
        return CHAT_OK;
    }
    st->dirty = false;
    ldb_syncer_request(st->sync_thread);
    return CHAT_OK;
}

/* LevelDB's memtables and block cache, as it counts them. */
static uint64_t leveldb_memory(ldb *st)
{
    char *v = leveldb_property_value(st->db, "leveldb.approximate-memory-usage");
    uint64_t n = v ? strtoull(v, NULL, 10) : 0;
    leveldb_free(v);
    return n;
}

/* A memtable written out is freed in LevelDB's thread; its blocks go back
 * to glibc's free lists, where small allocations made since keep them from
 * the top of the heap: measured (bench/run's memory scenario, 200 offline
 * devices, 8 MiB memtables), 5-8 MiB of the broker's 10-13 MiB of
 * anonymous memory were such free memory, and the highest crept up with
 * the backlog. malloc_trim gives the free pages back (madvise) wherever
 * they are; it walks the heap, 0.25 ms at the median and 1.1 ms at most
 * there, so it runs only when LevelDB's own count fell by RELEASE_MIN
 * since the last look (a memtable freed), or, since writes between two
 * looks can hide that fall, RELEASE_LATEST_US after the last trim if
 * anything was appended since. */
static bool op_release(chat_store *cs)
{
#ifdef __GLIBC__
    ldb *st = ldb_of(cs);
    uint64_t now = leveldb_memory(st);
    uint64_t was = st->mem_seen;
    uint64_t appended = atomic_load(&st->appended);
    int64_t t = chat_mono_us();
    st->mem_seen = now;
    if ((was > now && was - now >= RELEASE_MIN) ||
        (appended != st->release_appended && t - st->release_us >= RELEASE_LATEST_US)) {
        st->release_appended = appended;
        st->release_us = t;
        (void)malloc_trim(0); /* 1 if it gave any back: not ours to report */
        return true;
    }
    return false;
#else
    (void)cs;
    return false;
#endif
}

static chat_err op_compact(chat_store *cs)
{
    ldb *st = ldb_of(cs);
    /* LevelDB's C API reports nothing here: a failure shows at the next
     * write, which then latches failure as any write error does. */
    leveldb_compact_range(st->db, NULL, 0, NULL, 0);
    return CHAT_OK;
}

/* One writer: nobody else stores messages, so there is nothing to follow
 * or feed. */
static chat_err op_follow(chat_store *cs, const char *group, uint64_t after)
{
    (void)cs, (void)group, (void)after;
    return CHAT_OK;
}

static size_t op_feed(chat_store *cs, size_t max, chat_feed_fn fn, void *ctx)
{
    (void)cs, (void)max, (void)fn, (void)ctx;
    return 0;
}

static const chat_store_ops ldb_ops = {
    .name = LDB_NAME,
    .close = op_close,
    .stats = op_stats,
    .compact = op_compact,
    .sync = op_sync,
    .sync_async = op_sync_async,
    .release = op_release,
    .sync_state = op_sync_state,
    .head = ldb_head,
    .first = ldb_first,
    .append = ldb_append,
    .cid_find = ldb_cid_find,
    .get = ldb_get,
    .change = ldb_change,
    .cid_of = ldb_cid_of,
    .scan = ldb_scan,
    .trim = ldb_trim,
    .groups = ldb_groups,
    .cursor_info = ldb_cursor_info,
    .cursor_advance = ldb_cursor_advance,
    .cursor_max = ldb_cursor_max,
    .cursor_start = ldb_cursor_start,
    .cursor_touch = ldb_cursor_touch,
    .expire_devices = ldb_expire_devices,
    .member_add = ldb_member_add,
    .member_get = ldb_member_get,
    .member_remove = ldb_member_remove,
    .member_groups = ldb_member_groups,
    .group_delete = ldb_group_delete,
    .member_count = ldb_member_count,
    .read_advance = ldb_read_advance,
    .read_get = ldb_read_get,
    .reads = ldb_reads,
    .push_put = ldb_push_put,
    .push_get = ldb_push_get,
    .push_remove = ldb_push_remove,
    .push_list = ldb_push_list,
    .push_members = ldb_push_members,
    .push_expire = ldb_push_expire,
    .group_members = ldb_group_members,
    .member_devices = ldb_member_devices,
    .deletions = ldb_deletions,
    .group_init = ldb_group_init,
    .check = ldb_check,
    .job_start = ldb_job_start,
    .job_state = store_job_state,
    .cid_filter = ldb_cidf_state,
    .follow = op_follow,
    .feed = op_feed,
    .shared = false,
};

/* chat_store_opts.must_exist: a store is a directory with LevelDB's
 * CURRENT file. Without the file, LevelDB would start a new store there,
 * beside (and later over) any tables of a damaged one. */
static chat_err must_exist(const char *path, char **errmsg)
{
    char current[PATH_MAX_LEN + 16];
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        store_open_error(errmsg, "no such store directory", NULL);
        return CHAT_EINVAL;
    }
    snprintf(current, sizeof(current), "%s/CURRENT", path);
    if (stat(current, &sb) != 0) {
        store_open_error(errmsg, "no store in this directory (no CURRENT file)", strerror(errno));
        return CHAT_EINVAL;
    }
    return CHAT_OK;
}

chat_err ldb_open(const char *path, const chat_store_opts *opts, chat_store **out, char **errmsg)
{
    char *err = NULL;
    ldb *st = NULL;
    chat_err rc = CHAT_EIO;

    if (opts->must_exist) {
        rc = must_exist(path, errmsg);
        if (rc != CHAT_OK) {
            return rc;
        }
    }
    /* LevelDB reports a directory it cannot create as a missing LOCK file;
     * making it here first gives the operator the real reason. */
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        char what[PATH_MAX_LEN + 16];
        snprintf(what, sizeof(what), "cannot create %s", path);
        store_open_error(errmsg, what, strerror(e));
        return CHAT_EIO;
    }
    /* A file where the directory should be: said as such (the access
     * check below would call it "Permission denied", even for root). */
    struct stat pst;
    if (stat(path, &pst) == 0 && !S_ISDIR(pst.st_mode)) {
        char what[PATH_MAX_LEN + 16];
        snprintf(what, sizeof(what), "%s is not a directory", path);
        store_open_error(errmsg, what, "db_path must name a directory (the store's)");
        return CHAT_EIO;
    }
    /* LevelDB would name a file inside (LOCK, or a table it could not
     * write): the operator has to change the directory. */
    if (faccessat(AT_FDCWD, path, R_OK | W_OK | X_OK, AT_EACCESS) != 0) {
        int e = errno;
        char what[PATH_MAX_LEN + 96];
        snprintf(what, sizeof(what), "the broker's user (uid %u) cannot read and write %s",
                 (unsigned)geteuid(), path);
        store_open_error(errmsg, what, strerror(e));
        return CHAT_EIO;
    }
    rc = ldb_damage_before_open(path, errmsg);
    if (rc != CHAT_OK) {
        return rc;
    }
    rc = CHAT_EIO;
    st = calloc(1, sizeof(*st));
    if (!st) {
        return CHAT_ENOMEM;
    }
    store_base_init(&st->base, &ldb_ops);
    st->sync = opts->sync;
    st->release_us = chat_mono_us();
    st->cache = chat_cache_create(CACHE_ENTRIES);
    if (!st->cache) {
        free(st);
        return CHAT_ENOMEM;
    }
    st->options = leveldb_options_create();
    st->lru = leveldb_cache_create_lru(32u << 20);
    st->filter = leveldb_filterpolicy_create_bloom(10);
    st->ropt = leveldb_readoptions_create();
    /* A damaged block is reported, not served: without this, corruption in
     * an uncompressed block reached clients as invalid UTF-8. */
    leveldb_readoptions_set_verify_checksums(st->ropt, 1);
    st->wopt = leveldb_writeoptions_create();
    st->wopt_lazy = leveldb_writeoptions_create();
    st->wopt_sync = leveldb_writeoptions_create();
    st->append_wb = leveldb_writebatch_create();
    leveldb_options_set_create_if_missing(st->options, !opts->must_exist);
    /* Without it, LevelDB drops a damaged block of its write-ahead log while
     * it recovers, in silence: acknowledged messages would vanish and their
     * ids be given again. With it, the store refuses to open and says why;
     * the operator repairs it (docs/protocol.md, A damaged store). */
    leveldb_options_set_paranoid_checks(st->options, 1);
    leveldb_options_set_cache(st->options, st->lru);
    leveldb_options_set_filter_policy(st->options, st->filter);
    leveldb_options_set_compression(st->options, leveldb_snappy_compression);
    leveldb_options_set_write_buffer_size(
        st->options, opts->write_buffer_size ? opts->write_buffer_size : LDB_WRITE_BUFFER_DEFAULT);
    leveldb_writeoptions_set_sync(st->wopt, opts->sync == CHAT_SYNC_ALWAYS);
    leveldb_writeoptions_set_sync(st->wopt_lazy, 0);
    leveldb_writeoptions_set_sync(st->wopt_sync, 1);

    st->db = leveldb_open(st->options, path, &err);
    if (err) {
        /* The caller names the path; LevelDB's text names the file. */
        bool corrupt = strncmp(err, "Corruption", 10) == 0;
        store_open_error(errmsg, corrupt ? "damaged store" : "LevelDB cannot open it", err);
        leveldb_free(err);
        rc = corrupt ? CHAT_ECORRUPT : CHAT_EIO;
        goto fail;
    }
    st->path = strdup(path);
    if (!st->path) {
        rc = CHAT_ENOMEM;
        goto fail;
    }
    /* Before the run starts: nothing is written to a damaged store. */
    rc = ldb_damage_check(st, opts->verify, errmsg);
    if (rc != CHAT_OK) {
        goto fail;
    }
    rc = ldb_run_start(st, opts->boot_id, errmsg);
    if (rc == CHAT_OK) {
        rc = ldb_read_upgrade(st, errmsg);
    }
    if (rc != CHAT_OK) {
        goto fail;
    }
    if (opts->sync == CHAT_SYNC_BATCH && ldb_syncer_start(st) != CHAT_OK) {
        rc = CHAT_ENOMEM;
        goto fail;
    }
    /* Last, when nothing else at open writes: its snapshot is the store
     * every later 'I' key is added to (ldb_cidf.h, filled-at-open). Without
     * memory for it, LevelDB answers every lookup as before. */
    st->cidf =
        ldb_cidf_create(st, opts->cid_filter_bytes, opts->cid_filter_max, opts->cid_filter_hold);
    *out = &st->base;
    return CHAT_OK;

fail:
    /* Not a clean close: the marker (if written) stays for the next open. */
    st->running = false;
    op_close(&st->base);
    return rc;
}
