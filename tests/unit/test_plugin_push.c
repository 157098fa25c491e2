/* Unit tests of the push modules below the broker: RFC 8291 encryption
 * against the RFC's Appendix A and against the test server's own
 * decryption (tests/support/push_server.c), base64url, the URL rules of
 * push_url.c (normal form, push_allow prefixes, addresses at connect
 * time), the push command's fields (push_reg.c) and the notification
 * bodies; and that the test server serves as many connections as a test
 * makes. Tables of named cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "push_crypto.h"
#include "push_reg.h"
#include "push_server.h"
#include "push_url.h"

/* ===========================================================================
 * RFC 8291
 * ========================================================================= */

/* RFC 8291, Appendix A: every input the example fixes, and its result. */
#define RFC_PLAIN "When I grow up, I want to be a watermelon"
#define RFC_AS_PRIVATE "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
#define RFC_AS_PUBLIC                                                                              \
    "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
#define RFC_UA_PRIVATE "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
#define RFC_UA_PUBLIC                                                                              \
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
#define RFC_SALT "DGv6ra1nlYgDCS1FRnbzlw"
#define RFC_AUTH "BTBZMqHH6r4Tts7J_aSIgg"
#define RFC_BODY                                                                                   \
    "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAm"  \
    "S6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_"  \
    "Qulcy4a-fN"

static void decode_exact(const char *b64, uint8_t *out, size_t want)
{
    size_t n = 0;
    assert_true(push_b64url_decode(b64, out, want, &n));
    assert_int_equal(n, want);
}

static void test_rfc8291_appendix_a(void **state)
{
    push_crypto_fixed fixed;
    uint8_t ua_public[PUSH_KEY_LEN], auth[PUSH_AUTH_LEN], want[256], *body = NULL;
    size_t want_len = 0, len = 0;
    (void)state;
    decode_exact(RFC_AS_PRIVATE, fixed.as_private, sizeof(fixed.as_private));
    decode_exact(RFC_AS_PUBLIC, fixed.as_public, sizeof(fixed.as_public));
    decode_exact(RFC_SALT, fixed.salt, sizeof(fixed.salt));
    decode_exact(RFC_UA_PUBLIC, ua_public, sizeof(ua_public));
    decode_exact(RFC_AUTH, auth, sizeof(auth));
    assert_true(push_b64url_decode(RFC_BODY, want, sizeof(want), &want_len));

    assert_true(
        push_crypto_encrypt(ua_public, auth, RFC_PLAIN, strlen(RFC_PLAIN), &fixed, &body, &len));
    assert_int_equal(len, strlen(RFC_PLAIN) + PUSH_CRYPTO_OVERHEAD);
    assert_int_equal(len, want_len);
    assert_memory_equal(body, want, len);
    free(body);
}

/* The test server's decryption reads the RFC's body and the plugin's. */
static void test_rfc8291_decrypt(void **state)
{
    uint8_t ua_private[32], ua_public[PUSH_KEY_LEN], auth[PUSH_AUTH_LEN], body[256];
    size_t len = 0, plen = 0;
    char err[256] = "";
    (void)state;
    decode_exact(RFC_UA_PRIVATE, ua_private, sizeof(ua_private));
    decode_exact(RFC_UA_PUBLIC, ua_public, sizeof(ua_public));
    decode_exact(RFC_AUTH, auth, sizeof(auth));
    assert_true(push_b64url_decode(RFC_BODY, body, sizeof(body), &len));
    char *plain = ts_push_decrypt(body, len, ua_private, ua_public, auth, &plen, err, sizeof(err));
    if (!plain) {
        fail_msg("the RFC's body does not decrypt: %s", err);
    }
    assert_string_equal(plain, RFC_PLAIN);
    free(plain);
    /* a changed byte of the record fails the tag */
    body[len - 1] ^= 1;
    assert_null(ts_push_decrypt(body, len, ua_private, ua_public, auth, &plen, err, sizeof(err)));
}

