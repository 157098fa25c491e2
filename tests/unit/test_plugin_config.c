/* Unit tests of plugin/config.c: every plugin_opt_* option's good and bad
 * values and bounds. (The broker's configuration: test_plugin_access.c.) */
#define _XOPEN_SOURCE 700 /* realpath */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "plugin_fixture.h"
#include "plugin_stubs.h"

static int reset(void **state)
{
    (void)state;
    stub_reset();
    return 0;
}

/* Parses "key=value" options (NULL-terminated) into cfg. */
static int parse(struct chat_config *cfg, const char *const *kv)
{
    struct mosquitto_opt o[16];
    char buf[16][2048];
    int n = 0;
    for (; kv[n]; n++) {
        assert_true(n < 16);
        snprintf(buf[n], sizeof(buf[n]), "%s", kv[n]);
        char *eq = strchr(buf[n], '=');
        o[n].key = buf[n];
        o[n].value = eq ? eq + 1 : NULL;
        if (eq) {
            *eq = '\0';
        }
    }
    return chat_config_parse(cfg, o, n);
}

static void test_defaults(void **state)
{
    struct chat_config cfg;
    (void)state;
    assert_int_equal(chat_config_parse(&cfg, NULL, 0), MOSQ_ERR_SUCCESS);
    assert_string_equal(cfg.db_path, "mosquitto-chat.db");
    assert_string_equal(cfg.topic_prefix, "chat");
    assert_int_equal(cfg.prefix_len, 4);
    assert_int_equal(cfg.page_size, 100);
    assert_int_equal(cfg.page_bytes, 262144);
    assert_int_equal(cfg.page_qos, 0);
    assert_int_equal(cfg.replay_window, 4);
    assert_int_equal(cfg.replay_timeout, 10);
    assert_int_equal(cfg.replay_budget, 1600); /* 4 x replay_window x page_size */
    assert_int_equal(cfg.replay_inflight, 64); /* 16 x replay_window */
    assert_int_equal(cfg.replay_share, 0);
    assert_int_equal(cfg.max_payload, 65536);
    assert_int_equal(cfg.fsync, CHAT_SYNC_NONE);
    assert_int_equal(cfg.write_buffer_mb, 32);
    assert_true(cfg.replay);
    assert_true(cfg.open_groups);
    assert_non_null(cfg.admins);
    assert_null(cfg.admins[0]);
    assert_int_equal(cfg.retention_count, 0);
    assert_int_equal(cfg.retention_days, 0);
    assert_int_equal(cfg.device_expiry_days, 90);
    assert_null(cfg.backup_dir);
    assert_int_equal(cfg.acl_mode, CHAT_ACL_AUTO);
    assert_true(cfg.acl_auto);
    assert_int_equal(cfg.read_check, CHAT_READ_BROKER);
    assert_false(chat_config_is_admin(&cfg, "admin"));
    chat_config_free(&cfg);
}

/* What an accepted option set: the field, read back as a number (strings
 * and lists are checked by name below). */
static uint64_t field(const struct chat_config *cfg, const char *key)
{
    static const struct {
        const char *key;
        size_t off;
        size_t size;
    } fields[] = {
#define F(k, m) {k, offsetof(struct chat_config, m), sizeof(((struct chat_config *)0)->m)}
        F("page_size", page_size),
        F("page_bytes", page_bytes),
        F("page_qos", page_qos),
        F("replay_window", replay_window),
        F("replay_timeout", replay_timeout),
        F("replay_budget", replay_budget),
        F("replay_inflight", replay_inflight),
        F("replay_share", replay_share),
        F("max_payload", max_payload),
        F("fsync", fsync),
        F("write_buffer_mb", write_buffer_mb),
        F("replay", replay),
        F("open_groups", open_groups),
        F("retention_count", retention_count),
        F("retention_days", retention_days),
        F("device_expiry_days", device_expiry_days),
        F("read_check", read_check),
        F("acl", acl_mode),
#undef F
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (!strcmp(fields[i].key, key)) {
            const char *p = (const char *)cfg + fields[i].off;
            switch (fields[i].size) {
            case 1:
                return *(const uint8_t *)p;
            case 4:
                return *(const uint32_t *)p;
            case 8:
                return *(const uint64_t *)p;
            default:
                fail_msg("field %s of size %zu", key, fields[i].size);
            }
        }
    }
    fail_msg("no field %s", key);
    return 0;
}

