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
    fake_payments.seen_amount_cents = -1;
}

int store_payment_record(const struct payment_callback *cb, bool dedup, payment_decide_fn decide,
                         struct payment_result *out, struct payment_seen *seen)
{
    memset(out, 0, sizeof *out);
    memset(seen, 0, sizeof *seen);
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
        /* The txn_id's row: the recorded callback, as the knobs say. */
        snprintf(seen->txn_id, sizeof seen->txn_id, "%s", cb->txn_id);
        snprintf(seen->order_no, sizeof seen->order_no, "%s",
                 fake_payments.seen_order_no[0] != '\0' ? fake_payments.seen_order_no
                                                        : cb->order_no);
        seen->amount_cents = fake_payments.seen_amount_cents >= 0 ? fake_payments.seen_amount_cents
                                                                  : cb->amount_cents;
        seen->success = fake_payments.seen_failed ? false : cb->success;
        seen->outcome = (enum pay_outcome)fake_payments.outcome;
        seen->order_status = fake_payments.status;
        return TD_EDUP;
    }
    out->outcome = decide(fake_payments.status, fake_payments.amount_cents, cb);
    out->order_status = out->outcome == PAY_APPLIED ? ORDER_PAID : fake_payments.status;
    snprintf(out->txn_id, sizeof out->txn_id, "%s", cb->txn_id);
    snprintf(out->order_no, sizeof out->order_no, "%s", cb->order_no);
    return TD_OK;
}
