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

#define PAGE_BYTES_MAX 268369920u /* 256 MiB less 64 KiB */
#define MAX_PAYLOAD_MAX 44000000u /* 6 x this and the envelope's fields fit in a packet */

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

/* A word of an option that takes one of a few, and what it stands for. */
struct choice {
    const char *word;
    int value;
};

/* Sets *out to the value of s among the n choices; false when s is none
 * of them. */
static bool parse_choice(const char *s, const struct choice *choices, size_t n, int *out)
{
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(s, choices[i].word)) {
            *out = choices[i].value;
            return true;
        }
    }
    return false;
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

static void note_plugin(struct chat_broker_conf *bc, const char *path, const char *self)
{
    char real[PATH_MAX];
    bool ours = self[0] && realpath(path, real) && strcmp(real, self) == 0;
    if (bc->plugins++ == 0 && self[0]) {
        bc->first_is_other = !ours;
    }
    if (!ours) {
        /* dynamic-security and every other plugin may check access and
         * authenticate: assume both. */
        bc->acl = true;
        bc->auth = true;
    }
}

static void unreadable(struct chat_broker_conf *bc, const char *path, int err)
{
    if (bc->readable) {
        bc->readable = false;
        bc->err = err;
        snprintf(bc->unreadable, sizeof(bc->unreadable), "%s", path);
    }
}

static bool is_true(const char *arg)
{
    return !strncmp(arg, "true", 4) && (arg[4] == '\0' || arg[4] == ' ' || arg[4] == '\t');
}

/* Looks at one broker config file (and those it includes) for another
 * access checker and for authentication. */
static void scan_config(const char *path, int depth, struct chat_broker_conf *bc, const char *self)
{
    char line[4096];
    FILE *f = NULL;
    if (depth >= 4) {
        return;
    }
    f = fopen(path, "r");
    if (!f) {
        unreadable(bc, path, errno);
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
        } else if (!strcmp(word, "password_file") || !strcmp(word, "psk_file") ||
                   ((!strcmp(word, "use_identity_as_username") ||
                     !strcmp(word, "use_subject_as_username")) &&
                    is_true(arg))) {
            bc->auth = true;
        } else if (!strcmp(word, "sys_interval")) {
            /* As the broker reads it: a number of seconds, 0 for none (the
             * broker's atoi, without its undefined overflow). */
            long secs = strtol(arg, NULL, 10);
            bc->sys_interval = secs > 0 ? (secs < INT_MAX ? (int)secs : INT_MAX) : 0;
        } else if (!strcmp(word, "per_listener_settings") && is_true(arg)) {
            bc->per_listener = true;
        } else if (!strcmp(word, "plugin") || !strcmp(word, "auth_plugin")) {
            note_plugin(bc, arg, self);
        } else if (!strcmp(word, "include_dir") && arg[0]) {
            DIR *d = opendir(arg);
            struct dirent *e;
            if (!d) {
                unreadable(bc, arg, errno);
            }
            while (d && (e = readdir(d)) != NULL) {
                size_t n = strlen(e->d_name);
                if (n > 5 && !strcmp(e->d_name + n - 5, ".conf")) {
                    char sub[4096 + 256];
                    snprintf(sub, sizeof(sub), "%s/%s", arg, e->d_name);
                    scan_config(sub, depth + 1, bc, self);
                }
            }
            if (d) {
                closedir(d);
            }
        }
    }
    if (ferror(f)) {
        unreadable(bc, path, errno ? errno : EIO);
    }
    (void)fclose(f); /* read only: nothing to lose */
}

chat_acl_check_fn chat_broker_acl_check(void)
{
    /* Not part of the plugin API: upstream builds export only the symbols
     * of src/linker.syms, where this is absent; Debian's (and Ubuntu's)
     * build of 2.0.11 exports every symbol of the broker, this one with the
     * signature of src/security.c, unchanged through 2.0.20. Without it,
     * chat_may_read fails closed. The tests set MOSQUITTO_CHAT_TEST_NO_ACL_CHECK
     * to run as on an upstream build. */
    const char *off = getenv("MOSQUITTO_CHAT_TEST_NO_ACL_CHECK");
    if (off && off[0] == '1') {
        return NULL;
    }
    void *sym = dlsym(RTLD_DEFAULT, "mosquitto_acl_check");
    chat_acl_check_fn fn = NULL;
    memcpy(&fn, &sym, sizeof(fn));
    return fn;
}

