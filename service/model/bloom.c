/* bloom.c - Bloom filter arithmetic (bloom.h). */
#include "bloom.h"

#include "digest.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

struct bloom_shape bloom_size(int64_t n, int64_t p_ppm)
{
    double p = (double)p_ppm / 1e6;
    double ln2 = log(2.0);
    double m = ceil(-(double)n * log(p) / (ln2 * ln2));
    struct bloom_shape s = {.m = m < 64 ? 64 : (uint64_t)m, .k = 1};
    if (s.m > BLOOM_MAX_BITS)
        s.m = BLOOM_MAX_BITS;
    double k = round((double)s.m / (double)n * ln2);
    s.k = k < 1 ? 1 : k > BLOOM_MAX_K ? BLOOM_MAX_K : (int)k;
    return s;
}

static uint64_t read_u64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | b[i];
    return v;
}

void bloom_positions(struct bloom_shape s, int64_t user_id, const char *key,
                     uint64_t out[BLOOM_MAX_K])
{
    unsigned char h[SHA256_BYTES];
    char text[128];
    int n = snprintf(text, sizeof text, "%lld:%s", (long long)user_id, key);
    sha256(text, n > 0 && (size_t)n < sizeof text ? (size_t)n : strlen(text), h);
    uint64_t h1 = read_u64(h), h2 = read_u64(h + 8) | 1; /* odd: the k positions differ */
    for (int i = 0; i < s.k; i++)
        out[i] = (h1 + (uint64_t)i * h2) % s.m;
}
