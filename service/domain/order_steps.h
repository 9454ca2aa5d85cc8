/* order_steps.h - the steps of the order flow that the demo replaces with
 * the naive version a defence exists to prevent, as a table picked once at
 * boot (boot.c), beside the adapters' (cache_redis.h, store_mysql.h): the
 * naive steps live in service/naive/ (order_naive.h) and the domain never
 * asks which defences are on to run them. app->order_steps NULL, or an
 * entry NULL, means the real step. */
#ifndef TICKETD_ORDER_STEPS_H
#define TICKETD_ORDER_STEPS_H

#include "order_types.h"

struct app;
struct inflight_key;

struct order_steps {
    /* forget-failures: what a request that failed does with its key. The
     * real step gives it back (inflight_key_release), so that the retry
     * after the dependency is back succeeds. */
    void (*end_failure)(struct app *app, const struct order_request *rq, struct inflight_key *k,
                        const struct order_render *render, const struct order_result *res);
    /* token-atomic: the token an order's transaction records (into key,
     * ORDERTOKEN_KEY_LEN + 1 bytes), or NULL. The real step records every
     * token the order spent (token_to_record), so that it stays spent when
     * Redis forgets it. */
    const char *(*token_to_record)(const struct app *app, const char *token, char *key);
    /* unique-index: the layer named when a duplicate's look-up finds the
     * key's order. LAYER_NONE: the real one, the unique index. */
    enum order_layer copy_found_by;
    /* item-keys: the key a cart's item is ordered under (fresh holds
     * IDEM_OWNER_LEN + 1 bytes). The real step is the item's own key, and
     * the batch's token is recorded with the first item that buys; a step
     * given here replaces the key, and the token is not recorded. */
    const char *(*item_key)(struct app *app, const char *key, char *fresh);
};

#endif
