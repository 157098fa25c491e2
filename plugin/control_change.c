/* control_change.c: recall and edit (protocol v1.2), the commands that
 * change a stored message N: the checks (who, which message, how late),
 * the one store write that rewrites N and stores the message M carrying
 * the change (chat_store_change), and M's live delivery through the broker
 * (see control.h).
 *
 * What a change is, for everything after the store: M is a message like
 * any other, with the next id. It reaches the group's subscribers live
 * (published through the broker, so that each delivery passes the read
 * check of chat.c as a publish's does), devices catching up or fetching in
 * id order, and it counts in unread (head - max(acked, read)) and is
 * covered by read markers like any id: ids stay dense and a read marker
 * stays one number. Its sender has read it, as a publish's sender has. It
 * never notifies: push notifications are for new messages (see
 * withdraw_text). */
#include "access.h"
#include "control.h"
#include "push.h"
#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often a change is decided again when the message changed between the
 * read and the write (only a store that other brokers write can do that). */
#define CHANGE_ATTEMPTS 3

/* Edit carriers remembered (struct chat_changes). */
#define PASS_CARRIERS_MAX 64

/* The edit carriers (each an edit's M) published live lately, with the
 * pass of the broker's loop each was published in, for a recall made later
 * in the same pass.
 *
 * The broker sends what a plugin publishes at the start of its loop's next
 * pass (queue_plugin_msgs in src/loop.c; the broker's tick comes once a
 * pass, between one pass's client events and the next's: chat_tick_pass),
 * and each subscriber's delivery then passes chat.c's read check against
 * the store. A recall in the same pass (the same request [edit 1, edit 1,
 * recall 1], or another in that pass) rewrites the carriers of the edits
 * it takes back before they go out, so their deliveries match no stored
 * envelope and are refused, for everyone: rightly, their text is recalled.
 * But subscribers would then see a gap in the live ids (1, then 4) until
 * their next catch-up, and a client that acks what it holds without a gap
 * would stay behind it. So the recall publishes the tombstone of each
 * carrier it rewrote that was published in this pass (send_tombstones),
 * before its own M: subscribers get 2, 3, 4 in order. The tombstones pass
 * the read check (the store holds them) and fanout.c's (which never saw
 * the refused originals, nor keeps a change's M). A carrier published in
 * an earlier pass went out already, with its text (protocol.md, What no
 * recall reaches): nothing to do.
 *
 * Without the broker's ticks (2.0.11 with per_listener_settings true) the
 * pass number moves on from client events, every 200 ms or so, and may do
 * so between an edit and a recall of one pass: there a carrier of the
 * number before counts too. So "this pass" spans several, and a carrier
 * that went out already may get its tombstone too; as may one whose
 * group's hash is another's. That second copy of an id is harmless:
 * subscribers drop an id they hold (protocol.md, "Ids are the only key to
 * drop a duplicate"), and the recall's M that follows changes the message
 * on screen anyway.
 *
 * The last PASS_CARRIERS_MAX (64) carriers published are remembered, the
 * oldest forgotten first: one request holds far fewer edits, but many
 * clients' edits in one busy pass may hold more. A recall in the same pass
 * of an edit forgotten here publishes no tombstone of its carrier: its
 * subscribers get that tombstone by catch-up (as all did before this
 * record). */
struct chat_changes {
    struct {
        uint64_t group; /* its group, as group_hash */
        uint64_t id;    /* its id (0: a slot never used) */
        uint64_t pass;  /* the pass it was published in (chat_tick_pass) */
    } sent[PASS_CARRIERS_MAX];
    size_t next; /* the slot of the next one: the oldest's */
};

bool chat_control_change_init(struct chat_plugin *pl)
{
    pl->changes = calloc(1, sizeof(*pl->changes));
    return pl->changes != NULL;
}

void chat_control_change_free(struct chat_plugin *pl)
{
    free(pl->changes);
    pl->changes = NULL;
}

/* FNV-1a of a group's name: a record of 64 holds no names. */
static uint64_t group_hash(const char *group)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)group; *p; p++) {
        h = (h ^ *p) * 1099511628211ull;
    }
    return h;
}

/* Notes that the carrier id of group was published live now. */
static void note_carrier(struct chat_plugin *pl, const char *group, uint64_t id)
{
    struct chat_changes *c = pl->changes;
    if (!c) {
        return; /* a fixture that made no states */
    }
    c->sent[c->next].group = group_hash(group);
    c->sent[c->next].id = id;
    c->sent[c->next].pass = chat_tick_pass(pl);
    c->next = (c->next + 1) % PASS_CARRIERS_MAX;
}

/* Whether the carrier id of group (hashed h) was published in this pass
 * (without the broker's ticks, in this one or the one before). */
