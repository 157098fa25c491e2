/* Unit tests of cursors and devices (leveldb/ldb_cursor): advances, starts,
 * maximum cursors, last-use stamps and expiry.
 * One table of named cases, each on a fresh store (store_fixture.h). */
#include "store_expiry_cases.h"
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Some cases read or write raw keys of a closed store. */
#include <leveldb/c.h>

/* ------------------------------------------------------------------------
 * Cursors
 * --------------------------------------------------------------------- */

static void test_cursor_get_not_found(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = true;

    assert_cursor(fx->st, "g", "alice", "d1", false, 0);
    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    assert_cursor(fx->st, "g", "alice", "d1", false, 0);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_false(found);
}

static void test_cursor_advance_forward_only(void **state)
{
    struct fixture *fx = *state;
    uint64_t now = 0;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 10);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, &now));
    assert_int_equal(now, 5);
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);

    now = 0;
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 3, &now));
    assert_int_equal(now, 5);
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, &now));
    assert_int_equal(now, 5);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 7, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 7);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 0, &now));
    assert_int_equal(now, 7);
    assert_cursor(fx->st, "g", "alice", "d1", true, 7);
}

static void test_cursor_advance_clamped_to_head(void **state)
{
    struct fixture *fx = *state;
    uint64_t now = 0;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 50, &now));
    assert_int_equal(now, 10);
    assert_cursor(fx->st, "g", "alice", "d1", true, 10);

    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", UINT64_MAX, &now));
    assert_int_equal(now, 12);
    assert_cursor(fx->st, "g", "alice", "d1", true, 12);
}

static void test_cursor_per_device(void **state)
{
    struct fixture *fx = *state;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alicex", NULL));
    fill(fx->st, "g", 10);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    assert_cursor(fx->st, "g", "alice", "d2", false, 0);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d2", 2, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
    assert_cursor(fx->st, "g", "alice", "d2", true, 2);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d2", 8, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
    assert_cursor(fx->st, "g", "alice", "d2", true, 8);

    /* device "d" is a prefix of "d1"; member "alice" of "alicex" */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d", 3, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
    assert_cursor(fx->st, "g", "alice", "d", true, 3);
    assert_cursor(fx->st, "g", "alicex", "d", false, 0);
    assert_cursor(fx->st, "g", "alicex", "d1", false, 0);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alicex", "d1", 9, NULL));
    assert_cursor(fx->st, "g", "alice", "d1", true, 5);
}

static void test_cursor_max(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = false;

    fill(fx->st, "g", 10);
    fill(fx->st, "g2", 10);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g2", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alicex", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d2", 8, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d3", 3, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g2", "alice", "d1", 9, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alicex", "d1", 10, NULL));

    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 8);

    found = true;
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "bob", &id, &found));
    assert_false(found);

    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 10, NULL));
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 10);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g2", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 9);
}

static void test_cursor_start_first_device(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0, joined = 0;
    bool found = false;

    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", &joined));
    assert_int_equal(joined, 3);
    fill(fx->st, "g", 4);

    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 3);
    /* the cursor now exists there */
    assert_cursor(fx->st, "g", "alice", "d1", true, 3);

    /* a member who joined an empty group starts at 0 */
    ASSERT_OK(chat_store_member_add(fx->st, "e", "alice", NULL));
    id = UINT64_MAX;
    found = false;
    ASSERT_OK(chat_store_cursor_start(fx->st, "e", "alice", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 0);
}

static void test_cursor_start_second_device(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = false;

    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 4);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_int_equal(id, 3);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d0", 4, NULL));

    /* the most advanced of the other devices, not the joined id */
    found = false;
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d2", &id, &found));
    assert_true(found);
    assert_int_equal(id, 5);
    assert_cursor(fx->st, "g", "alice", "d2", true, 5);

    /* later calls agree: d2 keeps its own cursor when d1 moves on */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 7, NULL));
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d2", &id, &found));
    assert_true(found);
    assert_int_equal(id, 5);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_true(found);
    assert_int_equal(id, 7);
}

static void test_cursor_start_non_member(void **state)
{
    struct fixture *fx = *state;
    uint64_t id = 0;
    bool found = true;

    fill(fx->st, "g", 3);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g2", "carol", NULL));

    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "d1", &id, &found));
    assert_false(found);
    assert_cursor(fx->st, "g", "bob", "d1", false, 0);
    found = true;
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "carol", "d1", &id, &found));
    assert_false(found);
    assert_cursor(fx->st, "g", "carol", "d1", false, 0);
    found = true;
    ASSERT_OK(chat_store_cursor_start(fx->st, "nobody", "alice", "d1", &id, &found));
    assert_false(found);
}

