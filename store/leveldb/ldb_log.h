/* ldb_log: the message log of the LevelDB backend ('H', 'F', 'M', 'I' and
 * 'K' records): heads, appends with their cid keys, cid lookups, reads and
 * scans of a group's messages in both directions, and the list of groups.
 * Private to store/leveldb.
 */
#ifndef LDB_LOG_H
#define LDB_LOG_H

#include "ldb_db.h"

/* The read marker of from in group, for a message from it stored at id,
 * which its sender has read: its key in *kr, and *move when it moves (from
 * is a member, and only a member has a marker, whose marker is below id),
 * which the batch that stores the message then puts. A cached lookup. */
chat_err ldb_sender_marker(ldb *st, const char *group, const char *from, uint64_t id, key *kr,
                           bool *move);

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* The head through the cache (under the 'H' key); on a miss, the 'H'
 * record, first and one seek into the group's messages (invariant dense-ids); 0
 * for a group that never had a message. */
store_head_fn ldb_head;

/* 'F' through the cache; 1 for a group without one. */
store_first_fn ldb_first;

/* A cid already stored answers with its message (an 'I' and an 'M'
 * lookup); else the message under head + 1 (the cached head: this process
 * is the only writer), for a new group its 'H' record and the groups'
 * count, and the cid keys both ways ('I', 'K'), in one batch (invariants dense-ids
 * and deletable-keys). */
store_append_fn ldb_append;

/* For bench/store_floor alone: the writes ldb_append makes for a new
 * message id of group (the same batch, keys, envelope and write options),
 * without its reads (no cid lookup, no head, no marker: the caller picks id,
 * 1 for the group's first message, and says with mark whether from's read
 * marker moves) and without touching the cache. The store's floor per
 * message: what LevelDB costs before the plugin does anything. */
chat_err ldb_append_floor(chat_store *cs, const char *group, const char *from, const char *cid,
                          const chat_envelope *env, uint64_t id, bool mark);

/* One 'I' lookup (a Bloom filter answers most), valid while its id is at
 * least first. */
store_cid_find_fn ldb_cid_find;

/* One 'M' lookup, never below first. */
store_get_fn ldb_get;

/* One iterator over the group's 'M' range, in either direction, that
 * never returns an id below first (invariant kept-range). */
store_scan_fn ldb_scan;

/* An iterator over the 'H' records, from the one after `after`, each
 * group with its head (ldb_head). */
store_groups_fn ldb_groups;

#endif
