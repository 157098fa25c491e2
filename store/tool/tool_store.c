/* tool_store: what every command of mqchat-store shares (see
 * tool_store.h). */
#include "tool_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --store: the backend's name, as plugin_opt_store takes it (NULL: LevelDB). */
static const char *g_backend;

void tool_set_backend(const char *name)
{
    g_backend = name;
}

const char *tool_backend(void)
{
    return g_backend;
}

bool tool_on_postgresql(void)
{
    return g_backend && !strcmp(g_backend, "postgresql");
}

/* How a store is named in messages: a connection string may hold a
 * password, so it is never printed. */
const char *tool_shown(const char *path)
{
    return tool_on_postgresql() ? "(the PostgreSQL database)" : path;
}

chat_store *tool_open_store(const char *path, bool create)
{
    chat_store *st = NULL;
    char *errmsg = NULL;
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    opts.backend = g_backend;
    opts.must_exist = !create;
    chat_err rc = chat_store_open_opts(path, &opts, &st, &errmsg);
    if (rc != CHAT_OK) {
        fprintf(stderr, "mqchat-store: cannot open store \"%s\": %s%s\n", tool_shown(path),
                errmsg ? errmsg : chat_strerror(rc),
                errmsg && strstr(errmsg, "lock") ? " (is the broker running? stop it first)" : "");
        free(errmsg);
        return NULL;
    }
    return st;
}

int tool_store_failed(chat_store *st, const char *what, chat_err rc)
{
    const char *detail = chat_store_last_error(st);
    fprintf(stderr, "mqchat-store: %s: %s%s%s%s\n", what, chat_strerror(rc), detail[0] ? " (" : "",
            detail, detail[0] ? ")" : "");
    return EXIT_FAIL;
}
