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
 *   6. stock CAS        stock = stock - q WHERE stock >= q.
 *
 * Redis (1-4) only accelerates; with it gone (policy degrade) 5 and 6
 * still give exactly one order per key. Only a success is remembered: any
 * failure removes this request's marker and lock so the key can be retried.
 *
 * Each layer is a file named after it: response_cache.c (1, in process),
 * inflight_key.c (the key protocol: 1 in Redis, 2, and 3 and 4 in its
 * script), session_lock.c (3 alone), token.c (4), unique_index.c (5, and 6
 * in the same transaction); orders.c is the path through them.
 *
 * Domain logic only: it calls the store and cache ports and never sees
 * HTTP or JSON; the bytes of an answer come from the API layer's renderer
 * (struct order_render). Thread-safe. */
#ifndef TICKETD_ORDERS_H
#define TICKETD_ORDERS_H

#include "model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;

struct order_request {
    int64_t user_id;
    const char *key; /* the Idempotency-Key: the order's request_id */
    int64_t session_id;
    int64_t quantity;
    const char *token; /* X-Order-Token, or NULL when not required */
    /* A token spent already on this order's behalf (a cart's, by its batch
     * key): not spent again, only recorded with the order in its
     * transaction, so it stays spent when Redis forgets. NULL for none. */
    const char *spent_token;
    /* Prefer: wait=N, the N applied (1..TICKETD_MAX_WAIT_S), or 0: a copy
     * that meets this key in flight waits for the first copy (keywait.h). */
    int wait_s;
};

enum order_outcome {
    ORDER_CREATED,
    ORDER_REPLAYED,
    ORDER_KEY_REUSED,
    ORDER_IN_PROGRESS,
    ORDER_DUPLICATE_SUBMISSION,
    ORDER_TOKEN_INVALID,
    ORDER_SOLD_OUT,
    ORDER_SESSION_NOT_FOUND,
    ORDER_UNAVAILABLE,
    ORDER_FAILED,
};

/* The defence that gave the answer, named in the Idempotency-Layer header
 * by order_layer_name. */
enum order_layer {
    LAYER_NONE,
    LAYER_RESPONSE_CACHE,
    LAYER_INFLIGHT_KEY,
    LAYER_SESSION_LOCK,
    LAYER_TOKEN,
    LAYER_UNIQUE_INDEX,
    LAYER_CHECK_THEN_INSERT, /* the naive store's look-up, with the unique index off */
};

/* The layer's name (defence_name's for a defence); NULL for LAYER_NONE. */
const char *order_layer_name(enum order_layer layer);

/* Renders the answer to an order: its HTTP status and body (a new string,
 * caller frees). Given by the API layer, which chooses both, so the domain
 * stays free of HTTP and JSON; the domain keeps the bytes for replays. */
typedef char *(*order_render_fn)(const struct order *o, int *status, size_t *len);

/* The API layer's renderers of the answers the domain keeps: order for an
 * order placed or found; failure for a failure kept under its key like a
 * success (outcome ORDER_SOLD_OUT or ORDER_UNAVAILABLE), which only the
 * demo does, with forget-failures switched off. */
struct order_render {
    order_render_fn order;
    char *(*failure)(enum order_outcome oc, int *status, size_t *len);
};

struct order_result {
    enum order_outcome outcome;
    enum order_layer layer;
    /* For CREATED and REPLAYED: the answer, exactly as first given (the
     * renderer's, or the bytes a record kept); body is new, caller frees. */
    int status;
    char *body;
    size_t body_len;
    /* The order's number when the answer came from the order itself ("" for
     * a replay of a record's bytes). */
    char order_no[ORDER_NO_LEN + 1];
};

/* Layer 1 alone, in process: true, with *res filled (a replay, or 422 for
 * another payload), when this process answered the key before. No I/O:
 * the loop that read the request calls it at once, before any fiber. *res is cleared on entry. */
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
