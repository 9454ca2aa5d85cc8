/* test_keys.c - the key look-up (keys.c) against fakes of its read-only
 * ports: which record answers in which order (the order before the batch,
 * an answer before a marker, Redis before the database), a dead copy's
 * marker, the age of a copy in flight, and when "not found" cannot be
 * said. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fake_api.h"
#include "fake_keys.h"
#include "fakes.h"

#include "app.h"
#include "config.h"
#include "err.h"
#include "keys.h"

#include <stdio.h>
#include <string.h>

#define FP       "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ORDER_NO "26120112345678901234"
#define ME       "fedcba9876543210"

static struct config cfg;
static struct app app;

static int setup(void **state)
{
    (void)state;
    config_defaults(&cfg);
    app = (struct app){.cfg = &cfg};
    snprintf(app.instance, sizeof app.instance, "%s", ME);
    fakes_reset();
    fake_api_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    config_cleanup(&cfg);
    return 0;
}

/* The API's reader, as simple as the fake records: an order number after
 * "no=". */
static bool order_no_of(const char *body, size_t len, char out[ORDER_NO_LEN + 1])
{
    if (len != 3 + ORDER_NO_LEN || strncmp(body, "no=", 3) != 0)
        return false;
    snprintf(out, ORDER_NO_LEN + 1, "%.*s", ORDER_NO_LEN, body + 3);
    return true;
}

static void order_done_in_redis(void)
{
    snprintf(fake_keys.records[0], sizeof fake_keys.records[0], "D|" FP "|201|no=" ORDER_NO);
}

static void marker(int i, const char *instance, int64_t ttl_ms)
{
    snprintf(fake_keys.records[i], sizeof fake_keys.records[i], "P|" FP "|%s0123456789abcdef",
             instance);
    fake_keys.ttl_ms[i] = ttl_ms;
}

static void test_order_from_redis_alone(void **state)
{
    (void)state;
    struct key_status ks;
    order_done_in_redis();
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_COMPLETED);
    assert_int_equal(ks.kind, KEY_KIND_ORDER);
    assert_int_equal(ks.status, 201);
    assert_string_equal(ks.order_no, ORDER_NO);
    /* Both names read at once; the database not asked. */
    assert_string_equal(fake_calls, "idem_peek");
    assert_string_equal(fake_keys.names[0], "k");
    assert_string_equal(fake_keys.names[1], "batch/k");
}

static void test_unreadable_answer_goes_to_the_database(void **state)
{
    (void)state;
    struct key_status ks;
    /* A record whose bytes name no order, and the demo's remembered
     * failure (no success): the database decides. */
    snprintf(fake_keys.records[0], sizeof fake_keys.records[0], "D|" FP "|201|{}");
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_ENOTFOUND);
    assert_string_equal(fake_calls, "idem_peek order_peek idem_find");
    fakes_reset();
    snprintf(fake_keys.records[0], sizeof fake_keys.records[0], "D|" FP "|409|no=" ORDER_NO);
    fake_keys.order_rc = TD_OK;
    snprintf(fake_keys.order.order_no, sizeof fake_keys.order.order_no, "%s", ORDER_NO);
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_COMPLETED);
    assert_string_equal(fake_keys.request_id, "k");
}

static void test_answer_before_marker(void **state)
{
    (void)state;
    struct key_status ks;
    /* Redis forgot the order; a retry's marker stands; the database has
     * the order: COMPLETED. */
    marker(0, ME, cfg.inflight_ttl_ms - 40);
    fake_keys.order_rc = TD_OK;
    snprintf(fake_keys.order.order_no, sizeof fake_keys.order.order_no, "%s", ORDER_NO);
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_COMPLETED);
    assert_string_equal(ks.order_no, ORDER_NO);
    /* Without it: in progress for as long as the marker has lived. */
    fakes_reset();
    marker(0, ME, cfg.inflight_ttl_ms - 40);
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_IN_PROGRESS);
    assert_int_equal(ks.kind, KEY_KIND_ORDER);
    assert_int_equal(ks.age_ms, 40);
    /* The batch is not asked: the order's name answers first. */
    assert_string_equal(fake_calls, "idem_peek order_peek");
}