static void test_crypto_round_trip(void **state)
{
    static const size_t sizes[] = {0, 1, 41, 1000, PUSH_RECORD_SIZE - 17};
    ts_push_keys k;
    (void)state;
    ts_push_keys_new(&k);
    assert_true(push_crypto_key_valid(k.pub));
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *plain = malloc(sizes[i] + 1);
        uint8_t *body = NULL, *again = NULL;
        size_t len = 0, len2 = 0, plen = 0;
        char err[256] = "";
        for (size_t j = 0; j < sizes[i]; j++) {
            plain[j] = (char)('a' + j % 26);
        }
        plain[sizes[i]] = '\0';
        assert_true(push_crypto_encrypt(k.pub, k.auth, plain, sizes[i], NULL, &body, &len));
        assert_int_equal(len, sizes[i] + PUSH_CRYPTO_OVERHEAD);
        char *out = ts_push_decrypt(body, len, k.priv, k.pub, k.auth, &plen, err, sizeof(err));
        if (!out) {
            fail_msg("%zu bytes: %s", sizes[i], err);
        }
        assert_int_equal(plen, sizes[i]);
        assert_memory_equal(out, plain, plen);
        /* a fresh key and salt each time */
        assert_true(push_crypto_encrypt(k.pub, k.auth, plain, sizes[i], NULL, &again, &len2));
        assert_memory_not_equal(body, again, 16 + 4 + 1 + 65);
        free(out);
        free(body);
        free(again);
        free(plain);
    }
    /* one record holds it all, or nothing is sent */
    uint8_t *body = NULL;
    size_t len = 0;
    char big[PUSH_RECORD_SIZE];
    memset(big, 'x', sizeof(big));
    assert_false(push_crypto_encrypt(k.pub, k.auth, big, PUSH_RECORD_SIZE - 16, NULL, &body, &len));
    assert_null(body);
    /* a point off the curve is refused */
    uint8_t bad[PUSH_KEY_LEN];
    memcpy(bad, k.pub, sizeof(bad));
    bad[40] ^= 1;
    assert_false(push_crypto_key_valid(bad));
    assert_false(push_crypto_encrypt(bad, k.auth, "x", 1, NULL, &body, &len));
}

static void test_b64url(void **state)
{
    static const struct {
        const char *in;
        bool ok;
        const char *out;
    } cases[] = {
        {"", true, ""},
        {"YQ", true, "a"},
        {"YWI", true, "ab"},
        {"YWJj", true, "abc"},
        {"YQ==", true, "a"},
        {"YWI=", true, "ab"},
        {"-_-_", true, "\xfb\xff\xbf"},
        {"Y", false, NULL},     /* no encoding has one char left */
        {"YQ===", false, NULL}, /* too much padding */
        {"Y+Q", false, NULL},   /* base64's alphabet, not base64url's */
        {"Y/Q", false, NULL},
        {"YQ=a", false, NULL},
        {"Y Q", false, NULL},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t out[16];
        size_t n = 0;
        bool ok = push_b64url_decode(cases[i].in, out, sizeof(out), &n);
        if (ok != cases[i].ok) {
            fail_msg("\"%s\": %s, want %s", cases[i].in, ok ? "decoded" : "refused",
                     cases[i].ok ? "decoded" : "refused");
        }
        if (ok) {
            assert_int_equal(n, strlen(cases[i].out));
            assert_memory_equal(out, cases[i].out, n);
        }
    }
    uint8_t two[2];
    size_t n = 0;
    assert_false(push_b64url_decode("YWJj", two, sizeof(two), &n)); /* beyond cap */
}

/* ===========================================================================
 * URLs
 * ========================================================================= */

