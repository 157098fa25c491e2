/* Unit tests of read markers and member counts (leveldb/ldb_read, and what
 * leveldb/ldb_member and leveldb/ldb_delete keep of them: invariant read-markers).
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Helpers
 * --------------------------------------------------------------------- */

static void assert_read(chat_store *st, const char *group, const char *member, uint64_t want)
{
    uint64_t id = 99;
    ASSERT_OK(chat_store_read_get(st, group, member, &id));
    if (id != want)
        fail_msg("read marker of %s in %s is %llu, want %llu", member, group,
                 (unsigned long long)id, (unsigned long long)want);
}

static void assert_count(chat_store *st, const char *group, uint64_t want)
{
    uint64_t n = 99;
    ASSERT_OK(chat_store_member_count(st, group, &n));
    if (n != want)
        fail_msg("group %s has %llu members, want %llu", group, (unsigned long long)n,
                 (unsigned long long)want);
}

/* One read: checks what the store says back. */
static void read_to(chat_store *st, const char *group, const char *member, const char *device,
                    uint64_t id, uint64_t want_read, uint64_t want_acked, bool want_moved)
{
    uint64_t read = 99, acked = 99;
    bool moved = !want_moved, found = false;
    ASSERT_OK(
        chat_store_read_advance(st, group, member, device, id, &read, &acked, &moved, &found));
    assert_true(found);
    if (read != want_read || acked != want_acked || moved != want_moved)
        fail_msg("read of %llu by %s/%s: read %llu acked %llu moved %d, want %llu %llu %d",
                 (unsigned long long)id, member, device, (unsigned long long)read,
                 (unsigned long long)acked, moved, (unsigned long long)want_read,
                 (unsigned long long)want_acked, want_moved);
}

/* What chat_store_reads hands over. */
#define READS_MAX 32
struct reads {
    char names[READS_MAX][64];
    uint64_t ids[READS_MAX];
    int calls;
    int stop_after; /* 0: never stop */
};

static int collect_read(void *ctx, const char *member, uint64_t read)
{
    struct reads *r = ctx;
    assert_true(r->calls < READS_MAX);
    snprintf(r->names[r->calls], sizeof(r->names[0]), "%s", member);
    r->ids[r->calls] = read;
    r->calls++;
    return r->stop_after && r->calls == r->stop_after;
}

/* Walks group's members after `after` (max at most) and checks the names
 * (a space-separated list) and more. */
static void assert_reads(chat_store *st, const char *group, const char *after, size_t max,
                         const char *want, bool want_more)
{
    struct reads r = {0};
    char got[READS_MAX * 65] = "";
    bool more = !want_more;
    ASSERT_OK(chat_store_reads(st, group, after, max, collect_read, &r, &more));
    for (int i = 0; i < r.calls; i++) {
        strcat(got, i ? " " : "");
        strcat(got, r.names[i]);
    }
    if (strcmp(got, want) != 0 || more != want_more)
        fail_msg("members of %s after %s: \"%s\" more %d, want \"%s\" more %d", group,
                 after ? after : "(none)", got, more, want, want_more);
}

/* ------------------------------------------------------------------------
 * Read markers
 * --------------------------------------------------------------------- */

static void test_read_forward_only(void **state)
{
    struct fixture *fx = *state;

    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    assert_read(fx->st, "g", "alice", 0);
    fill(fx->st, "g", 10);
    read_to(fx->st, "g", "alice", "d1", 15, 15, 15, true);
    /* back and equal: nothing moves */
    read_to(fx->st, "g", "alice", "d1", 12, 15, 15, false);
    read_to(fx->st, "g", "alice", "d1", 15, 15, 15, false);
    read_to(fx->st, "g", "alice", "d1", 0, 15, 15, false);
    /* above head: taken as head */
    read_to(fx->st, "g", "alice", "d1", 1000, 20, 20, true);
    assert_read(fx->st, "g", "alice", 20);
    reopen(fx, CHAT_SYNC_NONE);
    assert_read(fx->st, "g", "alice", 20);
    assert_cursor(fx->st, "g", "alice", "d1", true, 20);
}

/* The marker is the member's, over all its devices; each device's cursor
 * moves with its own reads only. */
static void test_read_across_devices(void **state)
{
    struct fixture *fx = *state;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 50);
    read_to(fx->st, "g", "alice", "phone", 40, 40, 40, true);
    /* the laptop read less: its cursor moves, the marker stays */
    read_to(fx->st, "g", "alice", "laptop", 30, 40, 30, false);
    assert_cursor(fx->st, "g", "alice", "laptop", true, 30);
    assert_cursor(fx->st, "g", "alice", "phone", true, 40);
    read_to(fx->st, "g", "alice", "laptop", 45, 45, 45, true);
    /* a read below a device's cursor leaves the cursor */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "phone", 50, NULL));
    read_to(fx->st, "g", "alice", "phone", 46, 46, 50, true);
    assert_read(fx->st, "g", "alice", 46);
}

