/* api_internal.h - what the api_*.c files share: the handlers the route
 * table (routes.def) names, and the helpers they all use (reply.h). Not a
 * public interface. */
#ifndef TICKETD_API_INTERNAL_H
#define TICKETD_API_INTERNAL_H

#include "api.h"
#include "model.h"
#include "orders.h"
#include "reply.h"
#include "req.h"
#include "resp.h"

#include <jansson.h>
#include <stdbool.h>

typedef void (*api_handler_fn)(struct req *r, struct resp *w);
/* A route's quick step (no I/O), in the dispatcher's words (api.h):
 * API_ANSWERED when it answered into w, API_ON_FIBER when the rest waits
 * for Redis or MariaDB on a fiber (api_hand_on). */
typedef enum api_step (*api_quick_fn)(struct req *r, struct resp *w);

/* Every handler routes.def names (two routes may share one). */
#define ROUTE(id, method, pattern, handler, quick, runs, access, body, label)                      \
    void handler(struct req *r, struct resp *w);
#include "routes.def"
#undef ROUTE
/* The quick steps routes.def names. */
enum api_step api_orders_create_quick(struct req *r, struct resp *w);
enum api_step api_orders_batch_quick(struct req *r, struct resp *w);

/* The order flow's pieces the cart shares with POST /orders (api_orders.c).
 * api_order_render: the answer to an order placed or found, 201 and the
 * order (a new string). api_order_answer: the answer of the order flow
 * into w, exactly as POST /orders gives it; takes res's body. api_read_key:
 * the Idempotency-Key header into key (IDEM_KEY_MAX + 1 bytes), or false
 * after writing its problem into w. api_read_token: X-Order-Token when
 * required (*token borrowed from r, NULL when not required), or false
 * after writing its problem. */
char *api_order_render(const struct order *o, int *status, size_t *len);
/* The renderers the order flow keeps answers with: api_order_render, and
 * the problem of a failure the demo remembers (orders.h). */
struct order_render;
extern const struct order_render api_order_views;
struct order_request;
struct order_result;
void api_order_answer(struct resp *w, const struct order_request *rq, struct order_result *res);
bool api_read_key(struct req *r, struct resp *w, char *key);
/* The refusals POST /orders and the cart give alike, into w: the key used
 * before with other content (what: "payload", "item list"), the first copy
 * under the key still being processed (what: "request", "batch"; with
 * Retry-After), and an order token that is not valid. */
void api_refuse_key_reused(struct resp *w, const char *what);
/* The defence that produced the answer, if one did: Idempotency-Layer, and
 * w->layer for the access log. Call it after the answer is written. */
void api_say_layer(struct resp *w, enum order_layer layer);
void api_refuse_in_progress(struct resp *w, const char *what);
void api_refuse_token(struct resp *w);
bool api_read_token(struct req *r, struct resp *w, const char **token);
/* Prefer: wait=N (prefer.h), cut to TICKETD_MAX_WAIT_S: the N applied, said
 * in w's Preference-Applied, or 0 (none, 0, malformed: nothing said). Call
 * it first, so that every answer to the request says it. */
int api_read_wait(struct req *r, struct resp *w);
/* Says the N applied again, into an answer written after the quick step. */
void api_say_wait(struct resp *w, int wait_s);

#endif
