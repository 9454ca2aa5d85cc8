/*
 * hist.h - fixed-size latency histogram.
 *
 * A load run can record millions of samples; keeping them all would make the
 * tool's memory grow with the run. The histogram keeps every value below
 * 1024 us exactly and above that 512 sub-buckets per power of two (about
 * 0.2 % relative error), in one fixed array, so memory is constant and two
 * histograms can be merged by adding their buckets.
 *
 * Not thread-safe: give each thread its own and merge at the end.
 */
#ifndef LOADTEST_HIST_H
#define LOADTEST_HIST_H

#include <stdint.h>

#define HIST_BUCKETS (1024 + 27 * 512)

struct hist {
    uint64_t count;
    uint64_t sum_us;
    uint64_t max_us;
    uint64_t buckets[HIST_BUCKETS];
};

/* Clears h. */
void hist_init(struct hist *h);

/* Records one sample in microseconds; values beyond ~38 hours are clamped. */
void hist_add(struct hist *h, uint64_t us);

/* Adds every sample of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);

/* The value below which a fraction p (0..1) of the samples lie, in
 * microseconds; 0 when the histogram is empty. */
uint64_t hist_percentile(const struct hist *h, double p);

/* Mean of the samples in microseconds; 0 when empty. */
double hist_mean(const struct hist *h);

/*
 * A coarse histogram small enough to keep one per second of a run (the
 * time series of the JSON report): values below 16 us exactly, above that
 * 8 sub-buckets per power of two (at most 12.5 % off), up to about 2^28 us.
 * Zero-initialised memory is an empty one.
 */
#define HIST_SMALL_BUCKETS (16 + 24 * 8)

struct hist_small {
    uint32_t count;
    uint64_t max_us;
    uint32_t buckets[HIST_SMALL_BUCKETS];
};

void hist_small_add(struct hist_small *h, uint64_t us);
void hist_small_merge(struct hist_small *dst, const struct hist_small *src);

/* As hist_percentile(), to the coarse resolution; 0 when empty. */
uint64_t hist_small_percentile(const struct hist_small *h, double p);

#endif
