/* order_answer.h - the answers an order's defences give (struct
 * order_result, order_types.h), for the files of those defences and the flow
 * that calls them. Inline here, in a header of their own, so that every
 * defence can answer without calling back into the flow that drives it:
 * orders.c calls the defences, never the other way round. */
#ifndef TICKETD_ORDER_ANSWER_H
#define TICKETD_ORDER_ANSWER_H

#include "order_types.h"

#include <stddef.h>
#include <stdio.h>

static inline void orders_answer(struct order_result *res, enum order_outcome oc,
                                 enum order_layer layer)
{
    res->outcome = oc;
    res->layer = layer;
}

/* A replay of the bytes a record kept (the in-process cache, Redis);
 * takes body. */
static inline void orders_replay_bytes(struct order_result *res, int status, char *body, size_t len)
{
    orders_answer(res, ORDER_REPLAYED, LAYER_RESPONSE_CACHE);
    res->status = status;
    res->body = body;
    res->body_len = len;
}

/* The answer made from the order itself: a new one, or one the database
 * found under the key. */
static inline void orders_answer_with_order(struct order_result *res, enum order_outcome oc,
                                            enum order_layer layer, const struct order *o,
                                            const struct order_render *render)
{
    orders_answer(res, oc, layer);
    res->body = render->order(o, &res->status, &res->body_len);
    snprintf(res->order_no, sizeof res->order_no, "%s", o->order_no);
}

#endif
