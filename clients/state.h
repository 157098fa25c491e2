/* state: the client library's state file, which records the last message id
 * handed to the application per group, so that a restarted application shows
 * nothing twice.
 *
 * The file is text, one "<id> <group>" line per group after a comment line,
 * and an "@incarnation <hex>" line naming the server store those ids
 * belong to (see docs/protocol.md, Incarnation). chat_state_flush appends
 * a line for each group that changed, in one write(2); a later line of a
 * group overrides an earlier one, and a last line without its newline (an
 * append cut short by a kill or a power loss) is skipped. The first flush, a change of incarnation,
 * every LOG_MAX bytes appended and chat_state_close replace the file whole (written beside it, then
 * renamed), so a crash leaves the old or the new version, never a mix. A rewrite costs ~100 times
 * an append on ext4 (rename over a file starts writing the new one out): once per replay page it
 * was the largest cost of a catch-up (issue 16). Changes are recorded in memory first and written
 * when the caller flushes. A lock on
 * "<path>.lock" (fcntl, held while the state is open) keeps two processes
 * from sharing one file.
 *
 * Ownership: chat_state_open/chat_state_close are a pair; group strings are
 * copied. Threading: none; the library uses it on its dispatcher thread only
 * (and in chat_client_create before that thread starts).
 */
#ifndef CHAT_STATE_H
#define CHAT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat_client.h"

typedef struct chat_state chat_state;

/* Locks and reads the state file at path (a missing file is an empty
 * state). On failure returns CHAT_CLIENT_ERR_IN_USE when another process
 * holds the lock, else CHAT_CLIENT_ERR_STATE (or _NOMEM), with a reason in
 * why. On success *out is the state, closed with chat_state_close. */
chat_client_err chat_state_open(const char *path, chat_state **out, char *why, size_t why_size);

/* Releases the lock and frees st, without writing what was not flushed
 * (lines appended since the last rewrite are rewritten in the short form
 * first, saying the same). Accepts NULL. */
void chat_state_close(chat_state *st);

/* Number of groups recorded, and the i-th (0 <= i < count), owned by st. */
size_t chat_state_count(const chat_state *st);
const char *chat_state_group(const chat_state *st, size_t i, uint64_t *shown);

/* Records shown for group in memory; the file follows at the next
 * chat_state_flush. Returns CHAT_CLIENT_ERR_NOMEM (reason in why) when a new
 * group cannot be added. */
chat_client_err chat_state_set(chat_state *st, const char *group, uint64_t shown, char *why,
                               size_t why_size);

/* Is something recorded that the file does not hold yet? */
bool chat_state_dirty(const chat_state *st);

/* Writes the file (an append, or a rewrite) if something changed since the
 * last write. On failure
 * returns CHAT_CLIENT_ERR_STATE with a reason in why; the records stay in
 * memory, so the next successful flush catches up. */
chat_client_err chat_state_flush(chat_state *st, char *why, size_t why_size);

/* The incarnation of the server's store the ids belong to ("" when none
 * was recorded), owned by st. */
const char *chat_state_incarnation(const chat_state *st);

/* Records the incarnation and rewrites the file (with every record not yet
 * flushed); errors as chat_state_flush. */
chat_client_err chat_state_set_incarnation(chat_state *st, const char *incarnation, char *why,
                                           size_t why_size);

#endif
