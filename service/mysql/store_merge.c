/* store_merge.c - the loop's queue of due order transactions and the
 * batches it makes (store_merge.h). */
#include "store_merge.h"

#include "err.h"
#include "faults.h"
#include "fiber.h"
#include "log.h"
#include "loop.h"
#include "merge_batch.h"
#include "metrics.h"
#include "txretry.h"
#include "util.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Loops with a queue of their own, at most (one per core). */
#define MERGE_MAX_LOOPS 256

/* How long the test build's merge.wait_full holds a batch for orders that
 * never come: a safety net for a test that sent too few, not a timing. */
#define WAIT_FULL_NET_MS 30000

/* An order waiting for its batch, on its fiber's stack. o's outcome is
 * written by the batch's fiber before done is set. */
struct entry {
    struct merge_order o;
    enum txretry_cause cause; /* of a TD_ERETRY, noted on the batch's fiber */
    struct fiber *fiber;
    bool done;
    struct entry *next;
};

/* A loop's orders due for the database, touched only on its thread. */
struct due_queue {
    struct loop *loop;
    struct entry *head, *tail;
    int queued;
    int running;           /* batches started and not yet ended */
    struct loop_task turn; /* the turn's end: start batches */
    struct loop_timer net; /* merge.wait_full's safety net */
    bool net_passed;
};

/* One batch: the argument of the fiber that runs it. */
struct batch {
    struct due_queue *q;
    struct entry *e[MERGE_MAX_LIMIT];
    int k;
};

static atomic_bool merge_on;
static atomic_int max_batch = 64;
static atomic_int queued_total;          /* over every loop: the gauge */
static store_merge_alone_fn place_alone; /* set once, before any order */
static struct due_queue queues[MERGE_MAX_LOOPS];

void store_merge_init(bool on, int max, store_merge_alone_fn alone)
{
    place_alone = alone;
    atomic_store(&merge_on, on);
    atomic_store(&max_batch, max < 1 ? 1 : max > MERGE_MAX_LIMIT ? MERGE_MAX_LIMIT : max);
}

bool store_merge_on(void)
{
    return atomic_load(&merge_on);
}

static void queued_changed(int by)
{
    metrics_set(M_ORDER_BATCH_QUEUED, atomic_fetch_add(&queued_total, by) + by);
}

static int row_each(void *ctx, int at, const struct db_batch_row *row)
{
    /* The test build can lose the answer's row (fail), as if it did not
     * read: the batch's COMMIT runs all the same. */
    if (FAULT_POINT("merge.outcome_unread"))
        return TD_OK;
    return merge_plan_row(ctx, at, row);
}

int store_merge_run(struct db_conn *c, struct merge_order **orders, int k)
{
    struct merge_plan p;
    /* The test build's crash between a batch's statements and its COMMIT:
     * the batch is sent without it, so the process can die holding the
     * transaction open at the server. */
    bool open = faults_armed("merge.killed_mid_batch");
    merge_plan_init(&p, orders, k, open);
    int rc = db_batch_each(c, p.sql, &p.arg, 1, open ? DB_BATCH_OPEN : 0u, row_each, &p);
    if (rc == TD_OK && open) {
        (void)FAULT_POINT("merge.killed_mid_batch");
        rc = db_tx_end(c, TD_OK);
    }
    if (rc == TD_OK)
        (void)merge_plan_done(&p);
    merge_plan_free(&p);
    return rc;
}

/* Sets every order of the batch to rc. */
static void all_fail(struct entry *const *batch, int k, int rc)
{
    enum txretry_cause cause = txretry_noted();
    for (int i = 0; i < k; i++) {
        batch[i]->o.rc = rc;
        batch[i]->cause = cause;
    }
}

/* Runs a batch of k > 1 orders as one transaction on c, in one round trip
 * (merge_batch.h). */
static void run_merged(struct db_conn *c, struct entry *const *batch, int k)
{
    struct merge_order *orders[MERGE_MAX_LIMIT];
    for (int i = 0; i < k; i++)
        orders[i] = &batch[i]->o;
    txretry_note(TXRETRY_OTHER);
    int rc = store_merge_run(c, orders, k);
    if (rc == TD_OK) {
        for (int i = 0; i < k; i++)
            batch[i]->cause = TXRETRY_OTHER; /* of an order's own TD_ERETRY */
        return;
    }
    if (rc == TD_EDUP || rc == TD_ECONFLICT || rc == TD_ENOTFOUND) {
        /* A refusal the procedure did not catch for one order (none is
         * expected): nothing was kept, and each order runs alone, for an
         * outcome of its own. */
        log_warn("mysql: a batch of %d orders was refused whole (%s); placing each alone", k,
                 db_dup_key(c));
        all_fail(batch, k, STORE_MERGE_ALONE);
        return;
    }
    /* The transaction as a whole did not commit: a deadlock or Galera
     * conflict (TD_ERETRY, every order back to its caller's retry, the
     * cause counted), or a link lost or an answer not understood
     * (TD_EUNAVAIL: the outcome is unknown, and the client's retry finds
     * its order by the unique key, or makes it). */
    all_fail(batch, k, rc);
}

