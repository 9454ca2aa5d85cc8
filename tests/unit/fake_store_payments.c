/* fake_store_payments.c - the payment callback's database port
 * (store_payments.h) answered from the knobs of fakes.h. */
#include "fakes.h"
#include "store_payments.h"

#include "err.h"

#include <stdio.h>
#include <string.h>

struct fake_payments fake_payments;

void fake_payments_reset(void)
{
    memset(&fake_payments, 0, sizeof fake_payments);
    fake_payments.status = ORDER_PENDING_PAYMENT;
    fake_payments.amount_cents = 2000;
}

int store_payment_record(const struct payment_callback *cb, bool dedup, payment_decide_fn decide,
                         struct payment_result *out)
{
    memset(out, 0, sizeof *out);
    fake_call("payment_record");
    int i = fake_payments.calls++;
    fake_payments.dedup = dedup;
    fake_payments.decide_given = decide != NULL;
    snprintf(fake_payments.txn_id, sizeof fake_payments.txn_id, "%s", cb->txn_id);
    snprintf(fake_payments.order_no, sizeof fake_payments.order_no, "%s", cb->order_no);
    fake_payments.cb_amount_cents = cb->amount_cents;
    fake_payments.cb_success = cb->success;

    int rc = TD_OK;
    if (fake_payments.nrc > 0)
        rc = fake_payments.rc[i < fake_payments.nrc ? i : fake_payments.nrc - 1];
    if (rc != TD_OK)
        return rc;
    if (fake_payments.replayed) {
        out->replayed = true;
        out->outcome = (enum pay_outcome)fake_payments.outcome;
    } else {
        out->outcome = decide(fake_payments.status, fake_payments.amount_cents, cb);
    }
    out->order_status = out->outcome == PAY_APPLIED ? ORDER_PAID : fake_payments.status;
    snprintf(out->txn_id, sizeof out->txn_id, "%s", cb->txn_id);
    snprintf(out->order_no, sizeof out->order_no, "%s", cb->order_no);
    return TD_OK;
}
