/* store_merge.c - the loop's queue of due order transactions and the
 * batches it makes (store_merge.h). */
#include "store_merge.h"

#include "err.h"
#include "faults.h"
#include "fiber.h"
#include "log.h"
#include "loop.h"
#include "merge_batch.h"
#include "merge_turn.h"
#include "metrics.h"
#include "txretry.h"
#include "util.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* An order's outcome, beside merge_batch.h's: queued before its session's
 * row was found held, it was taken out of the batch it would have joined,
 * and goes by the held rule. */
#define STORE_MERGE_HELD 3

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

/* Sessions whose row a transaction waited for in vain, at most: one or
 * two rows are held at a time, not dozens. When the table is full, the
 * session noted longest ago makes room (a mark ends only with an order of
 * its session, and a session may get none again). */
#define HELD_MAX 16

/* A session whose row lock a transaction waited for until the server's
 * bound (1205: another transaction holds the row, an administrator's, a
 * slow client's, a Galera apply). Its orders stay out of batches, where
 * their wait would hold every other order of the batch and the orders
 * queued behind it: one at a time goes alone, as the probe, and while it
 * waits the others are answered 503 at once (nothing of them was written;
 * Retry-After). The first of its orders that meets the row free (placed,
 * sold out, anything but another lock wait) ends the mark.
 *
 * Process-wide, so that the row one loop found held keeps it out of every
 * loop's batches: each slot is two atomics, a session id (0: free) and
 * its probe flag, taken and given back by compare-and-swap. A race costs
 * at most a slot noted twice or two probes at once. */
static struct held {
    _Atomic int64_t session;
    atomic_bool probing;
    _Atomic int64_t noted_ms; /* when it was noted (mono_ms) */
} held[HELD_MAX];

