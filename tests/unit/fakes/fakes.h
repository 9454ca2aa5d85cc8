/* fakes.h - link-time fakes of ticketd's ports, store.h (MySQL) and
 * cache.h (Redis), for testing the domain logic without either server.
 *
 * A test binary links fake_store.c and fake_cache.c instead of
 * store_mysql.c and cache_redis.c. Each fake answers from the plain global
 * knobs below, which a test sets before the call under test, and records
 * what it was asked:
 *
 *   - fake_calls names every port call in order, space-separated, e.g.
 *     "order_begin token_take order_create order_complete";
 *   - each function keeps a copy of the arguments of its last call and
 *     counts its calls.
 *
 * fakes_reset() sets every knob to "all is well" (TD_OK, no record under
 * the key) and forgets every call. Not thread-safe: one test at a time. */
#ifndef TICKETD_TEST_FAKES_H
#define TICKETD_TEST_FAKES_H

#include "metrics.h"
#include "model.h"

#include <stdbool.h>
#include <stdint.h>

#define FAKE_STR    256
#define FAKE_RECORD 4096
#define FAKE_TRIES  8

/* The call log shared by both fakes. */
extern char fake_calls[1024];
void fake_call(const char *name);

/* The process's counters (metrics.h) are marked by fake_metrics_mark;
 * fake_metrics_delta is how far one has moved since. */
void fake_metrics_mark(void);
int64_t fake_metrics_delta(enum metric m);

/* Resets both fakes and the call log. */
void fakes_reset(void);
void fake_store_reset(void);
/* Called by store_fiber_idle when not NULL: a test's hook into the moment
 * a request gives its connection back (test_keywait.c: just before the
 * waiter parks). fake_store_reset clears it. */
extern void (*fake_store_idle_hook)(void);
void fake_cache_reset(void);

/* A copied string argument; null tells a NULL apart from "". */
struct fake_str {
    bool null;
    char s[FAKE_STR];
};

struct fake_store {
    /* store_order_create answers create_rc[i] on its i-th call, the last
     * one repeating (ncreate_rc 0: always TD_OK). On TD_OK the new order
     * is made from the draft, priced at price_cents a seat. */
    int create_rc[FAKE_TRIES];
    int ncreate_rc;
    int64_t price_cents;
    /* store_order_find_request answers TD_ERETRY find_conflicts times
     * (a locking read chosen as a deadlock's victim), then find_rc, with
     * `found` on TD_OK. */
    int find_conflicts;
    int find_rc;
    struct order found;
    /* The other calls. */
    int ping_rc;
    int session_rc;
    struct session session;
    int get_rc;

    /* Recorded: every store_order_create attempt's order number, and the
     * last draft (its strings copied). */
    int create_calls;
    char order_nos[FAKE_TRIES][ORDER_NO_LEN + 1];
    struct {
        int64_t user_id, session_id, quantity;
        char request_id[REQUEST_ID_MAX + 1];
        struct fake_str token_key; /* null: no token recorded */
    } draft;
    int find_calls;
    struct {
        int64_t user_id, session_id;
        char request_id[REQUEST_ID_MAX + 1];
    } find;
};

struct fake_cache {
    /* cache_key_begin answers idem_begin_rc at its key step; with TD_EDUP it hands back a
     * copy of existing (the record another request left under the key). */
    int idem_begin_rc;
    /* A kept end of the user's could not go: the script is not sent. */
    bool begin_not_sent;
    char existing[FAKE_RECORD];
    int lock_rc;
    int token_rc;
    int complete_rc;
    int release_rc;
    int ping_rc;
    int token_put_rc;
    /* cache_instance_alive and cache_key_take_over answer these. */
    int alive_rc;
    int take_over_rc;
    /* cache_bloom_check answers bloom_rc with these (all zero: an
     * untrusted filter, so the database is asked as without one). */
    int bloom_rc;
    bool bloom_trusted, bloom_maybe;
    int bloom_checks, bloom_adds;
    int bloom_adds_in_begin; /* of bloom_adds: the bits set by cache_key_begin's script */

