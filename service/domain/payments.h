/* payments.h - the payment gateway's callback: what a verified callback
 * does to its order, recorded once per gateway transaction id.
 *
 * The defence (callback-dedup), step by step in payments.c:
 *
 *   1. verify    the HMAC over the raw body and its timestamp
 *                (payments_verify), before anything reads the body, in
 *                the X-Pay-* scheme or the Standard Webhooks one;
 *      delivery  a Standard Webhooks delivery's id (webhook-id) is kept
 *                with the fingerprint of its raw body, in the payment's
 *                own transaction: the same id with the same body is a
 *                retry, answered as its payment was (the txn_id replays
 *                it), the same id with another body is refused
 *                (TD_ECONFLICT, 422 IDEMPOTENCY_KEY_REUSED), and a
 *                refused delivery records nothing;
 *   2. dedup     under the order's row lock, look for the txn_id: one seen
 *                before changes nothing. The same callback again (same
 *                order, amount and status) is answered with its first
 *                outcome, marked replayed; the same txn_id with another
 *                order, amount or status is refused (TD_EDUP, 422
 *                IDEMPOTENCY_KEY_REUSED), as an Idempotency-Key reused
 *                with another payload is. payments.txn_id is unique, so a
 *                copy racing in another transaction is caught at the insert;
 *   3. decide    the outcome (payments_decide) and, for APPLIED, the state
 *                machine's pay, applied by compare-and-set on the order's
 *                status and version;
 *   4. record    the payment row with its outcome, the transition and the
 *                outbox event, in one transaction.
 *
 * The rules (payments_decide) on the locked order:
 *
 *   status FAILED                          -> PAYMENT_FAILED     order unchanged
 *   order PENDING_PAYMENT, amount differs  -> AMOUNT_MISMATCH    order unchanged
 *   order PENDING_PAYMENT, amount matches  -> APPLIED            PAID, order.paid event
 *   order PAID, TICKETED or COMPLETED      -> DUPLICATE_PAYMENT  refund event
 *   order CANCELLED                        -> LATE_PAYMENT       refund event
 *
 * Domain logic only: it calls the store_payments port and never sees HTTP
 * or JSON bodies; api_payments.c turns its answers into statuses.
 * Thread-safe. */
#ifndef TICKETD_PAYMENTS_H
#define TICKETD_PAYMENTS_H

#include "idem.h"
#include "model.h"
#include "payment.h"
#include "paysig.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct app;

/* True when s is an acceptable txn_id: 1..TXN_ID_MAX characters of
 * A-Z a-z 0-9 . _ : - (the Idempotency-Key's grammar). No space, which the
 * unique key would ignore at the end (utf8mb4_bin pads), no control
 * character for logs to mangle, and nothing the collation could fold. */
bool payments_txn_id_valid(const char *s);

/* The outcome rules above, for an order in `status` whose amount is
 * order_amount. Pure. */
enum pay_outcome payments_decide(enum order_status status, int64_t order_amount,
                                 const struct payment_callback *cb);

struct payment_result {
    enum pay_outcome outcome;
    enum order_status order_status; /* the order's status after this txn_id's callback */
    bool replayed;                  /* the txn_id was recorded before: its first outcome */
    char txn_id[TXN_ID_BYTES + 1];
    char order_no[ORDER_NO_LEN + 1]; /* the order the txn_id was recorded for */
};

/* True when seen (a recorded payment row) records this very callback: the
 * same txn_id, order number, amount and status. */
bool payments_same_callback(const struct payment_seen *seen, const struct payment_callback *cb);

/* The headers that prove a callback's origin, raw values, NULL when
 * absent. With webhook_signature the Standard Webhooks scheme is used,
 * otherwise X-Pay-* (paysig.h). */
struct payment_proof {
    const char *pay_timestamp;
    const char *pay_signature;
    const char *webhook_id;
    const char *webhook_timestamp;
    const char *webhook_signature;
};

/* True when the Standard Webhooks scheme applies to proof. */
bool payments_proof_is_webhook(const struct payment_proof *proof);

/* Step 1: checks proof over the callback's raw body with the secrets of
 * TICKETD_PAY_SECRET (one, or two during a rotation) and
 * TICKETD_PAY_TOLERANCE_S against the wall clock (paysig.h). Without a
 * readable secret every callback is PAYSIG_BAD (and a warning is logged
 * once). */
enum paysig_result payments_verify(const struct app *app, const struct payment_proof *proof,
                                   const char *body, size_t len);

/* A Standard Webhooks delivery: its id (borrowed) and the hex SHA-256 of
 * its raw body. */
struct payment_delivery {
    const char *id;
    char fingerprint[IDEM_FP_LEN + 1];
};

/* Fills *dl for delivery id (borrowed) of body (len bytes). */
void payments_delivery_init(struct payment_delivery *dl, const char *id, const char *body,
                            size_t len);

/* Steps 2 to 4: applies one verified callback: one transaction, run again after
 * deadlocks. Returns TD_OK with *res filled (cleared on entry);
 * TD_ENOTFOUND when there is no such order (nothing recorded);
 * TD_EDUP when the txn_id was recorded for another order, amount or
 * status (nothing recorded);
 * TD_EUNAVAIL or TD_ERETRY when the database could not do it (nothing
 * recorded; the gateway will retry); TD_EINTERNAL. */
int payments_callback(struct app *app, const struct payment_callback *cb,
                      struct payment_result *res);

/* payments_callback for a Standard Webhooks delivery dl (NULL: none, as
 * payments_callback): also TD_ECONFLICT when dl's id was recorded with
 * another raw body (nothing recorded). The delivery is recorded with the
 * callback's answer, a replay of its txn_id's included, in the same
 * transaction. */
int payments_callback_delivery(struct app *app, const struct payment_callback *cb,
                               const struct payment_delivery *dl, struct payment_result *res);

#endif
