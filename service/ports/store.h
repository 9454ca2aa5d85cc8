/* store.h - the database port: everything ticketd keeps durably.
 *
 * The domain calls these; store_mysql.c implements them on MariaDB/MySQL
 * and the unit tests link fakes in its place. Every function may be called
 * from a request's fiber or from a plain thread, and no connection is ever
 * used by two callers at once:
 *   - a request's fiber borrows a connection of its loop's pool (the loops
 *     share TICKETD_DB_CONNS) at its first statement and keeps it, so that
 *     a transaction stays on it, until store_fiber_idle gives it back;
 *     while the server works, the fiber parks and its loop serves others;
 *   - a plain thread (a background job, boot) has a connection of its own,
 *     which blocks it while the server works, until store_thread_release.
 * A connection is opened on first use and reopened after any error.
 * Errors: TD_EUNAVAIL when the database cannot be reached, timed out or
 * lent no connection in time, TD_ERETRY after a deadlock or lock wait timeout
 * (the transaction was rolled back and may be run again), TD_EINTERNAL
 * for anything unexpected. Out-parameters are cleared on entry. */
#ifndef TICKETD_STORE_H
#define TICKETD_STORE_H

#include "config.h"
#include "model.h"

#include <stddef.h>
#include <stdint.h>

/* Remembers cfg's connection settings (borrowed; must outlive the store)
 * and initialises the client library. Connects nothing. Call once, before
 * any loop or thread uses the store. */
int store_init(const struct config *cfg);
/* On a fiber: gives the connection it borrowed back to its loop's pool
 * (none held: nothing). Called after each request, and by the flow before
 * its fiber parks for something other than the database (keywait.c), so
 * that an idle wait holds no connection. A transaction must have ended:
 * one still open is rolled back. Off a fiber: nothing. */
void store_fiber_idle(void);
/* On a fiber, as store_fiber_idle; on a plain thread, closes its own
 * connection (a thread that ends has it closed anyway). */
void store_thread_release(void);
void store_cleanup(void);

/* Returns TD_OK when the database answers a ping. */
int store_ping(void);

int store_session_create(const char *title, int64_t price_cents, int64_t stock,
                         struct session *out);
/* TD_ENOTFOUND when there is no such session. */
int store_session_get(int64_t id, struct session *out);

struct order_draft {
    const char *order_no;
    int64_t user_id;
    int64_t session_id;
    const char *request_id;
    int64_t quantity;
    /* The ordertoken_key of the token this order spends, recorded with the
     * order under a unique key; NULL when none is recorded. */
    const char *token_key;
    /* The order-key filter could not be told of this order (Redis out of
     * reach): a row in order_key_filter_misses is written with it, so
     * that every instance stops trusting the filter (bloom_job.h). */
    bool filter_missed;
};

/* One transaction, in one database round trip (shared with the other new
 * orders due at the same moment, store_merge.h): insert the order priced
 * from its session (unique index first: a duplicate takes no stock row
 * lock), its history row, the token it spent (when token_key is set), the
 * stock compare-and-set, commit. Returns TD_OK with the new order in *out;
 * TD_ENOTFOUND for an unknown session; TD_EDUP when the user already has an
 * order under this request id (look it up with store_order_find_request);
 * TD_ESPENT when another order spent the token already; TD_ECONFLICT when
 * the stock is too low;
 * or TD_ERETRY / TD_EUNAVAIL / TD_EINTERNAL. Nothing is written on error.
 * (The demo's naive store, store_naive.h, takes several round trips
 * instead, as the races it shows need.) */
int store_order_create(const struct order_draft *d, struct order *out);

/* The order a user placed under an Idempotency-Key (whatever its
 * session). TD_ENOTFOUND if none. A copy of the request that has inserted
 * its order and not yet committed is waited for (a locking read), so "none"
 * is never said of an order about to be committed. */
int store_order_find_request(int64_t user_id, const char *request_id, struct order *out);

/* The orders' users and Idempotency-Keys with id > after_id, in id order,
 * at most limit: each(id, user_id, request_id, ctx) per order (a non-zero
 * return stops and is returned). For building the order-key filter. */
typedef int (*store_order_key_fn)(int64_t id, int64_t user_id, const char *request_id, void *ctx);
int store_order_keys(int64_t after_id, int limit, store_order_key_fn each, void *ctx);

/* The newest row of order_key_filter_misses (an order recorded without the
 * order-key filter), 0 when there is none; and the rows up to last_id
 * deleted once the filter was declared untrusted for them. */
int store_filter_misses_last(int64_t *last_id);
int store_filter_misses_clear(int64_t last_id);

/* The order with this number, if it belongs to user_id (any user when
 * user_id is 0). TD_ENOTFOUND otherwise. */
int store_order_get(const char *order_no, int64_t user_id, struct order *out);

/* Up to limit orders of user_id with id < before_id (0: from the newest),
 * newest first, into out[]; *n is how many. */
int store_order_list(int64_t user_id, int64_t before_id, int limit, struct order *out, int *n);

/* The order a user placed under an Idempotency-Key, as committed now: a
 * plain read that locks nothing and waits for no copy still writing (the
 * key look-up, keys.h, must change nothing and hold up nobody; Redis's
 * marker tells it of a copy in flight). TD_ENOTFOUND if none. */
int store_order_peek_request(int64_t user_id, const char *request_id, struct order *out);

#endif
