/* unique_index.c - the database's word on an order (unique_index.h): the
 * transaction and its retries, and the look-up that answers a duplicate
 * with the order its key has. Talks to the database only (store.h): the
 * rest of the order's defences are Redis's or this process's, and only
 * accelerate. */
#include "unique_index.h"

#include "app.h"
#include "err.h"
#include "log.h"
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

/* The attempts of one order, at most: TICKETD_TX_RETRIES is at most 50
 * (config.c), and each retry is one more attempt. */
#define ATTEMPTS_MAX 51

/* The attempts of the order transaction, with a fresh order number each
 * time (a colliding random number comes back as TD_ERETRY too). Every
 * number is kept: a row carrying any of them is this request's own. */
struct attempts {
    struct order_draft *draft;
    struct order *out;
    char numbers[ATTEMPTS_MAX][ORDER_NO_LEN + 1];
    int n;
};

/* Whether order_no is one this request's attempts generated. */
static bool made_here(const struct attempts *a, const char *order_no)
{
    for (int i = 0; i < a->n; i++) {
        if (strcmp(a->numbers[i], order_no) == 0)
            return true;
    }
    return false;
}

/* How many times the look-up is asked when it meets a conflict. */
#define LOOKUP_TRIES 3

/* The order under the request's key. The look-up is a locking read (it
 * waits for a copy that has inserted and not yet committed), and a locking
 * read can itself be chosen as a deadlock's victim or, on a Galera node,
 * be aborted by a writeset another node committed (1213, TD_ERETRY): it
 * wrote nothing, so it is asked again. */
static int look_up(const struct order_request *rq, struct order *o)
{
    int rc = TD_ERETRY;
    for (int i = 0; i < LOOKUP_TRIES && rc == TD_ERETRY; i++)
        rc = store_order_find_request(rq->user_id, rq->key, o);
    return rc;
}

/* Looks for the order this user already placed under this key and makes
 * it the answer: replayed when the payload matches, 422 when the key was
 * used for another one; created when it carries an order number mine
 * generated, this request's own attempts (NULL: none). The layer named
 * is the one that found the copy (in the demo without the index, the
 * look-up before the insert; the answer says so, and nobody credits an
 * index that is not there). Returns true when an order was found and is
 * the answer; false with res untouched when there is none, or with res
 * set to the refusal or the failure. *looked: the look-up's own code. */
static bool find_copy(const struct order_request *rq, enum order_layer found_by,
                      const struct order_render *render, const struct attempts *mine,
                      struct order_result *res, int *looked)
{
    struct order o;
    int rc = *looked = look_up(rq, &o);
    if (rc == TD_ENOTFOUND)
        return false;
    if (rc != TD_OK) {
        /* Unavailable, or a conflict each time: nothing was decided, and
         * the client's retry finds the order or makes it (503). */
        bool retry = rc == TD_EUNAVAIL || rc == TD_ERETRY;
        if (rc == TD_ERETRY)
            log_warn("order key %s of user %lld: the look-up met a conflict %d times; answered "
                     "unavailable",
                     rq->key, (long long)rq->user_id, LOOKUP_TRIES);
        orders_answer(res, retry ? ORDER_UNAVAILABLE : ORDER_FAILED, LAYER_NONE);
        return false;
    }
    if (mine != NULL && made_here(mine, o.order_no)) {
        /* The order numbers are random and unique: the row is this
         * request's own, committed by an attempt whose answer was lost.
         * The database layer sent that text again (a link taken for
         * stale), and the copy met its own order number (taken for a
         * random collision, so the next attempt drew a new number) or its
         * own key. It was made now, for this request: a replay would tell
         * a client that sent it once that it had sent it before. */
        log_info("order %s: met again by its own request (an attempt whose answer was lost); "
                 "answered as created",
                 o.order_no);
        metrics_inc(M_ORDERS_CREATED);
        orders_answer_with_order(res, ORDER_CREATED, LAYER_NONE, &o, render);
        return true;
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

bool unique_index_find_copy(const struct order_request *rq, enum order_layer found_by,
                            const struct order_render *render, struct order_result *res)
{
    int looked;
    return find_copy(rq, found_by, render, NULL, res, &looked);
}

static int attempt_create(void *p)
{
    struct attempts *a = p;
    char *no = a->numbers[a->n < ATTEMPTS_MAX ? a->n++ : ATTEMPTS_MAX - 1];
    unique_index_new_number(no);
    a->draft->order_no = no;
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
    struct order o;
    struct order_draft d = {
        .user_id = rq->user_id,
        .session_id = rq->session_id,
        .request_id = rq->key,
        .quantity = rq->quantity,
        .token_key = ask->token_key,
        .filter_missed = ask->filter_missed,
    };
    struct attempts at = {.draft = &d, .out = &o};
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
     * exists, committed. Answer with it, as the original request did; if
     * it carries a number one of this request's attempts drew, it is this
     * request's own order, and answered as made. A refused
     * token is looked up too, as every refusal is: in the demo without the
     * index on the key, a copy of this request can meet its own token. */
    int looked;
    if (find_copy(rq, ask->found_by, render, &at, res, &looked))
        return;
    if (res->outcome == ORDER_TOKEN_INVALID) {
        metrics_inc(M_DUP_UNIQUE_INDEX);
    } else if (rc == TD_EDUP && looked == TD_ENOTFOUND) {
        /* A row the index saw and the look-up cannot: gone again (rolled
         * back) or not yet readable here. Nothing of this request was
         * kept, and whether an order exists under the key is not known
         * now: "try again" is true (503), where a failure (500) would
         * leave a client that retries nothing to go by. */
        log_warn("order key %s of user %lld: the unique index refused it and the look-up finds "
                 "no order; answered unavailable",
                 rq->key, (long long)rq->user_id);
        orders_answer(res, ORDER_UNAVAILABLE, LAYER_NONE);
    }
}
