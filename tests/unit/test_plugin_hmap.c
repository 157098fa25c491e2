/* Unit tests of plugin/hmap.c: the hash map of the plugin's per-client
 * state, checked against a plain array of what it should hold, through its
 * incremental growth (invariant one-home): puts, removes, replacements and
 * walks that remove, while an old table is still being moved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

#define KEYS 20000

/* What the map should hold: present[i] says whether key i is in it, with
 * value (void *)(i + 1) + gen[i] (a replacement moves gen). */
struct model {
    bool present[KEYS];
    uintptr_t gen[KEYS];
    size_t count;
};

static size_t key_of(unsigned i, char *buf)
{
    return (size_t)snprintf(buf, 32, "client-%u", i);
}

static void *val_of(const struct model *md, unsigned i)
{
    return (void *)(uintptr_t)(i + 1 + md->gen[i] * KEYS);
}

/* Every key below n answers as the model says. */
static void check_some(const chat_hmap *m, const struct model *md, unsigned n)
{
    char k[32];
    assert_int_equal(chat_hmap_count(m), md->count);
    for (unsigned i = 0; i < n; i++) {
        size_t len = key_of(i, k);
        void *v = chat_hmap_get(m, k, len);
        if (md->present[i]) {
            assert_ptr_equal(v, val_of(md, i));
        } else {
            assert_null(v);
        }
    }
}

static void check_all(const chat_hmap *m, const struct model *md)
{
    check_some(m, md, KEYS);
}

static void put(chat_hmap *m, struct model *md, unsigned i)
{
    char k[32];
    void *old = (void *)1;
    size_t len = key_of(i, k);
    if (md->present[i]) {
        void *was = val_of(md, i);
        md->gen[i]++;
        assert_true(chat_hmap_put(m, k, len, val_of(md, i), &old));
        assert_ptr_equal(old, was);
    } else {
        assert_true(chat_hmap_put(m, k, len, val_of(md, i), &old));
        assert_null(old);
        md->present[i] = true;
        md->count++;
    }
}

static void del(chat_hmap *m, struct model *md, unsigned i)
{
    char k[32];
    size_t len = key_of(i, k);
    void *v = chat_hmap_remove(m, k, len);
    if (md->present[i]) {
        assert_ptr_equal(v, val_of(md, i));
        md->present[i] = false;
        md->count--;
    } else {
        assert_null(v);
    }
}

/* Checked after every put from empty to KEYS entries (every doubling, and
 * every state of the moving between them), the reads agree. */
static void test_grow_step_by_step(void **state)
{
    static struct model md;
    (void)state;
    memset(&md, 0, sizeof(md));
    chat_hmap *m = chat_hmap_create();
    assert_non_null(m);
    for (unsigned i = 0; i < 2000; i++) {
        put(m, &md, i);
        check_some(m, &md, 2001);
    }
    for (unsigned i = 2000; i < KEYS; i++) {
        put(m, &md, i);
    }
    check_all(m, &md);
    chat_hmap_destroy(m, NULL);
}

/* Pseudo-random puts, replacements and removes; checked at many points,
 * some of them while an old table is half moved. */
static void test_mixed(void **state)
{
    static struct model md;
    (void)state;
    memset(&md, 0, sizeof(md));
    chat_hmap *m = chat_hmap_create();
    assert_non_null(m);
    uint64_t x = 88172645463325252ull;
    for (unsigned step = 0; step < 200000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned i = (unsigned)(x % KEYS);
        /* Grow more than shrink, so that the map doubles several times. */
        if (x % 5 < 3) {
            put(m, &md, i);
        } else {
            del(m, &md, i);
        }
        if (step % 9973 == 0) {
            check_all(m, &md);
        }
    }
    check_all(m, &md);
    chat_hmap_destroy(m, NULL);
}

struct walk {
    struct model *md;
    size_t seen;
};

