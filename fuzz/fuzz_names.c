/* fuzz_names: names and topics from clients (proto/ and plugin/names.c).
 * The first byte picks what the rest is:
 *   0  a group name: chat_proto_group_error and chat_proto_utf8_valid
 *      against the rules written again here;
 *   1  JSON text: chat_proto_json_valid against json_check's reader;
 *   2  a topic (up to its first NUL): chat_topic_parse's kinds, then the
 *      topic through the plugin's events as a publish, a subscription, an
 *      unsubscription and a delivery (bit 3 of the first byte: behind other
 *      access checkers), each answered in strict JSON;
 *   3  a username, a NUL, a client id: the member chat_member names.
 */
#include <string.h>

#include "fuzz.h"
#include "json_check.h"

/* Short replays: a subscription pages the group's history to the client. */
static const char *const opts[] = {"page_size=3", "replay_window=2", NULL};

/* One UTF-8 sequence, written again from RFC 3629: its length, 0 when
 * malformed. */
static size_t utf8_seq(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    size_t len;
    uint32_t v;
    if (c <= 0x7f) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, v = c & 0x07;
    } else {
        return 0;
    }
    if (n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        v = v << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
        (v >= 0xd800 && v <= 0xdfff)) {
        return 0;
    }
    *cp = v;
    return len;
}

static bool utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t k = utf8_seq(s + i, n - i, &cp);
        if (k == 0 || cp == 0) {
            return false;
        }
        i += k;
    }
    return true;
}

static const char *group_rule(const uint8_t *s, size_t n)
{
    if (n == 0) {
        return "group name is empty";
    }
    if (n > 128) {
        return "group name is longer than 128 bytes";
    }
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t k = utf8_seq(s + i, n - i, &cp);
        if (k == 0) {
            return "group name is not valid UTF-8";
        }
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
            return "group name contains a control character";
        }
        if (cp == '/' || cp == '+' || cp == '#' || cp == '$') {
            return "group name contains one of / + # $";
        }
        i += k;
    }
    return NULL;
}

static void names(const uint8_t *s, size_t n)
{
    const char *got = chat_proto_group_error((const char *)s, n);
    const char *want = group_rule(s, n);
    FUZZ_CHECK((!got && !want) || (got && want && !strcmp(got, want)), "\"%s\", expected \"%s\"",
               got ? got : "valid", want ? want : "valid");
    FUZZ_CHECK(chat_proto_utf8_valid((const char *)s, n) == utf8_ok(s, n), "UTF-8 of %zu bytes", n);
}

static void json(const uint8_t *s, size_t n)
{
    bool got = chat_proto_json_valid((const char *)s, n);
    /* json_check also requires UTF-8, which chat_proto_json_valid leaves to
     * chat_proto_utf8_valid. */
    if (chat_proto_utf8_valid((const char *)s, n)) {
        FUZZ_CHECK(got == json_strict((const char *)s, n), "chat_proto_json_valid says %d", got);
    }
}

/* The topic through the plugin: every answer strict JSON, to the client. */
static void topic_events(const char *topic, bool defer)
{
    struct plugin_fixture *fx = fuzz_fixture(opts);
    static bool seeded;
    if (!seeded) {
        FUZZ_CHECK(chat_store_member_add(fx->pl.store, "room1", "alice", NULL) == CHAT_OK, "join");
        seeded = true;
    }
    fuzz_fixture_fresh(fx);
    stub_reset();
    chat_broker_set_test(&fx->pl, !defer, false, defer ? stub_acl_check : NULL);
    struct mosquitto alice = plugin_client("alice-phone", "alice");
    char *t = strdup(topic);
    char *payload = strdup("{\"body\":\"hi\"}");
    FUZZ_CHECK(t && payload, "out of memory");
    struct mosquitto_evt_message msg = {
        .client = &alice, .topic = t, .payload = payload, .payloadlen = 13, .qos = 1};
    int rc = chat_on_message(&fx->pl, &msg);
    if (msg.payload != payload) {
        /* Stored: the broker now delivers the envelope, and frees it. */
        FUZZ_CHECK(rc == MOSQ_ERR_SUCCESS, "a payload replaced, then refused");
        mosquitto_free(msg.payload);
    }
    fuzz_check_answers("alice-phone", NULL, NULL, 0);
    static const int access[] = {MOSQ_ACL_SUBSCRIBE, MOSQ_ACL_READ, MOSQ_ACL_WRITE,
                                 MOSQ_ACL_UNSUBSCRIBE};
    size_t last_len = 0;
    const char *last = chat_envelope_cache_last(&fx->pl, &last_len);
    for (size_t i = 0; i < 4; i++) {
        struct mosquitto_evt_acl_check ev = {.client = &alice,
                                             .topic = topic,
                                             .payload = last ? last : "x",
                                             .payloadlen = last ? (uint32_t)last_len : 1,
                                             .access = access[i],
                                             .qos = 1};
        rc = chat_on_acl(&fx->pl, &ev);
        FUZZ_CHECK(rc == MOSQ_ERR_SUCCESS || rc == MOSQ_ERR_PLUGIN_DEFER ||
                       rc == MOSQ_ERR_ACL_DENIED,
                   "access check answered %d", rc);
        fuzz_check_answers("alice-phone", NULL, NULL, 0);
    }
    free(payload);
    free(t);
}