static void test_url_normalize(void **state)
{
    static const struct {
        const char *in;
        const char *out; /* NULL: refused */
        bool loopback;
    } cases[] = {
        {"https://push.example/up", "https://push.example/up", false},
        {"https://PUSH.Example:443/up?x=1", "https://push.example/up?x=1", false},
        {"https://push.example", "https://push.example/", false},
        {"https://push.example:8443/a/./b/../c", "https://push.example:8443/a/c", false},
        {"http://127.0.0.1:8080/up", "http://127.0.0.1:8080/up", true},
        {"http://127.9.9.9/up", "http://127.9.9.9/up", true},
        {"http://[::1]:99/up", "http://[::1]:99/up", true},
        {"https://127.0.0.1/up", "https://127.0.0.1/up", true},
        {"http://push.example/up", NULL, false}, /* http only to loopback */
        {"http://localhost/up", NULL, false},    /* a name is not loopback */
        {"http://10.0.0.1/up", NULL, false},
        {"https://user@push.example/up", NULL, false},
        {"https://user:pw@push.example/up", NULL, false},
        {"https://push.example/up#frag", NULL, false},
        {"https://evil.example#@push.example/", NULL, false},
        {"ftp://push.example/up", NULL, false},
        {"file:///etc/passwd", NULL, false},
        {"gopher://push.example/", NULL, false},
        {"https://push.example/up/%2e%2e/admin", NULL, false},
        {"https://push.example/up/%2F..", NULL, false},
        {"https://push.example/up/%252e%252e/admin", NULL, false}, /* decoded twice */
        {"https://push.example/up/..;/admin", NULL, false},        /* Tomcat's path parameter */
        {"https://push.example/up/.;x/a", NULL, false},
        {"https://push.example/up/a;b/c..;", "https://push.example/up/a;b/c..;", false},
        {"https://push.example/a b", NULL, false},
        {"https://push.example\\@evil/", NULL, false},
        {"https://pu\xc3\xa9sh.example/", NULL, false}, /* not punycode */
        {"https://[fe80::1%25eth0]/", NULL, false},     /* a zone */
        {"//push.example/up", NULL, false},
        {"push.example/up", NULL, false},
        {"", NULL, false},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[PUSH_URL_MAX + 1];
        bool loopback = !cases[i].loopback;
        const char *why = push_url_normalize(cases[i].in, out, &loopback);
        if (!cases[i].out) {
            if (!why) {
                fail_msg("\"%s\" accepted as \"%s\"", cases[i].in, out);
            }
            continue;
        }
        if (why) {
            fail_msg("\"%s\" refused: %s", cases[i].in, why);
        }
        assert_string_equal(out, cases[i].out);
        assert_int_equal(loopback, cases[i].loopback);
    }
    char long_url[PUSH_URL_MAX + 64];
    bool lb = false;
    char out[PUSH_URL_MAX + 1];
    snprintf(long_url, sizeof(long_url), "https://push.example/%0*d", PUSH_URL_MAX - 20, 0);
    assert_non_null(push_url_normalize(long_url, out, &lb));
}

static void test_url_allowed(void **state)
{
    char *allow[] = {"https://push.example/", "http://127.0.0.1:9/up/", NULL};
    static const struct {
        const char *url;
        bool allowed;
    } cases[] = {
        {"https://push.example/", true},           {"https://push.example/up/abc?x", true},
        {"https://Push.Example:443/abc", true},    {"https://push.example.evil/", false},
        {"https://push.example:8443/", false},     {"https://evil.example/push.example/", false},
        {"http://127.0.0.1:9/up/a", true},         {"http://127.0.0.1:9/upx", false},
        {"http://127.0.0.1:9/up/../admin", false}, {"http://127.0.0.1:10/up/a", false},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char norm[PUSH_URL_MAX + 1];
        bool lb = false;
        bool ok =
            push_url_normalize(cases[i].url, norm, &lb) == NULL && push_url_allowed(allow, norm);
        if (ok != cases[i].allowed) {
            fail_msg("\"%s\" %s", cases[i].url, ok ? "allowed" : "refused");
        }
    }
    assert_false(push_url_allowed(NULL, "https://push.example/"));
}

