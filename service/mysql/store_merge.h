/* store_merge.h - new orders that arrive together share one database
 * round trip and one COMMIT (TICKETD_MERGE=1, the default).
 *
 * Natural batching on the loop (base/loop.h): the orders that reach the
 * database in the same loop turn form one batch. An order's fiber joins
 * its loop's queue (giving back first any idle connection it borrowed, so
 * that it never holds what a batch waits for) and parks; the queue arms a
 * turn-end hook. At the end of the turn the hook takes every order queued
 * on every loop (earliest first, at most TICKETD_MERGE_MAX) and starts the
 * batch on a fiber of its own, which borrows one connection of the loop's
 * pool, runs the orders as one transaction (merge_batch.h), and readies
 * each order's fiber with its outcome: on its own loop, the other loops'
 * orders handed back with one loop_post per loop (a fiber is readied only
 * by its own loop). While one batch is at the server the orders of every
 * loop collect for the next (merge_turn.h), so the next batch is all of
 * them, not one loop's share. At most MERGE_LEADERS batch of a loop is
 * started and not ended
 * at once: the orders that arrive meanwhile collect for the next one,
 * which starts at the end of the turn in which the batch ends; that is
 * what lets batches grow under load. A lone order on an idle service goes
 * at the end of its own turn, by itself: no timer, no added wait.
 *
 * Each order keeps its own outcome, decided by the database in the batch's
 * one round trip (merge_batch.h): a duplicate key, a spent token, a
 * sold-out or unknown session fails that order alone. A later copy of a
 * key whose earlier copy in the batch was not placed is run again alone,
 * by its own fiber, for an answer of its own. A batch the server did not
 * keep (a deadlock or a Galera certification conflict, 1213, or a lock
 * wait past the bound, 1205) runs each of its orders again alone, each in
 * a transaction of its own, so that one order's trouble stays its own; a
 * lost connection or an error at COMMIT answers each "unavailable" (the
 * outcome is unknown), and its retry finds the order by its key or makes
 * it.
 *
 * A session whose row another transaction holds past the lock wait
 * (db_lock_wait_s; the batch answers its orders 'L' and commits the
 * others, sql/014_place_orders_lock_wait.sql) is noted, process-wide: its
 * orders stay out of batches, one at a time is tried alone (the probe) and
 * the others are answered 503 at once, until one meets the row free. A
 * held row then costs the orders that need it, not every order of the
 * loop.
 *
 * The queues' lists are under one mutex, held for an append or a batch's
 * take; the rest of a loop's queue is touched only on its thread. */
#ifndef TICKETD_STORE_MERGE_H
#define TICKETD_STORE_MERGE_H

#include "db.h"
#include "merge_batch.h"
#include "store.h"

#include <stdbool.h>
#include <stdint.h>

/* Batches of one loop started and not ended at once. One: the service
 * already has one batch at the server per loop (TICKETD_LOOPS), and the
 * orders that arrive while it is there make the next batch larger.
 * Measured against two on this machine (new orders, 200 sessions, c64,
 * alternating runs of the same build but this constant): more orders/s in
 * three pairs of four, mean batch 11-12 orders against 8; at c16 no
 * difference beyond the noise (docs/speed.md). Nor does a second batch
 * help while one waits for a held row (itest_lockwait, 1,000 orders on
 * 50 free sessions: 83.5% and 87.5% answered within 1 s with two, 87.6%
 * and 90.4% with one): the waiting batch holds the rows of the sessions it
 * took before the held one, and the next batch needs some of them. */
#define MERGE_LEADERS 1

/* Places one order by itself, as one transaction on a connection of its
 * own: store_order_create's answers, with the new order's id and amount. */
typedef int (*store_merge_alone_fn)(const struct order_draft *d, const char *db_now, int64_t *id,
                                    int64_t *amount);

/* Merging on or off, the largest batch, and how a batch of one is placed
 * (store_mysql.c's one-order transaction). Call before any order. */
void store_merge_init(bool on, int max, store_merge_alone_fn alone);
bool store_merge_on(void);

/* What store_merge_place answers for an order of a batch the server
 * refused whole, or called off a loop's fiber: it must be placed by
 * itself, by its caller. */
#define STORE_MERGE_ALONE MERGE_ALONE

/* Places d (never a demo draft: no switched-off defence) in the next
 * batch, stamped db_now. Returns store_order_create's answers, with the
 * new order's id and amount, or STORE_MERGE_ALONE. */
int store_merge_place(const struct order_draft *d, const char *db_now, int64_t *id,
                      int64_t *amount);

#endif
