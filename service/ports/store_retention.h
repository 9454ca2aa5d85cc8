/* store_retention.h - the retention job's side of the store: the lease
 * that lets one instance at a time change partitions, a table's
 * partitions, splitting day partitions off p_future, dropping one, and
 * the counts the job's guards and metrics need (retention.h). Errors as
 * store.h; run by the retention job, on its thread's own connection. */
#ifndef TICKETD_STORE_RETENTION_H
#define TICKETD_STORE_RETENTION_H

#include "retention.h"

#include <stdbool.h>
#include <stdint.h>

#define STORE_PARTITIONS_MAX   1024
#define STORE_LEASE_HOLDER_MAX 128

/* Takes job's lease (sql/017_job_leases.sql) for holder, for ttl_ms of the
 * database's clock, in one statement: when nobody holds it, when its
 * holder's time has run out, or when holder has it already (renewed).
 * *mine says whether holder holds it now, and who (STORE_LEASE_HOLDER_MAX
 * bytes) names the holder. Two nodes of a cluster that take it at once
 * conflict at certification; the loser is run again and finds the
 * winner's lease. */
int store_lease_take(const char *job, const char *holder, int ttl_ms, bool *mine, char *who);

/* Ends holder's lease of job now; nothing when someone else holds it. */
int store_lease_give_back(const char *job, const char *holder);

/* The partitions of table in order into out[0..cap), *n of them (0: the
 * table does not exist or is not partitioned). TD_EINVAL when it has more
 * than cap. */
int store_partitions_list(const char *table, struct day_partition *out, int cap, int *n);

/* Splits one partition per day from from_day to to_day (inclusive) off
 * p_future, in one statement. Another instance doing the same first is not
 * an error: TD_ECONFLICT then, and the caller lists again next round. */
int store_partitions_add(const char *table, int64_t from_day, int64_t to_day);

/* Drops partition name of table; TD_ECONFLICT when it is gone already. */
int store_partition_drop(const char *table, const char *name);

/* Runs a retained table's guard_sql or oldest_sql (retention.h) for rows
 * written before day, into *out. */
int store_retention_count(const char *sql, int64_t day, int64_t *out);

#endif
