#include "payments.h"

#include "app.h"
#include "defenses.h"
#include "err.h"
#include "metrics.h"
#include "store_payments.h"
#include "txretry.h"

#include <stdio.h>
#include <string.h>

static const char *const outcome_names[PAY_OUTCOME_COUNT] = {
    [PAY_APPLIED] = "APPLIED",
    [PAY_FAILED] = "PAYMENT_FAILED",
    [PAY_DUPLICATE] = "DUPLICATE_PAYMENT",
    [PAY_LATE] = "LATE_PAYMENT",
    [PAY_MISMATCH] = "AMOUNT_MISMATCH",
};

static const enum metric outcome_metrics[PAY_OUTCOME_COUNT] = {
    [PAY_APPLIED] = M_PAYMENTS_APPLIED,     [PAY_FAILED] = M_PAYMENTS_FAILED,
    [PAY_DUPLICATE] = M_PAYMENTS_DUPLICATE, [PAY_LATE] = M_PAYMENTS_LATE,
    [PAY_MISMATCH] = M_PAYMENTS_MISMATCH,
};

const char *pay_outcome_name(enum pay_outcome oc)
{
    if ((int)oc < 0 || oc >= PAY_OUTCOME_COUNT)
        return "UNKNOWN";
    return outcome_names[oc];
}

bool pay_outcome_parse(const char *name, enum pay_outcome *out)
{
    for (int i = 0; i < PAY_OUTCOME_COUNT; i++) {
        if (strcmp(name, outcome_names[i]) == 0) {
            *out = (enum pay_outcome)i;
            return true;
        }
    }
    return false;
}

bool payments_txn_id_valid(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == ':' || c == '-';
        if (!ok || n == TXN_ID_MAX)
            return false;
    }
    return n >= 1;
}

enum pay_outcome payments_decide(enum order_status status, int64_t order_amount,
                                 const struct payment_callback *cb)
{
    /* A failed payment moved no money: whatever the order's state, there
     * is nothing to apply and nothing to refund. */
    if (!cb->success)
        return PAY_FAILED;
    switch (status) {
    case ORDER_PENDING_PAYMENT:
        return cb->amount_cents == order_amount ? PAY_APPLIED : PAY_MISMATCH;
    case ORDER_CANCELLED:
        return PAY_LATE;
    case ORDER_PAID:
    case ORDER_TICKETED:
    case ORDER_COMPLETED:
    case ORDER_STATUS_COUNT:
        break;
    }
    /* Paid already, by another txn_id (the same one is a replay and
     * never gets here): the money came twice and must go back. */
    return PAY_DUPLICATE;
}

struct attempt {
    const struct payment_callback *cb;
    bool dedup;
    struct payment_result *res;
    struct payment_seen seen;
};

static int attempt_once(void *p)
{
    struct attempt *a = p;
    return store_payment_record(a->cb, a->dedup, payments_decide, a->res, &a->seen);
}

bool payments_same_callback(const struct payment_seen *seen, const struct payment_callback *cb)
{
    return strcmp(seen->txn_id, cb->txn_id) == 0 && strcmp(seen->order_no, cb->order_no) == 0 &&
           seen->amount_cents == cb->amount_cents && seen->success == cb->success;
}

int payments_callback(struct app *app, const struct payment_callback *cb,
                      struct payment_result *res)
{
    memset(res, 0, sizeof *res);
    /* Anything but an order number names no order (and must not reach a
     * query that compares with PAD SPACE): 404 without a transaction. */
    if (!order_no_valid(cb->order_no))
        return TD_ENOTFOUND;
    struct attempt a = {
        .cb = cb, .dedup = (app->defenses & DEFENSE_CALLBACK_DEDUP) != 0, .res = res};
    int rc = txretry_run(app->cfg->tx_retries, attempt_once, &a);
    if (rc == TD_EDUP) {
        /* The defence: the txn_id was recorded before. The gateway's retry
         * of that callback gets its first outcome; the same id for another
         * order, amount or status is the gateway's fault, and answering it
         * with someone else's outcome would hide it. */
        if (!payments_same_callback(&a.seen, cb)) {
            metrics_inc(M_PAYMENTS_TXN_REUSED);
            return TD_EDUP;
        }
        res->outcome = a.seen.outcome;
        res->order_status = a.seen.order_status;
        res->replayed = true;
        snprintf(res->txn_id, sizeof res->txn_id, "%s", a.seen.txn_id);
        snprintf(res->order_no, sizeof res->order_no, "%s", a.seen.order_no);
        metrics_inc(M_PAYMENTS_REPLAYED);
        return TD_OK;
    }
    if (rc != TD_OK)
        return rc;
    metrics_inc(outcome_metrics[res->outcome]);
    return TD_OK;
}
