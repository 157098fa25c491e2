/* config.c: plugin_opt_* options, read once in mosquitto_plugin_init. A bad
 * value stops the broker at start with a log line naming the option. */
#include "plugin.h"
#include "push.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_BYTES_MAX 268369920u /* 256 MiB less 64 KiB */
#define MAX_PAYLOAD_MAX 44000000u /* 6 x this and the envelope's fields fit in a packet */
/* replay_budget unset: four times one device's full window (4 x
 * replay_window x page_size messages, 1,600 by default) per pass of the
 * broker's loop, over all devices. A lone catch-up then never waits for a
 * turn, so it goes as fast as without a budget; a storm adds a few
 * milliseconds to each pass (docs/scaling.md, "Reconnect storms") instead of
 * a page for every device. One window (400) made the 1,000-device storm of
 * bench/run load catch up four times slower than without a budget. */
#define REPLAY_BUDGET_WINDOWS 4u
#define REPLAY_BUDGET_AUTO UINT_MAX
#define REPLAY_BUDGET_MAX 1000000u
/* replay_inflight unset: sixteen devices' full windows (64 pages by
 * default) unacked over all devices, beyond each device's first page. A
 * lone catch-up, and a few together, keep their whole window; a storm of
 * many devices sends each one page at a time. With four pages in flight
 * for each of 200 devices a steady client's p99 round trip during the
 * storm of bench/run load was twice what it was with one
 * (docs/benchmarks.md, "Pages in flight over all devices"). */
#define REPLAY_INFLIGHT_WINDOWS 16u
#define REPLAY_INFLIGHT_AUTO UINT_MAX
#define REPLAY_INFLIGHT_MAX 1000000u

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
    cfg->replay_budget = REPLAY_BUDGET_AUTO;
    cfg->replay_inflight = REPLAY_INFLIGHT_AUTO;
    /* 0: a pass carries replay_budget messages and no more. A share counts
     * the broker's delivery of the pages of the pass before as "the rest of
     * the pass", so each pass could allow the next a larger one: no bound
     * (bench/run load's storm: a steady client's p99 26 ms with the budget
     * alone, docs/benchmarks.md). */
    cfg->replay_share = 0;
    cfg->max_payload = 65536;
    cfg->fsync = CHAT_SYNC_NONE;
    cfg->write_buffer_mb = 32;
    cfg->replay = true;
    cfg->open_groups = true;
    cfg->verify_store = true;
    cfg->acl_mode = CHAT_ACL_AUTO;
    cfg->receipt_interval = 1000;
    cfg->device_expiry_days = 90;
    cfg->recall_seconds = 120;
    cfg->edit_seconds = 900;

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
        } else if (!strcmp(k, "replay_budget")) {
            rc = parse_uint(val, 0, REPLAY_BUDGET_MAX, &v)
                     ? (cfg->replay_budget = (unsigned)v, 0)
                     : bad(k, val, "messages, from 0 (no bound) to 1000000");
        } else if (!strcmp(k, "replay_inflight")) {
            rc = parse_uint(val, 0, REPLAY_INFLIGHT_MAX, &v)
                     ? (cfg->replay_inflight = (unsigned)v, 0)
                     : bad(k, val, "pages, from 0 (no bound) to 1000000");
        } else if (!strcmp(k, "replay_share")) {
            rc = parse_uint(val, 0, 1000, &v) ? (cfg->replay_share = (unsigned)v, 0)
                                              : bad(k, val, "percent, from 0 to 1000");
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
        } else if (!strcmp(k, "recall_seconds") || !strcmp(k, "edit_seconds")) {
            /* A year at most: a window that long is as good as none. */
            rc = parse_uint(val, 0, 31536000, &v)
                     ? (*(k[0] == 'r' ? &cfg->recall_seconds : &cfg->edit_seconds) = (unsigned)v, 0)
                     : bad(k, val, "seconds, from 0 (off) to 31536000");
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
        } else if (chat_push_is_option(k)) {
            /* push.c reads its own (chat_push_init) */
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
    if (cfg->replay_budget == REPLAY_BUDGET_AUTO) {
        uint64_t window = (uint64_t)REPLAY_BUDGET_WINDOWS * cfg->replay_window * cfg->page_size;
        cfg->replay_budget = (unsigned)(window < REPLAY_BUDGET_MAX ? window : REPLAY_BUDGET_MAX);
    }
    if (cfg->replay_inflight == REPLAY_INFLIGHT_AUTO) {
        cfg->replay_inflight = REPLAY_INFLIGHT_WINDOWS * cfg->replay_window;
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

void chat_config_log(const struct chat_config *c, const char *where)
{
    static const char *const fsyncs[] = {"none", "batch", "always"};
    static const char *const acls[] = {"auto", "allow", "defer"};
    char admins[512] = "";
    size_t n = 0;
    for (char **a = c->admins; a && *a && n < sizeof(admins); a++) {
        n += (size_t)snprintf(admins + n, sizeof(admins) - n, "%s%s", n ? "," : "", *a);
    }
    mosquitto_log_printf(
        MOSQ_LOG_INFO,
        "mosquitto-chat: store \"%s\", topics \"%s/<group>\", acl %s, read_check %s, "
        "members without a username: %s; page_size %zu, page_bytes %zu, page_qos %d, "
        "replay_window %u, replay_budget %u, replay_inflight %u, replay_share %u, "
        "replay_timeout %u, max_payload %zu, "
        "fsync %s, "
        "write_buffer_mb %u, "
        "replay %s, "
        "open_groups %s, admins \"%s\", retention_count %llu, retention_days %llu, "
        "device_expiry_days %llu, recall_seconds %u, edit_seconds %u, backup_dir %s, figures "
        "under $SYS every %d s (sys_interval; 0: none)",
        where, c->topic_prefix, acls[c->acl_mode <= CHAT_ACL_DEFER ? c->acl_mode : 0],
        c->read_check == CHAT_READ_MEMBERS ? "members" : "broker",
        c->tilde_names ? "~<client id>" : "<client id>", c->page_size, c->page_bytes, c->page_qos,
        c->replay_window, c->replay_budget, c->replay_inflight, c->replay_share, c->replay_timeout,
        c->max_payload, fsyncs[c->fsync <= CHAT_SYNC_ALWAYS ? c->fsync : 0], c->write_buffer_mb,
        c->replay ? "true" : "false", c->open_groups ? "true" : "false", admins,
        (unsigned long long)c->retention_count, (unsigned long long)c->retention_days,
        (unsigned long long)c->device_expiry_days, c->recall_seconds, c->edit_seconds,
        c->backup_dir ? c->backup_dir : "(none: backups refused)", c->sys_interval);
}
