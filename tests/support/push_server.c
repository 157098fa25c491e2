/* push_server.c: the loopback push server of the push tests (see
 * push_server.h): a UnifiedPush server, a Matrix push gateway and a webhook
 * receiver, with RFC 8291 decryption of its own. */
#include "push_server.h"
#include "util.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_ENDPOINTS 64
#define MAX_ANSWERS 16
#define MAX_REJECTED 8
#define MAX_CONNS 64
#define HEAD_MAX 16384
#define BODY_MAX 65536

struct endpoint {
    char path[256];
    ts_push_kind kind;
    bool has_keys;
    ts_push_keys keys;
    int discovery;            /* 200, another status, or 0 (not UnifiedPush's answer) */
    int answers[MAX_ANSWERS]; /* queued statuses */
    int retry[MAX_ANSWERS];   /* their Retry-After, -1 none */
    int nanswers;
    bool hang;
    char rejected[MAX_REJECTED][520];
    int nrejected;
};

struct conn {
    ts_push_server *s;
    int fd;
    pthread_t thread;
    bool used;
    bool done; /* its thread has ended: the accepter joins it and takes the slot */
};

struct ts_push_server {
    int fd;
    int port;
    pthread_t accepter;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* arrivals, hang changes, stop */
    bool stop;
    struct endpoint ep[MAX_ENDPOINTS];
    int nep;
    ts_push_arrival *arrivals;
    size_t narrivals, cap;
    struct conn conns[MAX_CONNS];
};

/* ===========================================================================
 * base64url and keys
 * ========================================================================= */

void ts_b64url(const uint8_t *in, size_t len, char *out, size_t cap)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 6 && o + 1 < cap) {
            bits -= 6;
            out[o++] = abc[(acc >> bits) & 63];
        }
    }
    if (bits > 0 && o + 1 < cap) {
        out[o++] = abc[(acc << (6 - bits)) & 63];
    }
    out[o] = '\0';
}

void ts_push_keys_new(ts_push_keys *k)
{
    size_t len = 0;
    BIGNUM *d = NULL;
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (!key ||
        EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, k->pub,
                                        sizeof(k->pub), &len) != 1 ||
        len != sizeof(k->pub) || EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &d) != 1 ||
        BN_bn2binpad(d, k->priv, sizeof(k->priv)) != (int)sizeof(k->priv) ||
        RAND_bytes(k->auth, sizeof(k->auth)) != 1) {
        FAILF("cannot draw a P-256 key pair");
    }
    BN_free(d);
    EVP_PKEY_free(key);
    ts_b64url(k->pub, sizeof(k->pub), k->p256dh, sizeof(k->p256dh));
    ts_b64url(k->auth, sizeof(k->auth), k->auth_b64, sizeof(k->auth_b64));
}

/* ===========================================================================
 * RFC 8291 decryption (the receiving user agent's side, RFC 8291 section
 * 3.4 and RFC 8188 section 2), with OpenSSL's HKDF
 * ========================================================================= */

static EVP_PKEY *p256(const uint8_t *pub, const uint8_t *priv)
{
    EVP_PKEY *key = NULL;
    BIGNUM *d = priv ? BN_bin2bn(priv, 32, NULL) : NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (bld && ctx &&
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, 65) &&
        (!priv || (d && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d))) &&
        (params = OSSL_PARAM_BLD_to_param(bld)) && EVP_PKEY_fromdata_init(ctx) > 0 &&
        EVP_PKEY_fromdata(ctx, &key, priv ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) <= 0) {
        key = NULL;
    }
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(d);
    EVP_PKEY_CTX_free(ctx);
    return key;
}

/* HKDF-SHA256 (extract and expand) through OpenSSL's KDF. */
static bool hkdf(const uint8_t *salt, size_t slen, const uint8_t *ikm, size_t ilen,
                 const uint8_t *info, size_t infolen, uint8_t *out, size_t olen)
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM params[5];
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, slen);
    params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ilen);
    params[3] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, infolen);
    params[4] = OSSL_PARAM_construct_end();
    bool ok = ctx && EVP_KDF_derive(ctx, out, olen, params) > 0;
    EVP_KDF_CTX_free(ctx);
    EVP_KDF_free(kdf);
    return ok;
}

