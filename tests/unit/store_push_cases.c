/* store_push_cases: push registrations on any backend (see
 * store_push_cases.h). */
#include "store_push_cases.h"
#include "store_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put_ok(chat_store *st, const char *member, const char *device, const char *reg,
                   int64_t created, chat_push_put want)
{
    chat_push_put res = CHAT_PUSH_STORED;
    ASSERT_OK(chat_store_push_put(st, member, device, reg, strlen(reg), created, 3, &res));
    if (res != want)
        fail_msg("put of %s/%s: result %d, want %d", member, device, (int)res, (int)want);
}

static void assert_reg(chat_store *st, const char *member, const char *device, const char *want,
                       int64_t want_created)
{
    char *reg = NULL;
    size_t len = 0;
    int64_t created = -1;
    bool found = false;
    ASSERT_OK(chat_store_push_get(st, member, device, &reg, &len, &created, &found));
    if (!want) {
        if (found)
            fail_msg("%s/%s still has a registration: %s", member, device, reg);
        return;
    }
    if (!found)
        fail_msg("%s/%s has no registration, want %s", member, device, want);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(reg, want, len);
    assert_int_equal(reg[len], '\0');
    assert_int_equal(created, want_created);
    free(reg);
}

struct listed {
    char devices[8][32];
    char regs[8][32];
    int n;
};

static int collect_reg(void *ctx, const char *device, const char *reg, size_t len, int64_t created)
{
    struct listed *l = ctx;
    (void)created;
    assert_true(l->n < 8 && len < 32);
    snprintf(l->devices[l->n], sizeof(l->devices[0]), "%s", device);
    memcpy(l->regs[l->n], reg, len);
    l->regs[l->n][len] = '\0';
    l->n++;
    return 0;
}

void push_case_registrations(chat_store *st)
{
    struct listed l = {0};
    bool removed = true;

    /* A member of no group cannot register. */
    put_ok(st, "alice", "a1", "r1", 10, CHAT_PUSH_NO_GROUP);
    assert_reg(st, "alice", "a1", NULL, 0);
    ASSERT_OK(chat_store_member_add(st, "g", "alice", NULL));
    put_ok(st, "alice", "a1", "r1", 10, CHAT_PUSH_STORED);
    assert_reg(st, "alice", "a1", "r1", 10);
    /* One per device: a new one replaces it. */
    put_ok(st, "alice", "a1", "r1-new", 11, CHAT_PUSH_STORED);
    assert_reg(st, "alice", "a1", "r1-new", 11);
    /* At most 3 (the cases' bound) devices; the device that has one may
     * still replace its own. */
    put_ok(st, "alice", "a2", "r2", 12, CHAT_PUSH_STORED);
    put_ok(st, "alice", "a3", "r3", 13, CHAT_PUSH_STORED);
    put_ok(st, "alice", "a4", "r4", 14, CHAT_PUSH_FULL);
    assert_reg(st, "alice", "a4", NULL, 0);
    put_ok(st, "alice", "a3", "r3-new", 15, CHAT_PUSH_STORED);
    ASSERT_OK(chat_store_push_list(st, "alice", collect_reg, &l));
    assert_int_equal(l.n, 3);
    assert_string_equal(l.devices[0], "a1");
    assert_string_equal(l.regs[2], "r3-new");
    /* Removal only of the bytes named, when named. */
    ASSERT_OK(chat_store_push_remove(st, "alice", "a2", "other", 5, &removed));
    assert_false(removed);
    assert_reg(st, "alice", "a2", "r2", 12);
    ASSERT_OK(chat_store_push_remove(st, "alice", "a2", "r2", 2, &removed));
    assert_true(removed);
    assert_reg(st, "alice", "a2", NULL, 0);
    ASSERT_OK(chat_store_push_remove(st, "alice", "a1", NULL, 0, &removed));
    assert_true(removed);
    ASSERT_OK(chat_store_push_remove(st, "alice", "a1", NULL, 0, &removed));
    assert_false(removed);
    /* Another member's devices are its own. */
    ASSERT_OK(chat_store_member_add(st, "g", "bob", NULL));
    put_ok(st, "bob", "a3", "b3", 16, CHAT_PUSH_STORED);
    assert_reg(st, "alice", "a3", "r3-new", 15);
    /* Bounds of the arguments. */
    chat_push_put res;
    char big[CHAT_STORE_PUSH_MAX + 1];
    memset(big, 'x', sizeof(big));
    assert_int_equal(chat_store_push_put(st, "bob", "b1", big, sizeof(big), 1, 3, &res),
                     CHAT_EINVAL);
    assert_int_equal(chat_store_push_put(st, "bob", "b1", "r", 0, 1, 3, &res), CHAT_EINVAL);
    assert_int_equal(chat_store_push_put(st, "bob", "b1", "r", 1, 1, 0, &res), CHAT_EINVAL);
    ASSERT_OK(chat_store_push_put(st, "bob", "b1", big, CHAT_STORE_PUSH_MAX, 1, 3, &res));
    assert_int_equal(res, CHAT_PUSH_STORED);
}

