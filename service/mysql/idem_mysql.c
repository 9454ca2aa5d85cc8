/* idem_mysql.c - the durable idempotency records on MariaDB/MySQL
 * (store_idem.h, sql/007_idempotency_records.sql). */
#include "store_idem.h"

#include "db.h"
#include "err.h"
#include "store_mysql.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

enum stmt { I_FIND, I_PUT, I_COUNT };

static const char *const sql[I_COUNT] = {
    /* The newest day first: a key has one row unless a retry came after its
     * first day's partition was dropped. */
    [I_FIND] =
        "SELECT fingerprint, complete, status, response, DATE_FORMAT(created_day, '%Y-%m-%d') "
        "FROM idempotency_records WHERE scope = ? AND user_id = ? AND idem_key = ? "
        "ORDER BY created_day DESC LIMIT 1",
    /* MariaDB evaluates the assignments left to right, each seeing the ones
     * before: `complete` is assigned last, so every condition reads the
     * row's old fingerprint and completeness. */
    [I_PUT] =
        "INSERT INTO idempotency_records (scope, user_id, idem_key, created_day, fingerprint, "
        "complete, status, response, created_at, updated_at) "
        "VALUES (?, ?, ?, COALESCE(?, UTC_DATE()), ?, ?, ?, ?, ?, ?) "
        "ON DUPLICATE KEY UPDATE "
        "status = IF(fingerprint = VALUES(fingerprint) AND complete = 0, VALUES(status), "
        "status), "
        "response = IF(fingerprint = VALUES(fingerprint) AND complete = 0, VALUES(response), "
        "response), "
        "updated_at = IF(fingerprint = VALUES(fingerprint) AND complete = 0, "
        "VALUES(updated_at), updated_at), "
        "complete = IF(fingerprint = VALUES(fingerprint) AND complete = 0, VALUES(complete), "
        "complete)",
};

void idem_stored_cleanup(struct idem_stored *st)
{
    free(st->body);
    memset(st, 0, sizeof *st);
}

int store_idem_find(const char *scope, int64_t user_id, const char *key, struct idem_stored *out)
{
    int64_t complete = 0, status = 0;
    memset(out, 0, sizeof *out);
    char *body = xmalloc(STORE_IDEM_BODY_MAX);
    struct db_arg args[] = {DB_S(scope), DB_I(user_id), DB_S(key)};
    struct db_col cols[] = {DB_COL_S(out->fingerprint),
                            DB_COL_I(&complete),
                            DB_COL_I(&status),
                            {.type = DB_STR, .dst = body, .cap = STORE_IDEM_BODY_MAX},
                            DB_COL_S(out->day)};
    int rc = db_read_row(sql[I_FIND], args, 3, cols, 5);
    if (rc != TD_OK) {
        free(body);
        memset(out, 0, sizeof *out);
        return rc;
    }
    out->complete = complete != 0;
    out->status = (int)status;
    out->body = body;
    out->body_len = strlen(body);
    return TD_OK;
}

int store_idem_put(const char *scope, int64_t user_id, const char *key, const char *day,
                   const char *fingerprint, bool complete, int status, const char *body,
                   size_t body_len)
{
    struct db_conn *c;
    char stamp[32], at[TIME_LEN + 1];
    if (body_len >= STORE_IDEM_BODY_MAX)
        return TD_EINVAL;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    store_now(stamp, at);
    struct db_arg args[] = {
        DB_S(scope),       DB_I(user_id),
        DB_S(key),         day != NULL ? DB_S(day) : DB_NUL,
        DB_S(fingerprint), DB_I(complete),
        DB_I(status),      {.type = DB_STR, .s = body, .len = (unsigned long)body_len},
        DB_S(stamp),       DB_S(stamp)};
    return db_exec(c, sql[I_PUT], args, 10, NULL, NULL);
}