char *ts_push_decrypt(const uint8_t *body, size_t len, const uint8_t priv[32],
                      const uint8_t pub[65], const uint8_t auth[16], size_t *out_len, char *err,
                      size_t cap)
{
    uint8_t secret[32], ikm[32], cek[16], nonce[12];
    uint8_t info[14 + 130];
    size_t slen = sizeof(secret);
    char *plain = NULL;
    EVP_PKEY *mine = NULL, *theirs = NULL;
    EVP_PKEY_CTX *dctx = NULL;
    EVP_CIPHER_CTX *c = NULL;

    if (len < 16 + 4 + 1) {
        snprintf(err, cap, "body of %zu bytes is shorter than the aes128gcm header", len);
        return NULL;
    }
    const uint8_t *salt = body;
    uint32_t rs = ((uint32_t)body[16] << 24) | ((uint32_t)body[17] << 16) |
                  ((uint32_t)body[18] << 8) | body[19];
    size_t idlen = body[20];
    if (idlen != 65 || len < 21 + idlen + 17) {
        snprintf(err, cap, "key id of %zu bytes (want 65) or no record", idlen);
        return NULL;
    }
    const uint8_t *as_pub = body + 21;
    const uint8_t *rec = body + 21 + idlen;
    size_t rlen = len - 21 - idlen;
    if (rlen > rs) {
        snprintf(err, cap, "record of %zu bytes is beyond the record size %u", rlen, rs);
        return NULL;
    }
    mine = p256(pub, priv);
    theirs = p256(as_pub, NULL);
    dctx = mine ? EVP_PKEY_CTX_new(mine, NULL) : NULL;
    if (!theirs || !dctx || EVP_PKEY_derive_init(dctx) <= 0 ||
        EVP_PKEY_derive_set_peer(dctx, theirs) <= 0 || EVP_PKEY_derive(dctx, secret, &slen) <= 0) {
        snprintf(err, cap, "ECDH with the sender's key failed");
        goto done;
    }
    memcpy(info, "WebPush: info", 14); /* with its NUL */
    memcpy(info + 14, pub, 65);
    memcpy(info + 79, as_pub, 65);
    if (!hkdf(auth, 16, secret, sizeof(secret), info, sizeof(info), ikm, sizeof(ikm)) ||
        !hkdf(salt, 16, ikm, sizeof(ikm), (const uint8_t *)"Content-Encoding: aes128gcm", 28, cek,
              sizeof(cek)) ||
        !hkdf(salt, 16, ikm, sizeof(ikm), (const uint8_t *)"Content-Encoding: nonce", 24, nonce,
              sizeof(nonce))) {
        snprintf(err, cap, "HKDF failed");
        goto done;
    }
    plain = malloc(rlen + 1);
    c = EVP_CIPHER_CTX_new();
    int n = 0, f = 0;
    if (!plain || !c || EVP_DecryptInit_ex(c, EVP_aes_128_gcm(), NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1 ||
        EVP_DecryptInit_ex(c, NULL, NULL, cek, nonce) != 1 ||
        EVP_DecryptUpdate(c, (uint8_t *)plain, &n, rec, (int)(rlen - 16)) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, 16, (void *)(rec + rlen - 16)) != 1 ||
        EVP_DecryptFinal_ex(c, (uint8_t *)plain + n, &f) != 1) {
        snprintf(err, cap, "AES-128-GCM: the record does not decrypt (wrong keys or tag)");
        free(plain);
        plain = NULL;
        goto done;
    }
    /* RFC 8188 2: padding is zeros after a delimiter; 2 ends the last record */
    size_t k = (size_t)(n + f);
    while (k > 0 && plain[k - 1] == 0) {
        k--;
    }
    if (k == 0 || plain[k - 1] != 2) {
        snprintf(err, cap, "the last record's delimiter is not 2");
        free(plain);
        plain = NULL;
        goto done;
    }
    plain[k - 1] = '\0';
    *out_len = k - 1;

done:
    EVP_CIPHER_CTX_free(c);
    EVP_PKEY_CTX_free(dctx);
    EVP_PKEY_free(mine);
    EVP_PKEY_free(theirs);
    return plain;
}