void push_case_membership(chat_store *st)
{
    bool done = false;
    ASSERT_OK(chat_store_member_add(st, "g1", "alice", NULL));
    ASSERT_OK(chat_store_member_add(st, "g2", "alice", NULL));
    ASSERT_OK(chat_store_member_add(st, "g1", "bob", NULL));
    put_ok(st, "alice", "a1", "ra", 1, CHAT_PUSH_STORED);
    put_ok(st, "bob", "b1", "rb", 1, CHAT_PUSH_STORED);
    /* One group of two: the registration stays. */
    ASSERT_OK(chat_store_member_remove(st, "g1", "alice"));
    assert_reg(st, "alice", "a1", "ra", 1);
    /* The last one: it goes with the membership. */
    ASSERT_OK(chat_store_member_remove(st, "g2", "alice"));
    assert_reg(st, "alice", "a1", NULL, 0);
    /* A deletion of bob's only group takes bob's along, once done. */
    ASSERT_OK(chat_store_member_add(st, "g2", "carol", NULL));
    ASSERT_OK(chat_store_member_add(st, "g1", "carol", NULL));
    put_ok(st, "carol", "c1", "rc", 1, CHAT_PUSH_STORED);
    for (int i = 0; i < 100 && !done; i++) {
        ASSERT_OK(chat_store_group_delete(st, "g1", 2, &done));
    }
    assert_true(done);
    assert_reg(st, "bob", "b1", NULL, 0);
    assert_reg(st, "carol", "c1", "rc", 1); /* still in g2 */
    /* A member who joins the group while it is deleted keeps its own. */
    ASSERT_OK(chat_store_member_add(st, "g3", "dave", NULL));
    put_ok(st, "dave", "d1", "rd", 1, CHAT_PUSH_STORED);
    ASSERT_OK(chat_store_group_delete(st, "g3", 1, &done));
    assert_false(done);
    ASSERT_OK(chat_store_member_add(st, "g3", "dave", NULL)); /* joins again, anew */
    put_ok(st, "dave", "d1", "rd2", 2, CHAT_PUSH_STORED);
    for (int i = 0; i < 100 && !done; i++) {
        ASSERT_OK(chat_store_group_delete(st, "g3", 1, &done));
    }
    assert_true(done);
    assert_reg(st, "dave", "d1", "rd2", 2);
}

struct seen_list {
    char members[16][32];
    char devices[16][32];
    uint64_t seen[16];
    int n;
    int stop_after; /* 0: never */
};

static int collect_seen(void *ctx, const char *member, uint64_t seen, const char *device,
                        const char *reg, size_t len)
{
    struct seen_list *s = ctx;
    (void)reg, (void)len;
    assert_true(s->n < 16);
    snprintf(s->members[s->n], sizeof(s->members[0]), "%s", member);
    snprintf(s->devices[s->n], sizeof(s->devices[0]), "%s", device);
    s->seen[s->n++] = seen;
    return s->stop_after && s->n >= s->stop_after;
}

