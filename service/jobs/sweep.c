#include "sweep.h"

#include "app.h"
#include "bgthread.h"
#include "err.h"
#include "lifecycle.h"
#include "log.h"
#include "store.h"
#include "util.h"

#include <stdlib.h>

struct sweep {
    struct app *app;
    struct bgthread bg;
};

static void *sweep_main(void *p)
{
    struct sweep *s = p;
    bool failing = false;
    do {
        int expired = 0;
        int rc = lifecycle_sweep(s->app, &s->bg.stopper.stop, &expired);
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
    } while (!stopper_sleep(&s->bg.stopper, s->app->cfg->sweep_interval_ms));
    store_thread_release();
    return NULL;
}

struct sweep *sweep_start(struct app *app)
{
    struct sweep *s = xcalloc(1, sizeof *s);
    s->app = app;
    if (!bgthread_start(&s->bg, sweep_main, s, "expiry sweep")) {
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
    bgthread_request_stop(&s->bg);
    bgthread_join(&s->bg);
    free(s);
}
