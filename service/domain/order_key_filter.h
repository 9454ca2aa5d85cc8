/* order_key_filter.h - the order-key filter (bloom.h): not a defence, it
 * spares the database the look-up that comes before most refusals Redis
 * decided ("may this key have an order?"). Its bits and state live in
 * Redis (cache.h); its "certainly not" is taken only from a filter that
 * has seen every key (bloom_job.h). Thread-safe. */
#ifndef TICKETD_ORDER_KEY_FILTER_H
#define TICKETD_ORDER_KEY_FILTER_H

#include <stdbool.h>
#include <stdint.h>

struct app;

/* May this user have an order under this key? False only when the
 * database look-up can be skipped. */
bool order_key_filter_may_have(struct app *app, int64_t user_id, const char *key);

/* The key has, or may have in a moment, an order: tells the filter.
 * Returns false when it could not be told. */
bool order_key_filter_note(struct app *app, int64_t user_id, const char *key);

#endif
