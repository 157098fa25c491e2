/* push.c: push notifications (see push.h): the module's state and
 * options, the hook of a stored message, and the tick: the sender's
 * results, the walks that decide whom to notify, the sweep of
 * registrations whose device is gone. The design note and invariants are
 * in push_priv.h. */
#include "access.h"
#include "chat_mono.h"
#include "push_lib.h"
#include "push_priv.h"
#include "reply.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_MAX 16384u       /* jobs the sender holds at most */
#define GROUPS_MAX 100000u     /* groups with notifications to decide */
#define MARKS_MAX 200000u      /* (member, group) notified within the interval */
#define WALK_SLICE 128u        /* members per store call of a walk */
#define WALK_MEMBERS 1024u     /* members walked per tick, over all groups */
#define TICK_BUDGET_US 2000    /* of walking per tick */
#define MARKS_PER_TICK 4096u   /* marks freed per tick at most */
#define SWEEP_EVERY_MS 3600000 /* from the end of one sweep of registrations to the next */
#define SWEEP_STEP 256u        /* registrations looked at per store call */
#define SWEEP_BUDGET_US 1000
#define DROP_LOG_EVERY_MS 10000
#define OPTION_PREFIX "push_"

/* ===========================================================================
 * Options
 * ========================================================================= */

bool chat_push_is_option(const char *key)
{
    return !strncmp(key, OPTION_PREFIX, sizeof(OPTION_PREFIX) - 1);
}

static int bad(const char *name, const char *value, const char *expected)
{
    mosquitto_log_printf(MOSQ_LOG_ERR,
                         "mosquitto-chat: invalid value \"%s\" for plugin_opt_%s: expected %s",
                         value, name, expected);
    return MOSQ_ERR_INVAL;
}

static void words_free(char **list);

static void opts_free(struct push_opts *o)
{
    words_free(o->allow);
    for (size_t i = 0; i < o->nhooks; i++) {
        free(o->hooks[i].name);
        free(o->hooks[i].url);
    }
    free(o->hooks);
    memset(o, 0, sizeof(*o));
}

static void words_free(char **list)
{
    for (char **w = list; w && *w; w++) {
        free(*w);
    }
    free(list);
}

/* Splits value at blanks into a NULL-terminated list of copies; NULL when
 * out of memory. */
static char **words(const char *value)
{
    size_t n = 0, cap = 4;
    char **list = calloc(cap + 1, sizeof(char *));
    const char *p = value;
    if (!list) {
        return NULL;
    }
    for (;;) {
        p += strspn(p, " \t");
        size_t len = strcspn(p, " \t");
        if (len == 0) {
            return list;
        }
        if (n == cap) {
            char **more = realloc(list, (2 * cap + 1) * sizeof(char *));
            if (!more) {
                words_free(list);
                return NULL;
            }
            list = more;
            cap *= 2;
        }
        if (!(list[n] = strndup(p, len))) {
            words_free(list);
            return NULL;
        }
        list[++n] = NULL;
        p += len;
    }
}

static int parse_allow(struct push_opts *o, const char *value)
{
    char norm[PUSH_URL_MAX + 1];
    bool loopback = false;
    char **list = words(value);
    if (!list) {
        return MOSQ_ERR_NOMEM;
    }
    for (char **w = list; *w; w++) {
        const char *why = push_url_normalize(*w, norm, &loopback);
        if (why) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: invalid value \"%s\" for plugin_opt_push_allow: "
                                 "%s",
                                 *w, why);
            words_free(list);
            return MOSQ_ERR_INVAL;
        }
        /* The normal form, so that the comparison with an endpoint's is
         * exact. */
        char *copy = strdup(norm);
        if (!copy) {
            words_free(list);
            return MOSQ_ERR_NOMEM;
        }
        free(*w);
        *w = copy;
    }
    if (!list[0]) {
        free(list);
        list = NULL; /* empty: push off */
    }
    words_free(o->allow);
    o->allow = list;
    return MOSQ_ERR_SUCCESS;
}

