#include "payments.h"

#include "app.h"
#include "defenses.h"
#include "err.h"
#include "metrics.h"
#include "store_payments.h"
#include "txretry.h"

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
    size_t chars = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p <= 0x20 || *p == 0x7f)
            return false;
        if ((*p & 0xC0) != 0x80)
            chars++;
    }
    return chars >= 1 && chars <= TXN_ID_MAX;
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

/* Order numbers are ORDER_NO_LEN digits: anything else names no order
 * and need not cost a transaction. */
static bool plausible_order_no(const char *s)
{
    size_t n = strlen(s);
    if (n != ORDER_NO_LEN)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
    }
    return true;
}

struct attempt {
    const struct payment_callback *cb;
    bool dedup;
    struct payment_result *res;
};

static int attempt_once(void *p)
{
    struct attempt *a = p;
    return store_payment_record(a->cb, a->dedup, payments_decide, a->res);
}

int payments_callback(struct app *app, const struct payment_callback *cb,
                      struct payment_result *res)
{
    memset(res, 0, sizeof *res);
    if (!plausible_order_no(cb->order_no))
        return TD_ENOTFOUND;
    struct attempt a = {cb, (app->defenses & DEFENSE_CALLBACK_DEDUP) != 0, res};
    int rc = txretry_run(app->cfg->tx_retries, attempt_once, &a);
    if (rc != TD_OK)
        return rc;
    if (res->replayed)
        metrics_inc(M_PAYMENTS_REPLAYED);
    else
        metrics_inc(outcome_metrics[res->outcome]);
    return TD_OK;
}
