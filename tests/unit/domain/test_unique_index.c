/* test_unique_index.c - the database's word (unique_index.c): a Redis
 * refusal checked against the order the key has, the token the database
 * records, sold out and unknown sessions, the unique index's replay and
 * its look-up failing, deadlocks retried with a new order number each
 * time, store errors, the naive check-then-insert, and order numbers.
 * Rows of order_rows.h, and what is no row. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"
#include "order_rows.h"

#include "defences.h"
#include "err.h"
#include "metrics.h"
#include "unique_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void then_looked_up_the_key(const struct order_result *res)
{
    struct idem_record rec;
    assert_int_equal(fake_store.find.user_id, USER);
    assert_string_equal(fake_store.find.request_id, KEY);
    /* Remembered like a success, so the next retry stops at layer 1. */
    const char *record = fake_cache.complete.record;
    assert_true(idem_parse(record, strlen(record), &rec));
    assert_true(rec.done);
    assert_memory_equal(rec.body, res->body, res->body_len);
}

/* A token the database refused: the key's own order was looked for
 * before the refusal was given, and nothing was remembered. */
static void then_key_asked_first(const struct order_result *res)
{
    (void)res;
    assert_int_equal(fake_store.find_calls, 1);
    assert_int_equal(fake_store.find.user_id, USER);
    assert_string_equal(fake_store.find.request_id, KEY);
    assert_int_equal(fake_cache.complete.calls, 0);
}

static void then_new_number_each_try(const struct order_result *res)
{
    (void)res;
    /* Each attempt is a new transaction with a new order number. */
    assert_string_not_equal(fake_store.order_nos[0], fake_store.order_nos[1]);
}

