/* retention_job.h - the retention job (retention.h), a background job
 * (job.h): every
 * TICKETD_RETENTION_INTERVAL_MS, in every `serve` (TICKETD_WORKERS=1) and
 * `worker`, and once by `ticketd partitions`, it goes through the retained
 * tables: splits off the partitions of the next TICKETD_RETENTION_AHEAD_DAYS
 * days, drops the day partitions past the table's TICKETD_RETAIN_*_H (not
 * one that still holds rows the table's guard keeps), and sets the metrics
 * ticketd_partitions_dropped_total, ticketd_retained_rows and
 * ticketd_retained_oldest_age_seconds.
 *
 * Any number of instances run it; one at a time changes partitions. A
 * round first takes the "retention" lease (store_lease_take,
 * sql/017_job_leases.sql); a round that finds another instance holding it
 * changes nothing and only measures, and the next round lists again. On
 * Galera each ALTER replicates in total order, like the migrations, and
 * two instances' identical ALTERs would both reach every node. */
#ifndef TICKETD_RETENTION_JOB_H
#define TICKETD_RETENTION_JOB_H

#include "job.h"

#include "store_retention.h"

#include <stdint.h>
#include <stdio.h>

struct config;

/* How long a round's lease lasts unless given back: longer than a round
 * takes (a few ALTERs of empty or whole partitions). A holder that dies
 * mid-round leaves the partitions unchanged this long; they are split off
 * days ahead, so nothing waits for them. */
#define RETENTION_LEASE_MS 60000

/* What one round did to one table. */
struct retention_report {
    const char *table; /* borrowed from retained_tables */
    int partitions;    /* day partitions left, p_future not counted; 0: not partitioned */
    int added, dropped;
    int conflicts;     /* changes another instance had made first */
    int64_t kept_rows; /* rows the guard kept in the first partition past retention */
    int64_t rows;      /* estimate */
    int64_t oldest_s;  /* -1: none */
    int rc;            /* TD_OK, or the first error */
    /* The instance that held the lease, when it was not this one: the
     * table was measured, not changed ("": it was changed, or failed). */
    char deferred_to[STORE_LEASE_HOLDER_MAX];
};

/* One round at now_s (retention_now) over every retained table; out has
 * RETAINED_TABLES entries. While another instance holds the lease it
 * looks again for up to wait_ms (0: once), then measures without
 * changing (deferred_to). Returns TD_OK or the first table's error; the
 * other tables are still done. Updates the metrics. */
int retention_round(const struct config *cfg, int64_t now_s, int wait_ms,
                    struct retention_report *out);

/* Prints a round's reports, one line per table. */
void retention_print(FILE *f, const struct retention_report *r);

/* One round every TICKETD_RETENTION_INTERVAL_MS. */
extern const struct job retention_job;

#endif