/* ===========================================================================
 * What a request must be
 * ========================================================================= */

static bool is_int(const cJSON *o, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(f) && f->valuedouble >= 0 &&
           f->valuedouble == (double)(int64_t)f->valuedouble;
}

static bool is_str(const cJSON *o, const char *name)
{
    return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, name));
}

/* The plugin's notification: {"group","id","from","unread"[,"body"]}, and
 * "member", "device" for a webhook. */
static void check_note(const char *body, bool webhook, char *err, size_t cap)
{
    cJSON *o = cJSON_Parse(body);
    if (!cJSON_IsObject(o)) {
        snprintf(err, cap, "notification is not a JSON object: %.100s", body);
    } else if (!is_str(o, "group") || !is_int(o, "id") || !is_str(o, "from") ||
               !is_int(o, "unread")) {
        snprintf(err, cap, "notification lacks group, id, from or unread: %.150s", body);
    } else if (cJSON_GetObjectItemCaseSensitive(o, "body") && !is_str(o, "body")) {
        snprintf(err, cap, "body is not a string");
    } else if (webhook && (!is_str(o, "member") || !is_str(o, "device"))) {
        snprintf(err, cap, "webhook notification lacks member or device");
    }
    cJSON_Delete(o);
}

/* The Push Gateway API v1, POST /_matrix/push/v1/notify: a notification
 * object whose devices (required, not empty) each have an app_id (at most
 * 64 characters) and a pushkey (at most 512 bytes); the optional fields,
 * when there, of their types. */
static void check_matrix(const char *body, char *err, size_t cap)
{
    static const char *const strings[] = {
        "event_id", "room_id", "type", "sender", "room_name", "room_alias", "sender_display_name"};
    cJSON *root = cJSON_Parse(body);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "notification");
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(n, "devices");
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(n, "counts");
    const cJSON *prio = cJSON_GetObjectItemCaseSensitive(n, "prio");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(n, "content");
    const cJSON *d = NULL;
    if (!cJSON_IsObject(n)) {
        snprintf(err, cap, "no notification object");
    } else if (!cJSON_IsArray(devices) || cJSON_GetArraySize(devices) == 0) {
        snprintf(err, cap, "devices must be a non-empty array");
    } else if (counts && (!cJSON_IsObject(counts) || !is_int(counts, "unread"))) {
        snprintf(err, cap, "counts must be an object with an integer unread");
    } else if (prio && (!cJSON_IsString(prio) || (strcmp(prio->valuestring, "high") != 0 &&
                                                  strcmp(prio->valuestring, "low") != 0))) {
        snprintf(err, cap, "prio must be high or low");
    } else if (content && !cJSON_IsObject(content)) {
        snprintf(err, cap, "content must be an object");
    }
    for (size_t i = 0; !err[0] && cJSON_IsObject(n) && i < sizeof(strings) / sizeof(strings[0]);
         i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(n, strings[i]);
        if (f && !cJSON_IsString(f)) {
            snprintf(err, cap, "%s must be a string", strings[i]);
        }
    }
    cJSON_ArrayForEach(d, devices)
    {
        const cJSON *app = cJSON_GetObjectItemCaseSensitive(d, "app_id");
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(d, "pushkey");
        if (!err[0] && (!cJSON_IsString(app) || !cJSON_IsString(key) ||
                        strlen(app->valuestring) > 64 || strlen(key->valuestring) > 512)) {
            snprintf(err, cap, "a device needs app_id (<= 64) and pushkey (<= 512 bytes)");
        }
    }
    cJSON_Delete(root);
}