static bool published_now(const struct chat_plugin *pl, uint64_t h, uint64_t id)
{
    const struct chat_changes *c = pl->changes;
    uint64_t now = chat_tick_pass(pl);
    bool ticks = chat_tick_seen(pl);
    for (size_t i = 0; c && i < PASS_CARRIERS_MAX; i++) {
        if (c->sent[i].id == id && c->sent[i].group == h &&
            (c->sent[i].pass == now || (!ticks && c->sent[i].pass + 1 == now))) {
            return true;
        }
    }
    return false;
}

/* What one recall or edit is about. */
struct change_req {
    struct chat_control_req *r;
    bool recall;                      /* else an edit */
    bool admin;                       /* the caller is an admin (recall: any message, any time) */
    uint64_t id;                      /* N */
    const cJSON *fields;              /* edit: the command, whose fields are N's new ones */
    chat_appended ap;                 /* M, once stored */
    struct chat_envelope_facts facts; /* N's, as last read */
    size_t carriers;                  /* recall: the edit carriers it rewrote */
};

/* Who may change messages of group (the one access policy, access.h): a
 * member whom the broker lets read and write the group (CHAT_DO_CHANGE),
 * or, for a recall, an admin (a verified username), who need not be a
 * member (moderation). Returns NULL or the reason. */
static const char *may_change(struct change_req *q, const char *group)
{
    struct chat_control_req *r = q->r;
    q->admin = chat_access_decide(r->pl, r->client, NULL, CHAT_DO_ADMIN).verdict == CHAT_ALLOW;
    if (q->admin && q->recall) {
        return NULL;
    }
    return chat_access_decide(r->pl, r->client, group, CHAT_DO_CHANGE).why;
}

/* Whether a change of N (facts f) by r->member may be made now: NULL, or
 * the protocol's reason. */
static const char *may_change_message(const struct change_req *q)
{
    const struct chat_envelope_facts *f = &q->facts;
    const struct chat_config *cfg = &q->r->pl->cfg;
    if (f->recalled) {
        return CHAT_PROTO_ERR_RECALLED;
    }
    if (f->change) {
        return CHAT_PROTO_ERR_CHANGE_FINAL;
    }
    /* A recall rewrites every message that carried an edit of N, in one
     * write: the bound of that write (CHAT_STORE_REWRITES_MAX). */
    if (!q->recall && (f->nedits >= CHAT_PROTO_EDITS_MAX || f->edits_over)) {
        return CHAT_PROTO_ERR_EDITS_MAX;
    }
    bool sender = strcmp(f->from, q->r->member) == 0;
    if (!sender && !(q->recall && q->admin)) {
        return q->recall ? CHAT_PROTO_ERR_RECALL_SENDER : CHAT_PROTO_ERR_EDIT_SENDER;
    }
    /* Admins recall at any time (moderation); the window is the sender's. */
    if (q->recall && q->admin) {
        return NULL;
    }
    /* 0 turns it off; a clock behind the store's (another broker's, the
     * database's) makes a message younger, never too late. */
    uint64_t window_ms = 1000ull * (q->recall ? cfg->recall_seconds : cfg->edit_seconds);
    int64_t age = chat_now_ms() - q->facts.ts;
    if (window_ms == 0 || (age > 0 && (uint64_t)age > window_ms)) {
        return q->recall ? CHAT_PROTO_ERR_RECALL_LATE : CHAT_PROTO_ERR_EDIT_LATE;
    }
    return NULL;
}

_Static_assert(CHAT_PROTO_EDITS_MAX <= CHAT_STORE_REWRITES_MAX,
               "a recall rewrites every edit carrier in one store write");

/* The earlier edit carriers a recall rewrites (recall-complete): their
 * bytes as read (free()) and their tombstones (mosquitto_free). */
struct carriers {
    chat_rewrite rw[CHAT_PROTO_EDITS_MAX];
    char *text[CHAT_PROTO_EDITS_MAX];
    char *expect[CHAT_PROTO_EDITS_MAX];
    size_t n;
};

static void carriers_free(struct carriers *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->expect[i]);
        mosquitto_free(c->text[i]);
    }
    c->n = 0;
}

/* For a recall of N: each message N's list names that is what the list
 * says, an edit of N by N's sender not yet rewritten, with its tombstone
 * (chat_envelope_carrier_tombstone). Anything else the list names (a
 * message an older broker stored with a list of its own) is left as it
 * is: it holds none of N's texts. At most CHAT_PROTO_EDITS_MAX reads.
 * Returns NULL, or the reason (a store error logged). */
