/* cart.h - a cart: several orders bought together, a key per item and a
 * key for the batch.
 *
 * One key cannot record a batch whose items partly succeeded: each item is
 * an order under its own item key (its request_id) and goes through
 * orders_create, every defence of a single order included, so an item
 * that has its order is replayed by a retry and never bought twice, while
 * an item that failed is run again. The batch key (the Idempotency-Key)
 * guards the batch as a whole:
 *
 *   - in Redis, its own in-flight marker (a copy still running: 409) and,
 *     once every item has its order, the batch's answer, replayed;
 *   - in the database, the batch's answer in idempotency_records
 *     (store_idem.h), written after each run: a final answer is replayed
 *     from it after Redis lost its records, and the fingerprint of the item
 *     list refuses another list under the same batch key (422);
 *   - the order token, spent once by the batch key (its items are created
 *     without one).
 *
 * Domain logic only: it calls the ports and never sees HTTP or JSON.
 * Thread-safe. */
#ifndef TICKETD_CART_H
#define TICKETD_CART_H

#include "idem.h"
#include "orders.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CART_MAX_ITEMS 20

struct cart_request {
    int64_t user_id;
    const char *key;               /* the batch key */
    const char *token;             /* X-Order-Token, or NULL when not required */
    const struct idem_item *items; /* borrowed */
    size_t n;                      /* 1..CART_MAX_ITEMS */
    int wait_s;                    /* Prefer: wait=N applied, or 0 (keywait.h) */
};

enum cart_outcome {
    CART_RAN,         /* the items ran: body lists each one's answer */
    CART_REPLAYED,    /* a final answer, replayed byte for byte */
    CART_KEY_REUSED,  /* the batch key was used with another item list */
    CART_IN_PROGRESS, /* a copy of this batch is still running */
    CART_TOKEN_INVALID,
    CART_UNAVAILABLE, /* nothing ran: a dependency was down */
};

/* Renders a batch's answer: its body (a new string, caller frees) from the
 * request's items and the answer of each (res[i], n of them); complete when
 * every item has its order. Given by the API layer. */
typedef char *(*cart_render_fn)(const struct cart_request *rq, const struct order_result *res,
                                bool complete, size_t *len);

struct cart_result {
    enum cart_outcome outcome;
    enum order_layer layer; /* the defence that answered for the batch key */
    char *body;             /* CART_RAN and CART_REPLAYED: new, caller frees */
    size_t body_len;
    bool complete;
};

/* Runs the batch. item_render renders each item's order (as for POST
 * /orders), render the whole answer. Always fills *res (cleared on entry). */
void cart_run(struct app *app, const struct cart_request *rq,
              const struct order_render *item_render, cart_render_fn render,
              struct cart_result *res);

void cart_result_cleanup(struct cart_result *res);

#endif
