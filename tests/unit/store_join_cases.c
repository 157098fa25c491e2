/* store_join_cases: chat_store_member_join on any backend (see
 * store_join_cases.h). */
#include "store_join_cases.h"
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY_MS 86400000ll
#define T0 (100 * DAY_MS + 5000) /* a day's time */
#define T1 (T0 + 1000)           /* later the same day */
#define T2 (T0 + DAY_MS)         /* the next day */

/* The store's clock in these cases: static, since the store keeps the
 * pointer until the fixture closes it. */
static int64_t now_ms;

static int64_t case_clock(void *ctx)
{
    return *(const int64_t *)ctx;
}

static void set_now(chat_store *st, int64_t t)
{
    now_ms = t;
    chat_store_set_clock(st, case_clock, &now_ms);
}

/* Joins and checks the call's results: joined at want_joined, no device
 * error. */
static void join(chat_store *st, const char *group, const char *member, const char *device,
                 uint64_t want_joined)
{
    uint64_t joined = UINT64_MAX;
    chat_err dev = CHAT_EIO;
    ASSERT_OK(chat_store_member_join(st, group, member, device, &joined, &dev));
    assert_int_equal(joined, want_joined);
    assert_int_equal(dev, CHAT_OK);
}

static void assert_used(chat_store *st, const char *group, const char *member, const char *device,
                        uint64_t want_id, int64_t want_used)
{
    uint64_t id = 0;
    int64_t used = 0;
    bool found = false;
    ASSERT_OK(chat_store_cursor_info(st, group, member, device, &id, &used, &found));
    assert_true(found);
    assert_int_equal(id, want_id);
    assert_int_equal(used, want_used);
}

static void assert_max(chat_store *st, const char *group, const char *member, bool want_found,
                       uint64_t want)
{
    uint64_t id = 0;
    bool found = !want_found;
    ASSERT_OK(chat_store_cursor_max(st, group, member, &id, &found));
    assert_int_equal(found, want_found);
    if (want_found) {
        assert_int_equal(id, want);
    }
}

static void assert_count(chat_store *st, const char *group, uint64_t want)
{
    uint64_t n = UINT64_MAX;
    ASSERT_OK(chat_store_member_count(st, group, &n));
    assert_int_equal(n, want);
}

static void assert_read(chat_store *st, const char *group, const char *member, uint64_t want)
{
    uint64_t id = UINT64_MAX;
    ASSERT_OK(chat_store_read_get(st, group, member, &id));
    assert_int_equal(id, want);
}

static int count_device(void *ctx, const char *device, uint64_t acked, int64_t used)
{
    (void)device;
    (void)acked;
    (void)used;
    (*(int *)ctx)++;
    return 0;
}

static int devices_of(chat_store *st, const char *group, const char *member)
{
    int n = 0;
    bool done = false;
    ASSERT_OK(chat_store_member_devices(st, group, member, 100, count_device, &n, &done));
    assert_true(done);
    return n;
}

static void append_n(chat_store *st, const char *group, int n)
{
    for (int i = 0; i < n; i++) {
        append_env(st, group, "alice", NULL, 0);
    }
}

void join_case_new_member(chat_store *st)
{
    struct walk w = {0};
    append_n(st, "g", 3);
    set_now(st, T0);
    join(st, "g", "bob", "b1", 3);
    assert_member(st, "g", "bob", true, 3);
    assert_used(st, "g", "bob", "b1", 3, T0); /* at the joined id, stamped */
    assert_max(st, "g", "bob", true, 3);
    assert_read(st, "g", "bob", 0);
    assert_count(st, "g", 1);
    assert_int_equal(devices_of(st, "g", "bob"), 1);
    ASSERT_OK(chat_store_member_groups(st, "bob", collect_group, &w));
    assert_int_equal(w.calls, 1);
    assert_string_equal(w.names[0], "g");
    assert_int_equal(w.joined[0], 3);

    /* later messages move no cursor; the next member joins at the head */
    append_n(st, "g", 2);
    join(st, "g", "carol", "c1", 5);
    assert_cursor(st, "g", "carol", "c1", true, 5);
    assert_cursor(st, "g", "bob", "b1", true, 3);
    assert_count(st, "g", 2);
    /* a group without a message: joined at 0 */
    join(st, "empty", "bob", "b1", 0);
    assert_cursor(st, "empty", "bob", "b1", true, 0);
}

