/* admin_entry.c: the entries the admin commands answer with, and the
 * fields more than one of them reads; below every other admin file (see
 * admin.h). */
#include "admin.h"

#include <stdio.h>
#include <string.h>

void chat_admin_entry_start(const struct chat_admin_req *r, const char *group)
{
    sbuf_puts(r->out, "{\"command\":");
    sbuf_json_str(r->out, r->cmd);
    if (group) {
        sbuf_puts(r->out, ",\"group\":");
        sbuf_json_str(r->out, group);
    }
    if (r->corr) {
        sbuf_puts(r->out, ",\"correlationData\":");
        sbuf_json_str(r->out, r->corr);
    }
}

/* An error entry, and its log line (debug: refusals are the client's). */
void chat_admin_fail(const struct chat_admin_req *r, const char *group, const char *why)
{
    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: %s from %s refused: %s%s%s", r->cmd,
                         r->device, why, group ? " in group " : "", group ? group : "");
    chat_admin_entry_start(r, group);
    sbuf_puts(r->out, ",\"error\":");
    sbuf_json_str(r->out, why);
    sbuf_add(r->out, "}", 1);
}

bool chat_admin_storage_ok(const struct chat_admin_req *r, const char *group, chat_err rc)
{
    if (rc == CHAT_OK) {
        return true;
    }
    chat_log_store_error(r->pl, rc, "%s from %s%s%s", r->cmd, r->device, group ? " in group " : "",
                         group ? group : "");
    chat_admin_fail(r, group, "storage error");
    return false;
}

/* The group field (required), validated into buf. */
const char *chat_admin_group_field(const struct chat_admin_req *r, const cJSON *c, char *buf)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "group");
    const char *why = !g ? "group is missing"
                      : !cJSON_IsString(g)
                          ? "group must be a string"
                          : chat_proto_group_error(g->valuestring, strlen(g->valuestring));
    if (why) {
        chat_admin_fail(r, NULL, why);
        return NULL;
    }
    snprintf(buf, CHAT_GROUP_MAX + 1, "%s", g->valuestring);
    return buf;
}
