/* metrics.h - process-wide counters, gauges and the request latency
 * histogram, rendered in the Prometheus text format for GET /metrics.
 *
 * Every update is one relaxed atomic add: safe from any thread and cheap
 * enough for the hot path. Labels are fixed at compile time, so the number
 * of series is bounded whatever clients send. */
#ifndef TICKETD_METRICS_H
#define TICKETD_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum metric {
    M_ORDERS_CREATED,
    M_STOCK_CONFLICTS,
    M_TX_RETRIES_DEADLOCK, /* ticketd_transaction_retries_total, by cause */
    M_TX_RETRIES_LOCK_WAIT,
    M_TX_RETRIES_CERTIFICATION,
    M_TX_RETRIES_OTHER,
    M_DUP_RESPONSE_CACHE,
    M_DUP_UNIQUE_INDEX,
    M_DUP_INFLIGHT_KEY,
    M_DUP_SESSION_LOCK,
    M_DUP_TOKEN,
    M_DUP_KEY_REUSED,
    M_INFLIGHT_TAKEOVERS,
    M_TOKEN_FORGOTTEN,
    M_DEP_ERRORS_REDIS,
    M_DEP_ERRORS_MYSQL,
    M_BREAKER_OPENED_REDIS,
    M_BREAKER_OPENED_MYSQL,
    M_REDIS_DEGRADED,
    M_PAYMENTS_APPLIED,
    M_PAYMENTS_FAILED,
    M_PAYMENTS_DUPLICATE,
    M_PAYMENTS_LATE,
    M_PAYMENTS_MISMATCH,
    M_PAYMENTS_REPLAYED,
    M_PAYMENTS_TXN_REUSED,
    M_ORDERS_CANCELLED,
    M_ORDERS_EXPIRED,
    M_EVENTS_PUBLISHED,
    M_EVENTS_CONSUMED_POINTS,
    M_EVENTS_CONSUMED_TICKETING,
    M_EVENTS_DUPLICATE_POINTS,
    M_EVENTS_DUPLICATE_TICKETING,
    M_EVENTS_RECLAIMED,
    M_EVENTS_DEAD_LETTERED,
    M_OUTBOX_BACKLOG,    /* gauge */
    M_STREAM_LAG,        /* gauge */
    M_INFLIGHT_REQUESTS, /* gauge */
    M_HTTP_HEAD_TIMEOUTS,
    M_HTTP_REQUEST_TIMEOUTS,
    M_HTTP_CONNECTIONS_SHED,
    /* The retention job (retention.h), one of each per retained table. */
    M_PARTITIONS_DROPPED_OUTBOX,
    M_PARTITIONS_DROPPED_CONSUME,
    M_PARTITIONS_DROPPED_DEAD_LETTERS,
    M_PARTITIONS_DROPPED_IDEM,
    M_RETAINED_ROWS_OUTBOX, /* gauge */
    M_RETAINED_ROWS_CONSUME,
    M_RETAINED_ROWS_DEAD_LETTERS,
    M_RETAINED_ROWS_IDEM,
    M_RETAINED_OLDEST_OUTBOX, /* gauge */
    M_RETAINED_OLDEST_CONSUME,
    M_RETAINED_OLDEST_DEAD_LETTERS,
    M_RETAINED_OLDEST_IDEM,
    /* The order-key filter in front of the refusals' database look-up. */
    M_REFUSAL_DB_LOOKUPS,
    M_BLOOM_SAVED,
    M_BLOOM_MAYBE,
    M_BLOOM_UNTRUSTED,
    M_BLOOM_BUILDS,
    M_BLOOM_MISSES_SEEN,
    M_REDIS_LOST_RECORDS,
    /* Merged new orders (store_merge.h): the mean batch is their ratio. */
    M_ORDER_BATCHES,
    M_ORDER_BATCH_ORDERS,
    M_ORDER_BATCH_QUEUED, /* gauge */
    /* Pipelined Redis commands (redis_pipe.c): the mean depth is their ratio. */
    M_REDIS_PIPELINES,
    M_REDIS_PIPELINED_COMMANDS,
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

/* Returns the new text of every metric (caller frees). */
char *metrics_render(size_t *len);

#endif