static void test_numbers_and_words(void **state)
{
    static const struct {
        const char *key, *value;
        bool ok;
        uint64_t want;        /* ok: the field's value */
        const char *expected; /* not ok: what the log line says was expected */
    } cases[] = {
        {"page_size", "1", true, 1, NULL},
        {"page_size", "100000", true, 100000, NULL},
        {"page_size", "007", true, 7, NULL},
        {"page_size", "0", false, 0, "an integer from 1 to 100000"},
        {"page_size", "100001", false, 0, "an integer from 1 to 100000"},
        {"page_size", "-1", false, 0, "an integer from 1 to 100000"},
        {"page_size", "+5", false, 0, "an integer from 1 to 100000"},
        {"page_size", " 5", false, 0, "an integer from 1 to 100000"},
        {"page_size", "5 ", false, 0, "an integer from 1 to 100000"},
        {"page_size", "5x", false, 0, "an integer from 1 to 100000"},
        {"page_size", "0x10", false, 0, "an integer from 1 to 100000"},
        {"page_size", "1e3", false, 0, "an integer from 1 to 100000"},
        {"page_size", "", false, 0, "an integer from 1 to 100000"},
        {"page_size", NULL, false, 0, "an integer from 1 to 100000"},
        {"page_size", "18446744073709551616", false, 0, "an integer from 1 to 100000"},
        {"page_bytes", "1024", true, 1024, NULL},
        {"page_bytes", "268369920", true, 268369920, NULL},
        {"page_bytes", "1023", false, 0, "an integer from 1024 to 268369920"},
        {"page_bytes", "268369921", false, 0, "an integer from 1024 to 268369920"},
        {"page_qos", "0", true, 0, NULL},
        {"page_qos", "2", true, 2, NULL},
        {"page_qos", "3", false, 0, "0, 1 or 2"},
        {"replay_window", "1", true, 1, NULL},
        {"replay_window", "64", true, 64, NULL},
        {"replay_window", "0", false, 0, "an integer from 1 to 64"},
        {"replay_window", "65", false, 0, "an integer from 1 to 64"},
        {"replay_budget", "0", true, 0, NULL},
        {"replay_budget", "1000000", true, 1000000, NULL},
        {"replay_budget", "1000001", false, 0, "messages, from 0 (no bound) to 1000000"},
        {"replay_budget", "-1", false, 0, "messages, from 0 (no bound) to 1000000"},
        {"replay_inflight", "0", true, 0, NULL},
        {"replay_inflight", "1000000", true, 1000000, NULL},
        {"replay_inflight", "1000001", false, 0, "pages, from 0 (no bound) to 1000000"},
        {"replay_inflight", "x", false, 0, "pages, from 0 (no bound) to 1000000"},
        {"replay_share", "0", true, 0, NULL},
        {"replay_share", "1000", true, 1000, NULL},
        {"replay_share", "1001", false, 0, "percent, from 0 to 1000"},
        {"replay_timeout", "1", true, 1, NULL},
        {"replay_timeout", "86400", true, 86400, NULL},
        {"replay_timeout", "0", false, 0, "seconds, from 1 to 86400"},
        {"replay_timeout", "86401", false, 0, "seconds, from 1 to 86400"},
        {"max_payload", "16", true, 16, NULL},
        {"max_payload", "44000000", true, 44000000, NULL},
        {"max_payload", "15", false, 0, "bytes, from 16 to 44000000"},
        {"max_payload", "44000001", false, 0, "bytes, from 16 to 44000000"},
        {"fsync", "none", true, CHAT_SYNC_NONE, NULL},
        {"fsync", "batch", true, CHAT_SYNC_BATCH, NULL},
        {"fsync", "always", true, CHAT_SYNC_ALWAYS, NULL},
        {"fsync", "Always", false, 0, "none, batch or always"},
        {"fsync", "", false, 0, "none, batch or always"},
        {"replay", "false", true, false, NULL},
        {"replay", "true", true, true, NULL},
        {"replay", "1", false, 0, "true or false"},
        {"replay", "TRUE", false, 0, "true or false"},
        {"open_groups", "false", true, false, NULL},
        {"open_groups", "no", false, 0, "true or false"},
        {"retention_count", "0", true, 0, NULL},
        {"retention_count", "9223372036854775807", true, 9223372036854775807ull, NULL},
        {"retention_count", "9223372036854775808", false, 0, "a count of messages, 0 for all"},
        {"retention_days", "0", true, 0, NULL},
        {"retention_days", "1000000", true, 1000000, NULL},
        {"retention_days", "1000001", false, 0, "a number of days, 0 for ever"},
        {"device_expiry_days", "0", true, 0, NULL},
        {"device_expiry_days", "1000000", true, 1000000, NULL},
        {"device_expiry_days", "1000001", false, 0, "a number of days, 0 for never"},
        {"device_expiry_days", "-1", false, 0, "a number of days, 0 for never"},
        {"write_buffer_mb", "1", true, 1, NULL},
        {"write_buffer_mb", "1024", true, 1024, NULL},
        {"write_buffer_mb", "0", false, 0, "MiB, from 1 to 1024"},
        {"write_buffer_mb", "1025", false, 0, "MiB, from 1 to 1024"},
        {"read_check", "broker", true, CHAT_READ_BROKER, NULL},
        {"read_check", "members", true, CHAT_READ_MEMBERS, NULL},
        {"read_check", "Members", false, 0, "broker or members"},
        {"acl", "auto", true, CHAT_ACL_AUTO, NULL},
        {"acl", "allow", true, CHAT_ACL_ALLOW, NULL},
        {"acl", "defer", true, CHAT_ACL_DEFER, NULL},
        {"acl", "deny", false, 0, "auto, allow or defer"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct chat_config cfg;
        char kv[256], line[512];
        const char *opts[2] = {kv, NULL};
        if (cases[i].value) {
            snprintf(kv, sizeof(kv), "%s=%s", cases[i].key, cases[i].value);
        } else {
            snprintf(kv, sizeof(kv), "%s", cases[i].key);
        }
        stub_log_clear();
        int rc = parse(&cfg, opts);
        if (cases[i].ok) {
            if (rc != MOSQ_ERR_SUCCESS) {
                fail_msg("plugin_opt_%s refused", kv);
            }
            if (field(&cfg, cases[i].key) != cases[i].want) {
                fail_msg("plugin_opt_%s gave %llu", kv,
                         (unsigned long long)field(&cfg, cases[i].key));
            }
            assert_int_equal(cfg.acl_auto, cfg.acl_mode == CHAT_ACL_AUTO);
        } else {
            if (rc != MOSQ_ERR_INVAL) {
                fail_msg("plugin_opt_%s accepted", kv);
            }
            snprintf(line, sizeof(line),
                     "mosquitto-chat: invalid value \"%s\" for plugin_opt_%s: expected %s",
                     cases[i].value ? cases[i].value : "", cases[i].key, cases[i].expected);
            if (!stub_log_has(MOSQ_LOG_ERR, line)) {
                fail_msg("no log line \"%s\"", line);
            }
        }
        chat_config_free(&cfg);
    }
}

static void test_strings(void **state)
{
    char p128[160] = "topic_prefix=", p129[160] = "topic_prefix=";
    (void)state;
    memset(p128 + 13, 'p', 128);
    memset(p129 + 13, 'p', 129);
    static const struct {
        const char *kv;
        const char *prefix; /* accepted: the prefix; NULL: refused */
    } prefixes[] = {
        {"topic_prefix=team", "team"}, {"topic_prefix=caf\xc3\xa9", "caf\xc3\xa9"},
        {"topic_prefix=a/b", NULL},    {"topic_prefix=a+b", NULL},
        {"topic_prefix=#", NULL},      {"topic_prefix=$SYS", NULL},
        {"topic_prefix=", NULL},       {"topic_prefix=t\x01", NULL},
        {"topic_prefix=\xc3", NULL},
    };
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        struct chat_config cfg;
        const char *opts[] = {prefixes[i].kv, NULL};
        stub_log_clear();
        int rc = parse(&cfg, opts);
        if (prefixes[i].prefix) {
            assert_int_equal(rc, MOSQ_ERR_SUCCESS);
            assert_string_equal(cfg.topic_prefix, prefixes[i].prefix);
            assert_int_equal(cfg.prefix_len, strlen(prefixes[i].prefix));
        } else {
            assert_int_equal(rc, MOSQ_ERR_INVAL);
            assert_true(stub_log_has(MOSQ_LOG_ERR, "for plugin_opt_topic_prefix: expected one "
                                                   "topic level without / + # $ or control "
                                                   "characters"));
        }
        chat_config_free(&cfg);
    }
    struct chat_config cfg;
    const char *ok128[] = {p128, NULL}, *bad129[] = {p129, NULL};
    assert_int_equal(parse(&cfg, ok128), MOSQ_ERR_SUCCESS);
    assert_int_equal(cfg.prefix_len, 128);
    chat_config_free(&cfg);
    assert_int_equal(parse(&cfg, bad129), MOSQ_ERR_INVAL);
    chat_config_free(&cfg);

    const char *db[] = {"db_path=/var/lib/chat", NULL};
    assert_int_equal(parse(&cfg, db), MOSQ_ERR_SUCCESS);
    assert_string_equal(cfg.db_path, "/var/lib/chat");
    chat_config_free(&cfg);
    const char *db_empty[] = {"db_path=", NULL};
    assert_int_equal(parse(&cfg, db_empty), MOSQ_ERR_INVAL);
    assert_true(stub_log_has(MOSQ_LOG_ERR, "plugin_opt_db_path: expected a directory path"));
    chat_config_free(&cfg);

    const char *backup[] = {"backup_dir=/var/backups/chat", NULL};
    assert_int_equal(parse(&cfg, backup), MOSQ_ERR_SUCCESS);
    assert_string_equal(cfg.backup_dir, "/var/backups/chat");
    chat_config_free(&cfg);
    static const char *const bad_backups[] = {"backup_dir=backups", "backup_dir=", "backup_dir"};
    for (size_t i = 0; i < 3; i++) {
        const char *opts[] = {bad_backups[i], NULL};
        stub_log_clear();
        assert_int_equal(parse(&cfg, opts), MOSQ_ERR_INVAL);
        assert_true(stub_log_has(MOSQ_LOG_ERR, "plugin_opt_backup_dir: expected an absolute "
                                               "directory path"));
        chat_config_free(&cfg);
    }
}

