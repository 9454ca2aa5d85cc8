/* payment.h - the values a payment callback is made of, shared by the
 * domain (payments.h) and the store_payments port: the outcomes and their
 * names, a validated callback, and the payment row recorded for a txn_id.
 * Pure; the names are model.c's, with the orders' statuses. */
#ifndef TICKETD_PAYMENT_H
#define TICKETD_PAYMENT_H

#include "model.h"

#include <stdbool.h>
#include <stdint.h>

/* The names are those of the contract and of payments.outcome. */
enum pay_outcome {
    PAY_APPLIED,
    PAY_FAILED,
    PAY_DUPLICATE,
    PAY_LATE,
    PAY_MISMATCH,
    PAY_OUTCOME_COUNT
};

/* "APPLIED", "PAYMENT_FAILED", ...: static strings. */
const char *pay_outcome_name(enum pay_outcome oc);
/* Returns true and sets *out when name is an outcome name. */
bool pay_outcome_parse(const char *name, enum pay_outcome *out);

/* A callback's body, validated. The strings are borrowed. */
struct payment_callback {
    const char *txn_id;   /* 1..TXN_ID_MAX characters of A-Z a-z 0-9 . _ : - */
    const char *order_no; /* as sent; an order number or not */
    int64_t amount_cents; /* >= 0 */
    bool success;         /* status SUCCESS (else FAILED) */
};

/* Bytes a txn_id may take: TXN_ID_MAX UTF-8 characters. */
#define TXN_ID_BYTES (TXN_ID_MAX * 4)

/* What a txn_id's payment row holds: the callback it recorded and the
 * outcome that callback had. */
struct payment_seen {
    char txn_id[TXN_ID_BYTES + 1];
    char order_no[ORDER_NO_LEN + 1];
    int64_t amount_cents;
    bool success;
    enum pay_outcome outcome;
    enum order_status order_status; /* the order's, after that callback */
};

#endif
