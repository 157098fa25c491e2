/* reply.c: everything the plugin sends a client: answers and error entries
 * (through the client's answer budget), pushes, replay pages, and the page writer
 * that splices stored envelopes into them. It depends on nothing else of the
 * plugin but the budget (peer_table.c), so every part may answer through it. */
#include "reply.h"

#include <stdio.h>
#include <string.h>

/* Publishes b to client_id alone, on topic (NULL: the response topic),
 * with MQTT 5 correlation data when corr is not NULL. */
void chat_reply_send(struct chat_plugin *pl, const char *client_id, const char *topic,
                     const void *corr, uint16_t corr_len, sbuf *b)
{
    size_t len = 0;
    mosquitto_property *props = NULL;
    char *payload = sbuf_take(b, &len);
    if (!payload) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory answering %s", client_id);
        return;
    }
    if (corr && mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, corr, corr_len)) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory answering %s", client_id);
        mosquitto_free(payload);
        return;
    }
    int rc = mosquitto_broker_publish(client_id, topic ? topic : CHAT_RESPONSE_TOPIC, (int)len,
                                      payload, pl->cfg.page_qos, false, props);
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: cannot answer %s: error %d", client_id,
                             rc);
        mosquitto_free(payload);
        mosquitto_property_free_all(&props);
    }
}

bool chat_push(struct chat_plugin *pl, const char *client_id, const char *payload, size_t len)
{
    if (!chat_budget_left(pl, client_id)) {
        return false;
    }
    chat_budget_spend(pl, client_id, len);
    /* The broker takes a copy of its own per client. */
    int rc = mosquitto_broker_publish_copy(client_id, CHAT_RESPONSE_TOPIC, (int)len, payload,
                                           pl->cfg.page_qos, false, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: cannot push to %s: error %d", client_id,
                             rc);
        return false;
    }
    return true;
}

void chat_send(struct chat_plugin *pl, const char *client_id, sbuf *b)
{
    chat_reply_send(pl, client_id, NULL, NULL, 0, b);
}

void chat_entry_error(sbuf *b, const char *cmd, const char *group, const char *cid, const char *why)
{
    sbuf_puts(b, "{\"command\":");
    sbuf_json_str(b, cmd);
    if (group) {
        sbuf_puts(b, ",\"group\":");
        sbuf_json_str(b, group);
    }
    if (cid) {
        sbuf_puts(b, ",\"cid\":");
        sbuf_json_str(b, cid);
    }
    sbuf_puts(b, ",\"error\":");
    sbuf_json_str(b, why);
    sbuf_add(b, "}", 1);
}

size_t chat_answer_cap(const struct chat_config *cfg)
{
    /* Room for one page of page_bytes, whose last envelope may overshoot it
     * by one envelope of up to 6 x max_payload (escaping), and the rest. */
    size_t page = cfg->page_bytes + 6 * cfg->max_payload + 16384;
    return page > (1u << 20) ? page : (1u << 20);
}

/* Sends an answer to client_id through its budget (see chat_budget_check):
 * b is sent whole when the budget allows, replaced by a short error when
 * the client is over it, dropped (and b freed) past that. */
static void answer(struct chat_plugin *pl, const char *client_id, const char *topic,
                   const void *corr, uint16_t corr_len, sbuf *b)
{
    switch (chat_budget_check(pl, client_id)) {
    case CHAT_BUDGET_OK:
        break;
    case CHAT_BUDGET_SLOW_DOWN:
        sbuf_free(b);
        sbuf_puts(b, "{\"responses\":[");
        chat_entry_error(b, "request", NULL, NULL,
                         "too many requests: answers to one client are limited to about 2 MiB "
                         "per second; wait and retry");
        sbuf_puts(b, "]}");
        break;
    case CHAT_BUDGET_DROP:
        sbuf_free(b);
        return;
    }
    chat_budget_spend(pl, client_id, b->len);
    chat_reply_send(pl, client_id, topic, corr, corr_len, b);
}

void chat_respond_error(struct chat_plugin *pl, const struct mosquitto *client, const char *cmd,
                        const char *group, const char *cid, const char *why)
{
    const char *id = mosquitto_client_id(client);
    sbuf b = {0};

    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: %s from %s refused: %s%s%s", cmd,
                         id ? id : "?", why, group ? " in group " : "", group ? group : "");
    if (!id) {
        return;
    }
    sbuf_puts(&b, "{\"responses\":[");
    chat_entry_error(&b, cmd, group, cid, why);
    sbuf_puts(&b, "]}");
    answer(pl, id, NULL, NULL, 0, &b);
}