static void test_admins(void **state)
{
    static const struct {
        const char *value;
        const char *want[4]; /* NULL-terminated */
    } cases[] = {
        {"admin", {"admin", NULL}},
        {"a, b ,,c", {"a", "b", "c", NULL}},
        {" a b ", {"a b", NULL}}, /* blanks inside a name stay */
        {"", {NULL}},
        {" , ,", {NULL}},
        {",x,", {"x", NULL}},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct chat_config cfg;
        char kv[64];
        const char *opts[] = {kv, NULL};
        snprintf(kv, sizeof(kv), "admins=%s", cases[i].value);
        assert_int_equal(parse(&cfg, opts), MOSQ_ERR_SUCCESS);
        size_t n = 0;
        for (; cases[i].want[n]; n++) {
            assert_non_null(cfg.admins[n]);
            assert_string_equal(cfg.admins[n], cases[i].want[n]);
            assert_true(chat_config_is_admin(&cfg, cases[i].want[n]));
        }
        assert_null(cfg.admins[n]);
        assert_false(chat_config_is_admin(&cfg, NULL));
        assert_false(chat_config_is_admin(&cfg, ""));
        assert_false(chat_config_is_admin(&cfg, "adm"));
        chat_config_free(&cfg);
    }
}

/* replay_budget unset follows 4 x replay_window x page_size, and
 * replay_inflight 16 x replay_window, in any order of the options; set,
 * each is what it says. */
