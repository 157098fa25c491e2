/* Unit tests of plugin/replay.c, continued (test_plugin_replay.c runs
 * them): a hole in a group's ids, retention's truncation, a read revoked
 * mid-replay, stopping a device's replays or one group's, and live acks.
 * The client model is replay_device.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

#include "replay_device.h"

/* Removes message id of group from the store's files, as damage would. */
static void damage(struct plugin_fixture *fx, const char *group, uint64_t id)
{
    char key[64], *err = NULL;
    size_t glen = strlen(group), n = 0;
    key[n++] = 'M';
    key[n++] = (char)(glen >> 8);
    key[n++] = (char)glen;
    memcpy(key + n, group, glen);
    n += glen;
    for (int i = 7; i >= 0; i--) {
        key[n++] = (char)(id >> (8 * i));
    }
    chat_store_close(fx->pl.store);
    fx->pl.store = NULL;
    leveldb_options_t *opt = leveldb_options_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_t *db = leveldb_open(opt, fx->dir, &err);
    assert_null(err);
    leveldb_delete(db, wo, key, n, &err);
    assert_null(err);
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(opt);
    assert_int_equal(chat_store_open(fx->dir, CHAT_SYNC_NONE, &fx->pl.store, &err), CHAT_OK);
}

/* A hole in a group's ids is reported to the device, never skipped in
 * silence; the catch-up goes on past it. */
void test_hole(void **state)
{
    static const char *const opts[] = {"page_size=10", "replay_window=4", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 8);
    damage(fx, "g", 3);
    damage(fx, "g", 4);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    rd_assert_page(&d->pages[0], "g", 1, 2);
    rd_assert_page(&d->pages[1], "g", 5, 8);
    assert_int_equal(d->nerrors, 1);
    assert_int_equal(d->errors[0].id, 3);
    assert_string_equal(d->errors[0].error, "messages 3 to 4 are missing from the store "
                                            "(damaged): ack past them to go on");
    assert_true(stub_log_has(MOSQ_LOG_ERR, "group g: messages 3 to 4 are missing"));
    free(d);
}

/* Retention removed what the device never read: "truncated". */
void test_truncated(void **state)
{
    static const char *const opts[] = {"page_size=3", "replay_window=4", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");
    uint64_t first = 0;

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 8);
    assert_int_equal(chat_store_trim(fx->pl.store, "g", 4, 100, &first), CHAT_OK);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    rd_assert_page(&d->pages[0], "g", 4, 6);
    assert_true(d->pages[0].truncated);
    rd_assert_page(&d->pages[1], "g", 7, 8);
    assert_false(d->pages[1].truncated);
    assert_int_equal(d->nerrors, 0);
    free(d);
}

/* Behind other access checkers, every page asks the broker again: a right
 * revoked during a catch-up stops it. */
void test_read_revoked(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", "acl=defer", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    chat_broker_set_test(&fx->pl, false, false, stub_acl_check);
    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 10);
    stub_acl_set_answer(MOSQ_ERR_ACL_DENIED);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 0);
    assert_int_equal(d->nerrors, 1);
    assert_string_equal(d->errors[0].error, "the broker does not let you read this group");
    assert_int_equal(rd_devices(fx), 0);

    stub_acl_set_answer(MOSQ_ERR_SUCCESS);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    stub_acl_set_answer(MOSQ_ERR_ACL_DENIED);
    rd_ack(fx, d, "g", 2);
    assert_int_equal(d->npages, 2);
    assert_int_equal(d->nerrors, 2);
    rd_ack(fx, d, "g", 4);
    assert_int_equal(d->npages, 2);
    assert_int_equal(rd_devices(fx), 0);

    /* Without the broker's check: refused, unless read_check members. */
    chat_broker_set_test(&fx->pl, false, false, NULL);
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    assert_non_null(strstr(d->errors[d->nerrors - 1].error, "history is unavailable"));
    fx->pl.cfg.read_check = CHAT_READ_MEMBERS;
    rd_start(fx, d, "g");
    assert_int_equal(d->npages, 4);
    free(d);
}

/* Stopping: one group, all groups, a member's devices (leave). */
void test_stop(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *phone = rd_new_device("phone", "bob");
    struct device *laptop = rd_new_device("laptop", "bob");
    struct device *other = rd_new_device("other", "carol");

    rd_join(fx, "a", "bob");
    rd_join(fx, "b", "bob");
    rd_join(fx, "a", "carol");
    rd_fill(fx, "a", 10);
    rd_fill(fx, "b", 10);
    rd_start(fx, phone, "a");
    rd_start(fx, phone, "b");
    rd_start(fx, laptop, "a");
    rd_start(fx, other, "a");
    assert_int_equal(rd_devices(fx), 3);
    /* bob leaves a: his devices stop paging it; carol's does not. The
     * places a held in the phone's window go to b at once: b has nothing
     * in flight, so no ack of b and no timeout would ever send it. */
    chat_replay_stop_member(&fx->pl, "bob", "a");
    rd_lose(phone);
    rd_step(fx, phone);
    assert_int_equal(rd_devices(fx), 2); /* the laptop had only a */
    assert_int_equal(phone->npages, 4);
    rd_assert_page(&phone->pages[2], "b", 1, 2);
    rd_assert_page(&phone->pages[3], "b", 3, 4);
    rd_ack(fx, phone, "a", 4);
    assert_int_equal(phone->npages, 4);
    rd_ack(fx, phone, "b", 2);
    assert_int_equal(phone->npages, 5);
    rd_assert_page(&phone->pages[4], "b", 5, 6);
    chat_replay_stop(&fx->pl, "phone", "b");
    assert_int_equal(rd_devices(fx), 1);
    chat_replay_stop(&fx->pl, "other", NULL);
    chat_replay_stop(&fx->pl, "nobody", NULL);
    assert_int_equal(rd_devices(fx), 0);
    /* Acks of groups not being paged are fine. */
    rd_ack(fx, other, "a", 5);
    free(phone);
    free(laptop);
    free(other);
}

/* One group of a device stops (a subscribe finds it caught up, or the
 * member gone): the groups waiting for room in the window take its places. */
void test_stop_one_group(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "a", "bob");
    rd_join(fx, "b", "bob");
    rd_fill(fx, "a", 10);
    rd_fill(fx, "b", 10);
    rd_start(fx, d, "a");
    rd_start(fx, d, "b");
    assert_int_equal(d->npages, 2);
    chat_replay_stop(&fx->pl, "phone", "a");
    rd_lose(d);
    rd_step(fx, d);
    assert_int_equal(d->npages, 4);
    rd_assert_page(&d->pages[2], "b", 1, 2);
    rd_assert_page(&d->pages[3], "b", 3, 4);
    free(d);
}

/* Live messages acked beyond the pages sent move the catch-up on. */
void test_live_acks(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=1", NULL};
    struct plugin_fixture *fx = rd_open_fixture(state, opts);
    struct device *d = rd_new_device("phone", "bob");

    rd_join(fx, "g", "bob");
    rd_fill(fx, "g", 10);
    rd_start(fx, d, "g");
    rd_assert_page(&d->pages[0], "g", 1, 2);
    rd_ack(fx, d, "g", 8);
    rd_assert_page(&d->pages[1], "g", 9, 10);
    rd_ack(fx, d, "g", 10);
    assert_int_equal(rd_devices(fx), 0);
    free(d);
}
