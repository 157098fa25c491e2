/* receipts.c: read markers and presence, client side (see receipts.h). */
#include "receipts.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "proto.h"

void chat_receipts_init(chat_receipts *r, const struct chat_receipts_cfg *cfg)
{
    memset(r, 0, sizeof *r);
    r->cfg = *cfg;
}

/* What of g may go out now (read-not-past-shown), 0: nothing. A read also acks
 * the device (docs/protocol.md, read), so with a state file it goes no
 * further than the file records, as an ack (delivery.h, state-before-ack). */
static uint64_t sendable(const chat_receipts *r, const struct chat_group *g)
{
    uint64_t id = g->read_want;
    if (g->listening) {
        if (!g->seq.known)
            return 0;
        if (id > g->seq.shown)
            id = g->seq.shown;
        if (r->cfg.state && id > g->recorded)
            id = g->recorded;
    }
    return id > g->read_sent && id > g->read_done ? id : 0;
}

static void publish(chat_receipts *r, struct chat_group *g, uint64_t id, int64_t now)
{
    struct chat_op op = {.kind = CHAT_OP_READ, .ptr = g, .ref = id};
    char topic[CHAT_PROTO_GROUP_MAX + 256], payload[32];
    int rc;

    snprintf(topic, sizeof topic, "%s/%s" CHAT_PROTO_READ_SUFFIX, r->cfg.prefix, g->name);
    snprintf(payload, sizeof payload, "%" PRIu64, id);
    rc = chat_paho_publish(r->cfg.paho, topic, payload, strlen(payload), 1, &op);
    if (rc != MQTTASYNC_SUCCESS) {
        if (rc != MQTTASYNC_DISCONNECTED) /* else it goes after the next connect */
            chat_notify_error(r->cfg.notify, g->name, "cannot publish a read: %s",
                              MQTTAsync_strerror(rc));
        return;
    }
    r->inflight++;
    g->read_sent = id;
    g->read_last = now;
}

/* Publishes g's read if there is one and (unless now is 0: at once) its
 * interval is over. */
static void maybe_publish(chat_receipts *r, struct chat_group *g, int64_t now)
{
    uint64_t id;

    if (!chat_paho_up(r->cfg.paho) || (id = sendable(r, g)) == 0)
        return;
    if (now != 0 && g->read_last != 0 && now < g->read_last + r->cfg.interval_ms)
        return;
    publish(r, g, id, now != 0 ? now : chat_now_ms());
}

void chat_receipts_want(chat_receipts *r, struct chat_group *g, uint64_t id)
{
    if (id <= g->read_want)
        return;
    g->read_want = id;
    maybe_publish(r, g, chat_now_ms());
}

void chat_receipts_tick(chat_receipts *r, int64_t now)
{
    for (struct chat_group *g = r->cfg.groups->head; g != NULL; g = g->next)
        if (g->read_want > g->read_done)
            maybe_publish(r, g, now);
}

int64_t chat_receipts_next_wake(const chat_receipts *r, int64_t t)
{
    if (!chat_paho_up(r->cfg.paho))
        return t; /* the connect brings them */
    for (const struct chat_group *g = r->cfg.groups->head; g != NULL; g = g->next) {
        if (sendable(r, g) == 0)
            continue;
        int64_t due = g->read_last + r->cfg.interval_ms;
        if (due < t)
            t = due;
    }
    return t;
}

void chat_receipts_flush(chat_receipts *r)
{
    for (struct chat_group *g = r->cfg.groups->head; g != NULL; g = g->next)
        maybe_publish(r, g, 0);
}

void chat_receipts_done(chat_receipts *r, struct chat_group *g, uint64_t id, bool ok)
{
    if (r->inflight > 0)
        r->inflight--;
    if (ok && id > g->read_done)
        g->read_done = id;
}

void chat_receipts_connection_ended(chat_receipts *r)
{
    r->inflight = 0;
    for (struct chat_group *g = r->cfg.groups->head; g != NULL; g = g->next) {
        g->read_sent = 0;
        g->read_last = 0;
    }
}

void chat_receipts_push(const chat_receipts *r, const cJSON *entry)
{
    const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
    const cJSON *grp = cJSON_GetObjectItemCaseSensitive(entry, "group");
    const cJSON *item;
    chat_client_event ev;

    if (!cJSON_IsString(grp))
        return;
    memset(&ev, 0, sizeof ev);
    ev.group = grp->valuestring;
    if (strcmp(cmd->valuestring, "reads") == 0) {
        ev.type = CHAT_CLIENT_EV_READ;
        cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(entry, "reads"))
        {
            if (item->string == NULL || !chat_json_u64(item, 0, &ev.id))
                continue;
            ev.member = item->string;
            chat_notify_event(r->cfg.notify, &ev);
        }
        return;
    }
    /* presence: who came, then who went */
    ev.type = CHAT_CLIENT_EV_PRESENCE;
    for (int online = 1; online >= 0; online--) {
        ev.online = online == 1;
        cJSON_ArrayForEach(item,
                           cJSON_GetObjectItemCaseSensitive(entry, online ? "online" : "offline"))
        {
            if (!cJSON_IsString(item))
                continue;
            ev.member = item->valuestring;
            chat_notify_event(r->cfg.notify, &ev);
        }
    }
}
