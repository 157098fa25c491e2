/* proto.c: what the client library makes of the protocol's data: group
 * names and JSON integers (checked by proto/, as the plugin checks them) and
 * envelopes. */
#include "client.h"

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
    return true;
}
