/* ldb_member: memberships ('J' and 'G' records, invariant 4) and their
 * generations while a group is being deleted; it implements the
 * chat_store_member_* functions of chat_store.h. Private to store/leveldb.
 */
#ifndef LDB_MEMBER_H
#define LDB_MEMBER_H

#include "ldb_db.h"

#endif
