#include "workers.h"

#include "log.h"
#include "util.h"

#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>

struct job {
    workers_job_fn fn;
    void *arg;
};

/* The queue is a ring under a mutex that is only ever held for a push or a
 * pop; sleeping and waking is a semaphore's, one post per job (and one per
 * thread at stop). A condition variable costs a third system call per job:
 * glibc marks the mutex contended when a woken waiter takes it back, so the
 * waiter's unlock always wakes nobody through the kernel. */
struct workers {
    pthread_mutex_t mu;
    sem_t ready;      /* a job was queued, or stop */
    struct job *ring; /* queue_max slots */
    int cap, head, count;
    bool stop;
    atomic_int posting; /* submitters between their unlock and their post */
    int nthreads;
    pthread_t *threads;
    struct workers_thread_hooks hooks; /* a copy; NULL members skipped */
};

/* Takes the next job; false once stopping and the queue is empty. */
static bool next_job(struct workers *w, struct job *out, bool *cancelled)
{
    while (sem_wait(&w->ready) != 0)
        ; /* EINTR */
    pthread_mutex_lock(&w->mu);
    bool got = w->count > 0;
    if (got) {
        *out = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->count--;
        *cancelled = w->stop;
    }
    pthread_mutex_unlock(&w->mu);
    return got;
}

static void *worker_main(void *p)
{
    struct workers *w = p;
    struct job j;
    bool cancelled;
    if (w->hooks.begin != NULL)
        w->hooks.begin();
    while (next_job(w, &j, &cancelled)) {
        j.fn(j.arg, cancelled);
        if (w->hooks.after_job != NULL)
            w->hooks.after_job();
    }
    if (w->hooks.end != NULL)
        w->hooks.end();
    return NULL;
}

struct workers *workers_start(int n, int queue_max, const struct workers_thread_hooks *hooks)
{
    struct workers *w = xcalloc(1, sizeof *w);
    if (hooks != NULL)
        w->hooks = *hooks;
    pthread_mutex_init(&w->mu, NULL);
    sem_init(&w->ready, 0, 0);
    w->cap = queue_max;
    w->ring = xcalloc((size_t)queue_max, sizeof *w->ring);
    w->threads = xcalloc((size_t)n, sizeof *w->threads);
    for (; w->nthreads < n; w->nthreads++) {
        if (pthread_create(&w->threads[w->nthreads], NULL, worker_main, w) != 0) {
            log_error("cannot start worker thread %d of %d", w->nthreads + 1, n);
            workers_stop(w);
            return NULL;
        }
    }
    return w;
}

bool workers_submit(struct workers *w, workers_job_fn fn, void *arg)
{
    pthread_mutex_lock(&w->mu);
    bool ok = !w->stop && w->count < w->cap;
    if (ok) {
        w->ring[(w->head + w->count) % w->cap] = (struct job){fn, arg};
        w->count++;
        atomic_fetch_add(&w->posting, 1);
    }
    pthread_mutex_unlock(&w->mu);
    if (ok) {
        /* Posted after unlocking, so the worker it wakes finds the mutex free. */
        sem_post(&w->ready);
        atomic_fetch_sub(&w->posting, 1);
    }
    return ok;
}

int workers_waiting(struct workers *w)
{
    pthread_mutex_lock(&w->mu);
    int n = w->count;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void workers_stop(struct workers *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_mutex_unlock(&w->mu);
    /* One wake-up per thread beyond the queued jobs': each thread runs
     * what is queued (cancelled), then finds the queue empty and ends. */
    for (int i = 0; i < w->nthreads; i++)
        sem_post(&w->ready);
    for (int i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    while (atomic_load(&w->posting) > 0)
        sched_yield(); /* a submitter still has the semaphore in hand */
    sem_destroy(&w->ready);
    pthread_mutex_destroy(&w->mu);
    free(w->threads);
    free(w->ring);
    free(w);
}
