/* Unit tests of plugin/replay.c's window and resend rules, on a real store
 * in a temporary directory, with the broker stubbed: the tests call
 * chat_replay_start, _acked and _tick as the broker's events would, and
 * read the pages the plugin published to each client.
 *
 * A client model (struct device below) reads every page and error entry
 * published to it, checks each page (consecutive ids, the envelopes as
 * stored, no more bytes than page_bytes beyond its first message), and
 * counts the pages it has not acked: never more than replay_window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <leveldb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin_fixture.h"

#define ENV_SIZE 100 /* bytes of every test envelope */
#define MAX_PAGES 512

struct page {
    char group[32];
    uint64_t first, last, head;
    size_t count;
    bool more, truncated;
};

struct error_entry {
    char group[32];
    uint64_t id; /* 0: none */
    char error[256];
};

/* What one client has received, and what it has acked. */
struct device {
    struct mosquitto client;
    size_t next_pub; /* the first publish not read yet */
    struct page pages[MAX_PAGES];
    size_t npages;
    struct error_entry errors[64];
    size_t nerrors;
    struct {
        char name[32];
        uint64_t acked;
    } groups[4];
};

static struct plugin_fixture *open_fixture(void **state, const char *const *opts)
{
    struct plugin_fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    stub_reset();
    if (!plugin_fixture_open(fx, opts, NULL)) {
        free(fx);
        fail_msg("cannot open the fixture");
    }
    *state = fx;
    return fx;
}

static int teardown(void **state)
{
    struct plugin_fixture *fx = *state;
    if (fx) {
        plugin_fixture_close(fx);
        free(fx);
    }
    stub_reset();
    return 0;
}

/* Appends n messages of ENV_SIZE bytes to group. */
static void fill(struct plugin_fixture *fx, const char *group, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(plugin_append(fx->pl.store, group, "sender", ENV_SIZE, NULL), CHAT_OK);
    }
}

static void join(struct plugin_fixture *fx, const char *group, const char *member)
{
    uint64_t joined = 0;
    assert_int_equal(chat_store_member_add(fx->pl.store, group, member, &joined), CHAT_OK);
}

static uint64_t *acked_of(struct device *d, const char *group)
{
    for (size_t i = 0; i < 4; i++) {
        if (!strcmp(d->groups[i].name, group)) {
            return &d->groups[i].acked;
        }
        if (!d->groups[i].name[0]) {
            snprintf(d->groups[i].name, sizeof(d->groups[i].name), "%s", group);
            return &d->groups[i].acked;
        }
    }
    fail_msg("too many groups");
    return NULL;
}

static uint64_t json_u64(const cJSON *o, const char *key)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(f));
    return (uint64_t)f->valuedouble;
}

