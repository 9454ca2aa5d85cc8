/* groupq.h - group commit for threads that each wait for their own work:
 * work that arrives together is done together.
 *
 * A thread with work joins the queue. If fewer than max_leaders batches
 * are under way it leads one at once: it takes everything queued (at most
 * max_batch entries), runs the batch with the queue's run function, and
 * wakes each entry's thread. Work that arrives while the batches are under
 * way waits for one to end; then one of the waiting threads leads the
 * next batch with all of it. A lone entry on an idle queue goes at once
 * (no timer, no added delay); under load the batches grow by themselves
 * to what arrived during the last one.
 *
 * Used for merged order transactions (mysql/store_merge.c) and pipelined
 * Redis commands (redis/redis.c).
 *
 * Thread-safe. */
#ifndef TICKETD_GROUPQ_H
#define TICKETD_GROUPQ_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>

/* The queue's part of a piece of work: the first member of the caller's
 * entry (on the waiting thread's stack), so that a batch's run function
 * can cast it back. */
struct groupq_entry {
    sem_t wake; /* posted when done, or when handed the lead */
    bool taken; /* a batch took it off the queue */
    bool done;  /* its batch has run */
    bool lead;  /* its thread leads batches (counted in leaders) */
    struct groupq_entry *next;
};

struct groupq;

/* The largest batch a queue may take. */
#define GROUPQ_MAX_BATCH 256

/* Runs a batch of k >= 1 entries (oldest first) on the leader's thread,
 * without the queue's lock. */
typedef void (*groupq_run_fn)(struct groupq *q, struct groupq_entry **batch, int k);

/* Called with the queue's lock held just before a leader takes its batch
 * (may be NULL): it may wait on the queue (groupq_wait_arrival) until the
 * batch is as full as it wants. */
typedef void (*groupq_hold_fn)(struct groupq *q, const struct groupq_entry *self);

struct groupq {
    pthread_mutex_t mu;
    pthread_cond_t arrived; /* broadcast whenever an entry joins or a batch is taken */
    struct groupq_entry *head, *tail;
    int queued;
    int leaders;
    int max_leaders;                    /* batches under way at once, >= 1 */
    int max_batch;                      /* entries per batch, 1 to GROUPQ_MAX_BATCH */
    groupq_run_fn run;                  /* required */
    groupq_hold_fn hold;                /* may be NULL */
    void (*queued_changed)(int queued); /* may be NULL: e.g. a gauge */
};

/* A queue, for a static initializer. */
#define GROUPQ_INIT(leaders, batch, run_fn)                                                        \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0, (leaders), (batch), \
            (run_fn), NULL, NULL                                                                   \
    }

/* Queues e and returns when its batch has run (on this thread or
 * another). e belongs to the caller and may go once this returns. */
void groupq_join(struct groupq *q, struct groupq_entry *e);

/* For a hold function: waits (lock held) until an entry arrives, a batch
 * is taken, or until (CLOCK_REALTIME) passes. Returns false on the
 * timeout. */
bool groupq_wait_arrival(struct groupq *q, const struct timespec *until);

#endif
