/* store_deliveries.c - the Standard Webhooks delivery ids of the payment
 * callback on MariaDB/MySQL (store_payments.h), kept in the durable
 * idempotency records (sql/007, partitioned by day since sql/010): the
 * gateway's delivery is a request whose answer is not one business row
 * of its own, as a cart's batch is. */
#include "store_payments.h"

#include "db.h"
#include "err.h"

#include <string.h>

#define SCOPE "webhook"

enum stmt { D_FIND, D_INSERT, D_READ_LOCKED, D_COUNT };

static const char *const sql[D_COUNT] = {
    [D_FIND] = "SELECT fingerprint FROM idempotency_records WHERE scope = '" SCOPE
               "' AND user_id = 0 AND idem_key = ? ORDER BY created_day DESC LIMIT 1",
    /* complete = 1, status 200: a delivery is recorded only with the
     * payment it answered, in the same transaction. The response column
     * keeps the txn_id, for a reader: the answer itself is the payment
     * row's. */
    [D_INSERT] = "INSERT INTO idempotency_records (scope, user_id, idem_key, created_day, "
                 "fingerprint, complete, status, response, created_at, updated_at) "
                 "VALUES ('" SCOPE "', 0, ?, UTC_DATE(), ?, 1, 200, ?, ?, ?)",
    /* A locking read sees the newest committed row, not the transaction's
     * snapshot. */
    [D_READ_LOCKED] = "SELECT fingerprint FROM idempotency_records WHERE scope = '" SCOPE
                      "' AND user_id = 0 AND idem_key = ? AND created_day = UTC_DATE() "
                      "LOCK IN SHARE MODE",
};

int store_payment_delivery_find(const char *id, char *fp)
{
    fp[0] = '\0';
    struct db_arg args[] = {DB_S(id)};
    struct db_col cols[] = {{.type = DB_STR, .dst = fp, .cap = IDEM_FP_LEN + 1}};
    return db_read_row(sql[D_FIND], args, 1, cols, 1);
}

int store_payment_delivery_claim(struct pay_tx *tx, const char *id, const char *fp,
                                 const char *txn_id, char *seen_fp)
{
    seen_fp[0] = '\0';
    struct db_arg ins[] = {DB_S(id), DB_S(fp), DB_S(txn_id), DB_S(tx->stamp), DB_S(tx->stamp)};
    int rc = db_exec(tx->conn, sql[D_INSERT], ins, 5, NULL, NULL);
    if (rc != TD_EDUP)
        return rc;
    struct db_arg args[] = {DB_S(id)};
    struct db_col cols[] = {{.type = DB_STR, .dst = seen_fp, .cap = IDEM_FP_LEN + 1}};
    rc = db_row(tx->conn, sql[D_READ_LOCKED], args, 1, cols, 1);
    return rc == TD_OK ? TD_EDUP : rc == TD_ENOTFOUND ? TD_ERETRY : rc;
}
