/* store_mysql.c - the store port on MariaDB/MySQL: its start and end,
 * sessions, a new order and an order's move, and the MySQL adapters'
 * shared pieces (store_mysql.h). The orders read back are
 * store_order_reads.c's, their keys store_keys.c's. Every statement comes
 * from a table and runs as a prepared statement, except the new order's
 * one-round-trip transaction (place_in_one_trip, and merge_batch_run,
 * merge_batch.c): a text of several statements cannot be prepared, so
 * db_batch inlines its arguments as escaped literals. Every transaction
 * that fails is rolled back explicitly before the error is returned. */
#include "store.h"

#include "db.h"
#include "err.h"
#include "faults.h"
#include "store_merge.h"
#include "store_mysql.h"
#include "log.h"
#include "txretry.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

enum stmt { S_SESSION_INSERT, S_SESSION_GET, S_HISTORY_INSERT, S_TRANSITION, S_COUNT };

static const char *const sql[S_COUNT] = {
    [S_SESSION_INSERT] = "INSERT INTO sessions (title, price_cents, capacity, stock, version) "
                         "VALUES (?, ?, ?, ?, 0)",
    [S_SESSION_GET] = "SELECT id, title, price_cents, capacity, stock, version FROM sessions "
                      "WHERE id = ?",
    [S_HISTORY_INSERT] = "INSERT INTO order_history (order_id, from_status, to_status, version, "
                         "cause, created_at) VALUES (?, ?, ?, ?, ?, ?)",
    /* Every state change: a compare-and-set on status and version. */
    [S_TRANSITION] = "UPDATE orders SET status = ?, version = version + 1, updated_at = ? "
                     "WHERE id = ? AND status = ? AND version = ?",
};

static int place_alone(const struct order_draft *d, const char *db_now, int64_t *id,
                       int64_t *amount);

int store_init(const struct config *cfg)
{
    store_merge_init(cfg->merge, cfg->merge_max, place_alone);
    return db_init(cfg);
}

void store_fiber_idle(void)
{
    db_fiber_idle();
}

void store_thread_release(void)
{
    db_thread_release();
}

void store_cleanup(void)
{
    db_cleanup();
}

int store_ping(void)
{
    struct db_conn *c;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    return db_ping(c);
}

/* Now, as the database's DATETIME(3) text and as RFC 3339 for the API. The
 * service clock stamps rows so that a new order needs no read-back. */
