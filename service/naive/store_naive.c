/* store_naive.c - the demo's naive transaction steps (store_naive.h). */
#include "store_naive.h"

#include "db.h"
#include "err.h"

/* The order statement on its own, for the step-by-step transaction. In
 * READ COMMITTED the session is read without a lock. */
static const char sql_order_insert[] = STORE_ORDER_INSERT;
static const char sql_token_spend[] = STORE_TOKEN_SPEND;
static const char sql_filter_miss[] = STORE_FILTER_MISS;

static const char sql_order_by_request[] =
    "SELECT " STORE_ORDER_COLS " FROM orders WHERE user_id = ? AND request_id = ?";

/* The stock compare-and-set, as a statement of its own. */
static const char sql_stock_take[] = "UPDATE sessions SET stock = stock - ?, version = version + 1 "
                                     "WHERE id = ? AND stock >= ?";

/* Read, then write back what was read minus the quantity. Two requests
 * that read the same value both succeed, and one seat is sold twice. */
static const char sql_stock_read[] = "SELECT stock FROM sessions WHERE id = ?";
static const char sql_stock_write[] =
    "UPDATE sessions SET stock = ?, version = version + 1 WHERE id = ?";

/* A consistent (non-locking) read, then a blind write: exactly the
 * read-modify-write that oversells. */
static int stock_read_then_write(struct db_conn *c, const struct order_draft *d)
{
    int64_t stock = 0;
    struct db_arg sid[] = {DB_I(d->session_id)};
    struct db_col col[] = {DB_COL_I(&stock)};
    int rc = db_row(c, sql_stock_read, sid, 1, col, 1);
    if (rc != TD_OK)
        return rc;
    if (stock < d->quantity)
        return TD_ECONFLICT;
    struct db_arg put[] = {DB_I(stock - d->quantity), DB_I(d->session_id)};
    return db_exec(c, sql_stock_write, put, 2, NULL, NULL);
}

/* The race the unique index closes: between this look and the insert
 * after it, a concurrent copy can look too. TD_EDUP when the key has an
 * order. */
static int look_for_key(struct db_conn *c, const struct order_draft *d)
{
    struct order prior;
    struct db_arg key[] = {DB_I(d->user_id), DB_S(d->request_id)};
    int rc = store_tx_order(c, sql_order_by_request, key, 2, &prior);
    if (rc != TD_ENOTFOUND)
        return rc == TD_OK ? TD_EDUP : rc;
    return TD_OK;
}

/* The statements of the step-by-step transaction: (a look for the key),
 * the order, its token, the filter's miss, (a stock read and write back, or the stock
 * compare-and-set). */
static int place_steps(struct db_conn *c, const struct order_draft *d, const char *db_now,
                       int64_t *id, int64_t *amount, bool look_first, bool read_stock)
{
    uint64_t affected = 0;
    int rc = look_first ? look_for_key(c, d) : TD_OK;
    if (rc != TD_OK)
        return rc;
    struct db_arg ins[] = {DB_S(d->order_no), DB_I(d->user_id),   DB_S(d->request_id),
                           DB_I(d->quantity), DB_I(d->quantity),  DB_S(db_now),
                           DB_S(db_now),      DB_I(d->session_id)};
    struct db_col made[] = {DB_COL_I(id), DB_COL_I(amount)};
    rc = db_row(c, sql_order_insert, ins, 8, made, 2);
    if (rc != TD_OK)
        return rc; /* TD_ENOTFOUND: no such session */
    if (d->token_key != NULL) {
        struct db_arg tok[] = {DB_S(d->token_key), DB_S(db_now), DB_I(d->user_id),
                               DB_S(d->request_id)};
        rc = db_exec(c, sql_token_spend, tok, 4, NULL, NULL);
        if (rc != TD_OK)
            return rc;
    }
    if (d->filter_missed) {
        struct db_arg miss[] = {DB_S(db_now), DB_I(d->user_id), DB_S(d->request_id)};
        rc = db_exec(c, sql_filter_miss, miss, 3, NULL, NULL);
        if (rc != TD_OK)
            return rc;
    }
    if (read_stock)
        return stock_read_then_write(c, d);
    struct db_arg take[] = {DB_I(d->quantity), DB_I(d->session_id), DB_I(d->quantity)};
    rc = db_exec(c, sql_stock_take, take, 3, &affected, NULL);
    return rc == TD_OK && affected != 1 ? TD_ECONFLICT : rc;
}

