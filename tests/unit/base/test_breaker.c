/* test_breaker.c - the shared circuit breaker: who may call when, that one
 * probe goes out after the cooldown, and that its verdict holds for all. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "breaker.h"
#include "log.h"

#include <pthread.h>

static void test_closed_lets_every_call_through(void **state)
{
    (void)state;
    struct breaker b = BREAKER_INIT("test", 500);
    for (int64_t t = 0; t < 5; t++)
        assert_int_equal(breaker_ask(&b, t), BREAKER_CALL);
    breaker_success(&b, BREAKER_CALL);
    assert_false(breaker_is_open(&b, 10));
}

/* Each step: at time t, ask (and report ok/fail when the call went out). */
enum report { NONE, OK, FAIL };

static void test_sequence(void **state)
{
    (void)state;
    static const struct {
        int64_t t;
        enum breaker_pass want;
        enum report report;
    } steps[] = {
        {0, BREAKER_CALL, FAIL},      /* opens until 500 */
        {1, BREAKER_REFUSED, NONE},   /* everyone fails fast */
        {499, BREAKER_REFUSED, NONE}, /* still cooling down */
        {500, BREAKER_PROBE, NONE},   /* one probe goes out ... */
        {501, BREAKER_REFUSED, NONE}, /* ... and only one */
        {502, BREAKER_REFUSED, NONE}, /* while it is out */
        {503, BREAKER_REFUSED, FAIL}, /* (the probe's failure, reported at 503) */
        {600, BREAKER_REFUSED, NONE}, /* reopened until 1003 */
        {1003, BREAKER_PROBE, OK},    /* the next probe succeeds */
        {1004, BREAKER_CALL, NONE},   /* closed for everyone at once */
        {1005, BREAKER_CALL, NONE},
    };
    struct breaker b = BREAKER_INIT("test", 500);
    enum breaker_pass probe = BREAKER_REFUSED;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        enum breaker_pass got = breaker_ask(&b, steps[i].t);
        if (got != steps[i].want)
            fail_msg("step %zu (t=%lld): got %d, want %d", i, (long long)steps[i].t, got,
                     steps[i].want);
        if (got == BREAKER_PROBE)
            probe = got;
        enum breaker_pass reported = got != BREAKER_REFUSED ? got : probe;
        if (steps[i].report == FAIL)
            breaker_failure(&b, reported, steps[i].t);
        else if (steps[i].report == OK)
            breaker_success(&b, reported);
    }
    /* Opened once from closed; the failed probe only kept it open. */
    assert_int_equal((int)b.opened, 1);
}

static void test_failures_while_open_extend_it(void **state)
{
    (void)state;
    struct breaker b = BREAKER_INIT("test", 100);
    assert_true(breaker_failure(&b, BREAKER_CALL, 0));
    /* Calls that were already out when it opened fail late: each pushes
     * the probe back, but only the first counted as opening it. */
    assert_false(breaker_failure(&b, BREAKER_CALL, 80));
    assert_true(breaker_is_open(&b, 150));
    assert_int_equal(breaker_ask(&b, 150), BREAKER_REFUSED);
    assert_int_equal(breaker_ask(&b, 180), BREAKER_PROBE);
    assert_int_equal((int)b.opened, 1);
}

static void test_success_of_ordinary_call_does_not_close(void **state)
{
    (void)state;
    struct breaker b = BREAKER_INIT("test", 100);
    breaker_failure(&b, BREAKER_CALL, 0);
    /* A call that went out before the breaker opened and then succeeded
     * says nothing about now: only the probe decides. */
    breaker_success(&b, BREAKER_CALL);
    assert_true(breaker_is_open(&b, 50));
}

/* Many threads asking at once after the cooldown: exactly one probe. */
static struct breaker shared = BREAKER_INIT("test", 10);
static int probes;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *asker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        if (breaker_ask(&shared, 20) == BREAKER_PROBE) {
            pthread_mutex_lock(&mu);
            probes++;
            pthread_mutex_unlock(&mu);
        }
    }
    return NULL;
}

static void test_one_probe_among_threads(void **state)
{
    (void)state;
    pthread_t t[8];
    breaker_failure(&shared, BREAKER_CALL, 0);
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, asker, NULL);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(probes, 1);
}

int main(void)
{
    log_set_level(LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_lets_every_call_through),
        cmocka_unit_test(test_sequence),
        cmocka_unit_test(test_failures_while_open_extend_it),
        cmocka_unit_test(test_success_of_ordinary_call_does_not_close),
        cmocka_unit_test(test_one_probe_among_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
