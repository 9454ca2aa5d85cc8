/* statemachine.h - the order's life as one table: which event moves which
 * state to which. Nothing else may change an order's status.
 *
 *   PENDING_PAYMENT --pay-------> PAID --ticket--> TICKETED --complete--> COMPLETED
 *   PENDING_PAYMENT --cancel----> CANCELLED
 *   PENDING_PAYMENT --expire----> CANCELLED
 *
 * Every transition is applied as a compare-and-set on status and version
 * (store_tx_transition) and recorded in order_history. Pure; thread-safe. */
#ifndef TICKETD_STATEMACHINE_H
#define TICKETD_STATEMACHINE_H

#include "model.h"

#include <stdbool.h>

enum order_event {
    EVENT_PAY,      /* the gateway reported a successful payment */
    EVENT_TICKET,   /* the ticketing consumer issued the tickets */
    EVENT_COMPLETE, /* an admin: the ticket was used at the door */
    EVENT_CANCEL,   /* the user cancelled */
    EVENT_EXPIRE,   /* the sweep: unpaid for TICKETD_ORDER_TTL_S */
    EVENT_COUNT
};

/* True when ev is allowed from `from`; *to is then the new state. */
bool statemachine_next(enum order_status from, enum order_event ev, enum order_status *to);

/* "pay", "ticket", ...: also the `cause` written to order_history. */
const char *order_event_name(enum order_event ev);

#endif
