#include "cart.h"

#include "app.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "keywait.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "store_idem.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The scope of a batch key's durable record (idempotency_records.scope). */
#define CART_SCOPE "batch"

/* What the batch key holds in Redis, to complete or give back at the end. */
struct batch_claim {
    bool redis_ok;
    char rkey[IDEM_KEY_MAX + 8]; /* the key's name in Redis (batch_redis_key) */
    char owner[IDEM_OWNER_LEN + 1];
    char *marker;
    int token_rc;
};

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

/* A copy's marker whose process no longer beats (liveness.h) will never be
 * completed or released: the retry takes it over at once rather than
 * waiting out its TTL, as an order's retry does. The items' own keys
 * catch whatever the dead copy had bought. Returns true when the marker is
 * ours now. */
static bool take_over_dead(struct app *app, const struct cart_request *rq, const char *fp,
                           const char *stale, const char *stale_owner, struct batch_claim *bc)
{
    char instance[IDEM_INSTANCE_LEN + 1];
    idem_owner_instance(stale_owner, instance);
    if (strcmp(instance, app->instance) == 0 || cache_instance_alive(instance) != TD_ENOTFOUND)
        return false;
    char *marker = idem_marker(fp, bc->owner);
    if (cache_order_take_over(rq->user_id, bc->rkey, stale, marker, app->cfg->inflight_ttl_ms, 0,
                              stale_owner, NULL, 0) != TD_OK) {
        free(marker);
        return false;
    }
    metrics_inc(M_INFLIGHT_TAKEOVERS);
    bc->marker = marker;
    return true;
}

/* A record Redis holds under the batch key: a final answer (replayed) or a
 * copy's marker (409, unless its process is dead), each only for the same
 * item list (else 422). Returns true when it answered; false when the
 * batch goes on: the layer that would answer is switched off (the demo),
 * the record is unreadable, or a dead copy's marker was taken over. */
static bool answer_from_redis(struct app *app, const struct cart_request *rq, const char *fp,
                              const char *existing, struct batch_claim *bc, struct cart_result *res)
{
    struct idem_record rec;
    unsigned on = app->defences;
    if (!idem_parse(existing, strlen(existing), &rec))
        return false;
    if (rec.done ? !(on & DEFENCE_RESPONSE_CACHE) : !(on & DEFENCE_INFLIGHT_KEY))
        return false;
    enum order_layer layer = rec.done ? LAYER_RESPONSE_CACHE : LAYER_INFLIGHT_KEY;
    if (strcmp(rec.fingerprint, fp) != 0) {
        metrics_inc(M_DUP_KEY_REUSED);
        cart_answer(res, CART_KEY_REUSED, layer);
    } else if (rec.done) {
        metrics_inc(M_DUP_RESPONSE_CACHE);
        cart_replay(res, layer, rec.body, rec.body_len);
    } else if (take_over_dead(app, rq, fp, existing, rec.owner, bc)) {
        return false;
    } else {
        cart_answer(res, CART_IN_PROGRESS, layer); /* counted once waiting is over */
    }
    return true;
}

/* The batch key in Redis, one round trip (the same script as an order's
 * key, with no session lock: the items take theirs): its record, else our
 * marker, then the token. Returns true when the batch should go on. */
static bool begin_once(struct app *app, const struct cart_request *rq, const char *fp,
                       struct batch_claim *bc, struct cart_result *res, char **seen)
{
    unsigned on = app->defences;
    char *marker = (on & DEFENCE_INFLIGHT_KEY) ? idem_marker(fp, bc->owner) : NULL;
    struct token_spend tok = {rq->token, app->cfg->token_ttl_s};
    bool with_token = rq->token != NULL && (on & DEFENCE_TOKEN);
    char *existing = NULL;
    bool go_on = true;
    enum key_begin kb =
        cache_order_begin(rq->user_id, bc->rkey, marker, app->cfg->inflight_ttl_ms, 0, NULL, 0,
                          with_token ? &tok : NULL, &bc->token_rc, &existing);
    switch (kb) {
    case KEY_BEGUN:
        bc->marker = marker;
        marker = NULL;
        break;
    case KEY_FAILED:
        bc->marker = marker; /* the script may have run: given back at the end */
        marker = NULL;
        bc->redis_ok = false;
        if (app->cfg->redis_policy == REDIS_POLICY_STRICT) {
            cart_answer(res, CART_UNAVAILABLE, LAYER_NONE);
            go_on = false;
        }
        break;
    case KEY_HAS_RECORD:
        go_on = !answer_from_redis(app, rq, fp, existing, bc, res);
        break;
    case KEY_SESSION_LOCKED: /* no lock was asked for */
        break;
    }
    *seen = existing;
    free(marker);
    return go_on;
}

/* The batch key in Redis; a copy in flight is waited for (Prefer: wait,
 * keywait.h) and the key looked at again. Returns true when the batch
 * should go on. */
