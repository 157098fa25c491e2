/* chat_store: the log of group messages, member cursors and membership
 * that mosquitto-chat keeps; it knows nothing of MQTT. Behind these
 * functions a backend keeps the data, chosen at open
 * (chat_store_opts.backend): LevelDB, embedded in the process (the
 * default; its key layout and the invariants that keep the promises below
 * are the design note at the top of store/leveldb/ldb_store.c), or
 * PostgreSQL, which several brokers share (store/pg; its schema and failure
 * modes are in docs/postgresql.md).
 *
 * Conventions:
 *
 * (1) Ownership. A chat_store is an opaque handle, created by
 *     chat_store_open (or chat_store_open_opts) and freed by
 *     chat_store_close, which accepts NULL. Bytes go in as (pointer, length)
 *     or NUL-terminated names and are copied: the store keeps no pointer
 *     the caller passed but the clock of chat_store_set_clock and its ctx.
 *     Bytes that come out are heap memory owned by the caller, freed with
 *     the function each prototype names (chat_page_destroy, or free());
 *     strings the store returns itself (chat_strerror,
 *     chat_store_incarnation, chat_store_last_error) are the store's,
 *     never freed by the caller.
 *
 * (2) "Not found" is not an error. A lookup of a message, cursor, member or
 *     marker that is not there returns CHAT_OK with *found false (and its
 *     other results unspecified); an empty page or walk is CHAT_OK too.
 *
 * (3) Callbacks. The walks (chat_store_scan_forward, chat_store_groups,
 *     chat_store_member_groups, chat_store_reads and those of
 *     chat_store_ops.h) call the caller's fn once per item, on the caller's
 *     thread, during the call; fn must not be NULL (CHAT_EINVAL) and must
 *     not call the store. fn returns 0 to go on; any other value stops the
 *     walk at once, without error: the call returns CHAT_OK (a store error
 *     met before still fails it), and where the walk says whether it
 *     reached the end (*more, *done) it says that it did not, counting the
 *     item fn stopped on as not handed over. Why fn stopped (out of room,
 *     out of time, an error of its own) is the caller's to keep, in ctx.
 *
 * (4) Threads. One thread (the broker's) owns a store; calls must not
 *     overlap; callbacks and the clock run on that thread, inside a call.
 *     The backends run threads of their own, which never call the
 *     caller's functions: with CHAT_SYNC_BATCH the LevelDB store runs one
 *     that only fdatasyncs LevelDB's logs (or, when it cannot open them,
 *     writes a synced empty batch), and a store job (chat_store_job_start)
 *     runs on one. The LevelDB backend also takes its process for the store's only
 *     writer: it answers heads, cursors and memberships from memory. The
 *     PostgreSQL backend runs one thread that listens for other brokers'
 *     messages and makes new connections (chat_store_feed); it caches
 *     memberships only, and empties that cache whenever any broker changes
 *     one.
 *
 * (5) Errors. Every fallible function returns a chat_err: CHAT_OK (0) or
 *     one code of the enum below; its results are set on CHAT_OK, and
 *     chat_store_open's *errmsg on failure. chat_strerror names a code;
 *     chat_store_last_error says, after CHAT_EIO or CHAT_ECORRUPT, what
 *     failed and where. Names (group, member, device, cid) longer than
 *     CHAT_STORE_MAX_NAME, and other arguments out of range, get
 *     CHAT_EINVAL. On the LevelDB backend the first write error wins: the
 *     store then refuses every write with CHAT_EIO until it is reopened,
 *     while reads go on; a read error fails its call only. A NULL store
 *     (one closed while its owner waits to open it again) answers CHAT_EIO
 *     (see chat_store_close).
 *
 * What every backend promises about the data, named so that the code that
 * keeps each promise can say which (habit 19 of STYLE.md):
 *   dense-ids       Ids of a group are 1..head with no gap, and no id is
 *                   given twice: the head never goes back, not even when a
 *                   group is deleted or retention removes its newest
 *                   messages.
 *   kept-range      first <= head + 1; every id in [first, head] is stored,
 *                   and no read returns an id below first.
 *   cursor-forward  A device's cursor never moves back and never exceeds
 *                   head; a member's maximum cursor is at least every
 *                   cursor of its devices.
 *   read-forward    Only a member has a read marker; it never moves back,
 *                   never exceeds head, and moves in the same write that
 *                   moves the reading device's cursor to it,
 *                   or in the write of a message its member sent.
 *   change-atomic   A change (chat_store_change) rewrites message N and
 *                   stores the message M that carries it in one write: a
 *                   changed N is always followed by its M, and an M never
 *                   names an N that still holds its earlier version.
 *   one-copy        A message has one stored copy, its current version:
 *                   every read (pages, lookups, retention, deletion,
 *                   backups, checks) sees that one, never an earlier.
 *   cid-reserved    A message's cid stays taken while the message is kept,
 *                   whatever its version: a retry is answered with the
 *                   current version, never stored again.
 *   recall-complete A recall rewrites N and the messages that carried N's
 *                   edits in the write that stores the recall: after it no
 *                   record holds any of N's texts (tombstones only).
 */
#ifndef CHAT_STORE_H
#define CHAT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest group, member, device or cid, in bytes; longer ones get CHAT_EINVAL. */
#define CHAT_STORE_MAX_NAME 1024u

/* Longest text chat_store_last_error returns, with its NUL. */
#define CHAT_STORE_ERROR_MAX 512u