void push_case_members(chat_store *st)
{
    char last[CHAT_STORE_MAX_NAME + 1];
    bool done = false;
    uint64_t cur = 0;

    append_env(st, "g", "x", NULL, 0); /* head 1 */
    /* m1 and m3 registered (m3 twice), m2 not, m4 joined late */
    ASSERT_OK(chat_store_member_add(st, "g", "m1", NULL));
    ASSERT_OK(chat_store_member_add(st, "g", "m2", NULL));
    ASSERT_OK(chat_store_member_add(st, "g", "m3", NULL));
    append_env(st, "g", "x", NULL, 0);                     /* head 2 */
    append_env(st, "g", "x", NULL, 0);                     /* head 3 */
    ASSERT_OK(chat_store_member_add(st, "g", "m4", NULL)); /* joined at 3 */
    put_ok(st, "m1", "d1", "r", 1, CHAT_PUSH_STORED);
    put_ok(st, "m3", "d1", "r", 1, CHAT_PUSH_STORED);
    put_ok(st, "m3", "d2", "r", 1, CHAT_PUSH_STORED);
    put_ok(st, "m4", "d1", "r", 1, CHAT_PUSH_STORED);
    ASSERT_OK(chat_store_cursor_advance(st, "g", "m3", "d2", 2, &cur));
    assert_int_equal(cur, 2);

    struct seen_list s = {0};
    ASSERT_OK(
        chat_store_push_members(st, "g", NULL, 10, collect_seen, &s, last, sizeof(last), &done));
    assert_true(done);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.members[0], "m1");
    assert_int_equal(s.seen[0], 1); /* joined at 1 */
    assert_string_equal(s.members[1], "m3");
    assert_string_equal(s.devices[1], "d1");
    assert_int_equal(s.seen[1], 2); /* its cursor */
    assert_string_equal(s.devices[2], "d2");
    assert_string_equal(s.members[3], "m4");
    assert_int_equal(s.seen[3], 3);
    assert_string_equal(last, "m4");

    /* Pages of two members: m1 m2, then m3 m4, then the end. */
    memset(&s, 0, sizeof(s));
    ASSERT_OK(
        chat_store_push_members(st, "g", NULL, 2, collect_seen, &s, last, sizeof(last), &done));
    assert_false(done);
    assert_int_equal(s.n, 1);
    assert_string_equal(last, "m2");
    memset(&s, 0, sizeof(s));
    ASSERT_OK(
        chat_store_push_members(st, "g", "m2", 2, collect_seen, &s, last, sizeof(last), &done));
    assert_int_equal(s.n, 3);
    assert_string_equal(last, "m4");
    if (!done) { /* a full page may not know it was the last */
        memset(&s, 0, sizeof(s));
        ASSERT_OK(
            chat_store_push_members(st, "g", "m4", 2, collect_seen, &s, last, sizeof(last), &done));
        assert_true(done);
        assert_int_equal(s.n, 0);
    }
    /* fn stops: last names the member before the one it stopped in. */
    memset(&s, 0, sizeof(s));
    s.stop_after = 2;
    ASSERT_OK(
        chat_store_push_members(st, "g", NULL, 10, collect_seen, &s, last, sizeof(last), &done));
    assert_false(done);
    assert_string_equal(last, "m2");
    /* An unknown group has none. */
    memset(&s, 0, sizeof(s));
    ASSERT_OK(
        chat_store_push_members(st, "nope", NULL, 10, collect_seen, &s, last, sizeof(last), &done));
    assert_true(done);
    assert_int_equal(s.n, 0);
}

void push_case_expire(chat_store *st)
{
    char resume[CHAT_STORE_RESUME_MAX];
    size_t removed = 0, total = 0;
    bool done = false;
    uint64_t cur = 0;

    append_env(st, "g", "x", NULL, 0);
    ASSERT_OK(chat_store_member_add(st, "g", "alice", NULL));
    ASSERT_OK(chat_store_cursor_advance(st, "g", "alice", "with-cursor", 1, &cur));
    put_ok(st, "alice", "with-cursor", "r", 100, CHAT_PUSH_STORED);
    put_ok(st, "alice", "no-cursor", "r", 100, CHAT_PUSH_STORED);
    put_ok(st, "alice", "too-new", "r", 300, CHAT_PUSH_STORED);
    memset(resume, 0, sizeof(resume));
    for (int i = 0; i < 10 && !done; i++) {
        ASSERT_OK(chat_store_push_expire(st, 200, 1, resume, sizeof(resume), &removed, &done));
        total += removed;
    }
    assert_true(done);
    assert_int_equal(total, 1);
    assert_reg(st, "alice", "no-cursor", NULL, 0);
    assert_reg(st, "alice", "with-cursor", "r", 100);
    assert_reg(st, "alice", "too-new", "r", 300);
}