static const char *find_carriers(struct change_req *q, const char *group, struct carriers *c)
{
    struct chat_control_req *r = q->r;
    struct chat_envelope_facts cf;
    for (size_t i = 0; i < q->facts.nedits; i++) {
        uint64_t m = q->facts.edits[i];
        chat_msg cm = {0};
        bool found = false;
        if (m <= q->id) {
            continue;
        }
        r->work++;
        chat_err rc = chat_store_get(r->pl->store, group, m, &cm, &found);
        if (rc != CHAT_OK) {
            chat_log_store_error(r->pl, rc, "recall of message %llu of %s by %s: its edit %llu",
                                 (unsigned long long)q->id, group, r->device,
                                 (unsigned long long)m);
            return "storage error";
        }
        if (!found || chat_envelope_facts(cm.data, cm.len, &cf) != NULL || cf.edit_of != q->id ||
            cf.recalled || strcmp(cf.from, q->facts.from) != 0) {
            free(cm.data);
            continue;
        }
        size_t len = 0;
        char *text = chat_envelope_carrier_tombstone(&cf, group, m, q->id, &len);
        if (!text) {
            free(cm.data);
            return "out of memory";
        }
        c->expect[c->n] = cm.data;
        c->text[c->n] = text;
        c->rw[c->n] = (chat_rewrite){
            .id = m, .expect = cm.data, .expect_len = cm.len, .text = text, .text_len = len};
        c->n++;
    }
    return NULL;
}

/* A recall rewrote the carriers cs: the tombstone of each one published in
 * this pass goes out in its place (struct chat_changes), before the
 * recall's M (after_change). */
static void send_tombstones(struct chat_plugin *pl, const char *group, const struct carriers *cs)
{
    uint64_t h = group_hash(group);
    for (size_t i = 0; i < cs->n; i++) {
        const chat_rewrite *rw = &cs->rw[i];
        if (published_now(pl, h, rw->id)) {
            (void)chat_publish_group(pl, group, rw->id, rw->text, rw->text_len, "publish live");
        }
    }
}

/* Reads N, decides, and makes the change in one store write; again when N
 * changed in between (CHANGE_ATTEMPTS). Returns NULL with q->ap holding M,
 * or the reason (a store error logged). */
static const char *change_message(struct change_req *q, const char *group)
{
    struct chat_control_req *r = q->r;
    chat_store *st = r->pl->store;

    for (int attempt = 0; attempt < CHANGE_ATTEMPTS; attempt++) {
        chat_msg n = {0};
        bool found = false, applied = false;
        char *buf = NULL;
        chat_change ch = {0};
        struct carriers cs = {.n = 0};
        r->work++;
        chat_err rc = chat_store_get(st, group, q->id, &n, &found);
        if (rc != CHAT_OK) {
            chat_log_store_error(r->pl, rc, "%s of message %llu of %s by %s", r->cmd,
                                 (unsigned long long)q->id, group, r->device);
            return "storage error";
        }
        /* Never stored, or gone with retention or a deletion. */
        if (!found) {
            return CHAT_PROTO_ERR_NO_MESSAGE;
        }
        const char *why = chat_envelope_facts(n.data, n.len, &q->facts);
        if (why) {
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: message %llu of %s: %s",
                                 (unsigned long long)q->id, group, why);
        }
        if (!why) {
            why = may_change_message(q);
        }
        if (!why) {
            why = chat_envelope_change(&q->facts, group, r->member, q->id,
                                       q->recall ? NULL : q->fields, r->pl->cfg.max_payload, &ch,
                                       &buf);
        }
        if (!why && q->recall) {
            why = find_carriers(q, group, &cs);
        }
        if (why) {
            carriers_free(&cs);
            mosquitto_free(buf);
            free(n.data);
            return why;
        }
        ch.expect = n.data;
        ch.expect_len = n.len;
        ch.rewrites = cs.rw;
        ch.nrewrites = cs.n;
        rc = chat_store_change(st, group, r->member, &ch, &q->ap, &applied);
        if (rc == CHAT_OK && applied) {
            send_tombstones(r->pl, group, &cs);
        }
        q->carriers = cs.n;
        carriers_free(&cs);
        free(n.data);
        mosquitto_free(buf);
        if (rc != CHAT_OK) {
            chat_log_store_error(r->pl, rc, "%s of message %llu of %s by %s", r->cmd,
                                 (unsigned long long)q->id, group, r->device);
            return "storage error";
        }
        if (applied) {
            return NULL;
        }
    }
    return "the message changed meanwhile: try again";
}

/* Push notifications (plugin/push*.c, protocol v1.2) wake offline members
 * for new messages; a change is not one, so M is never handed to them (the
 * append path calls chat_push_stored for a publish; this path does not).
 * But a notification of N decided before the change may still be on its
 * way with N's text (push_body): deferred for push_interval, in a walk
 * that spans ticks, queued or retried by the sender. A recall takes its
 * text back, an edit replaces it. */