typedef enum chat_err {
    CHAT_OK = 0,
    CHAT_ENOMEM,    /* out of memory */
    CHAT_EINVAL,    /* an argument is out of range */
    CHAT_EIO,       /* the backend failed: LevelDB reported an error (after a write the store
                       now refuses writes); PostgreSQL is unreachable or refused (the
                       next call may succeed, on a new connection) */
    CHAT_ECORRUPT,  /* a record does not have the shape this module writes, or a block of
                       LevelDB's files fails its checksum */
    CHAT_ECONFLICT, /* no longer returned (appends take their id from the store); kept so that
                      the codes keep their values */
    CHAT_EFORMAT,   /* the store was written in a newer format than this code reads */
    CHAT_EUNAVAIL   /* an open only: the backend cannot be used now, and the same open
                       may succeed later without anyone's help (PostgreSQL down, starting
                       up, read-only, or its connection lost during the open) */
} chat_err;

typedef enum chat_sync {
    CHAT_SYNC_NONE = 0, /* survive a process crash, not a power loss */
    CHAT_SYNC_BATCH,    /* caller calls chat_store_sync_async at its own pace */
    CHAT_SYNC_ALWAYS    /* every append is on disk before it returns */
} chat_sync;

typedef struct chat_store chat_store;

/* One message of a page: its id and the stored envelope. */
typedef struct chat_msg {
    uint64_t id;
    char *data; /* envelope bytes, NUL-terminated for convenience */
    size_t len; /* bytes in data, not counting the NUL */
} chat_msg;

/* A run of consecutive stored messages, as read by chat_store_read_*. */
typedef struct chat_page {
    chat_msg *msgs; /* count messages, in the order read */
    size_t count;
    size_t bytes; /* sum of the envelopes' lengths */
    bool more;    /* the store holds further messages in the reading direction */
} chat_page;

/* Returns a static English string for an error code (for details of an
 * I/O error or a damaged record, see chat_store_last_error). */
const char *chat_strerror(chat_err err);

/* Opens (creating if missing) the store at directory path (for PostgreSQL,
 * chat_store_open_opts: a connection string). On success *out
 * owns the store; free it with chat_store_close. On failure, *errmsg (if not
 * NULL) receives a malloc'd description to free().
 *
 * Every open is a run: it writes, synced, a marker holding
 * the kernel's boot id and the sync mode, which a clean close removes. A
 * marker found at open means the previous run did not close; when the
 * machine has restarted since (another boot id) and that run did not sync
 * every append (not CHAT_SYNC_ALWAYS), acknowledged messages may be gone
 * and their ids given again, so the store takes a new incarnation before
 * anything else. A process crash (kill -9) loses nothing that reached the
 * kernel and keeps the incarnation.
 *
 * A damaged store is refused, before the store writes a record of its own
 * (LevelDB's recovery may have turned its log into a table already), with
 * CHAT_ECORRUPT and *errmsg naming the file and the damage: a write-ahead
 * log, manifest or table file that fails LevelDB's checks, a table file
 * shorter than the store's manifest says (truncated), a missing table file,
 * and a directory whose CURRENT file is gone while its data files are still
 * there (LevelDB would start an empty store over them and delete them). A
 * store whose '#format' record is newer than this code reads is refused
 * with CHAT_EFORMAT. chat_store_opts.verify adds a read of every block.
 *
 * A PostgreSQL store that cannot be opened now, for a reason that passes
 * by itself (the server down or not answering, starting up, a standby or
 * read-only, the connection lost during the schema's check), fails with
 * CHAT_EUNAVAIL; every other failure (a bad connection string, a login or
 * database refused, a schema of another version, a permission denied) is
 * CHAT_EIO, which only an operator mends. The split is in store/pg's
 * pg_store.c and docs/postgresql.md. */
chat_err chat_store_open(const char *path, chat_sync sync, chat_store **out, char **errmsg);

/* What chat_store_open_opts takes; start from CHAT_STORE_OPTS_INIT. */
typedef struct chat_store_opts {
    chat_sync sync;           /* how appends reach the disk */
    size_t write_buffer_size; /* LevelDB's memtable, in bytes (0: 32 MiB); a new
                                 write-ahead log starts each time it fills */
    const char *boot_id;      /* test hook: the boot id this run records and compares
                                 (NULL: /proc/sys/kernel/random/boot_id) */
    const char *backend;      /* what keeps the data: "leveldb" (NULL: the same) or
                                 "postgresql" (path is then a libpq connection string);
                                 another name fails the open with CHAT_EINVAL */
    bool verify;              /* read every record at open, checking every block's
                                 checksum: a damaged block fails the open (CHAT_ECORRUPT)
                                 rather than, later, the reads that reach it. Reads the
                                 whole store: about 2 s per GB on a 2-core machine (LevelDB
                                 only) */
    bool must_exist;          /* open only a store that is there: a path without one fails
                                 with CHAT_EINVAL instead of getting a new, empty store
                                 (LevelDB; the tools that read a store) */
    size_t cid_filter_bytes;  /* test hook: the size of the filter that answers "never
                                 stored" for new cids (LevelDB; 0: by the store, 64 KiB
                                 to 8 MiB) */
    size_t cid_filter_max;    /* test hook: the most it grows to (LevelDB; 0: 8 MiB
                                 when cid_filter_bytes is 0, else it does not grow) */
    bool cid_filter_hold;     /* test hook: the filter's scan waits until released
                                 (LevelDB; lookups go to LevelDB until then) */
} chat_store_opts;

#define CHAT_STORE_OPTS_INIT                                                                       \
    {                                                                                              \
        CHAT_SYNC_NONE, 0, NULL, NULL, false, false, 0, 0, false                                   \
    }

