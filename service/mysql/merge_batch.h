/* merge_batch.h - the pure part of merged orders (store_merge.h): the text
 * of one database round trip that places many new orders, and what its
 * answer means for each of them.
 *
 * One batch is one transaction:
 *
 *   START TRANSACTION;
 *   SELECT MAX(stock) INTO @td_s<j> FROM sessions WHERE id = ? FOR UPDATE;
 *                                       -- each session once, ascending id
 *   INSERT IGNORE INTO orders ... FROM sessions WHERE id = ? AND @td_s<j> >= ?;
 *   SET @td_s<j> = ..., @td_r<i> = ...;  -- each order, in arrival order
 *   INSERT INTO order_tokens ...;        -- after an order that spends one
 *   UPDATE sessions SET stock = stock - (the quantities inserted) ...;
 *                                       -- each session once
 *   SELECT @td_r0, @td_r1, ...;          -- every order's outcome code
 *   SELECT id, order_no, amount_cents FROM orders WHERE order_no IN (...);
 *   COMMIT
 *
 * Sessions are locked in ascending id order, so two batches never wait for
 * each other in a cycle. The seats left are counted in a variable under
 * that lock; an order that does not fit inserts nothing (first come, first
 * served; a later, smaller order may still fit), and one that meets the
 * unique index of its key inserts nothing either (INSERT IGNORE turns the
 * duplicate into a warning, so the batch goes on). Each session's stock
 * then drops by the quantities of the rows really inserted, under
 * ck_sessions_stock: whatever the variables said, the batch cannot
 * oversell, and a refused CHECK rolls the whole batch back.
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

/* What the batch's SET said of an order (the @td_r<i> codes). */
enum merge_code {
    MERGE_CREATED = 0,   /* inserted: it has its seats */
    MERGE_DUPLICATE = 1, /* the user already has an order under this key */
    MERGE_NO_SESSION = 2,
    MERGE_SOLD_OUT = 3,
    MERGE_NOT_INSERTED = 4, /* none of the above: its random order number collided */
};

/* One order of a batch. The caller fills d and db_now; the outcome is
 * rc (a store_order_create answer) and, when TD_OK, id and amount. */
struct merge_order {
    const struct order_draft *d;
    const char *db_now;
    int slot; /* its session's place in the batch's ascending list */
    int rc;
    int64_t id, amount;
};

struct merge_plan {
    struct merge_order **orders;
    int n;
    int64_t sessions[MERGE_MAX_LIMIT]; /* distinct, ascending */
    int nsessions;
    /* The text (with '?' placeholders) and its arguments, owned. */
    char *sql;
    struct db_arg *args;
    int nargs;
    int at_codes, at_rows; /* the statements whose rows say what happened */
    bool open;             /* the text stops before its COMMIT */
};

/* Plans a batch of n orders (1 <= n <= MERGE_MAX_LIMIT; the orders stay
 * the caller's and are borrowed until merge_plan_free): sets each order's
 * slot and builds the text. With open, the text ends before its COMMIT.
 * Every order's rc starts as TD_EINTERNAL: an order the answer does not
 * mention fails. */
void merge_plan_build(struct merge_plan *p, struct merge_order **orders, int n, bool open);
void merge_plan_free(struct merge_plan *p);

/* Takes one row of the batch's answer (statement at, as db_batch_each
 * reports it) into the orders' outcomes. TD_EINTERNAL for a row the plan
 * did not ask for. */
int merge_plan_row(struct merge_plan *p, int at, const struct db_batch_row *row);

/* An order's answer from its code: TD_OK, TD_EDUP, TD_ENOTFOUND,
 * TD_ECONFLICT or TD_ERETRY (a collided order number: the caller runs it
 * again with a new one); anything unknown is TD_EINTERNAL. */
int merge_code_rc(long code);

#endif
