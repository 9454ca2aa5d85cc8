/* stopper.c - a background thread's sleep that ends early when it is asked
 * to stop (stopper.h). Apart so that every job stops the same way. */
#include "stopper.h"

#include <time.h>

void stopper_init(struct stopper *s)
{
    pthread_condattr_t ca;
    atomic_init(&s->stop, false);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
}

void stopper_cleanup(struct stopper *s)
{
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
}

bool stopper_sleep(struct stopper *s, int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    while (!atomic_load(&s->stop)) {
        if (pthread_cond_timedwait(&s->wake, &s->mu, &until) != 0)
            break; /* timed out */
    }
    pthread_mutex_unlock(&s->mu);
    return atomic_load(&s->stop);
}

bool stopper_stopped(struct stopper *s)
{
    return atomic_load(&s->stop);
}

void stopper_stop(struct stopper *s)
{
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, true);
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
}
