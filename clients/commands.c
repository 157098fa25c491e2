/* commands.c: the blocking requests of the public API (fetch, history,
 * unread, join, leave, receipts, presence, the push registration, and any
 * other command through chat_client_request): each writes one command,
 * runs it through the dispatcher (api.c) and turns the plugin's answer into
 * results. */
#include "chat_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "envelope.h"
#include "proto.h"

/* Runs one command named command about group (may be NULL), written in o
 * (emptied). On OK *entry is the response entry, freed by the caller with
 * cJSON_Delete, and, when texts is not NULL, *texts the finished call that
 * holds the texts of its messages (struct call's texts: fetch and history),
 * freed with chat_call_free. */
static chat_client_err request_texts(chat_client *c, const char *command, const char *group,
                                     chat_obj *o, cJSON **entry, struct call **texts)
{
    struct call *call = chat_call_new(CALL_REQUEST);
    char *cmd = chat_obj_end(o);
    chat_client_err err;

    *entry = NULL;
    if (call == NULL || cmd == NULL || (group != NULL && (call->group = strdup(group)) == NULL)) {
        free(cmd);
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    call->payload = cmd;
    call->command = command;
    if ((err = chat_api_run(c, call, 0)) != CHAT_CLIENT_OK)
        return err;
    *entry = call->entry;
    call->entry = NULL;
    if (texts != NULL)
        *texts = call;
    else
        chat_call_free(call);
    return CHAT_CLIENT_OK;
}

static chat_client_err request(chat_client *c, const char *command, const char *group, chat_obj *o,
                               cJSON **entry)
{
    return request_texts(c, command, group, o, entry, NULL);
}

/* Starts the command {"command": name, "group": group (unless NULL)} in o. */
static void command_begin(chat_obj *o, const char *name, const char *group)
{
    chat_obj_str(o, "command", name);
    if (group != NULL)
        chat_obj_str(o, "group", group);
}

struct page_priv {
    cJSON *entry;          /* the response entry: the messages' strings point into it ... */
    char **json;           /* ... and each message's printed envelope */
    struct chat_env **env; /* or each message read from its text, as delivered live */
    size_t n;
};

void chat_client_page_free(chat_client_page *p)
{
    struct page_priv *pv;

    if (p == NULL)
        return;
    pv = p->priv;
    if (pv != NULL) {
        for (size_t i = 0; i < pv->n; i++) {
            if (pv->json != NULL)
                cJSON_free(pv->json[i]);
            if (pv->env != NULL)
                free(pv->env[i]);
        }
        free(pv->json);
        free(pv->env);
        cJSON_Delete(pv->entry);
        free(pv);
    }
    free(p->messages);
    free(p);
}

/* The messages of a page from their texts in the payload (call's texts,
 * one per element of the entry's messages): each as on_message gets it,
 * its json the stored envelope. False when a text is no envelope, or memory
 * ran out (*err says which). */
static bool page_from_texts(chat_client_page *p, struct page_priv *pv, const struct call *texts,
                            chat_client_err *err)
{
    if ((pv->env = calloc(texts->ntexts, sizeof(struct chat_env *))) == NULL) {
        *err = chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
        return false;
    }
    for (size_t i = 0; i < texts->ntexts; i++) {
        chat_env_verdict v = chat_env_read(texts->texts[i], texts->lens[i], &pv->env[i]);
        if (v != CHAT_ENV_OK) {
            *err = v == CHAT_ENV_NOMEM
                       ? chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL)
                       : chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "not an envelope: %.200s",
                                         texts->texts[i]);
            return false;
        }
        pv->n++;
        p->messages[p->count++] = pv->env[i]->m;
    }
    return true;
}

/* Turns a fetch or history entry (taken) into a page, from the texts of its
 * messages when texts (may be NULL) holds them. */