static int parse_webhooks(struct push_opts *o, const char *value)
{
    char norm[PUSH_URL_MAX + 1];
    char **list = words(value);
    size_t n = 0;
    int rc = MOSQ_ERR_SUCCESS;
    if (!list) {
        return MOSQ_ERR_NOMEM;
    }
    while (list[n]) {
        n++;
    }
    struct push_webhook *hooks = calloc(n ? n : 1, sizeof(*hooks));
    if (!hooks) {
        rc = MOSQ_ERR_NOMEM;
    }
    for (size_t i = 0; rc == MOSQ_ERR_SUCCESS && i < n; i++) {
        char *eq = strchr(list[i], '=');
        bool loopback = false;
        const char *why = NULL;
        if (!eq || eq == list[i] || (size_t)(eq - list[i]) > CHAT_PROTO_PUSH_WEBHOOK_MAX) {
            rc = bad("push_webhooks", list[i], "name=url pairs, a name of 1 to 64 bytes");
            break;
        }
        *eq = '\0';
        if ((why = push_url_normalize(eq + 1, norm, &loopback)) != NULL) {
            mosquitto_log_printf(MOSQ_LOG_ERR,
                                 "mosquitto-chat: invalid URL \"%s\" for webhook %s in "
                                 "plugin_opt_push_webhooks: %s",
                                 eq + 1, list[i], why);
            rc = MOSQ_ERR_INVAL;
            break;
        }
        hooks[i].name = strdup(list[i]);
        hooks[i].url = strdup(norm);
        hooks[i].loopback = loopback;
        if (!hooks[i].name || !hooks[i].url) {
            rc = MOSQ_ERR_NOMEM;
        }
    }
    words_free(list);
    /* replace what an earlier line set */
    for (size_t i = 0; i < o->nhooks; i++) {
        free(o->hooks[i].name);
        free(o->hooks[i].url);
    }
    free(o->hooks);
    o->hooks = hooks;
    o->nhooks = hooks ? n : 0;
    return rc;
}

static bool parse_uint(const char *s, unsigned long hi, unsigned *out)
{
    char *end = NULL;
    if (!s[0] || s[0] < '0' || s[0] > '9') {
        return false;
    }
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v > hi) {
        return false;
    }
    *out = (unsigned)v;
    return true;
}

static int parse_options(struct push_opts *o, struct mosquitto_opt *opts, int count)
{
    int rc = MOSQ_ERR_SUCCESS;
    o->delay_ms = 2000;
    o->interval_ms = 30000;
    for (int i = 0; i < count && rc == MOSQ_ERR_SUCCESS; i++) {
        const char *k = opts[i].key, *v = opts[i].value ? opts[i].value : "";
        if (!chat_push_is_option(k)) {
            continue;
        }
        if (!strcmp(k, "push_allow")) {
            rc = parse_allow(o, v);
        } else if (!strcmp(k, "push_webhooks")) {
            rc = parse_webhooks(o, v);
        } else if (!strcmp(k, "push_delay")) {
            rc = parse_uint(v, 3600000, &o->delay_ms)
                     ? MOSQ_ERR_SUCCESS
                     : bad(k, v, "milliseconds, from 0 to 3600000");
        } else if (!strcmp(k, "push_interval")) {
            rc = parse_uint(v, 86400000, &o->interval_ms)
                     ? MOSQ_ERR_SUCCESS
                     : bad(k, v, "milliseconds, from 0 to 86400000");
        } else if (!strcmp(k, "push_body")) {
            if (!strcmp(v, "true") || !strcmp(v, "false")) {
                o->body = v[0] == 't';
            } else {
                rc = bad(k, v, "true or false");
            }
        } else {
            mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: unknown option plugin_opt_%s", k);
            rc = MOSQ_ERR_INVAL;
        }
    }
    return rc;
}

/* ===========================================================================
 * Lifetime
 * ========================================================================= */

static void group_free(void *p)
{
    struct pgroup *g = p;
    if (g) {
        free(g->name);
        free(g->new_from);
        free(g->other_from);
        free(g);
    }
}

static void mark_free(void *p)
{
    struct pmark *m = p;
    if (m) {
        free(m->pending_from);
        free(m);
    }
}

static void walk_clear(struct pwalk *w)
{
    free(w->new_from);
    free(w->other_from);
    free(w->new_text);
    free(w->other_text);
    free(w->pending_text);
    free(w->note_text);
    free(w->note_from);
    memset(w, 0, sizeof(*w));
}

static void push_destroy(struct chat_push *ps)
{
    if (!ps) {
        return;
    }
    /* First: the thread must not outlive what it was given. */
    push_sender_destroy(ps->sender);
    push_cmd_free(ps);
    walk_clear(&ps->walk);
    chat_hmap_destroy(ps->groups, group_free);
    chat_hmap_destroy(ps->marks, mark_free);
    free(ps->heap);
    opts_free(&ps->opts);
    free(ps);
}