void join_case_existing_member(chat_store *st)
{
    uint64_t joined = 0, read = 0;
    bool found = false;
    append_n(st, "g", 2);
    ASSERT_OK(chat_store_member_add(st, "g", "alice", &joined));
    assert_int_equal(joined, 2);
    append_n(st, "g", 3);
    set_now(st, T0);

    /* a first device: at the joined id, the member's maximum being none */
    join(st, "g", "alice", "a1", 2);
    assert_used(st, "g", "alice", "a1", 2, T0);
    ASSERT_OK(chat_store_read_advance(st, "g", "alice", "a1", 4, &read, NULL, NULL, &found));
    assert_true(found);
    assert_int_equal(read, 4);

    /* again, the same day: joined, read marker, cursor and its stamp kept */
    set_now(st, T1);
    join(st, "g", "alice", "a1", 2);
    assert_member(st, "g", "alice", true, 2);
    assert_read(st, "g", "alice", 4);
    assert_used(st, "g", "alice", "a1", 4, T0);
    /* the next day: a use, stamped */
    set_now(st, T2);
    join(st, "g", "alice", "a1", 2);
    assert_used(st, "g", "alice", "a1", 4, T2);

    /* a new device starts at the member's most advanced cursor */
    join(st, "g", "alice", "a2", 2);
    assert_used(st, "g", "alice", "a2", 4, T2);
    assert_max(st, "g", "alice", true, 4);
    assert_count(st, "g", 1);
    assert_int_equal(devices_of(st, "g", "alice"), 2);
}

void join_case_no_device(chat_store *st)
{
    uint64_t joined = UINT64_MAX;
    chat_err dev = CHAT_EIO;
    append_n(st, "g", 4);
    ASSERT_OK(chat_store_member_join(st, "g", "carol", NULL, &joined, &dev));
    assert_int_equal(joined, 4);
    assert_int_equal(dev, CHAT_OK);
    assert_member(st, "g", "carol", true, 4);
    assert_int_equal(devices_of(st, "g", "carol"), 0);
    assert_max(st, "g", "carol", false, 0);
    /* again, and with every out-parameter NULL: nothing changes */
    append_n(st, "g", 1);
    ASSERT_OK(chat_store_member_join(st, "g", "carol", NULL, NULL, NULL));
    assert_member(st, "g", "carol", true, 4);
    assert_count(st, "g", 1);
    /* a device of its own, later, starts where the member joined */
    join(st, "g", "carol", "c1", 4);
    assert_cursor(st, "g", "carol", "c1", true, 4);
}

void join_case_group_deleting(chat_store *st)
{
    bool done = true;
    int steps = 0;
    set_now(st, T0);
    ASSERT_OK(chat_store_member_add(st, "g", "dave", NULL)); /* at 0 */
    append_n(st, "g", 5);
    ASSERT_OK(chat_store_cursor_advance(st, "g", "dave", "d0", 3, NULL));
    ASSERT_OK(chat_store_member_add(st, "g", "old", NULL));

    /* the deletion's first step: what was there stops counting */
    ASSERT_OK(chat_store_group_delete(st, "g", 1, &done));
    assert_false(done);
    assert_member(st, "g", "dave", false, 0);
    assert_count(st, "g", 0);

    /* dave joins anew, at the head, without the old membership's cursors */
    join(st, "g", "dave", "d1", 5);
    assert_member(st, "g", "dave", true, 5);
    assert_cursor(st, "g", "dave", "d1", true, 5);
    assert_cursor(st, "g", "dave", "d0", false, 0);
    assert_max(st, "g", "dave", true, 5);
    assert_read(st, "g", "dave", 0);
    join(st, "g", "erin", "e1", 5);
    join(st, "g", "erin", "e1", 5); /* idempotent under the deletion too */
    assert_count(st, "g", 2);

    /* the deletion's end leaves what came after its start */
    while (!done && steps++ < 100) {
        ASSERT_OK(chat_store_group_delete(st, "g", 2, &done));
    }
    assert_true(done);
    assert_member(st, "g", "dave", true, 5);
    assert_member(st, "g", "erin", true, 5);
    assert_member(st, "g", "old", false, 0);
    assert_cursor(st, "g", "dave", "d1", true, 5);
    assert_cursor(st, "g", "erin", "e1", true, 5);
    assert_cursor(st, "g", "dave", "d0", false, 0);
    assert_count(st, "g", 2);
}

void join_case_bad_device(chat_store *st)
{
    uint64_t joined = 99;
    chat_err dev = CHAT_EIO;
    append_n(st, "g", 1);
    assert_int_equal(chat_store_member_join(st, "g", "zed", too_long_name(), &joined, &dev),
                     CHAT_EINVAL);
    assert_int_equal(joined, 99); /* results are set on CHAT_OK only */
    assert_int_equal(dev, CHAT_OK);
    assert_member(st, "g", "zed", false, 0);
    assert_count(st, "g", 0);
    assert_int_equal(chat_store_member_join(st, "g", too_long_name(), "z1", NULL, NULL),
                     CHAT_EINVAL);
    assert_int_equal(chat_store_member_join(st, NULL, "zed", "z1", NULL, NULL), CHAT_EINVAL);
}