static void test_url_addresses(void **state)
{
    static const struct {
        const char *addr;
        bool loopback_ok;
        bool ok;
    } cases[] = {
        {"127.0.0.1", true, true},
        {"127.0.0.1", false, false},
        {"127.1.2.3", false, false},
        {"0.0.0.0", true, false},
        {"169.254.169.254", true, false},
        {"224.0.0.1", true, false},
        {"10.1.2.3", false, true},
        {"192.168.1.1", false, true},
        {"93.184.216.34", false, true},
        {"::1", true, true},
        {"::1", false, false},
        {"::", true, false},
        {"fe80::1", true, false},
        {"ff02::1", true, false},
        {"::ffff:127.0.0.1", false, false},
        {"::ffff:127.0.0.1", true, true},
        {"::ffff:169.254.169.254", true, false},
        {"2001:db8::1", false, true},
        {"::127.0.0.1", false, false}, /* IPv4-compatible */
        {"::169.254.169.254", true, false},
        {"::10.1.2.3", false, true},
        {"64:ff9b::127.0.0.1", false, false}, /* NAT64 */
        {"64:ff9b::a9fe:a9fe", true, false},
        {"64:ff9b::93.184.216.34", false, true},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        if (strchr(cases[i].addr, ':')) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            a->sin6_family = AF_INET6;
            assert_int_equal(inet_pton(AF_INET6, cases[i].addr, &a->sin6_addr), 1);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            a->sin_family = AF_INET;
            assert_int_equal(inet_pton(AF_INET, cases[i].addr, &a->sin_addr), 1);
        }
        bool ok = push_url_addr_ok((struct sockaddr *)&ss, cases[i].loopback_ok);
        if (ok != cases[i].ok) {
            fail_msg("%s (loopback %s): %s", cases[i].addr, cases[i].loopback_ok ? "ok" : "not ok",
                     ok ? "allowed" : "refused");
        }
    }
}

/* ===========================================================================
 * The command's fields, the stored form, the bodies
 * ========================================================================= */