int chat_push_init(struct chat_plugin *pl, struct mosquitto_opt *opts, int count)
{
    struct chat_push *ps = NULL;
    char err[160];
    const char *why = NULL;
    bool configured = false;
    for (int i = 0; i < count && !configured; i++) {
        configured = chat_push_is_option(opts[i].key);
    }
    if (!configured) {
        return MOSQ_ERR_SUCCESS; /* off, and libcurl never loaded */
    }
    /* The options' URLs are read with libcurl's parser. */
    if (!push_lib_load(&why)) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: push notifications need libcurl: %s",
                             why);
        return MOSQ_ERR_UNKNOWN;
    }
    if (!(ps = calloc(1, sizeof(*ps)))) {
        return MOSQ_ERR_NOMEM;
    }
    int rc = parse_options(&ps->opts, opts, count);
    if (rc != MOSQ_ERR_SUCCESS || !ps->opts.allow) {
        if (rc == MOSQ_ERR_SUCCESS && ps->opts.nhooks) {
            mosquitto_log_printf(MOSQ_LOG_WARNING,
                                 "mosquitto-chat: plugin_opt_push_webhooks without "
                                 "plugin_opt_push_allow: push stays off");
        }
        push_destroy(ps);
        return rc;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: libcurl could not start: push is off");
        push_destroy(ps);
        return MOSQ_ERR_UNKNOWN;
    }
    ps->groups = chat_hmap_create();
    ps->marks = chat_hmap_create();
    ps->sender = push_sender_create(QUEUE_MAX, &ps->opts, err, sizeof(err));
    if (!ps->groups || !ps->marks || !ps->sender) {
        mosquitto_log_printf(MOSQ_LOG_ERR, "mosquitto-chat: push cannot start: %s",
                             ps->sender ? "out of memory" : err);
        push_destroy(ps);
        return MOSQ_ERR_NOMEM;
    }
    char allow[512] = "";
    size_t n = 0;
    for (char **a = ps->opts.allow; *a && n < sizeof(allow); a++) {
        n += (size_t)snprintf(allow + n, sizeof(allow) - n, "%s%s", n ? " " : "", *a);
    }
    mosquitto_log_printf(MOSQ_LOG_INFO,
                         "mosquitto-chat: push notifications to \"%s\", %zu webhooks, push_delay "
                         "%u ms, push_interval %u ms, push_body %s",
                         allow, ps->opts.nhooks, ps->opts.delay_ms, ps->opts.interval_ms,
                         ps->opts.body ? "true" : "false");
    pl->push = ps;
    return MOSQ_ERR_SUCCESS;
}

void chat_push_free(struct chat_plugin *pl)
{
    if (pl->push) {
        push_destroy(pl->push);
        pl->push = NULL;
        curl_global_cleanup();
    }
}

/* ===========================================================================
 * The heap of group entries by due time (invariant 1)
 * ========================================================================= */

static void heap_swap(struct chat_push *ps, size_t a, size_t b)
{
    struct pgroup *t = ps->heap[a];
    ps->heap[a] = ps->heap[b];
    ps->heap[b] = t;
    ps->heap[a]->heap_at = a;
    ps->heap[b]->heap_at = b;
}