/* The LevelDB store's filter of the cid index (docs/scaling.md): filled
 * at open by a scan beside the broker, and used once that scan is done and
 * ready (done without ready: a read error, every lookup asks LevelDB). */
typedef struct chat_cid_filter {
    bool done;       /* the scan has ended */
    bool ready;      /* and found every cid key: the filter is in use */
    uint64_t keys;   /* cid keys it found (when ready) */
    uint64_t ms;     /* its time (when ready) */
    uint64_t absent; /* lookups answered "never stored" without LevelDB */
} chat_cid_filter;

/* Fills *out with the state of the store's cid filter. CHAT_EINVAL for a
 * backend without one (PostgreSQL), CHAT_EIO for a closed (NULL) store.
 * Cheap: a few atomic loads and a lock. */
chat_err chat_store_cid_filter(chat_store *st, chat_cid_filter *out);

/* chat_store_open with options: tests make the memtable small, to force
 * log rotations, and fake a reboot with another boot id; the plugin asks
 * for the check of every block. Read once here, nothing of it is on any
 * later path. */
chat_err chat_store_open_opts(const char *path, const chat_store_opts *opts, chat_store **out,
                              char **errmsg);

/* ===========================================================================
 * The opener: an open retried in a thread of its own
 *
 * A store whose open failed with CHAT_EUNAVAIL is opened again by a
 * thread, so that its owner's thread (the broker's) never waits for a
 * connection: the first attempt at once, then after each failure a delay
 * drawn in [d/2, d], d from 250 ms doubling to 2 s (the reconnect pace of
 * the PostgreSQL store's own connections, store/pg/pg_backoff.h). It
 * retries whatever the failure (an operator may mend a permanent one, e.g.
 * a grant, while the broker runs); its owner reads the last one to log it.
 * It stops at the first success and keeps the store until its owner takes
 * it.
 *
 * Ownership: chat_store_opener_start and chat_store_opener_stop are a
 * pair; the opener copies path and the strings of opts. Threading: one
 * owner thread calls all three functions; the opener's own thread touches
 * nothing of the owner's.
 * ========================================================================= */

typedef struct chat_store_opener chat_store_opener;

/* Starts opening the store chat_store_open_opts would open with path and
 * opts (opts->verify is ignored: the store was opened before, or will
 * be). On success *out owns the opener; CHAT_ENOMEM (or CHAT_EINVAL for a
 * NULL argument) when it cannot be started. */
chat_err chat_store_opener_start(const char *path, const chat_store_opts *opts,
                                 chat_store_opener **out);

/* The store, once opened: moved to the caller (free it with
 * chat_store_close), and the opener's thread has ended; else NULL. When
 * failures is not NULL, *failures is the count of failed attempts so far,
 * and last (cap bytes, not NULL when failures is not) the text of the last
 * one ("" before the first). Cheap: one lock; never waits for an
 * attempt. */
chat_store *chat_store_opener_take(chat_store_opener *op, uint64_t *failures, char *last,
                                   size_t cap);

/* Stops the opener and frees it, closing a store it opened that was not
 * taken. Accepts NULL. Waits for an attempt in progress to end: for
 * PostgreSQL at most its connect_timeout (5 s unless the connection string
 * says otherwise) per host, or a statement of the schema's check that
 * hangs on a server that accepted the connection. */
void chat_store_opener_stop(chat_store_opener *op);

/* Closes the store and frees it. Accepts NULL. Unless a write failed, it
 * first forces everything to disk and removes the run marker: the next open
 * sees a clean close.
 *
 * A NULL store stands for one that is closed while its owner waits to open
 * it again (the plugin after a disk filled up): every function that takes
 * a store answers CHAT_EIO for it, chat_store_incarnation "" and
 * chat_store_last_error "". */
void chat_store_close(chat_store *st);

/* The store's incarnation: 32 hex digits (128 random bits) drawn when the
 * store was created (or first opened by a version that has them) and drawn
 * anew at an open after an unclean shutdown that may have lost
 * acknowledged writes (see chat_store_open). Clients that see it change
 * resynchronise: ids they hold may now name other messages. Owned by the
 * store, the same for its lifetime. */
const char *chat_store_incarnation(const chat_store *st);

/* Whether this open drew a new incarnation because of such a shutdown. */
bool chat_store_recovered(const chat_store *st);

/* Figures for $SYS: *groups, the groups with a head (deleted ones
 * included: their head stays), kept in a counter record; *bytes, the
 * store's size: LevelDB, the bytes of the files in its directory (tables,
 * write-ahead log, manifest); PostgreSQL, pg_total_relation_size of its
 * tables (indexes and TOAST included), the space every broker's data takes
 * in the database. Either may be NULL. Cheap: no scan of the data (LevelDB
 * reads its directory; PostgreSQL runs one statement, which counts the
 * rows of chat_groups). */
chat_err chat_store_stats(chat_store *st, uint64_t *groups, uint64_t *bytes);

/* After a call returned CHAT_EIO or CHAT_ECORRUPT: what failed, as one line
 * for a log (the operation, the record kind and its group, member, device
 * or id range, and LevelDB's message). Owned by the store, valid until the
 * next store call; "" before the first such error; unspecified after other
 * results. */
const char *chat_store_last_error(const chat_store *st);

/* Compacts the whole store (LevelDB's compact_range over every key): moves
 * everything into table files and drops deleted records; PostgreSQL:
 * VACUUM (ANALYZE) of the chat tables. Slow; for tools, tests and
 * maintenance, never on the broker's thread under load (CHAT_JOB_COMPACT
 * runs it on a thread of its own). */
