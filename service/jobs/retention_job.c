/* retention_job.c - the retention job (retention_job.h). */
#include "retention_job.h"

#include "app.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "retention.h"
#include "store_retention.h"
#include "util.h"

#include <stdlib.h>

#define LAST_DAY 2932896 /* 9999-12-31, the last DATE */

/* Drops the partitions the plan says are past retention, oldest first,
 * stopping at the first whose guard finds rows still to keep: a younger
 * partition is never dropped before an older one. */
static int drop_past(const struct retained_table *t, const struct day_partition *parts, int n,
                     struct retention_report *r)
{
    for (int i = 0; i < n; i++) {
        int64_t keep = 0;
        int rc = t->guard_sql != NULL ? store_retention_count(t->guard_sql, parts[i].end_day, &keep)
                                      : TD_OK;
        if (rc != TD_OK)
            return rc;
        if (keep > 0) {
            r->kept_rows = keep;
            log_warn("retention: %s keeps %s past its retention: %lld rows are still needed",
                     t->name, parts[i].name, (long long)keep);
            return TD_OK;
        }
        rc = store_partition_drop(t->name, parts[i].name);
        if (rc == TD_ECONFLICT)
            continue; /* another instance dropped it */
        if (rc != TD_OK)
            return rc;
        log_info("retention: dropped %s of %s", parts[i].name, t->name);
        metrics_inc(t->dropped);
        r->dropped++;
    }
    return TD_OK;
}

/* The rows estimate and the oldest row's age, from what is left. */
static int measure(const struct retained_table *t, const struct day_partition *parts, int n,
                   struct retention_report *r)
{
    r->rows = 0;
    r->oldest_s = -1;
    r->partitions = 0;
    for (int i = 0; i < n; i++) {
        r->rows += parts[i].rows;
        r->partitions += parts[i].end_day != INT64_MAX;
    }
    /* Oldest first: the first partition with a row holds the oldest, and
     * only that partition is read. */
    for (int i = 0; i < n && r->oldest_s < 0; i++) {
        int64_t end = parts[i].end_day == INT64_MAX ? LAST_DAY : parts[i].end_day;
        int rc = store_retention_count(t->oldest_sql, end, &r->oldest_s);
        if (rc != TD_OK)
            return rc;
    }
    metrics_set(t->rows, r->rows);
    metrics_set(t->oldest_age, r->oldest_s);
    return TD_OK;
}

static int round_table(const struct config *cfg, const struct retained_table *t, int64_t now_s,
                       struct day_partition *parts, struct retention_report *r)
{
    struct retention_plan plan;
    int n = 0;
    int rc = store_partitions_list(t->name, parts, STORE_PARTITIONS_MAX, &n);
    if (rc != TD_OK || n == 0)
        return rc; /* not there, or not partitioned: not ours */
    retention_plan_make(parts, n, now_s, cfg->retention_ahead_days, retention_hours(t, cfg), &plan);
    if (plan.add_from <= plan.add_to) {
        rc = store_partitions_add(t->name, plan.add_from, plan.add_to);
        if (rc != TD_OK && rc != TD_ECONFLICT)
            return rc;
        if (rc == TD_OK)
            r->added = (int)(plan.add_to - plan.add_from + 1);
    }
    rc = drop_past(t, parts, plan.drop, r);
    if (rc == TD_OK && (r->added > 0 || r->dropped > 0))
        rc = store_partitions_list(t->name, parts, STORE_PARTITIONS_MAX, &n);
    return rc == TD_OK ? measure(t, parts, n, r) : rc;
}

int retention_round(const struct config *cfg, int64_t now_s, struct retention_report *out)
{
    int first = TD_OK;
    struct day_partition *parts = xcalloc(STORE_PARTITIONS_MAX, sizeof *parts);
    for (int i = 0; i < RETAINED_TABLES; i++) {
        out[i] = (struct retention_report){.table = retained_tables[i].name, .oldest_s = -1};
        out[i].rc = round_table(cfg, &retained_tables[i], now_s, parts, &out[i]);
        if (first == TD_OK)
            first = out[i].rc;
    }
    free(parts);
    return first;
}

void retention_print(FILE *f, const struct retention_report *r)
{
    for (int i = 0; i < RETAINED_TABLES; i++) {
        if (r[i].rc != TD_OK)
            fprintf(f, "%s: failed: %s\n", r[i].table, td_strerror(r[i].rc));
        else if (r[i].partitions == 0)
            fprintf(f, "%s: no day partitions (no such table, or not partitioned by day yet)\n",
                    r[i].table);
        else
            fprintf(f, "%s: %d day partitions, %d added, %d dropped, ~%lld rows, oldest %lld s%s\n",
                    r[i].table, r[i].partitions, r[i].added, r[i].dropped, (long long)r[i].rows,
                    (long long)r[i].oldest_s,
                    r[i].kept_rows > 0 ? ", kept for rows still needed" : "");
    }
}

static void retention_open(struct job_ctx *c)
{
    log_info("retention job: every %d ms, %d days ahead", c->app->cfg->retention_interval_ms,
             c->app->cfg->retention_ahead_days);
}

static int retention_tick(struct job_ctx *c)
{
    const struct config *cfg = c->app->cfg;
    struct retention_report r[RETAINED_TABLES];
    job_note(c, retention_round(cfg, retention_now(cfg, wall_s()), r), cfg->retention_interval_ms);
    return cfg->retention_interval_ms;
}

const struct job retention_job = {
    .name = "retention job",
    .needs = JOB_STORE,
    .open = retention_open,
    .tick = retention_tick,
};
