/* tool_import: mqchat-store import: the JSON lines of export (several
 * groups one after another) read from stdin into groups the target store
 * does not have yet; ids, memberships, cursors and cids come out as they
 * were exported. LevelDB only: a PostgreSQL store's appends take the
 * database's clock, which would restamp every message.
 */
#ifndef TOOL_IMPORT_H
#define TOOL_IMPORT_H

/* Imports stdin into the store at path (the backend of tool_store.h), all
 * of it or nothing: a line the broker would never have stored (the
 * protocol's rules, proto/: see tool_import.c) refuses the whole input.
 * Returns the exit status: 0, or EXIT_FAIL with why on stderr (a bad line
 * names its number and the reason). */
int tool_import(const char *path);

#endif
