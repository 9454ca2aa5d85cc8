/* liveness.c - the liveness beat (liveness.h). */
#include "liveness.h"

#include "app.h"
#include "cache.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

struct liveness {
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
static int beat(struct job_ctx *c)
{
    struct liveness *l = c->state;
    const struct app *app = c->app;
    bool had_key = false;
    int64_t now = mono_ms();
    if (cache_instance_beat(app->instance, app->cfg->instance_ttl_ms, &had_key) != TD_OK)
        return beat_interval_ms(app);
    bool expected = l->last_ok_ms != 0 && now - l->last_ok_ms < app->cfg->instance_ttl_ms;
    if (expected && !had_key) {
        metrics_inc(M_REDIS_LOST_RECORDS);
        log_warn("Redis lost this instance's liveness key within its TTL: it lost records; the "
                 "order-key filter is not trusted until rebuilt");
        cache_bloom_untrust();
    }
    l->last_ok_ms = now;
    return beat_interval_ms(app);
}

static void liveness_open(struct job_ctx *c)
{
    log_info("instance %s beats every %d ms (TICKETD_INSTANCE_TTL_MS=%d)", c->app->instance,
             beat_interval_ms(c->app), c->app->cfg->instance_ttl_ms);
}

/* A clean stop: the process says it is gone. */
static void liveness_finish(struct job_ctx *c)
{
    cache_instance_gone(c->app->instance);
}

/* The first beat before any request, so that no marker of ours is ever
 * found without its process's key (unless Redis is down: the beats that
 * follow put it there). */
const struct job liveness_job = {
    .name = "liveness",
    .needs = JOB_CACHE,
    .state_size = sizeof(struct liveness),
    .open = liveness_open,
    .tick = beat,
    .finish = liveness_finish,
    .tick_before_start = true,
};
