/* store_tx.h - pieces of transactions shared by the store_*.c adapters.
 * Internal to the MySQL adapters; the domain never sees it. */
#ifndef TICKETD_STORE_TX_H
#define TICKETD_STORE_TX_H

#include "db.h"
#include "model.h"
#include "statemachine.h"

#include <stdint.h>

/* Inside an open transaction on c: applies ev to the order by
 * compare-and-set (WHERE id = ? AND status = from AND version = version),
 * adding 1 to its version, and writes the history row. Returns TD_OK;
 * TD_ECONFLICT when the state machine forbids ev from `from` or the row
 * moved meanwhile (0 rows); or a db error. Does not commit or roll back. */
int store_tx_transition(struct db_conn *c, const struct order *o, enum order_event ev);

/* store_tx_transition, unless state-cas is switched off (DEMO ONLY,
 * store_naive.h): then the read-modify-write the articles warn about, an
 * UPDATE naming only the row's id, trusting a status read without a lock. */
int store_tx_move(struct db_conn *c, const struct order *o, enum order_event ev);

/* store_tx_order for an order about to be moved: by the locking statement
 * (FOR UPDATE), or with state-cas switched off by the plain read of the
 * naive version. */
int store_tx_read_for_move(struct db_conn *c, const char *locking, const char *plain,
                           const struct db_arg *args, int nargs, struct order *out);

/* Now as DATETIME(3) text, in UTC ("2026-12-01 08:00:00.123"), and as
 * RFC 3339 ("2026-12-01T08:00:00Z"). */
void store_now(char db[32], char api[TIME_LEN + 1]);

/* Reads one order with the columns of STORE_ORDER_COLS (below) by the
 * given statement; TD_ENOTFOUND if none. FOR UPDATE variants lock it. */
int store_tx_order(struct db_conn *c, const char *sql, const struct db_arg *args, int nargs,
                   struct order *out);

/* The select list that store_tx_order reads. */
#define STORE_ORDER_COLS                                                                           \
    "id, order_no, user_id, session_id, request_id, quantity, amount_cents, status, version, "     \
    "DATE_FORMAT(created_at, '%Y-%m-%dT%H:%i:%sZ'), DATE_FORMAT(updated_at, '%Y-%m-%dT%H:%i:%sZ')"

#endif