static void withdraw_text(struct chat_plugin *pl, const char *group, uint64_t n)
{
    chat_push_changed(pl, group, n);
}

/* M is stored: the same afterwards as for a publish (figures, the batch
 * sync without ticks, retention_count), then its live delivery. */
static void after_change(struct change_req *q, const char *group)
{
    struct chat_plugin *pl = q->r->pl;
    chat_err err;

    pl->stats.stored++;
    if (pl->cfg.fsync == CHAT_SYNC_BATCH && !chat_tick_seen(pl) && !chat_store_shared(pl->store) &&
        (err = chat_store_sync(pl->store)) != CHAT_OK) {
        /* Stored; only its durability is in doubt, as the log says. */
        chat_log_store_error(pl, err, "sync after a %s in %s", q->r->cmd, group);
    }
    /* The cache below answers its deliveries' read checks. An edit's M is
     * noted, for a recall later in this pass (struct chat_changes). */
    if (chat_publish_group(pl, group, q->ap.id, q->ap.env, q->ap.len, "publish live") &&
        !q->recall) {
        note_carrier(pl, group, q->ap.id);
    }
    /* M replaces whatever the cache held, so that no earlier edit carrier
     * the recall rewrote (the cache holds the last envelope stored) passes
     * a delivery's read check with its old text from here on: a delivery
     * of it checked again (a kept session's queue, at its reconnect) finds
     * the store's tombstone. One already queued for a connected client was
     * checked when queued and goes as it is (protocol.md, What no recall
     * reaches). */
    chat_envelope_cache_put(pl, group, q->ap.id, q->ap.env, q->ap.len);
    q->ap.env = NULL;
    withdraw_text(pl, group, q->id);
    chat_retention_count(pl, group, q->ap.id);
    /* M is the sender's own message: the store moved its read marker to
     * M (q->ap.read) in the write that stored it, as for a publish, so
     * its sync counts nothing up to M unread and receipts show it. Not
     * pushed, as a publish's is not (chat.c): its next read pushes it. */
    bool moderated = q->admin && strcmp(q->facts.from, q->r->member) != 0;
    char also[80] = "";
    if (q->carriers) {
        snprintf(also, sizeof(also), " (and the %zu messages that carried its edits)", q->carriers);
    }
    mosquitto_log_printf(moderated ? MOSQ_LOG_NOTICE : MOSQ_LOG_DEBUG,
                         "mosquitto-chat: %s %s message %llu of %s (sent by %s): message %llu%s",
                         q->r->member, q->recall ? "recalled" : "edited", (unsigned long long)q->id,
                         group, q->facts.from, (unsigned long long)q->ap.id, also);
}

/* Whether the members of item hold U+0001 in a key or a string, at any
 * depth (bounded by cJSON's nesting limit), but its correlationData. */
static bool holds_u0001(const cJSON *item)
{
    for (const cJSON *it = item->child; it; it = it->next) {
        if (it->string && !strcmp(it->string, "correlationData")) {
            continue;
        }
        if ((it->string && strchr(it->string, '\x01')) ||
            (cJSON_IsString(it) && strchr(it->valuestring, '\x01')) ||
            ((cJSON_IsObject(it) || cJSON_IsArray(it)) && holds_u0001(it))) {
            return true;
        }
    }
    return false;
}

void chat_control_change(struct chat_control_req *r, const cJSON *c, bool recall)
{
    char group[CHAT_GROUP_MAX + 1];
    struct change_req q = {.r = r, .recall = recall, .fields = c};
    bool has_id = false;
    const char *why = NULL;

    if (!chat_control_group_field(r, c, group) ||
        !chat_control_int_field(r, c, "id", 1, &has_id, &q.id)) {
        return;
    }
    if (!has_id) {
        chat_control_fail(r, "id is missing");
        return;
    }
    if (!recall && !cJSON_GetObjectItemCaseSensitive(c, "body")) {
        chat_control_fail(r, "body is missing");
        return;
    }
    /* A request's \u0000 is read as U+0001 (control.c): an edit would
     * store another character than the one sent, in silence. */
    if (!recall && r->nuls && holds_u0001(c)) {
        chat_control_fail(r, "edit fields cannot hold \\u0000");
        return;
    }
    if ((why = may_change(&q, group)) != NULL || (why = change_message(&q, group)) != NULL) {
        chat_control_fail(r, why);
        return;
    }
    chat_control_entry_start(r);
    sbuf_puts(r->out, recall ? ",\"recalled\":" : ",\"edited\":");
    sbuf_u64(r->out, q.id);
    sbuf_puts(r->out, ",\"by\":");
    sbuf_u64(r->out, q.ap.id);
    sbuf_add(r->out, "}", 1);
    after_change(&q, group);
}
