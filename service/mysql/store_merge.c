/* store_merge.c - the queue of due order transactions and the batches it
 * makes (store_merge.h). */
#include "store_merge.h"

#include "err.h"
#include "faults.h"
#include "groupq.h"
#include "log.h"
#include "merge_batch.h"
#include "metrics.h"
#include "txretry.h"
#include "util.h"

#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* An order waiting in the queue, on its thread's stack. o's outcome is
 * written by the thread that runs its batch before the entry is done. */
struct entry {
    struct groupq_entry q; /* first: a batch's entries are cast back */
    struct merge_order o;
    enum txretry_cause cause; /* of a TD_ERETRY, noted on the leader's thread */
};

static atomic_bool merge_on;
static store_merge_alone_fn place_alone; /* set once, before any order */

static void run_batch(struct groupq *q, struct groupq_entry **batch, int k);
static void wait_full(struct groupq *q, const struct groupq_entry *self);
static void queued_gauge(int queued)
{
    metrics_set(M_ORDER_BATCH_QUEUED, queued);
}

static struct groupq due = GROUPQ_INIT(MERGE_LEADERS, 64, run_batch);

void store_merge_init(bool on, int max, store_merge_alone_fn alone)
{
    place_alone = alone;
    atomic_store(&merge_on, on);
    due.max_batch = max < 1 ? 1 : max > MERGE_MAX_LIMIT ? MERGE_MAX_LIMIT : max;
    due.hold = wait_full;
    due.queued_changed = queued_gauge;
}

bool store_merge_on(void)
{
    return atomic_load(&merge_on);
}

/* Test build only (merge.wait_full, fail mode): the leader waits until the
 * batch is full, so that a test's concurrent orders surely share one. It
 * is tied to orders arriving, not to a time; the bound is only a safety
 * net for a test that sent too few. */
static void wait_full(struct groupq *q, const struct groupq_entry *self)
{
    if (q->queued >= q->max_batch || !FAULT_POINT("merge.wait_full"))
        return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    while (q->queued < q->max_batch && !self->taken) {
        if (!groupq_wait_arrival(q, &until)) {
            log_warn("merge.wait_full: %d of %d orders after 30 s; sending", q->queued,
                     q->max_batch);
            return;
        }
    }
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

/* Runs one batch on the leader's connection and gives each order its
 * outcome (groupq.h wakes their threads). */
static void run_batch(struct groupq *q, struct groupq_entry **queued, int k)
{
    (void)q;
    struct entry *batch[MERGE_MAX_LIMIT];
    struct db_conn *c;
    for (int i = 0; i < k; i++)
        batch[i] = (struct entry *)queued[i];
    metrics_inc(M_ORDER_BATCHES);
    metrics_add(M_ORDER_BATCH_ORDERS, k);
    if (k == 1) {
        /* A batch of one is the one-order transaction (store_mysql.c), run
         * here, in the lead: while it is at the server the next orders
         * collect, as they do behind a merged batch. */
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

int store_merge_place(const struct order_draft *d, const char *db_now, int64_t *id, int64_t *amount)
{
    struct entry e = {.o = {.d = d, .db_now = db_now, .rc = TD_EINTERNAL}};
    groupq_join(&due, &e.q);
    if (e.o.rc == TD_ERETRY)
        txretry_note(e.cause); /* for this thread's retry and its metric */
    *id = e.o.id;
    *amount = e.o.amount;
    return e.o.rc;
}