static bool drop_odd(void *ctx, const void *key, size_t len, void *val)
{
    struct walk *w = ctx;
    char k[32], got[32];
    assert_true(len > 7 && len < sizeof(got));
    memcpy(got, key, len); /* keys are bytes, not NUL-terminated */
    got[len] = '\0';
    unsigned i = (unsigned)strtoul(got + 7, NULL, 10);
    assert_true(i < KEYS);
    assert_int_equal(len, key_of(i, k));
    assert_memory_equal(key, k, len);
    assert_true(w->md->present[i]);
    assert_ptr_equal(val, val_of(w->md, i));
    w->seen++;
    if (i % 2) {
        w->md->present[i] = false;
        w->md->count--;
        return true;
    }
    return false;
}

/* A walk sees every entry once, in both tables while growing, and removes
 * those its function takes. */
static void test_foreach_while_growing(void **state)
{
    static struct model md;
    (void)state;
    memset(&md, 0, sizeof(md));
    chat_hmap *m = chat_hmap_create();
    assert_non_null(m);
    /* 129 entries: the map just doubled from 128 buckets, nothing moved. */
    for (unsigned i = 0; i < 129; i++) {
        put(m, &md, i);
    }
    struct walk w = {&md, 0};
    chat_hmap_foreach(m, drop_odd, &w);
    assert_int_equal(w.seen, 129);
    check_all(m, &md);
    /* Grow further and walk again, half way through a move. */
    for (unsigned i = 129; i < 5000; i++) {
        put(m, &md, i);
    }
    w.seen = 0;
    size_t before = md.count;
    chat_hmap_foreach(m, drop_odd, &w);
    assert_int_equal(w.seen, before);
    check_all(m, &md);
    chat_hmap_destroy(m, NULL);
}

static int freed;
static void count_free(void *v)
{
    (void)v;
    freed++;
}

/* Destroy frees every value once, also with an old table not yet moved
 * (valgrind checks the entries). */
static void test_destroy_while_growing(void **state)
{
    (void)state;
    chat_hmap *m = chat_hmap_create();
    assert_non_null(m);
    char k[32];
    for (unsigned i = 0; i < 1025; i++) {
        size_t len = key_of(i, k);
        assert_true(chat_hmap_put(m, k, len, (void *)(uintptr_t)(i + 1), NULL));
    }
    freed = 0;
    chat_hmap_destroy(m, count_free);
    assert_int_equal(freed, 1025);
    chat_hmap_destroy(NULL, count_free);
}

/* Draining in slices, while an old table is still being moved: each call
 * frees at most its share, the count says what is left, every value is
 * freed once, and what is left still answers as before. */
static void test_drain_in_slices(void **state)
{
    static struct model md;
    (void)state;
    memset(&md, 0, sizeof(md));
    chat_hmap *m = chat_hmap_create();
    assert_non_null(m);
    /* 129 entries: the map just doubled, nothing moved yet. */
    for (unsigned i = 0; i < 129; i++) {
        put(m, &md, i);
    }
    freed = 0;
    assert_int_equal(chat_hmap_drain(m, 50, count_free), 79);
    assert_int_equal(freed, 50);
    /* Grow again (the drain left the old table half moved), then drain
     * the rest in slices of 1000. */
    for (unsigned i = 1000; i < 6000; i++) {
        assert_true(chat_hmap_put(m, &i, sizeof(i), (void *)(uintptr_t)(i + 1), NULL));
    }
    size_t left = chat_hmap_count(m), calls = 0;
    assert_int_equal(left, 79 + 5000);
    while (left > 0) {
        size_t before = left;
        left = chat_hmap_drain(m, 1000, count_free);
        assert_int_equal(before - left, before < 1000 ? before : 1000);
        assert_int_equal(chat_hmap_count(m), left);
        calls++;
    }
    assert_int_equal(calls, 6);
    assert_int_equal(freed, 129 + 5000);
    assert_int_equal(chat_hmap_drain(m, 10, count_free), 0);
    /* Empty, and still a map. */
    unsigned k = 7;
    assert_null(chat_hmap_get(m, &k, sizeof(k)));
    assert_true(chat_hmap_put(m, &k, sizeof(k), (void *)1, NULL));
    assert_ptr_equal(chat_hmap_get(m, &k, sizeof(k)), (void *)1);
    chat_hmap_destroy(m, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow_step_by_step),     cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_foreach_while_growing), cmocka_unit_test(test_destroy_while_growing),
        cmocka_unit_test(test_drain_in_slices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
