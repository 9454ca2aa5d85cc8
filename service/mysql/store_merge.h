/* store_merge.h - new orders that arrive together share one database
 * round trip and one COMMIT (TICKETD_MERGE=1, the default).
 *
 * Natural batching, as group commit (base/groupq.h): a worker thread whose
 * order transaction is due joins a queue. If fewer than MERGE_LEADERS batches
 * are under way it leads one at once: it takes every order queued (at most
 * TICKETD_MERGE_MAX), runs them as one transaction on its own connection
 * (merge_batch.h), hands each order its outcome and wakes its thread. The
 * orders that arrive while a batch is at the server wait for it to end;
 * then one of them leads the next batch with all of them. A lone order on
 * an idle service goes at once, by itself (no timer, no added delay), and
 * it holds its lead while it is at the server like any batch: the orders
 * that arrive meanwhile collect for the next one, which is what lets
 * batches grow under load.
 *
 * Each order keeps its own outcome, decided by the database in the batch's
 * one round trip (merge_batch.h): a duplicate key, a spent token, a
 * sold-out or unknown session fails that order alone. A later copy of a
 * key whose earlier copy in the batch was not placed is run again alone,
 * by its own thread, for an answer of its own. A deadlock or a Galera
 * certification conflict sends every order of the batch back to its own
 * caller's retry (txretry.h) with the cause noted; a lost connection or an
 * error at COMMIT answers each "unavailable" (the outcome is unknown), and
 * its retry finds the order by its key or makes it.
 *
 * Thread-safe. */
#ifndef TICKETD_STORE_MERGE_H
#define TICKETD_STORE_MERGE_H

#include "db.h"
#include "merge_batch.h"
#include "store.h"

#include <stdbool.h>
#include <stdint.h>

/* Batches built or at the server at once: one collects while another is
 * at the server, and with two the server can run one while the service
 * reads the other's answer. */
#define MERGE_LEADERS 2

/* Places one order by itself, as one transaction on a connection of its
 * own: store_order_create's answers, with the new order's id and amount. */
typedef int (*store_merge_alone_fn)(const struct order_draft *d, const char *db_now, int64_t *id,
                                    int64_t *amount);

/* Merging on or off, the largest batch, and how a batch of one is placed
 * (store_mysql.c's one-order transaction). Call before any order. */
void store_merge_init(bool on, int max, store_merge_alone_fn alone);
bool store_merge_on(void);

/* What store_merge_place answers for an order of a batch the server
 * refused whole: it must be placed by itself, on its caller's thread. */
#define STORE_MERGE_ALONE MERGE_ALONE

struct merge_order;

/* Places the k orders (1 <= k <= MERGE_MAX_LIMIT) as one transaction on c,
 * in one round trip (merge_batch.h), and commits: TD_OK with each order's
 * outcome in it, or the transaction's error (nothing of it was kept, or,
 * TD_EUNAVAIL, it is unknown whether it was). */
int store_merge_run(struct db_conn *c, struct merge_order **orders, int k);

/* Places d (never a demo draft: no switched-off defence) in the next
 * batch, stamped db_now. Returns store_order_create's answers, with the
 * new order's id and amount, or STORE_MERGE_ALONE. */
int store_merge_place(const struct order_draft *d, const char *db_now, int64_t *id,
                      int64_t *amount);

#endif
