#include "hist.h"

#include <string.h>

/* Values below 2^10 have a bucket each; above, each power of two 2^e is cut
 * into 512 equal sub-buckets, up to 2^37 us. */
#define HIST_LINEAR   1024
#define HIST_SUB      512
#define HIST_MAX_EXP  36
#define HIST_MAX_USEC ((UINT64_C(1) << (HIST_MAX_EXP + 1)) - 1)

static unsigned hist_index(uint64_t v)
{
    unsigned e;
    unsigned shift;

    if (v < HIST_LINEAR)
        return (unsigned)v;
    if (v > HIST_MAX_USEC)
        v = HIST_MAX_USEC;
    e = 63u - (unsigned)__builtin_clzll(v);
    shift = e - 9u;
    return HIST_LINEAR + (e - 10u) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
}

/* The middle of bucket idx, so that a percentile errs by half a bucket at most. */
static uint64_t hist_value(unsigned idx)
{
    unsigned e;
    unsigned shift;
    uint64_t low;

    if (idx < HIST_LINEAR)
        return idx;
    e = (idx - HIST_LINEAR) / HIST_SUB + 10u;
    shift = e - 9u;
    low = (uint64_t)((idx - HIST_LINEAR) % HIST_SUB + HIST_SUB) << shift;
    return low + ((UINT64_C(1) << shift) >> 1);
}

void hist_init(struct hist *h)
{
    memset(h, 0, sizeof(*h));
}

void hist_add(struct hist *h, uint64_t us)
{
    h->buckets[hist_index(us)]++;
    h->count++;
    h->sum_us += us;
    if (us > h->max_us)
        h->max_us = us;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum_us += src->sum_us;
    if (src->max_us > dst->max_us)
        dst->max_us = src->max_us;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
    uint64_t rank;
    uint64_t seen = 0;

    if (h->count == 0)
        return 0;
    if (p <= 0.0)
        p = 0.0;
    if (p >= 1.0)
        return h->max_us;
    /* The rank of the sample at fraction p, counting from 1 (nearest rank). */
    rank = (uint64_t)(p * (double)h->count);
    if ((double)rank < p * (double)h->count || rank < 1)
        rank++;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = hist_value(i);
            return v > h->max_us ? h->max_us : v;
        }
    }
    return h->max_us;
}

double hist_mean(const struct hist *h)
{
    if (h->count == 0)
        return 0.0;
    return (double)h->sum_us / (double)h->count;
}

/* Coarse buckets: 16 exact values, then 8 per power of two from 2^4. */
#define SMALL_LINEAR 16u
#define SMALL_SUB    8u

static unsigned small_index(uint64_t v)
{
    unsigned e;
    unsigned idx;

    if (v < SMALL_LINEAR)
        return (unsigned)v;
    e = 63u - (unsigned)__builtin_clzll(v);
    idx = SMALL_LINEAR + (e - 4u) * SMALL_SUB + (unsigned)((v >> (e - 3u)) - SMALL_SUB);
    return idx < HIST_SMALL_BUCKETS ? idx : HIST_SMALL_BUCKETS - 1;
}

static uint64_t small_value(unsigned idx)
{
    unsigned e;
    uint64_t low;

    if (idx < SMALL_LINEAR)
        return idx;
    e = (idx - SMALL_LINEAR) / SMALL_SUB + 4u;
    low = (uint64_t)((idx - SMALL_LINEAR) % SMALL_SUB + SMALL_SUB) << (e - 3u);
    return low + ((UINT64_C(1) << (e - 3u)) >> 1);
}

void hist_small_add(struct hist_small *h, uint64_t us)
{
    h->buckets[small_index(us)]++;
    h->count++;
    if (us > h->max_us)
        h->max_us = us;
}

void hist_small_merge(struct hist_small *dst, const struct hist_small *src)
{
    for (unsigned i = 0; i < HIST_SMALL_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    if (src->max_us > dst->max_us)
        dst->max_us = src->max_us;
}

uint64_t hist_small_percentile(const struct hist_small *h, double p)
{
    uint64_t rank;
    uint64_t seen = 0;

    if (h->count == 0)
        return 0;
    if (p >= 1.0)
        return h->max_us;
    if (p < 0.0)
        p = 0.0;
    rank = (uint64_t)(p * (double)h->count);
    if ((double)rank < p * (double)h->count || rank < 1)
        rank++;
    for (unsigned i = 0; i < HIST_SMALL_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t v = small_value(i);
            return v > h->max_us ? h->max_us : v;
        }
    }
    return h->max_us;
}