void store_now(char db[32], char api[TIME_LEN + 1])
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(db, 32, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(db + n, 32 - n, ".%03d", (int)(ts.tv_nsec / 1000000) % 1000);
    strftime(api, TIME_LEN + 1, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int store_session_create(const char *title, int64_t price_cents, int64_t stock, struct session *out)
{
    struct db_conn *c;
    uint64_t id = 0;
    memset(out, 0, sizeof *out);
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_S(title), DB_I(price_cents), DB_I(stock), DB_I(stock)};
    rc = db_exec(c, sql[S_SESSION_INSERT], args, 4, NULL, &id);
    if (rc != TD_OK)
        return rc;
    out->id = id;
    snprintf(out->title, sizeof out->title, "%s", title);
    out->price_cents = price_cents;
    out->capacity = stock;
    out->stock = stock;
    out->version = 0;
    return TD_OK;
}

int store_session_get(int64_t id, struct session *out)
{
    memset(out, 0, sizeof *out);
    struct db_arg args[] = {DB_I(id)};
    struct db_col cols[] = {DB_COL_I(&out->id),          DB_COL_S(out->title),
                            DB_COL_I(&out->price_cents), DB_COL_I(&out->capacity),
                            DB_COL_I(&out->stock),       DB_COL_I(&out->version)};
    return db_read_row(sql[S_SESSION_GET], args, 1, cols, 6);
}

int store_tx_transition(struct db_conn *c, const struct order *o, enum order_event ev)
{
    char db_now[32], api_now[TIME_LEN + 1];
    enum order_status to;
    uint64_t affected = 0;
    if (!statemachine_next(o->status, ev, &to))
        return TD_ECONFLICT;
    store_now(db_now, api_now);
    struct db_arg cas[] = {DB_S(order_status_name(to)), DB_S(db_now), DB_I(o->id),
                           DB_S(order_status_name(o->status)), DB_I(o->version)};
    int rc = db_exec(c, sql[S_TRANSITION], cas, 5, &affected, NULL);
    if (rc != TD_OK)
        return rc;
    if (affected != 1)
        return TD_ECONFLICT; /* someone else moved it first */
    struct db_arg hist[] = {
        DB_I(o->id),          DB_S(order_status_name(o->status)), DB_S(order_status_name(to)),
        DB_I(o->version + 1), DB_S(order_event_name(ev)),         DB_S(db_now)};
    return db_exec(c, sql[S_HISTORY_INSERT], hist, 6, NULL, NULL);
}

/* A lone order's transaction in one round trip, decided by the database
 * as a merged batch's orders are (merge_batch.h), in plain statements: one
 * order needs no per-order handlers, since its first refusal is its
 * answer, and the text costs MariaDB half the CPU of a call of
 * place_orders with one order (docs/speed.md#merged-orders).
 *
 * The price is read into a variable by a plain SELECT, which locks
 * nothing (NULL: no such session), so that the INSERT is a single-row
 * INSERT ... VALUES: an INSERT ... SELECT, or one with a subquery, takes
 * the table's auto-increment lock for the whole statement, and waiting
 * for a duplicate key while holding it closed a three-way deadlock that
 * MariaDB reported as 1467. The unique key (user_id, request_id) decides
 * at the INSERT, before any stock row lock is taken; then the token's
 * unique row; then the stock compare-and-set, the decrement and CHECK
 * (stock >= 0, ck_sessions_stock) together under the session row's lock,
 * taken by the last statement before COMMIT.
 *
 * Every write carries the in-transaction guard in itself: on Galera a
 * transaction rolled back by a replicated write (a brute-force abort) may
 * leave the statements after it running on their own, in autocommit.
 * Then a NOT NULL column gets NULL (1048) and the INSERT is refused, and
 * the UPDATE matches no row; db_batch's check after each statement
 * answers the rest. */
#define ORDER_PRICE "SELECT MAX(price_cents) INTO @order_price FROM sessions WHERE id = ?"
#define ORDER_INSERT                                                                               \
    "INSERT INTO orders (order_no, user_id, session_id, request_id, quantity, amount_cents, "      \
    "status, version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, @order_price * ?, "           \
    "IF(@@in_transaction, 'PENDING_PAYMENT', NULL), 1, ?, ?) RETURNING id, amount_cents"
#define ORDER_TOKEN                                                                                \
    "INSERT INTO order_tokens (order_id, token_hash, created_at) VALUES (LAST_INSERT_ID(), "       \
    "IF(@@in_transaction, ?, NULL), ?)"
#define ORDER_MISS                                                                                 \
    "INSERT INTO order_key_filter_misses (order_id, created_at) VALUES (LAST_INSERT_ID(), "        \
    "IF(@@in_transaction, ?, NULL))"
#define ORDER_STOCK                                                                                \
    "UPDATE sessions SET stock = stock - ?, version = version + 1 WHERE id = ? AND "               \
    "@@in_transaction"

/* The four texts: with or without the token, with or without the miss. */
static const char *const order_place[2][2] = {
    {"START TRANSACTION; " ORDER_PRICE "; " ORDER_INSERT "; " ORDER_STOCK "; COMMIT",
     "START TRANSACTION; " ORDER_PRICE "; " ORDER_INSERT "; " ORDER_MISS "; " ORDER_STOCK
     "; COMMIT"},
    {"START TRANSACTION; " ORDER_PRICE "; " ORDER_INSERT "; " ORDER_TOKEN "; " ORDER_STOCK
     "; COMMIT",
     "START TRANSACTION; " ORDER_PRICE "; " ORDER_INSERT "; " ORDER_TOKEN "; " ORDER_MISS
     "; " ORDER_STOCK "; COMMIT"},
};

static int place_in_one_trip(struct db_conn *c, const struct order_draft *d, const char *db_now,
                             int64_t *id, int64_t *amount)
{
    bool tok = d->token_key != NULL;
    struct db_arg args[16] = {DB_I(d->session_id), DB_S(d->order_no),   DB_I(d->user_id),
                              DB_I(d->session_id), DB_S(d->request_id), DB_I(d->quantity),
                              DB_I(d->quantity),   DB_S(db_now),        DB_S(db_now)};
    int n = 9;
    if (tok) {
        args[n++] = DB_S(d->token_key);
        args[n++] = DB_S(db_now);
    }
    if (d->filter_missed)
        args[n++] = DB_S(db_now);
    args[n++] = DB_I(d->quantity);
    args[n++] = DB_I(d->session_id);
    struct db_col made[] = {DB_COL_I(id), DB_COL_I(amount)};
    int rc = db_batch(c, order_place[tok][d->filter_missed], args, n, 2, made, 2);
    const char *what = db_dup_key(c);
    if (rc == TD_EDUP && strcmp(what, "uq_orders_order_no") == 0)
        return TD_ERETRY; /* a random order number collided: run again with a new one */
    if (rc == TD_EDUP && strcmp(what, "uq_order_tokens_token") == 0)
        return TD_ESPENT; /* another order spent the token: rolled back */
    if (rc == TD_ENOTFOUND && strcmp(what, "amount_cents") == 0)
        return TD_ENOTFOUND; /* no such session: no price (nothing was written) */
    if (rc == TD_ENOTFOUND && what[0] != '\0') {
        /* A guard's NULL: the server had dropped the transaction, and the
         * guard refused the write that would have run alone. Nothing of
         * the order is kept: run it again. */
        log_warn("order %s: the transaction was gone before its write (%s); running it again",
                 d->order_no, what);
        txretry_note(TXRETRY_CERTIFICATION);
        return TD_ERETRY;
    }
    if (rc == TD_ECONFLICT && strcmp(what, "ck_sessions_stock") != 0) {
        log_error("order %s: unexpected CHECK %s", d->order_no, what);
        return TD_EUNAVAIL;
    }
    return rc;
}

/* The real read_for_move: the row locked, so that a second transition
 * waits for the first and then finds the new status. */
static int read_locked(struct db_conn *c, const char *locking, const char *plain,
                       const struct db_arg *args, int nargs, struct order *out)
{
    (void)plain; /* the naive version's statement */
    return store_tx_order(c, locking, args, nargs, out);
}

const struct store_mysql_steps store_mysql_steps = {
    .order_place = place_in_one_trip,
    .read_for_move = read_locked,
    .move = store_tx_transition,
};

/* Set once at boot, before any request or job uses the store; read only
 * after. */
static const struct store_mysql_steps *steps = &store_mysql_steps;

void store_mysql_use(const struct store_mysql_steps *s)
{
    steps = s;
}

int store_tx_read_for_move(struct db_conn *c, const char *locking, const char *plain,
                           const struct db_arg *args, int nargs, struct order *out)
{
    int rc = steps->read_for_move(c, locking, plain, args, nargs, out);
    /* The test build can widen the time between reading the order and
     * writing it (delay), in both versions: under the row lock a second
     * transition waits for the first; without it both go ahead. */
    if (rc == TD_OK)
        (void)FAULT_POINT("order.before_transition");
    return rc;
}

int store_tx_move(struct db_conn *c, const struct order *o, enum order_event ev)
{
    return steps->move(c, o, ev);
}

/* The refused unique key's meaning for an order of the naive steps. */
static int map_refusal(struct db_conn *c, int rc)
{
    if (rc == TD_EDUP && strcmp(db_dup_key(c), "uq_orders_order_no") == 0)
        return TD_ERETRY; /* a random order number collided: run again with a new one */
    if (rc == TD_EDUP && strcmp(db_dup_key(c), "uq_order_tokens_token") == 0)
        return TD_ESPENT; /* another order spent the token: rolled back */
    return rc;
}

/* One order in a transaction of its own, on the caller's connection. */
static int place_alone(const struct order_draft *d, const char *db_now, int64_t *id,
                       int64_t *amount)
{
    struct db_conn *c;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    rc = steps->order_place(c, d, db_now, id, amount);
    /* The one-trip text names its refusals itself; the naive steps' are
     * named by the key that refused them. */
    return steps->order_place == place_in_one_trip ? rc : map_refusal(c, rc);
}

int store_order_create(const struct order_draft *d, struct order *out)
{
    struct db_conn *c;
    char db_now[32], api_now[TIME_LEN + 1];
    int64_t id = 0, amount = 0;
    int rc = STORE_MERGE_ALONE;
    memset(out, 0, sizeof *out);
    store_now(db_now, api_now);
    /* Only the whole set of defences merges: the demo's naive steps keep
     * their one-at-a-time races, which are what they show; an order the
     * order-key filter missed (Redis out of reach, rare) writes its miss
     * row by itself. */
    bool alone = steps->order_place != place_in_one_trip || d->filter_missed;
    if (!alone && store_merge_on())
        rc = store_merge_place(d, db_now, &id, &amount);
    if (rc == STORE_MERGE_ALONE)
        rc = place_alone(d, db_now, &id, &amount);
    if (rc == TD_ERETRY && txretry_noted() == TXRETRY_LOCK_WAIT) {
        /* The order waited the whole bound for a row another transaction
         * holds (db_lock_wait_s), and its statement was rolled back:
         * nothing of it is kept. Answered 503 with Retry-After now, not
         * run again: another attempt would wait the bound again while the
         * client waits. */
        log_warn("order %s: session %lld's row stayed locked by another transaction for the "
                 "lock wait; answering unavailable",
                 d->order_no, (long long)d->session_id);
        return TD_EUNAVAIL;
    }
    if (rc != TD_OK)
        return rc;
    if (FAULT_POINT("order.commit_lost")) {
        /* Committed, but the client of this call is told the link failed,
         * as when the server's OK never arrives. */
        if (db_conn_get(&c) == TD_OK)
            db_lose_link(c);
        return TD_EUNAVAIL;
    }

    out->id = id;
    snprintf(out->order_no, sizeof out->order_no, "%s", d->order_no);
    out->user_id = d->user_id;
    out->session_id = d->session_id;
    snprintf(out->request_id, sizeof out->request_id, "%s", d->request_id);
    out->quantity = d->quantity;
    out->amount_cents = amount;
    out->status = ORDER_PENDING_PAYMENT;
    out->version = 1;
    memcpy(out->created_at, api_now, sizeof out->created_at);
    memcpy(out->updated_at, api_now, sizeof out->updated_at);
    return TD_OK;
}