static chat_client_err make_page(cJSON *entry, const struct call *texts, chat_client_page **out)
{
    chat_client_page *p = calloc(1, sizeof *p);
    struct page_priv *pv = calloc(1, sizeof *pv);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
    const cJSON *item;
    size_t n = (size_t)cJSON_GetArraySize(msgs);

    if (p == NULL || pv == NULL) {
        free(p);
        free(pv);
        cJSON_Delete(entry);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    p->priv = pv;
    pv->entry = entry;
    if (!cJSON_IsArray(msgs) ||
        !chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "head"), 0, &p->head)) {
        chat_client_page_free(p);
        return chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "answer without messages or head");
    }
    p->more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "more"));
    p->truncated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "truncated"));
    if (n > 0 && (p->messages = calloc(n, sizeof *p->messages)) == NULL) {
        chat_client_page_free(p);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    if (texts != NULL && texts->ntexts == n && n > 0) {
        chat_client_err err = CHAT_CLIENT_OK;
        if (!page_from_texts(p, pv, texts, &err)) {
            chat_client_page_free(p);
            return err;
        }
        *out = p;
        return CHAT_CLIENT_OK;
    }
    if (n > 0 && (pv->json = calloc(n, sizeof *pv->json)) == NULL) {
        chat_client_page_free(p);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    cJSON_ArrayForEach(item, msgs)
    {
        char *json = cJSON_PrintUnformatted(item);
        if (json == NULL) {
            chat_client_page_free(p);
            return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
        }
        pv->json[pv->n++] = json;
        if (!chat_envelope_view(item, json, &p->messages[p->count])) {
            chat_client_page_free(p);
            return chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "not an envelope: %.200s", json);
        }
        p->count++;
    }
    *out = p;
    return CHAT_CLIENT_OK;
}

/* fetch and history: up to limit messages of group from bound, sent as key
 * (always, or only when not 0). */
static chat_client_err page_request(chat_client *c, const char *command, const char *group,
                                    const char *key, uint64_t bound, bool always, size_t limit,
                                    chat_client_page **out)
{
    chat_client_err err = chat_api_check_group(c, group);
    chat_obj o = {0};
    cJSON *entry = NULL;

    if (out == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "out is NULL");
    *out = NULL;
    if (err != CHAT_CLIENT_OK)
        return err;
    command_begin(&o, command, group);
    if (always || bound > 0)
        chat_obj_u64(&o, key, bound);
    if (limit > 0)
        chat_obj_u64(&o, "limit", limit);
    struct call *texts = NULL;
    if ((err = request_texts(c, command, group, &o, &entry, &texts)) != CHAT_CLIENT_OK)
        return err;
    err = make_page(entry, texts, out);
    chat_call_free(texts);
    return err;
}

chat_client_err chat_client_fetch(chat_client *c, const char *group, uint64_t after, size_t limit,
                                  chat_client_page **out)
{
    /* "after" is always sent: its default would be the device's cursor. */
    return page_request(c, "fetch", group, "after", after, true, limit, out);
}

chat_client_err chat_client_history(chat_client *c, const char *group, uint64_t before,
                                    size_t limit, chat_client_page **out)
{
    return page_request(c, "history", group, "before", before, false, limit, out);
}

void chat_client_unread_free(chat_client_group_status *list, size_t count)
{
    for (size_t i = 0; list != NULL && i < count; i++)
        free(list[i].group);
    free(list);
}

chat_client_err chat_client_unread(chat_client *c, chat_client_group_status **list, size_t *count)
{
    chat_obj o = {0};
    cJSON *entry = NULL;
    const cJSON *groups, *e;
    chat_client_group_status *l = NULL;
    size_t n = 0;
    chat_client_err err;

    if (c == NULL || list == NULL || count == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "NULL argument");
    *list = NULL;
    *count = 0;
    command_begin(&o, "sync", NULL);
    chat_obj_bool(&o, "replay", false);
    if ((err = request(c, "sync", NULL, &o, &entry)) != CHAT_CLIENT_OK)
        return err;
    groups = cJSON_GetObjectItemCaseSensitive(entry, "groups");
    if (!cJSON_IsArray(groups)) {
        cJSON_Delete(entry);
        return chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "sync answer without groups");
    }
    if (cJSON_GetArraySize(groups) > 0 &&
        (l = calloc((size_t)cJSON_GetArraySize(groups), sizeof *l)) == NULL) {
        cJSON_Delete(entry);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    cJSON_ArrayForEach(e, groups)
    {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "group");
        chat_client_group_status *s = &l[n];
        if (!cJSON_IsString(name) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "head"), 0, &s->head) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "acked"), 0, &s->acked) ||
            !chat_json_u64(cJSON_GetObjectItemCaseSensitive(e, "unread"), 0, &s->unread)) {
            err = chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "bad sync entry");
            goto fail;
        }
        if ((s->group = strdup(name->valuestring)) == NULL) {
            err = chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
            goto fail;
        }
        n++;
    }
    cJSON_Delete(entry);
    *list = l;
    *count = n;
    return CHAT_CLIENT_OK;