static void test_reg_from_command(void **state)
{
    char *allow[] = {"https://push.example/", "http://127.0.0.1:9/", NULL};
    struct push_webhook hook = {"ops", "https://hooks.example/x", false};
    struct push_opts o = {.allow = allow, .hooks = &hook, .nhooks = 1};
    ts_push_keys k;
    char with_keys[512];
    static const struct {
        const char *json;
        const char *error; /* NULL: accepted; else the start of the error */
        int kind;
        bool query;
    } cases[] = {
        {"{\"command\":\"push\"}", NULL, PUSH_KIND_NONE, true},
        {"{\"command\":\"push\",\"kind\":\"none\"}", NULL, PUSH_KIND_NONE, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"https://push.example/u\"}",
         NULL, PUSH_KIND_UNIFIEDPUSH, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"https://evil.example/u\"}",
         "endpoint not allowed", 0, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"https://push.example.evil/"
         "\"}",
         "endpoint not allowed", 0, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"http://push.example/u\"}",
         "bad push registration: the URL must be https", 0, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\"}",
         "bad push registration: endpoint is "
         "missing",
         0, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"https://push.example/u\","
         "\"device\":\"other\"}",
         "bad push registration: a device registers itself only", 0, false},
        {"{\"command\":\"push\",\"kind\":\"none\",\"device\":\"other\"}",
         "bad push registration: a device registers itself only", 0, false},
        {"{\"command\":\"push\",\"device\":\"other\"}",
         "bad push registration: a device registers itself only", 0, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"https://push.example/u\","
         "\"p256dh\":\"AAAA\"}",
         "bad push registration: p256dh and auth come together", 0, false},
        {"{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"https://push.example/u\","
         "\"p256dh\":\"AAAA\",\"auth\":\"AAAAAAAAAAAAAAAAAAAAAA\"}",
         "bad push registration: p256dh must be", 0, false},
        {"{\"command\":\"push\",\"kind\":\"matrix\",\"url\":\"https://push.example/_matrix/push/"
         "v1/notify\",\"app_id\":\"com.example\",\"pushkey\":\"k1\"}",
         NULL, PUSH_KIND_MATRIX, false},
        {"{\"command\":\"push\",\"kind\":\"matrix\",\"url\":\"https://push.example/n\","
         "\"pushkey\":\"k1\"}",
         "bad push registration: app_id is missing", 0, false},
        {"{\"command\":\"push\",\"kind\":\"matrix\",\"url\":\"https://push.example/n\","
         "\"app_id\":\"" /* 65 bytes */
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"pushkey\":\"k\"}",
         "bad push registration: app_id must be", 0, false},
        {"{\"command\":\"push\",\"kind\":\"webhook\",\"name\":\"ops\"}", NULL, PUSH_KIND_WEBHOOK,
         false},
        {"{\"command\":\"push\",\"kind\":\"webhook\",\"name\":\"nope\"}",
         "bad push registration: no such webhook", 0, false},
        {"{\"command\":\"push\",\"kind\":\"webhook\",\"url\":\"https://push.example/\"}",
         "bad push registration: unknown field url", 0, false},
        {"{\"command\":\"push\",\"kind\":\"apns\"}", "bad push registration: kind must be", 0,
         false},
        {"{\"command\":\"push\",\"kind\":7}", "bad push registration: kind must be", 0, false},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *c = cJSON_Parse(cases[i].json);
        struct push_reg reg;
        bool query = !cases[i].query;
        assert_non_null(c);
        const char *why = push_reg_from_command(c, &o, &reg, &query);
        cJSON_Delete(c);
        if (cases[i].error) {
            if (!why || strncmp(why, cases[i].error, strlen(cases[i].error)) != 0) {
                fail_msg("%s: %s, want \"%s...\"", cases[i].json, why ? why : "accepted",
                         cases[i].error);
            }
            continue;
        }
        if (why) {
            fail_msg("%s refused: %s", cases[i].json, why);
        }
        assert_int_equal(reg.kind, cases[i].kind);
        assert_int_equal(query, cases[i].query);
    }

    /* keys: decoded, and the round trip of the stored form keeps them */
    ts_push_keys_new(&k);
    snprintf(with_keys, sizeof(with_keys),
             "{\"command\":\"push\",\"kind\":\"unifiedpush\",\"endpoint\":\"http://127.0.0.1:9/u\","
             "\"p256dh\":\"%s\",\"auth\":\"%s\"}",
             k.p256dh, k.auth_b64);
    cJSON *c = cJSON_Parse(with_keys);
    struct push_reg reg, back;
    bool query = true;
    assert_null(push_reg_from_command(c, &o, &reg, &query));
    cJSON_Delete(c);
    assert_true(reg.encrypted);
    assert_true(reg.loopback);
    assert_memory_equal(reg.p256dh, k.pub, PUSH_KEY_LEN);
    size_t len = 0;
    char *stored = push_reg_encode(&reg, &len);
    assert_non_null(stored);
    assert_true(push_reg_decode(stored, len, &back));
    assert_int_equal(back.kind, PUSH_KIND_UNIFIEDPUSH);
    assert_string_equal(back.url, "http://127.0.0.1:9/u");
    assert_true(back.loopback && back.encrypted);
    assert_memory_equal(back.auth, k.auth, PUSH_AUTH_LEN);
    bool lb = false;
    assert_string_equal(push_reg_target(&back, &o, &lb), "http://127.0.0.1:9/u");
    cJSON_free(stored);
    assert_false(push_reg_decode("{\"kind\":\"apns\"}", 15, &back));
    assert_false(push_reg_decode("not json", 8, &back));
    /* a webhook's URL is the operator's, looked up when sent */
    struct push_reg wh = {.kind = PUSH_KIND_WEBHOOK};
    snprintf(wh.name, sizeof(wh.name), "ops");
    assert_string_equal(push_reg_target(&wh, &o, &lb), "https://hooks.example/x");
    snprintf(wh.name, sizeof(wh.name), "gone");
    assert_null(push_reg_target(&wh, &o, &lb));
}

