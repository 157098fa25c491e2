/* admin.h: private to the admin commands' three files, each calling only
 * those after it:
 *   admin.c        the dispatch, the listings (groups, members) and stats
 *   admin_jobs.c   delete, compact and backup, and the work they leave to
 *                  the tick
 *   admin_entry.c  the entries they answer with, and the fields they share
 * The rest of the plugin sees only the chat_admin_* functions of plugin.h.
 * Every function here runs on the broker's thread and appends exactly one
 * entry to r->out, an error entry included. */
#ifndef CHAT_ADMIN_H
#define CHAT_ADMIN_H

#include "plugin.h"

#include <cjson/cJSON.h>

/* admin_entry.c */

/* Opens r's entry: {"command":<r->cmd>, then "group" when group is not NULL
 * and "correlationData" when the command had one; the caller writes the
 * rest and the closing brace. */
void chat_admin_entry_start(const struct chat_admin_req *r, const char *group);

/* Appends a whole error entry {..., "error":why} (group may be NULL) and
 * logs it at debug level: a refusal is the client's business. why is not
 * kept. */
void chat_admin_fail(const struct chat_admin_req *r, const char *group, const char *why);

/* True when rc is CHAT_OK; otherwise logs the store's error and appends a
 * "storage error" entry. */
bool chat_admin_storage_ok(const struct chat_admin_req *r, const char *group, chat_err rc);

/* c's required "group" field, validated and copied into buf (of
 * CHAT_GROUP_MAX + 1 bytes), which it returns; NULL, with an error entry
 * appended, when it is missing or not a valid group name. */
const char *chat_admin_group_field(const struct chat_admin_req *r, const cJSON *c, char *buf);

/* admin_jobs.c: deletions queued for the tick (for stats). */
size_t chat_admin_deletions(const struct chat_plugin *pl);

/* admin_jobs.c: the commands that change the store, each answering c for
 * r, an admin (chat_admin_run checked). delete removes the group's records
 * in bounded steps (the first in the request, the rest from
 * chat_admin_tick); compact and backup start a store job, which
 * chat_admin_tick watches. */
void chat_admin_delete(const struct chat_admin_req *r, const cJSON *c);
void chat_admin_compact(const struct chat_admin_req *r);
void chat_admin_backup(const struct chat_admin_req *r);

#endif
