/* ldb_delete: the deletion of a group in bounded, resumable steps,
 * chat_store_group_delete of chat_store.h. Private to store/leveldb.
 */
#ifndef LDB_DELETE_H
#define LDB_DELETE_H

#include "ldb_db.h"

#endif
