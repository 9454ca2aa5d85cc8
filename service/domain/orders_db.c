/* orders_db.c - the layers of orders_create that the database holds, 5
 * and 6: the order transaction (unique index, stock CAS) and the order
 * number each attempt takes, the look-up that replays an order Redis
 * forgot, the order-key filter that spares that look-up, and the demo's
 * remembered failures. Apart from orders_redis.c because these are the
 * last word: what they say is true with Redis gone. */
#include "orders.h"

#include "app.h"
#include "bloom.h"
#include "idem.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "metrics.h"
#include "orders_internal.h"
#include "ordertoken.h"
#include "store.h"
#include "txretry.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void orders_new_number(char *out)
{
    /* YYMMDD, then 14 random digits: sortable by day at a glance, and
     * unguessable enough that order numbers leak nothing. */
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char day[16];
    snprintf(day, sizeof day, "%02u%02u%02u", (unsigned)(tm.tm_year % 100) % 100,
             (unsigned)(tm.tm_mon + 1) % 100, (unsigned)tm.tm_mday % 100);
    memcpy(out, day, 6);
    uint64_t v = rand_below(UINT64_C(100000000000000)); /* 10^14: the 14 digits */
    for (int i = ORDER_NO_LEN - 1; i >= 6; i--) {
        out[i] = (char)('0' + v % 10);
        v /= 10;
    }
    out[ORDER_NO_LEN] = '\0';
}

/* Looks for the order this user already placed under this key and makes
 * it the answer: replayed when the payload matches, 422 when the key was
 * used for another one. The layer named is the one that found the copy (in
 * the demo without the index, the look-up before the insert; the answer
 * says so, and nobody credits an index that is not there). Returns true
 * when an order was found and replayed; false with res untouched when
 * there is none, or with res set to the refusal or the failure. */
bool orders_replay_from_database(struct app *app, const struct order_request *rq,
                                 const struct order_render *render, struct order_result *res)
{
    struct order o;
    enum order_layer layer =
        (app->defences & DEFENCE_UNIQUE_INDEX) ? LAYER_UNIQUE_INDEX : LAYER_CHECK_THEN_INSERT;
    int rc = store_order_find_request(rq->user_id, rq->key, &o);
    if (rc == TD_ENOTFOUND)
        return false;
    if (rc != TD_OK) {
        orders_answer(res, rc == TD_EUNAVAIL ? ORDER_UNAVAILABLE : ORDER_FAILED, LAYER_NONE);
        return false;
    }
    if (o.session_id != rq->session_id || o.quantity != rq->quantity) {
        metrics_inc(M_DUP_KEY_REUSED);
        orders_answer(res, ORDER_KEY_REUSED, layer);
        return false;
    }
    metrics_inc(M_DUP_UNIQUE_INDEX);
    orders_answer_with_order(res, ORDER_REPLAYED, layer, &o, render);
    return true;
}

/* One attempt of the order transaction, with a fresh order number each
 * time (a colliding random number comes back as TD_ERETRY too). */
struct attempt {
    struct order_draft *draft;
    char *order_no;
    struct order *out;
};

static int attempt_create(void *p)
{
    struct attempt *a = p;
    orders_new_number(a->order_no);
    return store_order_create(a->draft, a->out);
}

/* The token this order spends, for the database to record with it, so
 * that a token that bought an order stays spent when Redis forgets it.
 * The database's record is a layer of its own, behind the atomic spend:
 * the demo skips it with the token switched off, and with token-atomic
 * off, whose naive GET-then-spend (cache_naive.h) shows what Redis alone
 * lets through. Returns key, filled, or NULL when nothing is recorded. */
static const char *token_to_record(const struct app *app, const struct order_request *rq, char *key)
{
    unsigned whole = DEFENCE_TOKEN | DEFENCE_TOKEN_ATOMIC;
    const char *token = rq->token != NULL ? rq->token : rq->spent_token;
    if (token == NULL || (app->defences & whole) != whole)
        return NULL;
    ordertoken_key(token, key);
    return key;
}

/* Layers 5 and 6: the database transaction, retried after deadlocks.
 * filter_missed: the order-key filter was not told of this key, and the
 * order records that it was not (store.h). */
