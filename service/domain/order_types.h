/* order_types.h - what an order's request and answer are, for the flow
 * (orders.h) and for each defence it calls (response_cache.h,
 * inflight_key.h, token.h, unique_index.h, order_answer.h, order_steps.h).
 * The types sit below all of them, so that a defence names the request it
 * checks and the answer it gives without including the flow that calls it:
 * orders.c calls the defences, and nothing of theirs points back up. */
#ifndef TICKETD_ORDER_TYPES_H
#define TICKETD_ORDER_TYPES_H

#include "model.h"

#include <stddef.h>
#include <stdint.h>

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
 * by order_layer_name (orders.h). */
enum order_layer {
    LAYER_NONE,
    LAYER_RESPONSE_CACHE,
    LAYER_INFLIGHT_KEY,
    LAYER_SESSION_LOCK,
    LAYER_TOKEN,
    LAYER_UNIQUE_INDEX,
    LAYER_CHECK_THEN_INSERT, /* the naive store's look-up, with the unique index off */
};

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

#endif