chat_err chat_store_compact(chat_store *st);

/* Forces every write so far to stable storage before it returns. Cheap when
 * nothing was written since the last call. A failure is a write error. */
chat_err chat_store_sync(chat_store *st);

/* CHAT_SYNC_BATCH: asks the store's background thread to force every write
 * so far to stable storage, and returns at once; a failure of that sync
 * makes later writes fail with CHAT_EIO (convention 5). Other modes:
 * chat_store_sync. */
chat_err chat_store_sync_async(chat_store *st);

/* Gives the process's allocator the memory the store freed in the
 * meantime back to the system, where that is worth it: LevelDB frees a
 * memtable (write_buffer_size, 32 MiB by default) once it is written out,
 * and glibc keeps freed memory that live allocations hem in, so that
 * without this the broker's resident memory stays at its highest. Cheap
 * when there is nothing to give back (one property read): call it from a
 * timer on the thread that calls the rest. True when it asked the allocator
 * to give memory back: LevelDB's own count (memtables and block cache) fell
 * by 512 KiB or more since the last call, a memtable written out (the least
 * is 1 MiB); or 30 s after the last time it asked, if anything was
 * appended since (writes between two calls can hide the fall). */
bool chat_store_release_memory(chat_store *st);

/* What the background sync of CHAT_SYNC_BATCH has done: for tests and
 * diagnostics. */
typedef struct chat_sync_state {
    char log[32];       /* the write-ahead log it syncs by its own descriptor, "" none yet */
    uint64_t rounds;    /* sync rounds finished */
    uint64_t fallbacks; /* rounds that could not open a log file (EMFILE, say) and
                           synced through a synced empty write instead */
    uint64_t appended;  /* messages appended since the store was opened */
    uint64_t synced;    /* of those, the ones a finished round has made durable:
                           appended - synced is what a power loss would lose now */
} chat_sync_state;

/* Copies that state to *out; CHAT_EINVAL unless the store was opened with
 * CHAT_SYNC_BATCH. */
chat_err chat_store_sync_state(chat_store *st, chat_sync_state *out);

/* Group head (0 for an unknown group) and the lowest id still kept. */
chat_err chat_store_head(chat_store *st, const char *group, uint64_t *head);
chat_err chat_store_first(chat_store *st, const char *group, uint64_t *first);

/* The envelope of a message about to be stored, with two holes that the
 * store fills in: the stored bytes are head, the message's id in decimal,
 * mid, its time in ms since the epoch in decimal, then tail. The store,
 * not the caller, picks the id (head + 1 inside the write that stores the
 * message: with a shared backend, several processes append to one group)
 * and the time (the store's clock; the PostgreSQL backend's is the
 * database server's, never behind the group's previous message). */
typedef struct chat_envelope {
    const char *head; /* bytes before the id */
    size_t head_len;
    const char *mid; /* between the id and the time */
    size_t mid_len;
    const char *tail; /* after the time */
    size_t tail_len;
} chat_envelope;

/* What chat_store_append did. */
typedef struct chat_appended {
    uint64_t id;    /* the message's id: the new one, or the original of a duplicate */
    int64_t ts;     /* the time put in a new envelope (0 for a duplicate) */
    bool duplicate; /* (group, from, cid) was stored before: nothing was written */
    bool read;      /* the sender's read marker moved to id (a member: sender_read, or
                       M of chat_store_change) */
    char *env;      /* the stored envelope (the original of a duplicate), NUL-terminated:
                       heap memory, free() */
    size_t len;     /* bytes in env, not counting the NUL */
} chat_appended;

/* Stores one message in group: takes the next id and the time, writes the
 * envelope with them filled in (see chat_envelope) and, when cid is not
 * NULL, the (group, from, cid) index entry and its reverse, all in one
 * write (dense-ids: the message is the new head). When cid is not NULL and (group, from, cid)
 * is already stored (and still kept: see chat_store_cid_find), nothing is
 * written: out says duplicate and holds the original id and envelope, so
 * that a retry, even one sent to another broker on a shared backend,
 * delivers the first copy. With sender_read, a new message also moves the
 * read marker of from (when from is a member of group: invariant 8) to its
 * id in the same write, as chat apps take sending as having read the chat,
 * and out->read says so; never a cursor of from's devices, which count what
 * each device received. On CHAT_OK out->env is set and the caller frees
 * it; on error nothing is written (a shared backend's transaction rolls
 * back: no id is used up) and out->env is NULL. */
chat_err chat_store_append(chat_store *st, const char *group, const char *from, const char *cid,
                           const chat_envelope *env, bool sender_read, chat_appended *out);

/* Looks up the id a (group, from, cid) was stored under, while that message
 * is still kept: once retention or a group deletion removed it, *found is
 * false and a retry is a new message. */
chat_err chat_store_cid_find(chat_store *st, const char *group, const char *from, const char *cid,
                             uint64_t *id, bool *found);

/* Most messages one change rewrites besides N: the bound of a recall's
 * work (the plugin allows as many edits of one message). */
#define CHAT_STORE_REWRITES_MAX 20u

/* One more message a change rewrites (a recall's earlier edit carriers,
 * which hold N's edited text): the same compare-and-swap as N's. Ids are
 * above N and at most head, each once. */
typedef struct chat_rewrite {
    uint64_t id;        /* the message rewritten */
    const char *expect; /* its bytes as the caller read them: the whole change */
    size_t expect_len;  /* is made only while every one still holds these */
    const char *text;   /* its new version */
    size_t text_len;
} chat_rewrite;