void orders_write_order(struct app *app, const struct order_request *rq, bool filter_missed,
                        const struct order_render *render, struct order_result *res)
{
    char order_no[ORDER_NO_LEN + 1], token_key[ORDERTOKEN_KEY_LEN + 1];
    struct order o;
    struct order_draft d = {
        .order_no = order_no,
        .user_id = rq->user_id,
        .session_id = rq->session_id,
        .request_id = rq->key,
        .quantity = rq->quantity,
        .token_key = token_to_record(app, rq, token_key),
        .filter_missed = filter_missed,
    };
    struct attempt at = {&d, order_no, &o};
    int rc = txretry_run(app->cfg->tx_retries, attempt_create, &at);
    switch (rc) {
    case TD_OK:
        metrics_inc(M_ORDERS_CREATED);
        orders_answer_with_order(res, ORDER_CREATED, LAYER_NONE, &o, render);
        return;
    case TD_EDUP:
        orders_answer(res, ORDER_FAILED, LAYER_NONE);
        break;
    case TD_ESPENT:
        /* Another key's order spent the token, and Redis forgot it: the
         * unique key of the token refused this one, rolled back. */
        orders_answer(res, ORDER_TOKEN_INVALID, LAYER_UNIQUE_INDEX);
        break;
    case TD_ECONFLICT:
        metrics_inc(M_STOCK_CONFLICTS);
        orders_answer(res, ORDER_SOLD_OUT, LAYER_NONE);
        return;
    case TD_ENOTFOUND:
        orders_answer(res, ORDER_SESSION_NOT_FOUND, LAYER_NONE);
        return;
    case TD_EUNAVAIL:
    case TD_ERETRY:
        orders_answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
        return;
    default:
        orders_answer(res, ORDER_FAILED, LAYER_NONE);
        return;
    }

    /* The unique index refused a second order for this key: the first one
     * exists, committed. Answer with it, as the original request did (a
     * row the index saw and the look-up cannot stays a failure). A refused
     * token is looked up too, as every refusal is: in the demo without the
     * index on the key, a copy of this request can meet its own token. */
    if (!orders_replay_from_database(app, rq, render, res) && res->outcome == ORDER_TOKEN_INVALID)
        metrics_inc(M_DUP_UNIQUE_INDEX);
}

/* DEMO ONLY (forget-failures switched off): a failure is stored under the
 * key like a success, as the articles warn against, so every retry of the
 * key is told the same failure until the record expires, long after the
 * dependency is back or seats were returned. Returns true when it was. */
bool orders_remember_failure(struct app *app, const struct order_request *rq, const char *fp,
                             const struct claims *cl, const struct order_render *render,
                             const struct order_result *res)
{
    if ((app->defences & DEFENCE_FORGET_FAILURES) || cl->marker == NULL)
        return false;
    if (res->outcome != ORDER_SOLD_OUT && res->outcome != ORDER_UNAVAILABLE)
        return false;
    int status = 0;
    size_t len = 0;
    char *body = render->failure(res->outcome, &status, &len);
    char *done = idem_done(fp, status, body, len);
    cache_order_complete(rq->user_id, rq->key, cl->marker, done, app->cfg->idem_ttl_s,
                         rq->session_id, cl->locked ? cl->owner : NULL);
    orders_keep_in_process(app, rq, fp, status, body, len);
    free(done);
    free(body);
    return true;
}

/* The order-key filter (bloom.h), asked before the refusal's database
 * look-up: may this user have an order under this key? Its "certainly
 * not" is only as good as what it has seen, so it is taken only from a
 * filter that is complete (built from the orders table since Redis last
 * lost its records, bloom_job.h) and only while this process has told it
 * of every order it recorded. A "maybe", true or false, costs the query
 * it would have cost without a filter: never a wrong answer. Returns
 * false when the look-up can be skipped. */
bool orders_may_have_order(struct app *app, const struct order_request *rq)
{
    uint64_t pos[BLOOM_MAX_K];
    bool trusted = false, maybe = true;
    if (!(app->defences & DEFENCE_BLOOM) || app->bloom.m == 0)
        return true;
    bloom_positions(app->bloom, rq->user_id, rq->key, pos);
    /* (The demo's naive cache, bloom-liveness off, calls any filter
     * trusted: cache_naive.h.) */
    if (cache_bloom_check(app->bloom_shape, pos, app->bloom.k, &trusted, &maybe) != TD_OK)
        return true;
    if (maybe) {
        metrics_inc(M_BLOOM_MAYBE);
        return true;
    }
    if (!trusted || atomic_load(&app->bloom_missed)) {
        metrics_inc(M_BLOOM_UNTRUSTED);
        return true;
    }
    metrics_inc(M_BLOOM_SAVED);
    return false;
}

/* The key has, or may have in a moment, an order: the filter must know
 * it. Told before the order's transaction, not after its COMMIT: a copy
 * refused between the COMMIT and a later add would be believed ("no
 * order") though the order exists, and a process dying there would leave
 * the key out for good. A transaction that then fails leaves a false
 * positive, which costs one query. When the filter cannot be told, it
 * stops being trusted: here at once (app->bloom_missed), and everywhere
 * else through the row the order writes (order_key_filter_misses), which
 * outlives this process. Returns false when it could not be told. */
bool orders_bloom_note(struct app *app, const struct order_request *rq)
{
    uint64_t pos[BLOOM_MAX_K];
    if (!(app->defences & DEFENCE_BLOOM) || app->bloom.m == 0)
        return true;
    bloom_positions(app->bloom, rq->user_id, rq->key, pos);
    if (cache_bloom_add(pos, app->bloom.k) == TD_OK)
        return true;
    atomic_store(&app->bloom_missed, true);
    return false;
}
