/* retention_job.c - the retention job (retention_job.h). */
#include "retention_job.h"

#include "app.h"
#include "config.h"
#include "err.h"
#include "faults.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "retention.h"
#include "store_retention.h"
#include "txretry.h"
#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#define LAST_DAY 2932896 /* 9999-12-31, the last DATE */

#define LEASE_JOB "retention"
/* How often `ticketd partitions` looks again while another holds it. */
#define LEASE_POLL_MS 100

/* The lease as one attempt of txretry_run sees it. */
struct lease_try {
    const char *holder;
    bool mine;
    char who[STORE_LEASE_HOLDER_MAX];
};

static int lease_take_once(void *p)
{
    struct lease_try *t = p;
    return store_lease_take(LEASE_JOB, t->holder, RETENTION_LEASE_MS, &t->mine, t->who);
}

/* Takes the retention lease, looking again every LEASE_POLL_MS for up to
 * wait_ms while another instance holds it. */
static int lease_take(const struct config *cfg, int wait_ms, struct lease_try *t)
{
    for (int waited = 0;; waited += LEASE_POLL_MS) {
        int rc = txretry_run(cfg->tx_retries, lease_take_once, t);
        if (rc != TD_OK || t->mine || waited >= wait_ms)
            return rc;
        if (waited == 0)
            log_info("retention: %s holds the retention lease; waiting up to %d ms for it", t->who,
                     wait_ms);
        sleep_ms(LEASE_POLL_MS);
    }
}

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
        if (rc == TD_ECONFLICT) {
            metrics_inc(M_PARTITION_DDL_CONFLICTS); /* another instance dropped it */
            r->conflicts++;
            continue;
        }
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

/* One table's round: its partitions changed as the plan says when this
 * instance holds the lease (change), then measured either way. */
static int round_table(const struct config *cfg, const struct retained_table *t, int64_t now_s,
                       bool change, struct day_partition *parts, struct retention_report *r)
{
    struct retention_plan plan;
    int n = 0;
    int rc = store_partitions_list(t->name, parts, STORE_PARTITIONS_MAX, &n);
    if (rc != TD_OK || n == 0)
        return rc; /* not there, or not partitioned: not ours */
    if (!change)
        return measure(t, parts, n, r);
    retention_plan_make(parts, n, now_s, cfg->retention_ahead_days, retention_hours(t, cfg), &plan);
    if (FAULT_POINT("retention.before_ddl"))
        return TD_EUNAVAIL;
    if (plan.add_from <= plan.add_to) {
        rc = store_partitions_add(t->name, plan.add_from, plan.add_to);
        if (rc != TD_OK && rc != TD_ECONFLICT)
            return rc;
        if (rc == TD_OK) {
            r->added = (int)(plan.add_to - plan.add_from + 1);
        } else {
            metrics_inc(M_PARTITION_DDL_CONFLICTS);
            r->conflicts++;
        }
    }
    rc = drop_past(t, parts, plan.drop, r);
    if (rc == TD_OK && (r->added > 0 || r->dropped > 0))
        rc = store_partitions_list(t->name, parts, STORE_PARTITIONS_MAX, &n);
    return rc == TD_OK ? measure(t, parts, n, r) : rc;
}

int retention_round(const struct config *cfg, int64_t now_s, int wait_ms,
                    struct retention_report *out)
{
    char holder[STORE_LEASE_HOLDER_MAX];
    int first = TD_OK;
    process_name(holder, sizeof holder);
    struct lease_try lease = {.holder = holder};
    int leased = lease_take(cfg, wait_ms, &lease);
    if (leased == TD_OK && !lease.mine) {
        metrics_inc(M_RETENTION_DEFERRED);
        log_info("retention: %s holds the retention lease; this round changes no partition",
                 lease.who);
    }
    struct day_partition *parts = xcalloc(STORE_PARTITIONS_MAX, sizeof *parts);
    for (int i = 0; i < RETAINED_TABLES; i++) {
        struct retention_report *r = &out[i];
        *r = (struct retention_report){.table = retained_tables[i].name, .oldest_s = -1};
        if (leased == TD_OK && !lease.mine)
            snprintf(r->deferred_to, sizeof r->deferred_to, "%s", lease.who);
        r->rc = leased != TD_OK
                    ? leased
                    : round_table(cfg, &retained_tables[i], now_s, lease.mine, parts, r);
        if (first == TD_OK)
            first = r->rc;
    }
    free(parts);
    /* Given back at once, so that the next instance's round need not wait
     * for it to run out; when that fails it runs out all the same. */
    if (lease.mine && store_lease_give_back(LEASE_JOB, holder) != TD_OK)
        log_warn("retention: could not give the lease back; it runs out in %d ms",
                 RETENTION_LEASE_MS);
    return first;
}

void retention_print(FILE *f, const struct retention_report *r)
{
    for (int i = 0; i < RETAINED_TABLES; i++) {
        if (r[i].rc != TD_OK)
            fprintf(f, "%s: failed: %s\n", r[i].table, td_strerror(r[i].rc));
        else if (r[i].partitions == 0)
            fprintf(f, "%s: no day partitions (no such table, or not partitioned by day yet)%s%s\n",
                    r[i].table,
                    r[i].deferred_to[0] != '\0' ? ", changes left to the lease's holder " : "",
                    r[i].deferred_to);
        else
            fprintf(
                f,
                "%s: %d day partitions, %d added, %d dropped, ~%lld rows, oldest %lld s%s%s%s%s\n",
                r[i].table, r[i].partitions, r[i].added, r[i].dropped, (long long)r[i].rows,
                (long long)r[i].oldest_s, r[i].kept_rows > 0 ? ", kept for rows still needed" : "",
                r[i].conflicts > 0 ? ", a change found made by another instance" : "",
                r[i].deferred_to[0] != '\0' ? ", changes left to the lease's holder " : "",
                r[i].deferred_to);
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
    /* Another instance's round under way: this one measures, and the next
     * changes what is still to change. */
    job_note(c, retention_round(cfg, retention_now(cfg, wall_s()), 0, r),
             cfg->retention_interval_ms);
    return cfg->retention_interval_ms;
}

const struct job retention_job = {
    .name = "retention job",
    .needs = JOB_STORE,
    .open = retention_open,
    .tick = retention_tick,
};