/* Whether the Matrix body names pushkey among its devices. */
static bool names_pushkey(const char *body, const char *pushkey)
{
    cJSON *root = cJSON_Parse(body);
    const cJSON *devices = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(root, "notification"), "devices");
    const cJSON *d = NULL;
    bool found = false;
    cJSON_ArrayForEach(d, devices)
    {
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(d, "pushkey");
        found = found || (cJSON_IsString(key) && !strcmp(key->valuestring, pushkey));
    }
    cJSON_Delete(root);
    return found;
}

/* ===========================================================================
 * Connections
 * ========================================================================= */

static struct endpoint *find_ep(ts_push_server *s, const char *path)
{
    for (int i = 0; i < s->nep; i++) {
        if (!strcmp(s->ep[i].path, path)) {
            return &s->ep[i];
        }
    }
    return NULL;
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) {
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool respond(int fd, int status, int retry_after, const char *body)
{
    char head[512];
    size_t blen = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nContent-Type: application/json\r\n",
                     status, blen);
    if (retry_after >= 0) {
        n += snprintf(head + n, sizeof(head) - (size_t)n, "Retry-After: %d\r\n", retry_after);
    }
    n += snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
    return write_all(fd, head, (size_t)n) && (!blen || write_all(fd, body, blen));
}

/* The end of a request's head in buf[0..len), or NULL. */
static char *head_end_of(char *buf, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i++) {
        if (!memcmp(buf + i, "\r\n\r\n", 4)) {
            return buf + i;
        }
    }
    return NULL;
}

/* Reads one request: head into head (NUL-terminated), body of
 * Content-Length bytes (malloc'd) into *body. False at the end of the
 * connection or on a malformed request. carry holds bytes read past the
 * last request. */
static bool read_request(int fd, char *buf, size_t *have, char **head_end, char **body,
                         size_t *blen)
{
    char *end = NULL;
    while (!(end = head_end_of(buf, *have))) {
        if (*have >= HEAD_MAX) {
            return false;
        }
        ssize_t r = recv(fd, buf + *have, HEAD_MAX - *have, 0);
        if (r <= 0) {
            return false;
        }
        *have += (size_t)r;
    }
    *end = '\0';
    *head_end = end + 4;
    size_t clen = 0;
    for (char *h = strstr(buf, "\r\n"); h; h = strstr(h + 2, "\r\n")) {
        if (!strncasecmp(h + 2, "Content-Length:", 15)) {
            clen = strtoul(h + 17, NULL, 10);
        }
    }
    if (clen > BODY_MAX) {
        return false;
    }
    *body = malloc(clen + 1);
    if (!*body) {
        return false;
    }
    size_t got = *have - (size_t)(*head_end - buf);
    if (got > clen) {
        got = clen;
    }
    memcpy(*body, *head_end, got);
    while (got < clen) {
        ssize_t r = recv(fd, *body + got, clen - got, 0);
        if (r <= 0) {
            free(*body);
            return false;
        }
        got += (size_t)r;
    }
    (*body)[clen] = '\0';
    *blen = clen;
    return true;
}

static void header_value(const char *head, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    out[0] = '\0';
    for (const char *h = strstr(head, "\r\n"); h; h = strstr(h + 2, "\r\n")) {
        if (!strncasecmp(h + 2, name, n) && h[2 + n] == ':') {
            const char *v = h + 3 + n;
            while (*v == ' ') {
                v++;
            }
            size_t len = strcspn(v, "\r");
            snprintf(out, cap, "%.*s", (int)(len < cap ? len : cap - 1), v);
            return;
        }
    }
}

static void record(ts_push_server *s, const ts_push_arrival *a)
{
    if (s->narrivals == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        ts_push_arrival *n = realloc(s->arrivals, cap * sizeof(*n));
        if (!n) {
            return;
        }
        s->arrivals = n;
        s->cap = cap;
    }
    s->arrivals[s->narrivals++] = *a;
    pthread_cond_broadcast(&s->cond);
}

