/* payments.c - the payment callback's defence, step by step (payments.h). */
#include "payments.h"

#include "app.h"
#include "defences.h"
#include "err.h"
#include "event_payload.h"
#include "log.h"
#include "metrics.h"
#include "statemachine.h"
#include "store_payments.h"
#include "txretry.h"
#include "digest.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum metric outcome_metrics[PAY_OUTCOME_COUNT] = {
    [PAY_APPLIED] = M_PAYMENTS_APPLIED,     [PAY_FAILED] = M_PAYMENTS_FAILED,
    [PAY_DUPLICATE] = M_PAYMENTS_DUPLICATE, [PAY_LATE] = M_PAYMENTS_LATE,
    [PAY_MISMATCH] = M_PAYMENTS_MISMATCH,
};

bool payments_txn_id_valid(const char *s)
{
    return id_chars_ok(s, TXN_ID_MAX);
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

bool payments_proof_is_webhook(const struct payment_proof *proof)
{
    return proof->webhook_signature != NULL;
}

enum paysig_result payments_verify(const struct app *app, const struct payment_proof *proof,
                                   const char *body, size_t len)
{
    static atomic_bool warned;
    const struct config *cfg = app->cfg;
    struct paysig_keys keys;
    char why[160];
    /* Read per callback: a few hundred bytes of parsing, against a
     * secret that has one place to live, the configuration. */
    if (!paysig_keys_parse(cfg->pay_secret, &keys, why, sizeof why)) {
        if (!atomic_exchange(&warned, true))
            log_warn("%s: every payment callback is refused", why);
        return PAYSIG_BAD;
    }
    if (payments_proof_is_webhook(proof))
        return paysig_verify_webhook(&keys, proof->webhook_id, proof->webhook_timestamp,
                                     proof->webhook_signature, body, len, wall_s(),
                                     cfg->pay_tolerance_s);
    return paysig_verify_keys(&keys, proof->pay_timestamp, proof->pay_signature, body, len,
                              wall_s(), cfg->pay_tolerance_s);
}

void payments_delivery_init(struct payment_delivery *dl, const char *id, const char *body,
                            size_t len)
{
    unsigned char md[SHA256_BYTES];
    dl->id = id;
    sha256(body != NULL ? body : "", len, md);
    hex_encode(md, sizeof md, dl->fingerprint);
}

bool payments_same_callback(const struct payment_seen *seen, const struct payment_callback *cb)
{
    return strcmp(seen->txn_id, cb->txn_id) == 0 && strcmp(seen->order_no, cb->order_no) == 0 &&
           seen->amount_cents == cb->amount_cents && seen->success == cb->success;
}

/* One callback's transaction, as it goes. */
struct attempt {
    const struct payment_callback *cb;
    const struct payment_delivery *dl; /* a Standard Webhooks delivery, or NULL */
    bool delivery_known;               /* dl's id was recorded before, with this body */
    bool claimed;                      /* dl's id is recorded in this transaction */
    bool delivery_reused;              /* dl's id was recorded with another body */
    bool keep_replay;                  /* a replay whose new delivery id is committed */
    bool dedup;                        /* the defence is on (off only in the replay lab) */
    struct order order;
    enum pay_outcome outcome;
    enum order_status after;  /* the order's status once the callback is applied */
    struct payment_seen seen; /* the txn_id's row, when one was recorded before */
    bool raced;               /* another transaction committed this txn_id meanwhile */
};

/* Step 2, the defence: a txn_id is answered once. Under the order's lock
 * this read sees every earlier callback of the order committed. TD_EDUP
 * with a->seen when the txn_id is recorded; *recorded says whether it is. */
static int dedup_txn(struct pay_tx *tx, struct attempt *a, bool *recorded)
{
    int rc = store_payment_find(tx, a->cb->txn_id, &a->seen);
    *recorded = rc == TD_OK;
    if (rc == TD_ENOTFOUND)
        return TD_OK;
    if (rc == TD_OK && a->dedup)
        return TD_EDUP;
    /* DEMO ONLY (callback-dedup switched off): the look only spares the
     * unique key, never the effect. The outcome is decided again from the
     * order alone, so a retry of the payment that paid it is taken for a
     * second payment and refunded. */
    return rc;
}

/* Step 3: the outcome, and the state the order moves to. Only APPLIED
 * moves it, by the state machine's pay. */
static int decide(struct attempt *a)
{
    a->outcome = payments_decide(a->order.status, a->order.amount_cents, a->cb);
    a->after = a->order.status;
    if (a->outcome == PAY_APPLIED && !statemachine_next(a->order.status, EVENT_PAY, &a->after))
        return TD_ERETRY; /* decide said PENDING_PAYMENT: cannot happen; look again */
    return TD_OK;
}

/* The event an outcome owes: order.paid, a refund, or none. */
static int write_event(struct pay_tx *tx, const struct attempt *a)
{
    const struct payment_callback *cb = a->cb;
    const char *type, *biz_key, *reason = pay_outcome_name(a->outcome);
    char *payload;
    switch (a->outcome) {
    case PAY_APPLIED:
        type = EVENT_ORDER_PAID;
        biz_key = a->order.order_no;
        payload = event_paid_write(&a->order, cb->txn_id, tx->at);
        break;
    case PAY_DUPLICATE:
    case PAY_LATE:
        /* What to refund is what the gateway took: the callback's amount. */
        type = EVENT_REFUND_REQUIRED;
        biz_key = cb->txn_id;
        payload = event_refund_write(&a->order, cb->txn_id, cb->amount_cents, reason, tx->at);
        break;
    default:
        return TD_OK;
    }
    int rc = store_payment_event(tx, type, biz_key, payload);
    free(payload);
    if (rc == TD_EDUP) {
        if (!a->dedup)
            return TD_OK; /* demo: the same refund, owed again, is already queued */
        log_error("outbox already holds %s %s; the payment rows disagree", type, biz_key);
        return TD_EINTERNAL;
    }
    return rc;
}

/* Step 4: the payment row, the transition (a compare-and-set on status
 * and version) and the event, all in tx. */
static int record(struct pay_tx *tx, struct attempt *a, bool recorded)
{
    int rc = TD_OK;
    /* With the defence off the row is skipped when one exists, so that the
     * unique key cannot step in for the switched-off defence. */
    if (!recorded) {
        rc = store_payment_insert(tx, a->cb, &a->order, a->outcome, a->after);
        a->raced = rc == TD_EDUP;
    }
    if (rc == TD_OK && a->outcome == PAY_APPLIED) {
        rc = store_payment_move(tx, &a->order, EVENT_PAY);
        if (rc == TD_ECONFLICT)
            rc = TD_ERETRY; /* cannot happen under the lock; if it does, look again */
    }
    return rc == TD_OK ? write_event(tx, a) : rc;
}

/* The delivery step: a new delivery id is recorded first, before the
 * order's lock, so that copies of one delivery queue on its row and the
 * second finds what the first committed. TD_ECONFLICT when the id is
 * another body's. */
static int claim_delivery(struct pay_tx *tx, struct attempt *a)
{
    char seen[IDEM_FP_LEN + 1];
    if (a->dl == NULL || a->delivery_known)
        return TD_OK;
    int rc = store_payment_delivery_claim(tx, a->dl->id, a->dl->fingerprint, a->cb->txn_id, seen);
    if (rc == TD_OK)
        a->claimed = true;
    if (rc != TD_EDUP)
        return rc;
    /* A copy committed the id first: with this body it is this very
     * delivery, answered below by its txn_id's row. */
    if (strcmp(seen, a->dl->fingerprint) == 0)
        return TD_OK;
    a->delivery_reused = true;
    return TD_ECONFLICT;
}

/* Steps 2 to 4, in order, on the locked order. */
static int callback_in_tx(struct pay_tx *tx, struct attempt *a)
{
    bool recorded = false;
    int rc = claim_delivery(tx, a);
    if (rc == TD_OK)
        rc = store_payment_lock_order(tx, a->cb->order_no, &a->order);
    if (rc == TD_OK)
        rc = dedup_txn(tx, a, &recorded);
    if (rc == TD_EDUP && a->claimed && payments_same_callback(&a->seen, a->cb)) {
        /* A new delivery of a payment recorded before: its answer is the
         * replay, and its id is committed with that answer, so that the
         * same id with another body is refused from now on. */
        a->keep_replay = true;
        return TD_OK;
    }
    if (rc == TD_OK)
        rc = decide(a);
    return rc == TD_OK ? record(tx, a, recorded) : rc;
}

/* One attempt, for txretry_run: TD_OK, TD_EDUP with a->seen, or an error. */
static int attempt_once(void *p)
{
    struct attempt *a = p;
    struct pay_tx tx;
    a->raced = a->claimed = a->delivery_reused = a->keep_replay = false;
    int rc = store_payment_begin(&tx);
    if (rc != TD_OK)
        return rc;
    rc = store_payment_end(&tx, callback_in_tx(&tx, a));
    if (rc == TD_OK && a->keep_replay)
        return TD_EDUP; /* committed the delivery; a->seen answers */
    if (a->raced) {
        /* The same txn_id, sent for another order at the same time,
         * committed first: the unique key decided. Its row, read outside
         * the rolled-back transaction, says which callback it was. */
        rc = store_payment_find(&tx, a->cb->txn_id, &a->seen);
        if (rc == TD_OK)
            rc = TD_EDUP;
        else if (rc == TD_ENOTFOUND)
            rc = TD_ERETRY;
    }
    return rc;
}

/* The txn_id was recorded before. The gateway's retry of that callback
 * gets its first outcome; the same id for another order, amount or status
 * is the gateway's fault, and answering it with someone else's outcome
 * would hide it. */
static int replay(const struct attempt *a, struct payment_result *res)
{
    if (!payments_same_callback(&a->seen, a->cb)) {
        metrics_inc(M_PAYMENTS_TXN_REUSED);
        return TD_EDUP;
    }
    res->outcome = a->seen.outcome;
    res->order_status = a->seen.order_status;
    res->replayed = true;
    snprintf(res->txn_id, sizeof res->txn_id, "%s", a->seen.txn_id);
    snprintf(res->order_no, sizeof res->order_no, "%s", a->seen.order_no);
    metrics_inc(M_PAYMENTS_REPLAYED);
    return TD_OK;
}

int payments_callback(struct app *app, const struct payment_callback *cb,
                      struct payment_result *res)
{
    return payments_callback_delivery(app, cb, NULL, res);
}

/* A delivery id recorded on an earlier day is in no row today's insert
 * would meet (the day is part of the key): it is looked for first, as
 * committed now. TD_OK, with a->delivery_known when it was recorded with
 * this body and a->delivery_reused with another; or the store's error. */
static int look_up_delivery(struct attempt *a)
{
    char fp[IDEM_FP_LEN + 1];
    if (a->dl == NULL)
        return TD_OK;
    int rc = store_payment_delivery_find(a->dl->id, fp);
    if (rc == TD_ENOTFOUND)
        return TD_OK;
    if (rc != TD_OK)
        return rc;
    if (strcmp(fp, a->dl->fingerprint) == 0)
        a->delivery_known = true;
    else
        a->delivery_reused = true;
    return TD_OK;
}

int payments_callback_delivery(struct app *app, const struct payment_callback *cb,
                               const struct payment_delivery *dl, struct payment_result *res)
{
    memset(res, 0, sizeof *res);
    /* Stays a switch: the lesson is the retried callback taken for a
     * second payment when the transaction id is not deduped. */
    struct attempt a = {.cb = cb, .dl = dl, .dedup = (app->defences & DEFENCE_CALLBACK_DEDUP) != 0};
    /* A delivery id is bound to its body whatever the body says: another
     * body under it is refused as such, even one naming no order. */
    int rc = look_up_delivery(&a);
    if (rc != TD_OK)
        return rc;
    /* Anything but an order number names no order (and must not reach a
     * query that compares with PAD SPACE): 404 without a transaction. */
    if (!a.delivery_reused && !order_no_valid(cb->order_no))
        return TD_ENOTFOUND;
    if (!a.delivery_reused)
        rc = txretry_run(app->cfg->tx_retries, attempt_once, &a);
    if (a.delivery_reused) {
        /* The delivery id is another body's (recorded before, or by a copy
         * that committed it first): nothing is recorded. */
        metrics_inc(M_PAYMENTS_WEBHOOK_ID_REUSED);
        return TD_ECONFLICT;
    }
    if (rc == TD_EDUP)
        return replay(&a, res);
    if (rc != TD_OK)
        return rc;
    res->outcome = a.outcome;
    res->order_status = a.after;
    snprintf(res->txn_id, sizeof res->txn_id, "%s", cb->txn_id);
    snprintf(res->order_no, sizeof res->order_no, "%s", a.order.order_no);
    metrics_inc(outcome_metrics[res->outcome]);
    return TD_OK;
}
