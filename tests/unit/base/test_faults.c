/* The fault points' modes as a test arms them (faults.h). The release
 * flavour compiles no fault point: every point there is false. */
#include "faults.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#ifdef TICKETD_FAULTS

static char release[96];

static void touch(const char *path)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

/* A point on a loop's thread is held until the release file exists, and
 * its one hit is spent then. */
static void test_held_until_released(void **state)
{
    (void)state;
    unlink(release);
    assert_true(faults_held("t.hold"));
    assert_true(faults_held("t.hold")); /* the same hit, still held */
    touch(release);
    assert_false(faults_held("t.hold"));
    unlink(release);
    assert_false(faults_held("t.hold")); /* its one hit was taken */
}

/* Past its MS the point lets go, released or not. */
static void test_held_at_most_its_ms(void **state)
{
    (void)state;
    unlink(release);
    assert_true(faults_held("t.brief"));
    usleep(300 * 1000); /* its MS is 100 */
    assert_false(faults_held("t.brief"));
}

/* faults_held is for hold mode only; a point armed otherwise, or not at
 * all, is never held, and faults_held takes none of its hits. */
static void test_only_hold_mode_holds(void **state)
{
    (void)state;
    assert_false(faults_held("t.fail"));
    assert_false(faults_held("t.unarmed"));
    assert_true(FAULT_POINT("t.fail"));
    assert_true(FAULT_POINT("t.fail"));
    assert_false(FAULT_POINT("t.fail")); /* fail:2 */
    assert_false(FAULT_POINT("t.unarmed"));
}

int main(void)
{
    snprintf(release, sizeof release, "/tmp/ticketd-test-faults-%d.release", (int)getpid());
    setenv("TICKETD_FAULT", "t.hold:hold:600000:1,t.brief:hold:100:1,t.fail:fail:2", 1);
    setenv("TICKETD_FAULT_RELEASE", release, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_held_until_released),
        cmocka_unit_test(test_held_at_most_its_ms),
        cmocka_unit_test(test_only_hold_mode_holds),
    };
    int failed = cmocka_run_group_tests_name("faults", tests, NULL, NULL);
    unlink(release);
    return failed;
}

#else

/* Without TICKETD_FAULTS no point exists, armed or not. */
static void test_no_points(void **state)
{
    (void)state;
    setenv("TICKETD_FAULT", "t.fail:fail", 1);
    assert_false(FAULT_POINT("t.fail"));
    assert_false(faults_held("t.fail"));
    assert_false(faults_armed("t.fail"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_points),
    };
    return cmocka_run_group_tests_name("faults", tests, NULL, NULL);
}

#endif
