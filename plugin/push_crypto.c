/* push_crypto: RFC 8291 content encryption (aes128gcm) with libcrypto (see
 * push_crypto.h). */
#include "push_crypto.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#define SHA256_LEN 32
#define CEK_LEN 16
#define NONCE_LEN 12
#define TAG_LEN 16
#define HEADER_LEN (PUSH_SALT_LEN + 4 + 1 + PUSH_KEY_LEN)

/* ===========================================================================
 * Keys
 * ========================================================================= */

/* A P-256 key from its public point and, when priv is not NULL, its
 * private scalar; NULL when libcrypto refuses them. */
static EVP_PKEY *key_from(const uint8_t *pub, const uint8_t *priv)
{
    EVP_PKEY *key = NULL;
    BIGNUM *d = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);

    if (!bld || !ctx ||
        !OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) ||
        !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, PUSH_KEY_LEN)) {
        goto fail;
    }
    if (priv && (!(d = BN_bin2bn(priv, PUSH_PRIV_LEN, NULL)) ||
                 !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PRIV_KEY, d))) {
        goto fail;
    }
    if (!(params = OSSL_PARAM_BLD_to_param(bld)) || EVP_PKEY_fromdata_init(ctx) <= 0 ||
        EVP_PKEY_fromdata(ctx, &key, priv ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params) <= 0) {
        key = NULL;
    }

fail:
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_clear_free(d);
    EVP_PKEY_CTX_free(ctx);
    return key;
}

bool push_crypto_key_valid(const uint8_t *key)
{
    if (key[0] != 0x04) {
        return false;
    }
    EVP_PKEY *k = key_from(key, NULL);
    EVP_PKEY_CTX *ctx = k ? EVP_PKEY_CTX_new(k, NULL) : NULL;
    /* The import checks the encoding; this checks the point is on the curve. */
    bool ok = ctx && EVP_PKEY_public_check(ctx) == 1;
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(k);
    return ok;
}

/* A fresh key pair, its public point in pub. */
static EVP_PKEY *key_new(uint8_t *pub)
{
    size_t len = 0;
    EVP_PKEY *key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (key && (EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, pub,
                                                PUSH_KEY_LEN, &len) != 1 ||
                len != PUSH_KEY_LEN)) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    return key;
}

/* The ECDH shared secret (the x coordinate) of mine and the peer's key. */
static bool ecdh(EVP_PKEY *mine, EVP_PKEY *peer, uint8_t *secret)
{
    size_t len = SHA256_LEN;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(mine, NULL);
    bool ok = ctx && EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_derive_set_peer(ctx, peer) > 0 &&
              EVP_PKEY_derive(ctx, secret, &len) > 0 && len == SHA256_LEN;
    EVP_PKEY_CTX_free(ctx);
    return ok;
}

/* ===========================================================================
 * HKDF-SHA256 (RFC 5869), for outputs of one block
 * ========================================================================= */

static bool hmac(const uint8_t *key, size_t klen, const uint8_t *data, size_t len, uint8_t *out)
{
    unsigned int n = 0;
    return HMAC(EVP_sha256(), key, (int)klen, data, len, out, &n) && n == SHA256_LEN;
}

/* HKDF-Expand's first block: every output here is at most 32 bytes. */
static bool expand(const uint8_t *prk, const uint8_t *info, size_t ilen, uint8_t *out, size_t len)
{
    uint8_t buf[256], t[SHA256_LEN];
    if (ilen + 1 > sizeof(buf) || len > SHA256_LEN) {
        return false;
    }
    memcpy(buf, info, ilen);
    buf[ilen] = 0x01;
    bool ok = hmac(prk, SHA256_LEN, buf, ilen + 1, t);
    memcpy(out, t, len);
    OPENSSL_cleanse(t, sizeof(t));
    return ok;
}

/* ===========================================================================
 * The content coding
 * ========================================================================= */

/* The content encryption key and nonce of RFC 8291 section 3.4 and RFC
 * 8188 section 2.2, from the ECDH secret, the auth secret, both public
 * keys and the salt. */
static bool derive(const uint8_t *secret, const uint8_t *auth, const uint8_t *ua_public,
                   const uint8_t *as_public, const uint8_t *salt, uint8_t *cek, uint8_t *nonce)
{
    static const char key_label[] = "WebPush: info";
    static const char cek_label[] = "Content-Encoding: aes128gcm";
    static const char nonce_label[] = "Content-Encoding: nonce";
    uint8_t info[sizeof(key_label) + (size_t)2 * PUSH_KEY_LEN]; /* the label with its NUL */
    uint8_t prk_key[SHA256_LEN], ikm[SHA256_LEN], prk[SHA256_LEN];

    memcpy(info, key_label, sizeof(key_label));
    memcpy(info + sizeof(key_label), ua_public, PUSH_KEY_LEN);
    memcpy(info + sizeof(key_label) + PUSH_KEY_LEN, as_public, PUSH_KEY_LEN);
    bool ok = hmac(auth, PUSH_AUTH_LEN, secret, SHA256_LEN, prk_key) &&
              expand(prk_key, info, sizeof(info), ikm, SHA256_LEN) &&
              hmac(salt, PUSH_SALT_LEN, ikm, SHA256_LEN, prk) &&
              expand(prk, (const uint8_t *)cek_label, sizeof(cek_label), cek, CEK_LEN) &&
              expand(prk, (const uint8_t *)nonce_label, sizeof(nonce_label), nonce, NONCE_LEN);
    OPENSSL_cleanse(prk_key, sizeof(prk_key));
    OPENSSL_cleanse(ikm, sizeof(ikm));
    OPENSSL_cleanse(prk, sizeof(prk));
    return ok;
}

