/* store_keys.c - the key look-up's read of the orders table on
 * MariaDB/MySQL (store_order_peek_request, store.h). Apart from
 * store_mysql.c, whose read of an order by its key is a locking one, for
 * the create flow. */
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
    int rc = db_conn(&c);
    if (rc != TD_OK)
        return rc;
    return store_tx_order(c, sql_peek, args, 2, out);
}
