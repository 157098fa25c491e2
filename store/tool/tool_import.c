/* tool_import: mqchat-store import (see tool_import.h).
 *
 * All or nothing: the input is read twice. The first pass (dry) writes
 * nothing: it runs every line through the checks of the second, and the
 * ones the store would make (names within CHAT_STORE_MAX_NAME, a cid once
 * per sender in a group, no group already in the store or twice in the
 * input). Only a clean first pass starts the second, which writes. Before,
 * a bad line N left its group half-written (its head, members, the
 * messages before N), and the corrected input was then refused: "group is
 * in the store already". The input is read from stdin again when it is a
 * file, else from a copy spooled in a temporary file by the first pass.
 *
 * Every line is held to what the broker itself would have stored (issue
 * 21, item 9), with the protocol's own code (proto/): a line is UTF-8 and
 * strict JSON; a group's name passes chat_proto_group_error, members pass
 * chat_proto_member_error and devices chat_proto_device_error; an envelope
 * has the plugin's shape (chat_proto_envelope_error) with the id of its
 * line and the group of its lines; joined and acked are at most the
 * group's head, a member comes once and a cursor's member is on a member
 * line before it. The envelope is stored as its line holds it, byte for
 * byte (the store fills in the same id and time): reading it into cJSON
 * and printing it again would change a \u0000 or a long number in it. */
#include "tool_import.h"
#include "tool_store.h"

#include "chat_proto.h"
#include "chat_proto_envelope.h"

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
    unsigned long line;
};

/* Dry: a cursor line's member, checked against the group's member lines
 * at the group's end. */
struct seen_cursor {
    char *member;
    unsigned long line;
};

/* A (sender, cid) of the group being checked, with the line it is on. */
struct seen_cid {
    char *key; /* "<length of from>:<from><cid>": no two pairs share one */
    unsigned long line;
};

/* A change of a message (protocol v1.2) seen in the group being checked:
 * a message that holds a new version, or one that carries a change. */
enum change_kind {
    CHANGE_RECALLED = 1, /* the message is a tombstone */
    CHANGE_EDITED,       /* the message is an edited version */
    CHANGE_RECALL,       /* a message recalls id */
    CHANGE_EDIT,         /* a message edits id */
    CHANGE_EDIT_RECALLED /* a message carried an edit of id, rewritten by its recall */
};

struct change_note {
    uint64_t id; /* the message changed */
    enum change_kind kind;
    unsigned long line;
};

struct import {
    chat_store *st;
    bool dry;      /* the first pass: check only */
    char **groups; /* dry: the groups of the input so far */
    size_t ngroups, groups_cap;
    struct seen_cid *cids; /* dry: of the group being checked */
    size_t ncids, cids_cap;
    struct seen_cursor *curs; /* dry: of the group being checked */
    size_t ncurs, curs_cap;
    struct change_note *changes; /* dry: of the group being checked */
    size_t nchanges, changes_cap;
    uint64_t first;                      /* of the group being checked */
    const char *text, *text_end;         /* the line being read */
    char group[CHAT_STORE_MAX_NAME + 1]; /* "" before the first group line */
    uint64_t head;                       /* of the group being imported */
    uint64_t line_head;                  /* what its group line says the head is */
    struct pending_member *members;      /* not added yet, sorted by joined */
    size_t n, cap, next;
    int64_t used; /* the clock of the cursor being written */
    unsigned long line;
};

static int64_t import_clock(void *ctx)
{
    return ((struct import *)ctx)->used;
}

static int bad_line(struct import *im, const char *why)
{
    fprintf(stderr, "mqchat-store: import: line %lu: %s\n", im->line, why);
    return EXIT_FAIL;
}

/* bad_line with a reason and what it is about: "<what>: <why>". */
static int bad_line2(struct import *im, const char *what, const char *why)
{
    fprintf(stderr, "mqchat-store: import: line %lu: %s: %s\n", im->line, what, why);
    return EXIT_FAIL;
}

/* Room for a name read from a line: one byte more than the longest the
 * rules take, so that one too long is told as such. */
#define NAME_BUF (CHAT_PROTO_NAME_MAX + 2)

