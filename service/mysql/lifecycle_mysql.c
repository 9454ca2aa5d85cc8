/* lifecycle_mysql.c - cancel, complete and expire on MariaDB/MySQL. Each
 * change locks its order row first (as the payment callback does), so a
 * cancel and a payment of one order run one after the other and the
 * second sees what the first did: exactly one of them wins. */
#include "store_lifecycle.h"

#include "db.h"
#include "err.h"
#include "log.h"
#include "store_mysql.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

enum stmt {
    L_LOCK_BY_NO,
    L_LOCK_BY_NO_USER,
    L_LOCK_BY_ID_SKIP,
    L_LOCK_BY_ID,
    L_READ_BY_ID,
    L_READ_BY_NO,
    L_READ_BY_NO_USER,
    L_STOCK_BACK,
    L_UNPAID,
    L_COUNT
};

static const char *const sql[L_COUNT] = {
    [L_LOCK_BY_NO] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ? FOR UPDATE",
    [L_LOCK_BY_NO_USER] = "SELECT " STORE_ORDER_COLS " FROM orders "
                          "WHERE order_no = ? AND user_id = ? FOR UPDATE",
    /* The sweep passes over an order someone holds (a callback paying it,
     * another instance's sweep): the next pass looks again. */
    [L_LOCK_BY_ID_SKIP] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE id = ? "
                          "FOR UPDATE SKIP LOCKED",
    [L_LOCK_BY_ID] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE id = ? FOR UPDATE",
    [L_READ_BY_ID] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE id = ?",
    /* DEMO ONLY (state-cas switched off): the reads of the naive version,
     * without the lock. */
    [L_READ_BY_NO] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ?",
    [L_READ_BY_NO_USER] = "SELECT " STORE_ORDER_COLS " FROM orders "
                          "WHERE order_no = ? AND user_id = ?",
    /* The seats go back by the inverse of the stock CAS; the bound keeps a
     * bug from ever making stock exceed capacity. */
    [L_STOCK_BACK] = "UPDATE sessions SET stock = stock + ?, version = version + 1 "
                     "WHERE id = ? AND stock + ? <= capacity",
    [L_UNPAID] = "SELECT id FROM orders WHERE status = 'PENDING_PAYMENT' AND created_at < ? "
                 "AND id > ? ORDER BY id LIMIT ?",
};

static int lock_order(struct db_conn *c, const struct order_change *ch, struct order *o)
{
    if (ch->order_no == NULL) {
        struct db_arg id[] = {DB_I(ch->order_id)};
        const char *by_id = ch->skip_locked ? sql[L_LOCK_BY_ID_SKIP] : sql[L_LOCK_BY_ID];
        return store_tx_read_for_move(c, by_id, sql[L_READ_BY_ID], id, 1, o);
    }
    if (ch->user_id != 0) {
        struct db_arg key[] = {DB_S(ch->order_no), DB_I(ch->user_id)};
        return store_tx_read_for_move(c, sql[L_LOCK_BY_NO_USER], sql[L_READ_BY_NO_USER], key, 2, o);
    }
    struct db_arg no[] = {DB_S(ch->order_no)};
    return store_tx_read_for_move(c, sql[L_LOCK_BY_NO], sql[L_READ_BY_NO], no, 1, o);
}

/* The seats back to the order's session, by the inverse of the stock CAS. */
static int give_back_stock(struct db_conn *c, const struct order *o)
{
    uint64_t affected = 0;
    struct db_arg back[] = {DB_I(o->quantity), DB_I(o->session_id), DB_I(o->quantity)};
    int rc = db_exec(c, sql[L_STOCK_BACK], back, 3, &affected, NULL);
    if (rc == TD_OK && affected != 1) {
        log_error("order %s: giving %lld seats back to session %lld would exceed its "
                  "capacity; the books do not balance",
                  o->order_no, (long long)o->quantity, (long long)o->session_id);
        rc = TD_EINTERNAL;
    }
    return rc;
}

static int change_in_tx(struct db_conn *c, const struct order_change *ch, struct order *out,
                        bool *changed)
{
    struct order o;
    int rc = lock_order(c, ch, &o);
    if (rc != TD_OK)
        return rc;
    if (o.status == ch->done) {
        *out = o;
        return TD_OK; /* nothing to write */
    }
    rc = store_tx_move(c, &o, ch->event);
    if (rc == TD_ECONFLICT)
        *out = o;
    if (rc == TD_OK && ch->give_back_stock)
        rc = give_back_stock(c, &o);
    if (rc != TD_OK)
        return rc;
    struct db_arg id[] = {DB_I(o.id)};
    rc = store_tx_order(c, sql[L_READ_BY_ID], id, 1, out);
    *changed = rc == TD_OK;
    return rc;
}

int store_order_change(const struct order_change *ch, struct order *out, bool *changed)
{
    struct db_conn *c;
    memset(out, 0, sizeof *out);
    *changed = false;
    int rc = db_tx_begin(&c);
    if (rc != TD_OK)
        return rc;
    rc = db_tx_end(c, change_in_tx(c, ch, out, changed));
    if (rc != TD_OK)
        *changed = false;
    if (rc != TD_OK && rc != TD_ECONFLICT)
        memset(out, 0, sizeof *out);
    return rc;
}

struct ids_ctx {
    int64_t *row;
    int64_t *ids;
    int n;
    int max;
};

static int ids_each(void *p)
{
    struct ids_ctx *x = p;
    if (x->n < x->max)
        x->ids[x->n++] = *x->row;
    return 0;
}

int store_orders_unpaid_older(int64_t age_s, int64_t after_id, int limit, int64_t *ids, int *n)
{
    struct db_conn *c;
    char before[32];
    struct timespec ts;
    struct tm tm;
    int64_t id = 0;
    *n = 0;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    /* created_at is stamped by the service clock in UTC, to the
     * millisecond (store_now): the cutoff comes from the same clock. */
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t t = ts.tv_sec - (time_t)age_s;
    gmtime_r(&t, &tm);
    size_t len = strftime(before, sizeof before, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(before + len, sizeof before - len, ".%03d", (int)(ts.tv_nsec / 1000000) % 1000);
    struct db_arg args[] = {DB_S(before), DB_I(after_id), DB_I(limit)};
    struct db_col cols[] = {DB_COL_I(&id)};
    struct ids_ctx x = {&id, ids, 0, limit};
    rc = db_rows(c, sql[L_UNPAID], args, 3, cols, 1, ids_each, &x);
    if (rc == TD_ENOTFOUND)
        rc = TD_OK;
    *n = x.n;
    return rc;
}
