/* pg_store: the PostgreSQL backend's constructor (store_backend.h): a
 * database that several brokers share. Its ops table, the ops of the whole
 * store, and the open that creates the schema on first use. Private to
 * store/. */
#ifndef PG_STORE_H
#define PG_STORE_H

#include "store_backend.h"

#define PG_NAME "postgresql"

/* Opens the store in the database that conninfo (a libpq connection
 * string, chat_store_open_opts's path) names; creates the schema there
 * when it is missing. */
store_open_fn pg_open;

#endif
