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
 * opened or read, or check found problems, or the input of import is bad,
 * or the command is not offered for the store, 2 usage. Errors go to
 * stderr.
 *
 * Export format, one JSON object per line (docs/protocol.md, "Operating"):
 *   {"type":"group","group":g,"head":h,"first":f,"incarnation":i}
 *   {"type":"member","member":m,"joined":j}          every member
 *   {"type":"message","id":n,"envelope":{...}}       ids first..head
 *   {"type":"cursor","member":m,"device":d,"acked":a,"used":ms}
 * Import takes the same lines (several groups one after another), into
 * groups the target store does not have yet; ids, memberships, cursors and
 * cids come out as they were exported. */
#include "chat_store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 1000u
#define EXIT_FAIL 1
#define EXIT_USAGE 2

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
    "Exit status: 0 success, 1 failure (or problems found by check), 2 usage.\n";

/* --store: the backend's name, as plugin_opt_store takes it (NULL: LevelDB). */
static const char *g_backend;

static bool on_postgresql(void)
{
    return g_backend && !strcmp(g_backend, "postgresql");
}

/* How a store is named in messages: a connection string may hold a
 * password, so it is never printed. */
static const char *shown(const char *path)
{
    return on_postgresql() ? "(the PostgreSQL database)" : path;
}

