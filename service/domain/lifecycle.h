/* lifecycle.h - an order after its creation, apart from payment: the
 * user's cancel, the admin's complete, and the expiry sweep that cancels
 * orders left unpaid for TICKETD_ORDER_TTL_S.
 *
 * Each is one transition of the state machine (statemachine.h), applied by
 * compare-and-set on the locked order with its history row; a transition
 * into CANCELLED gives the seats back in the same transaction, so stock
 * returns exactly once however many cancels, sweeps and instances race.
 * Repeating a cancel or a complete answers the order as it is.
 *
 * Domain logic only: it calls the store_lifecycle port. Thread-safe. */
#ifndef TICKETD_LIFECYCLE_H
#define TICKETD_LIFECYCLE_H

#include "model.h"

#include <stdatomic.h>
#include <stdbool.h>

struct app;

/* PENDING_PAYMENT -> CANCELLED for the order's owner. Returns TD_OK with
 * the order in *out (cancelled now or before); TD_ENOTFOUND when there is
 * no such order of user_id; TD_ECONFLICT when it is in another state
 * (*out holds it); TD_EUNAVAIL, TD_ERETRY or TD_EINTERNAL. */
int lifecycle_cancel(struct app *app, const char *order_no, int64_t user_id, struct order *out);

/* TICKETED -> COMPLETED, any user's order (the caller checked the admin).
 * Answers like lifecycle_cancel. */
int lifecycle_complete(struct app *app, const char *order_no, struct order *out);

/* One pass of the expiry sweep: cancels, in batches, every order unpaid
 * for longer than TICKETD_ORDER_TTL_S, skipping those another transaction
 * holds. Stops early once *stop is true. Returns TD_OK with the number
 * cancelled in *expired, or the first database error. */
int lifecycle_sweep(struct app *app, const _Atomic bool *stop, int *expired);

#endif