fail:
    cJSON_Delete(entry);
    chat_client_unread_free(l, n);
    return err;
}

/* join and leave. */
static chat_client_err membership(chat_client *c, const char *command, const char *group,
                                  const char *member, uint64_t *head)
{
    chat_client_err err = chat_api_check_group(c, group);
    chat_obj o = {0};
    cJSON *entry = NULL;

    if (err != CHAT_CLIENT_OK)
        return err;
    command_begin(&o, command, group);
    if (member != NULL)
        chat_obj_str(&o, "member", member);
    if ((err = request(c, command, group, &o, &entry)) != CHAT_CLIENT_OK)
        return err;
    if (head != NULL && !chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "head"), 0, head)) {
        cJSON_Delete(entry);
        return chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "join answer without head");
    }
    cJSON_Delete(entry);
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_join(chat_client *c, const char *group, const char *member,
                                 uint64_t *head)
{
    return membership(c, "join", group, member, head);
}

chat_client_err chat_client_leave(chat_client *c, const char *group, const char *member)
{
    return membership(c, "leave", group, member, NULL);
}

/* ===========================================================================
 * recall and edit (protocol v1.2)
 * ========================================================================= */

/* Runs the change command in o (begun) and reads "by" into *by. */
static chat_client_err change(chat_client *c, const char *command, const char *group, chat_obj *o,
                              uint64_t *by)
{
    cJSON *entry = NULL;
    uint64_t m = 0;
    chat_client_err err = request(c, command, group, o, &entry);

    if (err != CHAT_CLIENT_OK)
        return err;
    if (!chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "by"), 1, &m)) {
        cJSON_Delete(entry);
        return chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "%s answer without by", command);
    }
    if (by != NULL)
        *by = m;
    cJSON_Delete(entry);
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_recall(chat_client *c, const char *group, uint64_t id, uint64_t *by)
{
    chat_client_err err = chat_api_check_group(c, group);
    chat_obj o = {0};

    if (err != CHAT_CLIENT_OK)
        return err;
    if (id == 0)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "id is 0");
    command_begin(&o, "recall", group);
    chat_obj_u64(&o, "id", id);
    return change(c, "recall", group, &o, by);
}

chat_client_err chat_client_edit(chat_client *c, const char *group, uint64_t id, const char *body,
                                 const char *fields_json, uint64_t *by)
{
    chat_client_err err = chat_api_check_group(c, group);
    chat_obj o = {0};
    cJSON *fields = NULL;

    if (err != CHAT_CLIENT_OK)
        return err;
    if (id == 0 || body == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "id is 0 or body is NULL");
    if (fields_json != NULL) {
        fields = cJSON_Parse(fields_json);
        if (!cJSON_IsObject(fields)) {
            cJSON_Delete(fields);
            return chat_api_report(CHAT_CLIENT_ERR_INVAL, "fields_json is not a JSON object");
        }
    }
    command_begin(&o, "edit", group);
    chat_obj_u64(&o, "id", id);
    chat_obj_str(&o, "body", body);
    for (const cJSON *f = fields != NULL ? fields->child : NULL; f != NULL; f = f->next) {
        /* The command's own keys and body stay ours. */
        if (strcmp(f->string, "body") == 0 || strcmp(f->string, "command") == 0 ||
            strcmp(f->string, "group") == 0 || strcmp(f->string, "id") == 0 ||
            strcmp(f->string, "correlationData") == 0)
            continue;
        char *v = cJSON_PrintUnformatted(f);
        if (v == NULL) {
            cJSON_Delete(fields);
            free(chat_obj_end(&o));
            return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
        }
        chat_obj_raw(&o, f->string, v);
        cJSON_free(v);
    }
    cJSON_Delete(fields);
    return change(c, "edit", group, &o, by);
}