static void topic(const uint8_t *s, size_t n, bool defer)
{
    char *t = malloc(n + 1);
    FUZZ_CHECK(t, "out of memory");
    memcpy(t, s, n);
    t[n] = '\0';
    n = strlen(t);
    struct chat_config cfg = {.topic_prefix = "chat", .prefix_len = 4};
    const char *g = NULL;
    size_t glen = 0;
    enum chat_topic_kind k = chat_topic_parse(&cfg, t, &g, &glen);
    bool under = n > 5 && !strncmp(t, "chat/", 5);
    const char *rest = t + 5;
    const char *slash = under ? strchr(rest, '/') : NULL;
    switch (k) {
    case CHAT_TOPIC_NONE:
        FUZZ_CHECK(!under && strcmp(t, "chat/") != 0, "\"%s\" is not ours?", t);
        break;
    case CHAT_TOPIC_GROUP:
        FUZZ_CHECK((under || !strcmp(t, "chat/")) && !slash && g == t + 5 && glen == n - 5,
                   "\"%s\" as a group", t);
        break;
    case CHAT_TOPIC_ACK:
        FUZZ_CHECK(under && slash && !strcmp(slash, "/ack") && g == rest &&
                       glen == (size_t)(slash - rest),
                   "\"%s\" as an ack", t);
        break;
    case CHAT_TOPIC_READ:
        FUZZ_CHECK(under && slash && !strcmp(slash, "/read") && g == rest &&
                       glen == (size_t)(slash - rest),
                   "\"%s\" as a read marker", t);
        break;
    case CHAT_TOPIC_BAD:
        FUZZ_CHECK(under && slash && strcmp(slash, "/ack") != 0 && strcmp(slash, "/read") != 0,
                   "\"%s\" as a bad topic", t);
        break;
    }
    topic_events(t, defer);
    free(t);
}

static void member(const uint8_t *s, size_t n)
{
    char *buf = malloc(n + 2);
    FUZZ_CHECK(buf, "out of memory");
    memcpy(buf, s, n);
    buf[n] = buf[n + 1] = '\0';
    const char *user = buf;
    const char *id = buf + strlen(buf) + 1;
    for (int verified = 0; verified < 2; verified++) {
        for (int with_user = 0; with_user < 2; with_user++) {
            struct mosquitto c = {.id = id[0] ? id : NULL, .username = with_user ? user : NULL};
            char out[CHAT_MEMBER_BUF];
            const char *why = chat_member_name(verified, verified, c.username, c.id, out);
            const char *m = why ? NULL : out;
            bool named = c.username && c.username[0];
            const char *name = named ? c.username : c.id;
            if (!m) {
                FUZZ_CHECK(why, "refused without a reason");
                continue;
            }
            FUZZ_CHECK(name && strlen(m) <= CHAT_STORE_MAX_NAME, "member of %zu bytes", strlen(m));
            if (!named && verified) {
                FUZZ_CHECK(m[0] == '~' && !strcmp(m + 1, name), "\"%s\" for id \"%s\"", m, name);
            } else {
                FUZZ_CHECK(!strcmp(m, name), "\"%s\" for \"%s\"", m, name);
                FUZZ_CHECK(!(verified && named && m[0] == '~'), "a user passes for no user");
            }
        }
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    switch (data[0] & 3) {
    case 0:
        names(data + 1, size - 1);
        break;
    case 1:
        json(data + 1, size - 1);
        break;
    case 2:
        topic(data + 1, size - 1, data[0] & 8);
        break;
    default:
        member(data + 1, size - 1);
        break;
    }
    return 0;
}
