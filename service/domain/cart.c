/* cart.c - a cart (cart.h): the batch key through the key protocol
 * (inflight_key.h) and its durable record, the token spent once by the
 * batch key, then each item through the whole order flow under its own
 * key. What the protocol does for the batch key is the protocol's; what
 * is here is what a cart alone needs: the record in the database that an
 * unfinished batch is checked against, and the items. */
#include "cart.h"

#include "app.h"
#include "cache.h"
#include "err.h"
#include "inflight_key.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "store_idem.h"
#include "token.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The scope of a batch key's durable record (idempotency_records.scope). */
#define CART_SCOPE "batch"

void cart_result_cleanup(struct cart_result *res)
{
    free(res->body);
    memset(res, 0, sizeof *res);
}

/* A batch key's record lives beside the orders' keys under "batch/<key>":
 * '/' is outside the key grammar, so no order key can name it, and a client
 * may use the same text for a batch and for one of its items. */
static void batch_redis_key(const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "batch/%s", key);
}

static void cart_answer(struct cart_result *res, enum cart_outcome oc, enum order_layer layer)
{
    res->outcome = oc;
    res->layer = layer;
}

/* A final answer kept under the batch key, replayed as it was given. */
static void cart_replay(struct cart_result *res, enum order_layer layer, const char *body,
                        size_t len)
{
    cart_answer(res, CART_REPLAYED, layer);
    res->body = xstrndup(body, len);
    res->body_len = len;
    res->complete = true;
}

/* The batch key through the key protocol: a copy in flight 409 (or
 * waited for), a final answer replayed, another item list 422, and no
 * session lock (the items take theirs). Returns true when the batch
 * should go on. */
static bool begin_key(struct inflight_key *k, struct cart_result *res)
{
    struct inflight_key_answer ans;
    enum inflight_key_end end = inflight_key_begin(k, &ans);
    switch (end) {
    case INFLIGHT_RUN:
        break;
    case INFLIGHT_REPLAY:
        cart_replay(res, ans.layer, ans.body, ans.body_len);
        break;
    case INFLIGHT_REUSED:
        cart_answer(res, CART_KEY_REUSED, ans.layer);
        break;
    case INFLIGHT_BUSY:
    case INFLIGHT_LOCKED: /* no lock was asked for */
        cart_answer(res, CART_IN_PROGRESS, ans.layer);
        break;
    case INFLIGHT_UNAVAILABLE:
        cart_answer(res, CART_UNAVAILABLE, LAYER_NONE);
        break;
    }
    inflight_key_answer_cleanup(&ans);
    return end == INFLIGHT_RUN;
}

/* The batch key's durable record. A final answer is replayed (and given
 * back to Redis for the next retry); another item list is refused; an
 * unfinished batch goes on. Returns true when the batch should go on. */
static bool check_record(const struct cart_request *rq, const char *fp, struct idem_stored *st,
                         bool *found, struct cart_result *res)
{
    *found = false;
    int rc = store_idem_find(CART_SCOPE, rq->user_id, rq->key, st);
    if (rc == TD_ENOTFOUND)
        return true;
    if (rc != TD_OK) {
        cart_answer(res, CART_UNAVAILABLE, LAYER_NONE);
        return false;
    }
    *found = true;
    if (strcmp(st->fingerprint, fp) != 0) {
        metrics_inc(M_DUP_KEY_REUSED);
        cart_answer(res, CART_KEY_REUSED, LAYER_UNIQUE_INDEX);
        return false;
    }
    if (!st->complete)
        return true;
    metrics_inc(M_DUP_UNIQUE_INDEX);
    cart_replay(res, LAYER_UNIQUE_INDEX, st->body, st->body_len);
    return false;
}

/* The order token, spent by the batch key. A batch key with a record in
 * the database passed this check before (the record is written only after
 * it): its retry is the same intent, whatever Redis remembers now. A
 * refusal is the order's (token_passes), said in the cart's outcomes. */
static bool spend_token(struct app *app, struct inflight_key *k, bool has_record,
                        struct cart_result *res)
{
    struct order_result stop = {0};
    if (has_record || token_passes(app, k, &stop))
        return true;
    cart_answer(res, stop.outcome == ORDER_TOKEN_INVALID ? CART_TOKEN_INVALID : CART_UNAVAILABLE,
                stop.layer);
    return false;
}

/* Whether one of the cart's items other than skip has its order already
 * (under its own key, for the same session and quantity): then the token
 * an item's transaction met in order_tokens is this cart's own, recorded
 * with that order by an earlier run of the batch. */
static bool cart_holds_token(const struct cart_request *rq, size_t skip)
{
    for (size_t i = 0; i < rq->n; i++) {
        struct order o;
        if (i == skip || store_order_find_request(rq->user_id, rq->items[i].key, &o) != TD_OK)
            continue;
        if (o.session_id == rq->items[i].session_id && o.quantity == rq->items[i].quantity)
            return true;
    }
    return false;
}

