/* bgthread.c - a background thread with its stopper (bgthread.h). */
#include "bgthread.h"

#include "log.h"

bool bgthread_start(struct bgthread *t, void *(*fn)(void *), void *arg, const char *what)
{
    stopper_init(&t->stopper);
    if (pthread_create(&t->thread, NULL, fn, arg) == 0)
        return true;
    log_error("cannot start the %s thread", what);
    stopper_cleanup(&t->stopper);
    return false;
}

void bgthread_request_stop(struct bgthread *t)
{
    stopper_stop(&t->stopper);
}

void bgthread_join(struct bgthread *t)
{
    pthread_join(t->thread, NULL);
    stopper_cleanup(&t->stopper);
}