bool chat_broker_scan(struct chat_broker_conf *bc)
{
    char args[8192];
    char self[PATH_MAX] = "";

    memset(bc, 0, sizeof(*bc));
    bc->readable = true;
    bc->sys_interval = 10; /* Mosquitto's default */
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f) {
        unreadable(bc, "/proc/self/cmdline", errno);
        return false;
    }
    size_t n = fread(args, 1, sizeof(args) - 1, f);
    (void)fclose(f); /* read only: nothing to lose */
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
        /* No configuration, so no plugin line either: we were loaded some
         * other way (a test harness), alone. */
        return true;
    }
    Dl_info info;
    static const char anchor; /* any object of ours tells dladdr who we are */
    if (dladdr(&anchor, &info) && info.dli_fname && !realpath(info.dli_fname, self)) {
        self[0] = '\0';
    }
    scan_config(conf, 0, bc, self);
    return bc->readable;
}

/* Mosquitto 2.0 gives a plugin no way to ask whether another access checker
 * follows it, yet answering "defer" with none there denies everything, and
 * answering "allow" with one there bypasses it. So read the broker's own
 * configuration, named by -c on its command line, the way the broker does.
 * The broker reads it before it drops privileges and initialises plugins
 * after, so a file only root may read is unreadable here: then nothing
 * proves that no other checker follows, and the plugin defers (fails
 * closed) and assumes usernames are verified. */
void chat_config_apply_broker(struct chat_config *cfg, const struct chat_broker_conf *bc, bool log)
{
    if (log && !bc->readable) {
        mosquitto_log_printf(
            MOSQ_LOG_WARNING,
            "mosquitto-chat: cannot read the broker's configuration \"%s\" (%s) as the user "
            "the broker runs as: assuming another access checker and authentication; "
            "outside the chat topics mosquitto-chat defers every access check, so without "
            "another checker the broker denies them. Make the file readable by that user, "
            "or set plugin_opt_acl",
            bc->unreadable, strerror(bc->err));
    }
    if (log && bc->first_is_other) {
        /* Mosquitto asks access checkers in load order and stops at the
         * first answer: behind another checker we would not see the
         * subscribes that start a catch-up, nor keep acks from subscribers. */
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: another plugin is loaded before mosquitto-chat; "
                             "put mosquitto-chat's plugin line first");
    }
    if (cfg->acl_auto) {
        cfg->acl_mode = (!bc->readable || bc->acl) ? CHAT_ACL_DEFER : CHAT_ACL_ALLOW;
    }
    cfg->names_verified = !bc->readable || bc->auth;
    cfg->sys_interval = bc->sys_interval;
}

