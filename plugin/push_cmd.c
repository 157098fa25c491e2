/* push_cmd.c: the push command (protocol v1.2): a device's registration,
 * its removal and its status, each answered for the requesting device
 * alone and only about itself. A UnifiedPush endpoint is asked, at
 * registration, whether it is a push server (GET, on the sender thread):
 * the request's whole answer is held meanwhile (chat_push_hold) and sent
 * from the tick once the sender's result is in. Bounds: one registration
 * being checked per device, PENDING_MAX in all, DISCOVER_RATE checks
 * started a second; an endpoint the device has registered already is not
 * asked again. */
#include "access.h"
#include "chat_mono.h"
#include "push_priv.h"
#include "reply.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PENDING_MAX 64u /* registrations being checked, over all clients */
/* Discovery GETs started, over all clients: at most DISCOVER_RATE a second,
 * in bursts of DISCOVER_BURST (as many as may be under way at once). One
 * check per device at a time bounded a client to about ten GETs a second
 * to an endpoint of its choosing (within push_allow), and eight clients
 * re-registering in a loop made the broker send 135 a second (the
 * hostile-client audit, f_discover_flood.py). */
#define DISCOVER_RATE 20.0
#define DISCOVER_BURST ((double)PENDING_MAX)

/* ===========================================================================
 * Entries
 * ========================================================================= */

static void entry_start(sbuf *b, const char *corr)
{
    sbuf_puts(b, "{\"command\":\"push\"");
    if (corr) {
        sbuf_puts(b, ",\"correlationData\":");
        sbuf_json_str(b, corr);
    }
}

static void entry_fail(sbuf *b, const char *corr, const char *device, const char *why)
{
    mosquitto_log_printf(MOSQ_LOG_DEBUG, "mosquitto-chat: push from %s refused: %s", device, why);
    entry_start(b, corr);
    sbuf_puts(b, ",\"error\":");
    sbuf_json_str(b, why);
    sbuf_add(b, "}", 1);
}

/* The fields of a registration a device reads back: what it gave, but its
 * keys (it holds them). */
static void entry_reg(sbuf *b, const struct push_reg *reg, bool registered)
{
    sbuf_puts(b, ",\"kind\":");
    sbuf_json_str(b, push_kind_name(reg->kind));
    switch (reg->kind) {
    case PUSH_KIND_UNIFIEDPUSH:
        sbuf_puts(b, ",\"endpoint\":");
        sbuf_json_str(b, reg->url);
        sbuf_puts(b, reg->encrypted ? ",\"encrypted\":true" : ",\"encrypted\":false");
        break;
    case PUSH_KIND_MATRIX:
        sbuf_puts(b, ",\"url\":");
        sbuf_json_str(b, reg->url);
        sbuf_puts(b, ",\"app_id\":");
        sbuf_json_str(b, reg->app_id);
        sbuf_puts(b, ",\"pushkey\":");
        sbuf_json_str(b, reg->pushkey);
        break;
    case PUSH_KIND_WEBHOOK:
        sbuf_puts(b, ",\"name\":");
        sbuf_json_str(b, reg->name);
        break;
    default:
        break;
    }
    sbuf_puts(b, registered ? ",\"registered\":true}" : ",\"registered\":false}");
}

/* Stores reg for (member, device) and writes the entry that says how it
 * went. */
static void store_and_answer(struct chat_plugin *pl, const char *member, const char *device,
                             const char *corr, const struct push_reg *reg, sbuf *b)
{
    size_t len = 0;
    char *bytes = push_reg_encode(reg, &len);
    chat_push_put put = CHAT_PUSH_NO_GROUP;
    if (!bytes) {
        entry_fail(b, corr, device, "out of memory");
        return;
    }
    chat_err rc = chat_store_push_put(pl->store, member, device, bytes, len, chat_now_ms(),
                                      CHAT_PROTO_PUSH_DEVICES_MAX, &put);
    cJSON_free(bytes);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "storing the push registration of %s", device);
        entry_fail(b, corr, device, "storage error");
    } else if (put == CHAT_PUSH_FULL) {
        entry_fail(b, corr, device,
                   "bad push registration: 16 devices of this member are registered already; "
                   "remove one (kind none, from that device)");
    } else if (put == CHAT_PUSH_NO_GROUP) {
        entry_fail(b, corr, device, "bad push registration: join a group first");
    } else {
        mosquitto_log_printf(MOSQ_LOG_INFO, "mosquitto-chat: %s (%s) registered for %s push",
                             device, member, push_kind_name(reg->kind));
        entry_start(b, corr);
        entry_reg(b, reg, true);
    }
}

/* ===========================================================================
 * The command
 * ========================================================================= */

