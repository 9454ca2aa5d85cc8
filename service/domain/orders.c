/* orders.c - creating an order (orders.h lists its layers): the path a
 * request takes through them, and the answers the layers give. The layers
 * themselves are apart, by what they ask: orders_redis.c holds 1-4 (in
 * process and in Redis), orders_db.c holds 5 and 6 and the replays from
 * the database. */
#include "orders.h"

#include "app.h"
#include "idem.h"
#include "cache.h"
#include "defences.h"
#include "faults.h"
#include "metrics.h"
#include "orders_internal.h"
#include "util.h"

#include <stdio.h>
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

/* A marker names a request of this key past Redis: it may be writing the
 * order now, or may have written it without Redis (its answer lost to a
 * stall, the filter never told). The filter can only know what it was
 * told, so for such a key the database is always asked. */
static bool in_flight_elsewhere(const struct order_result *res)
{
    return res->outcome == ORDER_IN_PROGRESS;
}

/* The refusals that only Redis vouches for. */
static bool refused_by_redis(enum order_outcome oc)
{
    return oc == ORDER_IN_PROGRESS || oc == ORDER_DUPLICATE_SUBMISSION || oc == ORDER_TOKEN_INVALID;
}

void orders_create(struct app *app, const struct order_request *rq,
                   const struct order_render *render, struct order_result *res)
{
    char fp[IDEM_FP_LEN + 1];
    struct claims cl = {.redis_ok = true, .token_rc = TOKEN_UNCHECKED};
    bool from_db = false; /* the database gave the answer: worth remembering */
    memset(res, 0, sizeof *res);
    idem_fingerprint_order(rq->session_id, rq->quantity, fp);
    idem_new_owner(app->instance, cl.owner);

    if (!orders_check_key(app, rq, fp, &cl, res) || !orders_take_token(app, rq, &cl, res)) {
        /* Redis forgets: it may have been flushed or restarted, a record
         * may have expired, or the instance that placed the order may have
         * died between its COMMIT and storing the answer. Before a client
         * is told its request failed, the database is asked whether this
         * key already has its order; a client told "no" for an order that
         * exists would buy again. */
        if (refused_by_redis(res->outcome) &&
            (in_flight_elsewhere(res) || orders_may_have_order(app, rq))) {
            metrics_inc(M_REFUSAL_DB_LOOKUPS);
            from_db = orders_replay_from_database(app, rq, render, res);
        }
        goto out;
    }
    if (!cl.redis_ok)
        metrics_inc(M_REDIS_DEGRADED);
    (void)FAULT_POINT("order.after_redis"); /* delay: a downstream slower than the TTLs */
    bool told = orders_bloom_note(app, rq);
    orders_write_order(app, rq, !told, render, res);
    from_db = res->outcome == ORDER_CREATED || res->outcome == ORDER_REPLAYED;
    if (res->outcome == ORDER_CREATED)
        (void)FAULT_POINT("order.after_commit"); /* crash: committed, nothing stored or sent */

out:
    if (from_db && res->outcome != ORDER_CREATED)
        (void)orders_bloom_note(app, rq); /* found in the database: maybe older than the filter */
    if (from_db) {
        /* Remember the completed response for the key's retries (a replay
         * from a cache layer is remembered already). Tried even after a
         * Redis failure: the breaker refuses it at no cost while Redis is
         * down, and it helps as soon as Redis is back. With the in-flight
         * key switched off there is no marker to replace: the record is
         * stored if the key has none. */
        unsigned on = app->defences;
        bool no_marker = (on & DEFENCE_RESPONSE_CACHE) && !(on & DEFENCE_INFLIGHT_KEY);
        if (cl.marker != NULL || cl.locked || no_marker) {
            char *done = idem_done(fp, res->status, res->body, res->body_len);
            cache_order_complete(rq->user_id, rq->key, cl.marker, done, app->cfg->idem_ttl_s,
                                 rq->session_id, cl.locked ? cl.owner : NULL);
            free(done);
        }
        orders_keep_in_process(app, rq, fp, res->status, res->body, res->body_len);
    } else if (orders_remember_failure(app, rq, fp, &cl, render, res)) {
        /* the naive version: nothing given back */
    } else if (res->outcome != ORDER_REPLAYED && (cl.marker != NULL || cl.locked)) {
        /* Only a success is remembered: give the key back for a retry. */
        cache_order_release(rq->user_id, rq->key, cl.marker, rq->session_id,
                            cl.locked ? cl.owner : NULL);
    }
    free(cl.marker);
}
