#include "liveness.h"

#include "app.h"
#include "cache.h"
#include "err.h"
#include "log.h"
#include "stopper.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>

struct liveness {
    struct app *app;
    pthread_t thread;
    struct stopper stopper;
};

/* Three beats per TTL: one lost or late beat never makes a live process
 * look dead. */
static int beat_interval_ms(const struct app *app)
{
    return app->cfg->instance_ttl_ms / 3;
}

static void *liveness_main(void *p)
{
    struct liveness *l = p;
    while (!stopper_sleep(&l->stopper, beat_interval_ms(l->app)))
        cache_instance_beat(l->app->instance, l->app->cfg->instance_ttl_ms);
    cache_instance_gone(l->app->instance);
    cache_thread_release();
    return NULL;
}

struct liveness *liveness_start(struct app *app)
{
    struct liveness *l = xcalloc(1, sizeof *l);
    l->app = app;
    stopper_init(&l->stopper);
    /* The first beat before any request, so that no marker of ours is ever
     * found without its process's key (unless Redis is down: the beats
     * that follow put it there). */
    cache_instance_beat(app->instance, app->cfg->instance_ttl_ms);
    cache_thread_release();
    if (pthread_create(&l->thread, NULL, liveness_main, l) != 0) {
        log_error("cannot start the liveness thread");
        stopper_cleanup(&l->stopper);
        free(l);
        return NULL;
    }
    log_info("instance %s beats every %d ms (TICKETD_INSTANCE_TTL_MS=%d)", app->instance,
             beat_interval_ms(app), app->cfg->instance_ttl_ms);
    return l;
}

void liveness_stop(struct liveness *l)
{
    if (l == NULL)
        return;
    stopper_stop(&l->stopper);
    pthread_join(l->thread, NULL);
    stopper_cleanup(&l->stopper);
    free(l);
}