static void test_note_bodies(void **state)
{
    char text[PUSH_NOTE_TEXT_MAX + 10];
    struct push_note n = {"room1", 42, "bob", 3, "hello", "alice", "phone"};
    struct push_reg reg = {.kind = PUSH_KIND_MATRIX};
    size_t len = 0;
    (void)state;
    char *body = push_note_json(&n, false, false, 4000, &len);
    assert_string_equal(body, "{\"group\":\"room1\",\"id\":42,\"from\":\"bob\",\"unread\":3}");
    assert_int_equal(len, strlen(body));
    cJSON_free(body);
    body = push_note_json(&n, true, true, 4000, &len);
    assert_string_equal(body, "{\"group\":\"room1\",\"id\":42,\"from\":\"bob\",\"unread\":3,"
                              "\"member\":\"alice\",\"device\":\"phone\",\"body\":\"hello\"}");
    cJSON_free(body);
    /* a long text is cut at a character, and says so */
    memset(text, 'x', sizeof(text));
    text[PUSH_NOTE_TEXT_MAX - 1] = '\xc3';
    text[PUSH_NOTE_TEXT_MAX] = '\xa9';
    text[sizeof(text) - 1] = '\0';
    n.text = text;
    body = push_note_json(&n, true, false, 4000, &len);
    cJSON *o = cJSON_Parse(body);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "body");
    assert_true(cJSON_IsString(b));
    assert_int_equal(strlen(b->valuestring), PUSH_NOTE_TEXT_MAX - 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "truncated")));
    cJSON_Delete(o);
    cJSON_free(body);
    assert_null(push_note_json(&n, true, false, 100, &len)); /* over max */
    /* Matrix */
    n.text = "hi";
    snprintf(reg.app_id, sizeof(reg.app_id), "com.example.app");
    snprintf(reg.pushkey, sizeof(reg.pushkey), "key-1");
    body = push_note_matrix(&n, true, &reg, 4000, &len);
    o = cJSON_Parse(body);
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(o, "notification");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(note, "event_id")->valuestring,
                        "room1/42");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(note, "room_id")->valuestring, "room1");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(note, "sender")->valuestring, "bob");
    assert_int_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(note, "counts"), "unread")
            ->valuedouble,
        3);
    const cJSON *dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(note, "devices"), 0);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(dev, "app_id")->valuestring,
                        "com.example.app");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(dev, "pushkey")->valuestring, "key-1");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(note, "content"), "body")
            ->valuestring,
        "hi");
    cJSON_Delete(o);
    cJSON_free(body);
    body = push_note_matrix(&n, false, &reg, 4000, &len);
    assert_null(strstr(body, "content"));
    cJSON_free(body);
}

/* ===========================================================================
 * The test server
 * ========================================================================= */

/* One connection to port: a discovery GET of path, answered 200. */
static void get_once(int port, const char *path)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct timeval tv = {.tv_sec = 10};
    char req[256], buf[64];
    size_t have = 0;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    /* the status line, or what came before the connection closed */
    while (have < 12) {
        ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (got <= 0) {
            break;
        }
        have += (size_t)got;
    }
    buf[have] = '\0';
    close(fd);
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0) {
        fail_msg("a connection to the test server got \"%s\"", buf);
    }
}

/* More connections, one after another, than the server has slots for
 * (64) at a time: each is served, since a closed one frees its slot. */
static void test_server_connections(void **state)
{
    (void)state;
    ts_push_server *s = ts_push_server_start();
    ts_push_endpoint(s, "/up/many", TS_PUSH_UNIFIEDPUSH, NULL);
    for (int i = 0; i < 200; i++) {
        get_once(ts_push_server_port(s), "/up/many");
    }
    ts_push_arrival *a = ts_push_wait(s, "/up/many", 200, 10000);
    assert_non_null(a);
    ts_push_arrival_free(a);
    ts_push_server_stop(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc8291_appendix_a), cmocka_unit_test(test_rfc8291_decrypt),
        cmocka_unit_test(test_crypto_round_trip),  cmocka_unit_test(test_b64url),
        cmocka_unit_test(test_url_normalize),      cmocka_unit_test(test_url_allowed),
        cmocka_unit_test(test_url_addresses),      cmocka_unit_test(test_reg_from_command),
        cmocka_unit_test(test_note_bodies),        cmocka_unit_test(test_server_connections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
