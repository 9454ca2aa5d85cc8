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
    [M_ORDERS_CREATED] = {"ticketd_orders_created_total", "", "counter", "Orders created."},
    [M_STOCK_CONFLICTS] = {"ticketd_stock_conflicts_total", "", "counter",
                           "Orders refused because the stock compare-and-set found too little."},
    [M_TX_RETRIES_DEADLOCK] = {"ticketd_transaction_retries_total", "cause=\"deadlock\"", "counter",
                               "Transactions retried, by cause: a deadlock, a lock wait timeout, "
                               "a Galera certification conflict at COMMIT, or other (a random "
                               "order number that collided)."},
    [M_TX_RETRIES_LOCK_WAIT] = {"ticketd_transaction_retries_total", "cause=\"lock_wait\"", NULL,
                                NULL},
    [M_TX_RETRIES_CERTIFICATION] = {"ticketd_transaction_retries_total", "cause=\"certification\"",
                                    NULL, NULL},
    [M_TX_RETRIES_OTHER] = {"ticketd_transaction_retries_total", "cause=\"other\"", NULL, NULL},
    [M_DUP_RESPONSE_CACHE] = {"ticketd_duplicates_blocked_total", "layer=\"response-cache\"",
                              "counter", "Duplicate requests answered or refused, by defence."},
    [M_DUP_UNIQUE_INDEX] = {"ticketd_duplicates_blocked_total", "layer=\"unique-index\"", NULL,
                            NULL},
    [M_DUP_INFLIGHT_KEY] = {"ticketd_duplicates_blocked_total", "layer=\"inflight-key\"", NULL,
                            NULL},
    [M_DUP_SESSION_LOCK] = {"ticketd_duplicates_blocked_total", "layer=\"session-lock\"", NULL,
                            NULL},
    [M_DUP_TOKEN] = {"ticketd_duplicates_blocked_total", "layer=\"token\"", NULL, NULL},
    [M_DUP_KEY_REUSED] = {"ticketd_duplicates_blocked_total", "layer=\"fingerprint\"", NULL, NULL},
    [M_INFLIGHT_TAKEOVERS] = {"ticketd_inflight_takeovers_total", "", "counter",
                              "In-flight markers of requests whose process died, taken over by "
                              "a retry."},
    [M_TOKEN_FORGOTTEN] = {"ticketd_order_tokens_forgotten_total", "", "counter",
                           "Genuine order tokens Redis no longer knew (it lost its records); "
                           "the database decided."},
    [M_DEP_ERRORS_REDIS] = {"ticketd_dependency_errors_total", "dependency=\"redis\"", "counter",
                            "Failed calls to a dependency."},
    [M_DEP_ERRORS_MYSQL] = {"ticketd_dependency_errors_total", "dependency=\"mysql\"", NULL, NULL},
    [M_BREAKER_OPENED_REDIS] = {"ticketd_dependency_breaker_opened_total", "dependency=\"redis\"",
                                "counter",
                                "Times a dependency was found down and calls to it began failing "
                                "fast."},
    [M_BREAKER_OPENED_MYSQL] = {"ticketd_dependency_breaker_opened_total", "dependency=\"mysql\"",
                                NULL, NULL},
    [M_REDIS_DEGRADED] = {"ticketd_redis_degraded_requests_total", "", "counter",
                          "Order requests served without the Redis defences (policy degrade)."},
    [M_PAYMENTS_APPLIED] = {"ticketd_payment_callbacks_total", "outcome=\"APPLIED\"", "counter",
                            "Payment callbacks processed for the first time, by outcome."},
    [M_PAYMENTS_FAILED] = {"ticketd_payment_callbacks_total", "outcome=\"PAYMENT_FAILED\"", NULL,
                           NULL},
    [M_PAYMENTS_DUPLICATE] = {"ticketd_payment_callbacks_total", "outcome=\"DUPLICATE_PAYMENT\"",
                              NULL, NULL},
    [M_PAYMENTS_LATE] = {"ticketd_payment_callbacks_total", "outcome=\"LATE_PAYMENT\"", NULL, NULL},
    [M_PAYMENTS_MISMATCH] = {"ticketd_payment_callbacks_total", "outcome=\"AMOUNT_MISMATCH\"", NULL,
                             NULL},
    [M_PAYMENTS_REPLAYED] = {"ticketd_payment_callbacks_replayed_total", "", "counter",
                             "Payment callbacks answered from the stored outcome of their txn_id."},
    [M_PAYMENTS_TXN_REUSED] = {"ticketd_payment_callbacks_rejected_total",
                               "reason=\"txn_id_reused\"", "counter",
                               "Payment callbacks refused, nothing recorded: a txn_id already "
                               "recorded for another order, amount or status."},
    [M_ORDERS_CANCELLED] = {"ticketd_orders_cancelled_total", "cause=\"user\"", "counter",
                            "Orders cancelled, stock given back."},
    [M_ORDERS_EXPIRED] = {"ticketd_orders_cancelled_total", "cause=\"expired\"", NULL, NULL},
    [M_EVENTS_PUBLISHED] = {"ticketd_events_published_total", "", "counter",
                            "Outbox rows relayed to the event stream."},
    [M_EVENTS_CONSUMED_POINTS] = {"ticketd_events_consumed_total", "consumer=\"points\"", "counter",
                                  "Events whose effect a consumer applied."},
    [M_EVENTS_CONSUMED_TICKETING] = {"ticketd_events_consumed_total", "consumer=\"ticketing\"",
                                     NULL, NULL},
    [M_EVENTS_DUPLICATE_POINTS] = {"ticketd_events_duplicates_skipped_total", "consumer=\"points\"",
                                   "counter", "Redelivered events acknowledged without effect."},
    [M_EVENTS_DUPLICATE_TICKETING] = {"ticketd_events_duplicates_skipped_total",
                                      "consumer=\"ticketing\"", NULL, NULL},
    [M_EVENTS_RECLAIMED] = {"ticketd_events_reclaimed_total", "", "counter",
                            "Pending events taken over from an idle consumer."},
    [M_EVENTS_DEAD_LETTERED] = {"ticketd_events_dead_lettered_total", "", "counter",
                                "Events moved to the dead-letter stream."},
    [M_OUTBOX_BACKLOG] = {"ticketd_outbox_backlog", "", "gauge",
                          "Outbox rows not yet relayed, at the relay's last look."},
    [M_STREAM_LAG] = {"ticketd_stream_pending", "", "gauge",
                      "Stream entries delivered but not yet acknowledged."},
    [M_INFLIGHT_REQUESTS] = {"ticketd_inflight_requests", "", "gauge",
                             "HTTP requests being served now."},
    [M_HTTP_HEAD_TIMEOUTS] = {"ticketd_http_head_timeouts_total", "", "counter",
                              "Connections closed for not sending a whole request head in time."},
    [M_HTTP_REQUEST_TIMEOUTS] = {"ticketd_http_request_timeouts_total", "", "counter",
                                 "Connections closed for not sending a whole request (head and "
                                 "body) in time."},
    [M_HTTP_CONNECTIONS_SHED] = {"ticketd_http_connections_shed_total", "", "counter",
                                 "Connections closed near the connection cap, the longest "
                                 "without a whole request first."},
    [M_PARTITIONS_DROPPED_OUTBOX] = {"ticketd_partitions_dropped_total", "table=\"outbox\"",
                                     "counter",
                                     "Day partitions this process dropped past their retention."},
    [M_PARTITIONS_DROPPED_CONSUME] = {"ticketd_partitions_dropped_total",
                                      "table=\"consume_records\"", NULL, NULL},
    [M_PARTITIONS_DROPPED_DEAD_LETTERS] = {"ticketd_partitions_dropped_total",
                                           "table=\"dead_letters\"", NULL, NULL},
    [M_PARTITIONS_DROPPED_IDEM] = {"ticketd_partitions_dropped_total",
                                   "table=\"idempotency_records\"", NULL, NULL},
    [M_RETAINED_ROWS_OUTBOX] = {"ticketd_retained_rows", "table=\"outbox\"", "gauge",
                                "Rows of a retained table (InnoDB's estimate), at the retention "
                                "job's last round."},
    [M_RETAINED_ROWS_CONSUME] = {"ticketd_retained_rows", "table=\"consume_records\"", NULL, NULL},
    [M_RETAINED_ROWS_DEAD_LETTERS] = {"ticketd_retained_rows", "table=\"dead_letters\"", NULL,
                                      NULL},
    [M_RETAINED_ROWS_IDEM] = {"ticketd_retained_rows", "table=\"idempotency_records\"", NULL, NULL},
    [M_RETAINED_OLDEST_OUTBOX] = {"ticketd_retained_oldest_age_seconds", "table=\"outbox\"",
                                  "gauge",
                                  "Age of a retained table's oldest row (-1: none), at the "
                                  "retention job's last round."},
    [M_RETAINED_OLDEST_CONSUME] = {"ticketd_retained_oldest_age_seconds",
                                   "table=\"consume_records\"", NULL, NULL},
    [M_RETAINED_OLDEST_DEAD_LETTERS] = {"ticketd_retained_oldest_age_seconds",
                                        "table=\"dead_letters\"", NULL, NULL},
    [M_RETAINED_OLDEST_IDEM] = {"ticketd_retained_oldest_age_seconds",
                                "table=\"idempotency_records\"", NULL, NULL},
    [M_REFUSAL_DB_LOOKUPS] = {"ticketd_refusal_db_lookups_total", "", "counter",
                              "Refusals Redis decided that the database was asked about (does "
                              "the key have an order?)."},
    [M_BLOOM_SAVED] = {"ticketd_bloom_checks_total", "answer=\"saved\"", "counter",
                       "Order-key filter answers on the refusal path: saved (a trusted "
                       "'certainly not', no query), maybe, untrusted (not complete)."},
    [M_BLOOM_MAYBE] = {"ticketd_bloom_checks_total", "answer=\"maybe\"", NULL, NULL},
    [M_BLOOM_UNTRUSTED] = {"ticketd_bloom_checks_total", "answer=\"untrusted\"", NULL, NULL},
    [M_BLOOM_BUILDS] = {"ticketd_bloom_builds_total", "", "counter",
                        "Order-key filters this process built from the orders table."},
    [M_BLOOM_MISSES_SEEN] = {"ticketd_bloom_misses_untrusted_total", "", "counter",
                             "Rounds in which this process found orders recorded without the "
                             "order-key filter (order_key_filter_misses) and untrusted it."},
    [M_REDIS_LOST_RECORDS] = {"ticketd_redis_lost_records_total", "", "counter",
                              "Beats that found this instance's liveness key gone within its "
                              "TTL: Redis lost records."},
    [M_ORDER_BATCHES] = {"ticketd_order_batches_total", "", "counter",
                         "Database transactions that placed new orders together (a lone "
                         "order is a batch of one)."},
    [M_ORDER_BATCH_ORDERS] = {"ticketd_order_batch_orders_total", "", "counter",
                              "New orders those transactions carried: divided by the batches, "
                              "the mean batch size."},
    [M_ORDER_BATCH_QUEUED] = {"ticketd_order_batch_queued", "", "gauge",
                              "New orders waiting for the next merged transaction."},
    [M_REDIS_PIPELINES] = {"ticketd_redis_pipelines_total", "", "counter",
                           "Writes that carried the Redis commands of requests in flight "
                           "together (a lone command is a pipeline of one)."},
    [M_REDIS_PIPELINED_COMMANDS] = {"ticketd_redis_pipelined_commands_total", "", "counter",
                                    "Commands those writes carried: divided by the pipelines, "
                                    "the mean depth."},
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
    size_t b = N_BUCKETS;
    for (size_t i = 0; i < N_BUCKETS; i++) {
        if (seconds <= buckets[i]) {
            b = i;
            break;
        }
    }
    atomic_fetch_add_explicit(&req_count[slot][si], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&req_bucket[slot][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&req_sum_us[slot], (uint64_t)(seconds * 1e6), memory_order_relaxed);
}

static const char *slot_label(int slot)
{
    if (slot < n_routes)
        return route_labels[slot];
    return slot == SLOT_NOT_ALLOWED ? "(method not allowed)" : "(unmatched)";
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
    *len = t.len;
    return t.s;
}
