/* ldb_damage: the checks an open makes for a damaged store, so that the
 * store is refused at open, with the file and the damage named, rather than
 * served in part or silently replaced. Private to store/leveldb.
 *
 * LevelDB's own checks at open (paranoid_checks) cover the write-ahead log,
 * the manifest and missing table files. Three kinds of damage pass them:
 *   - CURRENT gone while the data files are still there: with
 *     create_if_missing LevelDB starts an empty store and deletes every
 *     table and log of the old one as obsolete;
 *   - a table file cut short (a crash of the machine, a copy that stopped):
 *     LevelDB opens tables only when a read reaches them, and then reports
 *     an unhelpful "Invalid argument";
 *   - a damaged block inside a table: found only by a read that reaches it,
 *     or by a compaction, which then stops every write.
 * The first is checked before LevelDB opens the directory, the second after
 * (cheap: a stat per table file), the third only when asked (a read of the
 * whole store). None of them writes anything.
 */
#ifndef LDB_DAMAGE_H
#define LDB_DAMAGE_H

#include "ldb_db.h"

/* Before LevelDB opens path: CHAT_ECORRUPT, with *errmsg set (see
 * store_open_error), when CURRENT is missing but table or log files are
 * there; CHAT_OK otherwise, including when path cannot be read (LevelDB
 * then says why). */
chat_err ldb_damage_before_open(const char *path, char **errmsg);

/* After LevelDB opened st: CHAT_ECORRUPT when a table file the manifest
 * lists is shorter than the manifest says; then, when verify is set, reads
 * every record with checksums verified and without filling the block cache,
 * failing with CHAT_ECORRUPT (a damaged block) or CHAT_EIO (a failed read)
 * at the first error. *errmsg names the file and the damage. */
chat_err ldb_damage_check(ldb *st, bool verify, char **errmsg);

#endif
