/* test_loop.c - the event loop: file events, timers in due order and
 * stopped ones never run, tasks and turn-end hooks run before the loop
 * sleeps, and posts from another thread. Nothing here waits on the clock
 * beyond timers of a few milliseconds; each test has a watchdog timer of
 * seconds that fails it instead of hanging. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "loop.h"
#include "loop_watchdog.h"
#include "util.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

struct reader {
    struct loop *l;
    struct loop_io io;
    unsigned ready;
    int calls;
    char got;
};

static void on_readable(void *arg, unsigned ready)
{
    struct reader *r = arg;
    r->ready = ready;
    r->calls++;
    assert_int_equal(read(r->io.fd, &r->got, 1), 1);
    loop_io_stop(r->l, &r->io);
    loop_stop(r->l);
}

static void test_reads_a_ready_fd(void **state)
{
    struct loop *l = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    struct reader r = {.l = l};
    loop_io_start(l, &r.io, p[0], LOOP_READ, on_readable, &r);
    assert_int_equal(write(p[1], "x", 1), 1);
    loop_test_run(l);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.ready, LOOP_READ);
    assert_int_equal(r.got, 'x');
    close(p[0]);
    close(p[1]);
}

struct writer {
    struct loop *l;
    struct loop_io io;
    int calls;
};

static void on_writable(void *arg, unsigned ready)
{
    struct writer *w = arg;
    assert_int_equal(ready, LOOP_WRITE);
    w->calls++;
    loop_io_change(w->l, &w->io, 0); /* quiet from now on, though still writable */
}

static void stop_loop(void *arg)
{
    loop_stop(arg);
}

static void test_an_io_that_wants_nothing_is_not_called(void **state)
{
    struct loop *l = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    struct writer w = {.l = l};
    loop_io_start(l, &w.io, p[1], LOOP_WRITE, on_writable, &w);
    struct loop_timer later = {0};
    loop_timer_start(l, &later, 20, stop_loop, l);
    loop_test_run(l);
    assert_int_equal(w.calls, 1);
    loop_io_stop(l, &w.io);
    close(p[0]);
    close(p[1]);
}

/* Two readers ready in one turn; the first stops the second, whose event
 * from the same epoll_wait must then not be delivered. */
struct pair {
    struct loop *l;
    struct loop_io io[2];
    int calls[2];
};

static void on_first(void *arg, unsigned ready)
{
    struct pair *p = arg;
    (void)ready;
    p->calls[0]++;
    loop_io_stop(p->l, &p->io[0]);
    loop_io_stop(p->l, &p->io[1]);
}

static void on_second(void *arg, unsigned ready)
{
    struct pair *p = arg;
    (void)ready;
    p->calls[1]++;
    loop_io_stop(p->l, &p->io[0]);
    loop_io_stop(p->l, &p->io[1]);
}

static void test_an_io_stopped_in_a_turn_gets_no_event_of_it(void **state)
{
    struct loop *l = *state;
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "x", 1), 1);
    struct pair p = {.l = l};
    loop_io_start(l, &p.io[0], a[0], LOOP_READ, on_first, &p);
    loop_io_start(l, &p.io[1], b[0], LOOP_READ, on_second, &p);
    struct loop_timer later = {0};
    loop_timer_start(l, &later, 20, stop_loop, l);
    loop_test_run(l);
    assert_int_equal(p.calls[0] + p.calls[1], 1);
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

struct order {
    struct loop *l;
    int seen[8];
    int n;
    int stop_after;
};

struct tick {
    struct order *o;
    int id;
    struct loop_timer t;
};

static void on_tick(void *arg)
{
    struct tick *k = arg;
    k->o->seen[k->o->n++] = k->id;
    if (k->o->n == k->o->stop_after)
        loop_stop(k->o->l);
}

static void test_timers_run_in_due_order(void **state)
{
    struct loop *l = *state;
    struct order o = {.l = l, .stop_after = 3};
    struct tick k[3] = {{&o, 30, {0}}, {&o, 10, {0}}, {&o, 20, {0}}};
    for (int i = 0; i < 3; i++)
        loop_timer_start(l, &k[i].t, k[i].id, on_tick, &k[i]);
    loop_test_run(l);
    assert_int_equal(o.n, 3);
    assert_int_equal(o.seen[0], 10);
    assert_int_equal(o.seen[1], 20);
    assert_int_equal(o.seen[2], 30);
}

static struct tick *victim;

static void stop_victim(void *arg)
{
    struct loop *l = arg;
    loop_timer_stop(l, &victim->t);
}

static void test_a_stopped_timer_never_runs(void **state)
{
    struct loop *l = *state;
    struct order o = {.l = l, .stop_after = 1};
    struct tick dropped = {&o, 1, {0}}, restarted = {&o, 2, {0}}, last = {&o, 3, {0}};
    struct loop_timer killer = {0};
    loop_timer_start(l, &dropped.t, 5, on_tick, &dropped);
    loop_timer_stop(l, &dropped.t);
    loop_timer_stop(l, &dropped.t); /* stopping twice is harmless */
    /* Stopped by a timer due earlier (or in the same turn). */
    victim = &restarted;
    loop_timer_start(l, &killer, 0, stop_victim, l);
    loop_timer_start(l, &restarted.t, 1, on_tick, &restarted);
    loop_timer_start(l, &last.t, 30, on_tick, &last);
    loop_test_run(l);
    assert_int_equal(o.n, 1);
    assert_int_equal(o.seen[0], 3);
}