static void test_read_non_member(void **state)
{
    struct fixture *fx = *state;
    uint64_t read = 7, acked = 7;
    bool moved = true, found = true;

    fill(fx->st, "g", 5);
    ASSERT_OK(
        chat_store_read_advance(fx->st, "g", "mallory", "d1", 3, &read, &acked, &moved, &found));
    assert_false(found);
    assert_false(moved);
    assert_int_equal(read, 0);
    assert_int_equal(acked, 0);
    assert_read(fx->st, "g", "mallory", 0);
    assert_cursor(fx->st, "g", "mallory", "d1", false, 0);
    assert_int_equal(group_keys(fx, 'R', "g", NULL), 0);
    /* NULL out-parameters are allowed, and bad arguments refused */
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_read_advance(fx->st, "g", "bob", "d1", 3, NULL, NULL, NULL, &found));
    assert_true(found);
    assert_read(fx->st, "g", "bob", 3);
    assert_int_equal(
        chat_store_read_advance(fx->st, "g", too_long_name(), "d1", 3, NULL, NULL, NULL, &found),
        CHAT_EINVAL);
    assert_int_equal(
        chat_store_read_advance(fx->st, NULL, "bob", "d1", 3, NULL, NULL, NULL, &found),
        CHAT_EINVAL);
}

/* ------------------------------------------------------------------------
 * Member counts
 * --------------------------------------------------------------------- */

static void test_count_join_leave(void **state)
{
    struct fixture *fx = *state;

    assert_count(fx->st, "g", 0);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL)); /* again: no change */
    ASSERT_OK(chat_store_member_add(fx->st, "g2", "alice", NULL));
    assert_count(fx->st, "g", 2);
    assert_count(fx->st, "g2", 1);
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "carol")); /* not a member: no change */
    assert_count(fx->st, "g", 2);
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "alice"));
    assert_count(fx->st, "g", 1);
    reopen(fx, CHAT_SYNC_NONE);
    assert_count(fx->st, "g", 1);
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "bob"));
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "bob"));
    assert_count(fx->st, "g", 0);
    /* no member, no count record */
    assert_int_equal(group_keys(fx, 'N', "g", NULL), 0);
    assert_int_equal(group_keys(fx, 'N', "g2", NULL), 1);
}

/* Leaving takes the marker with it; joining again starts from 0. */
static void test_leave_drops_marker(void **state)
{
    struct fixture *fx = *state;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 5);
    read_to(fx->st, "g", "alice", "d1", 4, 4, 4, true);
    assert_int_equal(group_keys(fx, 'R', "g", NULL), 1);
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "alice"));
    assert_int_equal(group_keys(fx, 'R', "g", NULL), 0);
    assert_read(fx->st, "g", "alice", 0);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    assert_read(fx->st, "g", "alice", 0);
    assert_reads(fx->st, "g", NULL, 10, "alice", false);
}

/* ------------------------------------------------------------------------
 * The members in name order
 * --------------------------------------------------------------------- */

static void test_reads_name_order(void **state)
{
    struct fixture *fx = *state;
    const char *names[] = {"bob", "al", "carol", "alice", "b", "Zed", "alicia"};
    struct reads r = {0};
    bool more = true;

    fill(fx->st, "g", 10);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        ASSERT_OK(chat_store_member_add(fx->st, "g", names[i], NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "gg", "aaron", NULL)); /* another group */
    ASSERT_OK(chat_store_member_add(fx->st, "h", "aaron", NULL));
    read_to(fx->st, "g", "carol", "d", 7, 7, 7, true);
    read_to(fx->st, "g", "al", "d", 3, 3, 3, true);

    /* byte order of the names, whatever their lengths */
    ASSERT_OK(chat_store_reads(fx->st, "g", NULL, 100, collect_read, &r, &more));
    assert_false(more);
    assert_int_equal(r.calls, 7);
    const char *want[] = {"Zed", "al", "alice", "alicia", "b", "bob", "carol"};
    const uint64_t ids[] = {0, 3, 0, 0, 0, 0, 7};
    for (int i = 0; i < 7; i++) {
        assert_string_equal(r.names[i], want[i]);
        assert_int_equal(r.ids[i], ids[i]);
    }
    /* paging after a name, whether or not it is a member */
    assert_reads(fx->st, "g", "", 3, "Zed al alice", true);
    assert_reads(fx->st, "g", "alice", 3, "alicia b bob", true);
    assert_reads(fx->st, "g", "bob", 3, "carol", false);
    assert_reads(fx->st, "g", "bob", 1, "carol", false);
    assert_reads(fx->st, "g", "alic", 2, "alice alicia", true);
    assert_reads(fx->st, "g", "carol", 3, "", false);
    assert_reads(fx->st, "g", "zz", 3, "", false);
    assert_reads(fx->st, "none", NULL, 3, "", false);
    /* fn stops the walk: more, the item it stopped on not counted */
    memset(&r, 0, sizeof(r));
    r.stop_after = 2;
    ASSERT_OK(chat_store_reads(fx->st, "g", NULL, 100, collect_read, &r, &more));
    assert_true(more);
    assert_int_equal(r.calls, 2);
    assert_int_equal(chat_store_reads(fx->st, "g", NULL, 0, collect_read, &r, &more), CHAT_EINVAL);
}

