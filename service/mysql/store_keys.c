/* store_keys.c - the orders' keys on MariaDB/MySQL (store.h): the key
 * look-up's read of an order by its key (store_order_peek_request), and
 * what the order-key filter is rebuilt from (store_order_keys, and the
 * orders it missed: store_filter_misses_*). Apart from
 * store_order_reads.c, whose read of an order by its key is a locking
 * one, for the create flow. */
#include "store.h"

#include "db.h"
#include "err.h"
#include "store_mysql.h"

#include <string.h>

/* A consistent read: no lock taken, no copy's uncommitted insert waited
 * for. The unique key (user_id, request_id) makes it one row at most. */
static const char sql_peek[] = "SELECT " STORE_ORDER_COLS " FROM orders "
                               "WHERE user_id = ? AND request_id = ?";

int store_order_peek_request(int64_t user_id, const char *request_id, struct order *out)
{
    struct db_conn *c;
    struct db_arg args[] = {DB_I(user_id), DB_S(request_id)};
    memset(out, 0, sizeof *out);
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    return store_tx_order(c, sql_peek, args, 2, out);
}

static const char sql_order_keys[] =
    "SELECT id, user_id, request_id FROM orders WHERE id > ? ORDER BY id LIMIT ?";

struct keys_ctx {
    int64_t id, user_id;
    char request_id[REQUEST_ID_MAX + 1];
    store_order_key_fn each;
    void *ctx;
};

static int keys_each(void *p)
{
    struct keys_ctx *k = p;
    return k->each(k->id, k->user_id, k->request_id, k->ctx);
}

int store_order_keys(int64_t after_id, int limit, store_order_key_fn each, void *ctx)
{
    struct keys_ctx k = {.each = each, .ctx = ctx};
    struct db_arg args[] = {DB_I(after_id), DB_I(limit)};
    struct db_col cols[] = {DB_COL_I(&k.id), DB_COL_I(&k.user_id), DB_COL_S(k.request_id)};
    int rc = db_read(sql_order_keys, args, 2, cols, 3, keys_each, &k);
    return rc == TD_ENOTFOUND ? TD_OK : rc;
}

int store_filter_misses_last(int64_t *last_id)
{
    struct db_col cols[] = {DB_COL_I(last_id)};
    *last_id = 0;
    return db_read_row("SELECT COALESCE(MAX(id), 0) FROM order_key_filter_misses", NULL, 0, cols,
                       1);
}

int store_filter_misses_clear(int64_t last_id)
{
    struct db_conn *c;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_I(last_id)};
    return db_exec(c, "DELETE FROM order_key_filter_misses WHERE id <= ?", args, 1, NULL, NULL);
}
