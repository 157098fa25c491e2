/* store_log: the message log of chat_store.h in front of the backend's ops
 * (heads, appends, lookups, scans, retention, the list of groups), and the
 * pages built from its scans. */
#include "chat_store.h"
#include "store_backend.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * The message log
 * --------------------------------------------------------------------- */

chat_err chat_store_head(chat_store *st, const char *group, uint64_t *head)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->head(st, group, head);
}

chat_err chat_store_first(chat_store *st, const char *group, uint64_t *first)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->first(st, group, first);
}

chat_err chat_store_append(chat_store *st, const char *group, const char *from, const char *cid,
                           const chat_envelope *env, bool sender_read, chat_appended *out)
{
    if (!out) {
        return CHAT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || !from || !env || (!env->head && env->head_len) || (!env->mid && env->mid_len) ||
        (!env->tail && env->tail_len)) {
        return CHAT_EINVAL;
    }
    chat_err rc = st->ops->append(st, group, from, cid, env, sender_read, out);
    if (rc != CHAT_OK) {
        free(out->env);
        out->env = NULL;
    }
    return rc;
}

chat_err chat_store_cid_find(chat_store *st, const char *group, const char *from, const char *cid,
                             uint64_t *id, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->cid_find(st, group, from, cid, id, found);
}

chat_err chat_store_change(chat_store *st, const char *group, const char *from,
                           const chat_change *ch, chat_appended *out, bool *applied)
{
    if (!out || !applied) {
        return CHAT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    *applied = false;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || !from || !ch || ch->id == 0 || (!ch->expect && ch->expect_len) ||
        (!ch->before && ch->before_len) || (!ch->after && ch->after_len) ||
        (!ch->msg.head && ch->msg.head_len) || (!ch->msg.mid && ch->msg.mid_len) ||
        (!ch->msg.tail && ch->msg.tail_len) || (!ch->last && ch->last_len) ||
        (ch->stamp_id && !ch->stamp) || ch->nrewrites > CHAT_STORE_REWRITES_MAX ||
        (!ch->rewrites && ch->nrewrites)) {
        return CHAT_EINVAL;
    }
    /* Each rewrite a later message than N, once: two of one id in one write
     * would leave whichever the backend wrote last. */
    for (size_t i = 0; i < ch->nrewrites; i++) {
        const chat_rewrite *w = &ch->rewrites[i];
        if (w->id <= ch->id || (!w->expect && w->expect_len) || (!w->text && w->text_len)) {
            return CHAT_EINVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (ch->rewrites[j].id == w->id) {
                return CHAT_EINVAL;
            }
        }
    }
    chat_err rc = st->ops->change(st, group, from, ch, out, applied);
    if (rc != CHAT_OK || !*applied) {
        free(out->env);
        out->env = NULL;
        *applied = *applied && rc == CHAT_OK;
    }
    return rc;
}

chat_err chat_store_cid_of(chat_store *st, const char *group, uint64_t id, char **cid, bool *found)
{
    if (!cid || !found) {
        return CHAT_EINVAL;
    }
    *cid = NULL;
    *found = false;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group) {
        return CHAT_EINVAL;
    }
    chat_err rc = st->ops->cid_of(st, group, id, cid, found);
    if (rc != CHAT_OK) {
        free(*cid);
        *cid = NULL;
        *found = false;
    }
    return rc;
}

chat_err chat_store_get(chat_store *st, const char *group, uint64_t id, chat_msg *msg, bool *found)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return st->ops->get(st, group, id, msg, found);
}

chat_err chat_store_scan_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx,
                                 bool *more)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *more = false;
    if (max_count == 0 || !fn) {
        return CHAT_EINVAL;
    }
    return st->ops->scan(st, group, after, true, max_count, max_bytes, fn, ctx, more);
}