/* A change of a stored message (protocol v1.2: recall and edit), as
 * chat_store_change takes it: message id (N) gets a new version, and a new
 * message (M) carries the change. The store knows no JSON: the caller
 * builds both texts, and the store fills in what only it can pick, M's id
 * and the time of the change. */
typedef struct chat_change {
    uint64_t id;        /* N: the message rewritten */
    const char *expect; /* N's bytes as the caller read them (chat_store_get): the */
    size_t expect_len;  /* change is made only while N still holds exactly these */
    const char *before; /* N's new version: these bytes, */
    size_t before_len;
    bool stamp;                   /* then, when set, the change's time (M's ts) in decimal */
    const char *after;            /* and these bytes (an edit's "edited":<ts>; a recall's */
    size_t after_len;             /* tombstone has no time of its own: stamp false) */
    bool stamp_id;                /* then (only with stamp), when set, M's id in decimal */
    const char *last;             /* and these bytes (an edit's list of the messages that */
    size_t last_len;              /* carried N's edits, M the last of them) */
    const chat_rewrite *rewrites; /* other messages rewritten in the same */
    size_t nrewrites;             /* write (a recall's earlier edit carriers), at most
                                     CHAT_STORE_REWRITES_MAX */
    chat_envelope msg;            /* M, as chat_store_append takes it: the store fills in
                                     its id (head + 1) and its time */
} chat_change;

/* Rewrites message ch->id of group with its new version and stores the
 * message ch->msg (sent by from, without a cid) under the next id, both in
 * one write (invariant change-atomic: after a crash at any point, both or
 * neither). *applied is false, and nothing is written, when N is no longer
 * stored (never was, retention or a deletion removed it: below first) or
 * no longer holds ch->expect (another broker changed it meanwhile, on a
 * shared backend): the caller reads it again and decides anew. Otherwise
 * out is as chat_store_append's for M (never a duplicate): its id, its
 * time, which is also the one put in N's version when ch->stamp, and its
 * envelope (the caller frees out->env). M is from's own message: from's
 * read marker moves to it in the same write, as chat_store_append's with
 * sender_read (when from is a member of group: invariant 8; an admin
 * recalling in another group has none), and out->read says so.
 *
 * N keeps its key, its cid index entries and their reverse: a change adds
 * no record but M (invariant one-copy: whatever reads N, retention and
 * deletion included, finds only its current version), and a publish that
 * retries N's cid is still a duplicate, answered with N's current version
 * (cid-reserved).
 *
 * The messages of ch->rewrites are rewritten in the same write, under the
 * same compare-and-swap: when one of them is not stored or no longer holds
 * its expect, nothing is written and *applied is false. A recall passes
 * the messages that carried N's edits, so that none of N's texts survives
 * it in the store (invariant recall-complete). */
chat_err chat_store_change(chat_store *st, const char *group, const char *from,
                           const chat_change *ch, chat_appended *out, bool *applied);

/* The cid message id of group was stored with (a copy to free() in *cid),
 * *found false when the message is not kept or had none. For an export
 * of a recalled message, whose version no longer names its cid but whose
 * cid stays reserved (see chat_store_change). */
chat_err chat_store_cid_of(chat_store *st, const char *group, uint64_t id, char **cid, bool *found);

/* Reads one message (ids below first are not found). On success with
 * *found, *msg holds a heap copy: free msg->data with free(). */
chat_err chat_store_get(chat_store *st, const char *group, uint64_t id, chat_msg *msg, bool *found);

/* Reads messages with ids > after, oldest first, at most max_count of them
 * and, after the first, no more than max_bytes in total. The page is heap
 * memory: free it with chat_page_destroy. An empty page is not an error.
 * A damaged range fails the call (no page) with CHAT_ECORRUPT or CHAT_EIO
 * and chat_store_last_error naming it; it never skips over the damage. */
chat_err chat_store_read_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_page **out);

/* The same reading as chat_store_read_forward without a copy: calls fn with
 * each message, whose bytes are valid only during the call; fn stops the
 * scan as the callback rule at the top says. *more tells whether the store
 * holds further messages (true when fn stopped the scan). On a read error
 * fn may already have had the messages before the damage: discard them. */
typedef int (*chat_msg_fn)(void *ctx, uint64_t id, const char *data, size_t len);
chat_err chat_store_scan_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx,
                                 bool *more);

/* chat_store_scan_forward for a catch-up page, with the group's head and
 * first id (as chat_store_head and chat_store_first give them) read with
 * it: on PostgreSQL one statement, one snapshot and one round trip instead
 * of three. The same rules for fn and *more. *head and *first are set
 * before fn's first call (fn may read them through its ctx: the first id
 * it must expect) and hold on success. */
chat_err chat_store_scan_page(chat_store *st, const char *group, uint64_t after, size_t max_count,
                              size_t max_bytes, chat_msg_fn fn, void *ctx, bool *more,
                              uint64_t *head, uint64_t *first);

/* Reads messages with ids < before, newest first, with the same bounds. */
chat_err chat_store_read_backward(chat_store *st, const char *group, uint64_t before,
                                  size_t max_count, size_t max_bytes, chat_page **out);

/* Frees a page and every message in it. Accepts NULL. */
void chat_page_destroy(chat_page *page);

/* A device's cursor in a group. */
chat_err chat_store_cursor_get(chat_store *st, const char *group, const char *member,
                               const char *device, uint64_t *id, bool *found);

/* The same, with the time the device was last used (ms since the epoch,
 * by the store's clock or chat_store_cursor_touch; 0 for a cursor written
 * before the store kept it). last_used may be NULL. */
