/* retention_mysql.c - partitions on MariaDB/MySQL (store_retention.h).
 * The DDL names change every day, so it runs as text (db_exec_text), built
 * only from the table names of retention.c and from partition names this
 * file writes; everything else is a prepared statement. */
#include "store_retention.h"

#include "db.h"
#include "err.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

/* TO_DAYS('1970-01-01'): PARTITION_DESCRIPTION holds TO_DAYS bounds. */
#define TO_DAYS_EPOCH 719528

static const char sql_partitions[] =
    "SELECT PARTITION_NAME, COALESCE(PARTITION_DESCRIPTION, ''), COALESCE(TABLE_ROWS, 0) "
    "FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? "
    "AND PARTITION_NAME IS NOT NULL ORDER BY PARTITION_ORDINAL_POSITION";

struct list_ctx {
    struct day_partition *out;
    int cap, n;
    char name[65], desc[32];
    int64_t rows;
};

static int list_each(void *p)
{
    struct list_ctx *l = p;
    int64_t to_days;
    if (l->n == l->cap)
        return TD_EINVAL;
    struct day_partition *d = &l->out[l->n++];
    snprintf(d->name, sizeof d->name, "%s", l->name);
    d->rows = l->rows;
    if (strcmp(l->desc, "MAXVALUE") == 0)
        d->end_day = INT64_MAX;
    else if (parse_i64(l->desc, TO_DAYS_EPOCH, INT64_MAX / 2, &to_days))
        d->end_day = to_days - TO_DAYS_EPOCH;
    else
        d->end_day = 0; /* a bound before 1970, or not by TO_DAYS: never ours to drop */
    return 0;
}

int store_partitions_list(const char *table, struct day_partition *out, int cap, int *n)
{
    struct list_ctx l = {.out = out, .cap = cap};
    struct db_arg args[] = {DB_S(table)};
    struct db_col cols[] = {DB_COL_S(l.name), DB_COL_S(l.desc), DB_COL_I(&l.rows)};
    *n = 0;
    int rc = db_read(sql_partitions, args, 1, cols, 3, list_each, &l);
    if (rc == TD_ENOTFOUND)
        rc = TD_OK;
    if (rc == TD_OK)
        *n = l.n;
    return rc;
}

/* The lease is free, run out or the caller's own: take it. MariaDB runs an
 * ON DUPLICATE KEY UPDATE's assignments left to right, each seeing the
 * ones before it, so expires_at moves only when holder is now the
 * caller's. The row's lock makes two takes on one server take turns. */
static const char sql_lease_take[] =
    "INSERT INTO job_leases (job, holder, expires_at) "
    "VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND) "
    "ON DUPLICATE KEY UPDATE "
    "holder = IF(expires_at <= UTC_TIMESTAMP(6) OR holder = VALUES(holder), VALUES(holder), "
    "holder), "
    "expires_at = IF(holder = VALUES(holder), VALUES(expires_at), expires_at)";

static const char sql_lease_holder[] = "SELECT holder FROM job_leases WHERE job = ?";

static const char sql_lease_give_back[] =
    "UPDATE job_leases SET expires_at = UTC_TIMESTAMP(6) WHERE job = ? AND holder = ?";

int store_lease_take(const char *job, const char *holder, int ttl_ms, bool *mine, char *who)
{
    struct db_conn *c;
    char found[STORE_LEASE_HOLDER_MAX] = "";
    *mine = false;
    who[0] = '\0';
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg take[] = {DB_S(job), DB_S(holder), DB_I((long long)ttl_ms * 1000)};
    rc = db_exec(c, sql_lease_take, take, 3, NULL, NULL);
    if (rc != TD_OK)
        return rc;
    struct db_arg key[] = {DB_S(job)};
    struct db_col cols[] = {DB_COL_S(found)};
    rc = db_row(c, sql_lease_holder, key, 1, cols, 1);
    if (rc != TD_OK)
        return rc;
    snprintf(who, STORE_LEASE_HOLDER_MAX, "%s", found);
    *mine = strcmp(found, holder) == 0;
    return TD_OK;
}

int store_lease_give_back(const char *job, const char *holder)
{
    struct db_conn *c;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    struct db_arg args[] = {DB_S(job), DB_S(holder)};
    return db_exec(c, sql_lease_give_back, args, 2, NULL, NULL);
}

/* A race with another instance doing the same comes back as TD_ECONFLICT
 * (db.c maps the partition errors). */
static int ddl(const char *text)
{
    struct db_conn *c;
    int rc = db_conn_get(&c);
    if (rc != TD_OK)
        return rc;
    return db_exec_text(c, text);
}

int store_partitions_add(const char *table, int64_t from_day, int64_t to_day)
{
    char text[8192], name[16], bound[DAY_LEN + 1];
    size_t len = (size_t)snprintf(text, sizeof text,
                                  "ALTER TABLE %s REORGANIZE PARTITION p_future INTO (", table);
    for (int64_t day = from_day; day <= to_day && len < sizeof text; day++) {
        retention_partition_name(day, name);
        format_day(day + 1, bound);
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "PARTITION %s VALUES LESS THAN (TO_DAYS('%s')), ", name, bound);
    }
    if (len < sizeof text)
        len += (size_t)snprintf(text + len, sizeof text - len,
                                "PARTITION p_future VALUES LESS THAN MAXVALUE)");
    if (len >= sizeof text) {
        log_error("retention: too many days to add to %s at once", table);
        return TD_EINVAL;
    }
    return ddl(text);
}

int store_partition_drop(const char *table, const char *name)
{
    char text[256];
    snprintf(text, sizeof text, "ALTER TABLE %s DROP PARTITION %s", table, name);
    return ddl(text);
}

int store_retention_count(const char *sql, int64_t day, int64_t *out)
{
    char d[DAY_LEN + 1];
    format_day(day, d);
    *out = 0;
    struct db_arg args[] = {DB_S(d)};
    struct db_col cols[] = {DB_COL_I(out)};
    return db_read_row(sql, args, 1, cols, 1);
}