/* ===========================================================================
 * receipts and presence: every page of a list of members
 * ========================================================================= */

#define LIST_PAGES_MAX 100000 /* pages of one list at most (1000 names each) */

/* One page of receipts or presence after `after` (NULL: from the first).
 * On OK *entry is the answer, freed by the caller with cJSON_Delete. */
static chat_client_err list_page(chat_client *c, const char *command, const char *group,
                                 const char *after, cJSON **entry)
{
    chat_obj o = {0};

    command_begin(&o, command, group);
    if (after != NULL)
        chat_obj_str(&o, "after", after);
    return request(c, command, group, &o, entry);
}

/* Where the next page starts: the answer's "after" (or its last name), or
 * NULL when the list is complete. Sets *bad when more comes without one. */
static const char *next_after(const cJSON *entry, const char *last, bool *bad)
{
    const cJSON *after = cJSON_GetObjectItemCaseSensitive(entry, "after");

    *bad = false;
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "more")))
        return NULL;
    if (cJSON_IsString(after))
        return after->valuestring;
    *bad = last == NULL;
    return last;
}

/* One kind of paged member list: what to ask, where the answer keeps its
 * names, and how one of them is kept. */
struct list_kind {
    const char *command; /* "receipts" or "presence" */
    const char *key;     /* the answer's member: "reads" or "online" */
    bool object;         /* key is an object (name: value), else an array */
    const char *item;    /* what one entry is called in errors */
    size_t size;         /* bytes of one kept entry */
    /* Keeps x at slot; false when x is malformed or out of memory. */
    bool (*keep)(const cJSON *x, void *slot);
    /* The member name kept at slot. */
    const char *(*name)(const void *slot);
};

/* Every page of one list of group: on OK *list (n entries of kind->size
 * bytes, owned by the caller) and *members (unless NULL); on an error
 * *list is what was kept so far, for the caller to free. */
static chat_client_err list_all(chat_client *c, const struct list_kind *kind, const char *group,
                                void **list, size_t *count, uint64_t *members)
{
    chat_client_err err = CHAT_CLIENT_OK;
    char *l = NULL;
    size_t n = 0, cap = 0;
    char *after = NULL;

    for (int page = 0; page < LIST_PAGES_MAX; page++) {
        cJSON *entry = NULL;
        const cJSON *items, *x;
        bool bad = false;
        if ((err = list_page(c, kind->command, group, after, &entry)) != CHAT_CLIENT_OK)
            goto out;
        items = cJSON_GetObjectItemCaseSensitive(entry, kind->key);
        if (!(kind->object ? cJSON_IsObject(items) : cJSON_IsArray(items)) ||
            (members != NULL &&
             !chat_json_u64(cJSON_GetObjectItemCaseSensitive(entry, "members"), 0, members))) {
            cJSON_Delete(entry);
            err = chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "%s answer without %s", kind->command,
                                  kind->key);
            goto out;
        }
        cJSON_ArrayForEach(x, items)
        {
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                char *nl = realloc(l, ncap * kind->size);
                if (nl == NULL) {
                    cJSON_Delete(entry);
                    err = chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
                    goto out;
                }
                l = nl;
                cap = ncap;
            }
            if (!kind->keep(x, l + n * kind->size)) {
                cJSON_Delete(entry);
                err = chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "bad %s in %s", kind->item,
                                      kind->command);
                goto out;
            }
            n++;
        }
        const char *next =
            next_after(entry, n > 0 ? kind->name(l + (n - 1) * kind->size) : NULL, &bad);
        free(after);
        after = next != NULL ? strdup(next) : NULL;
        cJSON_Delete(entry);
        if (bad || (next != NULL && after == NULL)) {
            err = bad ? chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "%s: more without where to go on",
                                        kind->command)
                      : chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
            goto out;
        }
        if (after == NULL)
            break;
    }
out:
    free(after);
    *list = l;
    *count = n;
    return err;
}

static bool keep_marker(const cJSON *x, void *slot)
{
    chat_client_read_marker *m = slot;

    return chat_json_u64(x, 0, &m->id) && (m->member = strdup(x->string)) != NULL;
}

