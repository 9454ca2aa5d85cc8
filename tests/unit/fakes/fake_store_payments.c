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
    fake_payments.delivery_find_rc = TD_ENOTFOUND;
}

int store_payment_begin(struct pay_tx *tx)
{
    memset(tx, 0, sizeof *tx);
    fake_call("payment_begin");
    fake_payments.calls++;
    snprintf(tx->stamp, sizeof tx->stamp, "2026-12-01 08:00:00.000");
    snprintf(tx->at, sizeof tx->at, "2026-12-01T08:00:00Z");
    return TD_OK;
}

int store_payment_end(struct pay_tx *tx, int rc)
{
    (void)tx;
    if (rc == TD_OK)
        rc = fake_payments.commit_rc;
    fake_call(rc == TD_OK ? "payment_commit" : "payment_rollback");
    fake_payments.commits += rc == TD_OK;
    return rc;
}

int store_payment_lock_order(struct pay_tx *tx, const char *order_no, struct order *o)
{
    (void)tx;
    memset(o, 0, sizeof *o);
    fake_call("payment_lock");
    snprintf(fake_payments.order_no, sizeof fake_payments.order_no, "%s", order_no);
    int i = fake_payments.calls - 1;
    int rc = TD_OK;
    if (fake_payments.nrc > 0)
        rc = fake_payments.rc[i < fake_payments.nrc ? i : fake_payments.nrc - 1];
    if (rc != TD_OK)
        return rc;
    o->id = 7;
    snprintf(o->order_no, sizeof o->order_no, "%s", order_no);
    o->user_id = 42;
    o->session_id = 3;
    o->quantity = 2;
    o->amount_cents = fake_payments.amount_cents;
    o->status = fake_payments.status;
    o->version = 1;
    return TD_OK;
}

int store_payment_find(struct pay_tx *tx, const char *txn_id, struct payment_seen *seen)
{
    (void)tx;
    memset(seen, 0, sizeof *seen);
    fake_call("payment_find");
    if (!fake_payments.replayed)
        return TD_ENOTFOUND;
    /* The recorded callback: by default the order locked, its price, SUCCESS. */
    const char *no = fake_payments.seen_order_no[0] != '\0' ? fake_payments.seen_order_no
                                                            : fake_payments.order_no;
    snprintf(seen->txn_id, sizeof seen->txn_id, "%s", txn_id);
    snprintf(seen->order_no, sizeof seen->order_no, "%.*s", ORDER_NO_LEN, no);
    seen->amount_cents = fake_payments.seen_amount_cents >= 0 ? fake_payments.seen_amount_cents
                                                              : fake_payments.amount_cents;
    seen->success = !fake_payments.seen_failed;
    seen->outcome = (enum pay_outcome)fake_payments.outcome;
    seen->order_status = fake_payments.status;
    return TD_OK;
}

int store_payment_insert(struct pay_tx *tx, const struct payment_callback *cb,
                         const struct order *o, enum pay_outcome oc, enum order_status after)
{
    (void)tx;
    (void)o;
    fake_call("payment_insert");
    snprintf(fake_payments.txn_id, sizeof fake_payments.txn_id, "%s", cb->txn_id);
    fake_payments.cb_amount_cents = cb->amount_cents;
    fake_payments.cb_success = cb->success;
    fake_payments.inserts++;
    fake_payments.inserted_outcome = oc;
    fake_payments.inserted_after = after;
    if (fake_payments.insert_rc == TD_EDUP && fake_payments.race_recorded)
        fake_payments.replayed = true;
    return fake_payments.insert_rc;
}

int store_payment_move(struct pay_tx *tx, const struct order *o, enum order_event ev)
{
    (void)tx;
    (void)o;
    fake_call("payment_move");
    fake_payments.moves++;
    fake_payments.move_event = ev;
    return fake_payments.move_rc;
}

int store_payment_event(struct pay_tx *tx, const char *type, const char *biz_key,
                        const char *payload)
{
    (void)tx;
    fake_call("payment_event");
    fake_payments.events++;
    snprintf(fake_payments.event_type, sizeof fake_payments.event_type, "%s", type);
    snprintf(fake_payments.event_biz_key, sizeof fake_payments.event_biz_key, "%s", biz_key);
    snprintf(fake_payments.event_payload, sizeof fake_payments.event_payload, "%s", payload);
    return fake_payments.event_rc;
}

int store_payment_delivery_find(const char *id, char *fp)
{
    (void)id;
    fake_call("delivery_find");
    snprintf(fp, IDEM_FP_LEN + 1, "%s",
             fake_payments.delivery_find_rc == TD_OK ? fake_payments.delivery_fp : "");
    return fake_payments.delivery_find_rc;
}

int store_payment_delivery_claim(struct pay_tx *tx, const char *id, const char *fp,
                                 const char *txn_id, char *seen_fp)
{
    (void)tx;
    (void)fp;
    (void)txn_id;
    fake_call("delivery_claim");
    fake_payments.delivery_claims++;
    snprintf(fake_payments.delivery_id, sizeof fake_payments.delivery_id, "%s", id);
    snprintf(seen_fp, IDEM_FP_LEN + 1, "%s",
             fake_payments.delivery_claim_rc == TD_EDUP ? fake_payments.delivery_fp : "");
    return fake_payments.delivery_claim_rc;
}
