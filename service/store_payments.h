/* store_payments.h - the database port of the payment callback.
 *
 * Implemented on MariaDB/MySQL by store_payments.c; the domain
 * (payments.c) calls it. Errors as in store.h. Thread-safe: each call
 * uses the calling thread's connection. */
#ifndef TICKETD_STORE_PAYMENTS_H
#define TICKETD_STORE_PAYMENTS_H

#include "payments.h"

#include <stdbool.h>

/* The domain's rules, handed to the store so that they are applied to
 * the order as locked inside the transaction. */
typedef enum pay_outcome (*payment_decide_fn)(enum order_status status, int64_t order_amount,
                                              const struct payment_callback *cb);

/* One transaction: lock the order by number (every callback of one order
 * waits here, so they apply one by one), look for the txn_id, decide the
 * outcome, insert the payment row, move the order to PAID by
 * compare-and-set when APPLIED, insert the outbox event, commit.
 *
 * A txn_id already recorded (found under the order's lock, or committed
 * by another transaction first, which the unique key on payments.txn_id
 * reports) is answered TD_EDUP with its row in *seen, and nothing is
 * written: whether that is a retry or another callback under the same id
 * is for the caller to say. With dedup false (the demo's switched-off
 * defence) the txn_id is not looked up: the outcome is decided again
 * from the order's present state and its event written again, and the
 * payment row is only inserted when a check finds none.
 *
 * Returns TD_OK with *out filled (cleared on entry), TD_EDUP with *seen
 * filled, TD_ENOTFOUND for an unknown order, or TD_ERETRY / TD_EUNAVAIL /
 * TD_EINTERNAL with nothing written. */
int store_payment_record(const struct payment_callback *cb, bool dedup, payment_decide_fn decide,
                         struct payment_result *out, struct payment_seen *seen);

#endif
