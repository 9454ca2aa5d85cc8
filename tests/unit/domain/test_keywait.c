/* test_keywait.c - Prefer: wait's park (keywait.c) on a real loop and
 * fiber, against the fake ports: a wait that ends leaves nothing behind
 * that could wake its fiber again. A watchdog timer of seconds fails a test
 * instead of hanging it; nothing depends on the clock otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"

#include "app.h"
#include "err.h"
#include "fiber.h"
#include "keywait.h"
#include "loop.h"

#include <string.h>

#define USER        42
#define KEY         "key-1"
#define WATCHDOG_MS 10000

static struct app app;

struct park_case {
    struct loop *l;
    struct loop_task release_task;
    bool released;    /* set by the test's own wake-up, the only one expected */
    bool woken_early; /* the fiber ran again before it */
    bool waited;      /* keywait_for's answer */
    bool watchdog_fired;
};

static struct park_case pc;

/* The moment between the waiter's "not told yet" and its park: the key's
 * end is announced (a wake-up is posted to the loop) and the fiber has
 * been readied while it runs, so its park returns at once. */
static void announce_and_ready(void)
{
    keywait_notify(USER, KEY, NULL);
    fiber_ready(fiber_self());
}

static struct fiber *waiting_fiber;

/* The one wake-up the fiber's next wait expects. */
static void release(void *arg)
{
    struct park_case *c = arg;
    c->released = true;
    fiber_ready(waiting_fiber);
}

/* Posted after the announcement's wake-up, so it runs after it, and
 * queues the release behind whatever that wake-up readied. */
static void release_posted(void *arg)
{
    struct park_case *c = arg;
    loop_soon(c->l, &c->release_task, release, c);
}

static void waiter(void *arg)
{
    struct park_case *c = arg;
    struct keywait kw;
    keywait_start(&kw, &app, 5);
    fake_store_idle_hook = announce_and_ready;
    c->waited = keywait_for(&kw, USER, KEY, "marker");
    fake_store_idle_hook = NULL;
    /* The fiber now waits for something else, once, as a fiber waiting
     * for a Redis reply does: only that should wake it. */
    waiting_fiber = fiber_self();
    loop_post(c->l, release_posted, c);
    fiber_park();
    c->woken_early = !c->released;
    loop_stop(c->l);
}

static void on_watchdog(void *arg)
{
    struct park_case *c = arg;
    c->watchdog_fired = true;
    loop_stop(c->l);
}

/* keywait.c: a fiber whose park returned at once (it had been readied
 * while it ran) must not stay marked as parked in the wait, or the
 * announcement's wake-up, arriving later, readies it in whatever it waits
 * for next (a Redis reply, whose answer would then be skipped). */
static void test_a_wait_that_ended_never_wakes_its_fiber_again(void **state)
{
    (void)state;
    memset(&pc, 0, sizeof pc);
    pc.l = loop_new(0, 1);
    assert_non_null(pc.l);
    struct loop_timer dog = {0};
    loop_timer_start(pc.l, &dog, WATCHDOG_MS, on_watchdog, &pc);
    assert_non_null(fiber_spawn(pc.l, waiter, &pc));
    loop_run(pc.l);
    loop_timer_stop(pc.l, &dog);
    assert_false(pc.watchdog_fired);
    assert_true(pc.waited);
    assert_false(pc.woken_early);
    assert_true(pc.released);
    loop_free(pc.l);
    fiber_pool_drain();
}

static int setup(void **state)
{
    (void)state;
    fake_store_reset();
    fake_cache_reset();
    memset(&app, 0, sizeof app);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_a_wait_that_ended_never_wakes_its_fiber_again, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
