/* push_crypto: the content encryption of Web Push (RFC 8291) in the
 * aes128gcm content coding (RFC 8188), with OpenSSL's libcrypto: an
 * ephemeral ECDH P-256 key per message, HKDF-SHA256 and AES-128-GCM, one
 * record. UnifiedPush endpoints take the same content when the device gave
 * its p256dh and auth keys; the push server then sees only ciphertext.
 *
 * Conventions: keys and bytes go in as (pointer, length) and are not kept;
 * a function that returns heap memory names its free. Nothing here touches
 * the broker: the sender thread (push_send.c) encrypts, and the functions
 * are safe on any thread (libcrypto 3 needs no locks of ours). Failures are
 * false, with nothing allocated.
 */
#ifndef CHAT_PUSH_CRYPTO_H
#define CHAT_PUSH_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PUSH_KEY_LEN 65  /* an uncompressed P-256 point: 0x04, x, y */
#define PUSH_AUTH_LEN 16 /* the auth secret */
#define PUSH_SALT_LEN 16
#define PUSH_PRIV_LEN 32 /* a P-256 private scalar */

/* Bytes the coding adds to the plaintext: the header (salt, record size,
 * key id length, the sender's public key), the padding delimiter and the
 * tag. */
#define PUSH_CRYPTO_OVERHEAD (PUSH_SALT_LEN + 4 + 1 + PUSH_KEY_LEN + 1 + 16)

/* The record size written in the header: one record holds the whole
 * content, which UnifiedPush and Web Push bound to 4096 bytes. */
#define PUSH_RECORD_SIZE 4096u

/* What a test fixes instead of drawing it: the sender's key pair and the
 * salt (RFC 8291, Appendix A). */
typedef struct push_crypto_fixed {
    uint8_t as_private[PUSH_PRIV_LEN];
    uint8_t as_public[PUSH_KEY_LEN];
    uint8_t salt[PUSH_SALT_LEN];
} push_crypto_fixed;

/* Encrypts len bytes of plain for the user agent whose public key is
 * ua_public (PUSH_KEY_LEN bytes, which must be a point on P-256) and whose
 * auth secret is auth (PUSH_AUTH_LEN bytes). On success *out (malloc'd:
 * free()) holds the whole body, header then record, *out_len bytes
 * (len + PUSH_CRYPTO_OVERHEAD). fixed is NULL but in tests, which then get
 * the RFC's bytes. False when the content does not fit one record, the key
 * is not a valid point, or libcrypto fails. */
bool push_crypto_encrypt(const uint8_t *ua_public, const uint8_t *auth, const void *plain,
                         size_t len, const push_crypto_fixed *fixed, uint8_t **out,
                         size_t *out_len);

/* Decodes base64url text s (RFC 4648 section 5; "=" padding allowed at the
 * end, nothing else) into out, at most cap bytes; *len receives how many.
 * False for a character outside the alphabet, a length no encoding has, or
 * more than cap bytes. */
bool push_b64url_decode(const char *s, uint8_t *out, size_t cap, size_t *len);

/* Whether key (PUSH_KEY_LEN bytes) is an uncompressed point on P-256: the
 * check of a p256dh key at registration, so that a bad one is refused then
 * rather than at every notification. */
bool push_crypto_key_valid(const uint8_t *key);

#endif