chat_err chat_store_cursor_info(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *id, int64_t *last_used, bool *found);

/* Moves a device's cursor forward to id, clamped to head; a lower id
 * changes nothing but counts as a use of the device (see
 * chat_store_cursor_touch). Keeps the member's maximum cursor record in the
 * same batch. *now (may be NULL) receives the cursor afterwards. */
chat_err chat_store_cursor_advance(chat_store *st, const char *group, const char *member,
                                   const char *device, uint64_t id, uint64_t *now);

/* The most advanced cursor any device of member in group has had: one
 * record, kept when devices expire and deleted with the membership. */
chat_err chat_store_cursor_max(chat_store *st, const char *group, const char *member, uint64_t *id,
                               bool *found);

/* Where a device's delivery starts when it has no cursor yet: the member's
 * maximum cursor (chat_store_cursor_max), else the id at which the member
 * joined (PROTOCOL.md, Names: device): a constant number of lookups however
 * many devices the member has had. Creates the cursor there so that later
 * calls agree. A device that has a cursor gets it, and the call counts as
 * a use of the device. *found is false when member is not in group. */
chat_err chat_store_cursor_start(chat_store *st, const char *group, const char *member,
                                 const char *device, uint64_t *id, bool *found);

/* chat_store_cursor_start, and the group's head (0: none) as it stood when
 * the call began or later, for a catch-up's start: on PostgreSQL one round
 * trip instead of two. *head is set on success only. */
chat_err chat_store_cursor_open(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *id, bool *found, uint64_t *head);

/* Records that a device was used at now_ms (for chat_store_expire_devices),
 * cheaply: it writes only when the day (UTC, now_ms / 86400000) differs
 * from the stored one, so at most once per device per day. A device
 * without a cursor is left alone: nothing is created. */
chat_err chat_store_cursor_touch(chat_store *st, const char *group, const char *member,
                                 const char *device, int64_t now_ms);

/* The clock that stamps a device's last use in chat_store_cursor_advance,
 * chat_store_cursor_start and chat_store_expire_devices: returns ms since
 * the epoch. NULL restores the default, CLOCK_REALTIME. Tests set their own
 * to control time. */
typedef int64_t (*chat_clock_fn)(void *ctx);
void chat_store_set_clock(chat_store *st, chat_clock_fn fn, void *ctx);

/* Room a caller keeps for the resume point of chat_store_expire_devices. */
#define CHAT_STORE_RESUME_MAX (4u * (CHAT_STORE_MAX_NAME + 2u) + 20u)

/* What one call of chat_store_expire_devices deleted. */
typedef struct chat_expired {
    size_t devices; /* device cursors */
    size_t members; /* memberships that went with their last device (drop_members) */
} chat_expired;

/* Device expiry, in bounded steps: walks the device cursors of every group
 * in key order from the resume point, looks at no more than max_keys of
 * them (max_keys 0: CHAT_EINVAL), and deletes those last used before
 * older_than_ms. *out receives what it deleted; *done is set when the walk
 * reached the last cursor.
 *
 * resume is the caller's buffer of resume_cap >= CHAT_STORE_RESUME_MAX
 * bytes, opaque to it: zero its first two bytes before a new walk and keep
 * it between calls; done leaves it zeroed for the next walk. A cursor
 * written before the store kept last-use times gets the store clock's time
 * instead of being deleted, and expires a full period later.
 *
 * Without drop_members, the member stays, and so does its maximum cursor
 * record: a device that comes back, or a new one, starts where its most
 * advanced device was. With drop_members (the caller's open groups, where
 * a member joins again by using the group), a member none of whose devices
 * has a cursor left once the walk deleted one goes too, in the same batch
 * (transaction) as that last cursor, as chat_store_member_remove removes
 * it: both membership records, the maximum cursor record, the read marker
 * and its place in the member count. A member the walk found no cursor of
 * (one that never had a device, added by an admin's join) stays; so does a
 * membership that a group deletion under way has done away with (the
 * deletion removes it). */
chat_err chat_store_expire_devices(chat_store *st, int64_t older_than_ms, bool drop_members,
                                   size_t max_keys, char *resume, size_t resume_cap,
                                   chat_expired *out, bool *done);

/* Retention: deletes the messages of group with ids below before (at most
 * head + 1), oldest first, and at most max_keys of them per call (max_keys
 * 0: CHAT_EINVAL), with their cid index entries, in one batch that also
 * records the new lowest id. *first_now (may be NULL) receives the lowest
 * id kept afterwards: the caller repeats, on later turns of its loop, while
 * *first_now < before. Deleting nothing is not an error.
 *
 * The cid entries go with their messages: a retry of an
 * expired message is no longer recognised and is stored anew. */
chat_err chat_store_trim(chat_store *st, const char *group, uint64_t before, size_t max_keys,
                         uint64_t *first_now);

/* Calls fn(ctx, group, head) for up to max groups that come after `after`
 * (NULL: from the first), in the order of the head records' keys: shorter
 * names first, names of one length in byte order (a group name in an 'H'
 * key is length-prefixed). `after` need not be a group... */
typedef int (*chat_head_fn)(void *ctx, const char *group, uint64_t head);

/* ... and sets *done when the walk reached the last group (never when fn
 * stopped it: see Callbacks at the top). */
chat_err chat_store_groups(chat_store *st, const char *after, size_t max, chat_head_fn fn,
                           void *ctx, bool *done);

