/* chat_store: group message log, cursors and membership on LevelDB (see the
 * design note in chat_store.h for the key layout and invariants). */
#include "chat_store.h"
#include "chat_cache.h"

#include <assert.h>
#include <errno.h>
#include <leveldb/c.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TAG_HEAD 'H'
#define TAG_FIRST 'F'
#define TAG_MSG 'M'
#define TAG_CURSOR 'C'
#define TAG_JOIN 'J'
#define TAG_GROUPS 'G'
#define TAG_CID 'I'
#define TAG_CIDREV 'K'
#define TAG_MAX 'X'
#define TAG_DELETE 'D'

#define TAG_META '#'

/* The 'D' record: generation (8), bound (8), then the resume key. */
#define DELETE_HEADER 16u

/* Meta records: '#' and a name. */
#define META_DELETE_GEN "deletions"    /* the last group deletion's generation */
#define META_RUNNING "running"         /* sync mode (1), boot id: a run under way */
#define META_INCARNATION "incarnation" /* 32 hex digits */
#define META_GROUPS "groups"           /* the number of 'H' records */

#define INCARNATION_LEN 32u
#define BOOT_ID_MAX 64u

/* Room for a path and a log file name. */
#define PATH_MAX_LEN 4096

/* Entries of the value cache: about 100 bytes each. */
#define CACHE_ENTRIES 262144u

/* Longest key component (group, member, device, cid) accepted. Group names
 * stop at 128 bytes and cids at 64; client ids and usernames may in theory
 * reach 65535 bytes, which no chat needs, so they are refused here. */
#define MAX_PART CHAT_STORE_MAX_NAME

struct chat_store {
    leveldb_t *db;
    leveldb_options_t *options;
    leveldb_cache_t *lru; /* LevelDB's block cache */
    leveldb_filterpolicy_t *filter;
    leveldb_readoptions_t *ropt;
    leveldb_writeoptions_t *wopt;      /* appends: synced when CHAT_SYNC_ALWAYS */
    leveldb_writeoptions_t *wopt_lazy; /* cursors and membership: never synced */
    leveldb_writeoptions_t *wopt_sync; /* chat_store_sync */
    chat_cache *cache;                 /* heads, cursors, memberships: read on every publish */
    chat_sync sync;
    chat_clock_fn clock; /* stamps a cursor's last use */
    void *clock_ctx;
    bool dirty;         /* written since the last chat_store_sync */
    atomic_bool failed; /* invariant 5: the first write error makes the store read-only */
    char latched[CHAT_STORE_ERROR_MAX];  /* why failed was set (the broker's thread's writes) */
    char last_err[CHAT_STORE_ERROR_MAX]; /* chat_store_last_error */
    struct syncer *sync_thread;          /* CHAT_SYNC_BATCH: fsyncs beside the broker */
    char *path;
    bool running;                          /* this run's marker is written */
    bool recovered;                        /* the incarnation changed at this open */
    char incarnation[INCARNATION_LEN + 1]; /* chat_store_incarnation */
    uint64_t groups;                       /* 'H' records, as '#groups' counts them */
};

/* The background fsync of CHAT_SYNC_BATCH. LevelDB serialises writers, so a
 * synced write from another thread would stall the broker's own writes for
 * the length of an fsync; an fdatasync of the write-ahead log through a file
 * descriptor of our own does not. LevelDB names its logs NNNNNN.log, starts
 * a new one at every memtable flush, and writes the newest; a retired log
 * stays until its memtable is in a (synced) table file.
 *
 * Each round lists the directory afresh (a directory's mtime, which an
 * earlier version compared, can miss a rotation within its granularity),
 * syncs the logs retired since the last round, then the newest. When a file
 * cannot be opened (EMFILE, say) the round falls back to a synced write of
 * an empty batch, which syncs LevelDB's current log: a writer that contends
 * with the broker's writes, but a sync; it never stops syncing. */
struct syncer {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool requested;                     /* under lock: something was written since the last sync */
    bool stop;                          /* under lock */
    uint64_t rounds;                    /* under lock: rounds done */
    uint64_t fallbacks;                 /* under lock: rounds that fell back */
    char log_name[32];                  /* under lock: the log held open, "" none */
    char err[CHAT_STORE_ERROR_MAX / 2]; /* under lock: why a sync failed */
    chat_store *st;
    leveldb_writebatch_t *empty; /* syncer thread only: the fallback's batch */
    int log_fd;                  /* syncer thread only: the newest log, or -1 */
    unsigned long long log_num;  /* syncer thread only: log_fd's number */
    bool synced_any;             /* syncer thread only: log_num is set */
};

/* A key under construction. Keys are short (a few hundred bytes at most), so
 * one fixed buffer avoids an allocation per lookup on the broker's thread. */
typedef struct key {
    char buf[4 * (MAX_PART + 2) + 16]; /* four parts and an id */
    size_t len;
    bool overflow;
} key;

/* A resume point of chat_store_expire_devices is a key and its length. */
_Static_assert(CHAT_STORE_RESUME_MAX >= 2 + sizeof(((key *)0)->buf), "resume point too small");

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
    }
    return "unknown error";
}

static void put_u64(char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (char)(v & 0xff);
        v >>= 8;
    }
}

static uint64_t get_u64(const char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = (v << 8) | (unsigned char)p[i];
    }
    return v;
}

static void key_init(key *k, char tag)
{
    k->buf[0] = tag;
    k->len = 1;
    k->overflow = false;
}

/* Appends n bytes of s with their length in front. */
static void key_part(key *k, const char *s, size_t n)
{
    if (n > MAX_PART || k->len + 2 + n > sizeof(k->buf)) {
        k->overflow = true;
        return;
    }
    k->buf[k->len++] = (char)((n >> 8) & 0xff);
    k->buf[k->len++] = (char)(n & 0xff);
    memcpy(k->buf + k->len, s, n);
    k->len += n;
}

static void key_str(key *k, const char *s)
{
    key_part(k, s, strlen(s));
}

/* Appends s without a length: only for a key's last part, which then sorts
 * in plain byte order. */
static void key_raw(key *k, const char *s)
{
    size_t n = strlen(s);
    if (n > MAX_PART || k->len + n > sizeof(k->buf)) {
        k->overflow = true;
        return;
    }
    memcpy(k->buf + k->len, s, n);
    k->len += n;
}

static void key_u64(key *k, uint64_t v)
{
    if (k->len + 8 > sizeof(k->buf)) {
        k->overflow = true;
        return;
    }
    put_u64(k->buf + k->len, v);
    k->len += 8;
}

/* ------------------------------------------------------------------------
 * Errors: what failed, on which keys
 * --------------------------------------------------------------------- */

/* Appends at most max bytes of s to out, quoted, with the bytes a log line
 * must not carry (controls, quotes, backslashes) shown as '?'. */
