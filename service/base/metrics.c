/* metrics.c - the process's counters, gauges and histograms (metrics.h, the table metrics.def) and
 * their Prometheus text. Apart so that a module counts with one atomic add and knows nothing of the
 * format. */
#include "metrics.h"

#include "text.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metric_def {
    const char *name;
    const char *labels; /* already formatted, e.g. "layer=\"token\"", or "" */
    const char *type;
    const char *help;
};

/* Rows that share a name must be adjacent: HELP and TYPE are written once
 * per name, at its first row. */
static const struct metric_def defs[M_COUNT] = {
#define METRIC(id, name, labels, type, help) [M_##id] = {name, labels, type, help},
#include "metrics.def"
#undef METRIC
};

static _Atomic int64_t values[M_COUNT];

/* Latency buckets in seconds, Prometheus style (cumulative at render). */
static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                 0.05,   0.1,   0.25,   0.5,   1,    2.5};
#define N_BUCKETS (sizeof buckets / sizeof buckets[0])

/* Statuses ticketd answers; anything else counts as "other". */
static const int statuses[] = {200, 201, 204, 400, 401, 403, 404, 405,
                               409, 413, 415, 422, 500, 501, 503};
#define N_STATUSES (sizeof statuses / sizeof statuses[0])
/* The routes' slots, then one for unmatched paths and one for methods not
 * allowed. */
#define N_ROUTE_SLOTS    (METRICS_ROUTES_MAX + 2)
#define SLOT_UNMATCHED   METRICS_ROUTES_MAX
#define SLOT_NOT_ALLOWED (METRICS_ROUTES_MAX + 1)

/* The labels metrics_routes() was given at boot: written once before any
 * request, read only afterwards. */
static const char *route_labels[METRICS_ROUTES_MAX];
static int n_routes;

static _Atomic uint64_t req_count[N_ROUTE_SLOTS][N_STATUSES + 1];
static _Atomic uint64_t req_bucket[N_ROUTE_SLOTS][N_BUCKETS + 1];
static _Atomic uint64_t req_sum_us[N_ROUTE_SLOTS];

/* Batch sizes, in orders: powers of two up to 64, where a loop's batch
 * rarely reaches (MERGE_MAX_LIMIT allows more; those count in +Inf). */
static const double batch_buckets[] = {1, 2, 4, 8, 16, 32, 64};
#define N_BATCH_BUCKETS (sizeof batch_buckets / sizeof batch_buckets[0])
static _Atomic uint64_t batch_bucket[N_BATCH_BUCKETS + 1];
static _Atomic uint64_t batch_sum;

/* A batch's time, in seconds: a batch takes a millisecond or two at the
 * database, so the request latency's buckets would put most of them in
 * two; a lock wait can take up to the server's bound, seconds. */
static const double batch_time_buckets[] = {0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008,
                                            0.016,   0.032,  0.064, 0.25,  1,     5};
#define N_BATCH_TIME_BUCKETS (sizeof batch_time_buckets / sizeof batch_time_buckets[0])
static _Atomic uint64_t batch_time_bucket[N_BATCH_TIME_BUCKETS + 1];
static _Atomic uint64_t batch_time_sum_us;

/* The first of n upper bounds (inclusive, ascending) that holds v; n when
 * none does (the +Inf bucket). */
static size_t bucket_of(const double *bounds, size_t n, double v)
{
    for (size_t i = 0; i < n; i++) {
        if (v <= bounds[i])
            return i;
    }
    return n;
}

void metrics_add(enum metric m, int64_t n)
{
    atomic_fetch_add_explicit(&values[m], n, memory_order_relaxed);
}

void metrics_inc(enum metric m)
{
    metrics_add(m, 1);
}

void metrics_set(enum metric m, int64_t v)
{
    atomic_store_explicit(&values[m], v, memory_order_relaxed);
}

int64_t metrics_get(enum metric m)
{
    return atomic_load_explicit(&values[m], memory_order_relaxed);
}

int64_t metrics_tx_retries(void)
{
    return metrics_get(M_TX_RETRIES_DEADLOCK) + metrics_get(M_TX_RETRIES_LOCK_WAIT) +
           metrics_get(M_TX_RETRIES_CERTIFICATION) + metrics_get(M_TX_RETRIES_OTHER);
}

void metrics_routes(const char *const *labels, int n)
{
    if (n > METRICS_ROUTES_MAX)
        abort(); /* a route table larger than the slots: raise METRICS_ROUTES_MAX */
    for (int i = 0; i < n; i++)
        route_labels[i] = labels[i];
    n_routes = n;
}

static int route_slot(int route)
{
    if (route >= 0 && route < n_routes)
        return route;
    return route == METRICS_ROUTE_NOT_ALLOWED ? SLOT_NOT_ALLOWED : SLOT_UNMATCHED;
}