/* An 8-byte cursor, as stores before issue 9 wrote them. */
static void raw_old_cursor(struct fixture *fx, const char *group, const char *member,
                           const char *device, uint64_t id)
{
    char k[256], v[8];
    size_t n = raw_prefix(k, sizeof(k), 'C', group, member);
    size_t dl = strlen(device);

    k[n++] = (char)(dl >> 8);
    k[n++] = (char)(dl & 0xff);
    memcpy(k + n, device, dl);
    n += dl;
    for (int i = 7; i >= 0; i--, id >>= 8)
        v[i] = (char)(id & 0xff);
    raw_write(fx, k, n, v, sizeof(v));
}

#define DAY_MS 86400000ll

/* The store's clock in these cases: a number the case sets. */
static int64_t fake_clock(void *ctx)
{
    return *(const int64_t *)ctx;
}

static void assert_used(chat_store *st, const char *group, const char *member, const char *device,
                        uint64_t want_id, int64_t want_used)
{
    uint64_t id = UINT64_MAX;
    int64_t used = -1;
    bool found = false;

    ASSERT_OK(chat_store_cursor_info(st, group, member, device, &id, &used, &found));
    assert_true(found);
    assert_int_equal(id, want_id);
    assert_int_equal(used, want_used);
}

static void test_i8b_cursor_touch_once_a_day(void **state)
{
    struct fixture *fx = *state;
    int64_t now = 100 * DAY_MS + 3600000;
    uint64_t id = 0;
    bool found = false;

    chat_store_set_clock(fx->st, fake_clock, &now);
    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_used(fx->st, "g", "alice", "d1", 10, now);

    /* the same day: nothing written */
    ASSERT_OK(chat_store_cursor_touch(fx->st, "g", "alice", "d1", now + 3600000));
    assert_used(fx->st, "g", "alice", "d1", 10, now);
    /* the next day: stamped */
    ASSERT_OK(chat_store_cursor_touch(fx->st, "g", "alice", "d1", now + DAY_MS));
    assert_used(fx->st, "g", "alice", "d1", 10, now + DAY_MS);
    /* no cursor, nothing created */
    ASSERT_OK(chat_store_cursor_touch(fx->st, "g", "alice", "d2", now + DAY_MS));
    assert_cursor(fx->st, "g", "alice", "d2", false, 0);

    /* an ack that moves nothing stamps once a day too; one that moves does */
    now += 3 * DAY_MS;
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 5, NULL));
    assert_used(fx->st, "g", "alice", "d1", 10, now);
    fill(fx->st, "g", 2);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 4, NULL));
    now += 1000;
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 4, NULL));
    assert_used(fx->st, "g", "alice", "d1", 10, now - 1000);
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 12, NULL));
    assert_used(fx->st, "g", "alice", "d1", 12, now);
    /* a subscribe (cursor_start of a known device) is a use */
    now += DAY_MS;
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d1", &id, &found));
    assert_int_equal(id, 12);
    assert_used(fx->st, "g", "alice", "d1", 12, now);
    /* and the stamps survive a reopen */
    reopen(fx, CHAT_SYNC_NONE);
    assert_used(fx->st, "g", "alice", "d1", 12, now);
}

/* Expires with max_keys per call until done, members kept (closed groups);
 * returns the calls made and puts the removals in *removed. */
static int expire_all(chat_store *st, int64_t older_than, size_t max_keys, size_t *removed)
{
    chat_expired sum;
    int calls = expiry_walk(st, older_than, false, max_keys, &sum);
    assert_int_equal(sum.members, 0);
    *removed = sum.devices;
    return calls;
}