/* Reads what was published to d since the last call. */
static void receive(struct plugin_fixture *fx, struct device *d)
{
    for (; d->next_pub < stub_publish_count(); d->next_pub++) {
        const struct stub_publish *p = stub_publish_get(d->next_pub);
        if (strcmp(p->client_id, d->client.id) != 0) {
            continue;
        }
        assert_string_equal(p->topic, CHAT_PROTO_RESPONSE_TOPIC);
        assert_int_equal(p->qos, fx->pl.cfg.page_qos);
        assert_false(p->retain);
        cJSON *root = cJSON_ParseWithLength(p->payload, p->len);
        const cJSON *entry = NULL;
        assert_non_null(root);
        cJSON_ArrayForEach(entry, cJSON_GetObjectItemCaseSensitive(root, "responses"))
        {
            const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(entry, "command");
            const cJSON *group = cJSON_GetObjectItemCaseSensitive(entry, "group");
            const cJSON *error = cJSON_GetObjectItemCaseSensitive(entry, "error");
            assert_true(cJSON_IsString(cmd) && !strcmp(cmd->valuestring, "replay"));
            assert_true(cJSON_IsString(group));
            if (error) {
                struct error_entry *e = &d->errors[d->nerrors++];
                assert_true(d->nerrors < 64);
                snprintf(e->group, sizeof(e->group), "%s", group->valuestring);
                snprintf(e->error, sizeof(e->error), "%s", error->valuestring);
                e->id = cJSON_GetObjectItemCaseSensitive(entry, "id") ? json_u64(entry, "id") : 0;
                continue;
            }
            struct page *pg = &d->pages[d->npages++];
            assert_true(d->npages < MAX_PAGES);
            snprintf(pg->group, sizeof(pg->group), "%s", group->valuestring);
            pg->first = json_u64(entry, "first");
            pg->last = json_u64(entry, "last");
            pg->head = json_u64(entry, "head");
            pg->more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "more"));
            pg->truncated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(entry, "truncated"));
            const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(entry, "messages");
            const cJSON *m = NULL;
            uint64_t want = pg->first;
            cJSON_ArrayForEach(m, msgs)
            {
                assert_int_equal(json_u64(m, "id"), want);
                want++;
                pg->count++;
            }
            assert_int_equal(pg->count, pg->last - pg->first + 1);
            assert_int_equal(pg->more, pg->last < pg->head);
            /* page_bytes: the first message always goes, then no more
             * than that many bytes in all. */
            assert_true(pg->count == 1 || pg->count * ENV_SIZE <= fx->pl.cfg.page_bytes);
            assert_true(pg->count <= fx->pl.cfg.page_size);
        }
        cJSON_Delete(root);
    }
}

/* Pages of d not acked yet, over all its groups. */
static unsigned outstanding(struct device *d)
{
    unsigned n = 0;
    for (size_t i = 0; i < d->npages; i++) {
        if (d->pages[i].last > *acked_of(d, d->pages[i].group)) {
            n++;
        }
    }
    return n;
}

/* Reads what came and checks the window. */
static void step(struct plugin_fixture *fx, struct device *d)
{
    receive(fx, d);
    if (outstanding(d) > fx->pl.cfg.replay_window) {
        fail_msg("%u pages out, window %u", outstanding(d), fx->pl.cfg.replay_window);
    }
}

/* The device no longer waits for the pages it has not acked: they were
 * lost (a disconnect), or the plugin resends them (a timeout). */
static void lose(struct device *d)
{
    for (size_t i = 0; i < d->npages; i++) {
        if (d->pages[i].last > *acked_of(d, d->pages[i].group)) {
            d->pages[i].last = 0;
        }
    }
}

static void start(struct plugin_fixture *fx, struct device *d, const char *group)
{
    chat_replay_start(&fx->pl, &d->client, group);
    step(fx, d);
}

/* The device acks id in group, as an ack publish would (the cursor first,
 * then the replay). */
static void ack(struct plugin_fixture *fx, struct device *d, const char *group, uint64_t id)
{
    uint64_t now = 0;
    assert_int_equal(
        chat_store_cursor_advance(fx->pl.store, group, d->client.username, d->client.id, id, &now),
        CHAT_OK);
    *acked_of(d, group) = now;
    chat_replay_acked(&fx->pl, &d->client, group, now);
    step(fx, d);
}

static void tick(struct plugin_fixture *fx, struct device *d, time_t now)
{
    chat_replay_tick(&fx->pl, now);
    step(fx, d);
}

static struct device *new_device(const char *id, const char *user)
{
    struct device *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    d->client = plugin_client(id, user);
    return d;
}

static void assert_page(const struct page *p, const char *group, uint64_t first, uint64_t last)
{
    if (strcmp(p->group, group) != 0 || p->first != first || p->last != last) {
        fail_msg("page %s %llu..%llu, expected %s %llu..%llu", p->group,
                 (unsigned long long)p->first, (unsigned long long)p->last, group,
                 (unsigned long long)first, (unsigned long long)last);
    }
}

static size_t devices(struct plugin_fixture *fx)
{
    return chat_hmap_count(fx->pl.devices);
}

/* ===========================================================================
 * Cases
 * ========================================================================= */

/* The window is full at once, and each ack that frees a place in it sends
 * one more page: never more than replay_window out, never fewer while
 * there is more to send. */
