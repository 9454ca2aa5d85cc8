/* store_payments.c - the payment callback's transaction on MariaDB/MySQL.
 *
 * The order row is locked first. Without that, two callbacks of one order
 * deadlock: the payment insert's foreign key check takes a shared lock on
 * the order row, and the compare-and-set that follows needs it exclusive,
 * so each waits for the other's shared lock (measured: concurrent
 * retries of one txn_id ended in 1213s). With the order locked first they
 * queue instead, and each one reads what the previous one committed. */
#include "store_payments.h"

#include "db.h"
#include "err.h"
#include "log.h"
#include "store_tx.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Reads the payment row of a txn_id into *seen. */
static int find_txn(struct db_conn *c, const char *txn_id, struct payment_seen *seen)
{
    char outcome[32], status[24], paid[16];
    struct db_arg args[] = {DB_S(txn_id)};
    struct db_col cols[] = {
        DB_COL_S(seen->txn_id), DB_COL_S(seen->order_no), DB_COL_I(&seen->amount_cents),
        DB_COL_S(paid),         DB_COL_S(outcome),        DB_COL_S(status)};
    int rc = db_row(c, sql[P_FIND_TXN], args, 1, cols, 6);
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

/* The outbox payload: the format the relay and its consumers read. A new
 * string; the caller frees it. */
static char *event_payload(const char *type, const struct order *o,
                           const struct payment_callback *cb, enum pay_outcome oc,
                           const char *occurred_at)
{
    json_t *j;
    if (oc == PAY_APPLIED)
        j = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:s,s:s}", "event_type", type, "order_no",
                      o->order_no, "order_id", (json_int_t)o->id, "user_id", (json_int_t)o->user_id,
                      "session_id", (json_int_t)o->session_id, "quantity", (json_int_t)o->quantity,
                      "amount_cents", (json_int_t)o->amount_cents, "txn_id", cb->txn_id,
                      "occurred_at", occurred_at);
    else
        /* What to refund is what the gateway took: the callback's amount. */
        j = json_pack("{s:s,s:s,s:s,s:I,s:I,s:s,s:s}", "event_type", type, "txn_id", cb->txn_id,
                      "order_no", o->order_no, "user_id", (json_int_t)o->user_id, "amount_cents",
                      (json_int_t)cb->amount_cents, "reason", pay_outcome_name(oc), "occurred_at",
                      occurred_at);
    char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (s == NULL)
        abort(); /* jansson fails here only without memory (the strings are valid UTF-8) */
    return s;
}

/* The event an outcome owes: order.paid, a refund, or none. */
static int write_event(struct db_conn *c, const struct order *o, const struct payment_callback *cb,
                       enum pay_outcome oc, bool dedup, const char *db_now, const char *api_now)
{
    const char *type, *biz_key;
    switch (oc) {
    case PAY_APPLIED:
        type = "order.paid";
        biz_key = o->order_no;
        break;
    case PAY_DUPLICATE:
    case PAY_LATE:
        type = "payment.refund_required";
        biz_key = cb->txn_id;
        break;
    default:
        return TD_OK;
    }
    char *payload = event_payload(type, o, cb, oc, api_now);
    struct db_arg args[] = {DB_S(type), DB_S(biz_key), DB_S(payload), DB_S(db_now)};
    int rc = db_exec(c, sql[P_OUTBOX], args, 4, NULL, NULL);
    free(payload);
    if (rc == TD_EDUP) {
        if (!dedup)
            return TD_OK; /* demo: the same refund, owed again, is already queued */
        log_error("outbox already holds %s %s; the payment rows disagree", type, biz_key);
        return TD_EINTERNAL;
    }
    return rc;
}

/* The demo's switched-off dedup: a look for the txn_id that only spares
 * the unique key, never the effect. */
static int txn_recorded(struct db_conn *c, const char *txn_id, bool *found)
{
    struct payment_seen seen;
    memset(&seen, 0, sizeof seen);
    *found = false;
    int rc = find_txn(c, txn_id, &seen);
    if (rc == TD_OK)
        *found = true;
    return rc == TD_ENOTFOUND ? TD_OK : rc;
}

