/* store_payments.h - the database port of the payment callback: small
 * steps of one transaction, each one statement, in the order payments.c
 * takes them (the defence itself, which step comes when and what a
 * result means, is payments.c's).
 *
 * Implemented on MariaDB/MySQL by payments_mysql.c. Errors as in store.h;
 * a step that fails leaves the transaction for store_payment_end to roll
 * back. A transaction stays on one connection: a request's fiber keeps the
 * one it borrowed until the request has ended (store.h). */
#ifndef TICKETD_STORE_PAYMENTS_H
#define TICKETD_STORE_PAYMENTS_H

#include "idem.h"
#include "payment.h"
#include "statemachine.h"

#include <stdbool.h>

struct db_conn;

/* An open transaction of the callback, and the one instant that stamps
 * every row it writes. */
struct pay_tx {
    struct db_conn *conn;  /* the adapter's; the domain only hands it back */
    char stamp[32];        /* the instant, as the database's DATETIME(3) text */
    char at[TIME_LEN + 1]; /* the instant, RFC 3339: an event's occurred_at */
};

/* Starts a transaction on *tx (cleared on entry). */
int store_payment_begin(struct pay_tx *tx);

/* Commits when rc is TD_OK, else rolls back; returns rc or the COMMIT's
 * error (db_tx_end). */
int store_payment_end(struct pay_tx *tx, int rc);

/* Reads the order by number and locks it (FOR UPDATE): every callback of
 * one order waits here, so they apply one by one and each sees what the
 * previous one committed. With state-cas switched off (DEMO ONLY) a plain
 * read instead. TD_ENOTFOUND when there is none. */
int store_payment_lock_order(struct pay_tx *tx, const char *order_no, struct order *o);

/* The payment row of txn_id, into *seen (cleared on entry): TD_OK, or
 * TD_ENOTFOUND when none is recorded. Also after store_payment_end, on
 * the same connection, to read a row another transaction committed. */
int store_payment_find(struct pay_tx *tx, const char *txn_id, struct payment_seen *seen);

/* Inserts the payment row: the callback, its outcome and the order's
 * status after it (`after`). TD_EDUP when a row of this txn_id exists (the
 * unique key on payments.txn_id: another transaction committed it
 * first); TD_EINTERNAL when oc is APPLIED and the order has an applied
 * payment already (one per order, by a unique key: the books disagree). */
int store_payment_insert(struct pay_tx *tx, const struct payment_callback *cb,
                         const struct order *o, enum pay_outcome oc, enum order_status after);

/* Applies ev to the order by compare-and-set on its status and version,
 * with its history row (store_tx_move). TD_ECONFLICT when the row moved
 * since it was read. */
int store_payment_move(struct pay_tx *tx, const struct order *o, enum order_event ev);

/* Inserts an outbox row. TD_EDUP when the outbox holds this type and
 * biz_key already. */
int store_payment_event(struct pay_tx *tx, const char *type, const char *biz_key,
                        const char *payload);

/* The delivery ids of Standard Webhooks callbacks (webhook-id), kept with
 * the fingerprint of the raw body they came with, in idempotency_records
 * (scope "webhook", user 0) for TICKETD_RETAIN_IDEMPOTENCY_RECORDS_H. */

/* The fingerprint the newest row of delivery id holds (any day), read
 * outside any transaction, into fp (IDEM_FP_LEN + 1 bytes): TD_OK, or
 * TD_ENOTFOUND when the id was never recorded. */
int store_payment_delivery_find(const char *id, char *fp);

/* Records delivery id with its body's fingerprint fp and its txn_id in
 * tx, under today's row: TD_OK; TD_EDUP when a row of id was committed
 * today by another transaction (a copy racing this one is waited for),
 * with its fingerprint in seen_fp (IDEM_FP_LEN + 1 bytes). */
int store_payment_delivery_claim(struct pay_tx *tx, const char *id, const char *fp,
                                 const char *txn_id, char *seen_fp);

#endif
