/* test_fiber.c - fibers on a loop: one starts in the turn after it is
 * spawned, parks until readied and then goes on where it stopped, waits on
 * a pipe without holding up the loop (fiber_wait_io, fiber_fd.h), keeps its
 * own slots, and gives its
 * stack back when it ends, and overflows its stack into its guard, not past
 * it. A watchdog timer of seconds fails a test
 * instead of hanging it; nothing depends on the clock otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fiber.h"
#include "fiber_fd.h"
#include "loop.h"
#include "loop_watchdog.h"

#include <fenv.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The fibers' stacks go back to the pool's: each test starts with none. */
static int teardown(void **state)
{
    loop_test_teardown(state);
    fiber_pool_drain();
    return 0;
}

/* A log of steps, shared by the fibers of a test. */
static char steps[64];
static int nsteps;

static void step(char c)
{
    steps[nsteps++] = c;
    steps[nsteps] = '\0';
}

static void reset_steps(void)
{
    nsteps = 0;
    steps[0] = '\0';
}

static void stop_when_alone(void)
{
    if (fiber_live() == 1)
        loop_stop(loop_self());
}

static struct fiber *seen_self;

static void simple(void *arg)
{
    (void)arg;
    seen_self = fiber_self();
    step('f');
    stop_when_alone();
}

static void test_spawn_runs_in_the_turn_not_in_the_call(void **state)
{
    struct loop *l = *state;
    reset_steps();
    assert_null(fiber_self());
    struct fiber *f = fiber_spawn(l, simple, NULL);
    assert_non_null(f);
    step('s'); /* the fiber has not run yet */
    assert_int_equal(fiber_live(), 1);
    loop_test_run(l);
    assert_string_equal(steps, "sf");
    assert_ptr_equal(seen_self, f);
    assert_null(fiber_self());
    assert_int_equal(fiber_live(), 0);
}

static struct fiber *sleeper;

static void parks(void *arg)
{
    (void)arg;
    step('a');
    fiber_park();
    step('c');
    stop_when_alone();
}

static void wakes(void *arg)
{
    (void)arg;
    step('b');
    fiber_ready(sleeper);
    fiber_ready(sleeper); /* twice is once */
    stop_when_alone();
}

static void test_park_until_ready(void **state)
{
    struct loop *l = *state;
    reset_steps();
    sleeper = fiber_spawn(l, parks, NULL);
    assert_non_null(fiber_spawn(l, wakes, NULL));
    loop_test_run(l);
    assert_string_equal(steps, "abc");
}

static void readies_itself(void *arg)
{
    (void)arg;
    fiber_ready(fiber_self());
    fiber_park(); /* returns at once: the wake-up came first */
    step('x');
    stop_when_alone();
}

static void test_a_ready_before_the_park_is_kept(void **state)
{
    struct loop *l = *state;
    reset_steps();
    assert_non_null(fiber_spawn(l, readies_itself, NULL));
    loop_test_run(l);
    assert_string_equal(steps, "x");
}

static int pipe_fd[2];
static unsigned waited;

static void waits_for_pipe(void *arg)
{
    (void)arg;
    step('w');
    waited = fiber_wait_io(pipe_fd[0], LOOP_READ, -1);
    char c = 0;
    assert_int_equal(read(pipe_fd[0], &c, 1), 1);
    step(c);
    stop_when_alone();
}

static void writes_pipe(void *arg)
{
    (void)arg;
    /* The waiting fiber parked: this one runs on the same thread. */
    step('p');
    assert_int_equal(write(pipe_fd[1], "r", 1), 1);
    stop_when_alone();
}

static void test_wait_io_parks_until_the_fd_is_ready(void **state)
{
    struct loop *l = *state;
    reset_steps();
    assert_int_equal(pipe(pipe_fd), 0);
    assert_non_null(fiber_spawn(l, waits_for_pipe, NULL));
    assert_non_null(fiber_spawn(l, writes_pipe, NULL));
    loop_test_run(l);
    assert_string_equal(steps, "wpr");
    assert_int_equal(waited, LOOP_READ);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
}

static void times_out(void *arg)
{
    (void)arg;
    waited = fiber_wait_io(pipe_fd[0], LOOP_READ, 5);
    step('t');
    stop_when_alone();
}

static void test_wait_io_times_out(void **state)
{
    struct loop *l = *state;
    reset_steps();
    assert_int_equal(pipe(pipe_fd), 0);
    waited = 99;
    assert_non_null(fiber_spawn(l, times_out, NULL));
    loop_test_run(l);
    assert_string_equal(steps, "t");
    assert_int_equal(waited, 0);
    close(pipe_fd[0]);
    close(pipe_fd[1]);
}

static struct fiber_key test_key = FIBER_KEY_INIT;
static struct fiber *slot_fibers[2];
static int slot_values[2];
static bool slots_kept[2];