int store_payment_record(const struct payment_callback *cb, bool dedup, payment_decide_fn decide,
                         struct payment_result *out, struct payment_seen *seen)
{
    struct db_conn *c;
    struct order o;
    char db_now[32], api_now[TIME_LEN + 1];
    bool tx = false, dup_txn = false;
    memset(out, 0, sizeof *out);
    memset(seen, 0, sizeof *seen);
    int rc = db_conn(&c);
    if (rc != TD_OK)
        return rc;
    store_now(db_now, api_now);

    rc = db_begin(c);
    if (rc != TD_OK)
        goto out;
    tx = true;
    struct db_arg no[] = {DB_S(cb->order_no)};
    rc = store_tx_read_for_move(c, sql[P_ORDER_LOCK], sql[P_ORDER_READ], no, 1, &o);
    if (rc != TD_OK)
        goto out;

    if (dedup) {
        /* The defence: a txn_id is answered once. Under the order's lock
         * this read sees every earlier callback of the order committed. */
        rc = find_txn(c, cb->txn_id, seen);
        if (rc == TD_OK) {
            db_rollback(c); /* nothing was written; just let the order go */
            return TD_EDUP;
        }
        if (rc != TD_ENOTFOUND)
            goto out;
    }

    enum pay_outcome oc = decide(o.status, o.amount_cents, cb);
    enum order_status after = oc == PAY_APPLIED ? ORDER_PAID : o.status;

    bool insert = true;
    if (!dedup) {
        /* DEMO ONLY (callback-dedup switched off): the outcome above was
         * decided from the order alone, so a retry of the payment that
         * paid it is taken for a second payment and refunded. The row is
         * skipped when one exists, so the unique key cannot step in. */
        bool found;
        rc = txn_recorded(c, cb->txn_id, &found);
        if (rc != TD_OK)
            goto out;
        insert = !found;
    }
    if (insert) {
        struct db_arg pay[] = {
            DB_S(cb->txn_id),
            DB_I(o.id),
            DB_I(cb->amount_cents),
            DB_S(cb->success ? "SUCCESS" : "FAILED"),
            DB_S(pay_outcome_name(oc)),
            DB_S(order_status_name(after)),
            oc == PAY_APPLIED ? DB_I(o.id) : DB_NUL,
            DB_S(db_now),
        };
        rc = db_exec(c, sql[P_INSERT], pay, 8, NULL, NULL);
        if (rc == TD_EDUP) {
            if (strcmp(db_dup_key(c), "uq_payments_txn") == 0) {
                /* The same txn_id, sent for another order at the same
                 * time, committed first: the unique key decided. */
                dup_txn = true;
            } else {
                log_error("payment %s: order %s has an applied payment already (%s)", cb->txn_id,
                          o.order_no, db_dup_key(c));
                rc = TD_EINTERNAL;
            }
            goto out;
        }
        if (rc != TD_OK)
            goto out;
    }

    if (oc == PAY_APPLIED) {
        rc = store_tx_move(c, &o, EVENT_PAY);
        if (rc == TD_ECONFLICT)
            rc = TD_ERETRY; /* cannot happen under the lock; if it does, look again */
        if (rc != TD_OK)
            goto out;
    }
    rc = write_event(c, &o, cb, oc, dedup, db_now, api_now);
    if (rc != TD_OK)
        goto out;
    rc = db_commit(c);
    if (rc != TD_OK)
        goto out;
    tx = false;

    out->outcome = oc;
    out->order_status = after;
    snprintf(out->txn_id, sizeof out->txn_id, "%s", cb->txn_id);
    snprintf(out->order_no, sizeof out->order_no, "%s", o.order_no);
out:
    if (tx && rc != TD_OK)
        db_rollback(c);
    if (dup_txn) {
        /* Outside the transaction: the row that was committed first. */
        rc = find_txn(c, cb->txn_id, seen);
        if (rc == TD_OK)
            rc = TD_EDUP;
        else if (rc == TD_ENOTFOUND)
            rc = TD_ERETRY;
    }
    return rc;
}