static bool begin_in_redis(struct app *app, const struct cart_request *rq, const char *fp,
                           struct batch_claim *bc, struct cart_result *res)
{
    struct keywait kw;
    if (!(app->defences & (DEFENCE_RESPONSE_CACHE | DEFENCE_INFLIGHT_KEY)))
        return true;
    keywait_start(&kw, app, rq->wait_s);
    for (;;) {
        char *seen = NULL;
        bool go_on = begin_once(app, rq, fp, bc, res, &seen);
        bool in_flight = !go_on && res->outcome == CART_IN_PROGRESS;
        bool again = in_flight && keywait_for(&kw, rq->user_id, bc->rkey, seen);
        free(seen);
        if (again) {
            memset(res, 0, sizeof *res);
            continue;
        }
        if (in_flight)
            metrics_inc(M_DUP_INFLIGHT_KEY);
        keywait_finish(&kw, in_flight ? KEYWAIT_RAN_OUT : go_on ? KEYWAIT_RAN : KEYWAIT_ANSWERED);
        return go_on;
    }
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
 * it): its retry is the same intent, whatever Redis remembers now. */
static bool spend_token(struct app *app, const struct cart_request *rq, struct batch_claim *bc,
                        bool has_record, struct cart_result *res)
{
    struct order_result ores;
    if (has_record)
        return true;
    memset(&ores, 0, sizeof ores);
    if (orders_spend_token(app, rq->user_id, bc->rkey, rq->token, bc->token_rc, &bc->redis_ok,
                           &ores))
        return true;
    if (ores.outcome == ORDER_TOKEN_INVALID)
        cart_answer(res, CART_TOKEN_INVALID, LAYER_TOKEN);
    else
        cart_answer(res, CART_UNAVAILABLE, LAYER_NONE);
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
 * With item-keys switched off (DEMO ONLY) an item has no key of its own:
 * each run orders it under a fresh request id, as a service that knows
 * only the batch key would, so nothing tells a retry which items were
 * bought; nor is the token recorded, so that the run shows what one key
 * for the batch lets through, not what the token's row would still catch
 * (as with the token defence switched off). Returns false when the token
 * was spent by another key's order: the item that met its row was refused
 * and no item has an order. Else true, with *complete when every item has
 * its order and *fresh when this run bought at least one of them. */
static bool run_items(struct app *app, const struct cart_request *rq,
                      const struct order_render *item_render, struct order_result *out,
                      bool *complete, bool *fresh)
{
    const char *token = (app->defences & DEFENCE_ITEM_KEYS) ? rq->token : NULL;
    *complete = true;
    *fresh = false;
    for (size_t i = 0; i < rq->n; i++) {
        char naive_key[IDEM_OWNER_LEN + 1];
        struct order_request irq = {
            .user_id = rq->user_id,
            .key = rq->items[i].key,
            .session_id = rq->items[i].session_id,
            .quantity = rq->items[i].quantity,
            .token = NULL, /* spent by the batch key */
            .spent_token = token,
        };
        if (!(app->defences & DEFENCE_ITEM_KEYS)) {
            idem_new_owner(app->instance, naive_key);
            irq.key = naive_key;
        }
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
static void keep_answer(struct app *app, const struct cart_request *rq, const char *fp,
                        struct batch_claim *bc, const struct idem_stored *st, bool found,
                        const struct cart_result *res)
{
    int rc = store_idem_put(CART_SCOPE, rq->user_id, rq->key, found ? st->day : NULL, fp,
                            res->complete, 200, res->body, res->body_len);
    if (rc != TD_OK)
        log_warn("user %lld: the answer of batch %s was not kept in the database (%s); a retry "
                 "recomputes it from the orders",
                 (long long)rq->user_id, rq->key, td_strerror(rc));
    if (!res->complete || bc->marker == NULL)
        return;
    char *done = idem_done(fp, 200, res->body, res->body_len);
    cache_order_complete(rq->user_id, bc->rkey, bc->marker, done, app->cfg->idem_ttl_s, 0, NULL);
    free(done);
    free(bc->marker);
    bc->marker = NULL;
}

void cart_run(struct app *app, const struct cart_request *rq,
              const struct order_render *item_render, cart_render_fn render,
              struct cart_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    struct batch_claim bc = {.redis_ok = true, .token_rc = TOKEN_UNCHECKED};
    struct idem_stored st;
    struct order_result items[CART_MAX_ITEMS];
    bool found = false, fresh = false;
    memset(res, 0, sizeof *res);
    memset(&st, 0, sizeof st);
    memset(items, 0, sizeof items);
    idem_fingerprint_batch(rq->items, rq->n, fp);
    batch_redis_key(rq->key, bc.rkey, sizeof bc.rkey);
    idem_new_owner(app->instance, bc.owner);

    if (!begin_in_redis(app, rq, fp, &bc, res) || !check_record(rq, fp, &st, &found, res))
        goto out;
    if (!spend_token(app, rq, &bc, found, res))
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
    keep_answer(app, rq, fp, &bc, &st, found, res);

out:
    if (res->outcome == CART_REPLAYED && bc.marker != NULL) {
        /* A final answer found in the database goes back to Redis. */
        char *done = idem_done(fp, 200, res->body, res->body_len);
        cache_order_complete(rq->user_id, bc.rkey, bc.marker, done, app->cfg->idem_ttl_s, 0, NULL);
        free(done);
    } else if (bc.marker != NULL) {
        cache_order_release(rq->user_id, bc.rkey, bc.marker, 0, NULL);
    }
    for (size_t i = 0; i < rq->n; i++)
        order_result_cleanup(&items[i]);
    idem_stored_cleanup(&st);
    free(bc.marker);
}
