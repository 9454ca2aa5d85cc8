/* order_steps.h - the steps of the order flow that the demo replaces with
 * the naive version a defence exists to prevent, as a table picked once at
 * boot (boot.c), beside the adapters' (cache_redis.h, store_mysql.h): the
 * naive steps live in service/naive/ (order_naive.h) and the domain never
 * asks which defences are on to run them. app->order_steps NULL, or an
 * entry NULL, means the real step. */
#ifndef TICKETD_ORDER_STEPS_H
#define TICKETD_ORDER_STEPS_H

#include "orders.h"

struct app;
struct inflight_key;

struct order_steps {
    /* forget-failures: what a request that failed does with its key. The
     * real step gives it back (inflight_key_release), so that the retry
     * after the dependency is back succeeds. */
    void (*end_failure)(struct app *app, const struct order_request *rq, struct inflight_key *k,
                        const struct order_render *render, const struct order_result *res);
};

#endif
