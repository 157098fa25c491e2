/* store_fixture: the fixture of the store's unit tests (see
 * store_fixture.h). */
#include "store_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The on-disk layout is part of the contract that every key can be deleted
 * (invariant deletable-keys of store/leveldb/ldb_store.c): raw_count counts raw keys of a closed
 * store. */
#include <leveldb/c.h>

void rm_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d != NULL) {
            struct dirent *de;
            while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                    continue;
                size_t n = strlen(path) + 1 + strlen(de->d_name) + 1;
                char *child = malloc(n);
                if (child == NULL)
                    break;
                snprintf(child, n, "%s/%s", path, de->d_name);
                rm_tree(child);
                free(child);
            }
            closedir(d);
        }
        if (rmdir(path) != 0)
            fprintf(stderr, "rmdir %s: %s\n", path, strerror(errno));
    } else if (unlink(path) != 0) {
        fprintf(stderr, "unlink %s: %s\n", path, strerror(errno));
    }
}

/* The fixture's store clock: every envelope gets this time, so that the
 * tests know its bytes in advance. */
static int64_t fixture_clock(void *ctx)
{
    (void)ctx;
    return FIXTURE_TS;
}

int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    char *errmsg = NULL;

    if (fx == NULL)
        return -1;
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/chat_store_test.XXXXXX");
    if (mkdtemp(fx->dir) == NULL) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        goto fail;
    }
    if (chat_store_open(fx->dir, CHAT_SYNC_NONE, &fx->st, &errmsg) != CHAT_OK) {
        fprintf(stderr, "chat_store_open %s: %s\n", fx->dir, errmsg ? errmsg : "(no message)");
        free(errmsg);
        rm_tree(fx->dir);
        goto fail;
    }
    chat_store_set_clock(fx->st, fixture_clock, NULL);
    *state = fx;
    return 0;
fail:
    free(fx);
    return -1;
}

int teardown(void **state)
{
    struct fixture *fx = *state;

    chat_store_close(fx->st);
    rm_tree(fx->dir);
    free(fx);
    return 0;
}

void reopen(struct fixture *fx, chat_sync sync)
{
    char *errmsg = NULL;
    chat_err rc;

    chat_store_close(fx->st);
    fx->st = NULL;
    rc = chat_store_open(fx->dir, sync, &fx->st, &errmsg);
    if (rc != CHAT_OK) {
        fail_msg("reopen %s: %s (%s)", fx->dir, chat_strerror(rc),
                 errmsg ? errmsg : "(no message)");
        /* not reached: fail_msg leaves the case; errmsg leaks only on failure */
    }
    chat_store_set_clock(fx->st, fixture_clock, NULL);
    free(errmsg);
}

size_t env_make(char *buf, const char *group, uint64_t id, size_t size)
{
    char text[ENV_CAP];
    int n = snprintf(text, sizeof(text), "%s#%llu@%d", group, (unsigned long long)id, FIXTURE_TS);

    assert_true(n > 0 && (size_t)n < sizeof(text));
    assert_true(size < ENV_CAP);
    if (size == 0)
        size = (size_t)n;
    assert_true(size >= (size_t)n);
    for (size_t i = 0; i < size; i++)
        buf[i] = i < (size_t)n ? text[i] : '.';
    buf[size] = '\0';
    return size;
}

uint64_t append_parts(chat_store *st, const char *group, const char *from, const char *cid,
                      const char *head, size_t head_len, const char *mid, size_t mid_len,
                      const char *tail, size_t tail_len, bool *duplicate)
{
    chat_envelope tpl = {head, head_len, mid, mid_len, tail, tail_len};
    chat_appended ap;

    ASSERT_OK(chat_store_append(st, group, from, cid, &tpl, &ap));
    assert_non_null(ap.env);
    assert_int_equal(ap.env[ap.len], '\0');
    if (duplicate)
        *duplicate = ap.duplicate;
    else
        assert_false(ap.duplicate);
    free(ap.env);
    return ap.id;
}

uint64_t append_env(chat_store *st, const char *group, const char *from, const char *cid,
                    size_t size)
{
    char env[ENV_CAP], head[ENV_CAP];
    uint64_t before = UINT64_MAX;
    size_t len, natural;

    ASSERT_OK(chat_store_head(st, group, &before));
    natural = env_make(env, group, before + 1, 0);
    len = env_make(env, group, before + 1, size);
    int hn = snprintf(head, sizeof(head), "%s#", group);
    assert_true(hn > 0 && (size_t)hn < sizeof(head));
    uint64_t id = append_parts(st, group, from, cid, head, (size_t)hn, "@", 1, env + natural,
                               len - natural, NULL);
    assert_int_equal(id, before + 1);
    return id;
}

