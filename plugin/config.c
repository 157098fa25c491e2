/* config.c: plugin_opt_* options, read once in mosquitto_plugin_init. A bad
 * value stops the broker at start with a log line naming the option. */
#define _GNU_SOURCE /* dladdr */
#include "plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(const char *name, const char *value, const char *expected)
{
    mosquitto_log_printf(MOSQ_LOG_ERR,
                         "mosquitto-chat: invalid value \"%s\" for plugin_opt_%s: expected %s",
                         value, name, expected);
    return MOSQ_ERR_INVAL;
}

static bool parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end = NULL;
    if (!s || !isdigit((unsigned char)s[0])) {
        return false;
    }
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi) {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    if (!strcmp(s, "true")) {
        *out = true;
    } else if (!strcmp(s, "false")) {
        *out = false;
    } else {
        return false;
    }
    return true;
}

static int set_string(char **dst, const char *value)
{
    char *s = strdup(value);
    if (!s) {
        return MOSQ_ERR_NOMEM;
    }
    free(*dst);
    *dst = s;
    return MOSQ_ERR_SUCCESS;
}

static void free_admins(char **admins)
{
    if (!admins) {
        return;
    }
    for (char **a = admins; *a; a++) {
        free(*a);
    }
    free(admins);
}

/* Splits a comma-separated list, trimming blanks; empty items are skipped. */
static int parse_admins(struct chat_config *cfg, const char *value)
{
    size_t n = 1;
    for (const char *p = value; *p; p++) {
        n += *p == ',';
    }
    char **list = calloc(n + 1, sizeof(*list));
    if (!list) {
        return MOSQ_ERR_NOMEM;
    }
    size_t k = 0;
    const char *p = value;
    while (*p) {
        while (*p == ' ' || *p == ',') {
            p++;
        }
        const char *start = p;
        while (*p && *p != ',') {
            p++;
        }
        const char *end = p;
        while (end > start && end[-1] == ' ') {
            end--;
        }
        if (end > start) {
            list[k] = strndup(start, (size_t)(end - start));
            if (!list[k]) {
                free_admins(list);
                return MOSQ_ERR_NOMEM;
            }
            k++;
        }
    }
    free_admins(cfg->admins);
    cfg->admins = list;
    return MOSQ_ERR_SUCCESS;
}

/* What the broker's configuration says about other access checkers. */
struct broker_conf {
    int plugins;         /* plugin and auth_plugin lines, ours included */
    bool acl;            /* an acl_file */
    bool first_is_other; /* another plugin is loaded before ours */
    char self[PATH_MAX]; /* our own shared object, resolved */
};

static void note_plugin(struct broker_conf *bc, const char *path)
{
    char real[PATH_MAX];
    if (bc->plugins++ == 0 && bc->self[0]) {
        bc->first_is_other = !realpath(path, real) || strcmp(real, bc->self) != 0;
    }
}

/* Looks at one broker config file (and those it includes) for another
 * access checker: an acl_file, or a second plugin. */
static void scan_config(const char *path, int depth, struct broker_conf *bc)
{
    char line[4096];
    FILE *f = depth < 4 ? fopen(path, "r") : NULL;
    if (!f) {
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        char *p = line;
        while (*p == ' ' || *p == '\t') {
            p++;
        }
        char word[64];
        char arg[4096];
        arg[0] = '\0';
        if (sscanf(p, "%63s %4095[^\r\n]", word, arg) < 1 || word[0] == '#') {
            continue;
        }
        if (!strcmp(word, "acl_file")) {
            bc->acl = true;
        } else if (!strcmp(word, "plugin") || !strcmp(word, "auth_plugin")) {
            note_plugin(bc, arg);
        } else if (!strcmp(word, "include_dir") && arg[0]) {
            DIR *d = opendir(arg);
            struct dirent *e;
            while (d && (e = readdir(d)) != NULL) {
                size_t n = strlen(e->d_name);
                if (n > 5 && !strcmp(e->d_name + n - 5, ".conf")) {
                    char sub[4096 + 256];
                    snprintf(sub, sizeof(sub), "%s/%s", arg, e->d_name);
                    scan_config(sub, depth + 1, bc);
                }
            }
            if (d) {
                closedir(d);
            }
        }
    }
    fclose(f);
}

