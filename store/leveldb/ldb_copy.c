/* ldb_copy: a new LevelDB store from another backend's records (see
 * ldb_copy.h). */
#include "ldb_copy.h"
#include "ldb_db.h"
#include "ldb_keys.h"
#include "ldb_run.h"
#include "store_text.h"

#include <errno.h>
#include <fcntl.h>
#include <leveldb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH_BYTES (1u << 20) /* written in batches of this much */

struct ldb_copy {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_writeoptions_t *wo;
    leveldb_writebatch_t *wb;
    size_t bytes;     /* in wb */
    uint64_t records; /* handed over */
    uint64_t groups;  /* 'H' records written */
    key count;        /* 'N' of the group whose memberships come now; len 0: none yet */
    uint64_t members; /* ... and how many came so far */
    bool failed;      /* a write failed: the copy is of no use */
    char dest[4096];
    char partial[4096 + 16];
};

void ldb_sync_parent(const char *path)
{
    char dir[4096 + 16];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) {
        slash[1] = '\0';
    } else if (slash) {
        *slash = '\0';
    } else {
        snprintf(dir, sizeof(dir), ".");
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

ldb_copy *ldb_copy_create(const char *dest, char *err, size_t cap)
{
    char *lerr = NULL;
    ldb_copy *c = calloc(1, sizeof(*c));
    if (!c) {
        store_set_text(err, cap, "out of memory");
        return NULL;
    }
    int n = snprintf(c->dest, sizeof(c->dest), "%s", dest);
    snprintf(c->partial, sizeof(c->partial), "%s.partial", dest);
    if (n < 0 || (size_t)n >= sizeof(c->dest)) {
        store_set_text(err, cap, "the backup's path is too long");
        free(c);
        return NULL;
    }
    c->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(c->opts, 1);
    leveldb_options_set_error_if_exists(c->opts, 1);
    leveldb_options_set_compression(c->opts, leveldb_snappy_compression);
    c->db = leveldb_open(c->opts, c->partial, &lerr);
    if (lerr) {
        store_set_text(err, cap, "cannot create %s: %s", c->partial, lerr);
        leveldb_free(lerr);
        leveldb_options_destroy(c->opts);
        free(c);
        return NULL;
    }
    c->wo = leveldb_writeoptions_create();
    c->wb = leveldb_writebatch_create();
    return c;
}

/* Writes the batch (synced when sync); CHAT_EIO, with why in err when err is
 * not NULL, once a write failed. */
static chat_err flush(ldb_copy *c, bool sync, char *err, size_t cap)
{
    char *lerr = NULL;
    if (c->failed) {
        return CHAT_EIO;
    }
    leveldb_writeoptions_set_sync(c->wo, sync);
    leveldb_write(c->db, c->wo, c->wb, &lerr);
    leveldb_writebatch_clear(c->wb);
    c->bytes = 0;
    if (lerr) {
        if (err) {
            store_set_text(err, cap, "writing the copy: %s", lerr);
        }
        leveldb_free(lerr);
        c->failed = true;
        return CHAT_EIO;
    }
    return CHAT_OK;
}

static chat_err put(ldb_copy *c, const key *k, const char *v, size_t vlen)
{
    if (c->failed) {
        return CHAT_EIO;
    }
    if (k->overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_put(c->wb, k->buf, k->len, v, vlen);
    c->bytes += k->len + vlen;
    return c->bytes >= BATCH_BYTES ? flush(c, false, NULL, 0) : CHAT_OK;
}

static chat_err put_u64s(ldb_copy *c, const key *k, uint64_t v, const uint64_t *x)
{
    char val[16];
    put_u64(val, v);
    if (x) {
        put_u64(val + 8, *x);
    }
    return put(c, k, val, x ? 16 : 8);
}

chat_err ldb_copy_group(ldb_copy *c, const char *group, uint64_t head, uint64_t first)
{
    key kh, kf;
    group_key(&kh, TAG_HEAD, group);
    group_key(&kf, TAG_FIRST, group);
    chat_err rc = put_u64s(c, &kh, head, NULL);
    if (rc == CHAT_OK && first > 1) {
        rc = put_u64s(c, &kf, first, NULL);
    }
    if (rc == CHAT_OK) {
        c->groups++;
        c->records++;
    }
    return rc;
}

chat_err ldb_copy_message(ldb_copy *c, const char *group, uint64_t id, const char *from,
                          const char *cid, const char *env, size_t len)
{
    key km, ki, kk, kv;
    id_key(&km, NULL, TAG_MSG, group, id);
    chat_err rc = put(c, &km, env, len);
    if (rc == CHAT_OK && cid) {
        /* the index entry and its reverse, as an append writes them */
        rc = cid_keys(&ki, &kk, &kv, group, from, cid, id) ? put_u64s(c, &ki, id, NULL)
                                                           : CHAT_EINVAL;
        if (rc == CHAT_OK) {
            rc = put(c, &kk, kv.buf, kv.len);
        }
    }
    if (rc == CHAT_OK) {
        c->records++;
    }
    return rc;
}

/* The member count of the group whose memberships came last (invariant
 * read-markers), once they all came. */
static chat_err put_count(ldb_copy *c)
{
    chat_err rc = c->count.len > 0 ? put_u64s(c, &c->count, c->members, NULL) : CHAT_OK;
    c->count.len = 0;
    c->members = 0;
    return rc;
}

chat_err ldb_copy_member(ldb_copy *c, const char *group, const char *member, uint64_t joined,
                         uint64_t read)
{
    key kj, kg, kr, kn;
    join_keys(&kj, &kg, group, member);
    read_key(&kr, group, member);
    group_key(&kn, TAG_COUNT, group);
    if (kn.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = CHAT_OK;
    if (c->count.len != kn.len || memcmp(c->count.buf, kn.buf, kn.len) != 0) {
        rc = put_count(c);
        c->count = kn;
    }
    if (rc == CHAT_OK) {
        rc = put_u64s(c, &kj, joined, NULL);
    }
    if (rc == CHAT_OK) {
        rc = put_u64s(c, &kg, joined, NULL);
    }
    if (rc == CHAT_OK) {
        rc = put_u64s(c, &kr, read, NULL);
    }
    if (rc == CHAT_OK) {
        c->members++;
    }
    if (rc == CHAT_OK) {
        c->records++;
    }
    return rc;
}

chat_err ldb_copy_cursor(ldb_copy *c, const char *group, const char *member, const char *device,
                         uint64_t acked, int64_t used)
{
    key k;
    uint64_t u = used > 0 ? (uint64_t)used : 0;
    cursor_key(&k, group, member, device);
    chat_err rc = put_u64s(c, &k, acked, &u);
    if (rc == CHAT_OK) {
        c->records++;
    }
    return rc;
}

chat_err ldb_copy_max(ldb_copy *c, const char *group, const char *member, uint64_t acked)
{
    key k;
    max_key(&k, group, member);
    chat_err rc = put_u64s(c, &k, acked, NULL);
    if (rc == CHAT_OK) {
        c->records++;
    }
    return rc;
}

uint64_t ldb_copy_records(const ldb_copy *c)
{
    return c->records;
}

chat_err ldb_copy_finish(ldb_copy *c, char *err, size_t cap)
{
    char inc[STORE_INCARNATION_LEN + 1], n[8];
    key kg, ki;
    if (c->failed) {
        store_set_text(err, cap, "an earlier write of the copy failed");
        return CHAT_EIO;
    }
    if (!ldb_new_incarnation(inc)) {
        store_set_text(err, cap, "cannot draw an incarnation for the copy");
        return CHAT_EIO;
    }
    if (put_count(c) != CHAT_OK) {
        store_set_text(err, cap, "an earlier write of the copy failed");
        return CHAT_EIO;
    }
    meta_key(&kg, META_GROUPS);
    meta_key(&ki, META_INCARNATION);
    /* The memberships came with their read markers and counts: the store
     * needs no upgrade (ldb_read_upgrade). */
    ldb_put_meta(c->wb, META_RECEIPTS, "\1", 1);
    put_u64(n, c->groups);
    leveldb_writebatch_put(c->wb, kg.buf, kg.len, n, sizeof(n));
    leveldb_writebatch_put(c->wb, ki.buf, ki.len, inc, STORE_INCARNATION_LEN);
    /* The last batch is synced, and with it the whole log. */
    chat_err rc = flush(c, true, err, cap);
    leveldb_close(c->db);
    c->db = NULL;
    if (rc != CHAT_OK) {
        return rc;
    }
    if (rename(c->partial, c->dest) != 0) {
        store_set_text(err, cap, "cannot rename %s to %s: %s", c->partial, c->dest,
                       strerror(errno));
        return CHAT_EIO;
    }
    ldb_sync_parent(c->dest);
    return CHAT_OK;
}

void ldb_copy_destroy(ldb_copy *c)
{
    if (!c) {
        return;
    }
    if (c->db) {
        leveldb_close(c->db);
    }
    leveldb_writebatch_destroy(c->wb);
    leveldb_writeoptions_destroy(c->wo);
    leveldb_options_destroy(c->opts);
    free(c);
}
