/* tool_import: mqchat-store import (see tool_import.h). */
#include "tool_import.h"
#include "tool_store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

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
            return tool_store_failed(im->st, "adding members", rc);
        }
        if ((rc = chat_store_head(im->st, g, &now)) != CHAT_OK) {
            return tool_store_failed(im->st, "reading the group", rc);
        }
        if (now != 0) {
            fprintf(stderr, "mqchat-store: import: group %s is in the store already\n", g);
            return EXIT_FAIL;
        }
        snprintf(im->group, sizeof(im->group), "%s", g);
        if ((rc = chat_store_group_init(im->st, g, first - 1)) != CHAT_OK) {
            return tool_store_failed(im->st, "starting the group", rc);
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
            return tool_store_failed(im->st, "adding members", rc);
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
            return tool_store_failed(im->st, "appending a message", rc);
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
            return tool_store_failed(im->st, "adding members", rc);
        }
        /* The cursor keeps its last use: the store stamps it with its clock. */
        im->used = (int64_t)used;
        chat_store_set_clock(im->st, import_clock, im);
        rc = chat_store_cursor_advance(im->st, im->group, m, d, acked, NULL);
        chat_store_set_clock(im->st, NULL, NULL);
        if (rc != CHAT_OK) {
            return tool_store_failed(im->st, "writing a cursor", rc);
        }
        return 0;
    }
    return bad_line(im, "unknown type");
}

int tool_import(const char *path)
{
    struct import im = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = 0;

    if (tool_on_postgresql()) {
        /* Its appends take the database server's time, not the
         * envelope's: an import would restamp every message. */
        fputs("mqchat-store: import into a PostgreSQL store is not offered (the database's "
              "clock would restamp every message): import into a LevelDB store, or restore "
              "the database with PostgreSQL's tools (pg_restore, a base backup)\n",
              stderr);
        return EXIT_FAIL;
    }
    if (!(im.st = tool_open_store(path))) {
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
            status = tool_store_failed(im.st, "adding members", rc);
        }
    }
    members_clear(&im);
    free(im.members);
    free(line);
    chat_store_close(im.st);
    return status;
}
