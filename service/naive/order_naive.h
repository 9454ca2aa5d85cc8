/* order_naive.h - the demo's naive steps of the order flow: the domain's
 * steps the articles warn about, as entries of its step table
 * (order_steps.h) that replace the real ones. boot.c puts one in the table
 * at boot for each defence TICKETD_DEFENSES switches off (TICKETD_ENV=demo
 * only); they read no switch themselves. Built over the domain's own
 * steps: what they do not change, they leave to the real ones. */
#ifndef TICKETD_ORDER_NAIVE_H
#define TICKETD_ORDER_NAIVE_H

#include "order_steps.h"

/* forget-failures off: a failure (sold out, a dependency down) is stored
 * under the key like a success, as the articles warn against, so every
 * retry of the key is told the same failure until the record expires,
 * long after the dependency is back or seats were returned. Other
 * failures, and a request that set no marker, give the key back as the
 * real step does. */
void order_naive_remember_failure(struct app *app, const struct order_request *rq,
                                  struct inflight_key *k, const struct order_render *render,
                                  const struct order_result *res);

/* token-atomic off: the order's transaction records no token, so that the
 * naive GET-then-spend (cache_naive.h) shows what Redis alone lets
 * through, not what the token's row would still catch. */
const char *order_naive_no_token_record(const struct app *app, const char *token, char *key);

/* item-keys off: an item of a cart has no key of its own; each run orders
 * it under a fresh request id, as a service that knows only the batch key
 * would, so nothing tells a retry which items were bought. (With it the
 * token is not recorded either: the run shows what one key for the batch
 * lets through, as with the token switched off.) */
const char *order_naive_fresh_item_key(struct app *app, const char *key, char *fresh);

#endif