static void test_dead_and_living_copies(void **state)
{
    (void)state;
    struct key_status ks;
    /* Another process's marker: alive while it beats. */
    marker(0, "0000000000000000", cfg.inflight_ttl_ms);
    fake_cache.alive_rc = TD_OK;
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_IN_PROGRESS);
    assert_int_equal(ks.age_ms, 0);
    fakes_reset();
    marker(0, "0000000000000000", cfg.inflight_ttl_ms);
    fake_cache.alive_rc = TD_ENOTFOUND;
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_ENOTFOUND);
    /* Redis cannot tell: the marker stands, as it does for a retry. */
    fakes_reset();
    marker(0, "0000000000000000", -1);
    fake_cache.alive_rc = TD_EUNAVAIL;
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_IN_PROGRESS);
    assert_int_equal(ks.age_ms, 0);
}

static void test_batches(void **state)
{
    (void)state;
    struct key_status ks;
    /* Redis keeps only a final answer. */
    snprintf(fake_keys.records[1], sizeof fake_keys.records[1], "D|" FP "|200|{}");
    assert_int_equal(keys_lookup(&app, 42, "c", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_COMPLETED);
    assert_int_equal(ks.kind, KEY_KIND_BATCH);
    assert_int_equal(ks.status, 200);
    assert_true(ks.complete);
    assert_string_equal(fake_calls, "idem_peek order_peek");
    /* The database every run's, complete or not, over a retry's marker. */
    fakes_reset();
    fake_api_reset();
    marker(1, ME, cfg.inflight_ttl_ms);
    fake_api.idem_find_rc = TD_OK;
    fake_api.idem_status = 200;
    fake_api.idem_complete = false;
    assert_int_equal(keys_lookup(&app, 42, "c", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_COMPLETED);
    assert_int_equal(ks.kind, KEY_KIND_BATCH);
    assert_false(ks.complete);
    assert_string_equal(fake_api.idem_scope, "batch");
    assert_string_equal(fake_api.idem_key, "c");
    /* A batch's marker alone: in progress. */
    fakes_reset();
    fake_api_reset();
    marker(1, ME, cfg.inflight_ttl_ms - 7);
    assert_int_equal(keys_lookup(&app, 42, "c", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_IN_PROGRESS);
    assert_int_equal(ks.kind, KEY_KIND_BATCH);
    assert_int_equal(ks.age_ms, 7);
    /* A name that is both: the order. */
    fakes_reset();
    fake_api_reset();
    order_done_in_redis();
    snprintf(fake_keys.records[1], sizeof fake_keys.records[1], "D|" FP "|200|{}");
    assert_int_equal(keys_lookup(&app, 42, "c", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.kind, KEY_KIND_ORDER);
}

static void test_what_cannot_be_told(void **state)
{
    (void)state;
    struct key_status ks;
    /* Without Redis: the database's order still answers... */
    fake_keys.peek_rc = TD_EUNAVAIL;
    fake_keys.order_rc = TD_OK;
    snprintf(fake_keys.order.order_no, sizeof fake_keys.order.order_no, "%s", ORDER_NO);
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_OK);
    assert_int_equal(ks.state, KEY_COMPLETED);
    /* ... but nothing found is not "not found": a copy may be running. */
    fakes_reset();
    fake_api_reset();
    fake_keys.peek_rc = TD_EUNAVAIL;
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_EUNAVAIL);
    /* Without the database, unless Redis had the order's answer. */
    fakes_reset();
    fake_keys.order_rc = TD_EUNAVAIL;
    marker(0, ME, 10);
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_EUNAVAIL);
    fakes_reset();
    fake_api_reset();
    fake_api.idem_find_rc = TD_EUNAVAIL;
    assert_int_equal(keys_lookup(&app, 42, "k", order_no_of, &ks), TD_EUNAVAIL);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_order_from_redis_alone),
        T(test_unreadable_answer_goes_to_the_database),
        T(test_answer_before_marker),
        T(test_dead_and_living_copies),
        T(test_batches),
        T(test_what_cannot_be_told),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
