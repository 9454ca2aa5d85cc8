/* api_cart.c - POST /api/v1/orders/batch: a cart's JSON and headers in,
 * the answer of each item out. The defences live in cart.c and orders.c;
 * each item's answer is exactly what POST /orders would have given it. */
#include "api_internal.h"
#include "app.h"
#include "auth.h"
#include "cart.h"
#include "cartbody.h"
#include "err.h"
#include "idem.h"
#include "orders.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

/* What the quick step read and checked, for the blocking step. */
struct batch_input {
    char key[IDEM_KEY_MAX + 1];
    const char *token; /* borrowed from the request's headers */
    struct cart_body body;
    int wait_s; /* Prefer: wait applied, or 0 */
};

enum api_step api_orders_batch_quick(struct req *r, struct resp *w)
{
    char field[CARTBODY_FIELD_MAX], why[200];
    struct batch_input *in = xcalloc(1, sizeof *in);
    json_t *body = NULL;
    in->wait_s = api_read_wait(r, w);
    if (!api_read_key(r, w, in->key))
        goto out;
    body = api_body_object(r, w);
    if (body == NULL)
        goto out;
    if (cartbody_parse(body, AUTH_MAX_USER_ID, r->app->cfg->max_per_order, &in->body, field, why,
                       sizeof why) != TD_OK) {
        resp_problem(w, PROBLEM_VALIDATION_FAILED, field, "%s", why);
        goto out;
    }
    if (!api_read_token(r, w, &in->token))
        goto out;
    json_decref(body);
    return api_hand_on(r, in);
out:
    json_decref(body);
    free(in);
    return API_ANSWERED;
}

/* One item's entry: its key, the status POST /orders would have answered,
 * and that answer's body as "order" (a 201) or "problem". */
static json_t *item_json(const struct idem_item *item, const struct order_result *res)
{
    struct order_request rq = {
        .key = item->key, .session_id = item->session_id, .quantity = item->quantity};
    struct order_result copy = *res;
    struct resp w;
    resp_init(&w);
    copy.body = res->body != NULL ? xstrndup(res->body, res->body_len) : NULL;
    api_order_answer(&w, &rq, &copy);
    json_t *answer = json_loadb(w.body != NULL ? w.body : "", w.body_len, 0, NULL);
    if (answer == NULL)
        answer = json_object(); /* never: both kinds of answer are our JSON */
    json_t *o = json_pack("{s:s,s:i}", "key", item->key, "status", w.status);
    json_object_set_new(o, w.status == 201 ? "order" : "problem", answer);
    resp_reset(&w);
    return o;
}

static char *render_batch(const struct cart_request *rq, const struct order_result *res,
                          bool complete, size_t *len)
{
    json_t *items = json_array();
    for (size_t i = 0; i < rq->n; i++)
        json_array_append_new(items, item_json(&rq->items[i], &res[i]));
    json_t *o = json_pack("{s:b,s:o}", "complete", complete, "items", items);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s == NULL)
        abort(); /* jansson fails here only without memory */
    *len = strlen(s);
    return s;
}

void api_orders_batch(struct req *r, struct resp *w)
{
    struct batch_input *in = r->ctx;
    struct cart_request rq = {
        .user_id = r->who.user_id,
        .key = in->key,
        .token = in->token,
        .items = in->body.items,
        .n = in->body.n,
        .wait_s = in->wait_s,
    };
    struct cart_result res;
    cart_run(r->app, &rq, &api_order_views, render_batch, &res);
    switch (res.outcome) {
    case CART_RAN:
    case CART_REPLAYED:
        resp_json_take(w, 200, &res.body, res.body_len, res.outcome == CART_REPLAYED);
        break;
    case CART_KEY_REUSED:
        api_refuse_key_reused(w, "item list");
        break;
    case CART_IN_PROGRESS:
        api_refuse_in_progress(w, "batch");
        break;
    case CART_TOKEN_INVALID:
        api_refuse_token(w);
        break;
    case CART_UNAVAILABLE:
        api_fail(w, TD_EUNAVAIL, "placing the batch");
        break;
    }
    api_say_layer(w, res.layer);
    api_say_wait(w, in->wait_s);
    cart_result_cleanup(&res);
}
