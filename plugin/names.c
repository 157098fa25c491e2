/* names.c: validation of network input that names things: UTF-8, group
 * names, chat topics, members. */
#include "plugin.h"

#include <string.h>

/* Decodes one UTF-8 sequence at s (n bytes left). Returns its length, 0 when
 * malformed (overlong forms, surrogates, above U+10FFFF, truncated). */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len;
    uint32_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2;
        c &= 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        c &= 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        c &= 0x07;
    } else {
        return 0;
    }
    if (len > n) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            return 0;
        }
        c = (c << 6) | (s[i] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return 0;
    }
    *cp = c;
    return len;
}

bool chat_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        uint32_t cp = 0;
        size_t step = utf8_next(p + i, len - i, &cp);
        if (step == 0 || cp == 0) {
            return false;
        }
        i += step;
    }
    return true;
}

size_t chat_nul_escapes(char *s, size_t len, const char *with)
{
    size_t n = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] != '\\') {
            continue;
        }
        if (s[i + 1] == 'u' && i + 5 < len && !memcmp(s + i + 2, "0000", 4)) {
            if (with) {
                memcpy(s + i + 2, with, 4);
            }
            n++;
        }
        i++; /* skip the escaped character: in "\\u0000" the u is not escaped */
    }
    return n;
}

const char *chat_group_check(const char *name, size_t len)
{
    const unsigned char *p = (const unsigned char *)name;
    if (len == 0) {
        return "group name is empty";
    }
    if (len > CHAT_GROUP_MAX) {
        return "group name is longer than 128 bytes";
    }
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t step = utf8_next(p + i, len - i, &cp);
        if (step == 0) {
            return "group name is not valid UTF-8";
        }
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
            return "group name contains a control character";
        }
        if (cp == '/' || cp == '+' || cp == '#' || cp == '$') {
            return "group name contains one of / + # $";
        }
        i += step;
    }
    return NULL;
}

enum chat_topic_kind chat_topic_parse(const struct chat_config *cfg, const char *topic,
                                      const char **group, size_t *group_len)
{
    size_t plen = cfg->prefix_len;
    if (strncmp(topic, cfg->topic_prefix, plen) != 0 || (topic[plen] != '/' && topic[plen])) {
        return CHAT_TOPIC_NONE;
    }
    if (topic[plen] == '\0') {
        return CHAT_TOPIC_NONE; /* "chat" alone names no group: not ours */
    }
    const char *g = topic + plen + 1;
    const char *slash = strchr(g, '/');
    *group = g;
    if (!slash) {
        *group_len = strlen(g);
        return CHAT_TOPIC_GROUP;
    }
    *group_len = (size_t)(slash - g);
    return strcmp(slash, "/ack") == 0 ? CHAT_TOPIC_ACK : CHAT_TOPIC_BAD;
}

const char *chat_member(const struct chat_plugin *pl, const struct mosquitto *client,
                        char buf[CHAT_MEMBER_BUF], const char **why)
{
    const char *user = mosquitto_client_username(client);
    const char *id = mosquitto_client_id(client);
    bool named = user && user[0];
    const char *name = named ? user : id;
    bool tilde = !named && pl->cfg.names_verified;

    if (!name) {
        *why = "client has no client id";
        return NULL;
    }
    size_t len = strlen(name);
    if (len + tilde > CHAT_STORE_MAX_NAME) {
        *why = "client id or username is longer than 1024 bytes";
        return NULL;
    }
    if (named && name[0] == '~' && pl->cfg.names_verified) {
        *why = "usernames beginning with ~ are reserved on this broker for members without a "
               "username";
        return NULL;
    }
    /* Where the broker verifies usernames, a client id is anyone's to
     * choose: it must never pass for a user of that name. */
    buf[0] = '~';
    memcpy(buf + tilde, name, len + 1);
    return buf;
}