void chat_respond_duplicate(struct chat_plugin *pl, const struct mosquitto *client,
                            const char *group, const char *cid, uint64_t id)
{
    const char *device = mosquitto_client_id(client);
    sbuf b = {0};

    if (!device) {
        return;
    }
    sbuf_puts(&b, "{\"responses\":[{\"command\":\"publish\",\"group\":");
    sbuf_json_str(&b, group);
    if (cid) {
        sbuf_puts(&b, ",\"cid\":");
        sbuf_json_str(&b, cid);
    }
    sbuf_puts(&b, ",\"id\":");
    sbuf_u64(&b, id);
    sbuf_puts(&b, ",\"duplicate\":true}]}");
    answer(pl, device, NULL, NULL, 0, &b);
}

void chat_page_begin(struct chat_page_writer *w, sbuf *b, const char *command, const char *group,
                     const char *corr)
{
    w->b = b;
    w->first = w->last = 0;
    w->count = 0;
    w->expect = 0;
    w->hole_from = w->hole_to = 0;
    sbuf_puts(b, "{\"command\":");
    sbuf_json_str(b, command);
    sbuf_puts(b, ",\"group\":");
    sbuf_json_str(b, group);
    if (corr) {
        sbuf_puts(b, ",\"correlationData\":");
        sbuf_json_str(b, corr);
    }
    sbuf_puts(b, ",\"messages\":[");
}

int chat_page_add(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct chat_page_writer *w = ctx;
    if (w->expect && id != w->expect) {
        w->hole_from = w->expect;
        w->hole_to = id - 1;
        return 1;
    }
    w->expect = w->expect ? id + 1 : 0;
    if (w->count++) {
        sbuf_add(w->b, ",", 1);
    } else {
        w->first = id;
    }
    w->last = id;
    sbuf_add(w->b, data, len);
    return w->b->failed ? 1 : 0;
}

/* bounds: write first/last (a forward page); a history page, listed newest
 * first, carries only "more". */
void chat_page_end(struct chat_page_writer *w, uint64_t head, bool more, bool truncated,
                   bool bounds, const char *incarnation)
{
    sbuf *b = w->b;
    sbuf_add(b, "]", 1);
    if (w->count && bounds) {
        sbuf_puts(b, ",\"first\":");
        sbuf_u64(b, w->first);
        sbuf_puts(b, ",\"last\":");
        sbuf_u64(b, w->last);
    }
    sbuf_puts(b, ",\"head\":");
    sbuf_u64(b, head);
    sbuf_puts(b, more ? ",\"more\":true" : ",\"more\":false");
    if (truncated) {
        sbuf_puts(b, ",\"truncated\":true");
    }
    sbuf_puts(b, ",\"incarnation\":");
    sbuf_json_str(b, incarnation);
    sbuf_add(b, "}", 1);
}

void chat_page_entry(sbuf *b, const char *command, const char *group, const char *corr,
                     const chat_page *page, uint64_t head, bool more, bool truncated, bool bounds,
                     const char *incarnation)
{
    struct chat_page_writer w;
    chat_page_begin(&w, b, command, group, corr);
    for (size_t i = 0; i < page->count; i++) {
        chat_page_add(&w, page->msgs[i].id, page->msgs[i].data, page->msgs[i].len);
    }
    chat_page_end(&w, head, more, truncated, bounds, incarnation);
}

/* Sends the device one error entry about group: its catch-up cannot go on. */
void chat_reply_replay_error(struct chat_plugin *pl, const char *client_id, const char *group,
                             uint64_t id, const char *why)
{
    sbuf b = {0};
    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: catch-up of %s in %s: %s", client_id,
                         group, why);
    sbuf_puts(&b, "{\"responses\":[{\"command\":\"replay\",\"group\":");
    sbuf_json_str(&b, group);
    if (id) {
        sbuf_puts(&b, ",\"id\":");
        sbuf_u64(&b, id);
    }
    sbuf_puts(&b, ",\"error\":");
    sbuf_json_str(&b, why);
    sbuf_puts(&b, "}]}");
    chat_send(pl, client_id, &b);
}

bool chat_publish_group(struct chat_plugin *pl, const char *group, uint64_t id, const void *env,
                        size_t len, const char *what)
{
    char topic[CHAT_GROUP_MAX + 256];
    snprintf(topic, sizeof(topic), "%s/%s", pl->cfg.topic_prefix, group);
    int rc = mosquitto_broker_publish_copy(NULL, topic, (int)len, env, 1, false, NULL);
    if (rc != MOSQ_ERR_SUCCESS) {
        mosquitto_log_printf(MOSQ_LOG_WARNING,
                             "mosquitto-chat: cannot %s message %llu of %s: error %d", what,
                             (unsigned long long)id, group, rc);
        return false;
    }
    return true;
}