/* A loop's orders due for the database, touched only on its thread. */
struct due_queue {
    struct loop *loop;
    struct entry *head, *tail;
    int queued;
    int running;                   /* batches started and not yet ended */
    struct merge_turn_place place; /* in the line for the server's turn */
    struct loop_task turn;         /* the turn's end: start batches */
    struct loop_timer net;         /* merge.wait_full's safety net */
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

/* The slot of session, or NULL. */
static struct held *held_find(int64_t session)
{
    for (int i = 0; i < HELD_MAX; i++) {
        if (atomic_load(&held[i].session) == session)
            return &held[i];
    }
    return NULL;
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
    int rc = db_batch_each(c, p.sql, &p.arg, 1, p.how, row_each, &p);
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
    if (rc == TD_ERETRY) {
        /* Nothing of it was kept: a lock wait past the bound (1205, one
         * row held by another transaction), a deadlock or a Galera
         * certification conflict (1213). Each order runs again alone, in
         * a transaction of its own, so that one order's trouble (the
         * held row of its session) stays its own: the others are placed,
         * and the one that waits again is answered for itself. */
        enum txretry_cause cause = txretry_noted();
        log_info("mysql: a batch of %d orders was not kept (%s); placing each alone", k,
                 cause == TXRETRY_LOCK_WAIT ? "lock wait" : "conflict");
        /* Each order runs again: counted as the retries they are, by
         * cause (ticketd_transaction_retries_total). */
        for (int i = 0; i < k; i++)
            metrics_inc(cause == TXRETRY_LOCK_WAIT       ? M_TX_RETRIES_LOCK_WAIT
                        : cause == TXRETRY_CERTIFICATION ? M_TX_RETRIES_CERTIFICATION
                        : cause == TXRETRY_DEADLOCK      ? M_TX_RETRIES_DEADLOCK
                                                         : M_TX_RETRIES_OTHER);
        all_fail(batch, k, STORE_MERGE_ALONE);
        return;
    }
    /* A link lost or an answer not understood (TD_EUNAVAIL: the outcome
     * is unknown, and the client's retry finds its order by the unique
     * key, or makes it). */
    all_fail(batch, k, rc);
}

/* Runs one batch on its fiber's connection and gives each order its
 * outcome. */
static void run_batch(struct entry *const *batch, int k)
{
    struct db_conn *c;
    metrics_inc(M_ORDER_BATCHES);
    metrics_add(M_ORDER_BATCH_ORDERS, k);
    metrics_order_batch(k);
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
    int rc = db_conn_get(&c);
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

/* The server's turn came to this loop (merge_turn.h). */
static void start_soon(void *arg)
{
    due_soon(arg);
}

/* A batch's own fiber: it borrows one connection of the loop's pool for
 * the batch (and gives it back), readies each order's fiber with its
 * outcome, and lets the next batch start. */
static void batch_main(void *arg)
{
    struct batch *b = arg;
    struct due_queue *q = b->q;
    run_batch(b->e, b->k);
    db_fiber_idle();
    for (int i = 0; i < b->k; i++) {
        b->e[i]->done = true;
        fiber_ready(b->e[i]->fiber);
    }
    q->running--;
    merge_turn_give(); /* first, so that this loop's next batch queues behind another's */
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
    while (q->head != NULL && q->running < MERGE_LEADERS && !hold_for_more(q) &&
           merge_turn_take(&q->place, q->queued >= max)) {
        struct batch *b = xmalloc(sizeof *b);
        b->q = q;
        b->k = 0;
        int taken = 0;
        while (q->head != NULL && b->k < max) {
            struct entry *e = q->head;
            q->head = e->next;
            taken++;
            if (held_find(e->o.d->session_id) != NULL) {
                /* Queued before its session's row was found held: it
                 * stays out of the batch, where it would wait for the
                 * row and hold every other order of it. */
                e->o.rc = STORE_MERGE_HELD;
                e->done = true;
                fiber_ready(e->fiber);
                continue;
            }
            b->e[b->k++] = e;
        }
        if (q->head == NULL)
            q->tail = NULL;
        q->queued -= taken;
        queued_changed(-taken);
        q->net_passed = false;
        loop_timer_stop(q->loop, &q->net);
        if (b->k == 0) {
            free(b);
            merge_turn_give();
            continue;
        }
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
            merge_turn_give();
        }
    }
}

static struct due_queue *loop_queue(struct loop *l)
{
    struct due_queue *q = loop_slot(l, queues, MERGE_MAX_LOOPS, sizeof *queues);
    if (q != NULL && q->loop == NULL) {
        q->loop = l;
        q->place.loop = l;
        q->place.go = start_soon;
        q->place.arg = q;
    }
    return q;
}

/* Whether rc, the answer of an order's transaction, is a row lock
 * waited for until the server's bound. */
static bool lock_waited(int rc)
{
    return rc == TD_ERETRY && txretry_noted() == TXRETRY_LOCK_WAIT;
}

/* Notes that session's row was held past the bound (nothing when it is
 * noted already, or the table is full). */
static void held_note(int64_t session)
{
    if (held_find(session) != NULL)
        return;
    int at = -1, oldest = -1;
    for (int i = 0; i < HELD_MAX && at < 0; i++) {
        int64_t free_slot = 0;
        if (atomic_compare_exchange_strong(&held[i].session, &free_slot, session))
            at = i;
        else if (!atomic_load(&held[i].probing) &&
                 (oldest < 0 ||
                  atomic_load(&held[i].noted_ms) < atomic_load(&held[oldest].noted_ms)))
            oldest = i;
    }
    if (at < 0 && oldest >= 0) {
        /* Full: the oldest mark whose probe is not running makes room (a
         * race may have freed or taken it meanwhile; then this session is
         * not remembered, and its orders keep joining batches). */
        int64_t was = atomic_load(&held[oldest].session);
        if (was != 0 && atomic_compare_exchange_strong(&held[oldest].session, &was, session))
            at = oldest;
    }
    if (at < 0)
        return;
    atomic_store(&held[at].noted_ms, mono_ms());
    log_warn("mysql: session %lld: its row is held by another transaction; its orders go "
             "alone, one at a time, until one meets the row free",
             (long long)session);
}

static void held_forget(int64_t session)
{
    struct held *h = held_find(session);
    int64_t was = session;
    if (h != NULL && atomic_compare_exchange_strong(&h->session, &was, 0))
        log_info("mysql: session %lld: its row is free again", (long long)session);
}

/* An order alone, on this fiber: a batch's order sent back (its batch was
 * not kept, its session's row was found held in it, or its key's earlier
 * copy in it was not placed), or a held session's probe. What it meets of
 * the session's row is noted. */
static int alone(const struct order_draft *d, const char *db_now, int64_t *id, int64_t *amount)
{
    txretry_note(TXRETRY_OTHER);
    int rc = place_alone(d, db_now, id, amount);
    if (lock_waited(rc))
        held_note(d->session_id);
    else if (rc != TD_EUNAVAIL)
        held_forget(d->session_id);
    return rc;
}

/* An order of a session whose row is held (slot h): the probe, or 503 at
 * once while another order of it is the probe. */
static int place_held(struct held *h, const struct order_draft *d, const char *db_now, int64_t *id,
                      int64_t *amount)
{
    bool idle = false;
    if (!atomic_compare_exchange_strong(&h->probing, &idle, true)) {
        metrics_inc(M_ORDER_HELD_REFUSED);
        return TD_EUNAVAIL;
    }
    int rc = alone(d, db_now, id, amount);
    atomic_store(&h->probing, false);
    return rc;
}

int store_merge_place(const struct order_draft *d, const char *db_now, int64_t *id, int64_t *amount)
{
    struct due_queue *q = fiber_self() != NULL ? loop_queue(loop_self()) : NULL;
    if (q == NULL)
        return STORE_MERGE_ALONE; /* not on a loop's fiber: by itself */
    struct held *h = held_find(d->session_id);
    if (h != NULL)
        return place_held(h, d, db_now, id, amount);
    struct entry e = {.o = {.d = d, .db_now = db_now, .rc = TD_EINTERNAL}, .fiber = fiber_self()};
    /* A connection this request borrowed earlier (a cart's look-up) and
     * holds idle goes back first: the batch borrows one of its own, and a
     * fiber that waits for its batch must not hold what the batch waits
     * for. */
    if (db_holds_idle())
        db_fiber_idle();
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
    if (e.o.rc == STORE_MERGE_ALONE)
        return alone(d, db_now, id, amount);
    if (e.o.rc == MERGE_LOCKED) {
        /* Its batch waited for the session's row in vain ('L', nothing of
         * it kept): the row is noted held, and this order, already sent,
         * runs again alone. */
        held_note(d->session_id);
        return alone(d, db_now, id, amount);
    }
    if (e.o.rc == STORE_MERGE_HELD) {
        /* Queued before its session's row was found held. */
        h = held_find(d->session_id);
        return h != NULL ? place_held(h, d, db_now, id, amount) : alone(d, db_now, id, amount);
    }
    if (e.o.rc == TD_ERETRY)
        txretry_note(e.cause); /* for this fiber's retry and its metric */
    if (lock_waited(e.o.rc))
        held_note(d->session_id); /* a batch of one */
    *id = e.o.id;
    *amount = e.o.amount;
    return e.o.rc;
}
