/* fuzz_ack: an ack payload on <prefix>/<group>/ack. chat_ack_parse must
 * agree with the rule of docs/protocol.md (decimal digits, at most 19, blanks
 * around them), and the whole ack path (chat_on_message through the stubs,
 * on a real store) must take exactly the acks it parses: a good one moves
 * the cursor (never past the head) and answers nothing, a bad one is refused
 * with one error entry. */
#include <string.h>

#include "fuzz.h"

static const char *const opts[] = {NULL};

static bool blank(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The rule, written again: digits with blanks around them. */
static bool reference(const uint8_t *p, size_t len, uint64_t *id)
{
    size_t i = 0, end = len;
    while (i < end && blank(p[i])) {
        i++;
    }
    while (end > i && blank(p[end - 1])) {
        end--;
    }
    if (end == i || end - i > 19) {
        return false;
    }
    uint64_t v = 0;
    for (; i < end; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        v = v * 10 + (p[i] - '0');
    }
    *id = v;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool seeded;
    struct plugin_fixture *fx = fuzz_fixture(opts);
    uint64_t id = 0, want = 0, head = 0, cursor = 0;
    bool found = false;

    if (!seeded) {
        FUZZ_CHECK(chat_store_member_add(fx->pl.store, "room1", "bob", NULL) == CHAT_OK, "join");
        for (int i = 0; i < 5; i++) {
            FUZZ_CHECK(plugin_append(fx->pl.store, "room1", "alice", 60, NULL) == CHAT_OK,
                       "append");
        }
        seeded = true;
    }
    bool ok = chat_ack_parse(data, size, &id);
    FUZZ_CHECK(ok == reference(data, size, &want), "chat_ack_parse says %d", ok);
    FUZZ_CHECK(!ok || id == want, "id %llu, expected %llu", (unsigned long long)id,
               (unsigned long long)want);

    fuzz_fixture_fresh(fx);
    stub_reset();
    struct mosquitto bob = plugin_client("bob-phone", "bob");
    char topic[] = "chat/room1/ack";
    void *payload = malloc(size ? size : 1);
    FUZZ_CHECK(payload, "out of memory");
    memcpy(payload, data, size);
    struct mosquitto_evt_message ev = {
        .client = &bob, .topic = topic, .payload = payload, .payloadlen = (uint32_t)size, .qos = 1};
    int rc = chat_on_message(&fx->pl, &ev);
    FUZZ_CHECK(rc == (ok ? MOSQ_ERR_SUCCESS : MOSQ_ERR_ACL_DENIED), "chat_on_message gave %d", rc);
    FUZZ_CHECK(ev.payload == payload && ev.payloadlen == size, "an ack's payload was replaced");
    size_t answers = fuzz_check_answers("bob-phone", NULL, NULL, 0);
    FUZZ_CHECK(answers == (ok ? 0u : 1u), "%zu answers", answers);
    FUZZ_CHECK(chat_store_head(fx->pl.store, "room1", &head) == CHAT_OK, "head");
    FUZZ_CHECK(chat_store_cursor_get(fx->pl.store, "room1", "bob", "bob-phone", &cursor, &found) ==
                   CHAT_OK,
               "cursor");
    FUZZ_CHECK(!ok || found, "no cursor after an ack");
    FUZZ_CHECK(cursor <= head, "cursor %llu past the head %llu", (unsigned long long)cursor,
               (unsigned long long)head);
    free(payload);
    return 0;
}