static void heap_up(struct chat_push *ps, size_t i)
{
    while (i > 0 && ps->heap[(i - 1) / 2]->due_ms > ps->heap[i]->due_ms) {
        heap_swap(ps, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void heap_down(struct chat_push *ps, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < ps->nheap && ps->heap[l]->due_ms < ps->heap[m]->due_ms) {
            m = l;
        }
        if (r < ps->nheap && ps->heap[r]->due_ms < ps->heap[m]->due_ms) {
            m = r;
        }
        if (m == i) {
            return;
        }
        heap_swap(ps, i, m);
        i = m;
    }
}

static bool heap_push(struct chat_push *ps, struct pgroup *g)
{
    if (ps->nheap == ps->heap_cap) {
        size_t cap = ps->heap_cap ? 2 * ps->heap_cap : 64;
        struct pgroup **h = realloc(ps->heap, cap * sizeof(struct pgroup *));
        if (!h) {
            return false;
        }
        ps->heap = h;
        ps->heap_cap = cap;
    }
    g->heap_at = ps->nheap;
    g->in_heap = true;
    ps->heap[ps->nheap++] = g;
    heap_up(ps, g->heap_at);
    return true;
}

static struct pgroup *heap_pop(struct chat_push *ps)
{
    struct pgroup *g = ps->heap[0];
    heap_swap(ps, 0, ps->nheap - 1);
    ps->nheap--;
    if (ps->nheap) {
        heap_down(ps, 0);
    }
    g->in_heap = false;
    return g;
}

/* Puts g where its next walk is due (window's first message + push_delay,
 * or the earliest deferred member), or frees it when it has nothing left
 * to decide (invariant 1). */
static void schedule(struct chat_push *ps, struct pgroup *g)
{
    int64_t due = INT64_MAX;
    if (g->first_ms) {
        due = g->first_ms + ps->opts.delay_ms;
    }
    if (g->deferred_ms && g->deferred_ms < due) {
        due = g->deferred_ms;
    }
    if (due == INT64_MAX) {
        chat_hmap_remove(ps->groups, g->name, strlen(g->name));
        group_free(g);
        return;
    }
    g->due_ms = due;
    if (!heap_push(ps, g)) {
        push_sender_count_dropped(ps->sender);
        chat_hmap_remove(ps->groups, g->name, strlen(g->name));
        group_free(g);
    }
}

/* ===========================================================================
 * A stored message
 * ========================================================================= */

void chat_push_stored(struct chat_plugin *pl, const char *group, uint64_t id, const char *from)
{
    struct chat_push *ps = pl->push;
    if (!ps) {
        return;
    }
    size_t glen = strlen(group);
    struct pgroup *g = chat_hmap_get(ps->groups, group, glen);
    if (!g) {
        if (chat_hmap_count(ps->groups) >= GROUPS_MAX || !(g = calloc(1, sizeof(*g))) ||
            !(g->name = strdup(group)) || !chat_hmap_put(ps->groups, group, glen, g, NULL)) {
            group_free(g);
            push_sender_count_dropped(ps->sender);
            return;
        }
    }
    /* The window's newest, and the newest by someone else (push_priv.h). */
    if (!g->new_id || strcmp(g->new_from, from) != 0) {
        char *copy = strdup(from);
        if (!copy) {
            push_sender_count_dropped(ps->sender);
            return;
        }
        if (g->new_id) {
            free(g->other_from);
            g->other_from = g->new_from;
            g->other_id = g->new_id;
        } else {
            free(g->new_from);
        }
        g->new_from = copy;
    }
    g->new_id = id;
    if (!g->first_ms) {
        g->first_ms = chat_mono_us() / 1000;
        if (!g->walking) {
            if (g->in_heap) {
                /* deferred members only until now: maybe due sooner */
                int64_t due = g->first_ms + ps->opts.delay_ms;
                if (due < g->due_ms) {
                    g->due_ms = due;
                    heap_up(ps, g->heap_at);
                }
            } else {
                schedule(ps, g);
            }
        }
    }
}

static char *message_text(struct chat_plugin *pl, const char *group, uint64_t id);

void chat_push_changed(struct chat_plugin *pl, const char *group, uint64_t id)
{
    struct chat_push *ps = pl->push;
    if (!ps || !ps->opts.body) {
        return; /* no notification carries a text */
    }
    /* What the walk under way read of it (a walk spans ticks), and what
     * the sender holds: the stored version's text from now on. Marks hold
     * no text (decide reads it when a deferred note goes). */
    struct pwalk *w = &ps->walk;
    if (w->g && !strcmp(w->g->name, group)) {
        if (w->new_id == id) {
            free(w->new_text);
            w->new_text = message_text(pl, group, id);
        }
        if (w->other_id == id) {
            free(w->other_text);
            w->other_text = message_text(pl, group, id);
        }
        if (w->pending_id == id) {
            free(w->pending_text);
            w->pending_text = message_text(pl, group, id);
        }
    }
    push_sender_withdraw(ps->sender, group, id);
}

/* ===========================================================================
 * Marks: (member, group) notified within push_interval (invariant 2)
 * ========================================================================= */

/* Writes member, a NUL and group (with its NUL, not part of the key) to
 * buf; returns the key's length. */
static size_t mark_key(char *buf, const char *member, const char *group)
{
    size_t m = strlen(member), g = strlen(group);
    memcpy(buf, member, m + 1);
    memcpy(buf + m + 1, group, g + 1);
    return m + 1 + g;
}

static void list_unlink(struct chat_push *ps, struct pmark *m)
{
    if (!m->in_list) {
        return;
    }
    if (m->prev) {
        m->prev->next = m->next;
    } else {
        ps->mhead = m->next;
    }
    if (m->next) {
        m->next->prev = m->prev;
    } else {
        ps->mtail = m->prev;
    }
    m->prev = m->next = NULL;
    m->in_list = false;
}

static void list_append(struct chat_push *ps, struct pmark *m)
{
    m->prev = ps->mtail;
    m->next = NULL;
    if (ps->mtail) {
        ps->mtail->next = m;
    } else {
        ps->mhead = m;
    }
    ps->mtail = m;
    m->in_list = true;
}

static void mark_drop(struct chat_push *ps, struct pmark *m)
{
    list_unlink(ps, m);
    chat_hmap_remove(ps->marks, m->key, m->klen);
    mark_free(m);
}

static void mark_clear_pending(struct chat_push *ps, struct pmark *m)
{
    if (!m->pending_id) {
        return;
    }
    m->pending_id = 0;
    free(m->pending_from);
    m->pending_from = NULL;
    /* back in the list, in last_ms order: at its place from the tail */
    struct pmark *after = ps->mtail;
    while (after && after->last_ms > m->last_ms) {
        after = after->prev;
    }
    m->prev = after;
    m->next = after ? after->next : ps->mhead;
    if (m->next) {
        m->next->prev = m;
    } else {
        ps->mtail = m;
    }
    if (after) {
        after->next = m;
    } else {
        ps->mhead = m;
    }
    m->in_list = true;
}

/* Frees the marks whose interval is over (bounded per tick). */
static void marks_tick(struct chat_push *ps, int64_t now)
{
    size_t n = 0;
    while (ps->mhead && n++ < MARKS_PER_TICK &&
           ps->mhead->last_ms + (int64_t)ps->opts.interval_ms <= now) {
        mark_drop(ps, ps->mhead);
    }
}

/* ===========================================================================
 * The walk: deciding a group's members
 * ========================================================================= */

/* The text of message id of group (push_body), malloc'd, or NULL. */
static char *message_text(struct chat_plugin *pl, const char *group, uint64_t id)
{
    chat_msg m = {0};
    bool found = false;
    char *text = NULL;
    if (!id) {
        return NULL;
    }
    chat_err rc = chat_store_get(pl->store, group, id, &m, &found);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "reading message %llu of %s for a notification",
                             (unsigned long long)id, group);
        return NULL;
    }
    if (found) {
        cJSON *env = cJSON_ParseWithLength(m.data, m.len);
        const cJSON *body = cJSON_GetObjectItemCaseSensitive(env, "body");
        if (cJSON_IsString(body)) {
            text = strdup(body->valuestring);
        }
        cJSON_Delete(env);
    }
    free(m.data);
    return text;
}

