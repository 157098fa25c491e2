/* bench_payload: the JSON payloads every subcommand publishes, and the
 * cheap scans that read them back and recognise the plugin's pushes. See
 * bench.h for each function's contract. */
#include "bench.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Makes the client message ids of this process unlike those of any other
 * run against the same store: the plugin drops a (group, from, cid) it has
 * already stored, by design. */
static uint64_t g_run_token;

void bench_payload_init(void)
{
    g_run_token = (bench_now_ns() ^ ((uint64_t)getpid() << 40)) & 0xffffffffffffull;
}

/* The body is pseudo-random lowercase words, which snappy cannot shrink
 * much: stored sizes are not flattered by a body of repeated bytes. */
size_t make_payload(char *buf, const char *client, uint64_t n, uint64_t t)
{
    int h = snprintf(buf, PAYLOAD_BYTES + 1,
                     "{\"cid\":\"%s-%" PRIx64 "-%" PRIu64 "\",\"n\":%" PRIu64 ",\"t\":%" PRIu64
                     ",\"body\":\"",
                     client, g_run_token, n, n, t);
    size_t len = h > 0 ? (size_t)h : 0;
    uint64_t x = n * 0x9e3779b97f4a7c15ull + 1; /* xorshift64, seeded by n */
    while (len < PAYLOAD_BYTES - 2) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        unsigned r = (unsigned)(x % 32);
        buf[len++] = r < 26 ? (char)('a' + r) : ' ';
    }
    buf[len++] = '"';
    buf[len++] = '}';
    buf[len] = '\0';
    return len;
}

/* A bounded scan, cheap enough for a subscriber that must keep up with the
 * broker; the payloads are ours, so keys do not occur in values. */
bool scan_u64(const char *s, size_t len, const char *key, uint64_t *v)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i + klen < len; i++) {
        if (s[i] == key[0] && !memcmp(s + i, key, klen)) {
            const char *p = s + i + klen;
            uint64_t x = 0;
            size_t k = 0;
            while (i + klen + k < len && p[k] >= '0' && p[k] <= '9' && k < 20) {
                x = x * 10 + (uint64_t)(p[k] - '0');
                k++;
            }
            if (k == 0) {
                return false;
            }
            *v = x;
            return true;
        }
    }
    return false;
}

/* The first bytes of the plugin's pushes (protocol v1.1), as it writes them. */
#define PUSH_READS "{\"responses\":[{\"command\":\"reads\""
#define PUSH_PRESENCE "{\"responses\":[{\"command\":\"presence\""

bool is_push(const char *p, size_t len)
{
    return p &&
           ((len >= sizeof(PUSH_READS) - 1 && !memcmp(p, PUSH_READS, sizeof(PUSH_READS) - 1)) ||
            (len >= sizeof(PUSH_PRESENCE) - 1 &&
             !memcmp(p, PUSH_PRESENCE, sizeof(PUSH_PRESENCE) - 1)));
}
