/* fuzz_config: plugin options (chat_config_parse) as the broker hands them
 * over from plugin_opt_* lines. The input is one option a line, "key value"
 * (a line without a blank has no value), after a first byte that is not
 * read (it once said what the broker's configuration holds; the seeds keep
 * it). An accepted set must be within every option's bounds; a refused one
 * is logged; either is freed whole (ASan). */
#include <string.h>

#include "fuzz.h"

#define MAX_OPTS 64

static void check_accepted(const struct chat_config *c)
{
    FUZZ_CHECK(c->db_path && c->db_path[0], "db_path");
    FUZZ_CHECK(c->store && (!strcmp(c->store, "leveldb") || !strcmp(c->store, "postgresql")),
               "store \"%s\"", c->store);
    /* PostgreSQL without a connection string is refused, not guessed. */
    FUZZ_CHECK(c->pg_conninfo && (strcmp(c->store, "postgresql") || c->pg_conninfo[0]),
               "pg_conninfo");
    FUZZ_CHECK(c->topic_prefix && c->prefix_len == strlen(c->topic_prefix) &&
                   !chat_proto_group_error(c->topic_prefix, c->prefix_len),
               "topic_prefix \"%s\"", c->topic_prefix);
    FUZZ_CHECK(c->page_size >= 1 && c->page_size <= 100000, "page_size");
    FUZZ_CHECK(c->page_bytes >= 1024 && c->page_bytes <= 268369920, "page_bytes");
    FUZZ_CHECK(c->page_qos >= 0 && c->page_qos <= 2, "page_qos");
    FUZZ_CHECK(c->replay_window >= 1 && c->replay_window <= 64, "replay_window");
    FUZZ_CHECK(c->replay_timeout >= 1 && c->replay_timeout <= 86400, "replay_timeout");
    FUZZ_CHECK(c->max_payload >= 16 && c->max_payload <= 44000000, "max_payload");
    FUZZ_CHECK(c->retention_count <= UINT64_MAX / 2 && c->retention_days <= 1000000, "retention");
    FUZZ_CHECK(c->device_expiry_days <= 1000000, "device_expiry_days");
    FUZZ_CHECK(!c->backup_dir || c->backup_dir[0] == '/', "backup_dir \"%s\"", c->backup_dir);
    FUZZ_CHECK(c->admins, "admins");
    for (char **a = c->admins; *a; a++) {
        FUZZ_CHECK((*a)[0] && (*a)[0] != ' ' && (*a)[strlen(*a) - 1] != ' ' && !strchr(*a, ','),
                   "admin \"%s\"", *a);
        FUZZ_CHECK(chat_config_is_admin(c, *a), "admin \"%s\" not found", *a);
    }
    FUZZ_CHECK(c->acl_auto == (c->acl_mode == CHAT_ACL_AUTO), "acl_auto");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mosquitto_opt opts[MAX_OPTS];
    int n = 0;
    if (size == 0) {
        return 0;
    }
    char *text = malloc(size);
    FUZZ_CHECK(text, "out of memory");
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    /* The broker's options are C strings: a NUL ends the text. */
    for (char *line = text, *next = NULL; line && *line && n < MAX_OPTS; line = next) {
        next = strchr(line, '\n');
        if (next) {
            *next++ = '\0';
        }
        char *blank = strchr(line, ' ');
        if (blank) {
            *blank = '\0';
        }
        opts[n].key = line;
        opts[n].value = blank ? blank + 1 : NULL;
        n++;
    }
    stub_reset();
    struct chat_config cfg;
    int rc = chat_config_parse(&cfg, opts, n);
    if (rc == MOSQ_ERR_SUCCESS) {
        check_accepted(&cfg);
    } else {
        FUZZ_CHECK(rc == MOSQ_ERR_INVAL || rc == MOSQ_ERR_NOMEM, "rc %d", rc);
        FUZZ_CHECK(rc != MOSQ_ERR_INVAL || stub_log_has(MOSQ_LOG_ERR, "plugin_opt_"),
                   "refused without a log line naming the option");
    }
    chat_config_free(&cfg);
    free(text);
    return 0;
}
