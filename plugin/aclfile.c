/* aclfile.c: Mosquitto's acl_file, parsed and matched by the broker's rules
 * (see aclfile.h), for the read verdict where the broker cannot be asked. */
#include "aclfile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mosq.h"

/* MOSQ_ACL_NONE: what a "deny" line grants. */
#define ACCESS_DENY 0

struct rule {
    struct rule *next;
    char *filter;
    int access;       /* MOSQ_ACL_READ | MOSQ_ACL_WRITE bits, or ACCESS_DENY */
    bool has_escapes; /* a pattern with %c or %u */
    bool needs_user;  /* a pattern with %u: skipped for clients without one */
};

/* The rules of one `user` section (name NULL: the lines before any). */
struct section {
    struct section *next;
    char *name;
    struct rule *rules;
};

struct chat_aclfile {
    struct section *sections;
    struct rule *patterns;
};

static void rules_free(struct rule *r)
{
    while (r) {
        struct rule *next = r->next;
        free(r->filter);
        free(r);
        r = next;
    }
}

void chat_aclfile_free(chat_aclfile *a)
{
    if (!a) {
        return;
    }
    while (a->sections) {
        struct section *s = a->sections;
        a->sections = s->next;
        rules_free(s->rules);
        free(s->name);
        free(s);
    }
    rules_free(a->patterns);
    free(a);
}

/* The broker tries "deny" lines before the others of the same list, and the
 * others in file order. */
static void rule_add(struct rule **list, struct rule *r)
{
    if (r->access == ACCESS_DENY || !*list) {
        r->next = *list;
        *list = r;
        return;
    }
    struct rule *tail = *list;
    while (tail->next) {
        tail = tail->next;
    }
    tail->next = r;
}

static struct section *section_get(chat_aclfile *a, const char *name)
{
    struct section **tail = &a->sections;
    for (struct section *s = a->sections; s; s = s->next) {
        if ((!name && !s->name) || (name && s->name && !strcmp(name, s->name))) {
            return s;
        }
        tail = &s->next;
    }
    struct section *s = calloc(1, sizeof(*s));
    if (!s || (name && !(s->name = strdup(name)))) {
        free(s);
        return NULL;
    }
    *tail = s;
    return s;
}

/* Blanks off both ends, as the broker trims a topic and a user name. */
static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) {
        s++;
    }
    size_t n = strlen(s);
    while (n > 1 && isspace((unsigned char)s[n - 1])) {
        s[--n] = '\0';
    }
    return s;
}

/* One `topic` or `pattern` line after its first word: "[access] filter". */
static const char *parse_rule(chat_aclfile *a, const char *user, bool pattern, char *rest,
                              char **save)
{
    char *access_s = strtok_r(rest, " ", save);
    if (!access_s) {
        return "empty topic";
    }
    /* The broker takes what follows the access word whole; with nothing
     * after it, the word itself is the topic, read and write. */
    char *tail = strtok_r(NULL, "", save);
    char *filter = tail ? trim(tail) : access_s;
    int access = MOSQ_ACL_READ | MOSQ_ACL_WRITE;
    if (tail) {
        if (!strcmp(access_s, "read")) {
            access = MOSQ_ACL_READ;
        } else if (!strcmp(access_s, "write")) {
            access = MOSQ_ACL_WRITE;
        } else if (!strcmp(access_s, "readwrite")) {
            access = MOSQ_ACL_READ | MOSQ_ACL_WRITE;
        } else if (!strcmp(access_s, "deny")) {
            access = ACCESS_DENY;
        } else {
            return "invalid topic access type";
        }
    }
    if (mosquitto_sub_topic_check(filter) != MOSQ_ERR_SUCCESS) {
        return "invalid ACL topic";
    }
    struct rule *r = calloc(1, sizeof(*r));
    if (!r || !(r->filter = strdup(filter))) {
        free(r);
        return "out of memory";
    }
    r->access = access;
    if (pattern) {
        r->has_escapes = strstr(filter, "%c") || strstr(filter, "%u");
        r->needs_user = strstr(filter, "%u") != NULL;
        rule_add(&a->patterns, r);
        return NULL;
    }
    struct section *s = section_get(a, user);
    if (!s) {
        rules_free(r);
        return "out of memory";
    }
    rule_add(&s->rules, r);
    return NULL;
}

