/* groupq.c - the queue of work due at once and its leaders (groupq.h). */
#include "groupq.h"

#include <errno.h>

static void changed(struct groupq *q)
{
    if (q->queued_changed != NULL)
        q->queued_changed(q->queued);
}

bool groupq_wait_arrival(struct groupq *q, const struct timespec *until)
{
    return pthread_cond_timedwait(&q->arrived, &q->mu, until) != ETIMEDOUT;
}

/* Takes the next batch off the queue: the oldest entries, at most
 * max_batch. Called with q->mu held. */
static int take_batch(struct groupq *q, struct groupq_entry **batch)
{
    int k = 0;
    int max = q->max_batch < 1                  ? 1
              : q->max_batch > GROUPQ_MAX_BATCH ? GROUPQ_MAX_BATCH
                                                : q->max_batch;
    while (q->head != NULL && k < max) {
        batch[k] = q->head;
        batch[k++]->taken = true;
        q->head = q->head->next;
        q->queued--;
    }
    if (q->head == NULL)
        q->tail = NULL;
    changed(q);
    pthread_cond_broadcast(&q->arrived); /* a holding leader's entry may be in this batch */
    return k;
}

/* The lead passes to the oldest queued entry whose thread does not lead
 * already, or is given up. Called with q->mu held by a leader whose entry
 * is done. */
static void hand_lead(struct groupq *q)
{
    for (struct groupq_entry *e = q->head; e != NULL; e = e->next) {
        if (!e->lead) {
            e->lead = true;
            sem_post(&e->wake);
            return;
        }
    }
    q->leaders--;
}

/* Runs a batch without the lock, then marks its entries done. Posted
 * under the lock that done is read under: once its thread sees done,
 * nothing touches its entry (on its stack) any more. */
static void run_batch(struct groupq *q, struct groupq_entry **batch, int k)
{
    pthread_mutex_unlock(&q->mu);
    q->run(q, batch, k);
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < k; i++) {
        batch[i]->done = true;
        sem_post(&batch[i]->wake);
    }
}

void groupq_join(struct groupq *q, struct groupq_entry *e)
{
    struct groupq_entry *batch[GROUPQ_MAX_BATCH];
    e->taken = e->done = e->lead = false;
    e->next = NULL;
    sem_init(&e->wake, 0, 0);
    pthread_mutex_lock(&q->mu);
    if (q->tail != NULL)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    q->queued++;
    changed(q);
    if (q->leaders < q->max_leaders) {
        q->leaders++;
        e->lead = true;
    }
    pthread_cond_broadcast(&q->arrived);
    while (!e->done) {
        if (e->lead && !e->taken) {
            if (q->hold != NULL) {
                q->hold(q, e);
                if (e->taken)
                    continue; /* another leader took it meanwhile */
            }
            run_batch(q, batch, take_batch(q, batch));
            continue;
        }
        /* Another thread runs it, or will hand this one the lead. */
        pthread_mutex_unlock(&q->mu);
        while (sem_wait(&e->wake) != 0)
            ; /* EINTR */
        pthread_mutex_lock(&q->mu);
    }
    if (e->lead)
        hand_lead(q);
    pthread_mutex_unlock(&q->mu);
    sem_destroy(&e->wake); /* every post to it was made under q->mu, before done was seen */
}