static void test_replay_budget_auto(void **state)
{
    struct chat_config cfg;
    struct mosquitto_opt a[] = {{.key = "page_size", .value = "1000"},
                                {.key = "replay_window", .value = "2"}};
    struct mosquitto_opt b[] = {{.key = "replay_budget", .value = "7"},
                                {.key = "page_size", .value = "1000"}};
    (void)state;
    assert_int_equal(chat_config_parse(&cfg, a, 2), MOSQ_ERR_SUCCESS);
    assert_int_equal(cfg.replay_budget, 8000);
    assert_int_equal(cfg.replay_inflight, 32);
    chat_config_free(&cfg);
    assert_int_equal(chat_config_parse(&cfg, b, 2), MOSQ_ERR_SUCCESS);
    assert_int_equal(cfg.replay_budget, 7);
    chat_config_free(&cfg);
    struct mosquitto_opt c[] = {{.key = "replay_inflight", .value = "5"},
                                {.key = "replay_window", .value = "8"}};
    assert_int_equal(chat_config_parse(&cfg, c, 2), MOSQ_ERR_SUCCESS);
    assert_int_equal(cfg.replay_inflight, 5);
    chat_config_free(&cfg);
}

static void test_order_and_unknown(void **state)
{
    struct chat_config cfg;
    (void)state;
    /* The last of a repeated option wins, lists too. */
    const char *twice[] = {"page_size=5", "admins=a,b", "page_size=7", "admins=c", NULL};
    assert_int_equal(parse(&cfg, twice), MOSQ_ERR_SUCCESS);
    assert_int_equal(cfg.page_size, 7);
    assert_string_equal(cfg.admins[0], "c");
    assert_null(cfg.admins[1]);
    chat_config_free(&cfg);

    const char *unknown[] = {"page_size=5", "page-size=5", NULL};
    assert_int_equal(parse(&cfg, unknown), MOSQ_ERR_INVAL);
    assert_true(stub_log_has(MOSQ_LOG_ERR, "mosquitto-chat: unknown option plugin_opt_page-size"));
    chat_config_free(&cfg);

    /* A bad option stops the parse; what was read is still freed. */
    const char *stop[] = {"db_path=/x", "admins=a", "replay=maybe", "topic_prefix=late", NULL};
    assert_int_equal(parse(&cfg, stop), MOSQ_ERR_INVAL);
    assert_string_equal(cfg.topic_prefix, "chat");
    chat_config_free(&cfg);
    chat_config_free(&cfg); /* freeing twice is harmless: free zeroes */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, reset),
        cmocka_unit_test_setup(test_numbers_and_words, reset),
        cmocka_unit_test_setup(test_strings, reset),
        cmocka_unit_test_setup(test_admins, reset),
        cmocka_unit_test_setup(test_replay_budget_auto, reset),
        cmocka_unit_test_setup(test_order_and_unknown, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
