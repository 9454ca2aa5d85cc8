/* test_db_pool.c - a loop's request connections lent to its fibers: the
 * split over the loops, lending up to the size, the queue first come first
 * served, an item given back going straight to the longest waiter, and
 * the wait bounded by its timeout. Real loop and fibers; the items are
 * plain tokens (no MariaDB). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "db_pool.h"
#include "fiber.h"
#include "loop.h"

#include <stdbool.h>
#include <stdlib.h>

static void test_share(void **state)
{
    (void)state;
    static const struct {
        int total, loops, index, want;
    } cases[] = {
        {8, 2, 0, 4}, {8, 2, 1, 4}, {7, 2, 0, 4}, {7, 2, 1, 3}, {8, 3, 0, 3},
        {8, 3, 1, 3}, {8, 3, 2, 2}, {1, 2, 1, 1}, {0, 1, 0, 1}, {5, 0, 0, 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = db_pool_share(cases[i].total, cases[i].loops, cases[i].index);
        if (got != cases[i].want)
            fail_msg("case %zu: %d of %d over %d loops: %d, want %d", i, cases[i].index,
                     cases[i].total, cases[i].loops, got, cases[i].want);
    }
}

/* The fibers of a test, by number: what each borrowed and in what order
 * the borrowers were served. */
#define FIBERS 4
static struct db_pool pool;
static int items[FIBERS]; /* the tokens: &items[i] */
static void *got[FIBERS];
static bool made[FIBERS];
static int served[FIBERS], nserved;
static int live;

static void done_one(void)
{
    if (--live == 0)
        loop_stop(loop_self());
}

static void wake(void *f)
{
    fiber_ready(f);
}

/* Lets the other fibers run until a timer of ms fires. */
static void nap(int ms)
{
    struct loop_timer t = {0};
    loop_timer_start(loop_self(), &t, ms, wake, fiber_self());
    while (t.heap_at != 0)
        fiber_park();
}

/* Borrows (making its item when told to), keeps it for hold_ms, gives it
 * back. */
struct borrower {
    int id;
    int hold_ms;
    int timeout_ms;
};

static void borrow_and_hold(void *arg)
{
    struct borrower *b = arg;
    void *it = db_pool_borrow(&pool, b->timeout_ms, &made[b->id]);
    if (made[b->id])
        it = &items[b->id];
    got[b->id] = it;
    if (it != NULL) {
        served[nserved++] = b->id;
        nap(b->hold_ms);
        db_pool_give_back(&pool, it);
    }
    done_one();
}

static int destroyed;

static void count_destroyed(void *item)
{
    (void)item;
    destroyed++;
}

static void reset(void)
{
    for (int i = 0; i < FIBERS; i++) {
        got[i] = NULL;
        made[i] = false;
        served[i] = -1;
    }
    nserved = 0;
}

static void run_loop(struct loop *l)
{
    loop_run(l);
    assert_int_equal(live, 0);
}

/* Two items for four fibers: the first two make theirs, the next two wait
 * and are served in the order they came, each with an item given back. */
static void test_lends_then_queues_first_come_first_served(void **state)
{
    (void)state;
    struct loop *l = loop_new(0, 1);
    assert_non_null(l);
    reset();
    db_pool_init(&pool, l, 2);
    struct borrower b[FIBERS] = {{0, 20, 5000}, {1, 40, 5000}, {2, 1, 5000}, {3, 1, 5000}};
    live = FIBERS;
    for (int i = 0; i < FIBERS; i++)
        assert_non_null(fiber_spawn(l, borrow_and_hold, &b[i]));
    run_loop(l);
    assert_true(made[0]);
    assert_true(made[1]);
    assert_false(made[2]);
    assert_false(made[3]);
    /* Fiber 2 came first and got fiber 0's item (given back first); fiber
     * 3 the next one given back. */
    assert_ptr_equal(got[2], &items[0]);
    assert_non_null(got[3]);
    assert_int_equal(nserved, 4);
    assert_int_equal(served[2], 2);
    assert_int_equal(served[3], 3);
    assert_int_equal(pool.lent, 0);
    assert_int_equal(pool.nidle, 2);
    assert_int_equal(db_pool_waiting(&pool), 0);
    destroyed = 0;
    db_pool_cleanup(&pool, count_destroyed);
    assert_int_equal(destroyed, 2);
    loop_free(l);
    fiber_pool_drain();
}

/* One item, held longer than the second fiber waits: the waiter gives up
 * at its timeout with nothing (and nothing to make), leaves the queue, and
 * the item given back later stays idle, lent again before any is made. */
static void test_wait_ends_at_its_timeout(void **state)
{
    (void)state;
    struct loop *l = loop_new(0, 1);
    assert_non_null(l);
    reset();
    db_pool_init(&pool, l, 1);
    struct borrower b[2] = {{0, 200, 5000}, {1, 1, 20}};
    live = 2;
    assert_non_null(fiber_spawn(l, borrow_and_hold, &b[0]));
    assert_non_null(fiber_spawn(l, borrow_and_hold, &b[1]));
    run_loop(l);
    assert_true(made[0]);
    assert_null(got[1]);
    assert_false(made[1]);
    assert_int_equal(nserved, 1);
    assert_int_equal(db_pool_waiting(&pool), 0);
    assert_int_equal(pool.lent, 0);
    assert_int_equal(pool.nidle, 1);
    /* The idle item is the next one lent. */
    reset();
    struct borrower again = {2, 1, 5000};
    live = 1;
    assert_non_null(fiber_spawn(l, borrow_and_hold, &again));
    run_loop(l);
    assert_false(made[2]);
    assert_ptr_equal(got[2], &items[0]);
    destroyed = 0;
    db_pool_cleanup(&pool, count_destroyed);
    assert_int_equal(destroyed, 1);
    loop_free(l);
    fiber_pool_drain();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_share),
        cmocka_unit_test(test_lends_then_queues_first_come_first_served),
        cmocka_unit_test(test_wait_ends_at_its_timeout),
    };
    return cmocka_run_group_tests_name("db_pool", tests, NULL, NULL);
}
