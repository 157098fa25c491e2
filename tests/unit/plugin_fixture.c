/* plugin_fixture.c: a plugin on a real store in a temporary directory (see
 * plugin_fixture.h). */
#include "plugin_fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void plugin_rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        return;
    }
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            char child[4096];
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
                continue;
            }
            snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
            plugin_rm_tree(child);
        }
        if (d) {
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

bool plugin_fixture_open(struct plugin_fixture *fx, const char *const *opts,
                         const struct chat_broker_conf *bc)
{
    struct mosquitto_opt o[32];
    char *kv[32] = {0};
    int n = 0;
    char *errmsg = NULL;
    struct chat_broker_conf alone = {.readable = true};
    bool ok = false;

    memset(fx, 0, sizeof(*fx));
    for (; opts && opts[n]; n++) {
        if (n == 32 || !(kv[n] = strdup(opts[n]))) {
            fprintf(stderr, "plugin_fixture: too many options or out of memory\n");
            goto done;
        }
        char *eq = strchr(kv[n], '=');
        o[n].key = kv[n];
        o[n].value = eq ? eq + 1 : NULL;
        if (eq) {
            *eq = '\0';
        }
    }
    if (chat_config_parse(&fx->pl.cfg, o, n) != MOSQ_ERR_SUCCESS) {
        fprintf(stderr, "plugin_fixture: options refused\n");
        goto done;
    }
    chat_config_apply_broker(&fx->pl.cfg, bc ? bc : &alone, false);
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/chat_plugin_test.XXXXXX");
    if (!mkdtemp(fx->dir)) {
        perror("plugin_fixture: mkdtemp");
        fx->dir[0] = '\0';
        goto done;
    }
    chat_store_opts so = CHAT_STORE_OPTS_INIT;
    so.sync = fx->pl.cfg.fsync;
    if (chat_store_open_opts(fx->dir, &so, &fx->pl.store, &errmsg) != CHAT_OK) {
        fprintf(stderr, "plugin_fixture: cannot open a store in %s: %s\n", fx->dir,
                errmsg ? errmsg : "?");
        free(errmsg);
        goto done;
    }
    /* The broker sends ticks: nothing runs the chores from client events. */
    fx->pl.ticks_seen = true;
    ok = chat_peers_init(&fx->pl) && chat_replay_init(&fx->pl);
    if (!ok) {
        fprintf(stderr, "plugin_fixture: out of memory\n");
    }

done:
    for (int i = 0; i < 32; i++) {
        free(kv[i]);
    }
    if (!ok) {
        plugin_fixture_close(fx);
    }
    return ok;
}

void plugin_fixture_close(struct plugin_fixture *fx)
{
    chat_replay_free_all(&fx->pl);
    chat_peers_free(&fx->pl);
    chat_admin_free(&fx->pl);
    free(fx->pl.last_env);
    fx->pl.last_env = NULL;
    chat_store_close(fx->pl.store);
    fx->pl.store = NULL;
    chat_config_free(&fx->pl.cfg);
    if (fx->dir[0]) {
        plugin_rm_tree(fx->dir);
        fx->dir[0] = '\0';
    }
}

struct mosquitto plugin_client(const char *id, const char *username)
{
    struct mosquitto c = {.id = id,
                          .username = username,
                          .clean_session = true,
                          .protocol_version = 5,
                          .address = "127.0.0.1"};
    return c;
}
