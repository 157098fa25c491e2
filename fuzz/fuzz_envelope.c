/* fuzz_envelope: a published payload becomes the stored envelope
 * (envelope.c). The splice and the cJSON tree must agree: the same refusal
 * and cid, and envelopes that are strict JSON and read as the same values
 * (json_check.h). Also chat_payload_cid and chat_nul_escapes on the same
 * bytes, and the whole publish path (chat_on_message through the stubs, on
 * a real store): a publish refused is answered once and stores nothing; one
 * taken is delivered as an envelope stored under the group's next id, or,
 * a retry of a cid stored already, is answered "duplicate", stores nothing
 * and is delivered as that stored envelope or emptied. */
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz.h"
#include "json_check.h"

/* A sender whose name needs escaping. */
#define FROM "~al\"i\\ce\x01"

struct built {
    char *env, *cid, *canon;
    const char *why;
};

static struct built build(enum chat_envelope_way way, const uint8_t *data, size_t size)
{
    struct built b = {0};
    chat_envelope_build_way(way, data, size, 9007199254740991ull, "r\xc3\xa9sum\xc3\xa9", FROM,
                            1764448943123, &b.env, &b.cid, &b.why);
    if (b.env) {
        b.canon = json_canon(b.env, strlen(b.env));
        FUZZ_CHECK(b.canon, "way %d: the envelope is not strict JSON: %.1000s", way, b.env);
    }
    return b;
}

static void built_free(struct built *b)
{
    free(b->env);
    free(b->cid);
    free(b->canon);
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static const char *const opts[] = {"max_payload=4096", NULL};

/* Whether the answer p is a publish's "duplicate" entry. */
static bool is_duplicate(const struct stub_publish *p)
{
    cJSON *root = cJSON_ParseWithLength(p->payload, p->len);
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "responses"), 0);
    bool dup = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "duplicate"));
    cJSON_Delete(root);
    return dup;
}