static void test_window(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=3", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    join(fx, "g", "bob");
    fill(fx, "g", 13);
    start(fx, d, "g");
    assert_int_equal(d->npages, 3);
    assert_page(&d->pages[0], "g", 1, 2);
    assert_page(&d->pages[1], "g", 3, 4);
    assert_page(&d->pages[2], "g", 5, 6);
    assert_true(d->pages[0].more && d->pages[0].head == 13);
    /* An ack inside a page frees nothing. */
    ack(fx, d, "g", 1);
    assert_int_equal(d->npages, 3);
    /* One page acked: one more page. */
    ack(fx, d, "g", 2);
    assert_int_equal(d->npages, 4);
    assert_page(&d->pages[3], "g", 7, 8);
    /* Two pages at once (cumulative): two more. */
    ack(fx, d, "g", 7);
    assert_int_equal(d->npages, 6);
    assert_page(&d->pages[4], "g", 9, 10);
    assert_page(&d->pages[5], "g", 11, 12);
    ack(fx, d, "g", 10);
    assert_int_equal(d->npages, 7);
    assert_page(&d->pages[6], "g", 13, 13);
    assert_false(d->pages[6].more);
    /* Nothing left to send: the device's state goes once all is acked. */
    ack(fx, d, "g", 12);
    assert_int_equal(d->npages, 7);
    assert_int_equal(devices(fx), 1);
    ack(fx, d, "g", 13);
    assert_int_equal(devices(fx), 0);
    assert_int_equal(d->nerrors, 0);
    free(d);
}