static bool walk_start(struct chat_plugin *pl, struct pgroup *g)
{
    struct chat_push *ps = pl->push;
    struct pwalk *w = &ps->walk;
    walk_clear(w);
    w->g = g;
    g->walking = true;
    w->new_id = g->new_id;
    w->other_id = g->other_id;
    w->new_from = g->new_from;
    w->other_from = g->other_from;
    g->new_id = g->other_id = 0;
    g->new_from = g->other_from = NULL;
    g->first_ms = 0;
    g->deferred_ms = 0; /* the walk visits every deferred member again */
    chat_err rc = chat_store_head(pl->store, g->name, &w->head);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "reading the head of %s for notifications", g->name);
        return false;
    }
    if (ps->opts.body) {
        w->new_text = message_text(pl, g->name, w->new_id);
        w->other_text = message_text(pl, g->name, w->other_id);
    }
    return true;
}

static void walk_end(struct chat_push *ps)
{
    struct pwalk *w = &ps->walk;
    struct pgroup *g = w->g;
    g->walking = false;
    if (w->deferred_ms && (!g->deferred_ms || w->deferred_ms < g->deferred_ms)) {
        g->deferred_ms = w->deferred_ms;
    }
    walk_clear(w);
    schedule(ps, g);
}

/* Decides member (seen: what it has seen in the group): whether it is
 * notified now, and of what (w->note). */
