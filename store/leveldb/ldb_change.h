/* ldb_change: changes of stored messages in the LevelDB backend (protocol
 * v1.2, recall and edit): a message's 'M' record rewritten in place in the
 * batch that stores the message carrying the change (invariants
 * change-atomic and one-copy), and the cid a message was stored with, read
 * from its 'K' record. Private to store/leveldb.
 */
#ifndef LDB_CHANGE_H
#define LDB_CHANGE_H

#include "ldb_db.h"

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* One 'M' lookup of N (never below first) compared with ch->expect; then
 * one batch that puts N's new version over its 'M' record and M under the
 * cached head + 1 (this process is the only writer), as ldb_append does;
 * each of ch->rewrites is read and compared first, and put over its own
 * 'M' record in that batch (recall-complete).
 * No other record is written: N's 'I' and 'K' keys stay as they are
 * (cid-reserved), and retention or a deletion removes the one 'M' record
 * as before (deletable-keys). */
store_change_fn ldb_change;

/* One 'K' lookup (its value holds the sender and the cid), valid while the
 * id is at least first; a store from before 'K' keys finds none. */
store_cid_of_fn ldb_cid_of;

#endif
