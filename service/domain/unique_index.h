/* unique_index.h - the database's word on an order (orders.h, layers 5
 * and 6): the order's transaction, where the unique index (user, session,
 * request) refuses a second order for a key and the stock compare-and-set
 * refuses an oversold seat (the statements: store_mysql.c
 * place_in_one_trip, sql/013_place_orders.sql for a merged batch), and the
 * duplicate's look-up, which answers a copy with the order its key
 * already has. What these say is true with Redis gone: the last word.
 * Thread-safe. */
#ifndef TICKETD_UNIQUE_INDEX_H
#define TICKETD_UNIQUE_INDEX_H

#include "order_types.h"

#include <stdbool.h>

struct app;

/* What the flow tells the transaction and the look-up (order_steps.h):
 * the token to record with the order, and the layer that finds a copy. */
struct unique_index_ask {
    const char *token_key;     /* the token's key to record, or NULL */
    bool filter_missed;        /* the order-key filter was not told of the key */
    enum order_layer found_by; /* LAYER_UNIQUE_INDEX, or the demo's look-up */
};

/* Looks for the order this user already placed under the key and makes it
 * the answer (layer found_by): replayed when the payload matches, 422 when
 * the key was used for another one. Returns true when an order was found
 * and replayed; false with res untouched when there is none, or with res
 * set to the refusal or the failure. */
bool unique_index_find_copy(const struct order_request *rq, enum order_layer found_by,
                            const struct order_render *render, struct order_result *res);

/* The order's transaction, retried after deadlocks, with a fresh order
 * number each attempt; a copy the unique index refused is answered with
 * the order found (unique_index_find_copy). The order records the token
 * and the filter's miss as ask says (store.h). */
void unique_index_place(struct app *app, const struct order_request *rq,
                        const struct unique_index_ask *ask, const struct order_render *render,
                        struct order_result *res);

/* Makes a fresh, random order number (ORDER_NO_LEN + 1 bytes). */
void unique_index_new_number(char *out);

#endif
