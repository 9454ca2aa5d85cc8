/* bloom.h - the arithmetic of the order-key Bloom filter (pure; the bits
 * live in Redis, cache.h, and the rules of trust are order_key_filter.c's and
 * bloom_job.h's).
 *
 * A Bloom filter of m bits and k hash functions, holding n keys, answers
 * "certainly not" or "maybe" for any key; "maybe" is wrong with a
 * probability of about (1 - e^(-kn/m))^k, and "certainly not" is never
 * wrong for a key that was added. Sized for TICKETD_BLOOM_EXPECTED_KEYS at
 * TICKETD_BLOOM_FALSE_POSITIVES_PER_MILLION. */
#ifndef TICKETD_BLOOM_H
#define TICKETD_BLOOM_H

#include <stdint.h>

#define BLOOM_MAX_K 16
/* Redis strings hold at most 512 MB: 2^32 bits. */
#define BLOOM_MAX_BITS 4294967295ULL

struct bloom_shape {
    uint64_t m; /* bits */
    int k;      /* positions per key */
};

/* The optimal shape for n keys at p_ppm false positives per million:
 * m = -n ln p / (ln 2)^2, k = m/n ln 2 (rounded, 1 to BLOOM_MAX_K), m at
 * most BLOOM_MAX_BITS. */
struct bloom_shape bloom_size(int64_t n, int64_t p_ppm);

/* The k bit positions of a user's Idempotency-Key into out: double
 * hashing (Kirsch-Mitzenmacher) of the two halves of SHA-256("user:key"). */
void bloom_positions(struct bloom_shape s, int64_t user_id, const char *key,
                     uint64_t out[BLOOM_MAX_K]);

#endif
