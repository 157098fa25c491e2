/* chat_store: the public functions that do not depend on how messages are
 * kept (error texts, the clock, pages); the rest are in leveldb/. See the
 * design note in chat_store.h for the key layout and invariants. */
#include "chat_store.h"
#include "ldb_db.h"
#include "ldb_log.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *chat_strerror(chat_err err)
{
    switch (err) {
    case CHAT_OK:
        return "success";
    case CHAT_ENOMEM:
        return "out of memory";
    case CHAT_EINVAL:
        return "invalid argument";
    case CHAT_EIO:
        return "storage I/O error";
    case CHAT_ECORRUPT:
        return "stored record is corrupt";
    case CHAT_ECONFLICT:
        return "id is not the group's next id";
    }
    return "unknown error";
}

const char *chat_store_last_error(const chat_store *st)
{
    return st ? st->last_err : "";
}

static int64_t realtime_ms(void *ctx)
{
    struct timespec ts;
    (void)ctx;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void chat_store_set_clock(chat_store *st, chat_clock_fn fn, void *ctx)
{
    st->clock = fn ? fn : realtime_ms;
    st->clock_ctx = fn ? ctx : NULL;
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

/* Appends the iterator's current record to page; false on out of memory. */
static bool page_push(chat_page *page, size_t *cap, uint64_t id, const char *v, size_t vlen)
{
    if (page->count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        chat_msg *n = realloc(page->msgs, ncap * sizeof(*n));
        if (!n) {
            return false;
        }
        page->msgs = n;
        *cap = ncap;
    }
    chat_msg *m = &page->msgs[page->count];
    m->data = malloc(vlen + 1);
    if (!m->data) {
        return false;
    }
    memcpy(m->data, v, vlen);
    m->data[vlen] = '\0';
    m->len = vlen;
    m->id = id;
    page->count++;
    page->bytes += vlen;
    return true;
}

chat_err chat_store_scan_forward(chat_store *st, const char *group, uint64_t after,
                                 size_t max_count, size_t max_bytes, chat_msg_fn fn, void *ctx,
                                 bool *more)
{
    return ldb_scan(st, group, after, true, max_count, max_bytes, fn, ctx, more);
}

struct page_builder {
    chat_page *page;
    size_t cap;
};

static int push_cb(void *ctx, uint64_t id, const char *data, size_t len)
{
    struct page_builder *pb = ctx;
    return page_push(pb->page, &pb->cap, id, data, len) ? 0 : 1;
}

static chat_err read_page(chat_store *st, const char *group, uint64_t from_id, bool forward,
                          size_t max_count, size_t max_bytes, chat_page **out)
{
    struct page_builder pb = {calloc(1, sizeof(chat_page)), 0};
    *out = NULL;
    if (!pb.page) {
        return CHAT_ENOMEM;
    }
    chat_err rc =
        ldb_scan(st, group, from_id, forward, max_count, max_bytes, push_cb, &pb, &pb.page->more);
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
    return read_page(st, group, after, true, max_count, max_bytes, out);
}

chat_err chat_store_read_backward(chat_store *st, const char *group, uint64_t before,
                                  size_t max_count, size_t max_bytes, chat_page **out)
{
    return read_page(st, group, before, false, max_count, max_bytes, out);
}