/* Handles one request under the lock; fills a and what to answer. */
static void handle(ts_push_server *s, const char *head, char *body, size_t blen, ts_push_arrival *a,
                   int *status, int *retry_after, char *answer, size_t cap)
{
    struct endpoint *ep = NULL;
    sscanf(head, "%7s %255s", a->method, a->path);
    header_value(head, "Content-Encoding", a->encoding, sizeof(a->encoding));
    a->at_ms = ts_now_ms();
    a->body = body;
    a->len = blen;
    *retry_after = -1;
    answer[0] = '\0';
    ep = find_ep(s, a->path);
    while (ep && ep->hang && !s->stop) {
        pthread_cond_wait(&s->cond, &s->lock);
    }
    if (s->stop) {
        *status = 503;
        return;
    }
    if (!ep) {
        *status = 404;
        return;
    }
    if (!strcmp(a->method, "GET")) {
        if (ep->kind != TS_PUSH_UNIFIEDPUSH) {
            *status = 405;
        } else if (ep->discovery == 200) {
            *status = 200;
            snprintf(answer, cap, "{\"unifiedpush\":{\"version\":1}}");
        } else {
            *status = ep->discovery ? ep->discovery : 200;
            snprintf(answer, cap, "{\"status\":\"not a push server\"}");
        }
        return;
    }
    if (strcmp(a->method, "POST") != 0) {
        *status = 405;
        return;
    }
    bool aes = !strcasecmp(a->encoding, "aes128gcm");
    if (ep->kind == TS_PUSH_UNIFIEDPUSH && ep->has_keys != aes) {
        snprintf(a->error, sizeof(a->error), "Content-Encoding \"%s\" for an endpoint %s keys",
                 a->encoding, ep->has_keys ? "with" : "without");
    } else if (aes) {
        size_t plen = 0;
        char *plain = ts_push_decrypt((const uint8_t *)body, blen, ep->keys.priv, ep->keys.pub,
                                      ep->keys.auth, &plen, a->error, sizeof(a->error));
        if (plain) {
            free(body);
            a->body = plain;
            a->len = plen;
            a->encrypted = true;
        }
    }
    if (!a->error[0]) {
        if (ep->kind == TS_PUSH_MATRIX) {
            check_matrix(a->body, a->error, sizeof(a->error));
        } else {
            check_note(a->body, ep->kind == TS_PUSH_WEBHOOK, a->error, sizeof(a->error));
        }
    }
    if (ep->nanswers > 0) {
        *status = ep->answers[0];
        *retry_after = ep->retry[0];
        memmove(ep->answers, ep->answers + 1, (size_t)(ep->nanswers - 1) * sizeof(int));
        memmove(ep->retry, ep->retry + 1, (size_t)(ep->nanswers - 1) * sizeof(int));
        ep->nanswers--;
    } else if (a->error[0]) {
        *status = 400;
    } else {
        *status = ep->kind == TS_PUSH_UNIFIEDPUSH ? 201 : 200;
    }
    if (ep->kind == TS_PUSH_MATRIX && *status == 200) {
        size_t n = (size_t)snprintf(answer, cap, "{\"rejected\":[");
        int listed = 0;
        for (int i = 0; i < ep->nrejected; i++) {
            if (names_pushkey(a->body, ep->rejected[i])) {
                n += (size_t)snprintf(answer + n, cap - n, "%s\"%s\"", listed++ ? "," : "",
                                      ep->rejected[i]);
            }
        }
        snprintf(answer + n, cap - n, "]}");
    }
}

