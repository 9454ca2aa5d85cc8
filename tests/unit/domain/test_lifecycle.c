/* test_lifecycle.c - an order's cancel, complete and expiry against a fake
 * of their database port: which transition each asks for, that only a
 * move into CANCELLED gives seats back, and how the sweep walks the
 * unpaid orders in batches and leaves alone those it cannot take. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fake_lifecycle.h"

#include "app.h"
#include "config.h"
#include "err.h"
#include "lifecycle.h"
#include "metrics.h"

#include <stdatomic.h>
#include <string.h>

#define ORDER_NO "26120100000000000001"

static struct config cfg;
static struct app app;

static int setup(void **state)
{
    (void)state;
    config_defaults(&cfg);
    cfg.tx_retries = 2;
    cfg.order_ttl_s = 900;
    app = (struct app){.cfg = &cfg};
    fake_lifecycle_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    config_cleanup(&cfg);
    return 0;
}

static void test_cancel(void **state)
{
    (void)state;
    struct order o;
    int64_t cancelled = metrics_get(M_ORDERS_CANCELLED);
    assert_int_equal(lifecycle_cancel(&app, ORDER_NO, 42, &o), TD_OK);
    assert_int_equal(o.status, ORDER_CANCELLED);
    /* The owner's order, by the state machine's cancel, seats given back. */
    assert_string_equal(fake_lifecycle.last.order_no, ORDER_NO);
    assert_int_equal(fake_lifecycle.last.user_id, 42);
    assert_int_equal(fake_lifecycle.last.event, EVENT_CANCEL);
    assert_int_equal(fake_lifecycle.last.done, ORDER_CANCELLED);
    assert_true(fake_lifecycle.last.give_back_stock);
    assert_false(fake_lifecycle.last.skip_locked);
    assert_int_equal(metrics_get(M_ORDERS_CANCELLED) - cancelled, 1);

    /* Cancelled before: answered as it is, not counted again. */
    fake_lifecycle.unchanged = true;
    assert_int_equal(lifecycle_cancel(&app, ORDER_NO, 42, &o), TD_OK);
    assert_int_equal(metrics_get(M_ORDERS_CANCELLED) - cancelled, 1);
}

static void test_complete(void **state)
{
    (void)state;
    struct order o;
    assert_int_equal(lifecycle_complete(&app, ORDER_NO, &o), TD_OK);
    assert_int_equal(fake_lifecycle.last.user_id, 0); /* any user's: the admin's call */
    assert_int_equal(fake_lifecycle.last.event, EVENT_COMPLETE);
    assert_int_equal(fake_lifecycle.last.done, ORDER_COMPLETED);
    /* A completed order keeps its seats. */
    assert_false(fake_lifecycle.last.give_back_stock);
}

static void test_errors(void **state)
{
    (void)state;
    struct order o;
    /* A state that forbids it: the order as found, for the answer. */
    fake_lifecycle.rc[0] = TD_ECONFLICT;
    fake_lifecycle.nrc = 1;
    assert_int_equal(lifecycle_cancel(&app, ORDER_NO, 42, &o), TD_ECONFLICT);
    assert_int_equal(o.status, ORDER_PAID);
    assert_int_equal(fake_lifecycle.changes, 1);
    /* Deadlocks are run again, tx_retries times at most. */
    fake_lifecycle_reset();
    fake_lifecycle.rc[0] = TD_ERETRY;
    fake_lifecycle.rc[1] = TD_OK;
    fake_lifecycle.nrc = 2;
    assert_int_equal(lifecycle_complete(&app, ORDER_NO, &o), TD_OK);
    assert_int_equal(fake_lifecycle.changes, 2);
    fake_lifecycle_reset();
    fake_lifecycle.rc[0] = TD_ERETRY;
    fake_lifecycle.nrc = 1;
    assert_int_equal(lifecycle_complete(&app, ORDER_NO, &o), TD_ERETRY);
    assert_int_equal(fake_lifecycle.changes, 3);
}

static void test_sweep_batches(void **state)
{
    (void)state;
    _Atomic bool stop = false;
    int expired = -1;
    int64_t counted = metrics_get(M_ORDERS_EXPIRED);
    fake_lifecycle.unpaid = 250;
    assert_int_equal(lifecycle_sweep(&app, &stop, &expired), TD_OK);
    assert_int_equal(expired, 250);
    assert_int_equal(fake_lifecycle.scans, 3); /* 100, 100, 50 */
    assert_int_equal(fake_lifecycle.age_s, 900);
    assert_int_equal(metrics_get(M_ORDERS_EXPIRED) - counted, 250);
    /* Each by id, skipping one another transaction holds, by the
     * state machine's expire, seats given back. */
    assert_int_equal(fake_lifecycle.last.order_id, 250);
    assert_string_equal(fake_lifecycle.last.order_no, "");
    assert_true(fake_lifecycle.last.skip_locked);
    assert_int_equal(fake_lifecycle.last.event, EVENT_EXPIRE);
    assert_int_equal(fake_lifecycle.last.done, ORDER_CANCELLED);
    assert_true(fake_lifecycle.last.give_back_stock);
}

static void test_sweep_leaves_what_it_cannot_take(void **state)
{
    (void)state;
    _Atomic bool stop = false;
    int expired = -1;
    /* Held by another transaction, or paid first: not ours, no error. */
    fake_lifecycle.unpaid = 5;
    fake_lifecycle.special_id[0] = 2;
    fake_lifecycle.special_rc[0] = TD_ENOTFOUND;
    fake_lifecycle.special_id[1] = 4;
    fake_lifecycle.special_rc[1] = TD_ECONFLICT;
    fake_lifecycle.nspecial = 2;
    assert_int_equal(lifecycle_sweep(&app, &stop, &expired), TD_OK);
    assert_int_equal(expired, 3);
    assert_int_equal(fake_lifecycle.changes, 5);
}

static void test_sweep_stops(void **state)
{
    (void)state;
    _Atomic bool stop = false;
    int expired = -1;
    /* A database error ends the pass with it. */
    fake_lifecycle.unpaid = 5;
    fake_lifecycle.special_id[0] = 3;
    fake_lifecycle.special_rc[0] = TD_EUNAVAIL;
    fake_lifecycle.nspecial = 1;
    assert_int_equal(lifecycle_sweep(&app, &stop, &expired), TD_EUNAVAIL);
    assert_int_equal(expired, 2);
    fake_lifecycle_reset();
    fake_lifecycle.scan_rc = TD_EUNAVAIL;
    assert_int_equal(lifecycle_sweep(&app, &stop, &expired), TD_EUNAVAIL);
    assert_int_equal(expired, 0);
    /* Asked to stop: no order is touched. */
    fake_lifecycle_reset();
    fake_lifecycle.unpaid = 5;
    atomic_store(&stop, true);
    assert_int_equal(lifecycle_sweep(&app, &stop, &expired), TD_OK);
    assert_int_equal(fake_lifecycle.changes, 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cancel),
        T(test_complete),
        T(test_errors),
        T(test_sweep_batches),
        T(test_sweep_leaves_what_it_cannot_take),
        T(test_sweep_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
