/* store_merge.c - the loop's queue of due order transactions and the
 * batches it makes (store_merge.h). */
#include "store_merge.h"

#include "err.h"
#include "faults.h"
#include "fiber.h"
#include "log.h"
#include "loop.h"
#include "merge_batch.h"
#include "merge_held.h"
#include "merge_turn.h"
#include "metrics.h"
#include "txretry.h"
#include "util.h"

#include <pthread.h>
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

/* A loop's orders due for the database. head and tail are under merge_mu:
 * a batch takes the orders of every loop's queue, whichever loop sends it;
 * the rest is touched only on the queue's own loop. */
struct due_queue {
    struct loop *loop;
    struct entry *head, *tail;     /* under merge_mu */
    int running;                   /* batches started and not yet ended */
    struct merge_turn_place place; /* in the line for the server's turn */
    struct loop_task turn;         /* the turn's end: start batches */
    struct loop_timer net;         /* merge.wait_full's safety net */
    bool net_passed;
};

/* An order waiting for its batch, on its fiber's stack. o's outcome is
 * written by the batch's fiber (on any loop) before done is set, which
 * happens on the order's own loop. */
struct entry {
    struct merge_order o;
    enum txretry_cause cause; /* of a TD_ERETRY, noted on the batch's fiber */
    struct fiber *fiber;
    struct due_queue *q; /* its own loop's queue */
    uint64_t seq;        /* its arrival, over every loop */
    bool done;
    struct entry *next;
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

/* The queues' lists, their count and the arrival counter: held for an
 * append, or for a batch's take (a few dozen pointer moves). */
static pthread_mutex_t merge_mu = PTHREAD_MUTEX_INITIALIZER;
static int queues_used;   /* slots of queues[] in use */
static uint64_t arrivals; /* the last entry's seq */

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

/* Under merge_mu: the gauge moves with the lists. */
static void queued_changed(int by)
{
    metrics_set(M_ORDER_BATCH_QUEUED, atomic_fetch_add(&queued_total, by) + by);
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
    int rc = merge_batch_run(c, orders, k);
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

/* Places one batch on its fiber's connection and gives each order its
 * outcome. */
static void place_at_db(struct entry *const *batch, int k)
{
    struct db_conn *c;
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

/* Runs one batch, counted with its size and its time. */
static void run_batch(struct entry *const *batch, int k)
{
    metrics_inc(M_ORDER_BATCHES);
    metrics_add(M_ORDER_BATCH_ORDERS, k);
    metrics_order_batch(k);
    int64_t t0 = mono_ns();
    place_at_db(batch, k);
    metrics_order_batch_time((double)(mono_ns() - t0) / 1e9);
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

/* Whether any loop has orders queued. */
static bool any_due(void)
{
    return atomic_load(&queued_total) > 0;
}

/* Orders of another loop, ended here, on their way back to it. */
struct handback {
    struct entry *first;
};

/* On the orders' own loop: each is told its outcome. */
static void handed_back(void *arg)
{
    struct handback *h = arg;
    for (struct entry *e = h->first, *next; e != NULL; e = next) {
        next = e->next; /* before the fiber can run: the entry is its stack's */
        e->done = true;
        fiber_ready(e->fiber);
    }
    free(h);
}

/* Readies the fiber of each of the n orders with its outcome, on its own
 * loop: at once for self's, and for each other loop's in one loop_post
 * (a fiber is readied only by its own loop). */
static void finish(struct due_queue *self, struct entry *const *e, int n)
{
    struct handback *back[MERGE_MAX_LOOPS]; /* one per other loop */
    struct due_queue *to[MERGE_MAX_LOOPS];
    int posts = 0;
    for (int i = 0; i < n; i++) {
        if (e[i]->q == self) {
            e[i]->done = true;
            fiber_ready(e[i]->fiber);
            continue;
        }
        int j = 0;
        while (j < posts && to[j] != e[i]->q)
            j++;
        if (j == posts) {
            to[posts] = e[i]->q;
            back[posts++] = xcalloc(1, sizeof *back[0]);
        }
        e[i]->next = back[j]->first;
        back[j]->first = e[i];
    }
    for (int j = 0; j < posts; j++)
        loop_post(to[j]->loop, handed_back, back[j]);
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
    q->running--;
    /* With orders due on any loop, the next batch goes from here, and
     * before this one's outcomes are handed out: no other loop is woken to
     * send it (merge_turn.h), and its CALL leaves ahead of the answers and
     * Redis writes of the orders readied below. */
    if (any_due()) {
        merge_turn_keep(&q->place);
        start_batches(q);
    } else {
        merge_turn_give();
    }
    finish(q, b->e, b->k);
    if (any_due())
        due_soon(q);
    free(b);
}

static void net_passed(void *arg)
{
    struct due_queue *q = arg;
    log_warn("merge.wait_full: %d of %d orders after %d s; sending", atomic_load(&queued_total),
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
    if (atomic_load(&queued_total) >= atomic_load(&max_batch) || q->net_passed ||
        !FAULT_POINT("merge.wait_full"))
        return false;
    if (q->net.heap_at == 0) /* not started */
        loop_timer_start(q->loop, &q->net, WAIT_FULL_NET_MS, net_passed, q);
    return true;
}

/* The queue whose first order came earliest, or NULL when every queue is
 * empty. Under merge_mu. */
static struct due_queue *earliest(void)
{
    struct due_queue *best = NULL;
    for (int i = 0; i < queues_used; i++) {
        struct due_queue *q = &queues[i];
        if (q->head != NULL && (best == NULL || q->head->seq < best->head->seq))
            best = q;
    }
    return best;
}

/* Takes b's orders, at most max, earliest first over every loop's queue:
 * the orders every loop has due meet in one batch, whichever loop sends
 * it. An order of a session whose row is held stays out, into held_out
 * (*nheld of them, at most max), for the held rule. */
static void take_due(struct batch *b, int max, struct entry **held_out, int *nheld)
{
    int taken = 0, other = 0, nemptied = 0;
    struct due_queue *from, *emptied[MERGE_MAX_LOOPS]; /* each queue empties once */
    *nheld = 0;
    pthread_mutex_lock(&merge_mu);
    while (b->k < max && *nheld < max && (from = earliest()) != NULL) {
        struct entry *e = from->head;
        from->head = e->next;
        if (from->head == NULL) {
            from->tail = NULL;
            if (from != b->q)
                emptied[nemptied++] = from;
        }
        e->next = NULL;
        taken++;
        if (merge_held_find(e->o.d->session_id) != NULL) {
            /* Queued before its session's row was found held: it stays
             * out of the batch, where it would wait for the row and hold
             * every other order of it. */
            e->o.rc = STORE_MERGE_HELD;
            held_out[(*nheld)++] = e;
            continue;
        }
        other += from != b->q;
        b->e[b->k++] = e;
    }
    queued_changed(-taken);
    pthread_mutex_unlock(&merge_mu);
    metrics_add(M_ORDER_BATCH_ORDERS_OTHER_LOOP, other);
    for (int i = 0; i < nemptied; i++)
        merge_turn_leave(&emptied[i]->place);
}

/* The turn's end: the orders due (on any loop: a batch takes every
 * loop's) leave as a batch, at most MERGE_LEADERS of this loop's at the
 * server at once, each on a fiber of its own. A turn handed to this loop
 * with nothing left to send (another loop's batch took it) is given on. */
static void start_batches(void *arg)
{
    struct due_queue *q = arg;
    int max = atomic_load(&max_batch);
    while (q->running < MERGE_LEADERS && (any_due() || merge_turn_handed(&q->place)) &&
           !hold_for_more(q) && merge_turn_take(&q->place, atomic_load(&queued_total) >= max)) {
        struct entry *held_out[MERGE_MAX_LIMIT];
        int nheld;
        struct batch *b = xmalloc(sizeof *b);
        b->q = q;
        b->k = 0;
        take_due(b, max, held_out, &nheld);
        finish(q, held_out, nheld);
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
            for (int i = 0; i < b->k; i++)
                b->e[i]->o.rc = TD_EUNAVAIL;
            finish(q, b->e, b->k);
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
        pthread_mutex_lock(&merge_mu);
        if ((int)(q - queues) >= queues_used)
            queues_used = (int)(q - queues) + 1;
        pthread_mutex_unlock(&merge_mu);
    }
    return q;
}

/* Whether rc, the answer of an order's transaction, is a row lock
 * waited for until the server's bound. */
static bool lock_waited(int rc)
{
    return rc == TD_ERETRY && txretry_noted() == TXRETRY_LOCK_WAIT;
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
        merge_held_note(d->session_id);
    else if (rc != TD_EUNAVAIL)
        merge_held_forget(d->session_id);
    return rc;
}

/* An order of a session whose row is held (slot h): the probe, or 503 at
 * once while another order of it is the probe. */
static int place_held(struct merge_held *h, const struct order_draft *d, const char *db_now,
                      int64_t *id, int64_t *amount)
{
    if (!merge_held_probe(h)) {
        metrics_inc(M_ORDER_HELD_REFUSED);
        return TD_EUNAVAIL;
    }
    int rc = alone(d, db_now, id, amount);
    merge_held_probed(h);
    return rc;
}

int store_merge_place(const struct order_draft *d, const char *db_now, int64_t *id, int64_t *amount)
{
    struct due_queue *q = fiber_self() != NULL ? loop_queue(loop_self()) : NULL;
    if (q == NULL)
        return STORE_MERGE_ALONE; /* not on a loop's fiber: by itself */
    struct merge_held *h = merge_held_find(d->session_id);
    if (h != NULL)
        return place_held(h, d, db_now, id, amount);
    struct entry e = {
        .o = {.d = d, .db_now = db_now, .rc = TD_EINTERNAL}, .fiber = fiber_self(), .q = q};
    /* A connection this request borrowed earlier (a cart's look-up) and
     * holds idle goes back first: the batch borrows one of its own, and a
     * fiber that waits for its batch must not hold what the batch waits
     * for. */
    if (db_holds_idle())
        db_fiber_idle();
    pthread_mutex_lock(&merge_mu);
    e.seq = ++arrivals;
    if (q->tail != NULL)
        q->tail->next = &e;
    else
        q->head = &e;
    q->tail = &e;
    queued_changed(1);
    pthread_mutex_unlock(&merge_mu);
    due_soon(q);
    while (!e.done)
        fiber_park();
    if (e.o.rc == STORE_MERGE_ALONE)
        return alone(d, db_now, id, amount);
    if (e.o.rc == MERGE_LOCKED) {
        /* Its batch waited for the session's row in vain ('L', nothing of
         * it kept): the row is noted held, and this order, already sent,
         * runs again alone. */
        merge_held_note(d->session_id);
        return alone(d, db_now, id, amount);
    }
    if (e.o.rc == STORE_MERGE_HELD) {
        /* Queued before its session's row was found held. */
        h = merge_held_find(d->session_id);
        return h != NULL ? place_held(h, d, db_now, id, amount) : alone(d, db_now, id, amount);
    }
    if (e.o.rc == TD_ERETRY)
        txretry_note(e.cause); /* for this fiber's retry and its metric */
    if (lock_waited(e.o.rc))
        merge_held_note(d->session_id); /* a batch of one */
    *id = e.o.id;
    *amount = e.o.amount;
    return e.o.rc;
}