void fill(chat_store *st, const char *group, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        append_env(st, group, "filler", NULL, 0);
}

void check_page_ids(const chat_page *page, const char *group, const uint64_t *ids,
                    const size_t *sizes, size_t count, bool more)
{
    char env[ENV_CAP];
    size_t bytes = 0;

    assert_non_null(page);
    assert_int_equal(page->count, count);
    for (size_t i = 0; i < count; i++) {
        const chat_msg *m = &page->msgs[i];
        size_t len = env_make(env, group, ids[i], sizes ? sizes[i] : 0);

        assert_int_equal(m->id, ids[i]);
        assert_int_equal(m->len, len);
        assert_non_null(m->data);
        assert_memory_equal(m->data, env, len);
        assert_int_equal(m->data[len], '\0');
        bytes += m->len;
    }
    assert_int_equal(page->bytes, bytes);
    assert_int_equal(page->more, more);
}

void check_page_run(const chat_page *page, const char *group, uint64_t first, int step,
                    size_t count, bool more)
{
    uint64_t ids[600];

    assert_true(count <= sizeof(ids) / sizeof(ids[0]));
    for (size_t i = 0; i < count; i++)
        ids[i] = step > 0 ? first + i : first - i;
    check_page_ids(page, group, ids, NULL, count, more);
}

void assert_head(chat_store *st, const char *group, uint64_t want)
{
    uint64_t head = UINT64_MAX;

    ASSERT_OK(chat_store_head(st, group, &head));
    assert_int_equal(head, want);
}

/* The lookups that answer a number and a found flag. */
enum lookup { LOOKUP_CURSOR, LOOKUP_MEMBER, LOOKUP_CID };

/* Looks (group, a, b) up and checks the answer against the one wanted:
 * found or not, and when found its value. */
static void assert_lookup(chat_store *st, enum lookup kind, const char *group, const char *a,
                          const char *b, bool want_found, uint64_t want)
{
    uint64_t v = UINT64_MAX;
    bool found = !want_found;

    switch (kind) {
    case LOOKUP_CURSOR:
        ASSERT_OK(chat_store_cursor_get(st, group, a, b, &v, &found));
        break;
    case LOOKUP_MEMBER:
        ASSERT_OK(chat_store_member_get(st, group, a, &v, &found));
        break;
    case LOOKUP_CID:
        ASSERT_OK(chat_store_cid_find(st, group, a, b, &v, &found));
        break;
    }
    assert_int_equal(found, want_found);
    if (want_found)
        assert_int_equal(v, want);
}

void assert_cursor(chat_store *st, const char *group, const char *member, const char *device,
                   bool want_found, uint64_t want)
{
    assert_lookup(st, LOOKUP_CURSOR, group, member, device, want_found, want);
}

void assert_member(chat_store *st, const char *group, const char *member, bool want_found,
                   uint64_t want_joined)
{
    assert_lookup(st, LOOKUP_MEMBER, group, member, NULL, want_found, want_joined);
}

void assert_cid(chat_store *st, const char *group, const char *from, const char *cid,
                bool want_found, uint64_t want)
{
    assert_lookup(st, LOOKUP_CID, group, from, cid, want_found, want);
}

void assert_not_stored(chat_store *st, const char *group, uint64_t id)
{
    chat_msg msg = {0};
    bool found = true;

    ASSERT_OK(chat_store_get(st, group, id, &msg, &found));
    assert_false(found);
}

int collect_group(void *ctx, const char *group, uint64_t joined)
{
    struct walk *w = ctx;

    if (w->calls < WALK_MAX) {
        snprintf(w->names[w->calls], sizeof(w->names[0]), "%s", group);
        w->joined[w->calls] = joined;
    }
    w->calls++;
    return (w->stop_after != 0 && w->calls >= w->stop_after) ? 1 : 0;
}

size_t noise_make(char *buf, const char *group, uint64_t id)
{
    uint64_t x = 0x9e3779b97f4a7c15ull ^ (id * 0x100000001b3ull) ^ (uint64_t)strlen(group);
    int n = snprintf(buf, NOISE_LEN, "<%s#%llu>%d", group, (unsigned long long)id, FIXTURE_TS);

    assert_true(n > 0 && n < NOISE_LEN);
    for (size_t i = (size_t)n; i < NOISE_LEN; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (char)(0x21 + x % 94);
    }
    return NOISE_LEN;
}