static bool decide(struct chat_plugin *pl, struct pwalk *w, const char *member, uint64_t seen)
{
    struct chat_push *ps = pl->push;
    const char *group = w->g->name;
    char key[2 * CHAT_STORE_MAX_NAME + 3];
    size_t klen = mark_key(key, member, group);
    struct pmark *mark = chat_hmap_get(ps->marks, key, klen);
    int64_t now = chat_mono_us() / 1000;

    free(w->note_text);
    free(w->note_from);
    w->note_text = w->note_from = NULL;
    memset(&w->note, 0, sizeof(w->note));
    /* Online in the group: it catches up by itself. */
    if (chat_presence_online(pl, group, member)) {
        if (mark) {
            mark_clear_pending(ps, mark);
        }
        return false;
    }
    /* The newest message not its own: the window's, else what waited. */
    if (w->new_id && strcmp(w->new_from, member) != 0) {
        w->note = (struct push_note){group, w->new_id, w->new_from, 0, w->new_text, NULL, NULL};
    } else if (w->other_id) {
        w->note =
            (struct push_note){group, w->other_id, w->other_from, 0, w->other_text, NULL, NULL};
    } else if (mark && mark->pending_id) {
        /* copies: the mark lets go of its pending message below. Its
         * text is read now: recalled or edited since it was deferred, the
         * stored version says so (no text, or the new one). */
        w->note_from = strdup(mark->pending_from);
        if (!w->note_from) {
            return false;
        }
        if (pl->push->opts.body) {
            if (w->pending_id != mark->pending_id) {
                free(w->pending_text);
                w->pending_text = message_text(pl, group, mark->pending_id);
                w->pending_id = mark->pending_id;
            }
            w->note_text = w->pending_text ? strdup(w->pending_text) : NULL;
        }
        w->note =
            (struct push_note){group, mark->pending_id, w->note_from, 0, w->note_text, NULL, NULL};
    } else {
        return false;
    }
    w->note.unread = w->head > seen ? w->head - seen : 0;
    if (w->note.unread == 0) {
        if (mark) {
            mark_clear_pending(ps, mark);
        }
        return false;
    }
    int64_t ready = mark ? mark->last_ms + (int64_t)ps->opts.interval_ms : 0;
    if (mark && now < ready) {
        /* Notified within the interval: the newest waits for its end. */
        if (w->note.id > mark->pending_id) {
            char *from = strdup(w->note.from);
            if (from) {
                free(mark->pending_from);
                mark->pending_from = from;
                mark->pending_id = w->note.id;
                list_unlink(ps, mark);
            }
        }
        if (!w->deferred_ms || ready < w->deferred_ms) {
            w->deferred_ms = ready;
        }
        mosquitto_log_printf(MOSQ_LOG_DEBUG,
                             "mosquitto-chat: notification of %s in %s deferred to the end of "
                             "its push_interval: message %llu",
                             member, group, (unsigned long long)w->note.id);
        return false;
    }
    if (!mark) {
        if (chat_hmap_count(ps->marks) >= MARKS_MAX) {
            /* Without a mark its interval could not be kept: not now. */
            push_sender_count_dropped(ps->sender);
            return false;
        }
        mark = calloc(1, sizeof(*mark) + klen);
        if (!mark) {
            push_sender_count_dropped(ps->sender);
            return false;
        }
        memcpy(mark->key, key, klen);
        mark->klen = klen;
        if (!chat_hmap_put(ps->marks, key, klen, mark, NULL)) {
            mark_free(mark);
            push_sender_count_dropped(ps->sender);
            return false;
        }
    } else {
        /* a pending message goes now (the note holds copies of it) */
        mark->pending_id = 0;
        free(mark->pending_from);
        mark->pending_from = NULL;
        list_unlink(ps, mark);
    }
    mark->last_ms = now;
    list_append(ps, mark);
    return true;
}

/* The job that posts w->note to one registration (bytes reg) of member's
 * device; the sender thread reads the registration and builds the request.
 * NULL when out of memory. */
static struct push_job *make_job(const struct push_note *note, const char *member,
                                 const char *device, const char *bytes, size_t len)
{
    struct push_job *job = calloc(1, sizeof(*job));
    if (!job || !(job->group = strdup(note->group)) || !(job->from = strdup(note->from)) ||
        (note->text && !(job->text = strdup(note->text))) || !(job->member = strdup(member)) ||
        !(job->device = strdup(device)) || !(job->reg = malloc(len))) {
        push_job_free(job);
        return NULL;
    }
    job->kind = PUSH_JOB_NOTIFY;
    job->id = note->id;
    job->unread = note->unread;
    memcpy(job->reg, bytes, len);
    job->reg_len = len;
    return job;
}

struct walk_ctx {
    struct chat_plugin *pl;
    int64_t deadline_us;
    size_t members;     /* decided this tick */
    bool out_of_budget; /* the walk stopped for the tick's bounds */
    bool wake;          /* members may be woken at all (chat_access_wake) */
};