/* Each item through the whole order flow, in the request's order. The
 * token the batch key spent is recorded in the transaction of the first
 * item that buys (order_tokens, sql/006), as a single order records its
 * own: when Redis forgets the token, another key that presents it meets
 * that row, and nothing is bought. Items carry it until one has its order.
 * With item-keys switched off (the demo's naive step, order_naive.h) an
 * item has no key of its own, and the token is not recorded. Returns false when the token
 * was spent by another key's order: the item that met its row was refused
 * and no item has an order. Else true, with *complete when every item has
 * its order and *fresh when this run bought at least one of them. */
static bool run_items(struct app *app, const struct cart_request *rq,
                      const struct order_render *item_render, struct order_result *out,
                      bool *complete, bool *fresh)
{
    const char *token = orders_items_keyed(app) ? rq->token : NULL;
    *complete = true;
    *fresh = false;
    for (size_t i = 0; i < rq->n; i++) {
        char fresh_key[IDEM_OWNER_LEN + 1];
        struct order_request irq = {
            .user_id = rq->user_id,
            .key = orders_item_key(app, rq->items[i].key, fresh_key),
            .session_id = rq->items[i].session_id,
            .quantity = rq->items[i].quantity,
            .token = NULL, /* spent by the batch key */
            .spent_token = token,
        };
        orders_create(app, &irq, item_render, &out[i]);
        if (out[i].outcome == ORDER_TOKEN_INVALID && token != NULL) {
            /* Refused by the token's row, not by Redis (the batch key's
             * script let the token through). An earlier run of this batch
             * that bought another item holds it: this item runs again
             * without it. Otherwise another key's order spent it. */
            if (!cart_holds_token(rq, i))
                return false;
            order_result_cleanup(&out[i]);
            irq.spent_token = token = NULL;
            orders_create(app, &irq, item_render, &out[i]);
        }
        if (out[i].outcome == ORDER_CREATED || out[i].outcome == ORDER_REPLAYED)
            token = NULL; /* recorded with this order, or with an earlier one */
        if (out[i].outcome == ORDER_CREATED)
            *fresh = true;
        else if (out[i].outcome != ORDER_REPLAYED)
            *complete = false;
    }
    return true;
}

/* The batch's answer, kept: in the database always (the record an
 * unfinished batch's retry is checked against), in Redis once final. */
static void keep_answer(const struct cart_request *rq, const char *fp, struct inflight_key *k,
                        const struct idem_stored *st, bool found, const struct cart_result *res)
{
    int rc = store_idem_put(CART_SCOPE, rq->user_id, rq->key, found ? st->day : NULL, fp,
                            res->complete, 200, res->body, res->body_len);
    if (rc != TD_OK)
        log_warn("user %lld: the answer of batch %s was not kept in the database (%s); a retry "
                 "recomputes it from the orders",
                 (long long)rq->user_id, rq->key, td_strerror(rc));
    if (res->complete)
        inflight_key_complete(k, 200, res->body, res->body_len);
}

void cart_run(struct app *app, const struct cart_request *rq,
              const struct order_render *item_render, cart_render_fn render,
              struct cart_result *res)
{
    char fp[IDEM_FP_LEN + 1], name[IDEM_KEY_MAX + 8];
    struct inflight_key k;
    struct idem_stored st;
    struct order_result items[CART_MAX_ITEMS];
    bool found = false, fresh = false;
    memset(res, 0, sizeof *res);
    memset(&st, 0, sizeof st);
    memset(items, 0, sizeof items);
    idem_fingerprint_batch(rq->items, rq->n, fp);
    batch_redis_key(rq->key, name, sizeof name);
    inflight_key_init(&k, app, rq->user_id, name, fp);
    k.token = token_for_key(app, rq->token);
    k.wait_s = rq->wait_s;

    if (!begin_key(&k, res) || !check_record(rq, fp, &st, &found, res))
        goto out;
    if (!spend_token(app, &k, found, res))
        goto out;
    if (!run_items(app, rq, item_render, items, &res->complete, &fresh)) {
        /* Counted by the order flow, as a single order's refusal is. */
        cart_answer(res, CART_TOKEN_INVALID, LAYER_UNIQUE_INDEX);
        goto out;
    }
    res->body = render(rq, items, res->complete, &res->body_len);
    /* Every item answered by its order, none bought now: a replay. */
    cart_answer(res, res->complete && !fresh ? CART_REPLAYED : CART_RAN,
                res->complete && !fresh ? LAYER_UNIQUE_INDEX : LAYER_NONE);
    keep_answer(rq, fp, &k, &st, found, res);

out:
    /* A final answer found in the database goes back to Redis; anything
     * else gives the key back (once completed, nothing is held). */
    if (res->outcome == CART_REPLAYED && inflight_key_holds(&k))
        inflight_key_complete(&k, 200, res->body, res->body_len);
    else
        inflight_key_release(&k);
    for (size_t i = 0; i < rq->n; i++)
        order_result_cleanup(&items[i]);
    idem_stored_cleanup(&st);
    inflight_key_cleanup(&k);
}
