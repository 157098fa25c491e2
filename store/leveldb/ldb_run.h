/* ldb_run: the run marker and the incarnation (invariant incarnation-first). An open
 * starts a run, which a clean close ends; an open that finds the previous
 * run unfinished after a reboot, when not every append was synced, draws a
 * new incarnation. Private to store/leveldb.
 */
#ifndef LDB_RUN_H
#define LDB_RUN_H

#include "ldb_db.h"

/* Draws a new random incarnation: 128 bits from /dev/urandom as 32 hex
 * digits. False when the kernel gave too few bytes. */
bool ldb_new_incarnation(char out[STORE_INCARNATION_LEN + 1]);

/* Starts a run (invariant incarnation-first): refuses a store of a newer format
 * (CHAT_EFORMAT, see LDB_FORMAT) before writing anything, and writes the
 * format record where it is missing; reads the previous run's marker and the
 * incarnation, replaces the incarnation when the previous run ended in a
 * way that may have lost acknowledged writes, and writes this run's marker
 * (boot id and sync mode), all synced before the store takes any write. */
chat_err ldb_run_start(ldb *st, const char *boot_override, char **errmsg);

/* Ends the run: removes the marker with a synced write, so that the next
 * open sees a clean close. Only after every log is synced (the caller
 * checks) and never after a write error: then the marker stays. */
void ldb_run_end(ldb *st);

#endif