static int walk_member(void *ctx, const char *member, uint64_t seen, const char *device,
                       const char *reg, size_t len)
{
    struct walk_ctx *wc = ctx;
    struct chat_push *ps = wc->pl->push;
    struct pwalk *w = &ps->walk;
    if (strcmp(member, w->member) != 0) {
        /* A new member: decided whole, so a tick's end falls between two. */
        if (wc->members >= WALK_MEMBERS || chat_mono_us() >= wc->deadline_us) {
            wc->out_of_budget = true;
            return 1;
        }
        wc->members++;
        snprintf(w->member, sizeof(w->member), "%s", member);
        w->notify = wc->wake && decide(wc->pl, w, member, seen);
    }
    if (w->notify) {
        struct push_job *job = make_job(&w->note, member, device, reg, len);
        if (job) {
            push_sender_submit(ps->sender, job);
        } else {
            push_sender_count_dropped(ps->sender);
        }
    }
    return 0;
}

/* Walks the due groups within this tick's budget. */
static void walks_tick(struct chat_plugin *pl)
{
    struct chat_push *ps = pl->push;
    struct pwalk *w = &ps->walk;
    /* Nobody is woken where the broker's own checks could not be asked (a
     * reload may have put one behind ours since it registered): asked once
     * a tick, since only a reload, between two ticks, changes the answer. */
    struct walk_ctx wc = {pl, chat_mono_us() + TICK_BUDGET_US, 0, false,
                          chat_access_wake(pl) == NULL};

    /* Each store call looks at up to WALK_SLICE members: at most
     * WALK_MEMBERS of them per tick, with or without registrations. */
    for (size_t calls = 0; calls < WALK_MEMBERS / WALK_SLICE && chat_mono_us() < wc.deadline_us;
         calls++) {
        if (!w->g) {
            if (!ps->nheap || ps->heap[0]->due_ms > chat_mono_us() / 1000) {
                return;
            }
            if (!walk_start(pl, heap_pop(ps))) {
                walk_end(ps);
                continue;
            }
        }
        char last[CHAT_STORE_MAX_NAME + 1];
        bool done = false;
        w->member[0] = '\0';
        chat_err rc = chat_store_push_members(pl->store, w->g->name, w->after, WALK_SLICE,
                                              walk_member, &wc, last, sizeof(last), &done);
        if (rc != CHAT_OK) {
            chat_log_store_error(pl, rc, "finding whom to notify in %s", w->g->name);
            walk_end(ps);
            continue;
        }
        if (last[0]) {
            memcpy(w->after, last, strlen(last) + 1);
        }
        if (done) {
            walk_end(ps);
        } else if (wc.out_of_budget) {
            return;
        }
    }
}

/* ===========================================================================
 * Results, the sweep, the tick
 * ========================================================================= */

/* A registration's endpoint answered that it is gone: the registration
 * goes (if it is still that one), and its device, when connected, is
 * told. */
static void gone(struct chat_plugin *pl, const struct push_result *r)
{
    struct chat_push *ps = pl->push;
    bool removed = false;
    chat_err rc =
        chat_store_push_remove(pl->store, r->member, r->device, r->reg, r->reg_len, &removed);
    if (rc != CHAT_OK) {
        chat_log_store_error(pl, rc, "removing the push registration of %s", r->device);
        return;
    }
    if (!removed) {
        return; /* replaced meanwhile */
    }
    ps->removed++;
    mosquitto_log_printf(MOSQ_LOG_NOTICE,
                         "mosquitto-chat: push registration of %s (%s) removed: %s", r->device,
                         r->member, r->why);
    sbuf b = {0};
    sbuf_puts(&b, "{\"responses\":[{\"command\":\"push\",\"kind\":\"none\",\"registered\":false,"
                  "\"dropped\":");
    sbuf_json_str(&b, r->why);
    sbuf_puts(&b, "}]}");
    /* Unasked, so only to a device that asked for pushes (v1.2: subscribed
     * to the response topic, as the client library is); others learn it
     * from `push`, which answers "kind":"none". */
    if (!b.failed && chat_peer_pushes(pl, r->device)) {
        chat_push(pl, r->device, b.data, b.len);
    }
    sbuf_free(&b);
}

static void results_tick(struct chat_plugin *pl)
{
    struct push_result *list = push_sender_results(pl->push->sender);
    for (struct push_result *r = list; r; r = r->next) {
        if (r->kind == PUSH_RESULT_GONE) {
            gone(pl, r);
        } else {
            push_cmd_discovered(pl, r);
        }
    }
    push_result_free(list);
}