static void test_i8b_expire_devices_bounded(void **state)
{
    struct fixture *fx = *state;
    const char *groups[] = {"a", "b", "c"};
    int64_t now = 1000 * DAY_MS;
    char resume[CHAT_STORE_RESUME_MAX], dev[16];
    uint64_t id = 0;
    bool found = false, done = false;
    size_t removed = 0;

    chat_store_set_clock(fx->st, fake_clock, &now);
    /* 3 groups x 2 members x 5 devices; devices 0-2 used long ago */
    for (int g = 0; g < 3; g++) {
        ASSERT_OK(chat_store_member_add(fx->st, groups[g], "alice", NULL));
        ASSERT_OK(chat_store_member_add(fx->st, groups[g], "bob", NULL));
        fill(fx->st, groups[g], 20);
        for (int m = 0; m < 2; m++) {
            const char *member = m ? "bob" : "alice";
            for (int d = 0; d < 5; d++) {
                now = d < 3 ? 10 * DAY_MS + d : 999 * DAY_MS;
                snprintf(dev, sizeof(dev), "d%d", d);
                ASSERT_OK(chat_store_cursor_advance(fx->st, groups[g], member, dev, 10 + d, NULL));
            }
        }
    }
    now = 1000 * DAY_MS;

    chat_expired gone;
    assert_int_equal(
        chat_store_expire_devices(fx->st, now, false, 0, resume, sizeof(resume), &gone, &done),
        CHAT_EINVAL);
    assert_int_equal(chat_store_expire_devices(fx->st, now, true, 4, resume, 16, &gone, &done),
                     CHAT_EINVAL);

    /* 30 cursors, 4 looked at per call: 8 calls, 18 stale ones gone */
    assert_int_equal(expire_all(fx->st, 900 * DAY_MS, 4, &removed), 8);
    assert_int_equal(removed, 18);
    for (int g = 0; g < 3; g++) {
        assert_cursor(fx->st, groups[g], "alice", "d0", false, 0);
        assert_cursor(fx->st, groups[g], "bob", "d2", false, 0);
        assert_cursor(fx->st, groups[g], "bob", "d3", true, 13);
        assert_cursor(fx->st, groups[g], "alice", "d4", true, 14);
        assert_member(fx->st, groups[g], "alice", true, 0);
    }
    assert_int_equal(group_keys(fx, 'C', "b", NULL), 4);
    /* a second walk finds nothing more to do */
    assert_int_equal(expire_all(fx->st, 900 * DAY_MS, 100, &removed), 1);
    assert_int_equal(removed, 0);

    /* every device gone: the member's record of its maximum stays, so a
     * device that comes back starts where the most advanced one was */
    chat_store_set_clock(fx->st, fake_clock, &now);
    expire_all(fx->st, now + 1, 7, &removed);
    assert_int_equal(removed, 12);
    assert_int_equal(group_keys(fx, 'C', "a", NULL), 0);
    assert_int_equal(group_keys(fx, 'X', "a", NULL), 2);
    chat_store_set_clock(fx->st, fake_clock, &now);
    ASSERT_OK(chat_store_cursor_start(fx->st, "a", "alice", "d0", &id, &found));
    assert_true(found);
    assert_int_equal(id, 14);
    ASSERT_OK(chat_store_cursor_start(fx->st, "a", "alice", "new", &id, &found));
    assert_int_equal(id, 14);
}

static void test_i8b_new_device_reads_one_record(void **state)
{
    struct fixture *fx = *state;
    char dev[16];
    uint64_t id = 0;
    bool found = false;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    ASSERT_OK(chat_store_member_add(fx->st, "g", "alicex", NULL));
    fill(fx->st, "g", 300);
    /* the review's case, smaller: many client ids of one user */
    for (int d = 0; d < 200; d++) {
        snprintf(dev, sizeof(dev), "rnd%03d", d);
        ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", dev, &id, &found));
        assert_int_equal(id, d == 0 ? 0 : 100 + (uint64_t)d - 1);
        ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", dev, 100 + (uint64_t)d, NULL));
    }
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alicex", "x", 300, NULL));
    assert_int_equal(group_keys(fx, 'X', "g", "alice"), 1);
    assert_int_equal(group_keys(fx, 'X', "g", NULL), 2);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 299);

    /* member_remove takes the record with the cursors */
    ASSERT_OK(chat_store_member_remove(fx->st, "g", "alice"));
    assert_int_equal(group_keys(fx, 'X', "g", "alice"), 0);
    assert_int_equal(group_keys(fx, 'C', "g", "alice"), 0);
    assert_int_equal(group_keys(fx, 'X', "g", "alicex"), 1);
    found = true;
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_false(found);
}

static void test_i8b_old_cursor_values(void **state)
{
    struct fixture *fx = *state;
    int64_t now = 50 * DAY_MS, used = -1;
    uint64_t id = 0;
    bool found = false;
    size_t removed = 0;

    ASSERT_OK(chat_store_member_add(fx->st, "g", "alice", NULL));
    fill(fx->st, "g", 10);
    ASSERT_OK(chat_store_member_add(fx->st, "g", "bob", NULL));
    raw_old_cursor(fx, "g", "alice", "d1", 5);
    raw_old_cursor(fx, "g", "alice", "d2", 7);
    chat_store_set_clock(fx->st, fake_clock, &now);

    /* read as (id, never stamped); no maximum record yet: computed */
    ASSERT_OK(chat_store_cursor_info(fx->st, "g", "alice", "d1", &id, &used, &found));
    assert_true(found);
    assert_int_equal(id, 5);
    assert_int_equal(used, 0);
    ASSERT_OK(chat_store_cursor_max(fx->st, "g", "alice", &id, &found));
    assert_true(found);
    assert_int_equal(id, 7);
    /* the first move writes the record from the old cursors */
    ASSERT_OK(chat_store_cursor_advance(fx->st, "g", "alice", "d1", 6, NULL));
    assert_used(fx->st, "g", "alice", "d1", 6, now);
    assert_int_equal(group_keys(fx, 'X', "g", "alice"), 1);
    chat_store_set_clock(fx->st, fake_clock, &now);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "alice", "d3", &id, &found));
    assert_int_equal(id, 7);

    /* an old cursor is stamped by the first expiry walk, not deleted */
    now = 60 * DAY_MS;
    raw_old_cursor(fx, "g", "bob", "b1", 3);
    chat_store_set_clock(fx->st, fake_clock, &now);
    expire_all(fx->st, 55 * DAY_MS, 10, &removed);
    assert_int_equal(removed, 2); /* alice d1 and d3, stamped on day 50 */
    assert_used(fx->st, "g", "alice", "d2", 7, now);
    assert_used(fx->st, "g", "bob", "b1", 3, now);
    ASSERT_OK(chat_store_cursor_start(fx->st, "g", "bob", "b2", &id, &found));
    assert_int_equal(id, 10); /* joined at 10 beats bob's old cursor */
}