/* Runs one batch on its fiber's connection and gives each order its
 * outcome. */
static void run_batch(struct entry *const *batch, int k)
{
    struct db_conn *c;
    metrics_inc(M_ORDER_BATCHES);
    metrics_add(M_ORDER_BATCH_ORDERS, k);
    if (k == 1) {
        /* A batch of one is the one-order transaction (store_mysql.c):
         * while it is at the server the next orders collect, as they do
         * behind a merged batch. */
        struct merge_order *o = &batch[0]->o;
        txretry_note(TXRETRY_OTHER);
        o->rc = place_alone(o->d, o->db_now, &o->id, &o->amount);
        batch[0]->cause = txretry_noted();
        return;
    }
    int rc = db_conn(&c);
    if (rc != TD_OK)
        all_fail(batch, k, rc);
    else
        run_merged(c, batch, k);
}

static void start_batches(void *arg);

/* Starts the next batch at the end of this turn. */
static void due_soon(struct due_queue *q)
{
    loop_at_turn_end(q->loop, &q->turn, start_batches, q);
}

/* A batch's own fiber: it borrows one connection of the loop's pool for
 * the batch (and gives it back), readies each order's fiber with its
 * outcome, and lets the next batch start. */
static void batch_main(void *arg)
{
    struct batch *b = arg;
    struct due_queue *q = b->q;
    run_batch(b->e, b->k);
    db_thread_idle();
    for (int i = 0; i < b->k; i++) {
        b->e[i]->done = true;
        fiber_ready(b->e[i]->fiber);
    }
    q->running--;
    if (q->head != NULL)
        due_soon(q);
    free(b);
}

static void net_passed(void *arg)
{
    struct due_queue *q = arg;
    log_warn("merge.wait_full: %d of %d orders after %d s; sending", q->queued,
             atomic_load(&max_batch), WAIT_FULL_NET_MS / 1000);
    q->net_passed = true;
    start_batches(q);
}

/* Test build only (merge.wait_full, fail mode): the batch waits until it
 * is full, so that a test's concurrent orders surely share one. Tied to
 * orders arriving (each arrival looks again), not to a time; the net is
 * for a test that sent too few. */
static bool hold_for_more(struct due_queue *q)
{
    if (q->queued >= atomic_load(&max_batch) || q->net_passed || !FAULT_POINT("merge.wait_full"))
        return false;
    if (q->net.heap_at == 0) /* not started */
        loop_timer_start(q->loop, &q->net, WAIT_FULL_NET_MS, net_passed, q);
    return true;
}

/* The turn's end: the orders that came due in this turn (and those that
 * waited for a batch to end) leave as batches, at most MERGE_LEADERS of
 * them at the server at once, each on a fiber of its own. */
static void start_batches(void *arg)
{
    struct due_queue *q = arg;
    int max = atomic_load(&max_batch);
    while (q->head != NULL && q->running < MERGE_LEADERS && !hold_for_more(q)) {
        struct batch *b = xmalloc(sizeof *b);
        b->q = q;
        b->k = 0;
        while (q->head != NULL && b->k < max) {
            b->e[b->k++] = q->head;
            q->head = q->head->next;
        }
        if (q->head == NULL)
            q->tail = NULL;
        q->queued -= b->k;
        queued_changed(-b->k);
        q->net_passed = false;
        loop_timer_stop(q->loop, &q->net);
        q->running++;
        if (fiber_spawn(q->loop, batch_main, b) == NULL) {
            /* No stack for the batch: its orders are answered
             * "unavailable" (503), and their clients may retry. */
            for (int i = 0; i < b->k; i++) {
                b->e[i]->o.rc = TD_EUNAVAIL;
                b->e[i]->done = true;
                fiber_ready(b->e[i]->fiber);
            }
            q->running--;
            free(b);
        }
    }
}

static struct due_queue *loop_queue(struct loop *l)
{
    struct due_queue *q = loop_slot(l, queues, MERGE_MAX_LOOPS, sizeof *queues);
    if (q != NULL && q->loop == NULL)
        q->loop = l;
    return q;
}

int store_merge_place(const struct order_draft *d, const char *db_now, int64_t *id, int64_t *amount)
{
    struct due_queue *q = fiber_self() != NULL ? loop_queue(loop_self()) : NULL;
    if (q == NULL)
        return STORE_MERGE_ALONE; /* not on a loop's fiber: by itself */
    struct entry e = {.o = {.d = d, .db_now = db_now, .rc = TD_EINTERNAL}, .fiber = fiber_self()};
    /* A connection this request borrowed earlier (a cart's look-up) and
     * holds idle goes back first: the batch borrows one of its own, and a
     * fiber that waits for its batch must not hold what the batch waits
     * for. */
    if (db_holds_idle())
        db_thread_idle();
    if (q->tail != NULL)
        q->tail->next = &e;
    else
        q->head = &e;
    q->tail = &e;
    q->queued++;
    queued_changed(1);
    due_soon(q);
    while (!e.done)
        fiber_park();
    if (e.o.rc == TD_ERETRY)
        txretry_note(e.cause); /* for this fiber's retry and its metric */
    *id = e.o.id;
    *amount = e.o.amount;
    return e.o.rc;
}
