#include "liveness.h"

#include "app.h"
#include "cache.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "stopper.h"
#include "util.h"

#include <pthread.h>
#include <stdlib.h>

struct liveness {
    struct app *app;
    pthread_t thread;
    struct stopper stopper;
    int64_t last_ok_ms; /* the last beat Redis answered (mono_ms), 0: none yet */
};

/* Three beats per TTL: one lost or late beat never makes a live process
 * look dead. */
static int beat_interval_ms(const struct app *app)
{
    return app->cfg->instance_ttl_ms / 3;
}

/* One beat. Our key should still be there when the last beat that
 * reached Redis is younger than its TTL: when it is not, Redis lost its
 * records (restarted without persistence, flushed, failed over to a
 * replica that had not seen them), and with them, maybe, bits of the
 * order-key filter. The filter is then no longer trusted until it is built
 * again (bloom_job.h); every other record's loss the database covers. */
static void beat(struct liveness *l)
{
    bool had_key = false;
    int64_t now = mono_ms();
    if (cache_instance_beat(l->app->instance, l->app->cfg->instance_ttl_ms, &had_key) != TD_OK)
        return;
    bool expected = l->last_ok_ms != 0 && now - l->last_ok_ms < l->app->cfg->instance_ttl_ms;
    if (expected && !had_key) {
        metrics_inc(M_REDIS_LOST_RECORDS);
        log_warn("Redis lost this instance's liveness key within its TTL: it lost records; the "
                 "order-key filter is not trusted until rebuilt");
        cache_bloom_untrust();
    }
    l->last_ok_ms = now;
}

static void *liveness_main(void *p)
{
    struct liveness *l = p;
    while (!stopper_sleep(&l->stopper, beat_interval_ms(l->app)))
        beat(l);
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
    beat(l);
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
