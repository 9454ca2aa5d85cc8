/* test_redis.c - what an error reply means, the one table both the
 * blocking path (redis.c) and the loop's connection (redis_async.c) read:
 * NOSCRIPT sends redis_eval to EVAL, READONLY drops the connection (a
 * demoted primary), what Redis says while it cannot serve is
 * "unavailable", and anything else is a bug of ours. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "err.h"
#include "redis_conn.h"

#include <stdbool.h>

static void test_error_replies(void **state)
{
    (void)state;
    static const struct {
        const char *msg;
        int rc;
        bool readonly;
    } cases[] = {
        {"NOSCRIPT No matching script. Please use EVAL.", TD_ENOTFOUND, false},
        {"READONLY You can't write against a read only replica.", TD_EUNAVAIL, true},
        {"LOADING Redis is loading the dataset in memory", TD_EUNAVAIL, false},
        {"BUSY Redis is busy running a script.", TD_EUNAVAIL, false},
        {"MASTERDOWN Link with MASTER is down", TD_EUNAVAIL, false},
        {"TRYAGAIN Multiple keys request during rehashing of slot", TD_EUNAVAIL, false},
        {"CLUSTERDOWN The cluster is down", TD_EUNAVAIL, false},
        {"ERR wrong number of arguments for 'set' command", TD_EINTERNAL, false},
        {"WRONGTYPE Operation against a key holding the wrong kind of value", TD_EINTERNAL, false},
        {"noscript in lower case is not NOSCRIPT", TD_EINTERNAL, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool readonly = !cases[i].readonly;
        int rc = redis_error_rc("TEST", cases[i].msg, &readonly);
        if (rc != cases[i].rc || readonly != cases[i].readonly)
            fail_msg("'%s': rc %d readonly %d, want %d %d", cases[i].msg, rc, readonly, cases[i].rc,
                     cases[i].readonly);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_replies),
    };
    return cmocka_run_group_tests_name("redis", tests, NULL, NULL);
}