static const struct order_case rows[] = {
    /* A Redis refusal is checked against the database: Redis may have
     * forgotten, or the instance that placed the order died before storing
     * its answer. */
    {"marker refused, database has the order: replayed", .under_key = KEY_MARKER,
     .found = FOUND_SAME, .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201,
     .body = FOUND_BODY, .calls = ALIVE_THEN_DB, .cached = CACHED, .claims = CLAIMS_KEPT,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    {"lock refused, database has the order: replayed", .lock_rc = TD_ECONFLICT, .found = FOUND_SAME,
     .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_find_request", .cached = CACHED, .claims = CLAIMS_KEPT,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    /* Marker and lock are ours here: the answer is stored under them. */
    {"token refused, database has the order: replayed", .token_rc = TD_ENOTFOUND,
     .found = FOUND_SAME, .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201,
     .body = FOUND_BODY, .calls = "order_begin order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_KEPT, .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    {"marker refused, database has another payload", .under_key = KEY_MARKER,
     .found = FOUND_OTHER_QTY, .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = ALIVE_THEN_DB, .cached = NOT_CACHED},
    {"lock refused, database has another payload", .lock_rc = TD_ECONFLICT,
     .found = FOUND_OTHER_QTY, .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = "order_begin order_find_request", .cached = NOT_CACHED},
    {"token refused, database has another payload", .token_rc = TD_ENOTFOUND,
     .found = FOUND_OTHER_QTY, .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = TOKEN_THEN_DB, .cached = NOT_CACHED},
    /* Without the database the refusal cannot be checked: "try again" is
     * true, "your token is invalid" might not be. */
    {"marker refused, database down", .under_key = KEY_MARKER, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = ALIVE_THEN_DB},
    {"lock refused, database down", .lock_rc = TD_ECONFLICT, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_find_request"},
    {"token refused, database down", .token_rc = TD_ENOTFOUND, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE, .calls = TOKEN_THEN_DB},
    /* ... and the database remembers that another key's order spent it:
     * refused, rolled back, and checked against the key's own order. */
    {"signed token Redis forgot, spent by another key's order", .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .outcome = ORDER_TOKEN_INVALID,
     .layer = "unique-index", .calls = "order_begin order_create order_find_request order_release",
     .cached = NOT_CACHED, .claims = CLAIMS_RELEASED, .recorded = RECORDED_SENT,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1), COUNTS(M_ORDERS_CREATED, 0)},
     .then = then_key_asked_first},
    /* The key's own order (a copy that met its own token): replayed. */
    {"token spent, and this key has its order: replayed", .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .found = FOUND_SAME,
     .outcome = ORDER_REPLAYED, .layer = "unique-index", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_create order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_COMPLETED, .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    {"token spent, the key's order cannot be looked up", .token = TOK_SIGNED,
     .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    /* Redis down (degrade) checks no token; the database still refuses a
     * spent one. */
    {"degrade: a token spent in the database", .begin_rc = TD_EUNAVAIL, .create_rc = TD_ESPENT,
     .outcome = ORDER_TOKEN_INVALID, .layer = "unique-index", .recorded = RECORDED_SENT,
     .calls = "order_begin order_create order_find_request order_release"},
    /* layers 5 and 6: the database. The token was spent before the stock
     * ran out, as the contract says. */
    {"sold out", .create_rc = TD_ECONFLICT, .outcome = ORDER_SOLD_OUT,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_STOCK_CONFLICTS, 1), COUNTS(M_ORDERS_CREATED, 0)}},
    {"unknown session", .create_rc = TD_ENOTFOUND, .outcome = ORDER_SESSION_NOT_FOUND,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},
    /* The first order, not a new one. */
    {"unique index replays", .create_rc = TD_EDUP, .found = FOUND_SAME, .outcome = ORDER_REPLAYED,
     .layer = "unique-index", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_create order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_COMPLETED,
     .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1), COUNTS(M_ORDERS_CREATED, 0)},
     .then = then_looked_up_the_key},
    {"unique index: another quantity", .create_rc = TD_EDUP, .found = FOUND_OTHER_QTY,
     .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_DUP_KEY_REUSED, 1)}},
    {"unique index: another session", .create_rc = TD_EDUP, .found = FOUND_OTHER_SESSION,
     .outcome = ORDER_KEY_REUSED, .layer = "unique-index",
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    {"unique index, lookup unavailable", .create_rc = TD_EDUP, .find_rc = TD_EUNAVAIL,
     .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    /* A row the index saw and the look-up cannot (rolled back since, or
     * not yet readable on this node): nothing was kept, try again. */
    {"unique index, lookup finds nothing", .create_rc = TD_EDUP, .find_rc = TD_ENOTFOUND,
     .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    /* The locking look-up chosen as a deadlock's victim (or aborted by a
     * Galera writeset) wrote nothing: asked again. */
    {"unique index, lookup meets a conflict, then replays", .create_rc = TD_EDUP,
     .found = FOUND_SAME, .find_conflicts = 2, .outcome = ORDER_REPLAYED, .layer = "unique-index",
     .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_create order_find_request order_find_request "
              "order_find_request order_complete",
     .cached = CACHED, .claims = CLAIMS_COMPLETED, .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 1)}},
    {"unique index, lookup meets a conflict each time", .create_rc = TD_EDUP, .find_conflicts = 3,
     .found = FOUND_SAME, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_find_request order_find_request "
              "order_find_request order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_DUP_UNIQUE_INDEX, 0)}},
    {"unique index, lookup fails", .create_rc = TD_EDUP, .find_rc = TD_EINTERNAL,
     .outcome = ORDER_FAILED, .calls = "order_begin order_create order_find_request order_release",
     .claims = CLAIMS_RELEASED},
    /* The fake store notes no cause of its retries: they count as "other". */
    {"deadlock retried, then created", .deadlocks = 1, .outcome = ORDER_CREATED,
     .calls = "order_begin order_create order_create order_complete",
     .counts = {COUNTS(M_TX_RETRIES_OTHER, 1)}, .then = then_new_number_each_try},
    /* The first try and tx_retries more, then a dependency error. */
    {"deadlock, no retries allowed", .create_rc = TD_ERETRY, .tries = 1,
     .outcome = ORDER_UNAVAILABLE, .calls = "order_begin order_create order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_TX_RETRIES_OTHER, 0)}},
    {"deadlock, one retry", .create_rc = TD_ERETRY, .tries = 2, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_create order_release", .claims = CLAIMS_RELEASED,
     .counts = {COUNTS(M_TX_RETRIES_OTHER, 1)}},
    {"deadlock, two retries", .create_rc = TD_ERETRY, .tries = 3, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_create order_create order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_TX_RETRIES_OTHER, 2)}},
    {"deadlock, three retries", .create_rc = TD_ERETRY, .tries = 4, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_create order_create order_create order_release",
     .claims = CLAIMS_RELEASED, .counts = {COUNTS(M_TX_RETRIES_OTHER, 3)}},
    /* Only deadlocks are retried. */
    {"store unavailable", .create_rc = TD_EUNAVAIL, .outcome = ORDER_UNAVAILABLE,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},
    {"store internal error", .create_rc = TD_EINTERNAL, .outcome = ORDER_FAILED,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},
    {"store refuses the input", .create_rc = TD_EINVAL, .outcome = ORDER_FAILED,
     .calls = "order_begin order_create order_release", .claims = CLAIMS_RELEASED},
    /* The naive transactions are the store adapter's (store_naive.h): the
     * domain asks for the same order. */
    {"unique index off: the copy found is the look-up's", .off = DEFENCE_UNIQUE_INDEX,
     .token = TOK_SIGNED, .token_rc = TD_ENOTFOUND, .create_rc = TD_ESPENT, .found = FOUND_SAME,
     .outcome = ORDER_REPLAYED, .layer = "check-then-insert", .status = 201, .body = FOUND_BODY,
     .calls = "order_begin order_create order_find_request order_complete", .cached = CACHED,
     .claims = CLAIMS_COMPLETED},
    {"unique index off: the token is still recorded", .off = DEFENCE_UNIQUE_INDEX,
     .outcome = ORDER_CREATED, .calls = FULL_PATH, .recorded = RECORDED_SENT},
    {"stock CAS and unique index off: the same order asked for",
     .off = DEFENCE_STOCK_CAS | DEFENCE_UNIQUE_INDEX, .outcome = ORDER_CREATED, .calls = FULL_PATH},
};

static void test_order_numbers(void **state)
{
    (void)state;
    char a[ORDER_NO_LEN + 1], b[ORDER_NO_LEN + 1], day[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    snprintf(day, sizeof day, "%02d%02d%02d", tm.tm_year % 100, tm.tm_mon + 1, tm.tm_mday);
    unique_index_new_number(a);
    unique_index_new_number(b);
    assert_int_equal(strlen(a), ORDER_NO_LEN);
    assert_int_equal(strspn(a, "0123456789"), ORDER_NO_LEN);
    /* The UTC day first, then randomness: two numbers never collide. */
    assert_memory_equal(a, day, 6);
    assert_string_not_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest own[] = {
        cmocka_unit_test_setup_teardown(test_order_numbers, rows_setup, rows_teardown),
    };
    return rows_run("unique_index", own, sizeof own / sizeof own[0], rows,
                    sizeof rows / sizeof rows[0]);
}