/* One record: AES-128-GCM of plain, then the last record's delimiter 0x02,
 * written to out with the tag after it. */
static bool seal(const uint8_t *cek, const uint8_t *nonce, const void *plain, size_t len,
                 uint8_t *out)
{
    static const uint8_t delimiter = 0x02;
    int n = 0, m = 0, f = 0;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    bool ok = ctx && EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, NULL, NULL) == 1 &&
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) == 1 &&
              EVP_EncryptInit_ex(ctx, NULL, NULL, cek, nonce) == 1 &&
              (len == 0 || EVP_EncryptUpdate(ctx, out, &n, plain, (int)len) == 1) &&
              EVP_EncryptUpdate(ctx, out + n, &m, &delimiter, 1) == 1 &&
              EVP_EncryptFinal_ex(ctx, out + n + m, &f) == 1 &&
              (size_t)n + (size_t)m + (size_t)f == len + 1 &&
              EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, out + len + 1) == 1;
    EVP_CIPHER_CTX_free(ctx);
    return ok;
}

bool push_crypto_encrypt(const uint8_t *ua_public, const uint8_t *auth, const void *plain,
                         size_t len, const push_crypto_fixed *fixed, uint8_t **out, size_t *out_len)
{
    uint8_t as_public[PUSH_KEY_LEN], salt[PUSH_SALT_LEN], secret[SHA256_LEN];
    uint8_t cek[CEK_LEN], nonce[NONCE_LEN];
    uint8_t *body = NULL;
    EVP_PKEY *peer = NULL, *mine = NULL;
    bool ok = false;

    *out = NULL;
    *out_len = 0;
    /* One record of PUSH_RECORD_SIZE holds the content, its delimiter and
     * the tag. */
    if (len + 1 + TAG_LEN > PUSH_RECORD_SIZE || ua_public[0] != 0x04) {
        return false;
    }
    if (fixed) {
        memcpy(as_public, fixed->as_public, PUSH_KEY_LEN);
        memcpy(salt, fixed->salt, PUSH_SALT_LEN);
        mine = key_from(fixed->as_public, fixed->as_private);
    } else {
        mine = key_new(as_public);
        if (RAND_bytes(salt, PUSH_SALT_LEN) != 1) {
            goto done;
        }
    }
    peer = key_from(ua_public, NULL);
    if (!mine || !peer || !ecdh(mine, peer, secret) ||
        !derive(secret, auth, ua_public, as_public, salt, cek, nonce)) {
        goto done;
    }
    body = malloc(len + PUSH_CRYPTO_OVERHEAD);
    if (!body) {
        goto done;
    }
    /* The header of RFC 8188 section 2.1: salt, record size (big-endian),
     * and the key id, which RFC 8291 makes the sender's public key. */
    memcpy(body, salt, PUSH_SALT_LEN);
    body[PUSH_SALT_LEN] = (uint8_t)(PUSH_RECORD_SIZE >> 24);
    body[PUSH_SALT_LEN + 1] = (uint8_t)(PUSH_RECORD_SIZE >> 16);
    body[PUSH_SALT_LEN + 2] = (uint8_t)(PUSH_RECORD_SIZE >> 8);
    body[PUSH_SALT_LEN + 3] = (uint8_t)(PUSH_RECORD_SIZE & 0xff);
    body[PUSH_SALT_LEN + 4] = PUSH_KEY_LEN;
    memcpy(body + PUSH_SALT_LEN + 5, as_public, PUSH_KEY_LEN);
    if (!seal(cek, nonce, plain, len, body + HEADER_LEN)) {
        goto done;
    }
    *out = body;
    *out_len = len + PUSH_CRYPTO_OVERHEAD;
    body = NULL;
    ok = true;

done:
    free(body);
    EVP_PKEY_free(mine);
    EVP_PKEY_free(peer);
    OPENSSL_cleanse(secret, sizeof(secret));
    OPENSSL_cleanse(cek, sizeof(cek));
    OPENSSL_cleanse(nonce, sizeof(nonce));
    return ok;
}

/* ===========================================================================
 * base64url
 * ========================================================================= */

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

bool push_b64url_decode(const char *s, uint8_t *out, size_t cap, size_t *len)
{
    size_t n = strlen(s), k = 0;
    uint32_t acc = 0;
    unsigned bits = 0;

    while (n > 0 && s[n - 1] == '=') {
        n--;
    }
    if (n % 4 == 1 || strlen(s) - n > 2) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int v = b64_value(s[i]);
        if (v < 0) {
            return false;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (k == cap) {
                return false;
            }
            out[k++] = (uint8_t)((acc >> bits) & 0xff);
        }
    }
    *len = k;
    return true;
}
