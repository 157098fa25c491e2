/* ldb_cursor: device cursors and members' maximum cursors ('C' and 'X'
 * records): reads, advances, the start of a new device, last-use stamps
 * and device expiry; it implements the chat_store_cursor_* functions and
 * chat_store_expire_devices of chat_store.h. Private to store/leveldb.
 */
#ifndef LDB_CURSOR_H
#define LDB_CURSOR_H

#include "ldb_db.h"

#endif