/* A turn-end hook runs once however often it is armed in a turn, after
 * the turn's events and tasks; what it makes due runs before the loop
 * sleeps (no timer or event is left to wake it here). */
struct turn {
    struct loop *l;
    struct loop_io io[2];
    struct loop_task hook, task, after_hook;
    char log[16];
    int n;
};

static void note(struct turn *t, char c)
{
    t->log[t->n++] = c;
}

static void on_task(void *arg)
{
    note(arg, 't');
}

static void on_after_hook(void *arg)
{
    struct turn *t = arg;
    note(t, 'a');
    loop_stop(t->l);
}

static void on_hook(void *arg)
{
    struct turn *t = arg;
    note(t, 'h');
    loop_soon(t->l, &t->after_hook, on_after_hook, t);
}

static void on_turn_io(void *arg, unsigned ready)
{
    struct turn *t = arg;
    (void)ready;
    note(t, 'e');
    loop_at_turn_end(t->l, &t->hook, on_hook, t);
    loop_soon(t->l, &t->task, on_task, t);
}

static void test_turn_end_hook_runs_once_after_the_turn(void **state)
{
    struct loop *l = *state;
    int a[2], b[2];
    assert_int_equal(pipe(a), 0);
    assert_int_equal(pipe(b), 0);
    assert_int_equal(write(a[1], "x", 1), 1);
    assert_int_equal(write(b[1], "x", 1), 1);
    struct turn t = {.l = l};
    /* Both pipes are readable before the loop runs: one turn serves both. */
    loop_io_start(l, &t.io[0], a[0], LOOP_READ, on_turn_io, &t);
    loop_io_start(l, &t.io[1], b[0], LOOP_READ, on_turn_io, &t);
    loop_test_run(l);
    loop_io_stop(l, &t.io[0]);
    loop_io_stop(l, &t.io[1]);
    /* Both events, the task once (queued twice), the hook once, then what
     * the hook queued. */
    assert_string_equal(t.log, "eetha");
    close(a[0]);
    close(a[1]);
    close(b[0]);
    close(b[1]);
}

struct posted {
    struct loop *l;
    struct loop *ran_on;
    int runs;
};

static void on_posted(void *arg)
{
    struct posted *p = arg;
    p->ran_on = loop_self();
    if (++p->runs == 2)
        loop_stop(p->l);
}

static void *poster(void *arg)
{
    struct posted *p = arg;
    loop_post(p->l, on_posted, p);
    loop_post(p->l, on_posted, p);
    return NULL;
}

static void test_post_runs_on_the_loop_thread(void **state)
{
    struct loop *l = *state;
    struct posted p = {.l = l};
    pthread_t th;
    assert_null(loop_self());
    assert_int_equal(pthread_create(&th, NULL, poster, &p), 0);
    loop_test_run(l);
    pthread_join(th, NULL);
    assert_int_equal(p.runs, 2);
    assert_ptr_equal(p.ran_on, l);
    assert_null(loop_self());
    assert_int_equal(loop_index(l), 0);
    assert_int_equal(loop_count(), 1);
}

#ifdef TICKETD_FAULTS
static void sleep_on_the_loop(void *arg)
{
    (void)arg;
    sleep_ms(1); /* a blocking helper, on the loop thread */
}
#endif

/* The rule of loop.h, checked: in the test builds a blocking helper
 * reached on a loop thread aborts, naming itself; off a loop it runs. In
 * the release build the check costs nothing and so checks nothing. */
static void test_a_blocking_helper_on_a_loop_aborts(void **state)
{
    struct loop *l = *state;
#ifndef TICKETD_FAULTS
    (void)l;
    skip();
#else
    assert_false(loop_on_loop_thread());
    sleep_ms(1); /* off a loop: allowed */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct loop_task t = {0};
        loop_soon(l, &t, sleep_on_the_loop, NULL);
        loop_run(l); /* the task runs in the first turn */
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
#endif
}

/* loop.h: a stop asked before loop_run still lets one turn run, so what
 * was queued for the loop (a fiber's first run, a task, a post) is served
 * before loop_run returns. */
static void ran(void *arg)
{
    (*(int *)arg)++;
}

static void test_a_stop_asked_first_still_runs_one_turn(void **state)
{
    struct loop *l = *state;
    struct loop_task t = {0};
    int runs = 0;
    loop_soon(l, &t, ran, &runs);
    loop_stop(l);
    loop_run(l);
    assert_int_equal(runs, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_a_ready_fd, loop_test_setup, loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_an_io_that_wants_nothing_is_not_called,
                                        loop_test_setup, loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_an_io_stopped_in_a_turn_gets_no_event_of_it,
                                        loop_test_setup, loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_timers_run_in_due_order, loop_test_setup,
                                        loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_a_stopped_timer_never_runs, loop_test_setup,
                                        loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_turn_end_hook_runs_once_after_the_turn,
                                        loop_test_setup, loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_post_runs_on_the_loop_thread, loop_test_setup,
                                        loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_a_blocking_helper_on_a_loop_aborts, loop_test_setup,
                                        loop_test_teardown),
        cmocka_unit_test_setup_teardown(test_a_stop_asked_first_still_runs_one_turn,
                                        loop_test_setup, loop_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
