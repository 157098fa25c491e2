/* store_expiry_cases: device expiry with its members, for both backends
 * (see store_expiry_cases.h). */
#include "store_expiry_cases.h"
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY_MS 86400000ll

static int64_t case_clock(void *ctx)
{
    return *(const int64_t *)ctx;
}

int expiry_walk(chat_store *st, int64_t older_than_ms, bool drop_members, size_t max_keys,
                chat_expired *sum)
{
    char resume[CHAT_STORE_RESUME_MAX];
    bool done = false;
    int calls = 0;

    resume[0] = resume[1] = 0;
    sum->devices = sum->members = 0;
    while (!done && calls < 10000) {
        chat_expired one = {SIZE_MAX, SIZE_MAX};
        ASSERT_OK(chat_store_expire_devices(st, older_than_ms, drop_members, max_keys, resume,
                                            sizeof(resume), &one, &done));
        assert_true(one.devices <= max_keys);
        assert_true(one.members <= one.devices);
        sum->devices += one.devices;
        sum->members += one.members;
        calls++;
    }
    assert_true(done);
    return calls;
}

static void advance(chat_store *st, const char *group, const char *member, const char *device,
                    uint64_t id)
{
    ASSERT_OK(chat_store_cursor_advance(st, group, member, device, id, NULL));
}

/* The members chat_store_reads lists in group, in order, as "a,b,c". */
static int add_name(void *ctx, const char *member, uint64_t read)
{
    char *out = ctx;
    (void)read;
    if (out[0]) {
        strcat(out, ",");
    }
    strcat(out, member);
    return 0;
}

static void assert_reads(chat_store *st, const char *group, const char *want)
{
    char got[256] = "";
    bool more = true;
    ASSERT_OK(chat_store_reads(st, group, NULL, 100, add_name, got, &more));
    assert_false(more);
    assert_string_equal(got, want);
}

static void assert_groups_of(chat_store *st, const char *member, const char *want)
{
    char got[256] = "";
    struct walk w = {0};
    ASSERT_OK(chat_store_member_groups(st, member, collect_group, &w));
    for (int i = 0; i < w.calls; i++) {
        if (got[0]) {
            strcat(got, ",");
        }
        strcat(got, w.names[i]);
    }
    assert_string_equal(got, want);
}

/* Whether device of member has a push registration. */
static bool has_push(chat_store *st, const char *member, const char *device)
{
    char *reg = NULL;
    size_t len = 0;
    int64_t created = 0;
    bool found = false;
    ASSERT_OK(chat_store_push_get(st, member, device, &reg, &len, &created, &found));
    free(reg);
    return found;
}

