/* metrics.h - process-wide counters, gauges and the histograms of request
 * latency and order batch size, rendered in the Prometheus text format for
 * GET /metrics.
 *
 * Every update is one relaxed atomic add: safe from any thread and cheap
 * enough for the hot path. Labels are fixed at compile time, so the number
 * of series is bounded whatever clients send. */
#ifndef TICKETD_METRICS_H
#define TICKETD_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric {
#define METRIC(id, name, labels, type, help) M_##id,
#include "metrics.def"
#undef METRIC
    M_COUNT
};

/* Adds n to a counter (or a gauge). */
void metrics_add(enum metric m, int64_t n);
void metrics_inc(enum metric m);
void metrics_set(enum metric m, int64_t v);
int64_t metrics_get(enum metric m);
/* Every transaction retry, whatever its cause. */
int64_t metrics_tx_retries(void);

/* Routes are counted by their index in the table given at boot; a request
 * that matched none is one of these. */
#define METRICS_ROUTES_MAX        32
#define METRICS_ROUTE_UNMATCHED   (-1)
#define METRICS_ROUTE_NOT_ALLOWED (-2)

/* The routes' labels, index by index, once at boot before any request
 * (labels borrowed for the life of the process; n at most
 * METRICS_ROUTES_MAX, or abort). Metrics know no router: the composition
 * root hands them the route table's labels. */
void metrics_routes(const char *const *labels, int n);

/* Records one finished request. route is an index given to
 * metrics_routes(), or METRICS_ROUTE_NOT_ALLOWED; anything else counts as
 * unmatched. status is any HTTP status. */
void metrics_request(int route, int status, double seconds);

/* Records one merged order transaction of n orders (n >= 1) in the batch
 * size histogram, ticketd_order_batch_size: the mean batch
 * (ticketd_order_batch_orders_total over ticketd_order_batches_total)
 * hides whether orders meet in even batches or in a few large ones among
 * many lone orders. */
void metrics_order_batch(int n);

/* Records how long one order transaction took, from leaving the line to
 * its outcomes, in ticketd_order_batch_seconds. One batch is at the
 * database at a time (merge_turn.h), so the rate of its _sum is the share
 * of the time the database had a batch: near 1, the batches' own time
 * paces the orders, and only larger batches or cheaper ones sell more. */
void metrics_order_batch_time(double seconds);

/* Returns the new text of every metric (caller frees). */
char *metrics_render(size_t *len);

#endif
