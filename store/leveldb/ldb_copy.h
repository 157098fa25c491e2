/* ldb_copy: a new LevelDB store written record by record from what
 * another backend holds: the backup of a PostgreSQL store (pg_job) is a
 * LevelDB store, so that mqchat-store reads it and a broker on LevelDB
 * opens it. The caller hands over the live state of the data (messages
 * from first to head, live memberships, cursors, maximum cursors); this
 * module writes them in the key layout of ldb_store.c's design note, as the LevelDB
 * backend itself would have. Private to store/.
 *
 * The copy is written in "<dest>.partial" and renamed to dest by
 * ldb_copy_finish, after a synced last batch that also writes the number
 * of groups and a new incarnation: dest exists only complete, opens as a
 * cleanly closed store (no run marker), and a store restored from it
 * forgets what came after the backup (its ids may be given again).
 *
 * Ownership and threading: ldb_copy_create/ldb_copy_destroy are a pair; a
 * copy is used by one thread (a job's). Names are NUL-terminated, bytes
 * (pointer, length); everything is copied into the batch at once.
 */
#ifndef LDB_COPY_H
#define LDB_COPY_H

#include "chat_store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct ldb_copy ldb_copy;

/* Creates "<dest>.partial" (which must not exist) as a new LevelDB store.
 * On failure returns NULL with why in err (cap bytes). */
ldb_copy *ldb_copy_create(const char *dest, char *err, size_t cap);

/* A group's head and first id (head > 0, 1 <= first <= head + 1). */
chat_err ldb_copy_group(ldb_copy *c, const char *group, uint64_t head, uint64_t first);

/* A message and, when cid is not NULL, its cid index entries. */
chat_err ldb_copy_message(ldb_copy *c, const char *group, uint64_t id, const char *from,
                          const char *cid, const char *env, size_t len);

/* A membership (both of its records) with its read marker. A group's
 * memberships come one after another (the member count is written when
 * the next group's begin, or at the finish). */
chat_err ldb_copy_member(ldb_copy *c, const char *group, const char *member, uint64_t joined,
                         uint64_t read);

/* A device's cursor and its last use (ms). */
chat_err ldb_copy_cursor(ldb_copy *c, const char *group, const char *member, const char *device,
                         uint64_t acked, int64_t used);

/* A member's maximum cursor record. */
chat_err ldb_copy_max(ldb_copy *c, const char *group, const char *member, uint64_t acked);

/* Records handed over so far. */
uint64_t ldb_copy_records(const ldb_copy *c);

/* Writes what is left with the groups count and a new incarnation, synced,
 * closes the store and renames "<dest>.partial" to dest. On failure the
 * ".partial" directory stays, and why is in err. The copy is still to be
 * destroyed. */
chat_err ldb_copy_finish(ldb_copy *c, char *err, size_t cap);

/* Closes (when finish did not) and frees. Accepts NULL. */
void ldb_copy_destroy(ldb_copy *c);

/* fsync of the directory that holds path, so that a rename in it survives
 * a power loss (ldb_job's backups use it too). */
void ldb_sync_parent(const char *path);

#endif
