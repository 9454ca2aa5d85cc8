/* payments_mysql.c - the payment callback's statements on MariaDB/MySQL
 * (store_payments.h).
 *
 * The order row is locked first. Without that, two callbacks of one order
 * deadlock: the payment insert's foreign key check takes a shared lock on
 * the order row, and the compare-and-set that follows needs it exclusive,
 * so each waits for the other's shared lock (measured: concurrent
 * retries of one txn_id ended in 1213s). With the order locked first they
 * queue instead. */
#include "store_payments.h"

#include "db.h"
#include "err.h"
#include "log.h"
#include "store_mysql.h"

#include <string.h>

enum stmt { P_ORDER_LOCK, P_ORDER_READ, P_FIND_TXN, P_INSERT, P_OUTBOX, P_COUNT };

static const char *const sql[P_COUNT] = {
    [P_ORDER_LOCK] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ? FOR UPDATE",
    /* DEMO ONLY (state-cas switched off): the naive version's unlocked read. */
    [P_ORDER_READ] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ?",
    [P_FIND_TXN] = "SELECT p.txn_id, o.order_no, p.amount_cents, p.status, p.outcome, "
                   "p.order_status FROM payments p JOIN orders o ON o.id = p.order_id "
                   "WHERE p.txn_id = ?",
    /* applied_order_id is set only by the payment that moves the order to
     * PAID: its unique key allows one such payment per order. */
    [P_INSERT] = "INSERT INTO payments (txn_id, order_id, amount_cents, status, outcome, "
                 "order_status, applied_order_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    [P_OUTBOX] =
        "INSERT INTO outbox (event_type, biz_key, payload, created_at) VALUES (?, ?, ?, ?)",
};

int store_payment_begin(struct pay_tx *tx)
{
    memset(tx, 0, sizeof *tx);
    int rc = db_tx_begin(&tx->conn);
    if (rc == TD_OK)
        store_now(tx->stamp, tx->at);
    return rc;
}

int store_payment_end(struct pay_tx *tx, int rc)
{
    return db_tx_end(tx->conn, rc);
}

int store_payment_lock_order(struct pay_tx *tx, const char *order_no, struct order *o)
{
    struct db_arg no[] = {DB_S(order_no)};
    return store_tx_read_for_move(tx->conn, sql[P_ORDER_LOCK], sql[P_ORDER_READ], no, 1, o);
}

int store_payment_find(struct pay_tx *tx, const char *txn_id, struct payment_seen *seen)
{
    char outcome[32], status[24], paid[16];
    memset(seen, 0, sizeof *seen);
    struct db_arg args[] = {DB_S(txn_id)};
    struct db_col cols[] = {
        DB_COL_S(seen->txn_id), DB_COL_S(seen->order_no), DB_COL_I(&seen->amount_cents),
        DB_COL_S(paid),         DB_COL_S(outcome),        DB_COL_S(status)};
    int rc = db_row(tx->conn, sql[P_FIND_TXN], args, 1, cols, 6);
    if (rc != TD_OK)
        return rc;
    if (!pay_outcome_parse(outcome, &seen->outcome) ||
        !order_status_parse(status, &seen->order_status) ||
        (strcmp(paid, "SUCCESS") != 0 && strcmp(paid, "FAILED") != 0)) {
        log_error("payment %s has an unknown outcome %s, order status %s or status %s", txn_id,
                  outcome, status, paid);
        return TD_EINTERNAL;
    }
    seen->success = strcmp(paid, "SUCCESS") == 0;
    return TD_OK;
}

int store_payment_insert(struct pay_tx *tx, const struct payment_callback *cb,
                         const struct order *o, enum pay_outcome oc, enum order_status after)
{
    struct db_arg pay[] = {
        DB_S(cb->txn_id),
        DB_I(o->id),
        DB_I(cb->amount_cents),
        DB_S(cb->success ? "SUCCESS" : "FAILED"),
        DB_S(pay_outcome_name(oc)),
        DB_S(order_status_name(after)),
        oc == PAY_APPLIED ? DB_I(o->id) : DB_NUL,
        DB_S(tx->stamp),
    };
    int rc = db_exec(tx->conn, sql[P_INSERT], pay, 8, NULL, NULL);
    if (rc != TD_EDUP || strcmp(db_dup_key(tx->conn), "uq_payments_txn") == 0)
        return rc;
    if (strcmp(db_dup_key(tx->conn), "uq_payments_applied") == 0) {
        /* Another payment of the order committed first: this one read the
         * order unpaid without its lock (state-cas off, a demo) and decided
         * to apply too. It is a duplicate payment; the next attempt reads
         * the order paid and records it as one, with its refund. */
        log_info("payment %s: order %s was paid meanwhile; looking again", cb->txn_id, o->order_no);
        return TD_ERETRY;
    }
    log_error("payment %s: order %s: unexpected unique key %s", cb->txn_id, o->order_no,
              db_dup_key(tx->conn));
    return TD_EINTERNAL;
}

int store_payment_move(struct pay_tx *tx, const struct order *o, enum order_event ev)
{
    return store_tx_move(tx->conn, o, ev);
}

int store_payment_event(struct pay_tx *tx, const char *type, const char *biz_key,
                        const char *payload)
{
    struct db_arg args[] = {DB_S(type), DB_S(biz_key), DB_S(payload), DB_S(tx->stamp)};
    return db_exec(tx->conn, sql[P_OUTBOX], args, 4, NULL, NULL);
}
