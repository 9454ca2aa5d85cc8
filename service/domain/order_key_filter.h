/* order_key_filter.h - the order-key filter (bloom.h): not a defence, it
 * spares the database the look-up that comes before most refusals Redis
 * decided ("may this key have an order?"). Its bits and state live in
 * Redis (cache.h); its "certainly not" is taken only from a filter that
 * has seen every key (bloom_job.h). Thread-safe. */
#ifndef TICKETD_ORDER_KEY_FILTER_H
#define TICKETD_ORDER_KEY_FILTER_H

#include "bloom.h"
#include "cache.h"

#include <stdbool.h>
#include <stdint.h>

struct app;

/* The key's bits, for the key's script to set when it lets the order go on
 * (cache_key_begin): the filter then hears of the key in the round trip
 * the request makes anyway, before the order's transaction. pos holds the
 * positions (BLOOM_MAX_K); note borrows it. note->k is 0 when the filter is
 * off. */
void order_key_filter_prepare(struct app *app, int64_t user_id, const char *key,
                              uint64_t pos[BLOOM_MAX_K], struct filter_note *note);

/* May this user have an order under this key? False only when the
 * database look-up can be skipped. */
bool order_key_filter_may_have(struct app *app, int64_t user_id, const char *key);

/* The key has, or may have in a moment, an order: tells the filter, in a
 * round trip of its own, unless noted says the key's script told it
 * already. Returns false when it could not be told. */
bool order_key_filter_note(struct app *app, int64_t user_id, const char *key, bool noted);

#endif
