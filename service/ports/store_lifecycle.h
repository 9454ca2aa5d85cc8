/* store_lifecycle.h - the database port of an order's later life: a user's
 * cancel, an admin's complete, the expiry sweep.
 *
 * Implemented on MariaDB/MySQL by lifecycle_mysql.c; the domain
 * (lifecycle.c) calls it, from a request's fiber (a cancel, a complete) or
 * the sweep's thread. Errors and connections as in store.h. */
#ifndef TICKETD_STORE_LIFECYCLE_H
#define TICKETD_STORE_LIFECYCLE_H

#include "model.h"
#include "statemachine.h"

#include <stdbool.h>
#include <stdint.h>

struct order_change {
    const char *order_no; /* the order by number, or NULL to name it by id */
    int64_t order_id;
    int64_t user_id; /* only this user's order; 0 for anyone's */
    enum order_event event;
    /* An order already in this state is answered as it is: repeating a
     * cancel or a complete changes nothing. */
    enum order_status done;
    bool give_back_stock; /* the event releases the order's seats */
    bool skip_locked;     /* an order another transaction holds is TD_ENOTFOUND */
};

/* One transaction: lock the order, and unless it is in ch->done already,
 * apply ch->event by compare-and-set (history row included) and give the
 * seats back in the same transaction when asked; commit. Returns TD_OK
 * with the order as it is now in *out and *changed telling whether this
 * call moved it; TD_ENOTFOUND (no such order, not the user's, or skipped);
 * TD_ECONFLICT when the state machine forbids the event from the order's
 * state (*out then holds the order as found); or TD_ERETRY / TD_EUNAVAIL /
 * TD_EINTERNAL with nothing written. */
int store_order_change(const struct order_change *ch, struct order *out, bool *changed);

/* Ids of PENDING_PAYMENT orders created more than age_s seconds ago (by
 * the service clock that stamped them), above after_id, in id order: up
 * to limit of them into ids; *n is how many. A plain read: each is then
 * changed under its own lock. */
int store_orders_unpaid_older(int64_t age_s, int64_t after_id, int limit, int64_t *ids, int *n);

#endif
