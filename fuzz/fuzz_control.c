/* fuzz_control: a request on $CONTROL/chat/v1, through chat_on_control with
 * the broker stubbed and a real store: parsing, every command, the store
 * calls, the answer. The first byte says who asks and how (see below); the
 * rest is the payload. Every answer must go to the asking client alone, on
 * the topic it asked for, as strict JSON with a command in each entry, and
 * with its Correlation Data. */
#include <string.h>

#include "fuzz.h"

enum {
    F_USERNAME = 1 << 0,  /* a username (else a client id only) */
    F_ADMIN = 1 << 1,     /* the admin */
    F_REPLY = 1 << 2,     /* an MQTT 5 Response Topic... */
    F_BAD_REPLY = 1 << 3, /* ...that is not a valid topic */
    F_CORR = 1 << 4,      /* MQTT 5 Correlation Data */
    F_DEFER = 1 << 5,     /* behind other access checkers, which... */
    F_DENY = 1 << 6,      /* ...deny reading */
    F_CLOSED = 1 << 7,    /* open_groups false */
};

static const char *const opts[] = {"admins=admin", "page_size=5", NULL};

static void seed(struct plugin_fixture *fx)
{
    static const char *const groups[] = {"room1", "room2", "caf\xc3\xa9"};
    static const char *const members[] = {"alice", "admin", "~dev1", "dev1"};
    for (size_t g = 0; g < 3; g++) {
        for (size_t m = 0; m < 4; m++) {
            FUZZ_CHECK(chat_store_member_add(fx->pl.store, groups[g], members[m], NULL) == CHAT_OK,
                       "join");
        }
        for (int i = 0; i < 12; i++) {
            FUZZ_CHECK(plugin_append(fx->pl.store, groups[g], "alice", 60, NULL) == CHAT_OK,
                       "append");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool seeded;
    struct plugin_fixture *fx = fuzz_fixture(opts);
    if (!seeded) {
        seed(fx);
        seeded = true;
    }
    if (size == 0) {
        return 0;
    }
    uint8_t f = data[0];
    fuzz_fixture_fresh(fx);
    stub_reset();
    /* Behind other checkers usernames are verified (dynamic-security). */
    chat_broker_set_test(&fx->pl, !(f & F_DEFER), f & F_DEFER, stub_acl_check);
    stub_acl_set_answer(f & F_DENY ? MOSQ_ERR_ACL_DENIED : MOSQ_ERR_SUCCESS);
    fx->pl.cfg.open_groups = !(f & F_CLOSED);

    struct mosquitto client = plugin_client("dev1", f & F_ADMIN      ? "admin"
                                                    : f & F_USERNAME ? "alice"
                                                                     : NULL);
    mosquitto_property *props = NULL;
    const char *reply = NULL;
    if (f & F_REPLY) {
        reply = f & F_BAD_REPLY ? "reply/#" : "reply/dev1";
        FUZZ_CHECK(!mosquitto_property_add_string(&props, MQTT_PROP_RESPONSE_TOPIC, reply),
                   "property");
    }
    if (f & F_CORR) {
        FUZZ_CHECK(!mosquitto_property_add_binary(&props, MQTT_PROP_CORRELATION_DATA, "c\0rr", 4),
                   "property");
    }
    /* The payload in a buffer of its own size, as the broker holds it. */
    uint8_t *payload = malloc(size - 1 ? size - 1 : 1);
    FUZZ_CHECK(payload, "out of memory");
    memcpy(payload, data + 1, size - 1);
    struct mosquitto_evt_control ev = {.client = &client,
                                       .topic = CHAT_PROTO_CONTROL_TOPIC,
                                       .payload = payload,
                                       .payloadlen = (uint32_t)(size - 1),
                                       .properties = props};

    FUZZ_CHECK(chat_on_control(&fx->pl, &ev) == MOSQ_ERR_SUCCESS, "a request refused");
    /* Any replay pages the request started, then one answer (the budget is
     * fresh for every input). */
    bool good_reply = (f & F_REPLY) && !(f & F_BAD_REPLY);
    size_t n =
        fuzz_check_answers("dev1", good_reply ? reply : NULL, f & F_CORR ? "c\0rr" : NULL, 4);
    FUZZ_CHECK(n >= 1, "no answer");
    mosquitto_property_free_all(&props);
    free(payload);
    return 0;
}
