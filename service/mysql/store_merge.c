/* store_merge.c - the queue of due order transactions and the batches it
 * makes (store_merge.h). */
#include "store_merge.h"

#include "err.h"
#include "faults.h"
#include "log.h"
#include "merge_batch.h"
#include "metrics.h"
#include "txretry.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* An order waiting in the queue, on its thread's stack. Its flags are
 * read and written under q.mu; o's outcome is written by the thread that
 * runs its batch before done is set. */
struct entry {
    struct merge_order o;
    sem_t wake;               /* posted when done, or when handed the lead */
    bool taken;               /* a batch took it off the queue */
    bool done;                /* o.rc is final */
    bool lead;                /* its thread leads batches (counted in q.leaders) */
    enum txretry_cause cause; /* of a TD_ERETRY, noted on the leader's thread */
    struct entry *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t arrived; /* for the test build's merge.wait_full */
    struct entry *head, *tail;
    int queued;
    int leaders;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0};

static atomic_bool merge_on;
static int merge_max = 64;
static store_merge_alone_fn place_alone; /* set once, before any order */

void store_merge_init(bool on, int max, store_merge_alone_fn alone)
{
    place_alone = alone;
    atomic_store(&merge_on, on);
    merge_max = max < 1 ? 1 : max > MERGE_MAX_LIMIT ? MERGE_MAX_LIMIT : max;
}

bool store_merge_on(void)
{
    return atomic_load(&merge_on);
}

/* Test build only (merge.wait_full, fail mode): the leader waits until the
 * batch is full, so that a test's concurrent orders surely share one. It
 * is tied to orders arriving, not to a time; the bound is only a safety
 * net for a test that sent too few. */
static void wait_full(const struct entry *self)
{
    if (q.queued >= merge_max || !FAULT_POINT("merge.wait_full"))
        return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    while (q.queued < merge_max && !self->taken) {
        if (pthread_cond_timedwait(&q.arrived, &q.mu, &until) == ETIMEDOUT) {
            log_warn("merge.wait_full: %d of %d orders after 30 s; sending", q.queued, merge_max);
            return;
        }
    }
}

/* Takes the next batch off the queue: the oldest orders, at most
 * merge_max. Called with q.mu held. */
static int take_batch(struct entry **batch)
{
    int k = 0;
    while (q.head != NULL && k < merge_max) {
        batch[k] = q.head;
        batch[k++]->taken = true;
        q.head = q.head->next;
        q.queued--;
    }
    if (q.head == NULL)
        q.tail = NULL;
    metrics_set(M_ORDER_BATCH_QUEUED, q.queued);
    pthread_cond_broadcast(&q.arrived); /* a waiting leader's order may be in this batch */
    return k;
}

static int row_each(void *ctx, int at, const struct db_batch_row *row)
{
    return merge_plan_row(ctx, at, row);
}

/* Sets every order of the batch to rc. */
static void all_fail(struct entry **batch, int k, int rc)
{
    enum txretry_cause cause = txretry_noted();
    for (int i = 0; i < k; i++) {
        batch[i]->o.rc = rc;
        batch[i]->cause = cause;
    }
}

/* Runs a batch of k > 1 orders as one transaction on c, in its two round
 * trips (merge_batch.h). */
