/* orders.c - creating an order: the path a request takes through the
 * defences, in the order it meets them (orders.h), and nothing else. Each
 * defence is a file named after it: response_cache.c, inflight_key.c (the
 * key protocol, with the session lock of session_lock.c in its script),
 * token.c, unique_index.c (with the stock compare-and-set in the same
 * transaction) and order_key_filter.c, which spares a refusal's look-up.
 * This file calls them; none of them calls back. */
#include "orders.h"

#include "app.h"
#include "defences.h"
#include "faults.h"
#include "idem.h"
#include "inflight_key.h"
#include "metrics.h"
#include "order_answer.h"
#include "order_key_filter.h"
#include "order_steps.h"
#include "response_cache.h"
#include "token.h"
#include "unique_index.h"

#include <stdlib.h>
#include <string.h>

void order_result_cleanup(struct order_result *res)
{
    free(res->body);
    memset(res, 0, sizeof *res);
}

const char *order_layer_name(enum order_layer layer)
{
    switch (layer) {
    case LAYER_NONE:
        return NULL;
    case LAYER_RESPONSE_CACHE:
        return defence_name(DEFENCE_RESPONSE_CACHE);
    case LAYER_INFLIGHT_KEY:
        return defence_name(DEFENCE_INFLIGHT_KEY);
    case LAYER_SESSION_LOCK:
        return defence_name(DEFENCE_SESSION_LOCK);
    case LAYER_TOKEN:
        return defence_name(DEFENCE_TOKEN);
    case LAYER_UNIQUE_INDEX:
        return defence_name(DEFENCE_UNIQUE_INDEX);
    case LAYER_CHECK_THEN_INSERT:
        return "check-then-insert";
    }
    return NULL;
}

bool orders_replay_local(struct app *app, const struct order_request *rq, struct order_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    memset(res, 0, sizeof *res);
    idem_fingerprint_order(rq->session_id, rq->quantity, fp);
    return response_cache_replay(app, rq->user_id, rq->key, fp, res);
}

/* The demo's naive steps chosen at boot (order_steps.h); an entry left
 * NULL, or no table at all, is the real step. */
static const struct order_steps real_steps;

static const struct order_steps *steps(const struct app *app)
{
    return app->order_steps != NULL ? app->order_steps : &real_steps;
}

/* The layer that finds a copy of the order: the unique index. */
static enum order_layer copy_found_by(const struct app *app)
{
    enum order_layer l = steps(app)->copy_found_by;
    return l != LAYER_NONE ? l : LAYER_UNIQUE_INDEX;
}

/* The token the order's transaction records: its own, or the one a cart
 * spent on its behalf. */
static const char *token_key(const struct app *app, const struct order_request *rq, char *key)
{
    const char *token = rq->token != NULL ? rq->token : rq->spent_token;
    if (steps(app)->token_to_record != NULL)
        return steps(app)->token_to_record(app, token, key);
    return token_to_record(app, token, key);
}

/* The key protocol's answer, as an order's. Returns true when the request
 * goes on. */
static bool answer_key(struct app *app, const struct order_request *rq, struct inflight_key *k,
                       struct inflight_key_answer *ans, enum inflight_key_end end,
                       struct order_result *res)
{
    switch (end) {
    case INFLIGHT_RUN:
        return true;
    case INFLIGHT_REPLAY:
        response_cache_keep(app, rq->user_id, rq->key, k->fp, ans->status, ans->body,
                            ans->body_len);
        orders_replay_bytes(res, ans->status, ans->body, ans->body_len);
        ans->body = NULL; /* taken by res */
        return false;
    case INFLIGHT_REUSED:
        orders_answer(res, ORDER_KEY_REUSED, ans->layer);
        return false;
    case INFLIGHT_BUSY:
        orders_answer(res, ORDER_IN_PROGRESS, ans->layer);
        return false;
    case INFLIGHT_LOCKED:
        orders_answer(res, ORDER_DUPLICATE_SUBMISSION, ans->layer);
        return false;
    case INFLIGHT_UNAVAILABLE:
        break;
    }
    orders_answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
    return false;
}

/* Layers 1 to 4: the response cache, the key (in-flight key, session
 * lock, the token and the order-key filter's bits in the same script),
 * then the token on its own. Returns true when the request goes on to the
 * database. */
static bool check_key(struct app *app, const struct order_request *rq, struct inflight_key *k,
                      struct order_result *res)
{
    struct inflight_key_answer ans;
    uint64_t pos[BLOOM_MAX_K];
    struct filter_note note;
    if (response_cache_replay(app, rq->user_id, rq->key, k->fp, res))
        return false;
    k->session_id = rq->session_id;
    k->token = token_for_key(app, rq->token);
    k->wait_s = rq->wait_s;
    order_key_filter_prepare(app, rq->user_id, rq->key, pos, &note);
    k->note = &note; /* used by inflight_key_begin alone, below */
    bool go_on = answer_key(app, rq, k, &ans, inflight_key_begin(k, &ans), res);
    k->note = NULL;
    inflight_key_answer_cleanup(&ans);
    return go_on && token_passes(app, k, res);
}