/* The payload published by alice to chat/room1. */
static void publish(const uint8_t *data, size_t size, const char *why)
{
    static unsigned published;
    if (++published % 1000 == 0) {
        fuzz_fixture_renew();
    }
    struct plugin_fixture *fx = fuzz_fixture(opts);
    uint64_t before = 0, after = 0;
    char topic[] = "chat/room1";
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    void *payload = malloc(size ? size : 1);

    FUZZ_CHECK(payload, "out of memory");
    memcpy(payload, data, size);
    fuzz_fixture_fresh(fx);
    stub_reset();
    FUZZ_CHECK(chat_store_head(fx->pl.store, "room1", &before) == CHAT_OK, "head");
    struct mosquitto_evt_message ev = {.client = &alice,
                                       .topic = topic,
                                       .payload = payload,
                                       .payloadlen = (uint32_t)size,
                                       .qos = 1,
                                       .retain = true};
    int rc = chat_on_message(&fx->pl, &ev);
    FUZZ_CHECK(chat_store_head(fx->pl.store, "room1", &after) == CHAT_OK, "head");
    /* A retry of a cid stored before (the fixture's store outlives one
     * input) is answered "duplicate" and not stored again (docs/protocol.md,
     * "A retry"). */
    bool duplicate = stub_publish_count() == 1 && is_duplicate(stub_publish_get(0));
    size_t answers = fuzz_check_answers("alice-phone", NULL, NULL, 0);
    if (rc != MOSQ_ERR_SUCCESS) {
        FUZZ_CHECK(rc == MOSQ_ERR_ACL_DENIED, "rc %d", rc);
        FUZZ_CHECK(answers == 1 && after == before, "refused: %zu answers, head %llu -> %llu",
                   answers, (unsigned long long)before, (unsigned long long)after);
        FUZZ_CHECK(ev.payload == payload, "a refused payload replaced");
        FUZZ_CHECK(size > 4096 || why, "refused what the envelope took");
        free(payload);
        return;
    }
    FUZZ_CHECK(!why, "took what the envelope refused (%s)", why);
    FUZZ_CHECK(answers == (duplicate ? 1u : 0u) && ev.payload != payload && !ev.retain,
               "delivery: %zu answers, payload %s, retain %d", answers,
               ev.payload == payload ? "kept" : "replaced", (int)ev.retain);
    if (duplicate) {
        FUZZ_CHECK(after == before, "a duplicate stored: head %llu -> %llu",
                   (unsigned long long)before, (unsigned long long)after);
    }
    if (duplicate && ev.payloadlen == 0) {
        /* emptied: no stored envelope, so every delivery is refused */
        mosquitto_free(ev.payload);
        free(payload);
        return;
    }
    const char *env = ev.payload;
    FUZZ_CHECK(ev.payloadlen == strlen(env) && json_strict(env, ev.payloadlen),
               "not an envelope: %.500s", env);
    chat_msg m = {0};
    bool found = false;
    unsigned long long id = strtoull(env + 6, NULL, 10);
    FUZZ_CHECK(chat_store_get(fx->pl.store, "room1", id, &m, &found) == CHAT_OK && found &&
                   m.len == ev.payloadlen && !memcmp(m.data, env, m.len),
               "delivered %.300s, which is not stored as id %llu", env, id);
    FUZZ_CHECK(after == before + 1 ? id == after : (after == before && id <= after),
               "id %llu, head %llu -> %llu", id, (unsigned long long)before,
               (unsigned long long)after);
    free(m.data);
    mosquitto_free(ev.payload);
    free(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct built any = build(CHAT_ENVELOPE_ANY, data, size);
    struct built tree = build(CHAT_ENVELOPE_TREE, data, size);
    struct built splice = build(CHAT_ENVELOPE_SPLICE, data, size);

    FUZZ_CHECK(same_str(any.why, tree.why), "refused \"%s\" one way, \"%s\" the other",
               any.why ? any.why : "-", tree.why ? tree.why : "-");
    FUZZ_CHECK((any.env == NULL) == (any.why != NULL), "neither an envelope nor a reason");
    FUZZ_CHECK(same_str(any.cid, tree.cid), "cid \"%s\" one way, \"%s\" the other",
               any.cid ? any.cid : "-", tree.cid ? tree.cid : "-");
    if (any.env) {
        FUZZ_CHECK(!strcmp(any.canon, tree.canon), "the envelopes differ:\n%.1000s\n%.1000s",
                   any.env, tree.env);
        FUZZ_CHECK(!strncmp(any.env, "{\"id\":9007199254740991,", 23), "the head: %.100s", any.env);
    }
    if (splice.env) {
        FUZZ_CHECK(!strcmp(splice.canon, tree.canon),
                   "the splice's envelope differs:\n%.1000s\n%.1000s", splice.env, tree.env);
        FUZZ_CHECK(!strcmp(splice.env, any.env), "the broker's way did not splice");
    }
    if (any.cid) {
        size_t n = strlen(any.cid);
        FUZZ_CHECK(n >= 1 && n <= CHAT_PROTO_CID_MAX, "a cid of %zu bytes", n);
    }
    /* The store makes the publish path ten times slower than the rest:
     * one input in four takes it, picked by a hash of its bytes, so that
     * the choice does not depend on how the payload starts. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++) {
        h = (h ^ data[i]) * 16777619u;
    }
    if (h % 4 == 0) {
        publish(data, size, any.why);
    }
    built_free(&any);
    built_free(&tree);
    built_free(&splice);

    /* The cid of a refused publish, and the NUL escapes, on the same bytes. */
    free(chat_payload_cid(data, size, size));
    char *copy = malloc(size + 1);
    FUZZ_CHECK(copy, "out of memory");
    memcpy(copy, data, size);
    copy[size] = '\0';
    size_t n = chat_nul_escapes(copy, size, NULL);
    FUZZ_CHECK(chat_nul_escapes(copy, size, "FDD0") == n, "escapes counted twice differently");
    FUZZ_CHECK(chat_nul_escapes(copy, size, NULL) == 0, "escapes left after rewriting");
    free(copy);
    return 0;
}
