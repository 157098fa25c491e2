/* replay_device.c: the client model of the replay tests (replay_device.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay_device.h"

struct plugin_fixture *rd_open_fixture(void **state, const char *const *opts)
{
    struct plugin_fixture *fx = calloc(1, sizeof(*fx));
    const char *all[16];
    size_t n = 0;
    bool budget = false;
    assert_non_null(fx);
    /* replay_budget counts per pass of the broker's loop, which ends at a
     * tick: the cases that call no tick between events get replay_budget 0
     * unless they set it (test_budget_* end their passes themselves). */
    for (; opts && opts[n]; n++) {
        assert_true(n < 14);
        all[n] = opts[n];
        budget = budget || !strncmp(opts[n], "replay_budget=", 14);
    }
    if (!budget) {
        all[n++] = "replay_budget=0";
    }
    all[n] = NULL;
    stub_reset();
    if (!plugin_fixture_open(fx, all)) {
        free(fx);
        fail_msg("cannot open the fixture");
    }
    *state = fx;
    return fx;
}

int rd_teardown(void **state)
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
void rd_fill(struct plugin_fixture *fx, const char *group, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(plugin_append(fx->pl.store, group, "sender", ENV_SIZE, NULL), CHAT_OK);
    }
}

void rd_join(struct plugin_fixture *fx, const char *group, const char *member)
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
void rd_step(struct plugin_fixture *fx, struct device *d)
{
    receive(fx, d);
    if (outstanding(d) > fx->pl.cfg.replay_window) {
        fail_msg("%u pages out, window %u", outstanding(d), fx->pl.cfg.replay_window);
    }
}

/* The device no longer waits for the pages it has not acked: they were
 * lost (a disconnect), or the plugin resends them (a timeout). */
void rd_lose(struct device *d)
{
    for (size_t i = 0; i < d->npages; i++) {
        if (d->pages[i].last > *acked_of(d, d->pages[i].group)) {
            d->pages[i].last = 0;
        }
    }
}

void rd_start(struct plugin_fixture *fx, struct device *d, const char *group)
{
    chat_replay_start(&fx->pl, &d->client, group);
    rd_step(fx, d);
}

/* The device acks id in group, as an ack publish would (the cursor first,
 * then the replay). */
void rd_ack(struct plugin_fixture *fx, struct device *d, const char *group, uint64_t id)
{
    uint64_t now = 0;
    assert_int_equal(
        chat_store_cursor_advance(fx->pl.store, group, d->client.username, d->client.id, id, &now),
        CHAT_OK);
    *acked_of(d, group) = now;
    chat_replay_acked(&fx->pl, &d->client, group, now);
    rd_step(fx, d);
}

void rd_tick(struct plugin_fixture *fx, struct device *d, time_t now)
{
    chat_replay_tick(&fx->pl, (int64_t)now * 1000);
    rd_step(fx, d);
}

struct device *rd_new_device(const char *id, const char *user)
{
    struct device *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    d->client = plugin_client(id, user);
    return d;
}

void rd_assert_page(const struct page *p, const char *group, uint64_t first, uint64_t last)
{
    if (strcmp(p->group, group) != 0 || p->first != first || p->last != last) {
        fail_msg("page %s %llu..%llu, expected %s %llu..%llu", p->group,
                 (unsigned long long)p->first, (unsigned long long)p->last, group,
                 (unsigned long long)first, (unsigned long long)last);
    }
}

size_t rd_devices(struct plugin_fixture *fx)
{
    return chat_replay_devices(&fx->pl);
}