int chat_config_parse(struct chat_config *cfg, struct mosquitto_opt *opts, int count)
{
    uint64_t v = 0;
    int choice = 0;
    int rc = MOSQ_ERR_SUCCESS;

    memset(cfg, 0, sizeof(*cfg));
    if (set_string(&cfg->db_path, "mosquitto-chat.db") || set_string(&cfg->topic_prefix, "chat") ||
        set_string(&cfg->store, "leveldb") || set_string(&cfg->pg_conninfo, "")) {
        return MOSQ_ERR_NOMEM;
    }
    cfg->page_size = 100;
    cfg->page_bytes = 262144;
    cfg->page_qos = 0;
    cfg->replay_window = 4;
    cfg->replay_timeout = 10;
    cfg->max_payload = 65536;
    cfg->fsync = CHAT_SYNC_NONE;
    cfg->write_buffer_mb = 32;
    cfg->replay = true;
    cfg->open_groups = true;
    cfg->verify_store = true;
    cfg->acl_mode = CHAT_ACL_AUTO;
    cfg->receipt_interval = 1000;
    cfg->device_expiry_days = 90;

    for (int i = 0; i < count && rc == MOSQ_ERR_SUCCESS; i++) {
        const char *k = opts[i].key;
        const char *val = opts[i].value ? opts[i].value : "";
        if (!strcmp(k, "db_path")) {
            rc = val[0] ? set_string(&cfg->db_path, val) : bad(k, val, "a directory path");
        } else if (!strcmp(k, "store")) {
            rc = !strcmp(val, "leveldb") || !strcmp(val, "postgresql")
                     ? set_string(&cfg->store, val)
                     : bad(k, val, "leveldb or postgresql");
        } else if (!strcmp(k, "pg_conninfo")) {
            rc = set_string(&cfg->pg_conninfo, val);
        } else if (!strcmp(k, "topic_prefix")) {
            if (chat_proto_group_error(val, strlen(val)) != NULL) {
                rc = bad(k, val, "one topic level without / + # $ or control characters");
            } else {
                rc = set_string(&cfg->topic_prefix, val);
            }
        } else if (!strcmp(k, "page_size")) {
            rc = parse_uint(val, 1, 100000, &v) ? (cfg->page_size = v, 0)
                                                : bad(k, val, "an integer from 1 to 100000");
        } else if (!strcmp(k, "page_bytes")) {
            /* A page, with the envelope that may overshoot it and its
             * wrapping, stays under MQTT's 268435455-byte packet limit. */
            rc = parse_uint(val, 1024, PAGE_BYTES_MAX, &v)
                     ? (cfg->page_bytes = v, 0)
                     : bad(k, val, "an integer from 1024 to 268369920");
        } else if (!strcmp(k, "page_qos")) {
            rc = parse_uint(val, 0, 2, &v) ? (cfg->page_qos = (int)v, 0) : bad(k, val, "0, 1 or 2");
        } else if (!strcmp(k, "replay_window")) {
            rc = parse_uint(val, 1, 64, &v) ? (cfg->replay_window = (unsigned)v, 0)
                                            : bad(k, val, "an integer from 1 to 64");
        } else if (!strcmp(k, "replay_timeout")) {
            rc = parse_uint(val, 1, 86400, &v) ? (cfg->replay_timeout = (unsigned)v, 0)
                                               : bad(k, val, "seconds, from 1 to 86400");
        } else if (!strcmp(k, "max_payload")) {
            /* Escaping may make an envelope six times its payload, and
             * one envelope alone must fit in an MQTT packet. */
            rc = parse_uint(val, 16, MAX_PAYLOAD_MAX, &v)
                     ? (cfg->max_payload = v, 0)
                     : bad(k, val, "bytes, from 16 to 44000000");
        } else if (!strcmp(k, "fsync")) {
            static const struct choice c[] = {
                {"none", CHAT_SYNC_NONE}, {"batch", CHAT_SYNC_BATCH}, {"always", CHAT_SYNC_ALWAYS}};
            rc = parse_choice(val, c, 3, &choice) ? (cfg->fsync = (chat_sync)choice, 0)
                                                  : bad(k, val, "none, batch or always");
        } else if (!strcmp(k, "write_buffer_mb")) {
            rc = parse_uint(val, 1, 1024, &v) ? (cfg->write_buffer_mb = (unsigned)v, 0)
                                              : bad(k, val, "MiB, from 1 to 1024");
        } else if (!strcmp(k, "replay")) {
            rc = parse_bool(val, &cfg->replay) ? 0 : bad(k, val, "true or false");
        } else if (!strcmp(k, "open_groups")) {
            rc = parse_bool(val, &cfg->open_groups) ? 0 : bad(k, val, "true or false");
        } else if (!strcmp(k, "verify_store")) {
            rc = parse_bool(val, &cfg->verify_store) ? 0 : bad(k, val, "true or false");
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
        } else if (!strcmp(k, "receipt_interval")) {
            rc = parse_uint(val, 0, 3600000, &v) ? (cfg->receipt_interval = (unsigned)v, 0)
                                                 : bad(k, val, "milliseconds, from 0 to 3600000");
        } else if (!strcmp(k, "device_expiry_days")) {
            rc = parse_uint(val, 0, 1000000, &cfg->device_expiry_days)
                     ? 0
                     : bad(k, val, "a number of days, 0 for never");
        } else if (!strcmp(k, "backup_dir")) {
            rc = val[0] == '/' ? set_string(&cfg->backup_dir, val)
                               : bad(k, val, "an absolute directory path");
        } else if (!strcmp(k, "read_check")) {
            static const struct choice c[] = {{"broker", CHAT_READ_BROKER},
                                              {"members", CHAT_READ_MEMBERS}};
            rc = parse_choice(val, c, 2, &choice)
                     ? (cfg->read_check = (enum chat_read_check)choice, 0)
                     : bad(k, val, "broker or members");
        } else if (!strcmp(k, "acl")) {
            static const struct choice c[] = {
                {"auto", CHAT_ACL_AUTO}, {"allow", CHAT_ACL_ALLOW}, {"defer", CHAT_ACL_DEFER}};
            rc = parse_choice(val, c, 3, &choice) ? (cfg->acl_mode = (enum chat_acl_mode)choice, 0)
                                                  : bad(k, val, "auto, allow or defer");
        } else {
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: unknown option plugin_opt_%s", k);
            rc = MOSQ_ERR_INVAL;
        }
    }
    if (rc == MOSQ_ERR_SUCCESS && !strcmp(cfg->store, "postgresql") && !cfg->pg_conninfo[0]) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: plugin_opt_store postgresql needs "
                                           "plugin_opt_pg_conninfo, a libpq connection string");
        rc = MOSQ_ERR_INVAL;
    }
    if (rc == MOSQ_ERR_SUCCESS && !cfg->admins) {
        rc = parse_admins(cfg, "");
    }
    cfg->acl_auto = cfg->acl_mode == CHAT_ACL_AUTO;
    cfg->prefix_len = strlen(cfg->topic_prefix);
    return rc;
}