static void run_merged(struct db_conn *c, struct entry **batch, int k)
{
    struct merge_order *orders[MERGE_MAX_LIMIT];
    struct merge_plan p;
    for (int i = 0; i < k; i++)
        orders[i] = &batch[i]->o;
    /* The test build's crash between a batch's statements and its COMMIT:
     * the batch is sent without it, so the process can die holding the
     * transaction open at the server. */
    bool open = faults_armed("merge.killed_mid_batch");
    merge_plan_lock(&p, orders, k);
    txretry_note(TXRETRY_OTHER);
    int rc = db_batch_each(c, p.sql, p.args, p.nargs, DB_BATCH_OPEN, row_each, &p);
    if (rc == TD_OK) {
        (void)merge_plan_write(&p, open);
        rc = db_batch_each(c, p.sql, p.args, p.nargs, DB_BATCH_REST | (open ? DB_BATCH_OPEN : 0u),
                           row_each, &p);
    }
    if (rc == TD_OK && open) {
        (void)FAULT_POINT("merge.killed_mid_batch");
        rc = db_tx_end(c, TD_OK);
    }
    merge_plan_free(&p);
    if (rc == TD_OK)
        return;
    if (rc == TD_EDUP || rc == TD_ECONFLICT) {
        /* Refused whole by the server: a key inserted since the batch
         * looked (by another instance), a token another order spent
         * (Redis forgot it), a colliding order number, or the stock's
         * CHECK. Nothing was kept; each order runs alone, for an outcome
         * of its own. */
        log_info("mysql: a batch of %d orders was refused (%s); placing each alone", k,
                 db_dup_key(c));
        all_fail(batch, k, STORE_MERGE_ALONE);
        return;
    }
    all_fail(batch, k, rc);
}

/* Runs one batch on the leader's connection, gives each order its
 * outcome and wakes its thread (the leader's own too: harmless). */
static void run_batch(struct entry **batch, int k)
{
    struct db_conn *c;
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
    } else {
        int rc = db_conn(&c);
        if (rc != TD_OK)
            all_fail(batch, k, rc);
        else
            run_merged(c, batch, k);
    }
    /* Posted under the lock that done is read under: once its thread sees
     * done, nothing touches its entry (on its stack) any more. */
    pthread_mutex_lock(&q.mu);
    for (int i = 0; i < k; i++) {
        batch[i]->done = true;
        sem_post(&batch[i]->wake);
    }
    pthread_mutex_unlock(&q.mu);
}

/* The lead passes to the oldest queued order whose thread does not lead
 * already, or is given up. Called with q.mu held by a leader whose order
 * is done (posted under it, for the same reason as in run_batch). */
static void hand_lead(void)
{
    for (struct entry *e = q.head; e != NULL; e = e->next) {
        if (!e->lead) {
            e->lead = true;
            sem_post(&e->wake);
            return;
        }
    }
    q.leaders--;
}

int store_merge_place(const struct order_draft *d, const char *db_now, int64_t *id, int64_t *amount)
{
    struct entry *batch[MERGE_MAX_LIMIT];
    struct entry e = {.o = {.d = d, .db_now = db_now, .rc = TD_EINTERNAL}};
    sem_init(&e.wake, 0, 0);
    pthread_mutex_lock(&q.mu);
    if (q.tail != NULL)
        q.tail->next = &e;
    else
        q.head = &e;
    q.tail = &e;
    q.queued++;
    metrics_set(M_ORDER_BATCH_QUEUED, q.queued);
    if (q.leaders < MERGE_LEADERS) {
        q.leaders++;
        e.lead = true;
    }
    pthread_cond_broadcast(&q.arrived);
    for (;;) {
        if (e.done)
            break;
        if (e.lead && !e.taken) {
            wait_full(&e);
            if (e.taken)
                continue; /* another leader took it while this one waited */
            int k = take_batch(batch);
            pthread_mutex_unlock(&q.mu);
            run_batch(batch, k);
            pthread_mutex_lock(&q.mu);
            continue;
        }
        /* Another thread runs it, or will hand this one the lead. */
        pthread_mutex_unlock(&q.mu);
        while (sem_wait(&e.wake) != 0)
            ; /* EINTR */
        pthread_mutex_lock(&q.mu);
    }
    if (e.lead)
        hand_lead();
    pthread_mutex_unlock(&q.mu);
    sem_destroy(&e.wake); /* every post to it was made under q.mu, before done was seen */
    if (e.o.rc == TD_ERETRY)
        txretry_note(e.cause); /* for this thread's retry and its metric */
    *id = e.o.id;
    *amount = e.o.amount;
    return e.o.rc;
}