static void keeps_its_slot(void *arg)
{
    int i = (int)(intptr_t)arg;
    void **slot = fiber_slot(&test_key);
    assert_null(*slot); /* a new fiber's slots are empty */
    *slot = &slot_values[i];
    /* Park so the other fiber writes its own slot meanwhile. */
    fiber_ready(slot_fibers[1 - i] != NULL ? slot_fibers[1 - i] : fiber_self());
    fiber_park();
    slots_kept[i] = *fiber_slot(&test_key) == &slot_values[i];
    *slot = NULL;
    if (slot_fibers[1 - i] != NULL)
        fiber_ready(slot_fibers[1 - i]);
    slot_fibers[i] = NULL;
    stop_when_alone();
}

static void test_slots_are_per_fiber_and_per_thread_off_one(void **state)
{
    struct loop *l = *state;
    int thread_value = 7;
    *fiber_slot(&test_key) = &thread_value;
    slot_fibers[0] = fiber_spawn(l, keeps_its_slot, (void *)(intptr_t)0);
    slot_fibers[1] = fiber_spawn(l, keeps_its_slot, (void *)(intptr_t)1);
    loop_test_run(l);
    assert_true(slots_kept[0]);
    assert_true(slots_kept[1]);
    assert_ptr_equal(*fiber_slot(&test_key), &thread_value);
    *fiber_slot(&test_key) = NULL;
}

/* Two keys are two variables: each key takes a slot of its own at its
 * first use, whoever asks first, and writing one leaves the other as it
 * was, on a fiber and off one. */
static struct fiber_key other_key = FIBER_KEY_INIT;
static bool keys_apart;

static void writes_two_keys(void *arg)
{
    int a = 1, b = 2;
    (void)arg;
    *fiber_slot(&other_key) = &b;
    *fiber_slot(&test_key) = &a;
    keys_apart = *fiber_slot(&other_key) == &b && *fiber_slot(&test_key) == &a;
    *fiber_slot(&other_key) = NULL;
    *fiber_slot(&test_key) = NULL;
    stop_when_alone();
}

static void test_keys_are_separate_variables(void **state)
{
    struct loop *l = *state;
    int t = 3, o = 4;
    assert_non_null(fiber_spawn(l, writes_two_keys, NULL));
    loop_test_run(l);
    assert_true(keys_apart);
    assert_ptr_not_equal(fiber_slot(&test_key), fiber_slot(&other_key));
    *fiber_slot(&test_key) = &t;
    *fiber_slot(&other_key) = &o;
    assert_ptr_equal(*fiber_slot(&test_key), &t);
    assert_ptr_equal(*fiber_slot(&other_key), &o);
    *fiber_slot(&test_key) = NULL;
    *fiber_slot(&other_key) = NULL;
}

static int ended;

/* Uses a good part of its stack, so a stack too small faults here. */
static void deep(void *arg)
{
    (void)arg;
    volatile char buf[64 * 1024];
    memset((char *)buf, 1, sizeof buf);
    ended += buf[sizeof buf - 1];
    stop_when_alone();
}

