/* fuzz_common.c: the fixture and the answer check the fuzz targets share
 * (see fuzz.h). */
#include "fuzz.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "json_check.h"

static struct plugin_fixture fixture;
static bool made;
static const char *const *made_opts;

static void remove_fixture(void)
{
    plugin_fixture_close(&fixture);
}

struct plugin_fixture *fuzz_fixture(const char *const *opts)
{
    if (!made) {
        if (!plugin_fixture_open(&fixture, opts)) {
            abort();
        }
        made = true;
        made_opts = opts;
        atexit(remove_fixture);
    }
    return &fixture;
}

void fuzz_fixture_renew(void)
{
    if (made) {
        plugin_fixture_close(&fixture);
        FUZZ_CHECK(plugin_fixture_open(&fixture, made_opts), "a new store");
    }
}

void fuzz_fixture_fresh(struct plugin_fixture *fx)
{
    chat_replay_free(&fx->pl);
    chat_peers_free(&fx->pl);
    FUZZ_CHECK(chat_peers_init(&fx->pl) && chat_replay_init(&fx->pl), "out of memory");
}

size_t fuzz_check_answers(const char *client_id, const char *answer_topic, const void *corr,
                          size_t corr_len)
{
    size_t n = stub_publish_count();
    for (size_t i = 0; i < n; i++) {
        const struct stub_publish *p = stub_publish_get(i);
        const char *topic = i + 1 == n && answer_topic ? answer_topic : CHAT_PROTO_RESPONSE_TOPIC;
        FUZZ_CHECK(p->client_id && !strcmp(p->client_id, client_id), "an answer to %s",
                   p->client_id ? p->client_id : "everyone");
        FUZZ_CHECK(!strcmp(p->topic, topic), "answer %zu on %s, not %s", i, p->topic, topic);
        FUZZ_CHECK(!p->retain, "a retained answer");
        if (i + 1 == n && corr) {
            FUZZ_CHECK(p->corr && p->corr_len == corr_len && !memcmp(p->corr, corr, corr_len),
                       "the answer lacks its Correlation Data");
        } else {
            FUZZ_CHECK(!p->corr, "Correlation Data on publish %zu", i);
        }
        FUZZ_CHECK(json_strict(p->payload, p->len), "an answer that is not JSON: %.500s",
                   p->payload);
        cJSON *root = cJSON_ParseWithLength(p->payload, p->len);
        const cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "responses");
        FUZZ_CHECK(cJSON_IsArray(entries), "an answer without responses: %.500s", p->payload);
        const cJSON *e = NULL;
        cJSON_ArrayForEach(e, entries)
        {
            const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(e, "command");
            FUZZ_CHECK(cJSON_IsString(cmd), "an entry without its command: %.500s", p->payload);
        }
        cJSON_Delete(root);
    }
    stub_publishes_clear();
    return n;
}