static void *serve(void *arg)
{
    struct conn *c = arg;
    ts_push_server *s = c->s;
    char *buf = malloc(HEAD_MAX + 1);
    size_t have = 0;
    while (buf) {
        char *head_end = NULL, *body = NULL, answer[1024];
        size_t blen = 0;
        int status = 0, retry_after = -1;
        if (!read_request(c->fd, buf, &have, &head_end, &body, &blen)) {
            break;
        }
        ts_push_arrival a;
        memset(&a, 0, sizeof(a));
        pthread_mutex_lock(&s->lock);
        handle(s, buf, body, blen, &a, &status, &retry_after, answer, sizeof(answer));
        a.status = status;
        bool stopping = s->stop;
        if (!stopping) {
            record(s, &a);
        } else {
            free(a.body);
        }
        pthread_mutex_unlock(&s->lock);
        /* keep what followed this request */
        size_t used = (size_t)(head_end - buf) + blen;
        size_t rest = have > used ? have - used : 0;
        memmove(buf, buf + (have - rest), rest);
        have = rest;
        if (!respond(c->fd, status, retry_after, answer) || stopping) {
            break;
        }
    }
    free(buf);
    shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_lock(&s->lock);
    c->done = true;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* Frees the slots of connections that ended (s->lock held): a test makes
 * as many as it needs, MAX_CONNS at a time. */
static void reap(ts_push_server *s)
{
    for (int i = 0; i < MAX_CONNS; i++) {
        struct conn *c = &s->conns[i];
        if (c->used && c->done) {
            pthread_join(c->thread, NULL);
            close(c->fd);
            c->used = c->done = false;
        }
    }
}

static void *accept_loop(void *arg)
{
    ts_push_server *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        pthread_mutex_lock(&s->lock);
        bool stop = s->stop;
        struct conn *c = NULL;
        reap(s);
        for (int i = 0; !stop && fd >= 0 && i < MAX_CONNS && !c; i++) {
            if (!s->conns[i].used) {
                c = &s->conns[i];
            }
        }
        if (c) {
            c->used = true;
            c->fd = fd;
            c->s = s;
            if (pthread_create(&c->thread, NULL, serve, c) != 0) {
                c->used = false;
                c = NULL;
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (!c && fd >= 0) {
            close(fd);
        }
        if (stop || (fd < 0 && errno != EINTR && errno != ECONNABORTED)) {
            return NULL;
        }
    }
}

/* ===========================================================================
 * The test's side
 * ========================================================================= */

ts_push_server *ts_push_server_start(void)
{
    ts_push_server *s = calloc(1, sizeof(*s));
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int one = 1;
    if (!s) {
        FAILF("out of memory");
    }
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (s->fd < 0 || setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(s->fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s->fd, 64) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&a, &len) != 0) {
        FAILF("push server: cannot listen on 127.0.0.1: %s", strerror(errno));
    }
    s->port = ntohs(a.sin_port);
    pthread_mutex_init(&s->lock, NULL);
    /* Waits time out on the monotonic clock: a step of the wall clock
     * (a virtual machine's) must not end a wait at once. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&s->accepter, NULL, accept_loop, s) != 0) {
        FAILF("push server: no thread");
    }
    ts_log("push server on 127.0.0.1:%d", s->port);
    return s;
}

void ts_push_server_stop(ts_push_server *s)
{
    if (!s) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->cond);
    for (int i = 0; i < MAX_CONNS; i++) {
        if (s->conns[i].used) {
            shutdown(s->conns[i].fd, SHUT_RDWR);
        }
    }
    pthread_mutex_unlock(&s->lock);
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->accepter, NULL);
    for (int i = 0; i < MAX_CONNS; i++) {
        if (s->conns[i].used) {
            pthread_join(s->conns[i].thread, NULL);
            close(s->conns[i].fd);
        }
    }
    close(s->fd);
    for (size_t i = 0; i < s->narrivals; i++) {
        free(s->arrivals[i].body);
    }
    free(s->arrivals);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int ts_push_server_port(const ts_push_server *s)
{
    return s->port;
}

const char *ts_push_url(const ts_push_server *s, const char *path, char *buf, size_t cap)
{
    snprintf(buf, cap, "http://127.0.0.1:%d%s", s->port, path);
    return buf;
}

/* The endpoint at path, made when missing; the lock is held. */
static struct endpoint *ep_get(ts_push_server *s, const char *path)
{
    struct endpoint *ep = find_ep(s, path);
    if (!ep) {
        if (s->nep == MAX_ENDPOINTS || strlen(path) >= sizeof(ep->path)) {
            FAILF("push server: too many endpoints, or path too long");
        }
        ep = &s->ep[s->nep++];
        memset(ep, 0, sizeof(*ep));
        snprintf(ep->path, sizeof(ep->path), "%s", path);
        ep->discovery = 200;
    }
    return ep;
}

void ts_push_endpoint(ts_push_server *s, const char *path, ts_push_kind kind,
                      const ts_push_keys *keys)
{
    pthread_mutex_lock(&s->lock);
    struct endpoint *ep = ep_get(s, path);
    ep->kind = kind;
    ep->has_keys = keys != NULL;
    if (keys) {
        ep->keys = *keys;
    }
    pthread_mutex_unlock(&s->lock);
}

void ts_push_discovery(ts_push_server *s, const char *path, int status)
{
    pthread_mutex_lock(&s->lock);
    ep_get(s, path)->discovery = status;
    pthread_mutex_unlock(&s->lock);
}

void ts_push_answer(ts_push_server *s, const char *path, int status, int retry_after)
{
    pthread_mutex_lock(&s->lock);
    struct endpoint *ep = ep_get(s, path);
    if (ep->nanswers == MAX_ANSWERS) {
        FAILF("push server: too many answers queued at %s", path);
    }
    ep->answers[ep->nanswers] = status;
    ep->retry[ep->nanswers++] = retry_after;
    pthread_mutex_unlock(&s->lock);
}

void ts_push_hang(ts_push_server *s, const char *path, bool on)
{
    pthread_mutex_lock(&s->lock);
    ep_get(s, path)->hang = on;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void ts_push_reject(ts_push_server *s, const char *path, const char *pushkey)
{
    pthread_mutex_lock(&s->lock);
    struct endpoint *ep = ep_get(s, path);
    if (ep->nrejected == MAX_REJECTED || strlen(pushkey) >= sizeof(ep->rejected[0])) {
        FAILF("push server: too many rejected pushkeys");
    }
    snprintf(ep->rejected[ep->nrejected++], sizeof(ep->rejected[0]), "%s", pushkey);
    pthread_mutex_unlock(&s->lock);
}

static size_t count_locked(ts_push_server *s, const char *path)
{
    size_t n = 0;
    for (size_t i = 0; i < s->narrivals; i++) {
        n += strcmp(s->arrivals[i].path, path) == 0;
    }
    return n;
}

size_t ts_push_count(ts_push_server *s, const char *path)
{
    pthread_mutex_lock(&s->lock);
    size_t n = count_locked(s, path);
    pthread_mutex_unlock(&s->lock);
    return n;
}

ts_push_arrival *ts_push_wait(ts_push_server *s, const char *path, size_t n, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    ts_push_arrival *copy = NULL;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        size_t seen = 0;
        for (size_t i = 0; i < s->narrivals; i++) {
            if (!strcmp(s->arrivals[i].path, path) && ++seen == n) {
                copy = malloc(sizeof(*copy));
                if (copy) {
                    *copy = s->arrivals[i];
                    copy->body = malloc(copy->len + 1);
                    if (copy->body) {
                        memcpy(copy->body, s->arrivals[i].body, copy->len + 1);
                    }
                }
                break;
            }
        }
        if (copy || pthread_cond_timedwait(&s->cond, &s->lock, &until) == ETIMEDOUT) {
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (copy && !copy->body) {
        FAILF("out of memory");
    }
    return copy;
}

void ts_push_arrival_free(ts_push_arrival *a)
{
    if (a) {
        free(a->body);
        free(a);
    }
}
