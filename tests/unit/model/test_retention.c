/* test_retention.c - the retention job's plan (what to split off p_future,
 * what is past retention), its clock, and the day arithmetic under it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "retention.h"
#include "util.h"

#include <stdbool.h>
#include <string.h>

#define DEC01 20788 /* 2026-12-01 */

static void test_days_round_trip(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        bool ok;
        int64_t day;
    } cases[] = {
        {"1970-01-01", true, 0},
        {"2026-12-01", true, DEC01},
        {"2000-02-29", true, 11016},
        {"2026-02-29", false, 0},
        {"1900-01-01", false, 0},
        {"2026-13-01", false, 0},
        {"2026-04-31", false, 0},
        {"2026-1-01", false, 0},
        {"2026-12-01x", false, 0},
        {"9999-12-31", true, 2932896},
        {"", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t d = -1;
        char back[DAY_LEN + 1];
        assert_int_equal(parse_day(cases[i].s, &d), cases[i].ok);
        if (!cases[i].ok)
            continue;
        assert_int_equal(d, cases[i].day);
        format_day(d, back);
        assert_string_equal(back, cases[i].s);
    }
}

static void test_partition_name(void **state)
{
    char name[16];
    (void)state;
    retention_partition_name(DEC01, name);
    assert_string_equal(name, "p20261201");
}

/* Day partitions for [first, last], then p_future. */
static int layout(struct day_partition *p, int64_t first, int64_t last)
{
    int n = 0;
    for (int64_t d = first; d <= last; d++, n++) {
        retention_partition_name(d, p[n].name);
        p[n].end_day = d + 1;
    }
    strcpy(p[n].name, "p_future");
    p[n].end_day = INT64_MAX;
    return n + 1;
}

static void test_plan_table(void **state)
{
    (void)state;
    const int64_t noon = (int64_t)DEC01 * 86400 + 12 * 3600;
    static const struct {
        const char *what;
        int64_t first, last; /* first > last: only p_future */
        int64_t now_delta_s;
        int retain_h;
        int64_t add_from, add_to;
        int drop;
    } cases[] = {
        {"fresh table: today and 3 ahead", 1, 0, 0, 168, DEC01, DEC01 + 3, 0},
        {"up to date: nothing", DEC01 - 2, DEC01 + 3, 0, 168, DEC01 + 4, DEC01 + 3, 0},
        {"a day later: one more", DEC01 - 2, DEC01 + 3, 86400, 168, DEC01 + 4, DEC01 + 4, 0},
        /* Day D's rows are all 24 h old at the end of D + 1. */
        {"24 h: yesterday kept until its end plus a day", DEC01 - 1, DEC01 + 3, 0, 24, DEC01 + 4,
         DEC01 + 3, 0},
        {"24 h: the day before yesterday goes", DEC01 - 2, DEC01 + 3, 0, 24, DEC01 + 4, DEC01 + 3,
         1},
        {"7 days: ten days back, three go", DEC01 - 10, DEC01 + 3, 0, 168, DEC01 + 4, DEC01 + 3, 3},
        {"a job away for weeks starts at today", DEC01 - 30, DEC01 - 20, 0, 168, DEC01, DEC01 + 3,
         11},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct day_partition p[64];
        struct retention_plan plan;
        int n = layout(p, cases[i].first, cases[i].last);
        retention_plan_make(p, n, noon + cases[i].now_delta_s, 3, cases[i].retain_h, &plan);
        print_message("%s\n", cases[i].what);
        assert_int_equal(plan.add_from, cases[i].add_from);
        assert_int_equal(plan.add_to, cases[i].add_to);
        assert_int_equal(plan.drop, cases[i].drop);
    }
}

/* Only pYYYYMMDD partitions with their own bound are ever dropped, and a
 * table not ending in MAXVALUE gets nothing added. */
static void test_plan_leaves_foreign_partitions(void **state)
{
    struct day_partition p[3] = {
        {"p_old", 10, 0}, {"p20261201", DEC01 + 1, 0}, {"p_future", INT64_MAX, 0}};
    struct retention_plan plan;
    (void)state;
    retention_plan_make(p, 3, (int64_t)(DEC01 + 100) * 86400, 3, 24, &plan);
    assert_int_equal(plan.drop, 0);
    struct day_partition q[1] = {{"p20261130", DEC01, 0}};
    retention_plan_make(q, 1, (int64_t)(DEC01 + 100) * 86400, 3, 24, &plan);
    assert_true(plan.add_from > plan.add_to);
    assert_int_equal(plan.drop, 1);
}

static void test_now_moves_with_the_setting(void **state)
{
    struct config cfg = {0};
    (void)state;
    cfg.retention_today = (char *)"";
    assert_int_equal(retention_now(&cfg, 1000), 1000);
    cfg.retention_today = (char *)"2026-12-09";
    assert_int_equal(retention_now(&cfg, (int64_t)DEC01 * 86400 + 5),
                     (int64_t)(DEC01 + 8) * 86400 + 5);
}

static void test_every_table_has_its_setting(void **state)
{
    struct config cfg = {0};
    (void)state;
    cfg.retain_outbox_h = 1;
    cfg.retain_consume_records_h = 2;
    cfg.retain_dead_letters_h = 3;
    cfg.retain_idempotency_records_h = 4;
    for (int i = 0; i < RETAINED_TABLES; i++)
        assert_int_equal(retention_hours(&retained_tables[i], &cfg), i + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_days_round_trip),
        cmocka_unit_test(test_partition_name),
        cmocka_unit_test(test_plan_table),
        cmocka_unit_test(test_plan_leaves_foreign_partitions),
        cmocka_unit_test(test_now_moves_with_the_setting),
        cmocka_unit_test(test_every_table_has_its_setting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
