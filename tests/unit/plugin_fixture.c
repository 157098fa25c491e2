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

bool plugin_fixture_open(struct plugin_fixture *fx, const char *const *opts)
{
    struct mosquitto_opt o[32];
    char *kv[32] = {0};
    int n = 0;
    char *errmsg = NULL;
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
    ok = chat_states_init(&fx->pl);
    if (ok) {
        chat_broker_set_test(&fx->pl, true, false, NULL);
        /* The broker sends ticks: nothing runs the tick's work from client
         * events. */
        chat_tick_set_seen(&fx->pl);
    } else {
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
    chat_states_free(&fx->pl);
    chat_store_close(fx->pl.store);
    fx->pl.store = NULL;
    chat_config_free(&fx->pl.cfg);
    if (fx->dir[0]) {
        plugin_rm_tree(fx->dir);
        fx->dir[0] = '\0';
    }
}

chat_err plugin_append(chat_store *st, const char *group, const char *from, size_t size,
                       uint64_t *id)
{
    static const char head[] = "{\"id\":", pre[] = ",\"b\":\"", post[] = "\",\"ts\":";
    uint64_t last = 0;
    char next[24], mid[4096];
    chat_err rc = chat_store_head(st, group, &last);
    if (rc != CHAT_OK) {
        return rc;
    }
    /* The id is the store's to give: the group's head + 1 in one process. */
    int digits = snprintf(next, sizeof(next), "%llu", (unsigned long long)last + 1);
    size_t fixed =
        (sizeof(head) - 1) + (size_t)digits + (sizeof(pre) - 1) + (sizeof(post) - 1) + 13 + 1;
    if (size < fixed || size - fixed + sizeof(pre) + sizeof(post) > sizeof(mid)) {
        return CHAT_EINVAL;
    }
    size_t pad = size - fixed, n = 0;
    memcpy(mid, pre, sizeof(pre) - 1);
    n += sizeof(pre) - 1;
    memset(mid + n, 'x', pad);
    n += pad;
    memcpy(mid + n, post, sizeof(post) - 1);
    n += sizeof(post) - 1;
    chat_envelope env = {head, sizeof(head) - 1, mid, n, "}", 1};
    chat_appended out = {0};
    rc = chat_store_append(st, group, from, NULL, &env, &out);
    if (rc == CHAT_OK && out.len != size) {
        rc = CHAT_EINVAL; /* a time of other than 13 digits */
    }
    if (rc == CHAT_OK && id) {
        *id = out.id;
    }
    free(out.env);
    return rc;
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