void expiry_case_members(chat_store *st, size_t max_keys, bool drop_members)
{
    static const char *const members[] = {"alice", "bob", "carol", "dave", "erin", "frank"};
    const char *g = EXPIRY_GROUP;
    int64_t now = 10 * DAY_MS;
    uint64_t id = 0, count = 0;
    bool found = false, moved = false;
    chat_expired sum;

    for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
        ASSERT_OK(chat_store_member_add(st, g, members[i], NULL));
    }
    ASSERT_OK(chat_store_member_add(st, "other", "bob", NULL));
    fill(st, g, 5);
    fill(st, "other", 2);

    /* day 10: the devices that will be stale */
    chat_store_set_clock(st, case_clock, &now);
    advance(st, g, "alice", "a-old", 1);
    advance(st, g, "bob", "b0", 2);
    advance(st, g, "bob", "b1", 1);
    advance(st, g, "bob", "b2", 3);
    ASSERT_OK(chat_store_read_advance(st, g, "bob", "b1", 4, NULL, NULL, &moved, &found));
    assert_true(found && moved);
    advance(st, g, "carol", "c0", 1);
    advance(st, g, "erin", "e1", 1);
    advance(st, g, "erin", "e2", 1);
    advance(st, g, "frank", "f0", 1);
    advance(st, g, "frank", "f1", 1);
    /* day 99: the devices in use */
    now = 99 * DAY_MS;
    advance(st, g, "alice", "a-new", 5);
    advance(st, g, "erin", "e0", 5);
    advance(st, g, "frank", "f2", 5);
    advance(st, "other", "bob", "phone", 2);

    /* push registrations (v1.2): carol's goes with her last membership
     * (push-with-member), bob's stays with his other group */
    chat_push_put put = CHAT_PUSH_NO_GROUP;
    ASSERT_OK(chat_store_push_put(st, "carol", "c0", "rc", 2, 1, 16, &put));
    assert_int_equal(put, CHAT_PUSH_STORED);
    ASSERT_OK(chat_store_push_put(st, "bob", "phone", "rb", 2, 1, 16, &put));
    assert_int_equal(put, CHAT_PUSH_STORED);

    now = 100 * DAY_MS;
    expiry_walk(st, 50 * DAY_MS, drop_members, max_keys, &sum);
    assert_int_equal(sum.devices, 9);
    assert_int_equal(sum.members, drop_members ? 2 : 0);
    assert_member(st, g, "alice", true, 0);
    assert_member(st, g, "bob", !drop_members, 0);
    assert_member(st, g, "carol", !drop_members, 0);
    assert_member(st, g, "dave", true, 0); /* never had a device */
    assert_member(st, g, "erin", true, 0);
    assert_member(st, g, "frank", true, 0);
    assert_member(st, "other", "bob", true, 0);
    ASSERT_OK(chat_store_member_count(st, g, &count));
    assert_int_equal(count, drop_members ? 4 : 6);
    ASSERT_OK(chat_store_read_get(st, g, "bob", &id));
    assert_int_equal(id, drop_members ? 0 : 4);
    ASSERT_OK(chat_store_cursor_max(st, g, "bob", &id, &found));
    assert_true(found == !drop_members);
    ASSERT_OK(chat_store_cursor_max(st, g, "carol", &id, &found));
    assert_true(found == !drop_members);
    assert_groups_of(st, "bob", drop_members ? "other" : "other,room");
    assert_reads(st, g, drop_members ? "alice,dave,erin,frank" : "alice,bob,carol,dave,erin,frank");
    assert_cursor(st, g, "alice", "a-old", false, 0);
    assert_cursor(st, g, "alice", "a-new", true, 5);
    assert_cursor(st, g, "erin", "e0", true, 5);
    assert_cursor(st, g, "frank", "f2", true, 5);
    assert_cursor(st, g, "bob", "b1", false, 0);
    assert_cursor(st, "other", "bob", "phone", true, 2);
    assert_true(has_push(st, "carol", "c0") == !drop_members);
    assert_true(has_push(st, "bob", "phone"));

    /* a second walk finds nothing more */
    expiry_walk(st, 50 * DAY_MS, drop_members, max_keys, &sum);
    assert_int_equal(sum.devices + sum.members, 0);

    /* bob comes back: dropped, a new member from the head on; kept, where
     * its most advanced device was */
    ASSERT_OK(chat_store_member_add(st, g, "bob", &id));
    assert_int_equal(id, drop_members ? 5 : 0);
    ASSERT_OK(chat_store_cursor_start(st, g, "bob", "b0", &id, &found));
    assert_true(found);
    assert_int_equal(id, drop_members ? 5 : 4);
    ASSERT_OK(chat_store_member_count(st, g, &count));
    assert_int_equal(count, drop_members ? 5 : 6);
    chat_store_set_clock(st, NULL, NULL);
}

void expiry_case_deleting(chat_store *st)
{
    int64_t now = 10 * DAY_MS;
    uint64_t count = 9, joined = 0;
    bool done = false;
    chat_expired sum;

    fill(st, "gone", 3);
    ASSERT_OK(chat_store_member_add(st, "gone", "zoe", NULL));
    chat_store_set_clock(st, case_clock, &now);
    /* five devices: a deletion's step (max_keys 1) takes one record, which
     * may be one of them (LevelDB walks cursors first) */
    for (int d = 0; d < 5; d++) {
        char dev[8];
        snprintf(dev, sizeof(dev), "z%d", d);
        advance(st, "gone", "zoe", dev, 2);
    }
    /* the deletion's first step: zoe's membership no longer counts */
    ASSERT_OK(chat_store_group_delete(st, "gone", 1, &done));
    assert_false(done);
    ASSERT_OK(chat_store_member_count(st, "gone", &count));
    assert_int_equal(count, 0);

    now = 100 * DAY_MS;
    expiry_walk(st, 50 * DAY_MS, true, 256, &sum);
    assert_true(sum.devices >= 4 && sum.devices <= 5);
    assert_int_equal(sum.members, 0);
    ASSERT_OK(chat_store_member_count(st, "gone", &count));
    assert_int_equal(count, 0);
    for (int i = 0; i < 1000 && !done; i++) {
        ASSERT_OK(chat_store_group_delete(st, "gone", 1, &done));
    }
    assert_true(done);
    assert_member(st, "gone", "zoe", false, 0);
    ASSERT_OK(chat_store_member_add(st, "gone", "zoe", &joined));
    assert_int_equal(joined, 3);
    ASSERT_OK(chat_store_member_count(st, "gone", &count));
    assert_int_equal(count, 1);
    chat_store_set_clock(st, NULL, NULL);
}
