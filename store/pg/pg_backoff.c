/* pg_backoff: the pace of a connection's reconnects (see pg_backoff.h). */
#include "pg_backoff.h"

void pg_backoff_init(pg_backoff *b, uint64_t seed)
{
    b->d = 0;
    /* splitmix64 of the seed: nearby seeds give unrelated draws, and the
     * state of xorshift must not be 0 */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    b->rng = z ? z : 0x2545f4914f6cdd1dull;
}

void pg_backoff_reset(pg_backoff *b)
{
    b->d = 0;
}

static uint64_t draw(pg_backoff *b)
{
    uint64_t x = b->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b->rng = x;
    return x;
}

int64_t pg_backoff_next(pg_backoff *b)
{
    if (b->d == 0) {
        b->d = PG_BACKOFF_FIRST_MS;
        return 0;
    }
    int64_t d = b->d, lo = d / 2;
    int64_t delay = lo + (int64_t)(draw(b) % (uint64_t)(d - lo + 1));
    b->d = d * 2 > PG_BACKOFF_MAX_MS ? PG_BACKOFF_MAX_MS : d * 2;
    return delay;
}
