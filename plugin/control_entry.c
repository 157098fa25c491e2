/* control_entry.c: the entries the commands on $CONTROL/chat/v1 answer
 * with, and the fields more than one of them reads; below every other
 * control file (see control.h). */
#include "control.h"

#include <stdio.h>
#include <string.h>

void chat_control_fail(struct chat_control_req *r, const char *why)
{
    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: %s from %s refused: %s%s%s", r->cmd,
                         r->device, why, r->group ? " in group " : "", r->group ? r->group : "");
    chat_control_entry_start(r);
    sbuf_puts(r->out, ",\"error\":");
    sbuf_json_str(r->out, why);
    sbuf_add(r->out, "}", 1);
}

bool chat_control_int_field(struct chat_control_req *r, const cJSON *c, const char *name,
                            uint64_t lo, bool *present, uint64_t *out)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, name);
    *present = f != NULL;
    if (!f) {
        return true;
    }
    if (!cJSON_IsNumber(f) || !chat_proto_json_int(f->valuedouble, lo, out)) {
        static char why[96];
        snprintf(why, sizeof(why), "%s must be an integer from %llu to 2^53-1", name,
                 (unsigned long long)lo);
        chat_control_fail(r, why);
        return false;
    }
    return true;
}

bool chat_control_group_field(struct chat_control_req *r, const cJSON *c, char *buf)
{
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "group");
    if (!g) {
        chat_control_fail(r, "group is missing");
        return false;
    }
    if (!cJSON_IsString(g)) {
        chat_control_fail(r, "group must be a string");
        return false;
    }
    const char *why = chat_proto_group_error(g->valuestring, strlen(g->valuestring));
    if (why) {
        chat_control_fail(r, why);
        return false;
    }
    strcpy(buf, g->valuestring);
    r->group = buf;
    return true;
}

bool chat_control_storage_ok(struct chat_control_req *r, chat_err rc)
{
    if (rc != CHAT_OK) {
        chat_log_store_error(r->pl, rc, "%s from %s%s%s", r->cmd, r->device,
                             r->group ? " in group " : "", r->group ? r->group : "");
        chat_control_fail(r, "storage error");
        return false;
    }
    return true;
}

void chat_control_entry_start(struct chat_control_req *r)
{
    sbuf_puts(r->out, "{\"command\":");
    sbuf_json_str(r->out, r->cmd);
    if (r->group) {
        sbuf_puts(r->out, ",\"group\":");
        sbuf_json_str(r->out, r->group);
    }
    if (r->corr) {
        sbuf_puts(r->out, ",\"correlationData\":");
        sbuf_json_str(r->out, r->corr);
    }
}