/* Membership. member_add is idempotent: an existing member keeps its
 * joined id and its read marker (a new member's starts at 0). *joined (may
 * be NULL) receives it. While the group is being deleted
 * (chat_store_group_delete), only members who joined since the deletion
 * began count; joining then starts a new membership, without the old
 * one's cursors. */
chat_err chat_store_member_add(chat_store *st, const char *group, const char *member,
                               uint64_t *joined);
chat_err chat_store_member_get(chat_store *st, const char *group, const char *member,
                               uint64_t *joined, bool *found);

/* A join and, when device is not NULL, that device's cursor, in one call:
 * what the first use of an open group by a new member, or a join request,
 * does. The membership is chat_store_member_add's, exactly (idempotent: an
 * existing member keeps its joined id and read marker; while the group is
 * being deleted, a membership from before the deletion does not count and
 * the join starts a new one, without the old one's cursors); *joined (may
 * be NULL) receives the id it joined at. The cursor is
 * chat_store_cursor_start's: a device that has one keeps it, and the call
 * counts as a use of it; a new one starts at the member's maximum cursor,
 * else at the joined id.
 *
 * On PostgreSQL the two are one statement, one transaction and one round
 * trip: both are written or neither, and the call fails as a whole. On
 * LevelDB they are two writes, the membership first. The result is the
 * membership's: a cursor that fails after the membership was written
 * does not fail the call (the membership stands; only its expiry waits for
 * a device, as a member an admin added waits), and *device_err (may be
 * NULL) receives that failure; it is CHAT_OK in every other case, device
 * NULL included. A device name longer than CHAT_STORE_MAX_NAME fails the
 * call with CHAT_EINVAL before anything is written. */
chat_err chat_store_member_join(chat_store *st, const char *group, const char *member,
                                const char *device, uint64_t *joined, chat_err *device_err);

/* Removes member from group with every cursor of its devices there, its
 * maximum cursor record and its read marker. */
chat_err chat_store_member_remove(chat_store *st, const char *group, const char *member);

/* Calls fn once per group of member, in byte order of the group names
 * (memberships a group deletion has done away with are skipped); fn stops
 * the walk as Callbacks at the top says. */
typedef int (*chat_group_fn)(void *ctx, const char *group, uint64_t joined);
chat_err chat_store_member_groups(chat_store *st, const char *member, chat_group_fn fn, void *ctx);

/* The number of members of group (0 for an unknown group), from one
 * counter record: no walk over the members. */
chat_err chat_store_member_count(chat_store *st, const char *group, uint64_t *count);

/* Read markers (protocol v1.1): per (group, member), the highest id the
 * member has read on any of its devices. */

/* Moves member's read marker in group forward to id (clamped to head; a
 * lower id changes nothing) and, in the same batch, device's cursor
 * forward to the same id, as chat_store_cursor_advance does: what a member
 * read, the device that says so has received. When member is not in group
 * nothing is written and *found is false. Otherwise *read receives the
 * marker afterwards, *acked the device's cursor, *moved whether the marker
 * moved (each may be NULL). */
chat_err chat_store_read_advance(chat_store *st, const char *group, const char *member,
                                 const char *device, uint64_t id, uint64_t *read, uint64_t *acked,
                                 bool *moved, bool *found);

/* member's read marker in group: 0 when it has read nothing yet, or is
 * not a member. */
chat_err chat_store_read_get(chat_store *st, const char *group, const char *member, uint64_t *id);

/* Calls fn(ctx, member, read) for the members of group in byte order of
 * their names, from the first after `after` (NULL or "": from the first),
 * at most max of them (max 0: CHAT_EINVAL); fn stops the walk as Callbacks
 * at the top says. *more tells whether members follow. A member that has
 * read nothing comes with 0. */
typedef int (*chat_read_fn)(void *ctx, const char *member, uint64_t read);
chat_err chat_store_reads(chat_store *st, const char *group, const char *after, size_t max,
                          chat_read_fn fn, void *ctx, bool *more);

/* Deletes a group in bounded steps: every message, cid key, membership
 * (both indexes), device cursor, maximum cursor record, read marker and
 * the member count of group, each
 * call looking at no more than max_keys records (max_keys 0: CHAT_EINVAL).
 * *done is set by the call that finished; calling again continues where
 * the last call stopped, across reopens too.
 *
 * The first call's batch makes the group read as empty: first becomes
 * head + 1 (no message, page or cid below it is found) and memberships
 * from before the deletion stop counting. A publish, join or cursor move
 * between two calls belongs to the group as it is now, and no later call
 * touches it: the deletion removes only ids below that first, and only the
 * memberships (with their cursors) that began before it.
 *
 * The head record stays: ids are never reused, a group that is used again
 * continues after the old head (first = head + 1 until then), and
 * chat_store_groups still lists it. Device cursors read with
 * chat_store_cursor_get may show old values until the call that deletes
 * them; every other reading already ignores them. */
chat_err chat_store_group_delete(chat_store *st, const char *group, size_t max_keys, bool *done);

/* Push registrations (protocol v1.2): where a device of a member can be
 * woken while it has no connection. The store keeps each as bytes it does
 * not read (the plugin's encoding), at most CHAT_STORE_PUSH_MAX of them,
 * one per (member, device), with the time it was made. A registration goes
 * with its member (push-with-member, in each backend's terms): the write
 * that ends the member's last membership that counts (chat_store_member_remove,
 * a step of chat_store_group_delete) deletes the member's registrations,
 * and a put for a member of no group writes nothing; chat_store_push_expire
 * ties them to the device's cursors. */
#define CHAT_STORE_PUSH_MAX 4096u

