/* mqchat-store: the offline tool for a mosquitto-chat store. A LevelDB
 * store belongs to a stopped broker (LevelDB lets one process open a store
 * at a time, so a running broker's store is refused, never read under it);
 * a PostgreSQL store (--store postgresql, <db> a libpq connection string)
 * is a database that brokers may be using meanwhile.
 *
 *   mqchat-store check   <db>          verify every group; problems on stdout
 *   mqchat-store export  <db> <group>  the group as JSON lines on stdout
 *   mqchat-store import  <db>          JSON lines from stdin into new groups
 *   mqchat-store repair  <db>          LevelDB's RepairDB, then a new incarnation
 *   mqchat-store compact <db>          a full compaction
 *
 * On PostgreSQL: check reads the whole database from one snapshot (brokers
 * may run); export reads a group in several calls (a group that receives
 * messages meanwhile comes out with them); compact is VACUUM (ANALYZE);
 * import is refused (the database's clock would restamp every message) and
 * so is repair (PostgreSQL's own tools repair a database).
 *
 * Exit status: 0 success (check: no problem found), 1 the store cannot be
 * opened or read (a path without a store included: only import creates
 * one), or export's group is not in it, or check found problems, or the
 * input of import is bad, or the command is not offered for the store,
 * 2 usage, 3 repair done but table files it could not read went to lost/
 * with what they held. Errors go to stderr.
 *
 * Export format, one JSON object per line (docs/protocol.md, "Operating"):
 *   {"type":"group","group":g,"head":h,"first":f,"incarnation":i}
 *   {"type":"member","member":m,"joined":j}          every member
 *   {"type":"message","id":n,"envelope":{...}}       ids first..head; a
 *                          recalled message's tombstone with "cid":c before
 *                          "envelope" when it was stored with one
 *   {"type":"cursor","member":m,"device":d,"acked":a,"used":ms}
 * Import takes the same lines (several groups one after another), into
 * groups the target store does not have yet; ids, memberships, cursors and
 * cids come out as they were exported, and the changes of messages
 * (recalls and edits: tombstones, edited versions and the messages that
 * carry them) are checked to pair up (tool_import.c). */
#include "chat_store.h"
#include "tool_import.h"
#include "tool_store.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PAGE 1000u

static const char *usage_text =
    "Usage: mqchat-store [--store leveldb|postgresql] <command> <db> [<group>]\n"
    "  check <db>           verify every group of the store\n"
    "  export <db> <group>  print the group as JSON lines\n"
    "  import <db>          read JSON lines (of export) from stdin (LevelDB only)\n"
    "  repair <db>          repair a damaged store, new incarnation (LevelDB only)\n"
    "  compact <db>         compact the store (PostgreSQL: VACUUM)\n"
    "\n"
    "LevelDB (the default): <db> is plugin_opt_db_path, and the broker that uses\n"
    "the store must be stopped. PostgreSQL: <db> is plugin_opt_pg_conninfo (a libpq\n"
    "connection string); check reads one snapshot and may run while brokers do.\n"
    "Exit status: 0 success, 1 failure (or problems found by check), 2 usage,\n"
    "3 repair done, but table files it could not read went to <db>/lost.\n";

static int usage(void)
{
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

/* ===========================================================================
 * check
 * ========================================================================= */

static void print_problem(void *ctx, const char *group, const char *problem)
{
    (void)ctx;
    if (group[0]) {
        printf("group %s: %s\n", group, problem);
    } else {
        printf("store: %s\n", problem);
    }
}

static int cmd_check(const char *path)
{
    uint64_t groups = 0, problems = 0;
    chat_store *st = tool_open_store(path, false);
    if (!st) {
        return EXIT_FAIL;
    }
    chat_err rc = chat_store_check(st, print_problem, NULL, &groups, &problems);
    if (rc != CHAT_OK) {
        tool_store_failed(st, "check", rc);
        chat_store_close(st);
        return EXIT_FAIL;
    }
    printf("%" PRIu64 " groups checked, %" PRIu64 " problems\n", groups, problems);
    chat_store_close(st);
    return problems ? EXIT_FAIL : 0;
}

/* ===========================================================================
 * export
 * ========================================================================= */

static void put_json_string(const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *t = j ? cJSON_PrintUnformatted(j) : NULL;
    fputs(t ? t : "\"\"", stdout);
    cJSON_free(t);
    cJSON_Delete(j);
}

static int put_member(void *ctx, const char *member, uint64_t joined)
{
    (void)ctx;
    fputs("{\"type\":\"member\",\"member\":", stdout);
    put_json_string(member);
    printf(",\"joined\":%" PRIu64 "}\n", joined);
    return 0;
}

/* Whether an envelope is a recalled message's tombstone (protocol v1.2),
 * which no longer names its cid. */
static bool is_tombstone(const char *data, size_t len)
{
    bool yes = false;
    if (strstr(data, "\"recalled\"")) {
        cJSON *o = cJSON_ParseWithLength(data, len);
        yes = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "recalled"));
        cJSON_Delete(o);
    }
    return yes;
}

