/* bloom_job.h - keeps the order-key filter (bloom.h) worth trusting, a
 * background job (job.h), off with the filter (TICKETD_DEFENSES=-bloom):
 * every TICKETD_BLOOM_CHECK_MS, in every `serve` (TICKETD_WORKERS=1) and
 * `worker`, it looks at the filter's state in Redis. With no state at all
 * (a fresh, flushed or restarted Redis, or a filter declared untrusted
 * after Redis lost records: liveness.h) one process wins the build: it
 * empties the bits, adds the key of every order in the orders table, page
 * by page, and only then marks the filter complete. Orders recorded while
 * it builds add their own keys (order_key_filter.c), so a complete filter has seen
 * every order, the ones older than the filter included.
 *
 * It also carries this process's app->bloom_missed (an order the filter
 * could not be told of) to Redis: the state is deleted, every process
 * stops trusting the filter, and the next round builds it again. The
 * same for any instance's such orders, which each leave a row in
 * order_key_filter_misses (sql/012) in their own transaction: an instance
 * that cannot reach Redis cannot carry its flag there, and may die before
 * it can, so every round of every instance that reaches Redis reads those
 * rows, untrusts the filter and deletes them. The others believe the
 * filter about such an order for at most one round of the first of them
 * to look (TICKETD_BLOOM_CHECK_MS). */
#ifndef TICKETD_BLOOM_JOB_H
#define TICKETD_BLOOM_JOB_H

#include "job.h"

extern const struct job bloom_job;

#endif