/* A window of one, and a group already read: nothing to send. */
static void test_window_of_one(void **state)
{
    static const char *const opts[] = {"page_size=5", "replay_window=1", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    join(fx, "g", "bob");
    fill(fx, "g", 12);
    start(fx, d, "g");
    assert_int_equal(d->npages, 1);
    ack(fx, d, "g", 5);
    ack(fx, d, "g", 10);
    ack(fx, d, "g", 12);
    assert_int_equal(d->npages, 3);
    assert_page(&d->pages[2], "g", 11, 12);
    assert_int_equal(devices(fx), 0);
    /* Caught up: a new subscribe sends nothing and keeps no state. */
    start(fx, d, "g");
    assert_int_equal(d->npages, 3);
    assert_int_equal(devices(fx), 0);
    /* Not a member: nothing either. */
    struct device *eve = new_device("eve-phone", "eve");
    start(fx, eve, "g");
    assert_int_equal(eve->npages + eve->nerrors, 0);
    assert_int_equal(devices(fx), 0);
    free(eve);
    free(d);
}

/* page_bytes bounds a page after its first message. */
static void test_page_bytes(void **state)
{
    static const char *const opts[] = {"page_size=100", "page_bytes=1024", "replay_window=2", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    join(fx, "g", "bob");
    fill(fx, "g", 30);
    start(fx, d, "g");
    /* 10 envelopes of 100 bytes fit in 1024, 11 do not. */
    assert_int_equal(d->npages, 2);
    assert_page(&d->pages[0], "g", 1, 10);
    assert_page(&d->pages[1], "g", 11, 20);
    free(d);
}

/* A new subscribe (or sync) restarts from the cursor at once, but pages in
 * flight still count: repeating subscribes does not queue window after
 * window. */
static void test_restart(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    join(fx, "g", "bob");
    fill(fx, "g", 20);
    start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    for (int i = 0; i < 10; i++) {
        start(fx, d, "g");
    }
    assert_int_equal(d->npages, 2);
    /* The pages in flight go on from where they were. */
    ack(fx, d, "g", 2);
    assert_int_equal(d->npages, 3);
    assert_page(&d->pages[2], "g", 5, 6);
    /* Once nothing is in flight, a restart sends from the cursor. */
    ack(fx, d, "g", 6);
    assert_int_equal(d->npages, 5);
    chat_replay_stop(&fx->pl, "phone", NULL); /* the device disconnects */
    lose(d);
    assert_int_equal(devices(fx), 0);
    start(fx, d, "g"); /* and subscribes again: from its cursor, 6 */
    assert_int_equal(d->npages, 7);
    assert_page(&d->pages[5], "g", 7, 8);
    assert_page(&d->pages[6], "g", 9, 10);
    /* New messages while catching up: the target moves on restart. */
    fill(fx, "g", 3);
    ack(fx, d, "g", 10);
    start(fx, d, "g");
    ack(fx, d, "g", 14);
    ack(fx, d, "g", 18);
    ack(fx, d, "g", 22);
    ack(fx, d, "g", 23);
    assert_page(&d->pages[d->npages - 1], "g", 23, 23);
    assert_int_equal(d->pages[d->npages - 1].head, 23);
    assert_int_equal(devices(fx), 0);
    free(d);
}

/* A device that acks nothing for replay_timeout gets its pages again from
 * its cursor, each resend in pages of a quarter of the bytes, down to one
 * message; one message sent alone twice in vain is reported once; an ack
 * doubles the page size again. */
static void test_resend(void **state)
{
    static const char *const opts[] = {"page_size=100", "page_bytes=4096", "replay_window=2",
                                       "replay_timeout=5", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");
    time_t t = time(NULL);

    join(fx, "g", "bob");
    fill(fx, "g", 200);
    start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    assert_page(&d->pages[0], "g", 1, 40);
    assert_page(&d->pages[1], "g", 41, 80);
    /* Not yet. */
    tick(fx, d, t + 3);
    assert_int_equal(d->npages, 2);
    /* replay_timeout: again from the cursor, 1024 bytes a page. */
    lose(d);
    tick(fx, d, t + 6);
    assert_int_equal(d->npages, 4);
    assert_page(&d->pages[2], "g", 1, 10);
    assert_page(&d->pages[3], "g", 11, 20);
    assert_true(stub_log_has(MOSQ_LOG_INFO, "no ack from phone for 5 s, resending from its "
                                            "cursor in pages of at most 1024 bytes"));
    /* 1024 is under 2048: a page of one message from now on. */
    lose(d);
    tick(fx, d, t + 12);
    assert_int_equal(d->npages, 6);
    assert_page(&d->pages[4], "g", 1, 1);
    assert_page(&d->pages[5], "g", 2, 2);
    assert_int_equal(d->nerrors, 0);
    lose(d);
    tick(fx, d, t + 18); /* alone once */
    assert_int_equal(d->nerrors, 0);
    lose(d);
    tick(fx, d, t + 24); /* alone twice: reported, and resent anyway */
    assert_int_equal(d->nerrors, 1);
    assert_int_equal(d->errors[0].id, 1);
    assert_non_null(strstr(d->errors[0].error, "message 1 was sent alone 2 times without an ack"));
    assert_int_equal(d->npages, 10);
    assert_page(&d->pages[8], "g", 1, 1);
    lose(d);
    tick(fx, d, t + 30); /* reported once only */
    assert_int_equal(d->nerrors, 1);
    size_t resent = d->npages;
    /* The device acks each page as it comes: each ack that moves its
     * cursor doubles the page's bytes, back up to page_bytes and no more. */
    size_t next = resent - 2, most = 0;
    while (next < d->npages) {
        const struct page *p = &d->pages[next++];
        most = p->count > most ? p->count : most;
        ack(fx, d, "g", p->last);
    }
    assert_int_equal(d->pages[resent].count, 1); /* 2 bytes: one message */
    assert_int_equal(most, 40);
    assert_int_equal(d->pages[d->npages - 1].last, 200);
    assert_int_equal(devices(fx), 0);
    free(d);
}

/* Groups take turns: one long backlog does not hold back the others. */
static void test_turns(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");
    const char *groups[] = {"a", "b", "c"};

    for (size_t i = 0; i < 3; i++) {
        join(fx, groups[i], "bob");
    }
    fill(fx, "a", 40);
    fill(fx, "b", 8);
    fill(fx, "c", 8);
    /* The long backlog starts last: newest groups come first in the
     * device's list, and must not be served first for ever. */
    start(fx, d, "b");
    start(fx, d, "c");
    start(fx, d, "a");
    assert_int_equal(d->npages, 2); /* b's, the window full */
    /* The device acks each page as it comes, oldest first. */
    size_t acked_pages = 0;
    while (acked_pages < d->npages) {
        const struct page *p = &d->pages[acked_pages++];
        ack(fx, d, p->group, p->last);
    }
    /* b and c were done long before a: while all three had more to send,
     * none got two pages in a row more than once per round. */
    size_t last_b = 0, last_c = 0, a_before = 0;
    for (size_t i = 0; i < d->npages; i++) {
        if (!strcmp(d->pages[i].group, "b")) {
            last_b = i;
        } else if (!strcmp(d->pages[i].group, "c")) {
            last_c = i;
        } else if (i < 16) {
            a_before++;
        }
    }
    assert_int_equal(d->npages, 20 + 4 + 4);
    assert_true(last_b < 16 && last_c < 16);
    assert_true(a_before <= 8);
    assert_int_equal(devices(fx), 0);
    free(d);
}

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
static void test_hole(void **state)
{
    static const char *const opts[] = {"page_size=10", "replay_window=4", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    join(fx, "g", "bob");
    fill(fx, "g", 8);
    damage(fx, "g", 3);
    damage(fx, "g", 4);
    start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    assert_page(&d->pages[0], "g", 1, 2);
    assert_page(&d->pages[1], "g", 5, 8);
    assert_int_equal(d->nerrors, 1);
    assert_int_equal(d->errors[0].id, 3);
    assert_string_equal(d->errors[0].error, "messages 3 to 4 are missing from the store "
                                            "(damaged): ack past them to go on");
    assert_true(stub_log_has(MOSQ_LOG_ERR, "group g: messages 3 to 4 are missing"));
    free(d);
}

/* Retention removed what the device never read: "truncated". */
static void test_truncated(void **state)
{
    static const char *const opts[] = {"page_size=3", "replay_window=4", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");
    uint64_t first = 0;

    join(fx, "g", "bob");
    fill(fx, "g", 8);
    assert_int_equal(chat_store_trim(fx->pl.store, "g", 4, 100, &first), CHAT_OK);
    start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    assert_page(&d->pages[0], "g", 4, 6);
    assert_true(d->pages[0].truncated);
    assert_page(&d->pages[1], "g", 7, 8);
    assert_false(d->pages[1].truncated);
    assert_int_equal(d->nerrors, 0);
    free(d);
}

/* Behind other access checkers, every page asks the broker again: a right
 * revoked during a catch-up stops it. */
static void test_read_revoked(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", "acl=defer", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    fx->pl.broker_acl_check = stub_acl_check;
    join(fx, "g", "bob");
    fill(fx, "g", 10);
    stub_acl_set_answer(MOSQ_ERR_ACL_DENIED);
    start(fx, d, "g");
    assert_int_equal(d->npages, 0);
    assert_int_equal(d->nerrors, 1);
    assert_string_equal(d->errors[0].error, "the broker does not let you read this group");
    assert_int_equal(devices(fx), 0);

    stub_acl_set_answer(MOSQ_ERR_SUCCESS);
    start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    stub_acl_set_answer(MOSQ_ERR_ACL_DENIED);
    ack(fx, d, "g", 2);
    assert_int_equal(d->npages, 2);
    assert_int_equal(d->nerrors, 2);
    ack(fx, d, "g", 4);
    assert_int_equal(d->npages, 2);
    assert_int_equal(devices(fx), 0);

    /* Without the broker's check: refused, unless read_check members. */
    fx->pl.broker_acl_check = NULL;
    start(fx, d, "g");
    assert_int_equal(d->npages, 2);
    assert_non_null(strstr(d->errors[d->nerrors - 1].error, "history is unavailable"));
    fx->pl.cfg.read_check = CHAT_READ_MEMBERS;
    start(fx, d, "g");
    assert_int_equal(d->npages, 4);
    free(d);
}

/* Stopping: one group, all groups, a member's devices (leave). */
static void test_stop(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *phone = new_device("phone", "bob");
    struct device *laptop = new_device("laptop", "bob");
    struct device *other = new_device("other", "carol");

    join(fx, "a", "bob");
    join(fx, "b", "bob");
    join(fx, "a", "carol");
    fill(fx, "a", 10);
    fill(fx, "b", 10);
    start(fx, phone, "a");
    start(fx, phone, "b");
    start(fx, laptop, "a");
    start(fx, other, "a");
    assert_int_equal(devices(fx), 3);
    /* bob leaves a: his devices stop paging it; carol's does not. The
     * places a held in the phone's window go to b at once: b has nothing
     * in flight, so no ack of b and no timeout would ever send it. */
    chat_replay_stop_member(&fx->pl, "bob", "a");
    lose(phone);
    step(fx, phone);
    assert_int_equal(devices(fx), 2); /* the laptop had only a */
    assert_int_equal(phone->npages, 4);
    assert_page(&phone->pages[2], "b", 1, 2);
    assert_page(&phone->pages[3], "b", 3, 4);
    ack(fx, phone, "a", 4);
    assert_int_equal(phone->npages, 4);
    ack(fx, phone, "b", 2);
    assert_int_equal(phone->npages, 5);
    assert_page(&phone->pages[4], "b", 5, 6);
    chat_replay_stop(&fx->pl, "phone", "b");
    assert_int_equal(devices(fx), 1);
    chat_replay_stop(&fx->pl, "other", NULL);
    chat_replay_stop(&fx->pl, "nobody", NULL);
    assert_int_equal(devices(fx), 0);
    /* Acks of groups not being paged are fine. */
    ack(fx, other, "a", 5);
    free(phone);
    free(laptop);
    free(other);
}

/* One group of a device stops (a subscribe finds it caught up, or the
 * member gone): the groups waiting for room in the window take its places. */
static void test_stop_one_group(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=2", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    join(fx, "a", "bob");
    join(fx, "b", "bob");
    fill(fx, "a", 10);
    fill(fx, "b", 10);
    start(fx, d, "a");
    start(fx, d, "b");
    assert_int_equal(d->npages, 2);
    chat_replay_stop(&fx->pl, "phone", "a");
    lose(d);
    step(fx, d);
    assert_int_equal(d->npages, 4);
    assert_page(&d->pages[2], "b", 1, 2);
    assert_page(&d->pages[3], "b", 3, 4);
    free(d);
}

/* Live messages acked beyond the pages sent move the catch-up on. */
static void test_live_acks(void **state)
{
    static const char *const opts[] = {"page_size=2", "replay_window=1", NULL};
    struct plugin_fixture *fx = open_fixture(state, opts);
    struct device *d = new_device("phone", "bob");

    join(fx, "g", "bob");
    fill(fx, "g", 10);
    start(fx, d, "g");
    assert_page(&d->pages[0], "g", 1, 2);
    ack(fx, d, "g", 8);
    assert_page(&d->pages[1], "g", 9, 10);
    ack(fx, d, "g", 10);
    assert_int_equal(devices(fx), 0);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_window, teardown),
        cmocka_unit_test_teardown(test_window_of_one, teardown),
        cmocka_unit_test_teardown(test_page_bytes, teardown),
        cmocka_unit_test_teardown(test_restart, teardown),
        cmocka_unit_test_teardown(test_resend, teardown),
        cmocka_unit_test_teardown(test_turns, teardown),
        cmocka_unit_test_teardown(test_hole, teardown),
        cmocka_unit_test_teardown(test_truncated, teardown),
        cmocka_unit_test_teardown(test_read_revoked, teardown),
        cmocka_unit_test_teardown(test_stop, teardown),
        cmocka_unit_test_teardown(test_stop_one_group, teardown),
        cmocka_unit_test_teardown(test_live_acks, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