static const char *marker_name(const void *slot)
{
    return ((const chat_client_read_marker *)slot)->member;
}

static bool keep_name(const cJSON *x, void *slot)
{
    return cJSON_IsString(x) && (*(char **)slot = strdup(x->valuestring)) != NULL;
}

static const char *name_name(const void *slot)
{
    return *(char *const *)slot;
}

void chat_client_receipts_free(chat_client_read_marker *list, size_t count)
{
    for (size_t i = 0; list != NULL && i < count; i++)
        free(list[i].member);
    free(list);
}

chat_client_err chat_client_receipts(chat_client *c, const char *group,
                                     chat_client_read_marker **list, size_t *count,
                                     uint64_t *members)
{
    static const struct list_kind kind = {"receipts",    "reads",     true,       "read marker",
                                          sizeof **list, keep_marker, marker_name};
    chat_client_err err = chat_api_check_group(c, group);
    void *l;
    size_t n;

    if (list == NULL || count == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "NULL argument");
    *list = NULL;
    *count = 0;
    if (err != CHAT_CLIENT_OK)
        return err;
    if ((err = list_all(c, &kind, group, &l, &n, members)) != CHAT_CLIENT_OK) {
        chat_client_receipts_free(l, n);
        return err;
    }
    *list = l;
    *count = n;
    return CHAT_CLIENT_OK;
}

void chat_client_presence_free(char **online, size_t count)
{
    for (size_t i = 0; online != NULL && i < count; i++)
        free(online[i]);
    free(online);
}

chat_client_err chat_client_presence(chat_client *c, const char *group, char ***online,
                                     size_t *count, uint64_t *members)
{
    static const struct list_kind kind = {"presence",      "online",  false,    "name",
                                          sizeof **online, keep_name, name_name};
    chat_client_err err = chat_api_check_group(c, group);
    void *l;
    size_t n;

    if (online == NULL || count == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "NULL argument");
    *online = NULL;
    *count = 0;
    if (err != CHAT_CLIENT_OK)
        return err;
    if ((err = list_all(c, &kind, group, &l, &n, members)) != CHAT_CLIENT_OK) {
        chat_client_presence_free(l, n);
        return err;
    }
    *online = l;
    *count = n;
    return CHAT_CLIENT_OK;
}

