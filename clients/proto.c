/* proto.c: the client library's side of the protocol (see proto.h). */
#include "proto.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *chat_client_group_error(const char *group)
{
    if (group == NULL) {
        return "group name is empty";
    }
    return chat_proto_group_error(group, strlen(group));
}

bool chat_json_u64(const cJSON *item, uint64_t lo, uint64_t *out)
{
    return cJSON_IsNumber(item) && chat_proto_json_int(item->valuedouble, lo, out);
}

/* obj[key] if it is a string, else NULL. */
static const char *str_field(const cJSON *obj, const char *key)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(s) ? s->valuestring : NULL;
}

bool chat_envelope_view(const cJSON *env, const char *json, chat_client_message *m)
{
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(env, "ts");

    memset(m, 0, sizeof *m);
    if (!cJSON_IsObject(env) ||
        !chat_json_u64(cJSON_GetObjectItemCaseSensitive(env, "id"), 1, &m->id))
        return false;
    if ((m->group = str_field(env, "group")) == NULL)
        return false;
    m->from = str_field(env, "from");
    if (m->from == NULL)
        m->from = "";
    m->ts = cJSON_IsNumber(ts) ? (int64_t)ts->valuedouble : 0;
    m->body = str_field(env, "body");
    m->cid = str_field(env, "cid");
    m->json = json;
    /* v1.2: a change, or a changed message (what the plugin writes; a value
     * of another shape reads as absent). */
    uint64_t v = 0;
    if (chat_json_u64(cJSON_GetObjectItemCaseSensitive(env, "recall"), 1, &v))
        m->recall = v;
    if (chat_json_u64(cJSON_GetObjectItemCaseSensitive(env, "edit"), 1, &v))
        m->edit = v;
    if (chat_json_u64(cJSON_GetObjectItemCaseSensitive(env, "edited"), 0, &v))
        m->edited = (int64_t)v;
    m->recalled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(env, "recalled"));
    return true;
}

/* ---------------------------------------------------------------------------
 * Writing JSON objects
 * ------------------------------------------------------------------------- */

/* Makes room for more bytes plus a NUL; false (and failed) when out of
 * memory. */
static bool reserve(chat_obj *o, size_t more)
{
    size_t cap;
    char *text;

    if (o->failed)
        return false;
    if (o->len + more + 1 <= o->cap)
        return true;
    cap = o->cap ? o->cap : 64;
    while (cap < o->len + more + 1)
        cap *= 2;
    if ((text = realloc(o->text, cap)) == NULL) {
        o->failed = true;
        return false;
    }
    o->text = text;
    o->cap = cap;
    return true;
}

static void put(chat_obj *o, const char *s, size_t n)
{
    if (!reserve(o, n))
        return;
    memcpy(o->text + o->len, s, n);
    o->len += n;
}

/* Writes s as a JSON string (proto/'s writer). */
static void put_string(chat_obj *o, const char *s)
{
    size_t n = strlen(s);

    if (reserve(o, CHAT_PROTO_JSON_STRING_MAX(n)))
        o->len += chat_proto_json_string(o->text + o->len, s, n);
}

/* Opens the object or separates the field from the previous one, then
 * writes the key. */
static void put_key(chat_obj *o, const char *key)
{
    put(o, o->len == 0 ? "{" : ",", 1);
    put_string(o, key);
    put(o, ":", 1);
}

void chat_obj_str(chat_obj *o, const char *key, const char *value)
{
    put_key(o, key);
    put_string(o, value);
}

void chat_obj_u64(chat_obj *o, const char *key, uint64_t value)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%" PRIu64, value);

    put_key(o, key);
    put(o, num, (size_t)n);
}

void chat_obj_raw(chat_obj *o, const char *key, const char *json)
{
    put_key(o, key);
    put(o, json, strlen(json));
}

void chat_obj_bool(chat_obj *o, const char *key, bool value)
{
    put_key(o, key);
    put(o, value ? "true" : "false", value ? 4 : 5);
}

char *chat_obj_end(chat_obj *o)
{
    char *text;

    if (o->len == 0)
        put(o, "{", 1);
    put(o, "}", 1);
    if (o->failed) {
        free(o->text);
        memset(o, 0, sizeof *o);
        return NULL;
    }
    o->text[o->len] = '\0';
    text = o->text;
    memset(o, 0, sizeof *o);
    return text;
}

char *chat_request_text(const char *command, const char *corr)
{
    size_t n = strlen(command);
    chat_obj o = {0};

    /* command is an object with at least its "command" field: reopen it. */
    assert(n > 2 && command[0] == '{' && command[n - 1] == '}');
    put(&o, "{\"commands\":[", 13);
    put(&o, command, n - 1);
    put(&o, ",", 1);
    put_string(&o, "correlationData");
    put(&o, ":", 1);
    put_string(&o, corr);
    put(&o, "}]", 2);
    return chat_obj_end(&o);
}
