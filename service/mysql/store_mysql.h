/* store_mysql.h - the MySQL adapters' shared pieces, defined in
 * store_mysql.c (but for store_tx_order, store_order_reads.c's, and the
 * consumers' steps at the end, which events_mysql.c defines): the clock
 * and order reading every store_*.c and *_mysql.c uses, and the two tables of the transaction steps
 * that have a second, naive implementation. Internal to the MySQL adapters (store_*.c and
 * *_mysql.c, the naive store, and boot.c, which picks the steps at boot); the domain never sees it.
 */
#ifndef TICKETD_STORE_MYSQL_H
#define TICKETD_STORE_MYSQL_H

#include "db.h"
#include "model.h"
#include "statemachine.h"
#include "store.h"

#include <stdint.h>

/* Inside an open transaction on c: applies ev to the order by
 * compare-and-set (WHERE id = ? AND status = from AND version = version),
 * adding 1 to its version, and writes the history row. Returns TD_OK;
 * TD_ECONFLICT when the state machine forbids ev from `from` or the row
 * moved meanwhile (0 rows); or a db error. Does not commit or roll back. */
int store_tx_transition(struct db_conn *c, const struct order *o, enum order_event ev);

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

/* The order, priced from its session (no row: no such session). Arguments:
 * order_no, user, request, quantity, quantity, now, now, session. */
#define STORE_ORDER_INSERT                                                                         \
    "INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, amount_cents, "      \
    "status, version, created_at, updated_at) "                                                    \
    "SELECT ?, ?, id, ?, ?, price_cents * ?, 'PENDING_PAYMENT', 1, ?, ? FROM sessions WHERE id = " \
    "? "                                                                                           \
    "RETURNING id, amount_cents"

/* The token the order spent, under its unique key (sql/006_order_tokens.sql):
 * one statement, after the order's own insert and before the stock row's
 * lock. It names the order by its key, so that an order that was not
 * inserted (no such session) spends no token. Arguments: token key, now,
 * user, request. */
#define STORE_TOKEN_SPEND                                                                          \
    "INSERT INTO order_tokens (order_id, token_hash, created_at) "                                 \
    "SELECT id, ?, ? FROM orders WHERE user_id = ? AND request_id = ?"

/* An order the order-key filter was not told of (sql/012): in the order's
 * own transaction, so the row exists exactly when the order does.
 * Arguments: now, user, request. */
#define STORE_FILTER_MISS                                                                          \
    "INSERT INTO order_key_filter_misses (order_id, created_at) "                                  \
    "SELECT id, ? FROM orders WHERE user_id = ? AND request_id = ?"

/* The part of a consumer's transaction after its dedup row (events_mysql.c):
 * TD_OK when applied, TD_EDUP when there was nothing to change (what was
 * written is still committed), or an error (rolled back). */
typedef int (*store_effect_fn)(struct db_conn *c, const void *ctx);

/* The steps of the MySQL adapters' transactions that the demo's naive
 * variants replace (store_naive.h). store_mysql.c runs every one of them
 * through the table store_mysql_use was given; boot.c fills it once at
 * boot from TICKETD_DEFENSES, taking each entry from store_mysql_steps
 * unless its defence is switched off. No adapter asks which defences are
 * on. */
struct store_mysql_steps {
    /* Writes a new order, its token (d->token_key) and its seats, and
     * commits: *id and *amount of the order. Errors as store_order_create,
     * but a duplicate key is still TD_EDUP (the caller names it). */
    int (*order_place)(struct db_conn *c, const struct order_draft *d, const char *db_now,
                       int64_t *id, int64_t *amount);
    /* Reads an order about to be moved, inside the transaction on c: by
     * the locking statement (FOR UPDATE), or the naive version by the
     * plain one. */
    int (*read_for_move)(struct db_conn *c, const char *locking, const char *plain,
                         const struct db_arg *args, int nargs, struct order *out);
    /* Moves an order read by read_for_move (store_tx_transition, or the
     * naive read-modify-write). */
    int (*move)(struct db_conn *c, const struct order *o, enum order_event ev);
};

/* The real steps: every defence on. */
extern const struct store_mysql_steps store_mysql_steps;

/* The steps to run from now on (borrowed: they must outlive the store,
 * as boot.c's static table does). Call once at boot, before any loop or
 * job uses the store; until then the real steps run. */
void store_mysql_use(const struct store_mysql_steps *steps);

/* The chosen steps, for the store_*.c and *_mysql.c adapters. */
int store_tx_read_for_move(struct db_conn *c, const char *locking, const char *plain,
                           const struct db_arg *args, int nargs, struct order *out);
int store_tx_move(struct db_conn *c, const struct order *o, enum order_event ev);

/* The consumers' steps the naive variants replace, in a table of their own
 * that events_mysql.c owns and runs (so that the event adapter depends on
 * the order adapter's pieces, never the other way round); boot.c fills
 * it at boot, as it does store_mysql_steps. */
struct store_events_steps {
    /* One consumer transaction: the dedup row (consumer, dedup_key; none
     * when NULL) and the effect, committed together, with the dead letter
     * redrive_id (0: none) locked first and stamped (store_events.h). */
    int (*consume)(const char *consumer, const char *dedup_key, int64_t redrive_id,
                   store_effect_fn effect, const void *ctx);
    /* The points ledger's row of a credit, under its business key, the
     * order: TD_EDUP when the order was credited before. */
    int (*points_ledger)(struct db_conn *c, const char *order_no, int64_t user_id, int64_t points,
                         const char *db_now);
};

/* The real steps (events_mysql.c): every defence on. */
extern const struct store_events_steps store_events_steps;

/* The steps to run from now on (borrowed, as store_mysql_use's). Call
 * once at boot, before any job consumes; until then the real steps run. */
void store_events_use(const struct store_events_steps *steps);

/* The chosen consumer steps, for the store_*.c and *_mysql.c adapters. */
int store_tx_consume(const char *consumer, const char *dedup_key, int64_t redrive_id,
                     store_effect_fn effect, const void *ctx);
int store_tx_points_ledger(struct db_conn *c, const char *order_no, int64_t user_id, int64_t points,
                           const char *db_now);

#endif
