/* test_order_key_filter.c - the order-key filter (order_key_filter.c) in
 * front of a refusal's database look-up: a trusted "no" skips it, doubt
 * asks the database, the defence off asks every time, and which orders
 * and refusals tell the filter of a key. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"
#include "order_rows.h"

#include "bloom.h"
#include "defences.h"
#include "err.h"
#include "metrics.h"
#include "ordertoken.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>

/* --- the order-key filter in front of the refusal's look-up ------------ */

/* A refusal Redis decided (another request holds the session), with the
 * filter answering trusted / maybe as given. */
static void refused_with_filter(bool trusted, bool maybe, unsigned off, struct order_result *res)
{
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    rows_app.bloom = bloom_size(1000, 10000);
    snprintf(rows_app.bloom_shape, sizeof rows_app.bloom_shape, "%llu:%d",
             (unsigned long long)rows_app.bloom.m, rows_app.bloom.k);
    rows_app.defences = DEFENCES_ALL & ~off;
    fake_cache.lock_rc = TD_ECONFLICT;
    fake_cache.bloom_trusted = trusted;
    fake_cache.bloom_maybe = maybe;
    orders_create(&rows_app, &rq, &rows_render, res);
    assert_int_equal(res->outcome, ORDER_DUPLICATE_SUBMISSION);
}

static void test_filter_trusted_no_skips_the_database(void **state)
{
    struct order_result res;
    (void)state;
    refused_with_filter(true, false, 0, &res);
    rows_assert_calls("order_begin");
    assert_int_equal(rows_delta(M_BLOOM_SAVED), 1);
    assert_int_equal(rows_delta(M_REFUSAL_DB_LOOKUPS), 0);
    order_result_cleanup(&res);
}

/* A "maybe" (true or false), an incomplete filter, or one this process
 * could not tell of an order: the database is asked, as without a filter. */
static void test_filter_doubt_asks_the_database(void **state)
{
    struct order_result res;
    (void)state;
    refused_with_filter(true, true, 0, &res);
    rows_assert_calls("order_begin order_find_request");
    assert_int_equal(rows_delta(M_BLOOM_MAYBE), 1);
    order_result_cleanup(&res);
    fakes_reset();
    refused_with_filter(false, false, 0, &res);
    rows_assert_calls("order_begin order_find_request");
    assert_int_equal(rows_delta(M_BLOOM_UNTRUSTED), 1);
    order_result_cleanup(&res);
    fakes_reset();
    atomic_store(&rows_app.bloom_missed, true);
    refused_with_filter(true, false, 0, &res);
    rows_assert_calls("order_begin order_find_request");
    assert_int_equal(rows_delta(M_BLOOM_UNTRUSTED), 2);
    assert_int_equal(rows_delta(M_REFUSAL_DB_LOOKUPS), 3);
    atomic_store(&rows_app.bloom_missed, false);
    order_result_cleanup(&res);
}

/* bloom off asks the database every time. bloom-liveness off is the
 * cache adapter's (cache_naive.h: any filter called trusted): the domain
 * still takes an incomplete filter's "no" as doubt. */
static void test_filter_switched_off(void **state)
{
    struct order_result res;
    (void)state;
    refused_with_filter(false, false, DEFENCE_BLOOM_LIVENESS, &res);
    rows_assert_calls("order_begin order_find_request");
    order_result_cleanup(&res);
    fakes_reset();
    refused_with_filter(true, false, DEFENCE_BLOOM, &res);
    rows_assert_calls("order_begin order_find_request");
    assert_int_equal(fake_cache.bloom_checks, 0);
    order_result_cleanup(&res);
}

/* The step that records a completed order tells the filter of its key. */
static void test_created_order_is_added(void **state)
{
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    (void)state;
    rows_app.bloom = bloom_size(1000, 10000);
    orders_create(&rows_app, &rq, &rows_render, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_int_equal(fake_cache.bloom_adds, 1);
    /* In the key's script, before the transaction: no round trip of its
     * own. */
    assert_int_equal(fake_cache.bloom_adds_in_begin, 1);
    rows_assert_calls("order_begin order_create order_complete");
    order_result_cleanup(&res);
}

/* A token the key's script refuses leaves no bit behind: the filter is
 * there to spare such refusals their look-up, and a key noted by its own
 * refusal would always read "maybe". */
static void test_refused_token_sets_no_bits(void **state)
{
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = TOKEN};
    struct order_result res;
    (void)state;
    rows_app.bloom = bloom_size(1000, 10000);
    fake_cache.token_rc = TD_ECONFLICT;
    orders_create(&rows_app, &rq, &rows_render, &res);
    assert_int_equal(res.outcome, ORDER_TOKEN_INVALID);
    assert_int_equal(fake_cache.bloom_adds, 0);
    order_result_cleanup(&res);
}

/* A genuine token Redis forgot goes on to the database though the script
 * said "unknown" and set no bits: the filter is then told on its own,
 * still before the transaction. */
static void test_forgotten_token_notes_on_its_own(void **state)
{
    char token[ORDERTOKEN_MAX + 1];
    struct order_request rq = {
        .user_id = USER, .key = KEY, .session_id = SESSION, .quantity = QTY, .token = token};
    struct order_result res;
    (void)state;
    ordertoken_new(rows_cfg.jwt_secret, USER, wall_s() + 600, token);
    rows_app.bloom = bloom_size(1000, 10000);
    fake_cache.token_rc = TD_ENOTFOUND;
    orders_create(&rows_app, &rq, &rows_render, &res);
    assert_int_equal(res.outcome, ORDER_CREATED);
    assert_int_equal(fake_cache.bloom_adds, 1);
    assert_int_equal(fake_cache.bloom_adds_in_begin, 0);
    order_result_cleanup(&res);
}

int main(void)
{
    const struct CMUnitTest own[] = {
        cmocka_unit_test_setup_teardown(test_filter_trusted_no_skips_the_database, rows_setup,
                                        rows_teardown),
        cmocka_unit_test_setup_teardown(test_filter_doubt_asks_the_database, rows_setup,
                                        rows_teardown),
        cmocka_unit_test_setup_teardown(test_filter_switched_off, rows_setup, rows_teardown),
        cmocka_unit_test_setup_teardown(test_created_order_is_added, rows_setup, rows_teardown),
        cmocka_unit_test_setup_teardown(test_refused_token_sets_no_bits, rows_setup, rows_teardown),
        cmocka_unit_test_setup_teardown(test_forgotten_token_notes_on_its_own, rows_setup,
                                        rows_teardown),
    };
    return rows_run("order_key_filter", own, sizeof own / sizeof own[0], NULL, 0);
}
