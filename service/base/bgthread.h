/* bgthread.h - a background thread that works in rounds and stops when
 * asked: a pthread with its stopper (stopper.h), one for each background
 * job the runner (jobs/job.h) starts. The thread's function reads
 * t->stopper to know when to end and sleeps on it between rounds.
 * Start and join from one thread; request_stop from any. */
#ifndef TICKETD_BGTHREAD_H
#define TICKETD_BGTHREAD_H

#include "stopper.h"

#include <pthread.h>
#include <stdbool.h>

struct bgthread {
    pthread_t thread;
    struct stopper stopper;
};

/* Starts fn(arg) on a new thread. Returns false (logged: "cannot start
 * the <what> thread") when it cannot; t is then cleaned up. */
bool bgthread_start(struct bgthread *t, void *(*fn)(void *), void *arg, const char *what);

/* Asks the thread to stop (its sleep ends at once). */
void bgthread_request_stop(struct bgthread *t);

/* Waits for the thread to end and cleans t up. */
void bgthread_join(struct bgthread *t);

#endif
