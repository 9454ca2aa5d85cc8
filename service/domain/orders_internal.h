/* orders_internal.h - what orders.c, orders_redis.c and orders_db.c share
 * and nothing outside them may call: what a request has taken in Redis,
 * the answers every layer gives (inline here, so that no file calls back
 * into the one that drives it), and the steps one file defines for another
 * (each is described where it is defined). */
#ifndef TICKETD_ORDERS_INTERNAL_H
#define TICKETD_ORDERS_INTERNAL_H

#include "idem.h"
#include "orders.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct app;

/* What this request has taken in Redis, to give back on failure. */
struct claims {
    bool redis_ok; /* false once Redis failed: skip the rest of it */
    char *marker;  /* our in-flight marker, if we set one */
    char owner[IDEM_OWNER_LEN + 1];
    bool locked;  /* we hold the user+session lock */
    int token_rc; /* the token's verdict from the key's script, or TOKEN_UNCHECKED */
};

/* The answers the layers give. */
static inline void orders_answer(struct order_result *res, enum order_outcome oc,
                                 enum order_layer layer)
{
    res->outcome = oc;
    res->layer = layer;
}

/* A replay of the bytes a record kept (the in-process cache, Redis). */
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

/* orders_redis.c */
bool orders_check_key(struct app *app, const struct order_request *rq, const char *fp,
                      struct claims *cl, struct order_result *res);
bool orders_take_token(struct app *app, const struct order_request *rq, struct claims *cl,
                       struct order_result *res);
void orders_keep_in_process(struct app *app, const struct order_request *rq, const char *fp,
                            int status, const char *body, size_t len);

/* orders_db.c */
bool orders_replay_from_database(struct app *app, const struct order_request *rq,
                                 const struct order_render *render, struct order_result *res);
void orders_write_order(struct app *app, const struct order_request *rq, bool filter_missed,
                        const struct order_render *render, struct order_result *res);
bool orders_remember_failure(struct app *app, const struct order_request *rq, const char *fp,
                             const struct claims *cl, const struct order_render *render,
                             const struct order_result *res);
bool orders_may_have_order(struct app *app, const struct order_request *rq);
bool orders_bloom_note(struct app *app, const struct order_request *rq);

#endif
