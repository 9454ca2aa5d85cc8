/* test_prefer.c - wait=N in an RFC 7240 Prefer header: the preferences
 * around it, quoted values, names in any case, and everything that makes a
 * wait malformed (ignored: 0). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "prefer.h"

#include <string.h>

static int wait_of(const char *header, int max_s)
{
    return prefer_wait_s(header, header != NULL ? strlen(header) : 0, max_s);
}

static void test_wait_table(void **state)
{
    (void)state;
    static const struct {
        const char *header;
        int want; /* with TICKETD_MAX_WAIT_S = 10 */
    } cases[] = {
        {"wait=5", 5},
        {"wait=10", 10},
        {"WAIT=5", 5},
        {"Wait=7", 7},
        {"wait=\"5\"", 5},                    /* a quoted value */
        {"  wait = 5  ", 5},                  /* BWS around "=", OWS around the element */
        {"wait=05", 5},                       /* 1*DIGIT: leading zeros are digits */
        {"wait=11", 10},                      /* cut to the most */
        {"wait=99999999999999999999999", 10}, /* no overflow: cut */
        {"respond-async, wait=3", 3},
        {"return=minimal; wait=4", 4}, /* a separator a client may write */
        {"wait=2; foo=bar", 2},        /* a parameter after it */
        {"handling=lenient, wait=\"6\", return=minimal", 6},
        {"foo=\"a,b;wait=9\", wait=3", 3}, /* separators inside a quoted value */
        {"foo=\"a\\\"b\", wait=3", 3},     /* a quoted pair */
        {"wait=4, wait=8", 4},             /* the first one counts */
        {"wait=x, wait=8", 0},             /* the first one counts, even malformed */
        /* Malformed or none: ignored. */
        {"wait=0", 0},
        {"wait=00", 0},
        {"wait=", 0},
        {"wait", 0},
        {"wait=-1", 0},
        {"wait=+1", 0},
        {"wait=1.5", 0},
        {"wait=1x", 0},
        {"wait=\"1", 0},
        {"wait=\"\"", 0},
        {"wait=\" 1\"", 0},
        {"wait 5", 0},
        {"wait=5 6", 0},
        {"waiting=5", 0},
        {"nowait=5", 0},
        {"wai=5", 0},
        {"respond-async", 0},
        {"", 0},
        {",;,", 0},
        {"=5", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = wait_of(cases[i].header, 10);
        if (got != cases[i].want)
            fail_msg("Prefer: %s -> %d, want %d", cases[i].header, got, cases[i].want);
    }
}

static void test_null_and_bounds(void **state)
{
    (void)state;
    assert_int_equal(wait_of(NULL, 10), 0);
    assert_int_equal(wait_of("wait=5", 1), 1);
    assert_int_equal(wait_of("wait=5", 0), 0); /* nothing may be honoured */
    /* Only len bytes are read: a wait past them is not seen. */
    assert_int_equal(prefer_wait_s("foo, wait=5", 4, 10), 0);
    assert_int_equal(prefer_wait_s("wait=5", 6, 10), 5);
    assert_int_equal(prefer_wait_s("wait=59", 6, 10), 5);
    /* A NUL inside the value is a byte like another: malformed. */
    assert_int_equal(prefer_wait_s("wait=5\0"
                                   "0",
                                   8, 100),
                     0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_table),
        cmocka_unit_test(test_null_and_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
