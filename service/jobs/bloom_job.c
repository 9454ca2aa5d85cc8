/* bloom_job.c - building the order-key filter (bloom_job.h). */
#include "bloom_job.h"

#include "app.h"
#include "bloom.h"
#include "cache.h"
#include "defences.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "util.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define PAGE 500
/* A build left by a dead builder expires after this, and another starts. */
#define BUILD_TTL_MS 60000

struct page {
    const struct app *app;
    uint64_t *pos;
    int n; /* keys in pos */
    int64_t last_id;
};

static int collect(int64_t id, int64_t user_id, const char *request_id, void *p)
{
    struct page *pg = p;
    bloom_positions(pg->app->bloom, user_id, request_id, pg->pos + (size_t)pg->n * BLOOM_MAX_K);
    pg->n++;
    pg->last_id = id;
    return 0;
}

/* Adds the page's keys: their k positions each, packed. */
static int add_page(const struct page *pg, uint64_t *packed)
{
    int k = pg->app->bloom.k, n = 0;
    for (int i = 0; i < pg->n; i++)
        for (int j = 0; j < k; j++)
            packed[n++] = pg->pos[(size_t)i * BLOOM_MAX_K + j];
    return n > 0 ? cache_bloom_add(packed, n) : TD_OK;
}

/* Every order's key, then complete. Returns TD_OK when built, TD_ECONFLICT
 * when the build was voided under it (Redis flushed, untrusted). */
static int build(struct job_ctx *c, const char *building, int64_t *keys)
{
    struct page pg = {.app = c->app, .pos = xcalloc(PAGE, BLOOM_MAX_K * sizeof(uint64_t))};
    uint64_t *packed = xcalloc(PAGE, BLOOM_MAX_K * sizeof(uint64_t));
    int rc;
    *keys = 0;
    do {
        pg.n = 0;
        rc = store_order_keys(pg.last_id, PAGE, collect, &pg);
        if (rc == TD_OK)
            rc = add_page(&pg, packed);
        if (rc == TD_OK)
            rc = cache_bloom_build_progress(building, BUILD_TTL_MS);
        *keys += pg.n;
    } while (rc == TD_OK && pg.n == PAGE && !stopper_stopped(c->stopper));
    free(packed);
    free(pg.pos);
    return rc;
}

/* Any instance's orders recorded without the filter (sql/012), this one's
 * after a restart included. The rows are deleted only once the filter is
 * untrusted: a build that starts after that reads their orders, committed
 * with them. A row written after the read stays for the next round. Run
 * after the round's build, so that a fresh filter is begun without waiting
 * for this query; the next round builds the one it untrusts. */
static void untrust_for_misses(void)
{
    int64_t missed = 0;
    if (store_filter_misses_last(&missed) != TD_OK || missed == 0 || cache_bloom_untrust() != TD_OK)
        return;
    metrics_inc(M_BLOOM_MISSES_SEEN);
    log_warn("order-key filter: orders were recorded without it (an instance without Redis); "
             "untrusted until rebuilt");
    if (store_filter_misses_clear(missed) != TD_OK)
        log_warn("order-key filter: its misses were not cleared; the next round sees them again");
}

static int bloom_tick(struct job_ctx *c)
{
    struct app *app = c->app;
    char building[96], complete[96];
    int64_t keys = 0;
    if (atomic_load(&app->bloom_missed) && cache_bloom_untrust() == TD_OK) {
        atomic_store(&app->bloom_missed, false);
        log_warn("order-key filter: an order was recorded without it; untrusted until rebuilt");
    }
    long long born = (long long)wall_s() * 1000;
    snprintf(building, sizeof building, "%s:%lld:0", app->bloom_shape, born);
    snprintf(complete, sizeof complete, "%s:%lld:1", app->bloom_shape, born);
    if (cache_bloom_build_begin(building, BUILD_TTL_MS) != TD_OK) {
        untrust_for_misses(); /* there is one, or one being built, or Redis is away */
        return app->cfg->bloom_check_ms;
    }
    int rc = build(c, building, &keys);
    if (rc == TD_OK)
        rc = cache_bloom_build_complete(building, complete);
    if (rc == TD_OK) {
        metrics_inc(M_BLOOM_BUILDS);
        log_info("order-key filter built: %lld keys, %s (m:k)", (long long)keys, app->bloom_shape);
    } else {
        log_warn("order-key filter build abandoned: %s", td_strerror(rc));
    }
    untrust_for_misses();
    return app->cfg->bloom_check_ms;
}

/* With the filter switched off there is nothing to keep. */
static int bloom_instances(const struct app *app)
{
    return (app->defences & DEFENCE_BLOOM) ? 1 : 0;
}

static void bloom_open(struct job_ctx *c)
{
    const struct config *cfg = c->app->cfg;
    log_info("order-key filter: %s (m:k) for %d keys at %d per million, checked every %d ms",
             c->app->bloom_shape, cfg->bloom_expected_keys, cfg->bloom_fp_per_million,
             cfg->bloom_check_ms);
}

const struct job bloom_job = {
    .name = "order-key filter",
    .needs = JOB_STORE | JOB_CACHE,
    .instances = bloom_instances,
    .open = bloom_open,
    .tick = bloom_tick,
};
