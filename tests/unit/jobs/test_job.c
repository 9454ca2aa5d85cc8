/* test_job.c - the background jobs' runner: every instance of every job
 * of a table gets its own zeroed state and index, a tick_before_start
 * job has ticked once before jobs_start returns, a job with no instances
 * does not run, and a stop ends each thread with its finish and then the
 * release hooks of exactly the connections the job says it uses. The
 * threads are waited for by their progress (ticks counted), never by a
 * guessed time. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "job.h"
#include "loop.h"
#include "util.h"

#include <stdatomic.h>
#include <stdbool.h>

/* What the test jobs record, per instance. */
#define MAX_INSTANCES 4

static _Atomic int ticks[MAX_INSTANCES], finishes[MAX_INSTANCES], opens;
static _Atomic int store_releases, cache_releases, off_ticks;
static _Atomic bool state_was_zero = true, state_kept_ticks = true;

struct counter_state {
    int64_t own; /* ticks of this instance, in its own state */
};

static void reset(void)
{
    for (int i = 0; i < MAX_INSTANCES; i++) {
        atomic_store(&ticks[i], 0);
        atomic_store(&finishes[i], 0);
    }
    atomic_store(&opens, 0);
    atomic_store(&store_releases, 0);
    atomic_store(&cache_releases, 0);
    atomic_store(&off_ticks, 0);
    atomic_store(&state_was_zero, true);
    atomic_store(&state_kept_ticks, true);
}

static void counter_open(struct job_ctx *c)
{
    const struct counter_state *st = c->state;
    if (st->own != 0)
        atomic_store(&state_was_zero, false);
    atomic_fetch_add(&opens, 1);
}

static int counter_tick(struct job_ctx *c)
{
    struct counter_state *st = c->state;
    st->own++;
    atomic_fetch_add(&ticks[c->index], 1);
    return 1;
}

static void counter_finish(struct job_ctx *c)
{
    const struct counter_state *st = c->state;
    /* Its own state saw every tick the instance counted (checked by the
     * test's thread: cmocka's asserts belong there). */
    if (st->own != atomic_load(&ticks[c->index]))
        atomic_store(&state_kept_ticks, false);
    atomic_fetch_add(&finishes[c->index], 1);
}

static int three(const struct app *app)
{
    (void)app;
    return 3;
}

static int none(const struct app *app)
{
    (void)app;
    return 0;
}

static int off_tick(struct job_ctx *c)
{
    (void)c;
    atomic_fetch_add(&off_ticks, 1);
    return 1;
}

static void store_release(void)
{
    atomic_fetch_add(&store_releases, 1);
}

static void cache_release(void)
{
    atomic_fetch_add(&cache_releases, 1);
}

static const struct job_hooks hooks = {.store_release = store_release,
                                       .cache_release = cache_release};

static const struct job counter_job = {
    .name = "counter",
    .needs = JOB_STORE,
    .state_size = sizeof(struct counter_state),
    .instances = three,
    .open = counter_open,
    .tick = counter_tick,
    .finish = counter_finish,
};

static const struct job off_job = {
    .name = "off", .needs = JOB_CACHE, .instances = none, .tick = off_tick};

/* Until every one of n instances has ticked at least `at_least` times;
 * bounded, so that a runner that never ticks fails instead of hanging. */
static bool wait_ticks(int n, int at_least)
{
    for (int round = 0; round < 100000; round++) {
        int done = 0;
        for (int i = 0; i < n; i++)
            done += atomic_load(&ticks[i]) >= at_least;
        if (done == n)
            return true;
        sleep_ms(1);
    }
    return false;
}

static void test_instances_state_and_stop(void **state)
{
    (void)state;
    reset();
    const struct job *const table[] = {&counter_job, &off_job};
    struct jobs *js = jobs_start(NULL, table, 2, &hooks);
    assert_non_null(js);
    assert_int_equal(atomic_load(&opens), 3);
    assert_true(wait_ticks(3, 3));
    jobs_stop(js);
    for (int i = 0; i < 3; i++)
        assert_int_equal(atomic_load(&finishes[i]), 1);
    assert_int_equal(atomic_load(&ticks[3]), 0); /* no fourth instance */
    assert_true(atomic_load(&state_was_zero));
    assert_true(atomic_load(&state_kept_ticks));
    /* One release per thread that ended, of its own connections only; the
     * job with no instances neither ran nor released anything. */
    assert_int_equal(atomic_load(&store_releases), 3);
    assert_int_equal(atomic_load(&cache_releases), 0);
    assert_int_equal(atomic_load(&off_ticks), 0);
}

static int first_tick_thread; /* the instance's first tick saw no stopper */

static int beat_tick(struct job_ctx *c)
{
    if (atomic_load(&ticks[0]) == 0 && c->stopper == NULL)
        first_tick_thread = 1;
    atomic_fetch_add(&ticks[0], 1);
    return 1;
}

static const struct job beat_job = {
    .name = "beat",
    .needs = JOB_STORE | JOB_CACHE,
    .tick = beat_tick,
    .tick_before_start = true,
};

static void test_tick_before_start(void **state)
{
    (void)state;
    reset();
    first_tick_thread = 0;
    const struct job *const table[] = {&beat_job};
    struct jobs *js = jobs_start(NULL, table, 1, &hooks);
    assert_non_null(js);
    /* Ticked on this thread, before jobs_start returned, and what that
     * tick used of the ports released here. */
    assert_true(atomic_load(&ticks[0]) >= 1);
    assert_int_equal(first_tick_thread, 1);
    assert_int_equal(atomic_load(&store_releases), 1);
    assert_int_equal(atomic_load(&cache_releases), 1);
    assert_true(wait_ticks(1, 3));
    jobs_stop(js);
    assert_int_equal(atomic_load(&store_releases), 2);
    assert_int_equal(atomic_load(&cache_releases), 2);
}

static void test_stop_null_and_empty(void **state)
{
    (void)state;
    jobs_stop(NULL);
    struct jobs *js = jobs_start(NULL, NULL, 0, NULL);
    assert_non_null(js);
    jobs_stop(js);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_instances_state_and_stop),
        cmocka_unit_test(test_tick_before_start),
        cmocka_unit_test(test_stop_null_and_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
