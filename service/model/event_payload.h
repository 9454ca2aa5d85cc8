/* event_payload.h - the outbox events ticketd writes, and the JSON of
 * their payloads: written and read here only, so the payment callback
 * that writes order.paid and the consumers that read it cannot drift
 * apart.
 *
 *   order.paid               biz_key order_no; the consumers (consume.h) act on it
 *   payment.refund_required  biz_key txn_id; for an operator, nobody consumes it
 *
 * Pure (jansson only); thread-safe. */
#ifndef TICKETD_EVENT_PAYLOAD_H
#define TICKETD_EVENT_PAYLOAD_H

#include "model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVENT_ORDER_PAID      "order.paid"
#define EVENT_REFUND_REQUIRED "payment.refund_required"

/* The consumer groups of order.paid (consume.h has what each does). The
 * names are also the `consumer` column of consume_records and
 * dead_letters and the prefix of their business keys
 * ("points:<order_no>"). */
#define EVENTS_GROUP_POINTS    "points"
#define EVENTS_GROUP_TICKETING "ticketing"

/* What the consumers read from an order.paid payload. */
struct paid_event {
    char order_no[ORDER_NO_LEN + 1];
    int64_t user_id;
    int64_t amount_cents;
};

/* The order.paid payload of order o, paid by txn_id at occurred_at (RFC
 * 3339). A new string; the caller frees it. */
char *event_paid_write(const struct order *o, const char *txn_id, const char *occurred_at);

/* The payment.refund_required payload: the gateway took amount_cents
 * under txn_id for order o, and reason (an outcome name) says why it must
 * go back. A new string; the caller frees it. */
char *event_refund_write(const struct order *o, const char *txn_id, int64_t amount_cents,
                         const char *reason, const char *occurred_at);

/* Reads an order.paid payload of len bytes whose biz_key is the order
 * number. Returns true (*why NULL), or false with *why (static text, the
 * dead letter's reason) when no delivery could ever apply it. */
bool event_paid_parse(const char *biz_key, const char *payload, size_t len, struct paid_event *pe,
                      const char **why);

#endif