/* One message line. A tombstone's cid, which stays taken while the
 * message is kept (cid-reserved), goes on the line beside the envelope, so
 * that an import keeps it taken too. */
static chat_err put_message(chat_store *st, const char *group, const chat_msg *m)
{
    char *cid = NULL;
    bool found = false;
    chat_err rc = CHAT_OK;
    if (is_tombstone(m->data, m->len)) {
        rc = chat_store_cid_of(st, group, m->id, &cid, &found);
    }
    printf("{\"type\":\"message\",\"id\":%" PRIu64, m->id);
    if (found) {
        fputs(",\"cid\":", stdout);
        put_json_string(cid);
    }
    fputs(",\"envelope\":", stdout);
    (void)fwrite(m->data, 1, m->len, stdout); /* ferror(stdout) is checked at the end */
    fputs("}\n", stdout);
    free(cid);
    return rc;
}

struct device_walk {
    const char *member;
};

static int put_cursor(void *ctx, const char *device, uint64_t acked, int64_t used)
{
    struct device_walk *w = ctx;
    fputs("{\"type\":\"cursor\",\"member\":", stdout);
    put_json_string(w->member);
    fputs(",\"device\":", stdout);
    put_json_string(device);
    printf(",\"acked\":%" PRIu64 ",\"used\":%" PRId64 "}\n", acked, used);
    return 0;
}

/* The members, one run at a time, each run's names kept for the cursors. */
struct member_list {
    char **names;
    size_t n, cap;
};

static int collect_member(void *ctx, const char *member, uint64_t joined)
{
    struct member_list *l = ctx;
    (void)joined;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **n = realloc(l->names, cap * sizeof(*n));
        if (!n) {
            return 1;
        }
        l->names = n;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(member))) {
        return 1;
    }
    l->n++;
    return 0;
}

static void member_list_free(struct member_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->names[i]);
    }
    free(l->names);
}

static int cmd_export(const char *path, const char *group)
{
    uint64_t head = 0, first = 1, after = 0, nmembers = 0;
    bool done = false, more = true;
    struct member_list members = {0};
    chat_err rc;
    int status = 0;
    chat_store *st = tool_open_store(path, false);
    if (!st) {
        return EXIT_FAIL;
    }
    if ((rc = chat_store_head(st, group, &head)) != CHAT_OK ||
        (rc = chat_store_first(st, group, &first)) != CHAT_OK ||
        (head == 0 && (rc = chat_store_member_count(st, group, &nmembers)) != CHAT_OK)) {
        status = tool_store_failed(st, "reading the group", rc);
        goto out;
    }
    /* A group is there once it has a message or a member: anything else
     * would come out as an empty group that import then creates. */
    if (head == 0 && nmembers == 0) {
        fprintf(stderr, "mqchat-store: export: no group \"%s\" in %s\n", group, tool_shown(path));
        status = EXIT_FAIL;
        goto out;
    }
    fputs("{\"type\":\"group\",\"group\":", stdout);
    put_json_string(group);
    printf(",\"head\":%" PRIu64 ",\"first\":%" PRIu64 ",\"incarnation\":\"%s\"}\n", head, first,
           chat_store_incarnation(st));
    /* All members first: an import adds each at its joined id among the
     * messages. */
    rc = chat_store_group_members(st, group, NULL, SIZE_MAX / 2, collect_member, &members, &done);
    if (rc == CHAT_OK && !done) {
        rc = CHAT_ENOMEM;
    }
    for (size_t i = 0; rc == CHAT_OK && i < members.n; i++) {
        uint64_t joined = 0;
        bool found = false;
        rc = chat_store_member_get(st, group, members.names[i], &joined, &found);
        if (rc == CHAT_OK && found) {
            put_member(NULL, members.names[i], joined);
        }
    }
    after = first > 0 ? first - 1 : 0;
    /* A page at a time, each written after its read: a tombstone's line
     * asks the store for its cid, which a scan's callback may not. */
    while (rc == CHAT_OK && more) {
        chat_page *page = NULL;
        rc = chat_store_read_forward(st, group, after, PAGE, SIZE_MAX / 2, &page);
        if (rc != CHAT_OK) {
            break;
        }
        for (size_t i = 0; rc == CHAT_OK && i < page->count; i++) {
            rc = put_message(st, group, &page->msgs[i]);
            after = page->msgs[i].id;
        }
        more = rc == CHAT_OK && page->more && page->count > 0;
        chat_page_destroy(page);
    }
    for (size_t i = 0; rc == CHAT_OK && i < members.n; i++) {
        struct device_walk w = {members.names[i]};
        rc = chat_store_member_devices(st, group, members.names[i], SIZE_MAX / 2, put_cursor, &w,
                                       &done);
    }
    if (rc != CHAT_OK) {
        status = tool_store_failed(st, "export", rc);
    } else if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "mqchat-store: writing stdout: %s\n", strerror(errno));
        status = EXIT_FAIL;
    }