void metrics_request(int route, int status, double seconds)
{
    int slot = route_slot(route);
    size_t si = N_STATUSES;
    for (size_t i = 0; i < N_STATUSES; i++) {
        if (statuses[i] == status) {
            si = i;
            break;
        }
    }
    size_t b = bucket_of(buckets, N_BUCKETS, seconds);
    atomic_fetch_add_explicit(&req_count[slot][si], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&req_bucket[slot][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&req_sum_us[slot], (uint64_t)(seconds * 1e6), memory_order_relaxed);
}

void metrics_order_batch(int n)
{
    size_t b = bucket_of(batch_buckets, N_BATCH_BUCKETS, n);
    atomic_fetch_add_explicit(&batch_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&batch_sum, (uint64_t)n, memory_order_relaxed);
}

void metrics_order_batch_time(double seconds)
{
    size_t b = bucket_of(batch_time_buckets, N_BATCH_TIME_BUCKETS, seconds);
    atomic_fetch_add_explicit(&batch_time_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&batch_time_sum_us, (uint64_t)(seconds * 1e6), memory_order_relaxed);
}

static const char *slot_label(int slot)
{
    if (slot < n_routes)
        return route_labels[slot];
    return slot == SLOT_NOT_ALLOWED ? "(method not allowed)" : "(unmatched)";
}

/* One histogram without labels: its help and type, n cumulative buckets
 * and +Inf from counts (n + 1 of them), then its sum, given as text, and
 * its count. */
static void put_histogram(struct text *t, const char *name, const char *help, const double *bounds,
                          const _Atomic uint64_t *counts, size_t n, const char *sum)
{
    text_put(t, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t b = 0; b < n; b++) {
        cum += atomic_load_explicit(&counts[b], memory_order_relaxed);
        text_put(t, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[b], (unsigned long long)cum);
    }
    cum += atomic_load_explicit(&counts[n], memory_order_relaxed);
    text_put(t, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    text_put(t, "%s_sum %s\n", name, sum);
    text_put(t, "%s_count %llu\n", name, (unsigned long long)cum);
}

char *metrics_render(size_t *len)
{
    struct text t = {xmalloc(16384), 0, 16384};
    t.s[0] = '\0';
    const char *last = "";
    for (int i = 0; i < M_COUNT; i++) {
        const struct metric_def *d = &defs[i];
        if (strcmp(d->name, last) != 0) {
            /* The first row of a name carries its help and type. */
            text_put(&t, "# HELP %s %s\n# TYPE %s %s\n", d->name, d->help, d->name, d->type);
            last = d->name;
        }
        if (d->labels[0] != '\0')
            text_put(&t, "%s{%s} %lld\n", d->name, d->labels, (long long)metrics_get(i));
        else
            text_put(&t, "%s %lld\n", d->name, (long long)metrics_get(i));
    }

    text_put(&t, "# HELP ticketd_http_requests_total HTTP requests by route and status.\n"
                 "# TYPE ticketd_http_requests_total counter\n");
    for (int s = 0; s < N_ROUTE_SLOTS; s++) {
        for (size_t i = 0; i <= N_STATUSES; i++) {
            uint64_t v = atomic_load_explicit(&req_count[s][i], memory_order_relaxed);
            if (v == 0)
                continue;
            if (i < N_STATUSES)
                text_put(&t, "ticketd_http_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
                         slot_label(s), statuses[i], (unsigned long long)v);
            else
                text_put(&t, "ticketd_http_requests_total{route=\"%s\",status=\"other\"} %llu\n",
                         slot_label(s), (unsigned long long)v);
        }
    }

    text_put(&t, "# HELP ticketd_http_request_duration_seconds Request latency by route.\n"
                 "# TYPE ticketd_http_request_duration_seconds histogram\n");
    for (int s = 0; s < N_ROUTE_SLOTS; s++) {
        uint64_t counts[N_BUCKETS + 1];
        uint64_t total = 0;
        for (size_t b = 0; b <= N_BUCKETS; b++) {
            counts[b] = atomic_load_explicit(&req_bucket[s][b], memory_order_relaxed);
            total += counts[b];
        }
        if (total == 0)
            continue;
        uint64_t cum = 0;
        for (size_t b = 0; b < N_BUCKETS; b++) {
            cum += counts[b];
            text_put(&t,
                     "ticketd_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} "
                     "%llu\n",
                     slot_label(s), buckets[b], (unsigned long long)cum);
        }
        text_put(&t,
                 "ticketd_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                 slot_label(s), (unsigned long long)total);
        uint64_t sum_us = atomic_load_explicit(&req_sum_us[s], memory_order_relaxed);
        text_put(&t, "ticketd_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
                 slot_label(s), (double)sum_us / 1e6);
        text_put(&t, "ticketd_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                 slot_label(s), (unsigned long long)total);
    }

    /* Written even before the first batch (all zero), so that a scrape
     * finds the series from the start and a rate over it has a base. */
    char sum[32];
    snprintf(sum, sizeof sum, "%llu",
             (unsigned long long)atomic_load_explicit(&batch_sum, memory_order_relaxed));
    put_histogram(&t, "ticketd_order_batch_size",
                  "Orders per merged order transaction (a lone order is a batch of one).",
                  batch_buckets, batch_bucket, N_BATCH_BUCKETS, sum);
    snprintf(sum, sizeof sum, "%.6f",
             (double)atomic_load_explicit(&batch_time_sum_us, memory_order_relaxed) / 1e6);
    put_histogram(&t, "ticketd_order_batch_seconds",
                  "Time each order transaction took, from leaving the line to its outcomes (a "
                  "lone order's too).",
                  batch_time_buckets, batch_time_bucket, N_BATCH_TIME_BUCKETS, sum);
    *len = t.len;
    return t.s;
}
