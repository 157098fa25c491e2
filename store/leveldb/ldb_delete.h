/* ldb_delete: the deletion of a group in the LevelDB backend, in bounded
 * steps that resume across reopens from a 'D' record. Private to
 * store/leveldb.
 */
#ifndef LDB_DELETE_H
#define LDB_DELETE_H

#include "ldb_db.h"

/* The ops below (store_backend.h) keep the contracts of the chat_store.h
 * functions of the same names; each comment says how this backend does it. */

/* Walks the group's kinds of records one after the other, keeping its
 * place in the 'D' record between calls. */
store_group_delete_fn ldb_group_delete;

#endif