/* ------------------------------------------------------------------------
 * Group deletion and every key's way out
 * --------------------------------------------------------------------- */

static void delete_all(chat_store *st, const char *group, size_t max_keys)
{
    bool done = false;
    for (int calls = 0; !done && calls < 10000; calls++)
        ASSERT_OK(chat_store_group_delete(st, group, max_keys, &done));
    assert_true(done);
}

static void test_group_delete(void **state)
{
    struct fixture *fx = *state;
    bool done = true;
    char name[16];

    fill(fx->st, "g", 20);
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "m%02d", i);
        ASSERT_OK(chat_store_member_add(fx->st, "g", name, NULL));
        read_to(fx->st, "g", name, "d", (uint64_t)i + 1, (uint64_t)i + 1, (uint64_t)i + 1, true);
        ASSERT_OK(chat_store_member_add(fx->st, "g2", name, NULL));
    }
    assert_count(fx->st, "g", 10);

    /* The first step: no earlier membership counts, nor shows */
    ASSERT_OK(chat_store_group_delete(fx->st, "g", 3, &done));
    assert_false(done);
    assert_count(fx->st, "g", 0);
    assert_reads(fx->st, "g", NULL, 100, "", false);
    assert_read(fx->st, "g", "m05", 6); /* the record lingers until the walk gets there */
    /* one joins meanwhile: counted, listed from 0, kept by the later steps */
    ASSERT_OK(chat_store_member_add(fx->st, "g", "m05", NULL));
    assert_read(fx->st, "g", "m05", 0);
    assert_count(fx->st, "g", 1);
    assert_reads(fx->st, "g", NULL, 100, "m05", false);
    /* an old membership's removal changes no count */
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "m07"));
    assert_count(fx->st, "g", 1);
    delete_all(fx->st, "g", 3);
    assert_count(fx->st, "g", 1);
    assert_reads(fx->st, "g", NULL, 100, "m05", false);
    assert_int_equal(group_keys(fx, 'R', "g", NULL), 1);
    /* the neighbour is whole */
    assert_count(fx->st, "g2", 10);
    assert_int_equal(group_keys(fx, 'R', "g2", NULL), 10);

    /* a deletion with nobody joining leaves neither 'R' nor 'N' */
    delete_all(fx->st, "g2", 4);
    assert_count(fx->st, "g2", 0);
    assert_int_equal(group_keys(fx, 'R', "g2", NULL), 0);
    assert_int_equal(group_keys(fx, 'N', "g2", NULL), 0);
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "m05"));
    assert_int_equal(group_keys(fx, 'R', "g", NULL), 0);
    assert_int_equal(group_keys(fx, 'N', "g", NULL), 0);
}

/* ------------------------------------------------------------------------
 * A store from before read markers
 * --------------------------------------------------------------------- */

/* Removes a raw key: what a store written before read markers lacks. */
static void raw_delete(struct fixture *fx, char tag, const char *group, const char *bare)
{
    char k[256];
    size_t n = raw_prefix(k, sizeof(k), tag, group, NULL);
    if (bare) {
        memcpy(k + n, bare, strlen(bare));
        n += strlen(bare);
    }
    raw_write(fx, k, n, NULL, 0);
}

static void test_upgrade(void **state)
{
    struct fixture *fx = *state;
    char meta[] = "#receipts";
    bool done = false;

    fill(fx->st, "g", 5);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "h", "bob", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "d", "old", NULL));
    ASSERT_OK(chat_store_group_delete(fx->st, "d", 1, &done)); /* under way: "old" is gone */
    assert_false(done);
    /* take the store back to before read markers */
    raw_delete(fx, 'R', "g", "alice");
    raw_delete(fx, 'R', "g", "bob");
    raw_delete(fx, 'R', "h", "bob");
    raw_delete(fx, 'N', "g", NULL);
    raw_delete(fx, 'N', "h", NULL);
    raw_write(fx, meta, strlen(meta), NULL, 0); /* and reopens: the upgrade runs */
    assert_count(fx->st, "g", 2);
    assert_count(fx->st, "h", 1);
    assert_count(fx->st, "d", 0);
    assert_reads(fx->st, "g", NULL, 10, "alice bob", false);
    assert_reads(fx->st, "h", NULL, 10, "bob", false);
    assert_reads(fx->st, "d", NULL, 10, "", false);
    assert_int_equal(group_keys(fx, 'R', "g", NULL), 2);
    read_to(fx->st, "g", "bob", "d1", 4, 4, 4, true);
    /* once done, never again: the marker stays where it is */
    reopen(fx, CHAT_SYNC_NONE);
    assert_read(fx->st, "g", "bob", 4);
    assert_count(fx->st, "g", 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_read_forward_only),  CASE(test_read_across_devices),
        CASE(test_read_non_member),    CASE(test_count_join_leave),
        CASE(test_leave_drops_marker), CASE(test_reads_name_order),
        CASE(test_group_delete),       CASE(test_upgrade),
    };

    return cmocka_run_group_tests_name("store_receipts", tests, NULL, NULL);
}