static int place_step_by_step(struct db_conn *c, const struct order_draft *d, const char *db_now,
                              int64_t *id, int64_t *amount, bool look_first, bool read_stock)
{
    int rc = db_begin(c);
    if (rc != TD_OK)
        return rc;
    return db_tx_end(c, place_steps(c, d, db_now, id, amount, look_first, read_stock));
}

int store_naive_place_look_first(struct db_conn *c, const struct order_draft *d, const char *db_now,
                                 int64_t *id, int64_t *amount)
{
    return place_step_by_step(c, d, db_now, id, amount, true, false);
}

int store_naive_place_read_stock(struct db_conn *c, const struct order_draft *d, const char *db_now,
                                 int64_t *id, int64_t *amount)
{
    return place_step_by_step(c, d, db_now, id, amount, false, true);
}

int store_naive_place_both(struct db_conn *c, const struct order_draft *d, const char *db_now,
                           int64_t *id, int64_t *amount)
{
    return place_step_by_step(c, d, db_now, id, amount, true, true);
}

int store_naive_read_plain(struct db_conn *c, const char *locking, const char *plain,
                           const struct db_arg *args, int nargs, struct order *out)
{
    (void)locking; /* the real version's statement */
    return store_tx_order(c, plain, args, nargs, out);
}

/* Read-modify-write: the status was read (without a lock) and checked
 * against the state machine by the caller's process; the write trusts that
 * reading and names only the row. Two transitions that read the same
 * status both write, and the last one wins. */
static const char sql_rmw[] =
    "UPDATE orders SET status = ?, version = version + 1, updated_at = ? WHERE id = ?";

/* The history row takes whatever version the row has now, as code that
 * never compares versions would: a second writer then records a version
 * of its own instead of colliding with the first on (order_id, version). */
static const char sql_history[] =
    "INSERT INTO order_history (order_id, from_status, to_status, version, cause, created_at) "
    "SELECT id, ?, ?, version, ?, ? FROM orders WHERE id = ?";

int store_naive_move_blind(struct db_conn *c, const struct order *o, enum order_event ev)
{
    char db_now[32], api_now[TIME_LEN + 1];
    enum order_status to;
    if (!statemachine_next(o->status, ev, &to))
        return TD_ECONFLICT;
    store_now(db_now, api_now);
    struct db_arg set[] = {DB_S(order_status_name(to)), DB_S(db_now), DB_I(o->id)};
    int rc = db_exec(c, sql_rmw, set, 3, NULL, NULL);
    if (rc != TD_OK)
        return rc;
    struct db_arg hist[] = {DB_S(order_status_name(o->status)), DB_S(order_status_name(to)),
                            DB_S(order_event_name(ev)), DB_S(db_now), DB_I(o->id)};
    return db_exec(c, sql_history, hist, 5, NULL, NULL);
}

static const char sql_consume_record[] =
    "INSERT INTO consume_records (consumer, biz_key) VALUES (?, ?)";

/* The dedup row in a transaction of its own, committed before the effect
 * begins, as the articles warn against. An effect that fails after it
 * leaves the row behind, and the redelivery that should apply the effect
 * finds it and skips: the effect is lost. */
static int record_consumed_alone(const char *consumer, const char *dedup_key)
{
    struct db_conn *c;
    if (dedup_key == NULL)
        return TD_OK;
    int rc = db_tx_begin(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_S(consumer), DB_S(dedup_key)};
    return db_tx_end(c, db_exec(c, sql_consume_record, args, 2, NULL, NULL));
}

int store_naive_consume_apart(const char *consumer, const char *dedup_key, int64_t redrive_id,
                              store_effect_fn effect, const void *ctx)
{
    if (redrive_id != 0)
        return store_events_steps.consume(consumer, dedup_key, redrive_id, effect, ctx);
    int rc = record_consumed_alone(consumer, dedup_key);
    if (rc != TD_OK)
        return rc; /* TD_EDUP: applied before, as far as the row says */
    /* The effect's transaction, without the row it already committed. */
    return store_events_steps.consume(consumer, NULL, 0, effect, ctx);
}

int store_naive_no_ledger(struct db_conn *c, const char *order_no, int64_t user_id, int64_t points,
                          const char *db_now)
{
    (void)c;
    (void)order_no;
    (void)user_id;
    (void)points;
    (void)db_now;
    return TD_OK;
}
