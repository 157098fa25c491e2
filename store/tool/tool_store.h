/* tool_store: what every command of mqchat-store shares: the backend
 * named by --store, opening the store, and how a failure is reported (on
 * stderr, as the exit status EXIT_FAIL). The tool is one thread and runs
 * one command; the backend is set once, before the command runs.
 */
#ifndef TOOL_STORE_H
#define TOOL_STORE_H

#include "chat_store.h"

#include <stdbool.h>

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_LOST 3 /* repair: done, but tables it could not read went to lost/ */

/* --store: the backend's name, as plugin_opt_store takes it (NULL, the
 * default: LevelDB). name is kept, not copied. */
void tool_set_backend(const char *name);
const char *tool_backend(void);

/* Whether --store names PostgreSQL. */
bool tool_on_postgresql(void);

/* How a store is named in messages: a connection string may hold a
 * password, so it is never printed. Returns path or a fixed text. */
const char *tool_shown(const char *path);

/* Opens the store at path with the backend; NULL, with why on stderr, when
 * it cannot. Only with create may a path without a store get a new, empty
 * one (import): for the others a missing store is an error. The caller
 * closes it with chat_store_close. */
chat_store *tool_open_store(const char *path, bool create);

/* Prints "what: <error> (<the store's last error>)" on stderr; returns
 * EXIT_FAIL. */
int tool_store_failed(chat_store *st, const char *what, chat_err rc);

#endif
