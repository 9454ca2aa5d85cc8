/* retention.c - the retained tables and the retention plan (retention.h). */
#include "retention.h"

#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define OLDEST_SQL(table)                                                                          \
    "SELECT COALESCE(TIMESTAMPDIFF(SECOND, MIN(created_at), UTC_TIMESTAMP(3)), -1) FROM " table    \
    " WHERE created_day < ?"

/* One retained table: its name, its TICKETD_RETAIN_*_H setting, the count
 * of its rows that are still work (NULL: none ever is), and its metrics,
 * M_*_<m>. */
#define RETAINED(table, setting, work_sql, m)                                                      \
    {                                                                                              \
        table, offsetof(struct config, setting), work_sql, OLDEST_SQL(table),                      \
            M_PARTITIONS_DROPPED_##m, M_RETAINED_ROWS_##m, M_RETAINED_OLDEST_##m                   \
    }

/* Order-related records default to 7 days, consumer rows to at least the
 * stream's redelivery window (config.c checks it). An outbox row still to
 * be relayed and a dead letter still open are work, not history: their
 * partitions wait. A cart's record past its window goes too: its items'
 * orders answer the retry (sql/010). */
const struct retained_table retained_tables[RETAINED_TABLES] = {
    RETAINED("outbox", retain_outbox_h,
             "SELECT COUNT(*) FROM outbox WHERE created_day < ? AND published_at IS NULL", OUTBOX),
    RETAINED("consume_records", retain_consume_records_h, NULL, CONSUME),
    RETAINED("dead_letters", retain_dead_letters_h,
             "SELECT COUNT(*) FROM dead_letters WHERE created_day < ? AND replayed_at IS NULL",
             DEAD_LETTERS),
    RETAINED("idempotency_records", retain_idempotency_records_h, NULL, IDEM),
};

int retention_hours(const struct retained_table *t, const struct config *cfg)
{
    return *(const int *)((const char *)cfg + t->retain_h_offset);
}

int64_t retention_now(const struct config *cfg, int64_t wall)
{
    int64_t day;
    if (cfg->retention_today[0] == '\0' || !parse_day(cfg->retention_today, &day))
        return wall;
    return day * 86400 + wall % 86400;
}

void retention_partition_name(int64_t day, char out[16])
{
    char d[DAY_LEN + 1];
    format_day(day, d);
    snprintf(out, 16, "p%.4s%.2s%.2s", d, d + 5, d + 8);
}

/* A partition this job made: pYYYYMMDD whose bound is the day after. */
static bool is_day_partition(const struct day_partition *p)
{
    char want[16];
    if (p->end_day == INT64_MAX || p->end_day < 1)
        return false;
    retention_partition_name(p->end_day - 1, want);
    return strcmp(p->name, want) == 0;
}

static int64_t floor_day(int64_t s)
{
    return s >= 0 ? s / 86400 : -((-s + 86399) / 86400);
}

void retention_plan_make(const struct day_partition *parts, int n, int64_t now_s, int ahead_days,
                         int retain_h, struct retention_plan *out)
{
    int64_t today = floor_day(now_s);
    *out = (struct retention_plan){.add_from = 1, .add_to = 0, .drop = 0};
    if (n == 0)
        return;
    if (parts[n - 1].end_day == INT64_MAX) {
        /* After the last bounded partition, or from today when there is
         * none or the job has not run for days: the first new partition
         * then holds everything before it too, and is kept its window. */
        int64_t next = n >= 2 ? parts[n - 2].end_day : today;
        out->add_from = next > today ? next : today;
        out->add_to = today + ahead_days;
    }
    for (int i = 0; i < n && is_day_partition(&parts[i]); i++) {
        if (parts[i].end_day * 86400 + (int64_t)retain_h * 3600 > now_s)
            break;
        out->drop++;
    }
}