static int usage(void)
{
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

static chat_store *open_store(const char *path)
{
    chat_store *st = NULL;
    char *errmsg = NULL;
    chat_store_opts opts = CHAT_STORE_OPTS_INIT;
    opts.backend = g_backend;
    chat_err rc = chat_store_open_opts(path, &opts, &st, &errmsg);
    if (rc != CHAT_OK) {
        fprintf(stderr, "mqchat-store: cannot open store \"%s\": %s%s\n", shown(path),
                errmsg ? errmsg : chat_strerror(rc),
                errmsg && strstr(errmsg, "lock") ? " (is the broker running? stop it first)" : "");
        free(errmsg);
        return NULL;
    }
    return st;
}

static int store_failed(chat_store *st, const char *what, chat_err rc)
{
    const char *detail = chat_store_last_error(st);
    fprintf(stderr, "mqchat-store: %s: %s%s%s%s\n", what, chat_strerror(rc), detail[0] ? " (" : "",
            detail, detail[0] ? ")" : "");
    return EXIT_FAIL;
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
    chat_store *st = open_store(path);
    if (!st) {
        return EXIT_FAIL;
    }
    chat_err rc = chat_store_check(st, print_problem, NULL, &groups, &problems);
    if (rc != CHAT_OK) {
        store_failed(st, "check", rc);
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

static int put_message(void *ctx, uint64_t id, const char *data, size_t len)
{
    uint64_t *last = ctx;
    printf("{\"type\":\"message\",\"id\":%" PRIu64 ",\"envelope\":", id);
    fwrite(data, 1, len, stdout);
    fputs("}\n", stdout);
    *last = id;
    return 0;
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
    uint64_t head = 0, first = 1, after = 0;
    bool done = false, more = true;
    struct member_list members = {0};
    chat_err rc;
    int status = 0;
    chat_store *st = open_store(path);
    if (!st) {
        return EXIT_FAIL;
    }
    if ((rc = chat_store_head(st, group, &head)) != CHAT_OK ||
        (rc = chat_store_first(st, group, &first)) != CHAT_OK) {
        status = store_failed(st, "reading the group", rc);
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
    while (rc == CHAT_OK && more) {
        uint64_t last = after;
        rc = chat_store_scan_forward(st, group, after, PAGE, SIZE_MAX / 2, put_message, &last,
                                     &more);
        if (last == after) {
            break;
        }
        after = last;
    }
    for (size_t i = 0; rc == CHAT_OK && i < members.n; i++) {
        struct device_walk w = {members.names[i]};
        rc = chat_store_member_devices(st, group, members.names[i], SIZE_MAX / 2, put_cursor, &w,
                                       &done);
    }
    if (rc != CHAT_OK) {
        status = store_failed(st, "export", rc);
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
 * import
 * ========================================================================= */

struct pending_member {
    char *member;
    uint64_t joined;
};

struct import {
    chat_store *st;
    char group[CHAT_STORE_MAX_NAME + 1]; /* "" before the first group line */
    uint64_t head;                       /* of the group being imported */
    struct pending_member *members;      /* not added yet, sorted by joined */
    size_t n, cap, next;
    int64_t used; /* the clock of the cursor being written */
    unsigned long line;
};

static int64_t import_clock(void *ctx)
{
    return ((struct import *)ctx)->used;
}

/* An exported envelope as a template for chat_store_append: the bytes
 * around its id (which leads it, as the plugin writes every envelope) and
 * around its "ts" value. False when it has no such shape. */
static bool split_envelope(const char *text, chat_envelope *tpl)
{
    static const char lead[] = "{\"id\":", ts_key[] = ",\"ts\":";
    const char *p = text + sizeof(lead) - 1, *t;
    if (strncmp(text, lead, sizeof(lead) - 1) != 0) {
        return false;
    }
    tpl->head = text;
    tpl->head_len = sizeof(lead) - 1;
    p += strspn(p, "0123456789");
    if (!(t = strstr(p, ts_key))) {
        return false;
    }
    t += sizeof(ts_key) - 1;
    tpl->mid = p;
    tpl->mid_len = (size_t)(t - p);
    t += strspn(t, "0123456789");
    tpl->tail = t;
    tpl->tail_len = strlen(t);
    return true;
}

static int bad_line(struct import *im, const char *why)
{
    fprintf(stderr, "mqchat-store: import: line %lu: %s\n", im->line, why);
    return EXIT_FAIL;
}

static bool json_u64(const cJSON *o, const char *name, uint64_t *out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsNumber(f) || f->valuedouble < 0 || f->valuedouble > 9007199254740991.0 ||
        f->valuedouble != (double)(uint64_t)f->valuedouble) {
        return false;
    }
    *out = (uint64_t)f->valuedouble;
    return true;
}

static const char *json_str(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(f) ? f->valuestring : NULL;
}

static int by_joined(const void *a, const void *b)
{
    const struct pending_member *x = a, *y = b;
    return x->joined < y->joined ? -1 : x->joined > y->joined;
}

/* Adds the members who joined at or before the head (all: up_to
 * UINT64_MAX). */
static chat_err add_members(struct import *im, uint64_t up_to)
{
    if (im->next == 0 && im->n > 1) {
        qsort(im->members, im->n, sizeof(*im->members), by_joined);
    }
    while (im->next < im->n && im->members[im->next].joined <= up_to) {
        chat_err rc = chat_store_member_add(im->st, im->group, im->members[im->next].member, NULL);
        if (rc != CHAT_OK) {
            return rc;
        }
        im->next++;
    }
    return CHAT_OK;
}

static void members_clear(struct import *im)
{
    for (size_t i = 0; i < im->n; i++) {
        free(im->members[i].member);
    }
    im->n = im->next = 0;
}

/* The end of a group's lines: whoever joined after its last message. */
static chat_err end_group(struct import *im)
{
    chat_err rc = im->group[0] ? add_members(im, UINT64_MAX) : CHAT_OK;
    members_clear(im);
    return rc;
}

static int import_line(struct import *im, const cJSON *o)
{
    const char *type = json_str(o, "type");
    chat_err rc = CHAT_OK;
    if (!type) {
        return bad_line(im, "no \"type\"");
    }
    if (!strcmp(type, "group")) {
        const char *g = json_str(o, "group");
        uint64_t head = 0, first = 1, now = 0;
        if (!g || !g[0] || strlen(g) > CHAT_STORE_MAX_NAME || !json_u64(o, "head", &head) ||
            !json_u64(o, "first", &first) || first == 0 || first > head + 1) {
            return bad_line(im,
                            "a group line needs group, head and first (1 <= first <= head + 1)");
        }
        if ((rc = end_group(im)) != CHAT_OK) {
            return store_failed(im->st, "adding members", rc);
        }
        if ((rc = chat_store_head(im->st, g, &now)) != CHAT_OK) {
            return store_failed(im->st, "reading the group", rc);
        }
        if (now != 0) {
            fprintf(stderr, "mqchat-store: import: group %s is in the store already\n", g);
            return EXIT_FAIL;
        }
        snprintf(im->group, sizeof(im->group), "%s", g);
        if ((rc = chat_store_group_init(im->st, g, first - 1)) != CHAT_OK) {
            return store_failed(im->st, "starting the group", rc);
        }
        im->head = first - 1;
        return 0;
    }
    if (!im->group[0]) {
        return bad_line(im, "a group line must come first");
    }
    if (!strcmp(type, "member")) {
        const char *m = json_str(o, "member");
        uint64_t joined = 0;
        if (!m || !m[0] || !json_u64(o, "joined", &joined)) {
            return bad_line(im, "a member line needs member and joined");
        }
        if (im->n == im->cap) {
            size_t cap = im->cap ? 2 * im->cap : 64;
            struct pending_member *n = realloc(im->members, cap * sizeof(*n));
            if (!n) {
                return bad_line(im, "out of memory");
            }
            im->members = n;
            im->cap = cap;
        }
        if (!(im->members[im->n].member = strdup(m))) {
            return bad_line(im, "out of memory");
        }
        im->members[im->n++].joined = joined;
        return 0;
    }
    if (!strcmp(type, "message")) {
        uint64_t id = 0;
        const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "envelope");
        if (!json_u64(o, "id", &id) || !cJSON_IsObject(env)) {
            return bad_line(im, "a message line needs id and an envelope object");
        }
        if (id != im->head + 1) {
            return bad_line(im, "message ids must follow each other from first");
        }
        if ((rc = add_members(im, im->head)) != CHAT_OK) {
            return store_failed(im->st, "adding members", rc);
        }
        char *text = cJSON_PrintUnformatted(env);
        const char *from = json_str(env, "from");
        const char *cid = json_str(env, "cid");
        uint64_t ts = 0;
        chat_envelope tpl;
        chat_appended ap;
        if (!text) {
            return bad_line(im, "out of memory");
        }
        if (!json_u64(env, "ts", &ts) || !split_envelope(text, &tpl)) {
            cJSON_free(text);
            return bad_line(im, "an envelope must begin {\"id\":...} and hold \"ts\"");
        }
        /* The store fills in the id (head + 1, which is this one) and its
         * clock's time: the envelope's own. */
        im->used = (int64_t)ts;
        chat_store_set_clock(im->st, import_clock, im);
        rc = chat_store_append(im->st, im->group, from ? from : "", cid, &tpl, &ap);
        chat_store_set_clock(im->st, NULL, NULL);
        cJSON_free(text);
        free(ap.env);
        if (rc != CHAT_OK) {
            return store_failed(im->st, "appending a message", rc);
        }
        if (ap.duplicate || ap.id != id) {
            return bad_line(im, "a message repeats an earlier cid, or its id does not follow");
        }
        im->head = id;
        return 0;
    }
    if (!strcmp(type, "cursor")) {
        const char *m = json_str(o, "member"), *d = json_str(o, "device");
        uint64_t acked = 0, used = 0;
        if (!m || !d || !json_u64(o, "acked", &acked) || !json_u64(o, "used", &used)) {
            return bad_line(im, "a cursor line needs member, device, acked and used");
        }
        if ((rc = add_members(im, UINT64_MAX)) != CHAT_OK) {
            return store_failed(im->st, "adding members", rc);
        }
        /* The cursor keeps its last use: the store stamps it with its clock. */
        im->used = (int64_t)used;
        chat_store_set_clock(im->st, import_clock, im);
        rc = chat_store_cursor_advance(im->st, im->group, m, d, acked, NULL);
        chat_store_set_clock(im->st, NULL, NULL);
        if (rc != CHAT_OK) {
            return store_failed(im->st, "writing a cursor", rc);
        }
        return 0;
    }
    return bad_line(im, "unknown type");
}

static int cmd_import(const char *path)
{
    struct import im = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = 0;

    if (on_postgresql()) {
        /* Its appends take the database server's time, not the
         * envelope's: an import would restamp every message. */
        fputs("mqchat-store: import into a PostgreSQL store is not offered (the database's "
              "clock would restamp every message): import into a LevelDB store, or restore "
              "the database with PostgreSQL's tools (pg_restore, a base backup)\n",
              stderr);
        return EXIT_FAIL;
    }
    if (!(im.st = open_store(path))) {
        return EXIT_FAIL;
    }
    while (status == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
        im.line++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
            line[--n] = '\0';
        }
        if (n == 0) {
            continue;
        }
        cJSON *o = cJSON_ParseWithLength(line, (size_t)n);
        status = cJSON_IsObject(o) ? import_line(&im, o) : bad_line(&im, "not a JSON object");
        cJSON_Delete(o);
    }
    if (status == 0 && ferror(stdin)) {
        fprintf(stderr, "mqchat-store: reading stdin: %s\n", strerror(errno));
        status = EXIT_FAIL;
    }
    if (status == 0) {
        chat_err rc = end_group(&im);
        if (rc != CHAT_OK) {
            status = store_failed(im.st, "adding members", rc);
        }
    }
    members_clear(&im);
    free(im.members);
    free(line);
    chat_store_close(im.st);
    return status;
}

/* ===========================================================================
 * repair, compact
 * ========================================================================= */

static int cmd_repair(const char *path)
{
    char *errmsg = NULL;
    chat_err rc = chat_store_repair(path, g_backend, &errmsg);
    if (rc != CHAT_OK) {
        fprintf(stderr, "mqchat-store: cannot repair \"%s\": %s\n", shown(path),
                errmsg ? errmsg : chat_strerror(rc));
        free(errmsg);
        return EXIT_FAIL;
    }
    chat_store *st = open_store(path);
    if (!st) {
        return EXIT_FAIL;
    }
    printf("repaired %s: new incarnation %s; run 'mqchat-store check %s'\n", path,
           chat_store_incarnation(st), path);
    chat_store_close(st);
    return 0;
}

static int cmd_compact(const char *path)
{
    uint64_t before = 0, after = 0;
    chat_store *st = open_store(path);
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
        int status = store_failed(st, "compact", rc);
        chat_store_close(st);
        return status;
    }
    printf("compacted %s: about %" PRIu64 " bytes before, %" PRIu64 " after\n", shown(path), before,
           after);
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
            g_backend = argv[2];
            argv += 2;
            argc -= 2;
        } else if (!strncmp(argv[1], "--store=", 8)) {
            g_backend = argv[1] + 8;
            argv++;
            argc--;
        } else {
            return usage();
        }
        if (strcmp(g_backend, "leveldb") != 0 && strcmp(g_backend, "postgresql") != 0) {
            fprintf(stderr, "mqchat-store: --store is leveldb or postgresql, not \"%s\"\n",
                    g_backend);
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
        return cmd_import(path);
    }
    if (!strcmp(cmd, "repair") && argc == 3) {
        return cmd_repair(path);
    }
    if (!strcmp(cmd, "compact") && argc == 3) {
        return cmd_compact(path);
    }
    return usage();
}