/* Mosquitto 2.0 gives a plugin no way to ask whether another access checker
 * follows it, yet answering "defer" with none there denies everything, and
 * answering "allow" with one there bypasses it. So read the broker's own
 * configuration, named by -c on its command line, the way the broker does. */
static enum chat_acl_mode detect_acl_mode(void)
{
    char args[8192];
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) {
        return CHAT_ACL_DEFER;
    }
    size_t n = fread(args, 1, sizeof(args) - 1, f);
    fclose(f);
    args[n] = '\0';
    const char *conf = NULL;
    for (size_t i = 0; i < n;) {
        const char *a = args + i;
        size_t len = strlen(a);
        if ((!strcmp(a, "-c") || !strcmp(a, "--config-file")) && i + len + 1 < n) {
            conf = a + len + 1;
        }
        i += len + 1;
    }
    if (!conf) {
        return CHAT_ACL_ALLOW;
    }
    struct broker_conf bc = {0};
    Dl_info self;
    static const char anchor; /* any object of ours tells dladdr who we are */
    if (dladdr(&anchor, &self) && self.dli_fname && !realpath(self.dli_fname, bc.self)) {
        bc.self[0] = '\0';
    }
    scan_config(conf, 0, &bc);
    if (bc.first_is_other) {
        /* Mosquitto asks access checkers in load order and stops at the
         * first answer: behind another checker we would not see the
         * subscribes that start a catch-up, nor keep acks from subscribers. */
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: another plugin is loaded before mosquitto-chat; "
                             "put mosquitto-chat's plugin line first");
    }
    return (bc.acl || bc.plugins > 1) ? CHAT_ACL_DEFER : CHAT_ACL_ALLOW;
}

