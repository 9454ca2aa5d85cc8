/* retention.h - the tables kept by day partitions, how long each keeps its
 * rows, and what one round of the retention job does to one of them
 * (pure: no I/O; the job is retention_job.h).
 *
 * A table listed here is partitioned by RANGE (TO_DAYS(created_day)): one
 * partition per UTC day, named pYYYYMMDD, holding the rows written that
 * day, and p_future (MAXVALUE) for whatever lies beyond the last day. The
 * job splits the coming days off p_future ahead of time (while it is
 * empty, so no row moves) and drops a day's partition once its last row is
 * older than the table's retention: ALTER TABLE ... DROP PARTITION, never a
 * DELETE over a range. A table not (yet) partitioned so is left alone.
 *
 * Only tables that exist to deduplicate or to relay are listed; the
 * business tables (orders, order_history, payments, points_ledger,
 * user_points, sessions) are never partitioned nor dropped, and they are
 * the last word on a request replayed after its records are gone. */
#ifndef TICKETD_RETENTION_H
#define TICKETD_RETENTION_H

#include "config.h"
#include "metrics.h"

#include <stddef.h>
#include <stdint.h>

struct retained_table {
    const char *name;
    size_t retain_h_offset; /* its TICKETD_RETAIN_<NAME>_H, an int in struct config */
    /* "SELECT COUNT(*) ... WHERE created_day < ? AND <rows that must stay>":
     * a partition holding such a row is kept. NULL: none must stay. */
    const char *guard_sql;
    /* The age in seconds of the oldest row written before day ?, or -1. */
    const char *oldest_sql;
    enum metric dropped, rows, oldest_age;
};

#define RETAINED_TABLES 4
extern const struct retained_table retained_tables[RETAINED_TABLES];

/* The table's retention in hours, from cfg. */
int retention_hours(const struct retained_table *t, const struct config *cfg);

/* The clock the job goes by, in seconds since the epoch: the wall clock,
 * or with TICKETD_RETENTION_TODAY (tests and demos) the same time of day
 * on that date, so that a test can make today's partition "old" without
 * waiting a week. */
int64_t retention_now(const struct config *cfg, int64_t wall);

/* One partition as the database lists it, in partition order. */
struct day_partition {
    char name[65];
    int64_t end_day; /* rows of days before this one (days since 1970); INT64_MAX: MAXVALUE */
    int64_t rows;    /* InnoDB's estimate */
};

/* What one round does to one table. */
struct retention_plan {
    int64_t add_from, add_to; /* days to split off p_future, inclusive; add_from > add_to: none */
    int drop;                 /* the first `drop` partitions are past retention */
};

/* The plan for a table whose partitions are parts[0..n) at now_s. Days up
 * to today + ahead_days get their partition; a day partition is past
 * retention when its end plus retain_h hours has passed. A table whose
 * last partition is not MAXVALUE gets nothing added; p_future and
 * partitions not named pYYYYMMDD are never dropped. */
void retention_plan_make(const struct day_partition *parts, int n, int64_t now_s, int ahead_days,
                         int retain_h, struct retention_plan *out);

/* pYYYYMMDD of day, into out (16 bytes). */
void retention_partition_name(int64_t day, char out[16]);

#endif
