/* orders.h - creating an order, with every defence against duplicates in
 * the order a request meets them (cheapest first):
 *
 *   1. response cache   in-process, then the Redis record of the key:
 *                       a completed request is replayed, byte for byte;
 *   2. in-flight key    SET NX PX marker with the payload fingerprint:
 *                       a copy of a request still running gets 409;
 *   3. session lock     one order at a time per user and session (the
 *                       double click that made a new key);
 *   4. one-time token   consumed atomically, bound to the user;
 *   5. unique index     (user, session, request) in the database, the
 *                       last word: a duplicate is looked up and replayed;
 *   6. stock CAS        stock = stock - q in the order's transaction,
 *                       refused by CHECK (stock >= 0) when the seats are
 *                       gone (ck_sessions_stock; store_mysql.c, and for a
 *                       batch sql/013_place_orders.sql).
 *
 * Redis (1-4) only accelerates; with it gone (policy degrade) 5 and 6
 * still give exactly one order per key. Only a success is remembered: any
 * failure removes this request's marker and lock so the key can be retried.
 *
 * Each layer is a file named after it: response_cache.c (1, in process),
 * inflight_key.c (the key protocol: 1 in Redis, 2, and 3 and 4 in its
 * script), session_lock.c (3 alone), token.c (4), unique_index.c (5, and 6
 * in the same transaction); orders.c is the path through them. What a
 * request and its answer are is order_types.h's, below every defence, so
 * that none of them includes this flow.
 *
 * Domain logic only: it calls the store and cache ports and never sees
 * HTTP or JSON; the bytes of an answer come from the API layer's renderer
 * (struct order_render). Thread-safe. */
#ifndef TICKETD_ORDERS_H
#define TICKETD_ORDERS_H

#include "order_types.h"

#include <stdbool.h>
#include <stddef.h>

struct app;

/* The layer's name (defence_name's for a defence); NULL for LAYER_NONE. */
const char *order_layer_name(enum order_layer layer);

/* Layer 1 alone, in process: true, with *res filled (a replay, or 422 for
 * another payload), when this process answered the key before. No I/O:
 * the loop that read the request calls it at once, before any fiber.
 * *res is cleared on entry. */
bool orders_replay_local(struct app *app, const struct order_request *rq, struct order_result *res);

/* Runs the whole create flow. Always fills *res (cleared on entry). */
void orders_create(struct app *app, const struct order_request *rq,
                   const struct order_render *render, struct order_result *res);

void order_result_cleanup(struct order_result *res);

/* The key a cart's item is ordered under (fresh: IDEM_OWNER_LEN + 1
 * bytes): its own, or the demo's naive step's (order_steps.h). */
const char *orders_item_key(struct app *app, const char *key, char *fresh);
/* True when items are ordered under their own keys: only then does the
 * batch's token go with them, to be recorded with the first that buys. */
bool orders_items_keyed(const struct app *app);

#endif
