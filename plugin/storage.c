/* storage.c: the plugin's store: opened at start, and opened again when a
 * full disk has room once more.
 *
 * LevelDB keeps a write error until the database is reopened, and so does
 * the store (invariant 5 of chat_store.h). A disk that filled up is the one
 * such error that mends itself: while it lasts, publishes are refused with
 * "storage error" and every read goes on (catch-up, fetch, history); once
 * the filesystem has CHAT_ROOM_BYTES free again the chores close the store
 * and open it anew, without the broker restarting. Any other write error
 * stays until the broker restarts. A disk already full at start does not
 * stop the broker either: the plugin runs without a store (every store call
 * fails, see chat_store_close) until it can open it. */
#include "plugin.h"

#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#define ROOM_BYTES (16u << 20) /* free space that lets the store reopen */
#define RETRY_S 2              /* seconds between two looks at the disk */

static bool disk_full(const char *why)
{
    return why && strstr(why, "No space left on device") != NULL;
}

static bool shared(const struct chat_plugin *pl)
{
    return !strcmp(pl->cfg.store, "postgresql");
}

const char *chat_storage_where(const struct chat_plugin *pl)
{
    /* The connection string may hold a password: it is never logged. */
    return shared(pl) ? "in PostgreSQL" : pl->cfg.db_path;
}

chat_err chat_storage_open(struct chat_plugin *pl, char **errmsg)
{
    chat_store_opts so = CHAT_STORE_OPTS_INIT;
    so.sync = pl->cfg.fsync;
    so.backend = pl->cfg.store;
    /* Tests fake a reboot (see chat_store_recovered) with another boot id. */
    so.boot_id = getenv("MOSQUITTO_CHAT_TEST_BOOT_ID");
    chat_err rc = chat_store_open_opts(shared(pl) ? pl->cfg.pg_conninfo : pl->cfg.db_path, &so,
                                       &pl->store, errmsg);
    /* Device cursors are stamped with the plugin's clock (a test may shift
     * it: see chat_clock_init). */
    chat_store_set_clock(pl->store, chat_store_clock, NULL);
    if (rc != CHAT_OK && errmsg && disk_full(*errmsg)) {
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             "mosquitto-chat: cannot open store \"%s\": %s; running without it "
                             "(publishes refused) until the disk has room",
                             pl->cfg.db_path, *errmsg);
        free(*errmsg);
        *errmsg = NULL;
        pl->store = NULL;
        pl->disk_full = true;
        return CHAT_OK;
    }
    return rc;
}

void chat_storage_failed(struct chat_plugin *pl, const char *why)
{
    if (!pl->disk_full && disk_full(why)) {
        pl->disk_full = true;
        mosquitto_log_printf(MOSQ_LOG_ERR,
                             "mosquitto-chat: the disk of \"%s\" is full: publishes are refused "
                             "until it has room again; reads go on",
                             pl->cfg.db_path);
    }
}

void chat_storage_chores(struct chat_plugin *pl, time_t now)
{
    struct statvfs fs;
    char *errmsg = NULL;

    if (!pl->disk_full || now < pl->disk_next_look || shared(pl)) {
        return;
    }
    pl->disk_next_look = now + RETRY_S;
    if (statvfs(pl->cfg.db_path, &fs) != 0 ||
        (uint64_t)fs.f_bavail * fs.f_frsize < (uint64_t)ROOM_BYTES) {
        return;
    }
    /* Room again: LevelDB forgets its write error only when reopened. */
    chat_store_close(pl->store);
    pl->store = NULL;
    chat_err rc = chat_storage_open(pl, &errmsg);
    if (rc != CHAT_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: cannot open store \"%s\" again: %s",
                             pl->cfg.db_path, errmsg ? errmsg : chat_strerror(rc));
        free(errmsg);
        return;
    }
    if (pl->store) {
        pl->disk_full = false;
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: store \"%s\" open again: publishing resumes",
                             pl->cfg.db_path);
    }
}