void noise_fill(chat_store *st, const char *group, uint64_t n)
{
    char env[NOISE_LEN + 1], head[NOISE_LEN];

    for (uint64_t id = 1; id <= n; id++) {
        noise_make(env, group, id);
        env[NOISE_LEN] = '\0';
        int hn = snprintf(head, sizeof(head), "<%s#", group);
        size_t tail =
            (size_t)hn + (size_t)snprintf(NULL, 0, "%llu>%d", (unsigned long long)id, FIXTURE_TS);
        assert_int_equal(append_parts(st, group, "u", NULL, head, (size_t)hn, ">", 1, env + tail,
                                      NOISE_LEN - tail, NULL),
                         id);
    }
}

size_t raw_prefix(char *buf, size_t cap, char tag, const char *a, const char *b)
{
    size_t len = 0;
    const char *parts[2] = {a, b};

    buf[len++] = tag;
    for (int i = 0; i < 2 && parts[i]; i++) {
        size_t n = strlen(parts[i]);
        assert_true(len + 2 + n <= cap);
        buf[len++] = (char)(n >> 8);
        buf[len++] = (char)(n & 0xff);
        memcpy(buf + len, parts[i], n);
        len += n;
    }
    return len;
}

size_t raw_count(struct fixture *fx, const char *prefix, size_t plen)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL;
    size_t n = 0;

    chat_store_close(fx->st);
    fx->st = NULL;
    leveldb_t *db = leveldb_open(opt, fx->dir, &err);
    if (err)
        fail_msg("leveldb_open %s: %s", fx->dir, err);
    leveldb_iterator_t *it = leveldb_create_iterator(db, ro);
    for (leveldb_iter_seek(it, prefix, plen); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen = 0;
        const char *k = leveldb_iter_key(it, &klen);
        if (klen < plen || memcmp(k, prefix, plen) != 0)
            break;
        n++;
    }
    leveldb_iter_destroy(it);
    leveldb_close(db);
    leveldb_readoptions_destroy(ro);
    leveldb_options_destroy(opt);
    reopen(fx, CHAT_SYNC_NONE);
    return n;
}

size_t group_keys(struct fixture *fx, char tag, const char *group, const char *member)
{
    char p[256];
    return raw_count(fx, p, raw_prefix(p, sizeof(p), tag, group, member));
}

void raw_write(struct fixture *fx, const char *k, size_t klen, const void *v, size_t vlen)
{
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;

    chat_store_close(fx->st);
    fx->st = NULL;
    leveldb_t *db = leveldb_open(opt, fx->dir, &err);
    if (err)
        fail_msg("leveldb_open %s: %s", fx->dir, err);
    if (v)
        leveldb_put(db, wo, k, klen, v, vlen, &err);
    else
        leveldb_delete(db, wo, k, klen, &err);
    if (err)
        fail_msg("writing a raw key: %s", err);
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(opt);
    reopen(fx, CHAT_SYNC_NONE);
}

const char *too_long_name(void)
{
    static char name[CHAT_STORE_MAX_NAME + 2];

    memset(name, 'x', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    return name;
}

int collect_member(void *ctx, const char *member, uint64_t joined)
{
    struct names *w = ctx;
    assert_true(w->n < 8);
    snprintf(w->name[w->n], sizeof(w->name[0]), "%s", member);
    w->num[w->n++] = joined;
    return 0;
}

int collect_device(void *ctx, const char *device, uint64_t acked, int64_t used)
{
    struct names *w = ctx;
    assert_true(w->n < 8);
    w->used[w->n] = used;
    return collect_member(ctx, device, acked);
}

int collect_name(void *ctx, const char *group, uint64_t head)
{
    return collect_member(ctx, group, head);
}

void collect_problem(void *ctx, const char *group, const char *problem)
{
    struct problems *p = ctx;
    size_t len = strlen(p->all);
    p->n++;
    snprintf(p->last, sizeof(p->last), "%s: %s", group, problem);
    snprintf(p->all + len, sizeof(p->all) - len, "%s: %s\n", group, problem);
}

chat_job_state wait_job(chat_store *st, int seconds)
{
    chat_job_state js;
    for (int i = 0; i < seconds * 100; i++) {
        ASSERT_OK(chat_store_job_state(st, &js));
        if (js.status != CHAT_JOB_RUNNING) {
            return js;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    fail_msg("the job did not end in %d s", seconds);
    return js;
}
