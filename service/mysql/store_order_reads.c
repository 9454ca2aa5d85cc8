/* store_order_reads.c - the orders read back on MariaDB/MySQL (store.h):
 * one by its number, a user's list, and the locking read of a request's
 * order that the create flow asks before it refuses a copy; and, for the
 * adapters' transactions, an order read inside one (store_tx_order,
 * store_mysql.h). Every one reads the columns of STORE_ORDER_COLS into a
 * struct order, its status parsed. */
#include "store.h"

#include "db.h"
#include "err.h"
#include "faults.h"
#include "log.h"
#include "store_mysql.h"

#include <string.h>

enum stmt {
    S_ORDER_BY_REQUEST_WAIT,
    S_ORDER_BY_NO,
    S_ORDER_BY_NO_USER,
    S_ORDER_LIST,
    S_ORDER_LIST_BEFORE,
    S_COUNT
};

static const char *const sql[S_COUNT] = {
    /* A locking read waits for a copy of the request that has inserted its
     * order but not yet committed, and then sees it: the answer "no order
     * under this key" is never given while one is about to appear. */
    [S_ORDER_BY_REQUEST_WAIT] = "SELECT " STORE_ORDER_COLS " FROM orders "
                                "WHERE user_id = ? AND request_id = ? LOCK IN SHARE MODE",
    [S_ORDER_BY_NO] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ?",
    [S_ORDER_BY_NO_USER] =
        "SELECT " STORE_ORDER_COLS " FROM orders WHERE order_no = ? AND user_id = ?",
    [S_ORDER_LIST] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE user_id = ? "
                     "ORDER BY id DESC LIMIT ?",
    [S_ORDER_LIST_BEFORE] = "SELECT " STORE_ORDER_COLS " FROM orders WHERE user_id = ? AND id < ? "
                            "ORDER BY id DESC LIMIT ?",
};

/* Reading an order: the columns of STORE_ORDER_COLS into o (status as text). */
struct order_row {
    struct order o;
    char status[24];
    struct db_col cols[11];
};

static void order_row_bind(struct order_row *r)
{
    memset(&r->o, 0, sizeof r->o);
    struct db_col cols[11] = {
        DB_COL_I(&r->o.id),           DB_COL_S(r->o.order_no),   DB_COL_I(&r->o.user_id),
        DB_COL_I(&r->o.session_id),   DB_COL_S(r->o.request_id), DB_COL_I(&r->o.quantity),
        DB_COL_I(&r->o.amount_cents), DB_COL_S(r->status),       DB_COL_I(&r->o.version),
        DB_COL_S(r->o.created_at),    DB_COL_S(r->o.updated_at),
    };
    memcpy(r->cols, cols, sizeof cols);
}

static int order_row_finish(struct order_row *r)
{
    if (!order_status_parse(r->status, &r->o.status)) {
        log_error("order %s has unknown status %s", r->o.order_no, r->status);
        return TD_EINTERNAL;
    }
    return TD_OK;
}

int store_tx_order(struct db_conn *c, const char *stmt, const struct db_arg *args, int nargs,
                   struct order *out)
{
    struct order_row r;
    memset(out, 0, sizeof *out);
    order_row_bind(&r);
    int rc = db_row(c, stmt, args, nargs, r.cols, 11);
    if (rc == TD_OK)
        rc = order_row_finish(&r);
    if (rc == TD_OK)
        *out = r.o;
    return rc;
}

static int order_query(const char *stmt, const struct db_arg *args, int nargs, struct order *out)
{
    struct order_row r;
    memset(out, 0, sizeof *out);
    order_row_bind(&r);
    int rc = db_read_row(stmt, args, nargs, r.cols, 11);
    if (rc == TD_OK)
        rc = order_row_finish(&r);
    if (rc == TD_OK)
        *out = r.o;
    return rc;
}

int store_order_find_request(int64_t user_id, const char *request_id, struct order *out)
{
    /* The test build: the locking read chosen as a deadlock's victim, or
     * aborted by a writeset another Galera node committed (1213). */
    if (FAULT_POINT("order.lookup_conflict"))
        return TD_ERETRY;
    struct db_arg args[] = {DB_I(user_id), DB_S(request_id)};
    return order_query(sql[S_ORDER_BY_REQUEST_WAIT], args, 2, out);
}

int store_order_get(const char *order_no, int64_t user_id, struct order *out)
{
    if (user_id == 0) {
        struct db_arg args[] = {DB_S(order_no)};
        return order_query(sql[S_ORDER_BY_NO], args, 1, out);
    }
    struct db_arg args[] = {DB_S(order_no), DB_I(user_id)};
    return order_query(sql[S_ORDER_BY_NO_USER], args, 2, out);
}

struct list_ctx {
    struct order_row *row;
    struct order *out;
    int n;
    int max;
};

static int list_each(void *p)
{
    struct list_ctx *l = p;
    int rc = order_row_finish(l->row);
    if (rc != TD_OK)
        return rc;
    if (l->n < l->max)
        l->out[l->n++] = l->row->o;
    return 0;
}

int store_order_list(int64_t user_id, int64_t before_id, int limit, struct order *out, int *n)
{
    struct db_conn *c;
    struct order_row r;
    *n = 0;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    order_row_bind(&r);
    struct list_ctx l = {&r, out, 0, limit};
    if (before_id > 0) {
        struct db_arg args[] = {DB_I(user_id), DB_I(before_id), DB_I(limit)};
        rc = db_rows(c, sql[S_ORDER_LIST_BEFORE], args, 3, r.cols, 11, list_each, &l);
    } else {
        struct db_arg args[] = {DB_I(user_id), DB_I(limit)};
        rc = db_rows(c, sql[S_ORDER_LIST], args, 2, r.cols, 11, list_each, &l);
    }
    if (rc == TD_ENOTFOUND)
        rc = TD_OK;
    *n = l.n;
    return rc;
}
