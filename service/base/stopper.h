/* stopper.h - how a background thread sleeps between rounds and is asked
 * to stop: a sleep that ends early the moment stopper_stop() is called.
 * Each background job's thread has one (bgthread.h). Thread-safe. */
#ifndef TICKETD_STOPPER_H
#define TICKETD_STOPPER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct stopper {
    _Atomic bool stop;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* on the monotonic clock */
};

void stopper_init(struct stopper *s);
void stopper_cleanup(struct stopper *s);

/* Sleeps up to ms, returning early once asked to stop. Returns true when
 * the thread should stop. */
bool stopper_sleep(struct stopper *s, int ms);

/* True once stopper_stop() was called. */
bool stopper_stopped(struct stopper *s);

/* Asks the sleeping (or next sleeping) thread to stop. */
void stopper_stop(struct stopper *s);

#endif