static struct push_pending *pending_of(struct chat_push *ps, const char *device)
{
    for (struct push_pending *p = ps->pending; p; p = p->next) {
        if (!strcmp(p->device, device)) {
            return p;
        }
    }
    return NULL;
}

static void pending_free(struct push_pending *p)
{
    if (!p) {
        return;
    }
    free(p->member);
    free(p->device);
    free(p->corr);
    free(p->topic);
    free(p->corr_prop);
    sbuf_free(&p->out);
    free(p);
}

/* The device's stored registration into reg (kind none: none, or none this
 * code can send to). */
static chat_err stored_reg(const struct chat_push_req *r, struct push_reg *reg)
{
    char *bytes = NULL;
    size_t len = 0;
    bool found = false;
    chat_err rc =
        chat_store_push_get(r->pl->store, r->member, r->device, &bytes, &len, NULL, &found);
    if (rc != CHAT_OK || !found || !push_reg_decode(bytes, len, reg)) {
        memset(reg, 0, sizeof(*reg));
    }
    free(bytes);
    return rc;
}

/* The device's registration, read back. */
static void answer_query(const struct chat_push_req *r)
{
    struct push_reg reg;
    chat_err rc = stored_reg(r, &reg);
    if (rc != CHAT_OK) {
        chat_log_store_error(r->pl, rc, "reading the push registration of %s", r->device);
        entry_fail(r->out, r->corr, r->device, "storage error");
        return;
    }
    entry_start(r->out, r->corr);
    entry_reg(r->out, &reg, reg.kind != PUSH_KIND_NONE);
}

static void answer_remove(const struct chat_push_req *r)
{
    bool removed = false;
    chat_err rc = chat_store_push_remove(r->pl->store, r->member, r->device, NULL, 0, &removed);
    if (rc != CHAT_OK) {
        chat_log_store_error(r->pl, rc, "removing the push registration of %s", r->device);
        entry_fail(r->out, r->corr, r->device, "storage error");
        return;
    }
    if (removed) {
        mosquitto_log_printf(MOSQ_LOG_INFO, "mosquitto-chat: %s (%s) removed its push registration",
                             r->device, r->member);
    }
    entry_start(r->out, r->corr);
    sbuf_puts(r->out, ",\"kind\":\"none\",\"registered\":false}");
}

/* Whether a discovery GET may start now (DISCOVER_RATE), taking it. */
static bool discover_token(struct chat_push *ps)
{
    int64_t now = chat_mono_us() / 1000;
    if (ps->discover_ms == 0) {
        ps->discover_tokens = DISCOVER_BURST;
    } else if (now > ps->discover_ms) {
        ps->discover_tokens += (double)(now - ps->discover_ms) * DISCOVER_RATE / 1000.0;
        if (ps->discover_tokens > DISCOVER_BURST) {
            ps->discover_tokens = DISCOVER_BURST;
        }
    }
    ps->discover_ms = now;
    if (ps->discover_tokens < 1.0) {
        return false;
    }
    ps->discover_tokens -= 1.0;
    return true;
}

/* Whether the device has this very UnifiedPush endpoint registered: it was
 * a push server when registered, and registering it again (new keys, an
 * app that registers at each start) asks nothing of it. A store error
 * counts as no: the check runs. */
static bool registered_already(const struct chat_push_req *r, const struct push_reg *reg)
{
    struct push_reg old;
    return stored_reg(r, &old) == CHAT_OK && old.kind == PUSH_KIND_UNIFIEDPUSH &&
           strcmp(old.url, reg->url) == 0;
}

/* A UnifiedPush endpoint: asked first whether it is a push server. */
static void start_check(const struct chat_push_req *r, const struct push_reg *reg)
{
    struct chat_push *ps = r->pl->push;
    struct push_pending *p = NULL;
    struct push_job *job = NULL;

    if (*r->hold) {
        entry_fail(r->out, r->corr, r->device,
                   "bad push registration: one UnifiedPush registration per request");
        return;
    }
    if (pending_of(ps, r->device)) {
        entry_fail(r->out, r->corr, r->device,
                   "bad push registration: this device's last one is still being checked");
        return;
    }
    if (registered_already(r, reg)) {
        store_and_answer(r->pl, r->member, r->device, r->corr, reg, r->out);
        return;
    }
    if (ps->npending >= PENDING_MAX || !discover_token(ps)) {
        entry_fail(r->out, r->corr, r->device,
                   "too many push registrations are being checked; retry in a few seconds");
        return;
    }
    p = calloc(1, sizeof(*p));
    job = calloc(1, sizeof(*job));
    if (!p || !job || !(p->member = strdup(r->member)) || !(p->device = strdup(r->device)) ||
        (r->corr && !(p->corr = strdup(r->corr))) || !(job->url = strdup(reg->url))) {
        pending_free(p);
        push_job_free(job);
        entry_fail(r->out, r->corr, r->device, "out of memory");
        return;
    }
    p->reg = *reg;
    p->token = ++ps->next_token;
    p->at = r->out->len; /* the entry goes here, between its neighbours' commas */
    job->kind = PUSH_JOB_DISCOVER;
    job->loopback = reg->loopback;
    job->token = p->token;
    if (!push_sender_submit(ps->sender, job)) {
        pending_free(p);
        entry_fail(r->out, r->corr, r->device,
                   "too many push notifications are queued; retry later");
        return;
    }
    p->next = ps->pending;
    ps->pending = p;
    ps->npending++;
    *r->hold = true;
}