out:
    member_list_free(&members);
    chat_store_close(st);
    return status;
}

/* ===========================================================================
 * repair, compact
 * ========================================================================= */

/* The table files (.ldb, .sst) in path/lost, and their bytes: where
 * LevelDB's repair moves a table it cannot read, with every record in it.
 * (It archives the logs it replayed and the old manifests there too: those
 * lose nothing.) Bounded by the directory's entries. */
static void lost_tables(const char *path, size_t *files, uint64_t *bytes)
{
    char dir[4096], file[8192];
    *files = 0;
    *bytes = 0;
    snprintf(dir, sizeof(dir), "%s/lost", path);
    DIR *d = opendir(dir);
    if (!d) {
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        struct stat sb;
        if (n < 5 ||
            (strcmp(e->d_name + n - 4, ".ldb") != 0 && strcmp(e->d_name + n - 4, ".sst") != 0)) {
            continue;
        }
        snprintf(file, sizeof(file), "%s/%s", dir, e->d_name);
        if (stat(file, &sb) == 0) {
            (*files)++;
            *bytes += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
}

static int cmd_repair(const char *path)
{
    char *errmsg = NULL;
    size_t lost_before = 0, lost_after = 0;
    uint64_t bytes_before = 0, bytes_after = 0;
    lost_tables(path, &lost_before, &bytes_before);
    chat_err rc = chat_store_repair(path, tool_backend(), &errmsg);
    if (rc != CHAT_OK) {
        fprintf(stderr, "mqchat-store: cannot repair \"%s\": %s\n", tool_shown(path),
                errmsg ? errmsg : chat_strerror(rc));
        free(errmsg);
        return EXIT_FAIL;
    }
    chat_store *st = tool_open_store(path, false);
    if (!st) {
        return EXIT_FAIL;
    }
    printf("repaired %s: new incarnation %s; run 'mqchat-store check %s'\n", path,
           chat_store_incarnation(st), path);
    chat_store_close(st);
    lost_tables(path, &lost_after, &bytes_after);
    if (lost_after > lost_before) {
        /* check reads what is left: it cannot see what went with these. */
        fprintf(stderr,
                "mqchat-store: repair could not read %zu table file(s) (%llu bytes) and moved "
                "them to %s/lost: the messages, members and cursors they held are gone, and "
                "'check' cannot tell which; a group whose newest ids were there gives them again "
                "(the new incarnation tells clients to start over). Restore a backup if you have "
                "one.\n",
                lost_after - lost_before, (unsigned long long)(bytes_after - bytes_before),
                tool_shown(path));
        return EXIT_LOST;
    }
    return 0;
}

static int cmd_compact(const char *path)
{
    uint64_t before = 0, after = 0;
    chat_store *st = tool_open_store(path, false);
    if (!st) {
        return EXIT_FAIL;
    }
    chat_err rc = chat_store_stats(st, NULL, &before);
    if (rc == CHAT_OK) {
        rc = chat_store_compact(st);
    }
    if (rc == CHAT_OK) {
        rc = chat_store_stats(st, NULL, &after);
    }
    if (rc != CHAT_OK) {
        int status = tool_store_failed(st, "compact", rc);
        chat_store_close(st);
        return status;
    }
    printf("compacted %s: about %" PRIu64 " bytes before, %" PRIu64 " after\n", tool_shown(path),
           before, after);
    chat_store_close(st);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(usage_text, stdout);
        return 0;
    }
    while (argc >= 3 && !strncmp(argv[1], "--store", 7)) {
        if (!strcmp(argv[1], "--store")) {
            tool_set_backend(argv[2]);
            argv += 2;
            argc -= 2;
        } else if (!strncmp(argv[1], "--store=", 8)) {
            tool_set_backend(argv[1] + 8);
            argv++;
            argc--;
        } else {
            return usage();
        }
        const char *backend = tool_backend();
        if (strcmp(backend, "leveldb") != 0 && strcmp(backend, "postgresql") != 0) {
            fprintf(stderr, "mqchat-store: --store is leveldb or postgresql, not \"%s\"\n",
                    backend);
            return EXIT_USAGE;
        }
    }
    if (argc < 3) {
        return usage();
    }
    const char *cmd = argv[1], *path = argv[2];
    if (!strcmp(cmd, "check") && argc == 3) {
        return cmd_check(path);
    }
    if (!strcmp(cmd, "export") && argc == 4) {
        return cmd_export(path, argv[3]);
    }
    if (!strcmp(cmd, "import") && argc == 3) {
        return tool_import(path);
    }
    if (!strcmp(cmd, "repair") && argc == 3) {
        return cmd_repair(path);
    }
    if (!strcmp(cmd, "compact") && argc == 3) {
        return cmd_compact(path);
    }
    return usage();
}