/* Registrations whose device has no cursor left, once device expiry is
 * on: an hourly sweep in bounded steps, like device expiry's. */
static void sweep_tick(struct chat_plugin *pl, int64_t now_ms)
{
    struct chat_push *ps = pl->push;
    int64_t mono = chat_mono_us() / 1000;
    if (pl->cfg.device_expiry_days == 0) {
        return;
    }
    if (!ps->sweeping) {
        if (mono < ps->next_sweep_ms) {
            return;
        }
        ps->sweeping = true;
        ps->sweep_resume[0] = ps->sweep_resume[1] = 0;
    }
    int64_t older = now_ms - (int64_t)pl->cfg.device_expiry_days * 86400000;
    int64_t deadline = chat_mono_us() + SWEEP_BUDGET_US;
    bool done = false;
    while (!done && chat_mono_us() < deadline) {
        size_t removed = 0;
        chat_err rc = chat_store_push_expire(pl->store, older, SWEEP_STEP, ps->sweep_resume,
                                             sizeof(ps->sweep_resume), &removed, &done);
        if (rc != CHAT_OK) {
            chat_log_store_error(pl, rc, "sweeping push registrations");
            done = true;
        }
        if (removed) {
            ps->removed += removed;
            mosquitto_log_printf(MOSQ_LOG_INFO,
                                 "mosquitto-chat: dropped %zu push registrations of devices "
                                 "unused for %llu days",
                                 removed, (unsigned long long)pl->cfg.device_expiry_days);
        }
    }
    if (done) {
        ps->sweeping = false;
        ps->next_sweep_ms = mono + SWEEP_EVERY_MS;
    }
}

void chat_push_tick(struct chat_plugin *pl, int64_t now_ms)
{
    if (!pl->push) {
        return;
    }
    results_tick(pl);
    walks_tick(pl);
    marks_tick(pl->push, chat_mono_us() / 1000);
    sweep_tick(pl, now_ms);
}

/* ===========================================================================
 * Figures and the admin listing
 * ========================================================================= */

size_t chat_push_figures(struct chat_plugin *pl, const char *names[CHAT_PUSH_FIGURES],
                         uint64_t values[CHAT_PUSH_FIGURES])
{
    struct push_send_stats st;
    if (!pl->push) {
        return 0;
    }
    push_sender_stats(pl->push->sender, &st);
    const char *n[CHAT_PUSH_FIGURES] = {"push/sent", "push/failed", "push/dropped", "push/queued",
                                        "push/removed"};
    uint64_t v[CHAT_PUSH_FIGURES] = {st.sent, st.failed, st.dropped, st.queued, pl->push->removed};
    memcpy(names, n, sizeof(n));
    memcpy(values, v, sizeof(v));
    return CHAT_PUSH_FIGURES;
}

struct list_ctx {
    sbuf *b;
    size_t n;
};

static int list_one(void *ctx, const char *device, const char *bytes, size_t len,
                    int64_t created_ms)
{
    struct list_ctx *l = ctx;
    struct push_reg reg;
    char origin[PUSH_URL_MAX + 1] = "";
    if (!push_reg_decode(bytes, len, &reg)) {
        memset(&reg, 0, sizeof(reg));
    }
    sbuf_puts(l->b, l->n++ ? ",{\"device\":" : "{\"device\":");
    sbuf_json_str(l->b, device);
    sbuf_puts(l->b, ",\"kind\":");
    sbuf_json_str(l->b, push_kind_name(reg.kind));
    /* The origin only: an endpoint's path is the device's secret (anyone
     * holding it can wake the device). */
    if (reg.kind == PUSH_KIND_WEBHOOK) {
        sbuf_puts(l->b, ",\"name\":");
        sbuf_json_str(l->b, reg.name);
    } else if (reg.kind != PUSH_KIND_NONE) {
        push_url_origin(reg.url, origin, sizeof(origin));
        sbuf_puts(l->b, ",\"origin\":");
        sbuf_json_str(l->b, origin);
    }
    sbuf_puts(l->b, ",\"registered\":");
    sbuf_u64(l->b, created_ms > 0 ? (uint64_t)created_ms : 0);
    sbuf_add(l->b, "}", 1);
    return 0;
}

chat_err chat_push_list_json(struct chat_plugin *pl, const char *member, sbuf *b)
{
    struct list_ctx l = {b, 0};
    sbuf_puts(b, ",\"push\":[");
    chat_err rc = chat_store_push_list(pl->store, member, list_one, &l);
    sbuf_add(b, "]", 1);
    return rc;
}
