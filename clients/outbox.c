/* outbox.c: sends until the broker acknowledges them (see outbox.h). */
#include "outbox.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INFLIGHT 32 /* sends awaiting PUBACK at once */

void chat_outbox_init(chat_outbox *ob, const struct chat_outbox_cfg *cfg)
{
    memset(ob, 0, sizeof *ob);
    ob->cfg = *cfg;
    atomic_init(&ob->admitted, 0);
    atomic_init(&ob->cids, 0);
}

bool chat_outbox_admit(chat_outbox *ob, char cid[CHAT_PROTO_CID_MAX + 1])
{
    size_t n = atomic_load(&ob->admitted);

    do {
        if (n >= ob->cfg.max)
            return false;
    } while (!atomic_compare_exchange_weak(&ob->admitted, &n, n + 1));
    if (cid[0] == '\0')
        snprintf(cid, CHAT_PROTO_CID_MAX + 1, "%s-%" PRIuFAST64, ob->cfg.cid_prefix,
                 atomic_fetch_add(&ob->cids, 1) + 1);
    return true;
}

void chat_outbox_release(chat_outbox *ob)
{
    atomic_fetch_sub(&ob->admitted, 1);
}

static void entry_free(struct outmsg *m)
{
    free(m->group);
    free(m->topic);
    free(m->payload);
    free(m);
}

bool chat_outbox_add(chat_outbox *ob, char *group, char *payload, const char *cid)
{
    struct outmsg *m = calloc(1, sizeof *m);

    if (m == NULL || (m->topic = malloc(strlen(ob->cfg.prefix) + strlen(group) + 2)) == NULL) {
        free(m);
        chat_outbox_release(ob);
        chat_notify_error(ob->cfg.notify, group, "out of memory: message %s not sent", cid);
        free(group);
        free(payload);
        return false;
    }
    sprintf(m->topic, "%s/%s", ob->cfg.prefix, group);
    m->seq = ++ob->seq;
    m->group = group;
    m->payload = payload;
    snprintf(m->cid, sizeof m->cid, "%s", cid);
    if (ob->tail != NULL)
        ob->tail->next = m;
    else
        ob->head = m;
    ob->tail = m;
    return true;
}

/* Finishes an entry: removes it and counts it out of admitted. */
static void remove_entry(chat_outbox *ob, struct outmsg *m)
{
    struct outmsg **pp = &ob->head, *prev = NULL;

    while (*pp != NULL && *pp != m) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    assert(m != NULL && *pp == m && !m->pending);
    *pp = m->next;
    if (ob->tail == m)
        ob->tail = prev;
    chat_outbox_release(ob);
    entry_free(m);
}

void chat_outbox_pump(chat_outbox *ob)
{
    uint32_t epoch = chat_paho_epoch(ob->cfg.paho);

    for (struct outmsg *m = ob->head;
         m != NULL && chat_paho_up(ob->cfg.paho) && ob->inflight < MAX_INFLIGHT; m = m->next) {
        struct chat_op op = {.kind = CHAT_OP_MESSAGE, .ref = m->seq};
        int rc;
        if (m->pending || m->sent_epoch == epoch)
            continue;
        m->sent_epoch = epoch;
        rc = chat_paho_publish(ob->cfg.paho, m->topic, m->payload, strlen(m->payload), ob->cfg.qos,
                               &op);
        if (rc == MQTTASYNC_DISCONNECTED)
            break; /* the loss is on its way to us; everything goes after the connect */
        if (rc != MQTTASYNC_SUCCESS) {
            chat_notify_error(ob->cfg.notify, m->group,
                              "cannot publish message %s: %s (sent again after the next "
                              "connect)",
                              m->cid, MQTTAsync_strerror(rc));
            continue;
        }
        m->pending = true;
        ob->inflight++;
    }
}

void chat_outbox_done(chat_outbox *ob, uint64_t seq, bool ok, int code)
{
    struct outmsg *m;

    for (m = ob->head; m != NULL && m->seq != seq; m = m->next)
        ;
    if (m == NULL)
        return;
    m->pending = false;
    ob->inflight--;
    if (ok) {
        remove_entry(ob, m);
    } else if (code >= 0x80) {
        /* MQTT 5: refused (0x87 from the plugin); the error entry with the
         * reason follows on the response topic. */
        ob->refused++;
        remove_entry(ob, m);
    }
    /* Otherwise the connection broke: sent again after the connect. */
    chat_outbox_pump(ob);
}

void chat_outbox_connection_ended(chat_outbox *ob)
{
    ob->inflight = 0;
    for (struct outmsg *m = ob->head; m != NULL; m = m->next)
        m->pending = false;
}

bool chat_outbox_empty(const chat_outbox *ob)
{
    return ob->head == NULL;
}

void chat_outbox_count_refused(chat_outbox *ob)
{
    ob->refused++;
}

size_t chat_outbox_take_refused(chat_outbox *ob)
{
    size_t n = ob->refused;

    ob->refused = 0;
    return n;
}

void chat_outbox_free(chat_outbox *ob)
{
    while (ob->head != NULL) {
        struct outmsg *m = ob->head;
        ob->head = m->next;
        entry_free(m);
    }
    ob->tail = NULL;
}