/* ------------------------------------------------------------------------
 * Issue 21, item 8: a member goes with its last device in open groups
 * --------------------------------------------------------------------- */

/* Keys of member in EXPIRY_GROUP, of every kind a membership writes: 'J',
 * 'C', 'X', 'R' (its name bare) and 'G' (member first). */
static size_t member_keys(struct fixture *fx, const char *member)
{
    char p[256];
    size_t n = group_keys(fx, 'J', EXPIRY_GROUP, member) +
               group_keys(fx, 'C', EXPIRY_GROUP, member) +
               group_keys(fx, 'X', EXPIRY_GROUP, member);
    size_t len = raw_prefix(p, sizeof(p), 'R', EXPIRY_GROUP, NULL);
    memcpy(p + len, member, strlen(member));
    n += raw_count(fx, p, len + strlen(member));
    len = raw_prefix(p, sizeof(p), 'G', member, NULL);
    memcpy(p + len, EXPIRY_GROUP, strlen(EXPIRY_GROUP));
    return n + raw_count(fx, p, len + strlen(EXPIRY_GROUP));
}

/* Each bound per call: a member's cursors split over several calls (1, 2)
 * must give what one call gives. */
static void members_expire(struct fixture *fx, size_t max_keys)
{
    expiry_case_members(fx->st, max_keys, true);
    /* nothing of carol's is left; bob has its new membership's records
     * ('J', 'G', 'R', and the cursor b0 with its 'X') */
    assert_int_equal(member_keys(fx, "carol"), 0);
    assert_int_equal(member_keys(fx, "bob"), 5);
    assert_int_equal(group_keys(fx, 'N', EXPIRY_GROUP, NULL), 1);
    struct problems pr = {0};
    uint64_t groups = 0, problems = 0;
    ASSERT_OK(chat_store_check(fx->st, collect_problem, &pr, &groups, &problems));
    assert_int_equal(problems, 0);
}

static void test_i21_8_members_expire_1(void **state)
{
    members_expire(*state, 1);
}

static void test_i21_8_members_expire_2(void **state)
{
    members_expire(*state, 2);
}

static void test_i21_8_members_expire_256(void **state)
{
    members_expire(*state, 256);
}

static void test_i21_8_closed_groups_keep_members(void **state)
{
    struct fixture *fx = *state;
    expiry_case_members(fx->st, 3, false);
    assert_int_equal(member_keys(fx, "carol"), 4); /* 'J', 'G', 'R', 'X' */
}

static void test_i21_8_member_of_group_being_deleted(void **state)
{
    struct fixture *fx = *state;
    expiry_case_deleting(fx->st);
}

/* ------------------------------------------------------------------------
 * Table
 * --------------------------------------------------------------------- */

int main(void)
{
    const struct CMUnitTest tests[] = {
        CASE(test_cursor_get_not_found),
        CASE(test_cursor_advance_forward_only),
        CASE(test_cursor_advance_clamped_to_head),
        CASE(test_cursor_per_device),
        CASE(test_cursor_max),
        CASE(test_cursor_start_first_device),
        CASE(test_cursor_start_second_device),
        CASE(test_cursor_start_non_member),
        CASE(test_i8b_cursor_touch_once_a_day),
        CASE(test_i8b_expire_devices_bounded),
        CASE(test_i8b_new_device_reads_one_record),
        CASE(test_i8b_old_cursor_values),
        CASE(test_i21_8_members_expire_1),
        CASE(test_i21_8_members_expire_2),
        CASE(test_i21_8_members_expire_256),
        CASE(test_i21_8_closed_groups_keep_members),
        CASE(test_i21_8_member_of_group_being_deleted),
    };

    return cmocka_run_group_tests_name("store_cursor", tests, NULL, NULL);
}