/* The refusals that only Redis vouches for. */
static bool refused_by_redis(enum order_outcome oc)
{
    return oc == ORDER_IN_PROGRESS || oc == ORDER_DUPLICATE_SUBMISSION || oc == ORDER_TOKEN_INVALID;
}

/* Redis forgets: it may have been flushed or restarted, a record may have
 * expired, or the instance that placed the order may have died between its
 * COMMIT and storing the answer. Before a client is told its request was
 * refused, the database is asked whether this key already has its order;
 * a client told "no" for an order that exists would buy again. A marker
 * names a request of this key past Redis (writing the order now, or having
 * written it without Redis): for such a key the database is always asked,
 * for the others only when the order-key filter cannot rule it out.
 * Returns true when the database gave the answer. */
static bool ask_database_before_refusing(struct app *app, const struct order_request *rq,
                                         const struct order_render *render,
                                         struct order_result *res)
{
    if (!refused_by_redis(res->outcome))
        return false;
    if (res->outcome != ORDER_IN_PROGRESS && !order_key_filter_may_have(app, rq->user_id, rq->key))
        return false;
    metrics_inc(M_REFUSAL_DB_LOOKUPS);
    return unique_index_find_copy(rq, copy_found_by(app), render, res);
}

/* Layers 5 and 6, the database's, the order-key filter told first (by the
 * key's script, else here). Returns true when it gave the answer. */
static bool place(struct app *app, const struct order_request *rq, const struct inflight_key *k,
                  const struct order_render *render, struct order_result *res)
{
    if (!k->redis_ok)
        metrics_inc(M_REDIS_DEGRADED);
    (void)FAULT_POINT("order.after_redis"); /* delay: a downstream slower than the TTLs */
    char key[ORDERTOKEN_KEY_LEN + 1];
    struct unique_index_ask ask = {
        .token_key = token_key(app, rq, key),
        .filter_missed = !order_key_filter_note(app, rq->user_id, rq->key, k->noted),
        .found_by = copy_found_by(app),
    };
    unique_index_place(app, rq, &ask, render, res);
    if (res->outcome == ORDER_CREATED)
        (void)FAULT_POINT("order.after_commit"); /* crash: committed, nothing stored or sent */
    return res->outcome == ORDER_CREATED || res->outcome == ORDER_REPLAYED;
}

/* The answer the database gave is remembered for the key's retries, in
 * Redis and in this process (a replay from a cache layer is remembered
 * already). An order found rather than created may be older than the
 * order-key filter: it is told. */
static void remember(struct app *app, const struct order_request *rq, struct inflight_key *k,
                     const struct order_result *res)
{
    if (res->outcome != ORDER_CREATED)
        (void)order_key_filter_note(app, rq->user_id, rq->key, k->noted);
    inflight_key_complete(k, res->status, res->body, res->body_len);
    response_cache_keep(app, rq->user_id, rq->key, k->fp, res->status, res->body, res->body_len);
}

/* forget-failures: only a success is remembered; a failure gives the key
 * back for a retry (the demo's naive step keeps it: order_steps.h). */
static void end_failure(struct app *app, const struct order_request *rq, struct inflight_key *k,
                        const struct order_render *render, const struct order_result *res)
{
    if (steps(app)->end_failure != NULL)
        steps(app)->end_failure(app, rq, k, render, res);
    else
        inflight_key_release(k);
}

const char *orders_item_key(struct app *app, const char *key, char *fresh)
{
    return steps(app)->item_key != NULL ? steps(app)->item_key(app, key, fresh) : key;
}

bool orders_items_keyed(const struct app *app)
{
    return steps(app)->item_key == NULL;
}

void orders_create(struct app *app, const struct order_request *rq,
                   const struct order_render *render, struct order_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    struct inflight_key k;
    bool from_db; /* the database gave the answer: worth remembering */
    memset(res, 0, sizeof *res);
    idem_fingerprint_order(rq->session_id, rq->quantity, fp);
    inflight_key_init(&k, app, rq->user_id, rq->key, fp);

    if (check_key(app, rq, &k, res))
        from_db = place(app, rq, &k, render, res);
    else
        from_db = ask_database_before_refusing(app, rq, render, res);

    if (from_db)
        remember(app, rq, &k, res);
    else
        end_failure(app, rq, &k, render, res);
    inflight_key_cleanup(&k);
}