chat_client_err chat_client_request(chat_client *c, const char *command_json, char **answer_json)
{
    cJSON *cmd = NULL, *entry = NULL;
    const cJSON *name, *group;
    struct call *call = NULL;
    chat_client_err err;
    char *text;

    if (answer_json == NULL || c == NULL || command_json == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "NULL argument");
    *answer_json = NULL;
    cmd = cJSON_Parse(command_json);
    name = cJSON_GetObjectItemCaseSensitive(cmd, "command");
    group = cJSON_GetObjectItemCaseSensitive(cmd, "group");
    if (!cJSON_IsObject(cmd) || !cJSON_IsString(name) || name->valuestring[0] == '\0' ||
        strlen(name->valuestring) > 40 ||
        cJSON_GetObjectItemCaseSensitive(cmd, "correlationData") != NULL) {
        cJSON_Delete(cmd);
        return chat_api_report(CHAT_CLIENT_ERR_INVAL,
                               "a command is a JSON object with a \"command\" string of at most "
                               "40 bytes and no \"correlationData\"");
    }
    /* Sent as the caller wrote it, bar blanks; answers match it by the
     * correlationData the request adds. */
    if ((text = cJSON_PrintUnformatted(cmd)) == NULL ||
        (call = chat_call_new(CALL_REQUEST)) == NULL ||
        (cJSON_IsString(group) && (call->group = strdup(group->valuestring)) == NULL)) {
        cJSON_free(text);
        cJSON_Delete(cmd);
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    snprintf(call->name, sizeof call->name, "%s", name->valuestring);
    cJSON_Delete(cmd);
    call->command = call->name;
    call->payload = strdup(text);
    cJSON_free(text);
    if (call->payload == NULL) {
        chat_call_free(call);
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    }
    if ((err = chat_api_run(c, call, 0)) != CHAT_CLIENT_OK)
        return err;
    entry = call->entry;
    call->entry = NULL;
    chat_call_free(call);
    cJSON_DeleteItemFromObjectCaseSensitive(entry, "correlationData");
    text = cJSON_PrintUnformatted(entry);
    cJSON_Delete(entry);
    if (text == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
    /* Handed over as malloc'd memory, whatever cJSON's allocator. */
    *answer_json = strdup(text);
    cJSON_free(text);
    return *answer_json != NULL ? chat_api_report(CHAT_CLIENT_OK, NULL)
                                : chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
}

void chat_client_free(void *p)
{
    free(p);
}

/* ===========================================================================
 * push: this device's registration (protocol v1.2)
 * ========================================================================= */

/* Adds field name when value is set; true when it is (required) or may
 * be absent. */
static bool push_field(chat_obj *o, const char *name, const char *value, bool required)
{
    if (value != NULL)
        chat_obj_str(o, name, value);
    return value != NULL || !required;
}

chat_client_err chat_client_push_register(chat_client *c, const chat_client_push *reg)
{
    chat_obj o = {0};
    cJSON *entry = NULL;
    bool ok = false;

    if (reg == NULL || reg->kind == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "reg and its kind are required");
    command_begin(&o, "push", NULL);
    chat_obj_str(&o, "kind", reg->kind);
    if (strcmp(reg->kind, "unifiedpush") == 0) {
        ok = push_field(&o, "endpoint", reg->endpoint, true) &&
             (reg->p256dh == NULL) == (reg->auth == NULL) &&
             push_field(&o, "p256dh", reg->p256dh, false) &&
             push_field(&o, "auth", reg->auth, false);
    } else if (strcmp(reg->kind, "matrix") == 0) {
        ok = push_field(&o, "url", reg->url, true) && push_field(&o, "app_id", reg->app_id, true) &&
             push_field(&o, "pushkey", reg->pushkey, true);
    } else if (strcmp(reg->kind, "webhook") == 0) {
        ok = push_field(&o, "name", reg->name, true);
    }
    if (!ok) {
        free(chat_obj_end(&o));
        return chat_api_report(CHAT_CLIENT_ERR_INVAL,
                               "kind unifiedpush needs endpoint (and p256dh with auth, or "
                               "neither), matrix url, app_id and pushkey, webhook name");
    }
    chat_client_err err = request(c, "push", NULL, &o, &entry);
    if (err == CHAT_CLIENT_OK &&
        !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "registered")))
        err = chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "push answer without registered");
    cJSON_Delete(entry);
    return err;
}

chat_client_err chat_client_push_remove(chat_client *c)
{
    chat_obj o = {0};
    cJSON *entry = NULL;
    command_begin(&o, "push", NULL);
    chat_obj_str(&o, "kind", "none");
    chat_client_err err = request(c, "push", NULL, &o, &entry);
    cJSON_Delete(entry);
    return err;
}

chat_client_err chat_client_push_status(chat_client *c, bool *registered, char **answer_json)
{
    chat_obj o = {0};
    cJSON *entry = NULL;

    if (registered == NULL)
        return chat_api_report(CHAT_CLIENT_ERR_INVAL, "registered is NULL");
    if (answer_json != NULL)
        *answer_json = NULL;
    command_begin(&o, "push", NULL);
    chat_client_err err = request(c, "push", NULL, &o, &entry);
    if (err != CHAT_CLIENT_OK)
        return err;
    const cJSON *reg = cJSON_GetObjectItemCaseSensitive(entry, "registered");
    if (!cJSON_IsBool(reg)) {
        cJSON_Delete(entry);
        return chat_api_report(CHAT_CLIENT_ERR_PROTOCOL, "push answer without registered");
    }
    *registered = cJSON_IsTrue(reg);
    if (answer_json != NULL) {
        cJSON_DeleteItemFromObjectCaseSensitive(entry, "correlationData");
        char *text = cJSON_PrintUnformatted(entry);
        *answer_json = text != NULL ? strdup(text) : NULL;
        cJSON_free(text);
        if (*answer_json == NULL) {
            cJSON_Delete(entry);
            return chat_api_report(CHAT_CLIENT_ERR_NOMEM, NULL);
        }
    }
    cJSON_Delete(entry);
    return CHAT_CLIENT_OK;
}
