/* proto.c: what the client library checks of the protocol's data: UTF-8,
 * group names (the plugin's rules and wording), JSON integers and envelopes. */
#include "client.h"

#include <string.h>

#define MAX_JSON_INT 9007199254740992.0 /* 2^53: every integer up to it is exact */

/* Decodes one UTF-8 sequence at s (n > 0 bytes left). Returns its length, 0
 * when malformed (overlong forms, surrogates, above U+10FFFF, truncated). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t v = s[0];
    size_t len;

    if (v < 0x80) {
        *cp = v;
        return 1;
    }
    if ((v & 0xE0) == 0xC0) {
        len = 2;
        v &= 0x1F;
    } else if ((v & 0xF0) == 0xE0) {
        len = 3;
        v &= 0x0F;
    } else if ((v & 0xF8) == 0xF0) {
        len = 4;
        v &= 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

bool chat_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;

    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t step = utf8_next(p + i, len - i, &cp);
        if (step == 0 || cp == 0)
            return false;
        i += step;
    }
    return true;
}

const char *chat_client_group_error(const char *group)
{
    const unsigned char *p = (const unsigned char *)group;
    size_t len;

    if (group == NULL || group[0] == '\0')
        return "group name is empty";
    len = strlen(group);
    if (len > CHAT_GROUP_MAX)
        return "group name is longer than 128 bytes";
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t step = utf8_next(p + i, len - i, &cp);
        if (step == 0)
            return "group name is not valid UTF-8";
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
            return "group name contains a control character";
        if (cp == '/' || cp == '+' || cp == '#' || cp == '$')
            return "group name contains one of / + # $";
        i += step;
    }
    return NULL;
}

bool chat_json_u64(const cJSON *item, uint64_t lo, uint64_t *out)
{
    double d;

    if (!cJSON_IsNumber(item))
        return false;
    d = item->valuedouble;
    if (!(d >= (double)lo && d <= MAX_JSON_INT) || (double)(uint64_t)d != d)
        return false;
    *out = (uint64_t)d;
    return true;
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