/* The string member key of the line, decoded into buf (NAME_BUF bytes):
 * true, with its length in *n (NAME_BUF when it does not fit, which the
 * name rules refuse as too long; a \u0000 stays a NUL inside, which they
 * refuse too). False when the line has no such member, or not a string:
 * read with the protocol's scanner, not cJSON, which would end the string
 * at a \u0000. */
static bool line_str(const struct import *im, const char *key, char *buf, size_t *n)
{
    const char *vend = NULL;
    const char *v = chat_proto_json_member(im->text, im->text_end, key, &vend);
    if (!v || *v != '"') {
        return false;
    }
    *n = chat_proto_json_unescape(v, vend, buf, NAME_BUF);
    if (*n == SIZE_MAX) {
        /* too long, or a lone surrogate: either way not a name */
        *n = (size_t)(vend - v) >= NAME_BUF ? NAME_BUF : 0;
        buf[0] = '\0';
        if (*n == 0) {
            memcpy(buf, "\xff", 2); /* the rules say "not valid UTF-8" */
            *n = 1;
        }
    }
    return true;
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

static void cids_clear(struct import *im)
{
    for (size_t i = 0; i < im->ncids; i++) {
        free(im->cids[i].key);
    }
    im->ncids = 0;
}

static int by_key(const void *a, const void *b)
{
    const struct seen_cid *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Dry: remembers (from, cid) of the message on this line. */
static int note_cid(struct import *im, const char *from, const char *cid)
{
    if (im->ncids == im->cids_cap) {
        size_t cap = im->cids_cap ? 2 * im->cids_cap : 256;
        struct seen_cid *n = realloc(im->cids, cap * sizeof(*n));
        if (!n) {
            return bad_line(im, "out of memory");
        }
        im->cids = n;
        im->cids_cap = cap;
    }
    size_t len = strlen(from) + strlen(cid) + 24;
    char *key = malloc(len);
    if (!key) {
        return bad_line(im, "out of memory");
    }
    snprintf(key, len, "%zu:%s%s", strlen(from), from, cid);
    im->cids[im->ncids].key = key;
    im->cids[im->ncids++].line = im->line;
    return 0;
}

/* Dry, at the end of a group: a cid that a sender used twice would stop
 * the second pass at its second message (the store keeps it once). */
static int check_cids(struct import *im)
{
    int status = 0;
    if (im->ncids > 1) {
        qsort(im->cids, im->ncids, sizeof(*im->cids), by_key);
    }
    for (size_t i = 1; i < im->ncids; i++) {
        if (!strcmp(im->cids[i - 1].key, im->cids[i].key)) {
            fprintf(stderr,
                    "mqchat-store: import: line %lu: group %s: the message repeats the sender "
                    "and cid of line %lu\n",
                    im->cids[i].line, im->group, im->cids[i - 1].line);
            status = EXIT_FAIL;
            break;
        }
    }
    cids_clear(im);
    return status;
}

static void cursors_clear(struct import *im)
{
    for (size_t i = 0; i < im->ncurs; i++) {
        free(im->curs[i].member);
    }
    im->ncurs = 0;
}

/* Dry: remembers the member of the cursor on this line. */
static int note_cursor(struct import *im, const char *member)
{
    if (im->ncurs == im->curs_cap) {
        size_t cap = im->curs_cap ? 2 * im->curs_cap : 64;
        struct seen_cursor *n = realloc(im->curs, cap * sizeof(*n));
        if (!n) {
            return bad_line(im, "out of memory");
        }
        im->curs = n;
        im->curs_cap = cap;
    }
    if (!(im->curs[im->ncurs].member = strdup(member))) {
        return bad_line(im, "out of memory");
    }
    im->curs[im->ncurs++].line = im->line;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    const struct pending_member *x = a, *y = b;
    int c = strcmp(x->member, y->member);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* Dry, at the end of a group: no member twice (the broker keeps one
 * membership per member), and the member of every cursor on a member line
 * before the cursor's (the broker keeps cursors of members only). Sorts
 * the members by name: the second pass sorts them again, by joined. */
static int check_members(struct import *im)
{
    if (im->n > 1) {
        qsort(im->members, im->n, sizeof(*im->members), by_name);
    }
    for (size_t i = 1; i < im->n; i++) {
        if (!strcmp(im->members[i - 1].member, im->members[i].member)) {
            fprintf(stderr,
                    "mqchat-store: import: line %lu: group %s: member %s is on line %lu "
                    "already\n",
                    im->members[i].line, im->group, im->members[i].member, im->members[i - 1].line);
            return EXIT_FAIL;
        }
    }
    for (size_t i = 0; i < im->ncurs; i++) {
        struct pending_member key = {im->curs[i].member, 0, 0};
        size_t lo = 0, hi = im->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(im->members[mid].member, key.member) < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo == im->n || strcmp(im->members[lo].member, key.member) != 0 ||
            im->members[lo].line > im->curs[i].line) {
            fprintf(stderr,
                    "mqchat-store: import: line %lu: group %s: a cursor of %s, who is on no "
                    "member line before it\n",
                    im->curs[i].line, im->group, key.member);
            return EXIT_FAIL;
        }
    }
    return 0;
}

/* Dry: remembers a change seen on this line. */
static int note_change(struct import *im, uint64_t id, enum change_kind kind)
{
    if (im->nchanges == im->changes_cap) {
        size_t cap = im->changes_cap ? 2 * im->changes_cap : 64;
        struct change_note *n = realloc(im->changes, cap * sizeof(*n));
        if (!n) {
            return bad_line(im, "out of memory");
        }
        im->changes = n;
        im->changes_cap = cap;
    }
    im->changes[im->nchanges++] = (struct change_note){id, kind, im->line};
    return 0;
}

static int by_change(const void *a, const void *b)
{
    const struct change_note *x = a, *y = b;
    if (x->id != y->id) {
        return x->id < y->id ? -1 : 1;
    }
    return (int)x->kind - (int)y->kind;
}

/* Dry, at the end of a group: every change pairs up as the store writes
 * them (change-atomic): a tombstone is recalled by exactly one later
 * message, an edited version edited by at least one and recalled by none,
 * and a message that names a change finds it made (unless retention
 * removed the message, below first). An import of anything else would
 * show clients a change that never happened, or hide one. Every problem
 * is reported. */
static int check_changes(struct import *im)
{
    int status = 0;
    if (im->nchanges > 1) {
        qsort(im->changes, im->nchanges, sizeof(*im->changes), by_change);
    }
    for (size_t i = 0; i < im->nchanges;) {
        uint64_t id = im->changes[i].id;
        unsigned n[6] = {0};
        unsigned long at[6] = {0};
        for (; i < im->nchanges && im->changes[i].id == id; i++) {
            n[im->changes[i].kind]++;
            at[im->changes[i].kind] = im->changes[i].line;
        }
        const char *why = NULL;
        unsigned long line = 0;
        if (n[CHANGE_RECALLED] && n[CHANGE_RECALL] != 1) {
            why = n[CHANGE_RECALL] ? "is recalled by more than one message"
                                   : "is recalled, but no later message carries the recall";
            line = at[CHANGE_RECALLED];
        } else if (n[CHANGE_EDITED] && (n[CHANGE_RECALL] || !n[CHANGE_EDIT])) {
            why = n[CHANGE_RECALL] ? "is recalled by a later message but holds an edited version"
                                   : "is edited, but no later message carries the edit";
            line = at[CHANGE_EDITED];
        } else if (n[CHANGE_EDIT_RECALLED] && !n[CHANGE_RECALLED] && id >= im->first) {
            why = "is not recalled, but a message that carried its edit is";
            line = at[CHANGE_EDIT_RECALLED];
        } else if (!n[CHANGE_RECALLED] && !n[CHANGE_EDITED] && id >= im->first) {
            why = "is named by a recall or an edit but holds its first version";
            line = n[CHANGE_RECALL] ? at[CHANGE_RECALL] : at[CHANGE_EDIT];
        }
        if (why) {
            fprintf(stderr, "mqchat-store: import: line %lu: group %s: message %" PRIu64 " %s\n",
                    line, im->group, id, why);
            status = EXIT_FAIL;
        }
    }
    im->nchanges = 0;
    return status;
}

/* The change fields of a message line's envelope env (id on the line),
 * checked to have the shapes the plugin writes (chat_proto_envelope_error
 * checked each field's own shape); line_cid: the line has a "cid" of its
 * own (a tombstone's). Dry: notes them for check_changes. Returns the exit
 * status. */
static int check_change_fields(struct import *im, const cJSON *env, uint64_t id, bool line_cid)
{
    const cJSON *recalled = cJSON_GetObjectItemCaseSensitive(env, "recalled");
    const cJSON *edited = cJSON_GetObjectItemCaseSensitive(env, "edited");
    const cJSON *recall = cJSON_GetObjectItemCaseSensitive(env, "recall");
    const cJSON *edit = cJSON_GetObjectItemCaseSensitive(env, "edit");
    const cJSON *cid = cJSON_GetObjectItemCaseSensitive(env, "cid");
    int fields = cJSON_GetArraySize(env), marks = !!recalled + !!edited + !!recall + !!edit;
    uint64_t n = 0;

    /* A recalled edit (recall-complete): the carrier of an edit of a
     * message recalled since, rewritten to id, group, from, ts, the edit's
     * id and the mark. */
    if (recalled && edit && marks == 2) {
        if (!cJSON_IsTrue(recalled) || fields != 6 || line_cid || !json_u64(env, "edit", &n) ||
            n == 0 || n >= id || !cJSON_GetObjectItemCaseSensitive(env, "group") ||
            !cJSON_GetObjectItemCaseSensitive(env, "from")) {
            return bad_line(im, "a recalled edit holds id, group, from, ts, \"edit\" (an earlier "
                                "id) and \"recalled\":true alone");
        }
        return im->dry ? note_change(im, n, CHANGE_EDIT_RECALLED) : 0;
    }
    if (marks > 1) {
        return bad_line(im, "an envelope is at most one of: recalled, edited, a recall, an edit");
    }
    if (line_cid && !recalled) {
        return bad_line(im, "only a recalled message's line has a cid of its own");
    }
    if (cJSON_GetObjectItemCaseSensitive(env, "edits") && !edited) {
        return bad_line(im, "only an edited message lists \"edits\"");
    }
    if (recalled) {
        /* A tombstone: id, group, from, ts and the mark, nothing else. */
        if (!cJSON_IsTrue(recalled) || fields != 5 ||
            !cJSON_GetObjectItemCaseSensitive(env, "group") ||
            !cJSON_GetObjectItemCaseSensitive(env, "from")) {
            return bad_line(im, "a recalled message holds id, group, from, ts and "
                                "\"recalled\":true alone");
        }
        return im->dry ? note_change(im, id, CHANGE_RECALLED) : 0;
    }
    if (edited) {
        if (!json_u64(env, "edited", &n)) {
            return bad_line(im, "\"edited\" must be a time in ms");
        }
        /* the carriers of its edits come after it (chat_proto_envelope_error
         * checked the list's shape) */
        const cJSON *edits = cJSON_GetObjectItemCaseSensitive(env, "edits");
        for (const cJSON *it = edits ? edits->child : NULL; it; it = it->next) {
            if (!cJSON_IsNumber(it) || it->valuedouble <= (double)id) {
                return bad_line(im, "\"edits\" names the later messages that carried the edits");
            }
        }
        return im->dry ? note_change(im, id, CHANGE_EDITED) : 0;
    }
    if (recall || edit) {
        if (!json_u64(env, recall ? "recall" : "edit", &n) || n == 0 || n >= id) {
            return bad_line(im, "a recall or an edit names an earlier message id");
        }
        if (cid || (recall && fields != 5)) {
            return bad_line(im, recall ? "a recall holds id, group, from, ts and \"recall\" alone"
                                       : "an edit has no cid");
        }
        return im->dry ? note_change(im, n, recall ? CHANGE_RECALL : CHANGE_EDIT) : 0;
    }
    return 0;
}

/* The end of a group's lines: whoever joined after its last message. */
static int end_group(struct import *im)
{
    chat_err rc = CHAT_OK;
    int status = 0;
    if (im->group[0] && im->head != im->line_head) {
        /* An export cut short: its group line names a head its messages do
         * not reach, and importing it would give those ids again. */
        fprintf(stderr,
                "mqchat-store: import: group %s: its messages end at %" PRIu64
                " but its line says head %" PRIu64 " (an export cut short?)\n",
                im->group, im->head, im->line_head);
        status = EXIT_FAIL;
    } else if (im->dry) {
        status = check_cids(im);
        if (status == 0) {
            status = check_members(im);
        }
        if (status == 0) {
            status = check_changes(im);
        }
    } else if (im->group[0]) {
        rc = add_members(im, UINT64_MAX);
    }
    members_clear(im);
    cursors_clear(im);
    return rc != CHAT_OK ? tool_store_failed(im->st, "adding members", rc) : status;
}

/* Dry: a group line for a group not seen yet in the input. */
static int note_group(struct import *im, const char *g)
{
    for (size_t i = 0; i < im->ngroups; i++) {
        if (!strcmp(im->groups[i], g)) {
            fprintf(stderr, "mqchat-store: import: line %lu: group %s is in the input twice\n",
                    im->line, g);
            return EXIT_FAIL;
        }
    }
    if (im->ngroups == im->groups_cap) {
        size_t cap = im->groups_cap ? 2 * im->groups_cap : 16;
        char **n = realloc(im->groups, cap * sizeof(*n));
        if (!n) {
            return bad_line(im, "out of memory");
        }
        im->groups = n;
        im->groups_cap = cap;
    }
    if (!(im->groups[im->ngroups] = strdup(g))) {
        return bad_line(im, "out of memory");
    }
    im->ngroups++;
    return 0;
}

/* A group line: the group's name by the protocol's rule, head and first. */
static int group_line(struct import *im, const cJSON *o)
{
    char g[NAME_BUF];
    size_t glen = 0;
    uint64_t head = 0, first = 1, now = 0;
    const char *why = NULL;
    chat_err rc = CHAT_OK;
    if (!line_str(im, "group", g, &glen) || !json_u64(o, "head", &head) ||
        !json_u64(o, "first", &first) || first == 0 || first > head + 1) {
        return bad_line(im, "a group line needs group, head and first (1 <= first <= head + 1)");
    }
    if ((why = chat_proto_group_error(g, glen)) != NULL) {
        return bad_line2(im, "group", why);
    }
    int status = end_group(im);
    if (status != 0 || (im->dry && (status = note_group(im, g)) != 0)) {
        return status;
    }
    if ((rc = chat_store_head(im->st, g, &now)) != CHAT_OK) {
        return tool_store_failed(im->st, "reading the group", rc);
    }
    if (now != 0) {
        fprintf(stderr, "mqchat-store: import: group %s is in the store already\n", g);
        return EXIT_FAIL;
    }
    memcpy(im->group, g, glen + 1); /* at most CHAT_PROTO_GROUP_MAX bytes: checked */
    if (!im->dry && (rc = chat_store_group_init(im->st, g, first - 1)) != CHAT_OK) {
        return tool_store_failed(im->st, "starting the group", rc);
    }
    im->head = first - 1;
    im->line_head = head;
    im->first = first;
    return 0;
}

/* A member line: a member name by the protocol's rule, joined at most
 * the group's head. */
static int member_line(struct import *im, const cJSON *o)
{
    char m[NAME_BUF];
    size_t mlen = 0;
    uint64_t joined = 0;
    const char *why = NULL;
    if (!line_str(im, "member", m, &mlen) || !json_u64(o, "joined", &joined)) {
        return bad_line(im, "a member line needs member and joined");
    }
    if ((why = chat_proto_member_error(m, mlen)) != NULL) {
        return bad_line2(im, "member", why);
    }
    if (joined > im->line_head) {
        return bad_line(im, "a member's joined is above the group's head");
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
    im->members[im->n].line = im->line;
    im->members[im->n++].joined = joined;
    return 0;
}

/* A message line: the envelope as the plugin writes it, with the line's id
 * and the group of its lines, stored as the line holds it. */
static int message_line(struct import *im, const cJSON *o)
{
    uint64_t id = 0;
    const char *vend = NULL;
    const char *env = chat_proto_json_member(im->text, im->text_end, "envelope", &vend);
    chat_proto_envelope e;
    const char *why = NULL;
    chat_appended ap;
    chat_err rc = CHAT_OK;

    if (!json_u64(o, "id", &id) || !env || *env != '{') {
        return bad_line(im, "a message line needs id and an envelope object");
    }
    if (id != im->head + 1) {
        return bad_line(im, "message ids must follow each other from first");
    }
    if ((why = chat_proto_envelope_error(env, (size_t)(vend - env), &e)) != NULL) {
        char what[32];
        snprintf(what, sizeof(what), e.field ? "envelope \"%.8s\"" : "envelope", e.field);
        return bad_line2(im, what, why);
    }
    if (e.id != id) {
        return bad_line(im, "the envelope's id is not its line's");
    }
    if (strcmp(e.group, im->group) != 0) {
        return bad_line(im, "the envelope's group is not the group of its lines");
    }
    /* A tombstone's cid is on its line (its envelope holds none): still
     * taken (cid-reserved), so it is indexed again. */
    const char *cend = NULL;
    const char *line_cid = chat_proto_json_member(im->text, im->text_end, "cid", &cend);
    if (line_cid) {
        if (e.has_cid) {
            return bad_line(im, "only a recalled message's line has a cid of its own");
        }
        if ((why = chat_proto_cid_read(line_cid, cend, e.cid)) != NULL) {
            return bad_line2(im, "cid", why);
        }
        e.has_cid = true;
    }
    int status = check_change_fields(im, cJSON_GetObjectItemCaseSensitive(o, "envelope"), id,
                                     line_cid != NULL);
    if (status != 0) {
        return status;
    }
    if (im->dry) {
        im->head = id;
        return e.has_cid ? note_cid(im, e.from, e.cid) : 0;
    }
    if ((rc = add_members(im, im->head)) != CHAT_OK) {
        return tool_store_failed(im->st, "adding members", rc);
    }
    /* The store fills in the id (head + 1, which is this one) and its
     * clock's time, the envelope's own, between the bytes around them. */
    chat_envelope tpl = {env,
                         e.id_at,
                         env + e.id_at + e.id_len,
                         e.ts_at - (e.id_at + e.id_len),
                         env + e.ts_at + e.ts_len,
                         (size_t)(vend - env) - (e.ts_at + e.ts_len)};
    im->used = (int64_t)e.ts;
    chat_store_set_clock(im->st, import_clock, im);
    rc = chat_store_append(im->st, im->group, e.from, e.has_cid ? e.cid : NULL, &tpl, false, &ap);
    chat_store_set_clock(im->st, NULL, NULL);
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

/* A cursor line: a member and a device by the protocol's rules, acked at
 * most the group's head, the member on a member line before it. */
static int cursor_line(struct import *im, const cJSON *o)
{
    char m[NAME_BUF], d[NAME_BUF];
    size_t mlen = 0, dlen = 0;
    uint64_t acked = 0, used = 0;
    const char *why = NULL;
    chat_err rc = CHAT_OK;
    if (!line_str(im, "member", m, &mlen) || !line_str(im, "device", d, &dlen) ||
        !json_u64(o, "acked", &acked) || !json_u64(o, "used", &used)) {
        return bad_line(im, "a cursor line needs member, device, acked and used");
    }
    if ((why = chat_proto_member_error(m, mlen)) != NULL) {
        return bad_line2(im, "member", why);
    }
    if ((why = chat_proto_device_error(d, dlen)) != NULL) {
        return bad_line2(im, "device", why);
    }
    if (acked > im->line_head) {
        return bad_line(im, "a cursor's acked is above the group's head");
    }
    if (im->dry) {
        return note_cursor(im, m);
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

/* The kinds of line (the "type" of export's lines): a kind that a later
 * version adds (a recalled message's tombstone, an edited version) is one
 * line here and its reader. */
static const struct line_kind {
    const char *type;
    int (*read)(struct import *im, const cJSON *o);
} line_kinds[] = {
    {"group", group_line},
    {"member", member_line},
    {"message", message_line},
    {"cursor", cursor_line},
};

static int import_line(struct import *im, const cJSON *o)
{
    const char *type = json_str(o, "type");
    if (!type) {
        return bad_line(im, "no \"type\"");
    }
    for (size_t i = 0; i < sizeof(line_kinds) / sizeof(line_kinds[0]); i++) {
        if (strcmp(type, line_kinds[i].type) != 0) {
            continue;
        }
        if (i > 0 && !im->group[0]) {
            return bad_line(im, "a group line must come first");
        }
        return line_kinds[i].read(im, o);
    }
    return bad_line(im, "unknown type");
}

/* One pass over in: each line through import_line, and (spool not NULL)
 * copied to spool. Returns the exit status. */
static int import_pass(struct import *im, FILE *in, FILE *spool)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = 0;

    im->line = 0;
    im->group[0] = '\0';
    im->head = 0;
    while (status == 0 && (n = getline(&line, &cap, in)) >= 0) {
        im->line++;
        if (spool && fwrite(line, 1, (size_t)n, spool) != (size_t)n) {
            fprintf(stderr, "mqchat-store: import: writing a temporary file: %s\n",
                    strerror(errno));
            status = EXIT_FAIL;
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
            line[--n] = '\0';
        }
        if (n == 0) {
            continue;
        }
        /* What the broker writes, and what the scanners below cJSON need. */
        if (!chat_proto_utf8_valid(line, (size_t)n)) {
            status = bad_line(im, "not valid UTF-8");
            break;
        }
        if (!chat_proto_json_valid(line, (size_t)n)) {
            status = bad_line(im, "not strict JSON");
            break;
        }
        im->text = line;
        im->text_end = line + n;
        /* Strict JSON that cJSON does not read: a \u escape of no
         * character (a lone surrogate), or deeper than cJSON nests. */
        cJSON *o = cJSON_ParseWithLength(line, (size_t)n);
        status = cJSON_IsObject(o) ? import_line(im, o)
                 : o               ? bad_line(im, "not a JSON object")
                                   : bad_line(im, "a \\u escape that is no character (a lone "
                                                                "surrogate), or nesting deeper than 1000");
        cJSON_Delete(o);
    }
    if (status == 0 && ferror(in)) {
        fprintf(stderr, "mqchat-store: reading %s: %s\n", in == stdin ? "stdin" : "the input",
                strerror(errno));
        status = EXIT_FAIL;
    }
    if (status == 0) {
        status = end_group(im);
    }
    members_clear(im);
    cids_clear(im);
    cursors_clear(im);
    im->nchanges = 0;
    free(line);
    return status;
}

int tool_import(const char *path)
{
    struct import im = {0};
    FILE *spool = NULL, *again = stdin;
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
    if (!(im.st = tool_open_store(path, true))) {
        return EXIT_FAIL;
    }
    /* A file is read again from where it started; a pipe is spooled. */
    off_t start = ftello(stdin);
    if (start < 0 && !(spool = again = tmpfile())) {
        fprintf(stderr, "mqchat-store: import: a temporary file: %s\n", strerror(errno));
        status = EXIT_FAIL;
    }
    im.dry = true;
    if (status == 0) {
        status = import_pass(&im, stdin, spool);
    }
    if (status == 0 && (spool ? fflush(spool) != 0 || fseeko(spool, 0, SEEK_SET) != 0
                              : fseeko(stdin, start, SEEK_SET) != 0)) {
        fprintf(stderr, "mqchat-store: import: reading the input again: %s\n", strerror(errno));
        status = EXIT_FAIL;
    }
    im.dry = false;
    if (status == 0) {
        status = import_pass(&im, again, NULL);
        if (status != 0) {
            /* The input passed every check: the store itself failed. */
            fprintf(stderr,
                    "mqchat-store: import: the store failed while writing group %s: it "
                    "may be part-written (export it to see)\n",
                    im.group);
        }
    }
    for (size_t i = 0; i < im.ngroups; i++) {
        free(im.groups[i]);
    }
    free(im.groups);
    free(im.cids);
    free(im.curs);
    free(im.changes);
    free(im.members);
    if (spool) {
        (void)fclose(spool); /* a temporary file, gone with it */
    }
    chat_store_close(im.st);
    return status;
}
