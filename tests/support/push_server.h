/* push_server: a loopback HTTP/1.1 server for the push notification tests,
 * playing every server the plugin posts to: a UnifiedPush push server
 * (answers the discovery GET of an endpoint, decrypts RFC 8291 content with
 * the registration's private key, checks the notification, answers 201 or
 * what the test asks: 404, 410, 413, 429 with Retry-After ...), a Matrix
 * push gateway (checks the notify request against the Push Gateway API v1
 * schema, answers {"rejected":[...]}) and a webhook receiver. Each path is
 * one endpoint, registered by the test with its kind and keys; a request to
 * any other path gets 404.
 *
 * The server runs on threads of its own (one accepting, one per
 * connection: a connection the test keeps hanging does not stop the
 * others) and records every request it answers as an arrival, in order,
 * signalling the test's thread: tests wait for the n-th arrival at a path,
 * never for time to pass. The decryption is this file's own (OpenSSL), not
 * the plugin's: it checks the plugin's encryption independently.
 *
 * Failure policy (util.h): a server that cannot start fails the test; what
 * a request did wrong (bad encryption, a notification of the wrong shape)
 * is recorded in its arrival's `error` for the test to assert on.
 *
 * Ownership: ts_push_server_start/ts_push_server_stop are a pair; an
 * arrival returned by ts_push_wait is the caller's, freed with
 * ts_push_arrival_free. Threading: every function here is for the test's
 * main thread.
 */
#ifndef CHAT_TS_PUSH_SERVER_H
#define CHAT_TS_PUSH_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ts_push_server ts_push_server;

typedef enum ts_push_kind {
    TS_PUSH_UNIFIEDPUSH = 0, /* discovery GET and POSTs of notifications */
    TS_PUSH_MATRIX,          /* POSTs to /_matrix/push/v1/notify-like paths */
    TS_PUSH_WEBHOOK          /* POSTs of the plugin's webhook body */
} ts_push_kind;

/* A device's Web Push keys: its P-256 pair and auth secret, and their
 * base64url text for the registration. */
typedef struct ts_push_keys {
    uint8_t priv[32];
    uint8_t pub[65];
    uint8_t auth[16];
    char p256dh[96]; /* base64url of pub */
    char auth_b64[32];
} ts_push_keys;

/* One request the server answered. */
typedef struct ts_push_arrival {
    char method[8];
    char path[256];
    int status;        /* what the server answered */
    int64_t at_ms;     /* ts_now_ms() when it arrived */
    bool encrypted;    /* Content-Encoding: aes128gcm, decrypted */
    char *body;        /* the body (decrypted), NUL-terminated; "" for a GET */
    size_t len;        /* bytes of body */
    char error[256];   /* "" when the request was as the kind's spec wants it */
    char encoding[64]; /* its Content-Encoding header, "" when none */
} ts_push_arrival;

/* Starts a server on 127.0.0.1 on a free port. */
ts_push_server *ts_push_server_start(void);

/* Stops it (hung requests are answered 503 and closed) and frees it.
 * Accepts NULL. */
void ts_push_server_stop(ts_push_server *s);

int ts_push_server_port(const ts_push_server *s);

/* "http://127.0.0.1:<port><path>" into buf (cap bytes); returns buf. */
const char *ts_push_url(const ts_push_server *s, const char *path, char *buf, size_t cap);

/* Makes path an endpoint of kind. keys (UnifiedPush, may be NULL): the
 * device's, to decrypt with; a POST without aes128gcm to an endpoint with
 * keys is an error, and the other way round. */
void ts_push_endpoint(ts_push_server *s, const char *path, ts_push_kind kind,
                      const ts_push_keys *keys);

/* How path answers a GET (discovery): 200 with {"unifiedpush":{"version":1}}
 * (the default), another status, or (status 0) 200 with a body that is not
 * the UnifiedPush answer. */
void ts_push_discovery(ts_push_server *s, const char *path, int status);

/* Queues the answer of the next POST to path: status, and Retry-After
 * seconds when retry_after >= 0. Answers come in order; without one a POST
 * gets 201 (UnifiedPush) or 200 (Matrix, webhook). At most 16 queued. */
void ts_push_answer(ts_push_server *s, const char *path, int status, int retry_after);

/* While on, requests to path are held unanswered (the connection stays
 * open); off answers them as usual. */
void ts_push_hang(ts_push_server *s, const char *path, bool on);

/* A Matrix gateway at path lists pushkey in "rejected" from now on. */
void ts_push_reject(ts_push_server *s, const char *path, const char *pushkey);

/* Requests answered at path so far (held ones not counted). */
size_t ts_push_count(ts_push_server *s, const char *path);

/* Waits at most timeout_ms for the n-th (1-based) request answered at
 * path; returns a copy, or NULL when it did not come. */
ts_push_arrival *ts_push_wait(ts_push_server *s, const char *path, size_t n, int timeout_ms);

void ts_push_arrival_free(ts_push_arrival *a);

/* Draws a device's keys. */
void ts_push_keys_new(ts_push_keys *k);

/* The test server's own RFC 8291 decryption: body (len bytes, an
 * aes128gcm content coding) for the device of priv/pub/auth. On success
 * returns a malloc'd NUL-terminated plaintext with its length in *out_len;
 * else NULL, with why in err (cap bytes). */
char *ts_push_decrypt(const uint8_t *body, size_t len, const uint8_t priv[32],
                      const uint8_t pub[65], const uint8_t auth[16], size_t *out_len, char *err,
                      size_t cap);

/* base64url without padding of len bytes into out (cap bytes). */
void ts_b64url(const uint8_t *in, size_t len, char *out, size_t cap);

#endif
