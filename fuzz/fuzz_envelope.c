/* fuzz_envelope: a published payload becomes the stored envelope
 * (envelope.c). The splice and the cJSON tree must agree: the same refusal
 * and cid, and envelopes that are strict JSON and read as the same values
 * (json_check.h). Also chat_payload_cid and chat_nul_escapes on the same
 * bytes. */
#include <string.h>

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
