/* merge_batch.h - the pure part of merged orders (store_merge.h): the texts
 * of the two database round trips that place many new orders, and what
 * their answers mean for each of them.
 *
 * One batch is one transaction, in two round trips. The first locks and
 * reads what the batch's outcomes depend on:
 *
 *   START TRANSACTION;
 *   SELECT id, stock, price_cents FROM sessions WHERE id IN (...)
 *          ORDER BY id FOR UPDATE;        -- each session once, ascending
 *   SELECT user_id, request_id FROM orders
 *          WHERE (user_id, request_id) IN ((?, ?), ...);
 *
 * Then the service decides, order by order in arrival order: a key that
 * has its order already (or a copy earlier in the batch) is a duplicate,
 * an unknown session fails its order, and an order takes its seats while
 * its session has them (first come, first served; a later, smaller order
 * may still fit). The second trip writes what was decided, with one
 * statement per kind of row rather than per order:
 *
 *   INSERT INTO orders ... VALUES (...), (...) RETURNING id, order_no, amount_cents;
 *   INSERT INTO order_tokens ... SELECT ... FROM orders WHERE order_no IN (...);
 *   UPDATE sessions SET stock = stock - (the quantities of its orders
 *          inserted, read back) ... WHERE id = ?;          -- each session once
 *   COMMIT
 *
 * Sessions are locked in ascending id order, so two batches never wait for
 * each other in a cycle, and the seats read under that lock are the ones
 * the batch takes; ck_sessions_stock still refuses an oversell whatever
 * the service decided. A key inserted by another transaction between the
 * two trips (or a token another order spent, or a colliding order number)
 * makes the server refuse the multi-row INSERT whole (1062): nothing is
 * kept and store_merge.c places each order alone, for an answer of its
 * own.
 *
 * Thread-compatible: a plan belongs to one thread. */
#ifndef TICKETD_MERGE_BATCH_H
#define TICKETD_MERGE_BATCH_H

#include "db.h"
#include "model.h"
#include "store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest batch TICKETD_MERGE_MAX may ask for. */
#define MERGE_MAX_LIMIT 256

/* One order of a batch. The caller fills d and db_now; the outcome is
 * rc (a store_order_create answer) and, when TD_OK, id and amount. */
struct merge_order {
    const struct order_draft *d;
    const char *db_now;
    int slot; /* its session's place in the batch's ascending list */
    int rc;
    int64_t id, amount;
};

/* Which round trip's answer the plan reads. */
enum merge_phase { MERGE_LOCK, MERGE_WRITE };

struct merge_plan {
    struct merge_order **orders;
    int n;
    int64_t sessions[MERGE_MAX_LIMIT]; /* distinct, ascending */
    int nsessions;
    /* Per session, from the first trip: seats left (-1: no such session)
     * and price; then the seats the batch takes. */
    int64_t stock[MERGE_MAX_LIMIT], price[MERGE_MAX_LIMIT], taken[MERGE_MAX_LIMIT];
    int placed; /* orders the second trip inserts */
    enum merge_phase phase;
    /* The text of the current trip (with '?' placeholders) and its
     * arguments, owned. */
    char *sql;
    struct db_arg *args;
    int nargs;
    bool open; /* the second text stops before its COMMIT */
};

/* Plans a batch of n orders (1 <= n <= MERGE_MAX_LIMIT; the orders stay
 * the caller's and are borrowed until merge_plan_free): sets each order's
 * slot and builds the first trip's text. Every order's rc starts as
 * TD_EINTERNAL: an order the answers do not settle fails. */
void merge_plan_lock(struct merge_plan *p, struct merge_order **orders, int n);

/* After the first trip's rows: decides each order's outcome and builds
 * the second trip's text (with open, it ends before its COMMIT). Returns
 * the orders it inserts: with none, there is nothing to send but the
 * COMMIT. */
int merge_plan_write(struct merge_plan *p, bool open);

void merge_plan_free(struct merge_plan *p);

/* Takes one row of the current trip's answer (statement at, as
 * db_batch_each reports it) into the plan. TD_EINTERNAL for a row the
 * plan did not ask for. */
int merge_plan_row(struct merge_plan *p, int at, const struct db_batch_row *row);

#endif
