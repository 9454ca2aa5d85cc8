/* test_txretry.c - running a transaction again after deadlocks: how many
 * times, what is returned, what is counted, and that the waits are short. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "err.h"
#include "fiber.h"
#include "loop.h"
#include "metrics.h"
#include "txretry.h"
#include "util.h"

/* A transaction that answers answers[i] on its i-th run, the last one
 * repeating. */
struct script {
    int answers[8];
    int n;
    int runs;
};

static int scripted(void *ctx)
{
    struct script *s = ctx;
    int i = s->runs++;
    return s->answers[i < s->n ? i : s->n - 1];
}

static void test_table(void **state)
{
    (void)state;
    static const struct {
        int retries;
        struct script s;
        int want_rc;
        int want_runs;
    } cases[] = {
        {5, {{TD_OK}, 1, 0}, TD_OK, 1},
        {5, {{TD_ERETRY, TD_OK}, 2, 0}, TD_OK, 2},
        {5, {{TD_ERETRY, TD_ERETRY, TD_ERETRY, TD_OK}, 4, 0}, TD_OK, 4},
        /* 1 + retries runs at most, then the deadlock is the answer. */
        {0, {{TD_ERETRY}, 1, 0}, TD_ERETRY, 1},
        {1, {{TD_ERETRY}, 1, 0}, TD_ERETRY, 2},
        {3, {{TD_ERETRY}, 1, 0}, TD_ERETRY, 4},
        {3, {{TD_ERETRY, TD_ERETRY, TD_ERETRY, TD_OK}, 4, 0}, TD_OK, 4},
        /* Other errors stop at once and are passed through. */
        {5, {{TD_EUNAVAIL}, 1, 0}, TD_EUNAVAIL, 1},
        {5, {{TD_ECONFLICT}, 1, 0}, TD_ECONFLICT, 1},
        {5, {{TD_EDUP}, 1, 0}, TD_EDUP, 1},
        {5, {{TD_ERETRY, TD_EINTERNAL}, 2, 0}, TD_EINTERNAL, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct script s = cases[i].s;
        int64_t before = metrics_tx_retries();
        int rc = txretry_run(cases[i].retries, scripted, &s);
        if (rc != cases[i].want_rc || s.runs != cases[i].want_runs)
            fail_msg("case %zu: rc %d after %d runs, want %d after %d", i, rc, s.runs,
                     cases[i].want_rc, cases[i].want_runs);
        /* Every run after the first is one retry counted. */
        assert_int_equal(metrics_tx_retries() - before, s.runs - 1);
    }
}

static void test_waits_are_bounded(void **state)
{
    (void)state;
    /* Ten retries wait at most 2 + 4 + ... + 128 (capped) ms: well under
     * two seconds, and never nothing at all (so colliders drift apart). */
    struct script s = {{TD_ERETRY}, 1, 0};
    int64_t t0 = mono_ms();
    assert_int_equal(txretry_run(10, scripted, &s), TD_ERETRY);
    int64_t took = mono_ms() - t0;
    assert_int_equal(s.runs, 11);
    assert_true(took >= 10);
    assert_true(took < 2000);
}

/* Each retry is counted under the cause its failed attempt noted; an
 * attempt that notes none counts as "other", and a cause never leaks into
 * the next attempt. */
struct noting {
    enum txretry_cause causes[4];
    int n;
    int runs;
};

static int noting_attempt(void *ctx)
{
    struct noting *s = ctx;
    int i = s->runs++;
    if (i >= s->n)
        return TD_OK;
    if (s->causes[i] != TXRETRY_OTHER)
        txretry_note(s->causes[i]);
    return TD_ERETRY;
}

static void test_retries_counted_by_cause(void **state)
{
    (void)state;
    struct noting s = {
        {TXRETRY_CERTIFICATION, TXRETRY_DEADLOCK, TXRETRY_OTHER, TXRETRY_LOCK_WAIT}, 4, 0};
    int64_t cert = metrics_get(M_TX_RETRIES_CERTIFICATION);
    int64_t dead = metrics_get(M_TX_RETRIES_DEADLOCK);
    int64_t wait = metrics_get(M_TX_RETRIES_LOCK_WAIT);
    int64_t other = metrics_get(M_TX_RETRIES_OTHER);
    int64_t all = metrics_tx_retries();
    assert_int_equal(txretry_run(5, noting_attempt, &s), TD_OK);
    assert_int_equal(s.runs, 5);
    assert_int_equal(metrics_get(M_TX_RETRIES_CERTIFICATION) - cert, 1);
    assert_int_equal(metrics_get(M_TX_RETRIES_DEADLOCK) - dead, 1);
    assert_int_equal(metrics_get(M_TX_RETRIES_LOCK_WAIT) - wait, 1);
    assert_int_equal(metrics_get(M_TX_RETRIES_OTHER) - other, 1);
    assert_int_equal(metrics_tx_retries() - all, 4);
}

/* Two requests' fibers on one loop thread: each notes its cause and then
 * waits (as a ROLLBACK does on a fiber) before it answers TD_ERETRY, so
 * the other runs in between. Each retry is still counted under its own
 * fiber's cause: a thread-local would have counted the later note twice. */
struct on_fiber {
    enum txretry_cause cause;
    int runs;
};

static void wake(void *f)
{
    fiber_ready(f);
}

static void yield_once(void)
{
    /* A loop timer of 0 ms: the other fiber runs before this one again. */
    struct loop_timer t = {0};
    loop_timer_start(loop_self(), &t, 0, wake, fiber_self());
    while (t.heap_at != 0)
        fiber_park();
}

static int note_wait_retry(void *ctx)
{
    struct on_fiber *f = ctx;
    if (f->runs++ > 0)
        return TD_OK;
    txretry_note(f->cause);
    yield_once();
    return TD_ERETRY;
}

static int fibers_left;

static void retrying_fiber(void *ctx)
{
    assert_int_equal(txretry_run(3, note_wait_retry, ctx), TD_OK);
    if (--fibers_left == 0)
        loop_stop(loop_self());
}

static void test_cause_is_per_fiber(void **state)
{
    (void)state;
    struct loop *l = loop_new(0, 1);
    assert_non_null(l);
    struct on_fiber a = {TXRETRY_DEADLOCK, 0}, b = {TXRETRY_LOCK_WAIT, 0};
    int64_t dead = metrics_get(M_TX_RETRIES_DEADLOCK);
    int64_t wait = metrics_get(M_TX_RETRIES_LOCK_WAIT);
    fibers_left = 2;
    assert_non_null(fiber_spawn(l, retrying_fiber, &a));
    assert_non_null(fiber_spawn(l, retrying_fiber, &b));
    loop_run(l);
    assert_int_equal(fibers_left, 0);
    assert_int_equal(a.runs, 2);
    assert_int_equal(b.runs, 2);
    assert_int_equal(metrics_get(M_TX_RETRIES_DEADLOCK) - dead, 1);
    assert_int_equal(metrics_get(M_TX_RETRIES_LOCK_WAIT) - wait, 1);
    loop_free(l);
    fiber_pool_drain();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_waits_are_bounded),
        cmocka_unit_test(test_retries_counted_by_cause),
        cmocka_unit_test(test_cause_is_per_fiber),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
