/* names.c: what the plugin makes of names in network input: chat topics,
 * members, \u0000 escapes (the checks themselves are proto/'s:
 * chat_proto_group_error, chat_proto_member_error). */
#include "plugin.h"

#include <string.h>

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
    if (strcmp(slash, CHAT_PROTO_ACK_SUFFIX) == 0) {
        return CHAT_TOPIC_ACK;
    }
    return strcmp(slash, CHAT_PROTO_READ_SUFFIX) == 0 ? CHAT_TOPIC_READ : CHAT_TOPIC_BAD;
}

const char *chat_member_name(bool tilde_names, bool user_verified, const char *user, const char *id,
                             char buf[CHAT_MEMBER_BUF])
{
    /* A username counts where the broker checked it, or where it checks
     * none (an anonymous broker: names are whatever clients say); a
     * username a listener did not check, beside listeners that do, must
     * not pass for the user it claims: it is named by its client id. */
    bool named = user && user[0] && (user_verified || !tilde_names);
    const char *name = named ? user : id;
    bool tilde = !named && tilde_names;

    if (!name) {
        return "client has no client id";
    }
    size_t len = strlen(name);
    /* The client id names the device (its cursors) even where a username
     * names the member: one the store cannot key is refused here, with
     * the reason, rather than as a storage error at the first join. Where
     * it names the member, len has measured it already; else a bounded
     * look, since this runs on every publish and check. */
    if (len + tilde > CHAT_PROTO_NAME_MAX ||
        (named && id && strnlen(id, CHAT_PROTO_NAME_MAX + 1) > CHAT_PROTO_NAME_MAX)) {
        return "client id or username is longer than 1024 bytes";
    }
    if (named && name[0] == '~' && tilde_names) {
        return "usernames beginning with ~ are reserved on this broker for members without a "
               "username";
    }
    /* Where the broker verifies usernames, a client id is anyone's to
     * choose: it must never pass for a user of that name. */
    buf[0] = '~';
    memcpy(buf + tilde, name, len + 1);
    /* The rule of every member name (proto/, which mqchat-store import
     * applies too): past the length, only a broker that let a control
     * character into a username or client id would fail it. */
    const char *why = chat_proto_member_error(buf, len + tilde);
    if (why) {
        buf[0] = '\0';
    }
    return why;
}