/* What chat_store_push_put did. */
typedef enum chat_push_put {
    CHAT_PUSH_STORED = 0, /* written, replacing the device's registration if it had one */
    CHAT_PUSH_FULL,       /* nothing written: the member's other devices hold max already */
    CHAT_PUSH_NO_GROUP    /* nothing written: the member belongs to no group */
} chat_push_put;

/* Stores reg (len bytes, 1..CHAT_STORE_PUSH_MAX) as the registration of
 * device of member, made at created_ms, in place of the device's own; at
 * most max_per_member devices of one member keep a registration (max 0:
 * CHAT_EINVAL). *result says what was done; only CHAT_PUSH_STORED wrote. */
chat_err chat_store_push_put(chat_store *st, const char *member, const char *device,
                             const void *reg, size_t len, int64_t created_ms, size_t max_per_member,
                             chat_push_put *result);

/* The registration of device of member: on CHAT_OK with *found, *reg is
 * heap memory (free()) of *len bytes with a NUL after them, and
 * *created_ms (may be NULL) when it was made. */
chat_err chat_store_push_get(chat_store *st, const char *member, const char *device, char **reg,
                             size_t *len, int64_t *created_ms, bool *found);

/* Removes the registration of device of member; when if_reg is not NULL,
 * only if it is still exactly those if_len bytes (a failed endpoint must
 * not take a newer registration of the device with it). *removed (may be
 * NULL) says whether one was deleted. */
chat_err chat_store_push_remove(chat_store *st, const char *member, const char *device,
                                const void *if_reg, size_t if_len, bool *removed);

/* Calls fn(ctx, device, reg, len, created_ms) for every registration of
 * member (at most the max_per_member of the puts), in key order; the bytes
 * are valid during the call; fn stops the walk as Callbacks at the top
 * says. */
typedef int (*chat_push_fn)(void *ctx, const char *device, const char *reg, size_t len,
                            int64_t created_ms);
chat_err chat_store_push_list(chat_store *st, const char *member, chat_push_fn fn, void *ctx);

/* The members of group that have registrations, for the notifications of
 * a message: looks at up to max members (max 0: CHAT_EINVAL) in byte order
 * of their names after `after` (NULL or "": from the first), memberships
 * that count only, and calls fn(ctx, member, seen, device, reg, len) for
 * each registration of each of them, where seen is the member's highest
 * cursor in group or, when higher, the id at which it joined (so the head
 * less seen is what `sync` counts unread for a new device). *last
 * (last_cap >= CHAT_STORE_MAX_NAME + 1 bytes) receives the last member
 * looked at, to pass as `after` next time; *done is set when no member
 * follows it. fn stops the walk as Callbacks at the top says (then *done
 * is false and *last is the last member whose registrations fn had
 * all). */
typedef int (*chat_push_member_fn)(void *ctx, const char *member, uint64_t seen, const char *device,
                                   const char *reg, size_t len);
chat_err chat_store_push_members(chat_store *st, const char *group, const char *after, size_t max,
                                 chat_push_member_fn fn, void *ctx, char *last, size_t last_cap,
                                 bool *done);

/* Registrations that outlived their device, in bounded steps like
 * chat_store_expire_devices (the same resume buffer and rules): deletes
 * each registration made before older_than_ms whose device has no cursor
 * in any group (device expiry dropped them, or a race between brokers on
 * PostgreSQL left one behind despite push-with-member), looking at no more
 * than max_keys registrations. */
chat_err chat_store_push_expire(chat_store *st, int64_t older_than_ms, size_t max_keys,
                                char *resume, size_t resume_cap, size_t *removed, bool *done);

/* Messages other processes store. With a backend that several brokers
 * share (PostgreSQL), a message another broker stored reaches this one as
 * a notification that a thread of the store's own receives; that thread
 * reads the message and queues it until the caller's thread takes it with
 * chat_store_feed. Only followed groups are read (chat_store_follow): the
 * caller follows the groups that have local subscribers. After a lost
 * notification connection the thread reads, once reconnected, every id of
 * a followed group above the last one it handled, so that nothing
 * committed meanwhile is missed; this store's own appends are never fed
 * back. With LevelDB (one writer) both calls do nothing. */

/* Whether other processes may write the store (a shared backend). */
bool chat_store_shared(const chat_store *st);

/* Follows group from the id after `after` on (0: from its head when the
 * store's thread first reads it). Following a group already followed
 * changes nothing. Cheap: no database call on the caller's thread. */
chat_err chat_store_follow(chat_store *st, const char *group, uint64_t after);

/* Calls fn(ctx, group, id, env, len) for up to max queued messages, oldest
 * first; the bytes are valid during the call. Returns how many it handed
 * over. */
typedef void (*chat_feed_fn)(void *ctx, const char *group, uint64_t id, const char *env,
                             size_t len);
size_t chat_store_feed(chat_store *st, size_t max, chat_feed_fn fn, void *ctx);

/* Whether the store can serve a write now, as far as it knows without a
 * database round trip: false while a shared backend has no connection to
 * a server that takes writes (PostgreSQL: the writer lost, or refused by
 * a read-only server, and not made again yet: its calls fail at once with
 * CHAT_EIO), and for a NULL store; true otherwise (LevelDB always: its
 * errors are the calls'). The caller's thread; it may take a connection
 * the store's thread made meanwhile. */
bool chat_store_available(chat_store *st);

/* The operations (listing, checking, backing up and repairing a store):
 * a public header of their own, for the admin commands and the offline
 * tool; every user of chat_store.h gets them. */
#include "chat_store_ops.h"

#endif