void chat_config_free(struct chat_config *cfg)
{
    free(cfg->db_path);
    free(cfg->store);
    free(cfg->pg_conninfo);
    free(cfg->topic_prefix);
    free(cfg->backup_dir);
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

void chat_config_log(const struct chat_config *c, const char *where, bool broker_asked)
{
    static const char *const fsyncs[] = {"none", "batch", "always"};
    char admins[512] = "";
    size_t n = 0;
    for (char **a = c->admins; a && *a && n < sizeof(admins); a++) {
        n += (size_t)snprintf(admins + n, sizeof(admins) - n, "%s%s", n ? "," : "", *a);
    }
    mosquitto_log_printf(
        MOSQ_LOG_INFO,
        "mosquitto-chat: store \"%s\", topics \"%s/<group>\", access checks: %s, history: %s, "
        "members without a username: %s; page_size %zu, page_bytes %zu, page_qos %d, "
        "replay_window %u, replay_timeout %u, max_payload %zu, fsync %s, write_buffer_mb %u, "
        "replay %s, "
        "open_groups %s, admins \"%s\", retention_count %llu, retention_days %llu, "
        "device_expiry_days %llu, backup_dir %s, figures under $SYS every %d s (sys_interval; 0: "
        "none)",
        where, c->topic_prefix,
        c->acl_mode == CHAT_ACL_ALLOW ? "allow outside chat" : "defer to the broker's",
        c->acl_mode == CHAT_ACL_ALLOW        ? "to members"
        : c->read_check == CHAT_READ_MEMBERS ? "to members (plugin_opt_read_check members)"
        : broker_asked                       ? "to members the broker lets read the group"
                                             : "refused (the broker cannot be asked; see "
                                               "plugin_opt_read_check)",
        c->names_verified ? "~<client id>" : "<client id>", c->page_size, c->page_bytes,
        c->page_qos, c->replay_window, c->replay_timeout, c->max_payload,
        fsyncs[c->fsync <= CHAT_SYNC_ALWAYS ? c->fsync : 0], c->write_buffer_mb,
        c->replay ? "true" : "false", c->open_groups ? "true" : "false", admins,
        (unsigned long long)c->retention_count, (unsigned long long)c->retention_days,
        (unsigned long long)c->device_expiry_days,
        c->backup_dir ? c->backup_dir : "(none: backups refused)", c->sys_interval);
}
