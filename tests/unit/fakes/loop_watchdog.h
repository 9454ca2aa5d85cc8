/* loop_watchdog.h - running a real loop in a unit test (test_loop,
 * test_fiber, test_fiber_fd): loop_test_run runs it until it stops, with a
 * watchdog timer of seconds that fails the test instead of hanging it;
 * nothing depends on the clock otherwise. loop_test_setup and
 * loop_test_teardown make and free a loop of one as the test's state.
 * Header-only: each test binary has its own copy. */
#ifndef TICKETD_LOOP_WATCHDOG_H
#define TICKETD_LOOP_WATCHDOG_H

#include "loop.h"

#include <stdbool.h>

#define LOOP_TEST_WATCHDOG_MS 10000

static bool loop_test_watchdog_fired;

static void loop_test_on_watchdog(void *arg)
{
    loop_test_watchdog_fired = true;
    loop_stop(arg);
}

/* Runs l until it stops, failing the test if the watchdog had to. */
static inline void loop_test_run(struct loop *l)
{
    struct loop_timer dog = {0};
    loop_test_watchdog_fired = false;
    loop_timer_start(l, &dog, LOOP_TEST_WATCHDOG_MS, loop_test_on_watchdog, l);
    loop_run(l);
    loop_timer_stop(l, &dog);
    assert_false(loop_test_watchdog_fired);
}

static inline int loop_test_setup(void **state)
{
    *state = loop_new(0, 1);
    return *state == NULL ? -1 : 0;
}

static inline int loop_test_teardown(void **state)
{
    loop_free(*state);
    return 0;
}

#endif