    /* Recorded: the last call of each. */
    struct {
        int calls;
        int64_t user_id;
        char key[FAKE_STR];
        char marker[FAKE_STR];
        int ttl_ms;
    } idem_begin;
    struct {
        int calls;
        int64_t user_id, session_id;
        char owner[FAKE_STR];
        int ttl_ms;
    } lock;
    struct {
        int calls;
        int64_t user_id;
        char token[FAKE_STR];
        char key[FAKE_STR]; /* take: the Idempotency-Key spending it */
        bool in_begin;      /* take: spent inside cache_key_begin's script */
    } token_take, token_put;
    struct {
        int calls;
        int64_t user_id, session_id;
        char key[FAKE_STR];
        struct fake_str marker, owner;
        char record[FAKE_RECORD];
        int ttl_s;
    } complete;
    struct {
        int calls;
        int64_t user_id, session_id;
        char key[FAKE_STR];
        struct fake_str marker, owner;
    } release;
    char alive_asked[FAKE_STR];
    struct {
        int calls;
        char stale[FAKE_STR], marker[FAKE_STR], stale_owner[FAKE_STR];
        struct fake_str owner;
    } take_over;
};

/* The payment callback's port (store_payments.h), in fake_store_payments.c.
 * Each step logs itself in fake_calls ("payment_begin payment_lock ...";
 * the end logs payment_commit or payment_rollback). Reset by
 * fake_payments_reset(), not by fakes_reset(). The knobs:
 *
 *   - store_payment_lock_order answers rc[i] in the i-th transaction (the
 *     last one repeating; nrc 0: always TD_OK), with an order in `status`
 *     costing `amount_cents`, as the real one locks the row;
 *   - store_payment_find finds the txn_id's row when `replayed` says it was
 *     recorded: the first outcome `outcome`, for a SUCCESS callback of the
 *     order locked and its amount_cents, unless seen_* say otherwise
 *     (another order number when non-empty, another amount when >= 0,
 *     FAILED);
 *   - store_payment_insert answers insert_rc; TD_EDUP (another transaction
 *     committed the txn_id first) also makes `replayed` true when
 *     race_recorded is set, as the winner's row then exists;
 *   - store_payment_move, store_payment_event and the COMMIT answer move_rc,
 *     event_rc and commit_rc. */
struct fake_payments {
    int rc[FAKE_TRIES];
    int nrc;
    enum order_status status;
    int64_t amount_cents;
    bool replayed;
    int outcome; /* enum pay_outcome, for a replay */
    char seen_order_no[ORDER_NO_LEN + 1];
    int64_t seen_amount_cents;
    bool seen_failed;
    int insert_rc;
    bool race_recorded;
    int move_rc;
    int event_rc;
    int commit_rc;

    /* Recorded: transactions begun, commits; the order number locked;
     * the last insert's callback, outcome and status after it; the last
     * move's event; the last outbox row. */
    int calls;
    int commits;
    char txn_id[FAKE_STR];
    char order_no[FAKE_STR];
    int64_t cb_amount_cents;
    bool cb_success;
    int inserts;
    int inserted_outcome; /* enum pay_outcome */
    enum order_status inserted_after;
    int moves;
    int move_event; /* enum order_event */
    int events;
    char event_type[FAKE_STR];
    char event_biz_key[FAKE_STR];
    char event_payload[FAKE_RECORD];

    /* Standard Webhooks deliveries: store_payment_delivery_find answers
     * delivery_find_rc (TD_ENOTFOUND after reset) with delivery_fp;
     * store_payment_delivery_claim answers delivery_claim_rc, with
     * delivery_fp as the row another copy committed when TD_EDUP. Recorded:
     * the claims, and the last claimed id. */
    int delivery_find_rc;
    int delivery_claim_rc;
    char delivery_fp[65];
    int delivery_claims;
    char delivery_id[FAKE_STR];
};

void fake_payments_reset(void);

extern struct fake_store fake_store;
extern struct fake_cache fake_cache;
extern struct fake_payments fake_payments;

#endif