static void put_name(char *out, size_t cap, const char *s, size_t n)
{
    size_t at = strlen(out);
    if (at + 3 >= cap) {
        return;
    }
    out[at++] = '"';
    for (size_t i = 0; i < n && at + 2 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[at++] = (c < 0x20 || c == 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
    }
    out[at++] = '"';
    out[at] = '\0';
}

/* Takes the next length-prefixed part of a key; false when none is left. */
static bool next_part(const char **p, const char *end, const char **s, size_t *n)
{
    if (end - *p < 2) {
        return false;
    }
    size_t len = ((size_t)(unsigned char)(*p)[0] << 8) | (unsigned char)(*p)[1];
    if ((size_t)(end - *p - 2) < len) {
        return false;
    }
    *s = *p + 2;
    *n = len;
    *p += 2 + len;
    return true;
}

static void put_text(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void put_text(char *out, size_t cap, const char *fmt, ...)
{
    size_t at = strlen(out);
    va_list ap;
    if (at + 1 >= cap) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(out + at, cap - at, fmt, ap);
    va_end(ap);
}

/* Writes fmt to out from its start, truncated to cap (messages are cut,
 * never overrun). */
static void set_text(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_text(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

/* Writes a reader's description of a key (the record kind, its group,
 * member, device, cid and id) to out: error messages name the keys whose
 * reading or writing failed, so that an operator knows what is damaged. */
static void describe_key(const char *k, size_t len, char *out, size_t cap)
{
    const char *p = k + 1, *end = k + len, *a = NULL, *b = NULL, *c = NULL;
    size_t an = 0, bn = 0, cn = 0;
    out[0] = '\0';
    if (len == 0) {
        put_text(out, cap, "(empty key)");
        return;
    }
    switch (k[0]) {
    case TAG_HEAD:
    case TAG_FIRST:
    case TAG_DELETE:
        if (next_part(&p, end, &a, &an)) {
            put_text(out, cap, "%s of group ",
                     k[0] == TAG_HEAD    ? "head"
                     : k[0] == TAG_FIRST ? "first id"
                                         : "deletion");
            put_name(out, cap, a, an);
            return;
        }
        break;
    case TAG_MSG:
    case TAG_CIDREV:
        if (next_part(&p, end, &a, &an) && end - p == 8) {
            put_text(out, cap, "%s %llu of group ", k[0] == TAG_MSG ? "message" : "cid of message",
                     (unsigned long long)get_u64(p));
            put_name(out, cap, a, an);
            return;
        }
        break;
    case TAG_CURSOR:
    case TAG_JOIN:
    case TAG_MAX:
        if (next_part(&p, end, &a, &an) && next_part(&p, end, &b, &bn)) {
            put_text(out, cap, "%s of member ",
                     k[0] == TAG_JOIN  ? "membership"
                     : k[0] == TAG_MAX ? "max cursor"
                                       : "cursor");
            put_name(out, cap, b, bn);
            if (k[0] == TAG_CURSOR && next_part(&p, end, &c, &cn)) {
                put_text(out, cap, " device ");
                put_name(out, cap, c, cn);
            }
            put_text(out, cap, " in group ");
            put_name(out, cap, a, an);
            return;
        }
        break;
    case TAG_GROUPS:
        if (next_part(&p, end, &a, &an)) {
            put_text(out, cap, "group index of member ");
            put_name(out, cap, a, an);
            put_text(out, cap, " for group ");
            put_name(out, cap, p, (size_t)(end - p));
            return;
        }
        break;
    case TAG_CID:
        if (next_part(&p, end, &a, &an) && next_part(&p, end, &b, &bn) &&
            next_part(&p, end, &c, &cn)) {
            put_text(out, cap, "cid ");
            put_name(out, cap, c, cn);
            put_text(out, cap, " of ");
            put_name(out, cap, b, bn);
            put_text(out, cap, " in group ");
            put_name(out, cap, a, an);
            return;
        }
        break;
    case TAG_META:
        put_text(out, cap, "store record ");
        put_name(out, cap, k + 1, len - 1);
        return;
    default:
        break;
    }
    put_text(out, cap, "record '%c' of %zu bytes", k[0] >= 0x20 && k[0] < 0x7f ? k[0] : '?', len);
}

/* Records "what: detail" as the store's last error. */
static void set_error(chat_store *st, const char *what, const char *detail)
{
    set_text(st->last_err, sizeof(st->last_err), "%s: %s", what, detail);
}

/* A failed read: maps LevelDB's message to CHAT_ECORRUPT (a checksum or a
 * block that does not parse) or CHAT_EIO, records it with what was being
 * read, and frees it. Reads never latch failure (invariant 5): one damaged
 * block fails the requests that touch it, not every later write. */
static chat_err read_error(chat_store *st, char *err, const char *what)
{
    chat_err rc = strncmp(err, "Corruption", 10) == 0 ? CHAT_ECORRUPT : CHAT_EIO;
    set_error(st, what, err);
    leveldb_free(err);
    return rc;
}

/* read_error for one key. */
static chat_err read_key_error(chat_store *st, char *err, const char *k, size_t len)
{
    char what[CHAT_STORE_ERROR_MAX];
    char desc[CHAT_STORE_ERROR_MAX - 16];
    describe_key(k, len, desc, sizeof(desc));
    set_text(what, sizeof(what), "reading %s", desc);
    return read_error(st, err, what);
}

/* A record of the wrong shape. */
static chat_err corrupt_key(chat_store *st, const char *k, size_t len, size_t vlen)
{
    char desc[CHAT_STORE_ERROR_MAX - 64];
    describe_key(k, len, desc, sizeof(desc));
    set_text(st->last_err, sizeof(st->last_err), "reading %s: value of %zu bytes has a wrong shape",
             desc, vlen);
    return CHAT_ECORRUPT;
}

/* A failed write: latches failure (invariant 5), since LevelDB may have
 * written part of what it was given, and remembers why for the refusals
 * that follow. */
static chat_err write_error(chat_store *st, char *err, const char *k, size_t len)
{
    char desc[CHAT_STORE_ERROR_MAX - 64];
    if (k) {
        describe_key(k, len, desc, sizeof(desc));
    } else {
        snprintf(desc, sizeof(desc), "a sync of the write-ahead log");
    }
    set_text(st->latched, sizeof(st->latched), "writing %s: %s", desc, err);
    set_text(st->last_err, sizeof(st->last_err), "%s", st->latched);
    leveldb_free(err);
    atomic_store(&st->failed, true);
    return CHAT_EIO;
}

static chat_err syncer_start(chat_store *st);
static void syncer_stop(chat_store *st);
static void syncer_error(chat_store *st, char *out, size_t cap);

/* The refusal of a write after the first write error. */
static chat_err refused(chat_store *st)
{
    char why[CHAT_STORE_ERROR_MAX];
    if (st->latched[0]) {
        memcpy(why, st->latched, sizeof(why));
    } else {
        syncer_error(st, why, sizeof(why));
    }
    st->last_err[0] = '\0';
    put_text(st->last_err, sizeof(st->last_err),
             "writes refused until the store is reopened, after ");
    put_text(st->last_err, sizeof(st->last_err), "%s", why);
    return CHAT_EIO;
}

const char *chat_store_last_error(const chat_store *st)
{
    return st ? st->last_err : "";
}

/* ------------------------------------------------------------------------
 * Records and the cache
 * --------------------------------------------------------------------- */

/* The iterator's error, if it has one: LevelDB skips a block it cannot read
 * and goes on with the next, keeping the error aside, so every step must ask
 * before it trusts the key it landed on. */
static char *iter_error(const leveldb_iterator_t *it)
{
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    return err;
}

/* A record as the cache holds it: a value and an extra number. Cursors hold
 * (id, last use in ms) and memberships (joined, generation) since issue 9;
 * their older 8-byte values read with 0 as the extra number. */
typedef struct rec {
    uint64_t v;
    uint64_t x;
} rec;

/* Kinds whose records go through the cache. Message records are too many,
 * and cids are nearly all looked up once (a Bloom filter answers). */
static bool cacheable(const char *k, size_t len)
{
    return len > 0 &&
           (k[0] == TAG_HEAD || k[0] == TAG_FIRST || k[0] == TAG_CURSOR || k[0] == TAG_JOIN ||
            k[0] == TAG_GROUPS || k[0] == TAG_MAX || k[0] == TAG_DELETE);
}

/* Decodes the value of a key of kind tag; false when it has a wrong shape. */
static bool decode(char tag, const char *v, size_t vlen, rec *r)
{
    if (tag == TAG_CURSOR || tag == TAG_JOIN || tag == TAG_GROUPS) {
        if (vlen != 8 && vlen != 16) {
            return false;
        }
    } else if (tag == TAG_DELETE) {
        /* the cache needs the generation alone */
        if (vlen < DELETE_HEADER) {
            return false;
        }
        r->v = get_u64(v);
        r->x = 0;
        return true;
    } else if (vlen != 8) {
        return false;
    }
    r->v = get_u64(v);
    r->x = vlen == 16 ? get_u64(v + 8) : 0;
    return true;
}

/* Reads a record. A missing key leaves *r untouched and *found false. */
static chat_err get_rec(chat_store *st, const key *k, rec *r, bool *found)
{
    char *err = NULL;
    size_t vlen = 0;
    bool cache = cacheable(k->buf, k->len);
    *found = false;
    if (cache && chat_cache_get(st->cache, k->buf, k->len, found, &r->v, &r->x)) {
        return CHAT_OK;
    }
    char *val = leveldb_get(st->db, st->ropt, k->buf, k->len, &vlen, &err);
    if (err) {
        return read_key_error(st, err, k->buf, k->len);
    }
    if (!val) {
        if (cache) {
            chat_cache_put(st->cache, k->buf, k->len, false, 0, 0);
        }
        return CHAT_OK;
    }
    bool ok = decode(k->buf[0], val, vlen, r);
    leveldb_free(val);
    if (!ok) {
        return corrupt_key(st, k->buf, k->len, vlen);
    }
    *found = true;
    if (cache) {
        chat_cache_put(st->cache, k->buf, k->len, true, r->v, r->x);
    }
    return CHAT_OK;
}

/* get_rec for the value alone. A missing key leaves *v untouched. */
static chat_err get_u64_key(chat_store *st, const key *k, uint64_t *v, bool *found)
{
    rec r;
    chat_err rc = get_rec(st, k, &r, found);
    if (rc == CHAT_OK && *found) {
        *v = r.v;
    }
    return rc;
}

/* Write-through: after a batch is written, its puts and deletes of cached
 * keys update the cache, whoever built the batch. */
static void cache_put_cb(void *ctx, const char *k, size_t klen, const char *v, size_t vlen)
{
    chat_store *st = ctx;
    rec r;
    if (cacheable(k, klen) && decode(k[0], v, vlen, &r)) {
        chat_cache_put(st->cache, k, klen, true, r.v, r.x);
    }
}

static void cache_del_cb(void *ctx, const char *k, size_t klen)
{
    chat_store *st = ctx;
    if (cacheable(k, klen)) {
        chat_cache_put(st->cache, k, klen, false, 0, 0);
    }
}

/* Writes a batch; k (NULL: a sync) names what it writes for an error
 * message. */
static chat_err write_batch(chat_store *st, leveldb_writebatch_t *wb,
                            const leveldb_writeoptions_t *wo, const key *k)
{
    char *err = NULL;
    if (atomic_load(&st->failed)) {
        return refused(st);
    }
    leveldb_write(st->db, wo, wb, &err);
    if (err) {
        return write_error(st, err, k ? k->buf : NULL, k ? k->len : 0);
    }
    leveldb_writebatch_iterate(wb, st, cache_put_cb, cache_del_cb);
    st->dirty = true;
    return CHAT_OK;
}

/* Adds a put of an 8-byte value... */
static void batch_put(leveldb_writebatch_t *wb, const key *k, uint64_t v)
{
    char val[8];
    put_u64(val, v);
    leveldb_writebatch_put(wb, k->buf, k->len, val, sizeof(val));
}

/* ... and of a two-number record. */
static void batch_put2(leveldb_writebatch_t *wb, const key *k, uint64_t v, uint64_t x)
{
    char val[16];
    put_u64(val, v);
    put_u64(val + 8, x);
    leveldb_writebatch_put(wb, k->buf, k->len, val, sizeof(val));
}

static int64_t realtime_ms(void *ctx)
{
    struct timespec ts;
    (void)ctx;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void chat_store_set_clock(chat_store *st, chat_clock_fn fn, void *ctx)
{
    st->clock = fn ? fn : realtime_ms;
    st->clock_ctx = fn ? ctx : NULL;
}

/* The day of a time in ms: last-use stamps change at most once a day. */
static int64_t day_of(int64_t ms)
{
    return ms / 86400000;
}

/* ------------------------------------------------------------------------
 * Open and close: the run marker and the incarnation
 * --------------------------------------------------------------------- */

/* Sets *errmsg (when not NULL) to a malloc'd "what: why". */
static void open_error(char **errmsg, const char *what, const char *why)
{
    if (errmsg && !*errmsg) {
        size_t n = strlen(what) + strlen(why) + 3;
        *errmsg = malloc(n);
        if (*errmsg) {
            snprintf(*errmsg, n, "%s: %s", what, why);
        }
    }
}

/* Reads a meta record's raw value; *val is NULL when it is missing, else
 * LevelDB's memory to free with leveldb_free. */
static chat_err get_meta(chat_store *st, const char *name, char **val, size_t *len)
{
    key k;
    char *err = NULL;
    key_init(&k, TAG_META);
    key_raw(&k, name);
    *val = leveldb_get(st->db, st->ropt, k.buf, k.len, len, &err);
    return err ? read_key_error(st, err, k.buf, k.len) : CHAT_OK;
}

static void put_meta(leveldb_writebatch_t *wb, const char *name, const void *v, size_t len)
{
    key k;
    key_init(&k, TAG_META);
    key_raw(&k, name);
    leveldb_writebatch_put(wb, k.buf, k.len, v, len);
}

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
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

/* A new random incarnation: 128 bits as 32 hex digits. */
static bool new_incarnation(char out[INCARNATION_LEN + 1])
{
    unsigned char r[INCARNATION_LEN / 2];
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
static chat_err count_groups(chat_store *st, uint64_t *n)
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
    return err ? read_error(st, err, "counting the groups") : CHAT_OK;
}

/* Starts a run (invariant 7): reads the previous run's marker and the
 * incarnation, replaces the incarnation when the previous run ended in a
 * way that may have lost acknowledged writes, and writes this run's marker
 * (boot id and sync mode), all synced before the store takes any write. */
static chat_err start_run(chat_store *st, const char *boot_override, char **errmsg)
{
    char boot[BOOT_ID_MAX], prev_boot[BOOT_ID_MAX], val[BOOT_ID_MAX + 1];
    char *run = NULL, *inc = NULL, *grp = NULL, *err = NULL;
    size_t run_len = 0, inc_len = 0, grp_len = 0;
    bool fresh = false, count = false;
    leveldb_writebatch_t *wb = NULL;
    chat_err rc;

    if (boot_override) {
        set_text(boot, sizeof(boot), "%s", boot_override);
    } else {
        read_boot_id(boot, sizeof(boot));
    }
    rc = get_meta(st, META_RUNNING, &run, &run_len);
    if (rc == CHAT_OK) {
        rc = get_meta(st, META_INCARNATION, &inc, &inc_len);
    }
    if (rc == CHAT_OK) {
        rc = get_meta(st, META_GROUPS, &grp, &grp_len);
    }
    if (rc != CHAT_OK) {
        goto fail;
    }
    if (inc && inc_len == INCARNATION_LEN) {
        memcpy(st->incarnation, inc, INCARNATION_LEN);
        st->incarnation[INCARNATION_LEN] = '\0';
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
        st->recovered = rebooted && (run_len < 1 || run[0] != (char)CHAT_SYNC_ALWAYS);
    }
    if ((fresh || st->recovered) && !new_incarnation(st->incarnation)) {
        open_error(errmsg, "cannot draw a store incarnation", "/dev/urandom gave too little");
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
    memcpy(val + 1, boot, strlen(boot));
    put_meta(wb, META_RUNNING, val, 1 + strlen(boot));
    if (fresh || st->recovered) {
        put_meta(wb, META_INCARNATION, st->incarnation, INCARNATION_LEN);
    }
    if (count) {
        put_u64(val, st->groups);
        put_meta(wb, META_GROUPS, val, 8);
    }
    leveldb_write(st->db, st->wopt_sync, wb, &err);
    if (err) {
        open_error(errmsg, "writing the run marker", err);
        leveldb_free(err);
        rc = CHAT_EIO;
        goto fail;
    }
    st->running = true;

fail:
    if (rc != CHAT_OK) {
        open_error(errmsg, "reading the store's run records", st->last_err);
    }
    if (wb) {
        leveldb_writebatch_destroy(wb);
    }
    leveldb_free(run);
    leveldb_free(inc);
    leveldb_free(grp);
    return rc;
}

chat_err chat_store_open(const char *path, chat_sync sync, chat_store **out, char **errmsg)
{
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    opts.sync = sync;
    return chat_store_open_opts(path, &opts, out, errmsg);
}

chat_err chat_store_open_opts(const char *path, const chat_store_opts *opts, chat_store **out,
                              char **errmsg)
{
    char *err = NULL;
    chat_store *st = NULL;
    chat_err rc = CHAT_EIO;

    if (errmsg) {
        *errmsg = NULL;
    }
    if (!path || !opts || !out || opts->sync > CHAT_SYNC_ALWAYS) {
        return CHAT_EINVAL;
    }
    /* LevelDB reports a directory it cannot create as a missing LOCK file;
     * making it here first gives the operator the real reason. */
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        char what[PATH_MAX_LEN + 16];
        snprintf(what, sizeof(what), "cannot create %s", path);
        open_error(errmsg, what, strerror(e));
        return CHAT_EIO;
    }
    st = calloc(1, sizeof(*st));
    if (!st) {
        return CHAT_ENOMEM;
    }
    st->sync = opts->sync;
    chat_store_set_clock(st, NULL, NULL);
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
    leveldb_options_set_create_if_missing(st->options, 1);
    /* Without it, LevelDB drops a damaged block of its write-ahead log while
     * it recovers, in silence: acknowledged messages would vanish and their
     * ids be given again. With it, the store refuses to open and says why;
     * the operator repairs it (docs/protocol.md, A damaged store). */
    leveldb_options_set_paranoid_checks(st->options, 1);
    leveldb_options_set_cache(st->options, st->lru);
    leveldb_options_set_filter_policy(st->options, st->filter);
    leveldb_options_set_compression(st->options, leveldb_snappy_compression);
    leveldb_options_set_write_buffer_size(
        st->options, opts->write_buffer_size ? opts->write_buffer_size : 8u << 20);
    leveldb_writeoptions_set_sync(st->wopt, opts->sync == CHAT_SYNC_ALWAYS);
    leveldb_writeoptions_set_sync(st->wopt_lazy, 0);
    leveldb_writeoptions_set_sync(st->wopt_sync, 1);

    st->db = leveldb_open(st->options, path, &err);
    if (err) {
        open_error(errmsg, path, err);
        leveldb_free(err);
        goto fail;
    }
    st->path = strdup(path);
    if (!st->path) {
        rc = CHAT_ENOMEM;
        goto fail;
    }
    rc = start_run(st, opts->boot_id, errmsg);
    if (rc != CHAT_OK) {
        goto fail;
    }
    if (opts->sync == CHAT_SYNC_BATCH && syncer_start(st) != CHAT_OK) {
        rc = CHAT_ENOMEM;
        goto fail;
    }
    *out = st;
    return CHAT_OK;

fail:
    /* Not a clean close: the marker (if written) stays for the next open. */
    st->running = false;
    chat_store_close(st);
    return rc;
}

const char *chat_store_incarnation(const chat_store *st)
{
    return st->incarnation;
}

bool chat_store_recovered(const chat_store *st)
{
    return st->recovered;
}

chat_err chat_store_stats(chat_store *st, uint64_t *groups, uint64_t *approx_bytes)
{
    if (!st) {
        return CHAT_EINVAL;
    }
    if (groups) {
        *groups = st->groups;
    }
    if (approx_bytes) {
        /* Every key sorts below 0xff (tags are ASCII). */
        const char *start = "", *limit = "\xff";
        size_t start_len = 0, limit_len = 1;
        uint64_t size = 0;
        leveldb_approximate_sizes(st->db, 1, &start, &start_len, &limit, &limit_len, &size);
        *approx_bytes = size;
    }
    return CHAT_OK;
}

/* fdatasyncs every write-ahead log in the store's directory and the
 * directory itself; false when one could not be synced. */
static bool sync_all_logs(const char *path)
{
    bool ok = true;
    DIR *d = opendir(path);
    if (!d) {
        return false;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned long long n = 0;
        char tail[8], full[PATH_MAX_LEN];
        if (sscanf(e->d_name, "%llu.%7s", &n, tail) != 2 || strcmp(tail, "log") != 0) {
            continue;
        }
        snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
        int fd = open(full, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            ok = ok && errno == ENOENT;
            continue;
        }
        ok = fdatasync(fd) == 0 && ok;
        close(fd);
    }
    ok = fsync(dirfd(d)) == 0 && ok;
    closedir(d);
    return ok;
}

void chat_store_close(chat_store *st)
{
    if (!st) {
        return;
    }
    syncer_stop(st);
    if (st->db && st->running && !atomic_load(&st->failed) && sync_all_logs(st->path)) {
        /* A clean close: everything is on disk, and the next open must not
         * take this run for one that lost writes (invariant 7). A close
         * after a write error leaves the marker. */
        key k;
        char *err = NULL;
        key_init(&k, TAG_META);
        key_raw(&k, META_RUNNING);
        leveldb_writebatch_t *wb = leveldb_writebatch_create();
        leveldb_writebatch_delete(wb, k.buf, k.len);
        leveldb_write(st->db, st->wopt_sync, wb, &err);
        leveldb_writebatch_destroy(wb);
        leveldb_free(err);
    }
    if (st->db) {
        leveldb_close(st->db);
    }
    free(st->path);
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

/* Most logs a round syncs by name; LevelDB keeps one or two. */
#define MAX_LOGS 16

/* fdatasyncs the log numbered num in dir; 0, or the errno of a failed
 * sync. A log already gone is not a failure (its memtable is in a synced
 * table); one that cannot be opened sets *fallback. */
static int sync_log(const char *dir, unsigned long long num, bool *fallback)
{
    char full[PATH_MAX_LEN];
    snprintf(full, sizeof(full), "%s/%06llu.log", dir, num);
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *fallback = *fallback || errno != ENOENT;
        return 0;
    }
    int e = fdatasync(fd) == 0 ? 0 : errno;
    close(fd);
    return e;
}

/* One round (see struct syncer). Returns 0, or the errno of a sync that
 * failed, described in why. */
static int syncer_round(struct syncer *sy, bool *fallback, char *why, size_t cap)
{
    const char *path = sy->st->path;
    unsigned long long nums[MAX_LOGS], newest = 0;
    size_t n = 0;
    bool any = false;
    int e = 0;

    *fallback = false;
    DIR *d = opendir(path);
    if (!d) {
        *fallback = true;
    }
    for (struct dirent *de; d && (de = readdir(d)) != NULL;) {
        unsigned long long num = 0;
        char tail[8];
        if (sscanf(de->d_name, "%llu.%7s", &num, tail) != 2 || strcmp(tail, "log") != 0) {
            continue;
        }
        if (n < MAX_LOGS) {
            nums[n++] = num;
        } else {
            *fallback = true;
        }
        newest = !any || num > newest ? num : newest;
        any = true;
    }
    if (d && !any) {
        *fallback = true;
    }
    if (any && (sy->log_fd < 0 || newest != sy->log_num)) {
        /* Logs retired since the last round may hold records not yet in a
         * table file: sync them before moving on. */
        for (size_t i = 0; i < n && !e; i++) {
            if (nums[i] != newest && (!sy->synced_any || nums[i] >= sy->log_num)) {
                e = sy->log_fd >= 0 && nums[i] == sy->log_num
                        ? (fdatasync(sy->log_fd) == 0 ? 0 : errno)
                        : sync_log(path, nums[i], fallback);
                snprintf(why, cap, "%06llu.log", nums[i]);
            }
        }
        char full[PATH_MAX_LEN];
        snprintf(full, sizeof(full), "%s/%06llu.log", path, newest);
        int fd = e ? -1 : open(full, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (sy->log_fd >= 0) {
                close(sy->log_fd);
            }
            sy->log_fd = fd;
            sy->log_num = newest;
            sy->synced_any = true;
            pthread_mutex_lock(&sy->lock);
            snprintf(sy->log_name, sizeof(sy->log_name), "%06llu.log", newest);
            pthread_mutex_unlock(&sy->lock);
            /* the new log's name must survive a power loss too */
            if (fsync(dirfd(d)) != 0) {
                e = errno;
                snprintf(why, cap, "the directory");
            }
        } else if (!e) {
            *fallback = true;
        }
    }
    if (d) {
        closedir(d);
    }
    if (!e && sy->log_fd >= 0 && fdatasync(sy->log_fd) != 0) {
        e = errno;
        snprintf(why, cap, "%06llu.log", sy->log_num);
    }
    if (!e && *fallback) {
        char *err = NULL;
        leveldb_write(sy->st->db, sy->st->wopt_sync, sy->empty, &err);
        if (err) {
            set_text(why, cap, "a synced write (%s)", err);
            leveldb_free(err);
            e = EIO;
        }
    }
    return e;
}

static void *syncer_main(void *arg)
{
    struct syncer *sy = arg;
    char why[CHAT_STORE_ERROR_MAX / 4];
    pthread_mutex_lock(&sy->lock);
    for (;;) {
        while (!sy->requested && !sy->stop) {
            pthread_cond_wait(&sy->wake, &sy->lock);
        }
        if (!sy->requested && sy->stop) {
            break;
        }
        sy->requested = false;
        pthread_mutex_unlock(&sy->lock);
        bool fallback = false;
        why[0] = '\0';
        int e = syncer_round(sy, &fallback, why, sizeof(why));
        pthread_mutex_lock(&sy->lock);
        sy->rounds++;
        sy->fallbacks += fallback;
        if (e != 0) {
            /* A sync that failed may have lost what it was to keep:
             * invariant 5, as for a failed write. */
            set_text(sy->err, sizeof(sy->err), "syncing %s in %s: %s", why, sy->st->path,
                     strerror(e));
            atomic_store(&sy->st->failed, true);
        }
    }
    pthread_mutex_unlock(&sy->lock);
    return NULL;
}

static void syncer_stop(chat_store *st)
{
    struct syncer *sy = st->sync_thread;
    if (!sy) {
        return;
    }
    pthread_mutex_lock(&sy->lock);
    sy->stop = true;
    pthread_cond_signal(&sy->wake);
    pthread_mutex_unlock(&sy->lock);
    pthread_join(sy->thread, NULL);
    if (sy->log_fd >= 0) {
        close(sy->log_fd);
    }
    leveldb_writebatch_destroy(sy->empty);
    pthread_cond_destroy(&sy->wake);
    pthread_mutex_destroy(&sy->lock);
    free(sy);
    st->sync_thread = NULL;
}

static chat_err syncer_start(chat_store *st)
{
    struct syncer *sy = calloc(1, sizeof(*sy));
    if (!sy) {
        return CHAT_ENOMEM;
    }
    sy->st = st;
    sy->log_fd = -1;
    sy->empty = leveldb_writebatch_create();
    pthread_mutex_init(&sy->lock, NULL);
    pthread_cond_init(&sy->wake, NULL);
    if (pthread_create(&sy->thread, NULL, syncer_main, sy) != 0) {
        pthread_cond_destroy(&sy->wake);
        pthread_mutex_destroy(&sy->lock);
        leveldb_writebatch_destroy(sy->empty);
        free(sy);
        return CHAT_ENOMEM;
    }
    st->sync_thread = sy;
    return CHAT_OK;
}

static void syncer_error(chat_store *st, char *out, size_t cap)
{
    struct syncer *sy = st->sync_thread;
    snprintf(out, cap, "an unknown error");
    if (sy) {
        pthread_mutex_lock(&sy->lock);
        if (sy->err[0]) {
            set_text(out, cap, "%s", sy->err);
        }
        pthread_mutex_unlock(&sy->lock);
    }
}

chat_err chat_store_sync_state(chat_store *st, chat_sync_state *out)
{
    struct syncer *sy = st ? st->sync_thread : NULL;
    if (!sy || !out) {
        return CHAT_EINVAL;
    }
    pthread_mutex_lock(&sy->lock);
    set_text(out->log, sizeof(out->log), "%s", sy->log_name);
    out->rounds = sy->rounds;
    out->fallbacks = sy->fallbacks;
    pthread_mutex_unlock(&sy->lock);
    return CHAT_OK;
}

chat_err chat_store_sync_async(chat_store *st)
{
    struct syncer *sy = st->sync_thread;
    if (atomic_load(&st->failed)) {
        return refused(st);
    }
    if (!sy) {
        return chat_store_sync(st);
    }
    if (!st->dirty) {
        return CHAT_OK;
    }
    st->dirty = false;
    pthread_mutex_lock(&sy->lock);
    sy->requested = true;
    pthread_cond_signal(&sy->wake);
    pthread_mutex_unlock(&sy->lock);
    return CHAT_OK;
}

chat_err chat_store_sync(chat_store *st)
{
    if (!st->dirty) {
        return CHAT_OK;
    }
    /* A synced write of an empty batch fsyncs the log, and with it every
     * unsynced record before it. */
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    chat_err rc = write_batch(st, wb, st->wopt_sync, NULL);
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK) {
        st->dirty = false;
    }
    return rc;
}

chat_err chat_store_compact(chat_store *st)
{
    if (!st) {
        return CHAT_EINVAL;
    }
    /* LevelDB's C API reports nothing here: a failure shows at the next
     * write, which then latches failure as any write error does. */
    leveldb_compact_range(st->db, NULL, 0, NULL, 0);
    return CHAT_OK;
}

/* Reads a per-group counter ('H' or 'F'), dflt when the group has none. */
static chat_err group_u64(chat_store *st, char tag, const char *group, uint64_t dflt, uint64_t *v)
{
    key k;
    bool found = false;
    key_init(&k, tag);
    key_str(&k, group);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    *v = dflt;
    return get_u64_key(st, &k, v, &found);
}

chat_err chat_store_head(chat_store *st, const char *group, uint64_t *head)
{
    return group_u64(st, TAG_HEAD, group, 0, head);
}

chat_err chat_store_first(chat_store *st, const char *group, uint64_t *first)
{
    return group_u64(st, TAG_FIRST, group, 1, first);
}

chat_err chat_store_append(chat_store *st, const char *group, uint64_t id, const char *from,
                           const char *cid, const void *env, size_t env_len)
{
    key kh, km, ki, kk, kv;
    uint64_t head = 0;
    char val[8];
    chat_err rc;

    if (!group || !from || (!env && env_len)) {
        return CHAT_EINVAL;
    }
    rc = chat_store_head(st, group, &head);
    if (rc != CHAT_OK) {
        return rc;
    }
    if (id != head + 1) {
        return CHAT_ECONFLICT;
    }
    key_init(&kh, TAG_HEAD);
    key_str(&kh, group);
    key_init(&km, TAG_MSG);
    key_str(&km, group);
    key_u64(&km, id);
    if (kh.overflow || km.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_put(wb, km.buf, km.len, env, env_len);
    put_u64(val, id);
    leveldb_writebatch_put(wb, kh.buf, kh.len, val, sizeof(val));
    if (head == 0) {
        /* a new 'H' record: the count goes in the same batch */
        char n[8];
        put_u64(n, st->groups + 1);
        put_meta(wb, META_GROUPS, n, sizeof(n));
    }
    if (cid) {
        /* The index entry and its reverse, so that whoever deletes the
         * message finds the entry by id (invariant 6). */
        key_init(&ki, TAG_CID);
        key_str(&ki, group);
        key_str(&ki, from);
        key_str(&ki, cid);
        key_init(&kk, TAG_CIDREV);
        key_str(&kk, group);
        key_u64(&kk, id);
        kv.len = 0;
        kv.overflow = false;
        key_str(&kv, from);
        key_str(&kv, cid);
        if (ki.overflow || kk.overflow || kv.overflow) {
            leveldb_writebatch_destroy(wb);
            return CHAT_EINVAL;
        }
        leveldb_writebatch_put(wb, ki.buf, ki.len, val, sizeof(val));
        leveldb_writebatch_put(wb, kk.buf, kk.len, kv.buf, kv.len);
    }
    rc = write_batch(st, wb, st->wopt, &km);
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK && head == 0) {
        st->groups++;
    }
    return rc;
}

chat_err chat_store_cid_find(chat_store *st, const char *group, const char *from, const char *cid,
                             uint64_t *id, bool *found)
{
    key k;
    uint64_t first = 1;
    key_init(&k, TAG_CID);
    key_str(&k, group);
    key_str(&k, from);
    key_str(&k, cid);
    *found = false;
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = get_u64_key(st, &k, id, found);
    if (rc == CHAT_OK && *found) {
        /* An entry whose message is gone (a store from before the reverse
         * keys, or a group being deleted) no longer holds a retry back. */
        rc = chat_store_first(st, group, &first);
        *found = rc == CHAT_OK && *id >= first;
    }
    return rc;
}

chat_err chat_store_get(chat_store *st, const char *group, uint64_t id, chat_msg *msg, bool *found)
{
    key k;
    char *err = NULL;
    size_t vlen = 0;

    uint64_t first = 1;
    *found = false;
    key_init(&k, TAG_MSG);
    key_str(&k, group);
    key_u64(&k, id);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = chat_store_first(st, group, &first);
    if (rc != CHAT_OK || id < first) {
        return rc;
    }
    char *val = leveldb_get(st->db, st->ropt, k.buf, k.len, &vlen, &err);
    if (err) {
        return read_key_error(st, err, k.buf, k.len);
    }
    if (!val) {
        return CHAT_OK;
    }
    msg->data = malloc(vlen + 1);
    if (!msg->data) {
        leveldb_free(val);
        return CHAT_ENOMEM;
    }
    memcpy(msg->data, val, vlen);
    msg->data[vlen] = '\0';
    msg->len = vlen;
    msg->id = id;
    leveldb_free(val);
    *found = true;
    return CHAT_OK;
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

/* Appends the iterator's current record to page; false on out of memory. */
static bool page_push(chat_page *page, size_t *cap, uint64_t id, const char *v, size_t vlen)
{
    if (page->count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        chat_msg *n = realloc(page->msgs, ncap * sizeof(*n));
        if (!n) {
            return false;
        }
        page->msgs = n;
        *cap = ncap;
    }
    chat_msg *m = &page->msgs[page->count];
    m->data = malloc(vlen + 1);
    if (!m->data) {
        return false;
    }
    memcpy(m->data, v, vlen);
    m->data[vlen] = '\0';
    m->len = vlen;
    m->id = id;
    page->count++;
    page->bytes += vlen;
    return true;
}

/* Shared by every reading: the group's 'M' keys form one contiguous range,
 * so a seek lands on the first candidate and each step reads the next id. */
static chat_err scan(chat_store *st, const char *group, uint64_t from_id, bool forward,
                     size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx, bool *more)
{
    key prefix, k;
    size_t count = 0, bytes = 0;
    uint64_t last = 0, first = 1;
    chat_err rc = CHAT_OK;
    char *err = NULL;

    *more = false;
    key_init(&prefix, TAG_MSG);
    key_str(&prefix, group);
    k = prefix;
    key_u64(&k, from_id);
    if (k.overflow || max_count == 0) {
        return CHAT_EINVAL;
    }
    /* Ids below first are gone even while a group deletion has not yet
     * removed their records (invariant 2). */
    rc = chat_store_first(st, group, &first);
    if (rc != CHAT_OK) {
        return rc;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, k.buf, k.len);
    if (!forward && !(err = iter_error(it))) {
        /* Seek lands on the first key >= before; the page starts below it. */
        if (leveldb_iter_valid(it)) {
            leveldb_iter_prev(it);
        } else {
            leveldb_iter_seek_to_last(it);
        }
    }
    while (!err && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen != prefix.len + 8 || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        uint64_t id = get_u64(kb + prefix.len);
        if (!forward && id < first) {
            break;
        }
        if (forward ? id > from_id && id >= first : id < from_id) {
            const char *v = leveldb_iter_value(it, &vlen);
            if (count >= max_count || (count > 0 && bytes + vlen > max_bytes)) {
                *more = true;
                break;
            }
            if (fn(ctx, id, v, vlen) != 0) {
                rc = CHAT_ENOMEM;
                break;
            }
            count++;
            bytes += vlen;
            last = id;
        }
        forward ? leveldb_iter_next(it) : leveldb_iter_prev(it);
    }
    leveldb_iter_destroy(it);
    if (err) {
        char what[CHAT_STORE_ERROR_MAX / 2];
        what[0] = '\0';
        put_text(what, sizeof(what), "reading the messages of group ");
        put_name(what, sizeof(what), group, strlen(group));
        put_text(what, sizeof(what), " %s %llu", forward ? "after" : "before",
                 (unsigned long long)from_id);
        if (count > 0) {
            put_text(what, sizeof(what), " (%zu read, up to %llu)", count,
                     (unsigned long long)last);
        }
        rc = read_error(st, err, what);
    }
    return rc;
}

chat_err chat_store_scan_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx,
                                 bool *more)
{
    return scan(st, group, after, true, max_count, max_bytes, fn, ctx, more);
}

struct page_builder {
    chat_page *page;
    size_t cap;
};

static int push_cb(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct page_builder *pb = ctx;
    return page_push(pb->page, &pb->cap, id, data, len) ? 0 : 1;
}

static chat_err read_page(chat_store *st, const char *group, uint64_t from_id, bool forward,
                          size_t max_count, size_t max_bytes, chat_page **out)
{
    struct page_builder pb = {calloc(1, sizeof(chat_page)), 0};
    *out = NULL;
    if (!pb.page) {
        return CHAT_ENOMEM;
    }
    chat_err rc =
        scan(st, group, from_id, forward, max_count, max_bytes, push_cb, &pb, &pb.page->more);
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
    return read_page(st, group, after, true, max_count, max_bytes, out);
}

chat_err chat_store_read_backward(chat_store *st, const char *group, uint64_t before,
                                  size_t max_count, size_t max_bytes, chat_page **out)
{
    return read_page(st, group, before, false, max_count, max_bytes, out);
}

static void cursor_key(key *k, const char *group, const char *member, const char *device)
{
    key_init(k, TAG_CURSOR);
    key_str(k, group);
    key_str(k, member);
    if (device) {
        key_str(k, device);
    }
}

static void max_key(key *k, const char *group, const char *member)
{
    key_init(k, TAG_MAX);
    key_str(k, group);
    key_str(k, member);
}

chat_err chat_store_cursor_info(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *id, int64_t *last_used, bool *found)
{
    key k;
    rec r;
    cursor_key(&k, group, member, device);
    *found = false;
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = get_rec(st, &k, &r, found);
    if (rc == CHAT_OK && *found) {
        *id = r.v;
        if (last_used) {
            *last_used = (int64_t)r.x;
        }
    }
    return rc;
}

chat_err chat_store_cursor_get(chat_store *st, const char *group, const char *member,
                               const char *device, uint64_t *id, bool *found)
{
    return chat_store_cursor_info(st, group, member, device, id, NULL, found);
}

/* The highest cursor among the member's device records: how a store from
 * before the 'X' records answers, once per member. */
static chat_err scan_cursors(chat_store *st, const char *group, const char *member, uint64_t *id,
                             bool *found)
{
    key prefix;
    chat_err rc = CHAT_OK;
    char *err = NULL;
    rec r;

    cursor_key(&prefix, group, member, NULL);
    if (prefix.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len);
         !(err = iter_error(it)) && leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        if (!decode(TAG_CURSOR, v, vlen, &r)) {
            rc = corrupt_key(st, kb, klen, vlen);
            break;
        }
        if (!*found || r.v > *id) {
            *id = r.v;
            *found = true;
        }
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = read_key_error(st, err, prefix.buf, prefix.len);
    }
    return rc;
}

chat_err chat_store_cursor_max(chat_store *st, const char *group, const char *member, uint64_t *id,
                               bool *found)
{
    key kx;
    max_key(&kx, group, member);
    *found = false;
    if (kx.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = get_u64_key(st, &kx, id, found);
    if (rc == CHAT_OK && !*found) {
        rc = scan_cursors(st, group, member, id, found);
    }
    return rc;
}

/* Adds to wb what keeps the member's 'X' record at least `to` (invariant
 * 3): a put when it is lower, or when it is missing (then at least the
 * highest device cursor, for stores from before 'X'). */
static chat_err raise_max(chat_store *st, const char *group, const char *member, uint64_t to,
                          leveldb_writebatch_t *wb)
{
    key kx;
    uint64_t max = 0;
    bool found = false;
    max_key(&kx, group, member);
    chat_err rc = get_u64_key(st, &kx, &max, &found);
    if (rc != CHAT_OK || (found && max >= to)) {
        return rc;
    }
    if (!found) {
        rc = scan_cursors(st, group, member, &max, &found);
        if (rc != CHAT_OK) {
            return rc;
        }
    }
    batch_put(wb, &kx, found && max > to ? max : to);
    return CHAT_OK;
}

chat_err chat_store_cursor_advance(chat_store *st, const char *group, const char *member,
                                   const char *device, uint64_t id, uint64_t *now)
{
    key k;
    uint64_t head = 0;
    rec cur = {0, 0};
    bool found = false;
    chat_err rc;

    cursor_key(&k, group, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    rc = chat_store_head(st, group, &head);
    if (rc == CHAT_OK) {
        rc = get_rec(st, &k, &cur, &found);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    if (id > head) {
        id = head;
    }
    int64_t t = st->clock(st->clock_ctx);
    bool move = !found || id > cur.v;
    /* An ack that moves nothing is still a use of the device. */
    if (move || day_of(t) != day_of((int64_t)cur.x)) {
        uint64_t to = move ? id : cur.v;
        leveldb_writebatch_t *wb = leveldb_writebatch_create();
        batch_put2(wb, &k, to, (uint64_t)t);
        if (move) {
            rc = raise_max(st, group, member, to, wb);
        }
        if (rc == CHAT_OK) {
            rc = write_batch(st, wb, st->wopt_lazy, &k);
        }
        leveldb_writebatch_destroy(wb);
        if (rc == CHAT_OK) {
            cur.v = to;
        }
    }
    if (now) {
        *now = cur.v;
    }
    return rc;
}

chat_err chat_store_cursor_touch(chat_store *st, const char *group, const char *member,
                                 const char *device, int64_t now_ms)
{
    key k;
    rec cur;
    bool found = false;
    cursor_key(&k, group, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = get_rec(st, &k, &cur, &found);
    if (rc != CHAT_OK || !found || day_of(now_ms) == day_of((int64_t)cur.x)) {
        return rc;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    batch_put2(wb, &k, cur.v, (uint64_t)now_ms);
    rc = write_batch(st, wb, st->wopt_lazy, &k);
    leveldb_writebatch_destroy(wb);
    return rc;
}

chat_err chat_store_cursor_start(chat_store *st, const char *group, const char *member,
                                 const char *device, uint64_t *id, bool *found)
{
    key k;
    uint64_t start = 0;
    bool have = false;
    chat_err rc;

    *found = false;
    cursor_key(&k, group, member, device);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    int64_t t = st->clock(st->clock_ctx);
    rc = chat_store_cursor_get(st, group, member, device, id, &have);
    if (rc != CHAT_OK || have) {
        *found = have;
        return rc == CHAT_OK && have ? chat_store_cursor_touch(st, group, member, device, t) : rc;
    }
    rc = chat_store_member_get(st, group, member, &start, &have);
    if (rc != CHAT_OK || !have) {
        return rc;
    }
    /* Invariant 3: the 'X' record is the member's most advanced device,
     * one lookup however many devices it has had. */
    uint64_t best = 0;
    bool any = false;
    rc = chat_store_cursor_max(st, group, member, &best, &any);
    if (rc != CHAT_OK) {
        return rc;
    }
    if (any && best > start) {
        start = best;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    batch_put2(wb, &k, start, (uint64_t)t);
    rc = raise_max(st, group, member, start, wb);
    if (rc == CHAT_OK) {
        rc = write_batch(st, wb, st->wopt_lazy, &k);
    }
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK) {
        *id = start;
        *found = true;
    }
    return rc;
}

chat_err chat_store_expire_devices(chat_store *st, int64_t older_than_ms, size_t max_keys,
                                   char *resume, size_t resume_cap, size_t *removed, bool *done)
{
    key start, last;
    size_t visited = 0, gone = 0;
    bool finished = false;
    char *err = NULL;
    chat_err rc = CHAT_OK;

    *removed = 0;
    *done = false;
    if (!resume || resume_cap < CHAT_STORE_RESUME_MAX || max_keys == 0) {
        return CHAT_EINVAL;
    }
    size_t rlen = ((size_t)(unsigned char)resume[0] << 8) | (unsigned char)resume[1];
    if (rlen > sizeof(start.buf) || (rlen > 0 && resume[2] != TAG_CURSOR)) {
        return CHAT_EINVAL;
    }
    key_init(&start, TAG_CURSOR);
    if (rlen > 0) {
        memcpy(start.buf, resume + 2, rlen);
        start.len = rlen;
    }
    last = start;
    int64_t now = st->clock(st->clock_ctx);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, start.buf, start.len);
    if (rlen > 0 && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen == start.len && memcmp(kb, start.buf, klen) == 0) {
            leveldb_iter_next(it);
        }
    }
    while (!err && !(err = iter_error(it))) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        if (!kb || klen < 1 || kb[0] != TAG_CURSOR) {
            finished = true;
            break;
        }
        if (visited == max_keys || klen > sizeof(last.buf)) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        if (vlen == 8) {
            /* Written before last-use stamps: counts as used now, so that
             * an upgrade does not expire every device at its first sweep. */
            char val[16];
            memcpy(val, v, 8);
            put_u64(val + 8, (uint64_t)now);
            leveldb_writebatch_put(wb, kb, klen, val, sizeof(val));
        } else if (vlen != 16 || (int64_t)get_u64(v + 8) < older_than_ms) {
            /* Stale, or unreadable: a device that comes back starts where
             * the member's most advanced device was ('X' stays). */
            leveldb_writebatch_delete(wb, kb, klen);
            gone++;
        }
        memcpy(last.buf, kb, klen);
        last.len = klen;
        visited++;
        leveldb_iter_next(it);
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = read_key_error(st, err, last.buf, last.len);
    } else if (visited > 0) {
        rc = write_batch(st, wb, st->wopt_lazy, &last);
    }
    leveldb_writebatch_destroy(wb);
    if (rc != CHAT_OK) {
        return rc;
    }
    *removed = gone;
    *done = finished;
    if (finished) {
        resume[0] = resume[1] = 0;
    } else if (visited > 0) {
        resume[0] = (char)(last.len >> 8);
        resume[1] = (char)(last.len & 0xff);
        memcpy(resume + 2, last.buf, last.len);
    }
    return CHAT_OK;
}

static void join_keys(key *kj, key *kg, const char *group, const char *member)
{
    key_init(kj, TAG_JOIN);
    key_str(kj, group);
    key_str(kj, member);
    key_init(kg, TAG_GROUPS);
    key_str(kg, member);
    key_raw(kg, group);
}

/* Whether group is being deleted (chat_store_group_delete), and the
 * generation of that deletion: memberships added meanwhile carry it. */
static chat_err pending_delete(chat_store *st, const char *group, size_t glen, uint64_t *gen,
                               bool *pending)
{
    key kd;
    rec r;
    bool found = false;
    key_init(&kd, TAG_DELETE);
    key_part(&kd, group, glen);
    *pending = false;
    if (kd.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = get_rec(st, &kd, &r, &found);
    if (rc == CHAT_OK && found) {
        *pending = true;
        *gen = r.v;
    }
    return rc;
}

/* Whether a membership record (joined, generation) counts: while its group
 * is being deleted, only those added since the deletion began do. */
static chat_err membership_live(chat_store *st, const char *group, size_t glen, const rec *r,
                                bool *live)
{
    uint64_t gen = 0;
    bool pending = false;
    chat_err rc = pending_delete(st, group, glen, &gen, &pending);
    *live = rc == CHAT_OK && (!pending || r->x == gen);
    return rc;
}

chat_err chat_store_member_get(chat_store *st, const char *group, const char *member,
                               uint64_t *joined, bool *found)
{
    key kj, kg;
    rec r;
    join_keys(&kj, &kg, group, member);
    *found = false;
    if (kj.overflow) {
        return CHAT_EINVAL;
    }
    chat_err rc = get_rec(st, &kj, &r, found);
    if (rc == CHAT_OK && *found) {
        rc = membership_live(st, group, strlen(group), &r, found);
    }
    if (rc == CHAT_OK && *found) {
        *joined = r.v;
    }
    return rc;
}

/* Adds to wb the deletion of member's cursors in group and of its maximum
 * cursor record. */
static chat_err delete_cursors(chat_store *st, const char *group, const char *member,
                               leveldb_writebatch_t *wb)
{
    key kx, prefix;
    char *err = NULL;

    cursor_key(&prefix, group, member, NULL);
    max_key(&kx, group, member);
    if (prefix.overflow || kx.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_delete(wb, kx.buf, kx.len);
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len);
         !(err = iter_error(it)) && leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        leveldb_writebatch_delete(wb, kb, klen);
    }
    leveldb_iter_destroy(it);
    return err ? read_key_error(st, err, prefix.buf, prefix.len) : CHAT_OK;
}

chat_err chat_store_member_add(chat_store *st, const char *group, const char *member,
                               uint64_t *joined)
{
    key kj, kg;
    uint64_t at = 0, gen = 0;
    bool found = false, pending = false;
    chat_err rc;

    join_keys(&kj, &kg, group, member);
    if (kj.overflow || kg.overflow) {
        return CHAT_EINVAL;
    }
    rc = chat_store_member_get(st, group, member, &at, &found);
    if (rc == CHAT_OK && !found) {
        rc = chat_store_head(st, group, &at);
    }
    if (rc == CHAT_OK && !found) {
        rc = pending_delete(st, group, strlen(group), &gen, &pending);
    }
    if (rc == CHAT_OK && !found) {
        leveldb_writebatch_t *wb = leveldb_writebatch_create();
        if (pending) {
            /* Joining a group being deleted: a new membership, marked as
             * such so that the deletion's later steps keep it, without the
             * cursors of the membership the deletion removes. */
            rc = delete_cursors(st, group, member, wb);
            batch_put2(wb, &kj, at, gen);
            batch_put2(wb, &kg, at, gen);
        } else {
            batch_put(wb, &kj, at);
            batch_put(wb, &kg, at);
        }
        if (rc == CHAT_OK) {
            rc = write_batch(st, wb, st->wopt_lazy, &kj);
        }
        leveldb_writebatch_destroy(wb);
    }
    if (rc == CHAT_OK && joined) {
        *joined = at;
    }
    return rc;
}

chat_err chat_store_member_remove(chat_store *st, const char *group, const char *member)
{
    key kj, kg;
    chat_err rc;

    join_keys(&kj, &kg, group, member);
    if (kj.overflow || kg.overflow) {
        return CHAT_EINVAL;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_writebatch_delete(wb, kj.buf, kj.len);
    leveldb_writebatch_delete(wb, kg.buf, kg.len);
    rc = delete_cursors(st, group, member, wb);
    if (rc == CHAT_OK) {
        rc = write_batch(st, wb, st->wopt_lazy, &kj);
    }
    leveldb_writebatch_destroy(wb);
    return rc;
}

chat_err chat_store_member_groups(chat_store *st, const char *member, chat_group_fn fn, void *ctx)
{
    key prefix;
    chat_err rc = CHAT_OK;
    char *err = NULL;
    char name[MAX_PART + 1];
    rec r;
    bool live = false;

    key_init(&prefix, TAG_GROUPS);
    key_str(&prefix, member);
    if (prefix.overflow || !fn) {
        return CHAT_EINVAL;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, prefix.buf, prefix.len);
         !(err = iter_error(it)) && leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            break;
        }
        size_t n = klen - prefix.len;
        const char *v = leveldb_iter_value(it, &vlen);
        if (n > MAX_PART || !decode(TAG_GROUPS, v, vlen, &r)) {
            rc = corrupt_key(st, kb, klen, vlen);
            break;
        }
        memcpy(name, kb + prefix.len, n);
        name[n] = '\0';
        rc = membership_live(st, name, n, &r, &live);
        if (rc != CHAT_OK) {
            break;
        }
        if (live && fn(ctx, name, r.v) != 0) {
            rc = CHAT_EINVAL;
            break;
        }
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = read_key_error(st, err, prefix.buf, prefix.len);
    }
    return rc;
}

/* ------------------------------------------------------------------------
 * Deleting a group
 * --------------------------------------------------------------------- */

/* The kinds of a group's records, in key order: a deletion walks them one
 * after the other, and its resume point is the last key it looked at. */
static const char delete_kinds[] = {TAG_CURSOR, TAG_CID, TAG_JOIN, TAG_CIDREV, TAG_MSG, TAG_MAX};
#define DELETE_KINDS (sizeof(delete_kinds) / sizeof(delete_kinds[0]))

/* Whether member (the bytes of a key) joined group since the deletion of
 * generation gen began: its cursors are the new membership's. */
static chat_err member_is_new(chat_store *st, const char *group, const char *m, size_t mlen,
                              uint64_t gen, bool *is_new)
{
    key kj;
    rec r;
    bool found = false;
    key_init(&kj, TAG_JOIN);
    key_str(&kj, group);
    key_part(&kj, m, mlen);
    *is_new = false;
    if (kj.overflow) {
        return CHAT_OK;
    }
    chat_err rc = get_rec(st, &kj, &r, &found);
    *is_new = rc == CHAT_OK && found && r.x == gen;
    /* a membership record of the wrong shape goes with its cursors */
    return rc == CHAT_ECORRUPT ? CHAT_OK : rc;
}

/* A deletion in progress, as its 'D' record holds it. */
struct deletion {
    uint64_t gen;   /* this deletion's generation, unique in the store */
    uint64_t bound; /* head + 1 when it began: ids below are deleted */
    key pos;        /* the last key looked at; len 0: none yet */
};

/* What a deletion does with one record of group (key kb, value v) that it
 * walks over: adds its deletion to wb, or leaves it to the group as it is
 * now (ids from bound on, members who joined since). *stop is set when the
 * rest of this kind is newer (messages and their cid keys are in id
 * order). */
static chat_err delete_one(chat_store *st, const char *group, size_t plen,
                           const struct deletion *del, const char *kb, size_t klen, const char *v,
                           size_t vlen, leveldb_writebatch_t *wb, bool *stop)
{
    const char *p = kb + plen, *end = kb + klen, *m = NULL;
    size_t mlen = 0;
    bool keep = false;
    rec r;
    chat_err rc = CHAT_OK;

    *stop = false;
    switch (kb[0]) {
    case TAG_CIDREV:
    case TAG_MSG:
        *stop = end - p == 8 && get_u64(p) >= del->bound;
        keep = *stop;
        break;
    case TAG_CID:
        keep = vlen == 8 && get_u64(v) >= del->bound;
        break;
    case TAG_JOIN:
        keep = decode(TAG_JOIN, v, vlen, &r) && r.x == del->gen;
        if (!keep && next_part(&p, end, &m, &mlen)) {
            key kg;
            key_init(&kg, TAG_GROUPS);
            key_part(&kg, m, mlen);
            key_raw(&kg, group);
            if (!kg.overflow) {
                leveldb_writebatch_delete(wb, kg.buf, kg.len);
            }
        }
        break;
    case TAG_CURSOR:
    case TAG_MAX:
        if (next_part(&p, end, &m, &mlen)) {
            rc = member_is_new(st, group, m, mlen, del->gen, &keep);
        }
        break;
    default:
        break;
    }
    if (rc == CHAT_OK && !keep) {
        leveldb_writebatch_delete(wb, kb, klen);
    }
    return rc;
}

/* Reads the group's 'D' record: *pending when a deletion is under way, and
 * then *del is it. */
static chat_err deletion_get(chat_store *st, const key *kd, struct deletion *del, bool *pending)
{
    char *err = NULL;
    size_t vlen = 0;
    chat_err rc = CHAT_OK;

    *pending = false;
    del->pos.len = 0;
    del->pos.overflow = false;
    char *v = leveldb_get(st->db, st->ropt, kd->buf, kd->len, &vlen, &err);
    if (err) {
        return read_key_error(st, err, kd->buf, kd->len);
    }
    if (!v) {
        return CHAT_OK;
    }
    if (vlen < DELETE_HEADER || vlen - DELETE_HEADER > sizeof(del->pos.buf)) {
        rc = corrupt_key(st, kd->buf, kd->len, vlen);
    } else {
        *pending = true;
        del->gen = get_u64(v);
        del->bound = get_u64(v + 8);
        del->pos.len = vlen - DELETE_HEADER;
        memcpy(del->pos.buf, v + DELETE_HEADER, del->pos.len);
    }
    leveldb_free(v);
    return rc;
}

/* Adds the put of the 'D' record to wb. */
static chat_err deletion_put(leveldb_writebatch_t *wb, const key *kd, const struct deletion *del)
{
    size_t len = DELETE_HEADER + del->pos.len;
    char *v = malloc(len);
    if (!v) {
        return CHAT_ENOMEM;
    }
    put_u64(v, del->gen);
    put_u64(v + 8, del->bound);
    memcpy(v + DELETE_HEADER, del->pos.buf, del->pos.len);
    leveldb_writebatch_put(wb, kd->buf, kd->len, v, len);
    free(v);
    return CHAT_OK;
}

/* Starts a deletion: a generation no other deletion in this store had
 * (memberships added during it carry it, so a later deletion of the same
 * group, even one at the same head, tells them apart), counted in a meta
 * record put in wb. */
static chat_err deletion_start(chat_store *st, struct deletion *del, uint64_t head,
                               leveldb_writebatch_t *wb)
{
    key kn;
    uint64_t last = 0;
    bool found = false;
    key_init(&kn, TAG_META);
    key_raw(&kn, META_DELETE_GEN);
    chat_err rc = get_u64_key(st, &kn, &last, &found);
    if (rc == CHAT_OK) {
        del->gen = found ? last + 1 : 1;
        del->bound = head + 1;
        del->pos.len = 0;
        batch_put(wb, &kn, del->gen);
    }
    return rc;
}

/* Positions it on the first key of del to look at, in kind *kind. */
static void deletion_seek(leveldb_iterator_t *it, const struct deletion *del, key *prefix,
                          size_t *kind)
{
    const key *pos = &del->pos;
    *kind = 0;
    while (pos->len > 0 && *kind < DELETE_KINDS && delete_kinds[*kind] != pos->buf[0]) {
        (*kind)++;
    }
    if (pos->len == 0 || *kind == DELETE_KINDS) {
        *kind = 0;
        prefix->buf[0] = delete_kinds[0];
        leveldb_iter_seek(it, prefix->buf, prefix->len);
        return;
    }
    prefix->buf[0] = delete_kinds[*kind];
    leveldb_iter_seek(it, pos->buf, pos->len);
    if (leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen == pos->len && memcmp(kb, pos->buf, klen) == 0) {
            leveldb_iter_next(it);
        }
    }
}

chat_err chat_store_group_delete(chat_store *st, const char *group, size_t max_keys, bool *done)
{
    key kd, kf, prefix;
    struct deletion del;
    uint64_t head = 0;
    size_t kind = 0, visited = 0;
    bool pending = false, finished = false, stop = false;
    char *err = NULL;
    chat_err rc;

    *done = false;
    if (!group || max_keys == 0) {
        return CHAT_EINVAL;
    }
    key_init(&kd, TAG_DELETE);
    key_str(&kd, group);
    key_init(&kf, TAG_FIRST);
    key_str(&kf, group);
    key_init(&prefix, TAG_MSG); /* the kind byte changes as the walk goes */
    key_str(&prefix, group);
    if (kd.overflow || kf.overflow || prefix.overflow) {
        return CHAT_EINVAL;
    }
    rc = deletion_get(st, &kd, &del, &pending);
    if (rc == CHAT_OK && !pending) {
        rc = chat_store_head(st, group, &head);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    if (!pending) {
        /* The first step: from its batch on the group reads as empty (ids
         * below first are gone, memberships older than the deletion do not
         * count) and appends go on above the deleted range, so a publish
         * between two steps is never touched by the later ones. */
        rc = deletion_start(st, &del, head, wb);
        if (head > 0) {
            batch_put(wb, &kf, del.bound);
        }
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    deletion_seek(it, &del, &prefix, &kind);
    while (rc == CHAT_OK && !(err = iter_error(it))) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_valid(it) ? leveldb_iter_key(it, &klen) : NULL;
        if (stop || !kb || klen <= prefix.len || memcmp(kb, prefix.buf, prefix.len) != 0) {
            /* This kind is done: on to the next. */
            stop = false;
            if (++kind == DELETE_KINDS) {
                finished = true;
                break;
            }
            prefix.buf[0] = delete_kinds[kind];
            leveldb_iter_seek(it, prefix.buf, prefix.len);
            continue;
        }
        if (visited == max_keys || klen > sizeof(del.pos.buf)) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        rc = delete_one(st, group, prefix.len, &del, kb, klen, v, vlen, wb, &stop);
        memcpy(del.pos.buf, kb, klen);
        del.pos.len = klen;
        visited++;
        if (!stop) {
            leveldb_iter_next(it);
        }
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = read_key_error(st, err, prefix.buf, prefix.len);
    }
    /* Finished, the group keeps its head and first records alone. */
    if (rc == CHAT_OK && finished) {
        leveldb_writebatch_delete(wb, kd.buf, kd.len);
    } else if (rc == CHAT_OK) {
        rc = deletion_put(wb, &kd, &del);
    }
    if (rc == CHAT_OK) {
        rc = write_batch(st, wb, st->wopt_lazy, &kd);
    }
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK) {
        *done = finished;
    }
    return rc;
}

/* Adds to wb the deletion of one reverse key (kb, value v) of message id,
 * and of the index entry it names while that entry still points at this
 * message (a later append may have reused the cid). */
static chat_err trim_cid(chat_store *st, const char *group, uint64_t id, const char *kb,
                         size_t klen, const char *v, size_t vlen, leveldb_writebatch_t *wb)
{
    key ki;
    char *err = NULL;
    const char *end = v + vlen, *f = NULL, *c = NULL;
    size_t fn = 0, cn = 0, ilen = 0;
    bool named = next_part(&v, end, &f, &fn) && next_part(&v, end, &c, &cn) && v == end;

    leveldb_writebatch_delete(wb, kb, klen);
    key_init(&ki, TAG_CID);
    key_str(&ki, group);
    if (!named) {
        return CHAT_OK;
    }
    key_part(&ki, f, fn);
    key_part(&ki, c, cn);
    if (ki.overflow) {
        return CHAT_OK;
    }
    char *ival = leveldb_get(st->db, st->ropt, ki.buf, ki.len, &ilen, &err);
    if (err) {
        return read_key_error(st, err, ki.buf, ki.len);
    }
    /* An entry of another shape is as dead as its message. */
    if (ival && (ilen != 8 || get_u64(ival) == id)) {
        leveldb_writebatch_delete(wb, ki.buf, ki.len);
    }
    leveldb_free(ival);
    return CHAT_OK;
}

/* Ranges up to this many ids are trimmed by point lookups (a Bloom filter
 * answers most), longer ones by one iterator: retention by count trims one
 * message per publish, and an iterator costs more than a few lookups. */
#define TRIM_BY_GETS 16u

/* Adds to wb the deletion of the cid keys of group's messages [from, to). */
static chat_err trim_cids(chat_store *st, const char *group, uint64_t from, uint64_t to,
                          leveldb_writebatch_t *wb)
{
    key prefix, k;
    char *err = NULL;
    chat_err rc = CHAT_OK;

    key_init(&prefix, TAG_CIDREV);
    key_str(&prefix, group);
    k = prefix;
    key_u64(&k, from);
    if (k.overflow) {
        return CHAT_EINVAL;
    }
    if (to - from <= TRIM_BY_GETS) {
        for (uint64_t id = from; id < to && rc == CHAT_OK; id++) {
            size_t vlen = 0;
            put_u64(k.buf + prefix.len, id);
            char *v = leveldb_get(st->db, st->ropt, k.buf, k.len, &vlen, &err);
            if (err) {
                return read_key_error(st, err, k.buf, k.len);
            }
            if (v) {
                rc = trim_cid(st, group, id, k.buf, k.len, v, vlen, wb);
                leveldb_free(v);
            }
        }
        return rc;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    for (leveldb_iter_seek(it, k.buf, k.len);
         rc == CHAT_OK && !(err = iter_error(it)) && leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen != prefix.len + 8 || memcmp(kb, prefix.buf, prefix.len) != 0 ||
            get_u64(kb + prefix.len) >= to) {
            break;
        }
        const char *v = leveldb_iter_value(it, &vlen);
        rc = trim_cid(st, group, get_u64(kb + prefix.len), kb, klen, v, vlen, wb);
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = read_key_error(st, err, k.buf, k.len);
    }
    return rc;
}

chat_err chat_store_trim(chat_store *st, const char *group, uint64_t before, size_t max_keys,
                         uint64_t *first_now)
{
    key kf, km;
    uint64_t head = 0, first = 1;
    char val[8];
    chat_err rc;

    if (!group || max_keys == 0) {
        return CHAT_EINVAL;
    }
    rc = chat_store_head(st, group, &head);
    if (rc == CHAT_OK) {
        rc = chat_store_first(st, group, &first);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    if (first_now) {
        *first_now = first;
    }
    if (before > head + 1) {
        before = head + 1;
    }
    if (before <= first) {
        return CHAT_OK;
    }
    key_init(&kf, TAG_FIRST);
    key_str(&kf, group);
    if (kf.overflow) {
        return CHAT_EINVAL;
    }
    /* One bounded batch per call, 'F' moving with it: a crash between two
     * calls leaves invariants 2 and 6 intact, and one call's work on the
     * broker's thread is bounded however long the backlog. */
    uint64_t stop = before - first > max_keys ? first + max_keys : before;
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    for (uint64_t id = first; id < stop; id++) {
        key_init(&km, TAG_MSG);
        key_str(&km, group);
        key_u64(&km, id);
        leveldb_writebatch_delete(wb, km.buf, km.len);
    }
    rc = trim_cids(st, group, first, stop, wb);
    if (rc == CHAT_OK) {
        put_u64(val, stop);
        leveldb_writebatch_put(wb, kf.buf, kf.len, val, sizeof(val));
        rc = write_batch(st, wb, st->wopt_lazy, &kf);
    }
    leveldb_writebatch_destroy(wb);
    if (rc == CHAT_OK && first_now) {
        *first_now = stop;
    }
    return rc;
}

chat_err chat_store_groups(chat_store *st, const char *after, size_t max, chat_head_fn fn,
                           void *ctx, bool *done)
{
    key start;
    chat_err rc = CHAT_OK;
    char *err = NULL;
    char name[MAX_PART + 1];
    size_t seen = 0;

    *done = false;
    key_init(&start, TAG_HEAD);
    if (after) {
        key_str(&start, after);
        if (start.overflow) {
            return CHAT_EINVAL;
        }
    }
    leveldb_iterator_t *it = leveldb_create_iterator(st->db, st->ropt);
    leveldb_iter_seek(it, start.buf, start.len);
    if (after && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen == start.len && memcmp(kb, start.buf, klen) == 0) {
            leveldb_iter_next(it);
        }
    }
    while (!err && !(err = iter_error(it)) && leveldb_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
        const char *kb = leveldb_iter_key(it, &klen);
        if (klen < 1 || kb[0] != TAG_HEAD) {
            *done = true;
            break;
        }
        if (seen == max) {
            break;
        }
        size_t n = klen >= 3 ? ((size_t)(unsigned char)kb[1] << 8) | (unsigned char)kb[2] : 0;
        const char *v = leveldb_iter_value(it, &vlen);
        if (klen < 3 || 3 + n != klen || n > MAX_PART || vlen != 8) {
            rc = corrupt_key(st, kb, klen, vlen);
            break;
        }
        memcpy(name, kb + 3, n);
        name[n] = '\0';
        seen++;
        if (fn(ctx, name, get_u64(v)) != 0) {
            break;
        }
        leveldb_iter_next(it);
    }
    if (!err && rc == CHAT_OK && !leveldb_iter_valid(it)) {
        *done = true;
    }
    leveldb_iter_destroy(it);
    if (err) {
        rc = read_key_error(st, err, start.buf, start.len);
    }
    return rc;
}