static void test_stacks_come_back_when_fibers_end(void **state)
{
    struct loop *l = *state;
    ended = 0;
    /* More fibers than the pool keeps, in rounds: each round's stacks are
     * reused by the next. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 100; i++)
            assert_non_null(fiber_spawn(l, deep, NULL));
        loop_test_run(l);
        assert_int_equal(fiber_live(), 0);
    }
    assert_int_equal(ended, 300);
    assert_true(fiber_stack_size() >= 128 * 1024);
}

/* ---- what a switch keeps --------------------------------------------- */

/* Two fibers that switch back and forth, each with values held across
 * every park (the compiler keeps them in the callee-saved registers the
 * switch must carry) and a rounding mode of its own (the SSE and x87
 * control words, which the ABI also makes the callee's to keep). */
struct keeper {
    struct fiber *self;
    struct keeper *other;
    int mode; /* FE_* */
    uint64_t sum;
    bool ok;      /* the fiber's mode was its own after every park */
    bool rounded; /* 1/3 rounded the fiber's way at the end */
};

static uint64_t __attribute__((noinline)) mix(uint64_t v)
{
    return v * 6364136223846793005ull + 1442695040888963407ull;
}

static void keeps(void *arg)
{
    struct keeper *k = arg;
    k->self = fiber_self();
    fesetround(k->mode);
    uint64_t a = mix(k->mode), b = mix(a), c = mix(b), d = mix(c), e = mix(d), g = mix(e);
    volatile double third = 1.0;
    double down = 0;
    bool ok = true;
    for (int i = 0; i < 50; i++) {
        if (k->other->self != NULL)
            fiber_ready(k->other->self);
        fiber_park();
        ok = ok && fegetround() == k->mode;
        a = mix(a) ^ b;
        b = mix(b) ^ c;
        c = mix(c) ^ d;
        d = mix(d) ^ e;
        e = mix(e) ^ g;
        g = mix(g) ^ a;
        down = third / 3.0;
    }
    k->sum = a ^ b ^ c ^ d ^ e ^ g;
    k->ok = ok;
    /* 1/3 rounds one way or the other by the fiber's own mode. */
    k->rounded = k->mode == FE_UPWARD ? down * 3.0 > 1.0 : down * 3.0 <= 1.0;
    if (k->other->self != NULL)
        fiber_ready(k->other->self);
    fesetround(FE_TONEAREST);
    stop_when_alone();
}

/* The same sums as keeps computes, without fibers. */
static uint64_t expected_sum(int mode)
{
    uint64_t a = mix(mode), b = mix(a), c = mix(b), d = mix(c), e = mix(d), g = mix(e);
    for (int i = 0; i < 50; i++) {
        a = mix(a) ^ b;
        b = mix(b) ^ c;
        c = mix(c) ^ d;
        d = mix(d) ^ e;
        e = mix(e) ^ g;
        g = mix(g) ^ a;
    }
    return a ^ b ^ c ^ d ^ e ^ g;
}

/* Whether arithmetic here rounds as fesetround asks: it does on the CPU,
 * and not under valgrind, whose SSE arithmetic always rounds to nearest
 * (a documented limit of its emulation), while the mode itself is kept. */
static bool rounding_honoured(void)
{
    volatile double one = 1.0;
    fesetround(FE_UPWARD);
    volatile double up = one / 3.0;
    fesetround(FE_DOWNWARD);
    volatile double down = one / 3.0;
    fesetround(FE_TONEAREST);
    return up != down;
}

static void test_a_switch_keeps_registers_and_rounding(void **state)
{
    struct loop *l = *state;
    static struct keeper up, down;
    memset(&up, 0, sizeof up);
    memset(&down, 0, sizeof down);
    up = (struct keeper){.mode = FE_UPWARD, .other = &down};
    down = (struct keeper){.mode = FE_DOWNWARD, .other = &up};
    assert_non_null(fiber_spawn(l, keeps, &up));
    assert_non_null(fiber_spawn(l, keeps, &down));
    loop_test_run(l);
    assert_int_equal(fegetround(), FE_TONEAREST); /* the loop's own */
    assert_true(up.ok);
    assert_true(down.ok);
    if (rounding_honoured()) {
        assert_true(up.rounded);
        assert_true(down.rounded);
    } else {
        print_message("arithmetic ignores the rounding mode here (valgrind): only the modes "
                      "kept are checked\n");
    }
    assert_true(up.sum == expected_sum(FE_UPWARD));
    assert_true(down.sum == expected_sum(FE_DOWNWARD));
}

/* ---- an overflow faults in the guard ---------------------------------- */

/* One frame larger than the guard: code that wrote only its lowest byte
 * would jump the guard without -fstack-clash-protection (Makefile), which
 * makes the compiler touch each page of the frame as it grows. */
#define BIG_FRAME (96 * 1024)

static uintptr_t guard_low, stack_low; /* the overflowing fiber's */

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)ctx;
    uintptr_t at = (uintptr_t)si->si_addr;
    _exit(at >= guard_low && at < stack_low ? 0 : 3);
}

static int __attribute__((noinline)) dive(int depth)
{
    volatile char frame[BIG_FRAME];
    frame[0] = (char)depth; /* the lowest byte: past the guard if nothing probed */
    int below = depth < 64 ? dive(depth + 1) : 0;
    return frame[0] + frame[BIG_FRAME - 1] + below;
}

static void overflow(void *arg)
{
    (void)arg;
    char here;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* The fiber's first frame lies in its stack's top page, just under
     * its struct fiber; the top is page-aligned (fiber.c). */
    uintptr_t top = ((uintptr_t)&here + page - 1) / page * page;
    stack_low = top - fiber_stack_size();
    guard_low = stack_low - fiber_guard_size();
    _exit(dive(0) != 0 ? 4 : 5); /* not reached: the stack cannot hold 64 frames */
}

/* In a child, as it dies: a fiber recursing with frames larger than the
 * guard faults at an address inside its guard, the first thing below the
 * stack, never further down in whatever is mapped there. */
static void test_an_overflow_faults_in_the_guard(void **state)
{
    (void)state;
    assert_true(fiber_guard_size() >= 64 * 1024);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static char alt[64 * 1024];
        stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
        struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
        sigemptyset(&sa.sa_mask);
        if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGSEGV, &sa, NULL) != 0)
            _exit(6);
        struct loop *l = loop_new(0, 1);
        if (l == NULL || fiber_spawn(l, overflow, NULL) == NULL)
            _exit(7);
        loop_run(l);
        _exit(8);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("the overflow did not fault in the guard: %s %d (3: it faulted below the "
                 "guard)",
                 WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_spawn_runs_in_the_turn_not_in_the_call,
                                        loop_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_park_until_ready, loop_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_ready_before_the_park_is_kept, loop_test_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wait_io_parks_until_the_fd_is_ready, loop_test_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_wait_io_times_out, loop_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_slots_are_per_fiber_and_per_thread_off_one,
                                        loop_test_setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_are_separate_variables, loop_test_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stacks_come_back_when_fibers_end, loop_test_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_switch_keeps_registers_and_rounding, loop_test_setup,
                                        teardown),
        cmocka_unit_test(test_an_overflow_faults_in_the_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
