/* groupq: a lone entry goes at once on its own thread; entries that
 * arrive while a batch is under way go together in the next one, each
 * exactly once, never more than max_batch at a time. The waits are tied
 * to entries arriving (the queue's own condition), not to the clock. */
#include "groupq.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#define THREADS 12

struct item {
    struct groupq_entry q; /* first */
    int runs;              /* batches that carried it */
    pthread_t ran_on;
};

static int sizes[THREADS + 1], nbatches;
static int hold_until; /* the first batch waits until this many are queued */

static void run(struct groupq *q, struct groupq_entry **batch, int k)
{
    pthread_mutex_lock(&q->mu);
    sizes[nbatches++] = k;
    bool first = nbatches == 1;
    if (first) {
        while (q->queued < hold_until)
            pthread_cond_wait(&q->arrived, &q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < k; i++) {
        struct item *it = (struct item *)batch[i];
        it->runs++;
        it->ran_on = pthread_self();
    }
}

static struct groupq queue;

static void reset(int leaders, int max_batch, int hold)
{
    struct groupq fresh = GROUPQ_INIT(leaders, max_batch, run);
    queue = fresh;
    memset(sizes, 0, sizeof sizes);
    nbatches = 0;
    hold_until = hold;
}

static void *joiner(void *arg)
{
    groupq_join(&queue, arg);
    return NULL;
}

static void test_lone_entry_goes_at_once(void **state)
{
    (void)state;
    struct item it = {0};
    reset(2, 8, 0);
    groupq_join(&queue, &it.q);
    assert_int_equal(it.runs, 1);
    assert_true(pthread_equal(it.ran_on, pthread_self()));
    assert_int_equal(nbatches, 1);
    assert_int_equal(sizes[0], 1);
    assert_int_equal(queue.leaders, 0);
    assert_int_equal(queue.queued, 0);
}

/* Starts n joiners; the first batch is held until the others queued. */
static void storm(struct item *items, int n)
{
    pthread_t t[THREADS];
    memset(items, 0, sizeof *items * (size_t)n);
    for (int i = 0; i < n; i++)
        assert_int_equal(pthread_create(&t[i], NULL, joiner, &items[i]), 0);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++)
        assert_int_equal(items[i].runs, 1);
    int total = 0;
    for (int b = 0; b < nbatches; b++)
        total += sizes[b];
    assert_int_equal(total, n);
    assert_int_equal(queue.leaders, 0);
    assert_int_equal(queue.queued, 0);
}

static void test_arrivals_during_a_batch_go_together(void **state)
{
    (void)state;
    struct item items[THREADS];
    reset(1, 64, THREADS - 1);
    storm(items, THREADS);
    /* The first alone (nobody else had come), then everyone who queued
     * behind it in one batch. */
    assert_int_equal(nbatches, 2);
    assert_int_equal(sizes[0], 1);
    assert_int_equal(sizes[1], THREADS - 1);
}

static void test_batches_are_bounded(void **state)
{
    (void)state;
    struct item items[THREADS];
    reset(1, 4, THREADS - 1);
    storm(items, THREADS);
    assert_int_equal(sizes[0], 1);
    for (int b = 0; b < nbatches; b++)
        assert_in_range(sizes[b], 1, 4);
    assert_true(nbatches >= 1 + (THREADS - 1 + 3) / 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lone_entry_goes_at_once),
        cmocka_unit_test(test_arrivals_during_a_batch_go_together),
        cmocka_unit_test(test_batches_are_bounded),
    };
    return cmocka_run_group_tests_name("groupq", tests, NULL, NULL);
}