chat_aclfile *chat_aclfile_load(const char *path, char *why, size_t why_len)
{
    chat_aclfile *a = calloc(1, sizeof(*a));
    char *line = NULL, *user = NULL;
    size_t cap = 0;
    unsigned long lineno = 0;
    const char *err = NULL;
    FILE *f = NULL;

    if (!a) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    f = fopen(path, "r");
    if (!f) {
        snprintf(why, why_len, "cannot open acl_file \"%s\": %s", path, strerror(errno));
        goto fail;
    }
    while (!err && getline(&line, &cap, f) >= 0) {
        lineno++;
        size_t n = strlen(line);
        while (n > 0 && isspace((unsigned char)line[n - 1])) {
            line[--n] = '\0';
        }
        if (line[0] == '#') {
            continue;
        }
        char *save = NULL;
        char *word = strtok_r(line, " ", &save);
        if (!word) {
            continue;
        }
        if (!strcmp(word, "topic") || !strcmp(word, "pattern")) {
            err = parse_rule(a, user, word[0] == 'p', NULL, &save);
        } else if (!strcmp(word, "user")) {
            char *name = strtok_r(NULL, "", &save);
            if (!name) {
                err = "missing username";
            } else {
                free(user);
                if (!(user = strdup(trim(name)))) {
                    err = "out of memory";
                }
            }
        } else {
            err = "invalid line";
        }
    }
    if (!err && ferror(f)) {
        snprintf(why, why_len, "cannot read acl_file \"%s\": %s", path, strerror(errno));
        goto fail;
    }
    if (err) {
        snprintf(why, why_len, "acl_file \"%s\", line %lu: %s", path, lineno, err);
        goto fail;
    }
    free(line);
    free(user);
    (void)fclose(f); /* read only: nothing to lose */
    return a;

fail:
    free(line);
    free(user);
    if (f) {
        (void)fclose(f);
    }
    chat_aclfile_free(a);
    return NULL;
}

/* The first rule of list whose filter (from make) matches topic decides:
 * 1 allowed, 0 denied, -1 no rule matched. */
static int first_match(const struct rule *r, const char *filter, const char *topic, int access)
{
    bool match = false;
    if (mosquitto_topic_matches_sub(filter, topic, &match) != MOSQ_ERR_SUCCESS || !match) {
        return -1;
    }
    if (r->access == ACCESS_DENY) {
        return 0;
    }
    return (r->access & access) ? 1 : -1;
}

/* A pattern's filter for this client: %c and %u replaced (malloc'd). */
static char *expand(const char *filter, const char *username, const char *client_id)
{
    size_t ulen = username ? strlen(username) : 0, clen = strlen(client_id);
    size_t n = strlen(filter), cap = n + 1;
    for (const char *p = filter; (p = strchr(p, '%')) != NULL; p++) {
        cap += clen + ulen; /* an upper bound */
    }
    char *out = malloc(cap);
    if (!out) {
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (filter[i] == '%' && i + 1 < n && filter[i + 1] == 'c') {
            memcpy(out + o, client_id, clen);
            o += clen;
            i++;
        } else if (filter[i] == '%' && i + 1 < n && filter[i + 1] == 'u' && username) {
            memcpy(out + o, username, ulen);
            o += ulen;
            i++;
        } else {
            out[o++] = filter[i];
        }
    }
    out[o] = '\0';
    return out;
}

bool chat_aclfile_allows(const chat_aclfile *a, const char *username, const char *client_id,
                         const char *topic, int access)
{
    if (!a || !topic || !client_id) {
        return false;
    }
    /* The client's own section: its username's, or for a client without one
     * the lines before any `user`. */
    const struct section *mine = NULL;
    for (const struct section *s = a->sections; s && !mine; s = s->next) {
        if (username ? (s->name && !strcmp(s->name, username)) : !s->name) {
            mine = s;
        }
    }
    for (const struct rule *r = mine ? mine->rules : NULL; r; r = r->next) {
        if (topic[0] == '$' && r->filter[0] != '$') {
            continue;
        }
        int d = first_match(r, r->filter, topic, access);
        if (d >= 0) {
            return d == 1;
        }
    }
    if (!a->patterns) {
        return false;
    }
    /* A client id or username with a wildcard could widen a pattern. */
    if ((username && strpbrk(username, "+#")) || strpbrk(client_id, "+#")) {
        return false;
    }
    for (const struct rule *r = a->patterns; r; r = r->next) {
        if (r->needs_user && !username) {
            continue;
        }
        char *filter = r->has_escapes ? expand(r->filter, username, client_id) : r->filter;
        if (!filter) {
            return false; /* out of memory: fail closed */
        }
        int d = first_match(r, filter, topic, access);
        if (filter != r->filter) {
            free(filter);
        }
        if (d >= 0) {
            return d == 1;
        }
    }
    return false;
}
