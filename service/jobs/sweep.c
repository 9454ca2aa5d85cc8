/* sweep.c - the expiry sweep as a background job (sweep.h): unpaid orders
 * past their time cancelled by lifecycle_sweep. Apart from the domain,
 * which holds the rule; this file only runs it on its schedule. */
#include "sweep.h"

#include "app.h"
#include "err.h"
#include "lifecycle.h"
#include "log.h"

static void sweep_open(struct job_ctx *c)
{
    log_info("expiry sweep: every %d ms, orders unpaid for %d s", c->app->cfg->sweep_interval_ms,
             c->app->cfg->order_ttl_s);
}

static int sweep_tick(struct job_ctx *c)
{
    int expired = 0;
    int rc = lifecycle_sweep(c->app, &c->stopper->stop, &expired);
    job_note(c, rc, c->app->cfg->sweep_interval_ms);
    if (expired > 0)
        log_info("expiry sweep cancelled %d unpaid orders", expired);
    return c->app->cfg->sweep_interval_ms;
}

const struct job sweep_job = {
    .name = "expiry sweep",
    .needs = JOB_STORE,
    .open = sweep_open,
    .tick = sweep_tick,
};