void chat_push_command(const struct chat_push_req *r, const cJSON *c)
{
    struct chat_push *ps = r->pl->push;
    struct push_reg reg;
    bool query = false;

    if (!ps) {
        entry_fail(r->out, r->corr, r->device, "push is not enabled");
        return;
    }
    const char *why = push_reg_from_command(c, &ps->opts, &reg, &query);
    if (!why && !query && reg.kind != PUSH_KIND_NONE) {
        /* a registration that would never wake anyone is refused */
        why = chat_access_wake(r->pl);
    }
    if (why) {
        entry_fail(r->out, r->corr, r->device, why);
    } else if (query) {
        answer_query(r);
    } else if (reg.kind == PUSH_KIND_NONE) {
        answer_remove(r);
    } else if (reg.kind == PUSH_KIND_UNIFIEDPUSH) {
        start_check(r, &reg);
    } else {
        store_and_answer(r->pl, r->member, r->device, r->corr, &reg, r->out);
    }
}

void chat_push_hold(struct chat_plugin *pl, const char *device, const char *topic, const void *corr,
                    uint16_t corr_len, sbuf *out)
{
    struct chat_push *ps = pl->push;
    struct push_pending *p = ps ? pending_of(ps, device) : NULL;
    if (!p || p->held) {
        /* Cannot be: the command that held it just made it. Answer what
         * there is rather than nothing. */
        chat_reply_send(pl, device, topic, corr, corr_len, out);
        return;
    }
    p->held = true;
    p->out = *out;
    memset(out, 0, sizeof(*out));
    if ((topic && !(p->topic = strdup(topic))) ||
        (corr && corr_len && !(p->corr_prop = malloc(corr_len)))) {
        p->gone = true; /* out of memory: the registration goes on, unanswered */
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: out of memory answering %s", device);
        return;
    }
    if (p->corr_prop) {
        memcpy(p->corr_prop, corr, corr_len);
        p->corr_len = corr_len;
    }
}

void chat_push_disconnected(struct chat_plugin *pl, const char *client_id)
{
    struct push_pending *p = pl->push ? pending_of(pl->push, client_id) : NULL;
    if (p) {
        p->gone = true;
    }
}

void push_cmd_discovered(struct chat_plugin *pl, const struct push_result *r)
{
    struct chat_push *ps = pl->push;
    struct push_pending **pp = &ps->pending, *p = NULL;
    sbuf entry = {0}, answer = {0};

    while (*pp && (*pp)->token != r->token) {
        pp = &(*pp)->next;
    }
    if (!(p = *pp)) {
        return;
    }
    *pp = p->next;
    ps->npending--;
    if (r->ok) {
        store_and_answer(pl, p->member, p->device, p->corr, &p->reg, &entry);
    } else {
        mosquitto_log_printf(MOSQ_LOG_NOTICE,
                             "mosquitto-chat: push endpoint of %s (%s) refused: it did not answer "
                             "as a UnifiedPush server (%s)",
                             p->device, p->member, r->why);
        entry_fail(&entry, p->corr, p->device, "endpoint did not answer as a push server");
    }
    if (p->held && !p->gone && !entry.failed && !p->out.failed && p->at <= p->out.len) {
        sbuf_add(&answer, p->out.data, p->at);
        sbuf_add(&answer, entry.data, entry.len);
        sbuf_add(&answer, p->out.data + p->at, p->out.len - p->at);
        chat_reply_send(pl, p->device, p->topic, p->corr_prop, p->corr_len, &answer);
    }
    sbuf_free(&answer);
    sbuf_free(&entry);
    pending_free(p);
}

void push_cmd_free(struct chat_push *ps)
{
    while (ps->pending) {
        struct push_pending *next = ps->pending->next;
        pending_free(ps->pending);
        ps->pending = next;
    }
    ps->npending = 0;
}