int chat_config_parse(struct chat_config *cfg, struct mosquitto_opt *opts, int count)
{
    uint64_t v = 0;
    int rc = MOSQ_ERR_SUCCESS;

    memset(cfg, 0, sizeof(*cfg));
    if (set_string(&cfg->db_path, "mosquitto-chat.db") || set_string(&cfg->topic_prefix, "chat")) {
        return MOSQ_ERR_NOMEM;
    }
    cfg->page_size = 100;
    cfg->page_bytes = 262144;
    cfg->page_qos = 0;
    cfg->replay_window = 4;
    cfg->replay_timeout = 10;
    cfg->max_payload = 65536;
    cfg->fsync = CHAT_SYNC_NONE;
    cfg->replay = true;
    cfg->open_groups = true;
    cfg->acl_mode = CHAT_ACL_AUTO;

    for (int i = 0; i < count && rc == MOSQ_ERR_SUCCESS; i++) {
        const char *k = opts[i].key;
        const char *val = opts[i].value ? opts[i].value : "";
        if (!strcmp(k, "db_path")) {
            rc = val[0] ? set_string(&cfg->db_path, val) : bad(k, val, "a directory path");
        } else if (!strcmp(k, "topic_prefix")) {
            if (chat_group_check(val, strlen(val)) != NULL) {
                rc = bad(k, val, "one topic level without / + # $ or control characters");
            } else {
                rc = set_string(&cfg->topic_prefix, val);
            }
        } else if (!strcmp(k, "page_size")) {
            rc = parse_uint(val, 1, 100000, &v) ? (cfg->page_size = v, 0)
                                                : bad(k, val, "an integer from 1 to 100000");
        } else if (!strcmp(k, "page_bytes")) {
            rc = parse_uint(val, 1024, 256u << 20, &v)
                     ? (cfg->page_bytes = v, 0)
                     : bad(k, val, "an integer from 1024 to 268435456");
        } else if (!strcmp(k, "page_qos")) {
            rc = parse_uint(val, 0, 2, &v) ? (cfg->page_qos = (int)v, 0) : bad(k, val, "0, 1 or 2");
        } else if (!strcmp(k, "replay_window")) {
            rc = parse_uint(val, 1, 64, &v) ? (cfg->replay_window = (unsigned)v, 0)
                                            : bad(k, val, "an integer from 1 to 64");
        } else if (!strcmp(k, "replay_timeout")) {
            rc = parse_uint(val, 1, 86400, &v) ? (cfg->replay_timeout = (unsigned)v, 0)
                                               : bad(k, val, "seconds, from 1 to 86400");
        } else if (!strcmp(k, "max_payload")) {
            rc = parse_uint(val, 16, 256u << 20, &v) ? (cfg->max_payload = v, 0)
                                                     : bad(k, val, "bytes, from 16 to 268435456");
        } else if (!strcmp(k, "fsync")) {
            if (!strcmp(val, "none")) {
                cfg->fsync = CHAT_SYNC_NONE;
            } else if (!strcmp(val, "batch")) {
                cfg->fsync = CHAT_SYNC_BATCH;
            } else if (!strcmp(val, "always")) {
                cfg->fsync = CHAT_SYNC_ALWAYS;
            } else {
                rc = bad(k, val, "none, batch or always");
            }
        } else if (!strcmp(k, "replay")) {
            rc = parse_bool(val, &cfg->replay) ? 0 : bad(k, val, "true or false");
        } else if (!strcmp(k, "open_groups")) {
            rc = parse_bool(val, &cfg->open_groups) ? 0 : bad(k, val, "true or false");
        } else if (!strcmp(k, "admins")) {
            rc = parse_admins(cfg, val);
        } else if (!strcmp(k, "retention_count")) {
            rc = parse_uint(val, 0, UINT64_MAX / 2, &cfg->retention_count)
                     ? 0
                     : bad(k, val, "a count of messages, 0 for all");
        } else if (!strcmp(k, "retention_days")) {
            rc = parse_uint(val, 0, 1000000, &cfg->retention_days)
                     ? 0
                     : bad(k, val, "a number of days, 0 for ever");
        } else if (!strcmp(k, "acl")) {
            if (!strcmp(val, "auto")) {
                cfg->acl_mode = CHAT_ACL_AUTO;
            } else if (!strcmp(val, "allow")) {
                cfg->acl_mode = CHAT_ACL_ALLOW;
            } else if (!strcmp(val, "defer")) {
                cfg->acl_mode = CHAT_ACL_DEFER;
            } else {
                rc = bad(k, val, "auto, allow or defer");
            }
        } else {
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: unknown option plugin_opt_%s", k);
            rc = MOSQ_ERR_INVAL;
        }
    }
    if (rc == MOSQ_ERR_SUCCESS && !cfg->admins) {
        rc = parse_admins(cfg, "");
    }
    if (rc == MOSQ_ERR_SUCCESS && cfg->acl_mode == CHAT_ACL_AUTO) {
        cfg->acl_mode = detect_acl_mode();
    }
    cfg->prefix_len = strlen(cfg->topic_prefix);
    return rc;
}

void chat_config_free(struct chat_config *cfg)
{
    free(cfg->db_path);
    free(cfg->topic_prefix);
    free_admins(cfg->admins);
    memset(cfg, 0, sizeof(*cfg));
}

bool chat_config_is_admin(const struct chat_config *cfg, const char *username)
{
    if (!username || !cfg->admins) {
        return false;
    }
    for (char **a = cfg->admins; *a; a++) {
        if (!strcmp(*a, username)) {
            return true;
        }
    }
    return false;
}
