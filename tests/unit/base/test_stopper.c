/* test_stopper.c - a background thread's sleep: it lasts its time unless
 * the thread is asked to stop, and then it ends at once. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "stopper.h"

#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_sleeps_its_time(void **state)
{
    (void)state;
    struct stopper s;
    stopper_init(&s);
    double t0 = now_ms();
    assert_false(stopper_sleep(&s, 30));
    assert_true(now_ms() - t0 >= 29);
    assert_false(stopper_stopped(&s));
    stopper_cleanup(&s);
}

static struct stopper shared;

static void *sleeper(void *arg)
{
    bool *stopped = arg;
    *stopped = stopper_sleep(&shared, 60000);
    return NULL;
}

static void test_stop_wakes_the_sleeper(void **state)
{
    (void)state;
    pthread_t t;
    bool stopped = false;
    stopper_init(&shared);
    pthread_create(&t, NULL, sleeper, &stopped);
    stopper_stop(&shared);
    pthread_join(t, NULL); /* long before the minute */
    assert_true(stopped);
    /* A stopped stopper does not sleep again. */
    assert_true(stopper_sleep(&shared, 60000));
    stopper_cleanup(&shared);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sleeps_its_time),
        cmocka_unit_test(test_stop_wakes_the_sleeper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
