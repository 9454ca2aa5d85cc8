#include "sweep.h"

#include "app.h"
#include "err.h"
#include "lifecycle.h"
#include "log.h"
#include "store.h"
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct sweep {
    struct app *app;
    pthread_t thread;
    _Atomic bool stop;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* signalled by sweep_stop */
};

/* Sleeps up to ms, returning early once asked to stop. */
static void pause_ms(struct sweep *s, int ms)
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
}

static void *sweep_main(void *p)
{
    struct sweep *s = p;
    bool failing = false;
    while (!atomic_load(&s->stop)) {
        int expired = 0;
        int rc = lifecycle_sweep(s->app, &s->stop, &expired);
        /* One line when the sweep starts failing and one when it is back,
         * not one per interval while the database is away. */
        if (rc != TD_OK && !failing)
            log_warn("expiry sweep failed: %s; retrying every %d ms", td_strerror(rc),
                     s->app->cfg->sweep_interval_ms);
        else if (rc == TD_OK && failing)
            log_info("expiry sweep is working again");
        failing = rc != TD_OK;
        if (expired > 0)
            log_info("expiry sweep cancelled %d unpaid orders", expired);
        pause_ms(s, s->app->cfg->sweep_interval_ms);
    }
    store_thread_release();
    return NULL;
}

struct sweep *sweep_start(struct app *app)
{
    pthread_condattr_t ca;
    struct sweep *s = xcalloc(1, sizeof *s);
    s->app = app;
    atomic_init(&s->stop, false);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&s->thread, NULL, sweep_main, s) != 0) {
        log_error("cannot start the expiry sweep thread");
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    log_info("expiry sweep: every %d ms, orders unpaid for %d s", app->cfg->sweep_interval_ms,
             app->cfg->order_ttl_s);
    return s;
}

void sweep_stop(struct sweep *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->stop, true);
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
