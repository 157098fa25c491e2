/* aclfile: Mosquitto's acl_file, read the way the broker reads it, so that
 * the plugin can tell whether the broker would let a client read a chat
 * topic where the broker gives it no way to ask (upstream builds of 2.0
 * export no access check to plugins).
 *
 * The rules are the broker's own (src/security_default.c in 2.0, the
 * acl-file plugin in 2.1): `user <name>` opens a section, `topic
 * [read|write|readwrite|deny] <filter>` lines belong to the section they are
 * in (before any `user` line: to clients without a username), `pattern`
 * lines (with %c and %u) apply to every client; "deny" lines are tried
 * first within each list; the first line whose filter matches decides;
 * nothing matching denies. A file the broker would refuse is refused here
 * too, with the broker's reason.
 *
 * Ownership: chat_aclfile_load returns a value the caller frees with
 * chat_aclfile_free. Threading: none; read-only after load.
 */
#ifndef CHAT_ACLFILE_H
#define CHAT_ACLFILE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct chat_aclfile chat_aclfile;

/* Reads the acl_file at path. On success returns the rules; on failure
 * returns NULL and writes a reason (the broker's, with the line number where
 * there is one) into why[0..why_len). */
chat_aclfile *chat_aclfile_load(const char *path, char *why, size_t why_len);

/* Frees what chat_aclfile_load returned. Accepts NULL. */
void chat_aclfile_free(chat_aclfile *a);

/* Whether the rules let a client (username NULL: none) with client_id do
 * access (MOSQ_ACL_READ or MOSQ_ACL_WRITE) on topic, a concrete topic. */
bool chat_aclfile_allows(const chat_aclfile *a, const char *username, const char *client_id,
                         const char *topic, int access);

#endif