chat_err chat_store_scan_page(chat_store *st, const char *group, uint64_t after, size_t max_count,
                              size_t max_bytes, chat_msg_fn fn, void *ctx, bool *more,
                              uint64_t *head, uint64_t *first)
{
    uint64_t h = 0, f = 1;
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *more = false;
    if (max_count == 0 || !fn) {
        return CHAT_EINVAL;
    }
    if (st->ops->scan_page) {
        return st->ops->scan_page(st, group, after, max_count, max_bytes, fn, ctx, more, head,
                                  first);
    }
    chat_err rc = st->ops->head(st, group, &h);
    if (rc == CHAT_OK) {
        rc = st->ops->first(st, group, &f);
    }
    if (rc != CHAT_OK) {
        return rc;
    }
    *head = h;
    *first = f;
    return st->ops->scan(st, group, after, true, max_count, max_bytes, fn, ctx, more);
}

void chat_page_destroy(chat_page *page)
{
    if (!page) {
        return;
    }
    for (size_t i = 0; i < page->count; i++) {
        free(page->msgs[i].data);
    }
    free(page->msgs);
    free(page);
}

/* A page as a scan fills it. */
struct page_builder {
    chat_page *page;
    size_t cap;
    bool failed; /* out of memory: the scan stopped */
};

/* A scan callback: appends a copy of the message to the page, or stops the
 * scan when memory runs out (and says so in failed: a stopped scan returns
 * CHAT_OK). */
static int page_push(void *ctx, uint64_t id, const char *v, size_t vlen)
{
    struct page_builder *pb = ctx;
    chat_page *page = pb->page;
    if (page->count == pb->cap) {
        size_t ncap = pb->cap ? pb->cap * 2 : 16;
        chat_msg *n = realloc(page->msgs, ncap * sizeof(*n));
        if (!n) {
            pb->failed = true;
            return 1;
        }
        page->msgs = n;
        pb->cap = ncap;
    }
    chat_msg *m = &page->msgs[page->count];
    m->data = malloc(vlen + 1);
    if (!m->data) {
        pb->failed = true;
        return 1;
    }
    memcpy(m->data, v, vlen);
    m->data[vlen] = '\0';
    m->len = vlen;
    m->id = id;
    page->count++;
    page->bytes += vlen;
    return 0;
}

static chat_err read_page(chat_store *st, const char *group, uint64_t from_id, bool forward,
                          size_t max_count, size_t max_bytes, chat_page **out)
{
    struct page_builder pb = {NULL, 0, false};
    *out = NULL;
    if (max_count == 0) {
        return CHAT_EINVAL;
    }
    pb.page = calloc(1, sizeof(chat_page));
    if (!pb.page) {
        return CHAT_ENOMEM;
    }
    chat_err rc = st->ops->scan(st, group, from_id, forward, max_count, max_bytes, page_push, &pb,
                                &pb.page->more);
    if (rc == CHAT_OK && pb.failed) {
        rc = CHAT_ENOMEM;
    }
    if (rc != CHAT_OK) {
        chat_page_destroy(pb.page);
        return rc;
    }
    *out = pb.page;
    return CHAT_OK;
}

chat_err chat_store_read_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_page **out)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return read_page(st, group, after, true, max_count, max_bytes, out);
}

chat_err chat_store_read_backward(chat_store *st, const char *group, uint64_t before,
                                  size_t max_count, size_t max_bytes, chat_page **out)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    return read_page(st, group, before, false, max_count, max_bytes, out);
}

chat_err chat_store_trim(chat_store *st, const char *group, uint64_t before, size_t max_keys,
                         uint64_t *first_now)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    if (!group || max_keys == 0) {
        return CHAT_EINVAL;
    }
    return st->ops->trim(st, group, before, max_keys, first_now);
}

chat_err chat_store_groups(chat_store *st, const char *after, size_t max, chat_head_fn fn,
                           void *ctx, bool *done)
{
    if (!st) {
        return CHAT_EIO; /* closed: see chat_store.h */
    }
    *done = false;
    if (!fn) {
        return CHAT_EINVAL;
    }
    return st->ops->groups(st, after, max, fn, ctx, done);
}
