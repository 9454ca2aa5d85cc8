/* unique_index.c - the database's word on an order (unique_index.h): the
 * transaction and its retries, and the look-up that answers a duplicate
 * with the order its key has. Talks to the database only (store.h): the
 * rest of the order's defences are Redis's or this process's, and only
 * accelerate. */
#include "unique_index.h"

#include "app.h"
#include "err.h"
#include "metrics.h"
#include "order_answer.h"
#include "store.h"
#include "txretry.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

void unique_index_new_number(char *out)
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
bool unique_index_find_copy(const struct order_request *rq, enum order_layer found_by,
                            const struct order_render *render, struct order_result *res)
{
    struct order o;
    int rc = store_order_find_request(rq->user_id, rq->key, &o);
    if (rc == TD_ENOTFOUND)
        return false;
    if (rc != TD_OK) {
        orders_answer(res, rc == TD_EUNAVAIL ? ORDER_UNAVAILABLE : ORDER_FAILED, LAYER_NONE);
        return false;
    }
    if (o.session_id != rq->session_id || o.quantity != rq->quantity) {
        metrics_inc(M_DUP_KEY_REUSED);
        orders_answer(res, ORDER_KEY_REUSED, found_by);
        return false;
    }
    metrics_inc(M_DUP_UNIQUE_INDEX);
    orders_answer_with_order(res, ORDER_REPLAYED, found_by, &o, render);
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
    unique_index_new_number(a->order_no);
    return store_order_create(a->draft, a->out);
}

/* What a transaction that placed nothing tells the client. */
static enum order_outcome refusal_outcome(int rc)
{
    switch (rc) {
    case TD_ESPENT:
        /* Another key's order spent the token, and Redis forgot it: the
         * unique key of the token refused this one, rolled back. */
        return ORDER_TOKEN_INVALID;
    case TD_ECONFLICT:
        return ORDER_SOLD_OUT;
    case TD_ENOTFOUND:
        return ORDER_SESSION_NOT_FOUND;
    case TD_EUNAVAIL:
    case TD_ERETRY:
        return ORDER_UNAVAILABLE;
    default: /* TD_EDUP (looked up below), or a failure */
        return ORDER_FAILED;
    }
}

/* Layers 5 and 6: the database transaction, retried after deadlocks.
 * filter_missed: the order-key filter was not told of this key, and the
 * order records that it was not (store.h). */
void unique_index_place(struct app *app, const struct order_request *rq,
                        const struct unique_index_ask *ask, const struct order_render *render,
                        struct order_result *res)
{
    char order_no[ORDER_NO_LEN + 1];
    struct order o;
    struct order_draft d = {
        .order_no = order_no,
        .user_id = rq->user_id,
        .session_id = rq->session_id,
        .request_id = rq->key,
        .quantity = rq->quantity,
        .token_key = ask->token_key,
        .filter_missed = ask->filter_missed,
    };
    struct attempt at = {&d, order_no, &o};
    int rc = txretry_run(app->cfg->tx_retries, attempt_create, &at);
    if (rc == TD_OK) {
        metrics_inc(M_ORDERS_CREATED);
        orders_answer_with_order(res, ORDER_CREATED, LAYER_NONE, &o, render);
        return;
    }
    orders_answer(res, refusal_outcome(rc), rc == TD_ESPENT ? LAYER_UNIQUE_INDEX : LAYER_NONE);
    if (rc == TD_ECONFLICT)
        metrics_inc(M_STOCK_CONFLICTS);
    if (rc != TD_EDUP && rc != TD_ESPENT)
        return;

    /* The unique index refused a second order for this key: the first one
     * exists, committed. Answer with it, as the original request did (a
     * row the index saw and the look-up cannot stays a failure). A refused
     * token is looked up too, as every refusal is: in the demo without the
     * index on the key, a copy of this request can meet its own token. */
    if (!unique_index_find_copy(rq, ask->found_by, render, res) &&
        res->outcome == ORDER_TOKEN_INVALID)
        metrics_inc(M_DUP_UNIQUE_INDEX);
}
