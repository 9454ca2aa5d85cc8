/* The pure part of merged orders: the batch's text (sessions locked once
 * each in ascending order, every order's statements in arrival order) and
 * the mapping of the server's answer onto each order's outcome. */
#include "err.h"
#include "merge_batch.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

struct fixture {
    struct order_draft d[4];
    struct merge_order o[4];
    struct merge_order *ptr[4];
    char no[4][21];
};

static void fixture_init(struct fixture *f, const int64_t *sessions, int n)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < n; i++) {
        snprintf(f->no[i], sizeof f->no[i], "2612020000000000000%c", (char)('0' + i));
        f->d[i] = (struct order_draft){.order_no = f->no[i],
                                       .user_id = 10 + i,
                                       .session_id = sessions[i],
                                       .request_id = "key",
                                       .quantity = 1};
        f->o[i] = (struct merge_order){.d = &f->d[i], .db_now = "2026-12-02 00:00:00.000"};
        f->ptr[i] = &f->o[i];
    }
}

/* Counts non-overlapping occurrences of needle in hay. */
static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + strlen(needle), needle))
        n++;
    return n;
}

static int placeholders(const char *sql)
{
    return count(sql, "?");
}

static void test_sessions_locked_once_ascending(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {9, 3, 9, 5};
    struct merge_plan p;
    fixture_init(&f, s, 4);
    merge_plan_build(&p, f.ptr, 4, false);
    assert_int_equal(p.nsessions, 3);
    assert_int_equal(p.sessions[0], 3);
    assert_int_equal(p.sessions[1], 5);
    assert_int_equal(p.sessions[2], 9);
    assert_int_equal(f.o[0].slot, 2);
    assert_int_equal(f.o[1].slot, 0);
    assert_int_equal(f.o[2].slot, 2);
    assert_int_equal(f.o[3].slot, 1);
    /* The locks come first, one per session, in the order of the slots
     * (their ids are the arguments right after START TRANSACTION). */
    assert_int_equal(count(p.sql, "FOR UPDATE"), 3);
    const char *lock0 = strstr(p.sql, "@td_s0 FROM sessions");
    const char *lock2 = strstr(p.sql, "@td_s2 FROM sessions");
    assert_non_null(lock0);
    assert_non_null(lock2);
    assert_true(lock0 < lock2);
    assert_true(lock2 < strstr(p.sql, "INSERT IGNORE"));
    assert_int_equal(p.args[0].i, 3);
    assert_int_equal(p.args[1].i, 5);
    assert_int_equal(p.args[2].i, 9);
    assert_int_equal(count(p.sql, "INSERT IGNORE INTO orders"), 4);
    assert_int_equal(count(p.sql, "UPDATE sessions"), 3);
    assert_int_equal(placeholders(p.sql), p.nargs);
    assert_int_equal(count(p.sql, ";"), p.at_rows + 1); /* the COMMIT follows the last select */
    assert_non_null(strstr(p.sql, "; COMMIT"));
    merge_plan_free(&p);
}

static void test_token_statement_only_for_orders_with_one(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1};
    struct merge_plan p;
    fixture_init(&f, s, 2);
    f.d[1].token_key = "abc";
    merge_plan_build(&p, f.ptr, 2, true);
    assert_int_equal(count(p.sql, "INSERT INTO order_tokens"), 1);
    assert_int_equal(placeholders(p.sql), p.nargs);
    /* Open: no COMMIT, the final select is the last statement. */
    assert_null(strstr(p.sql, "COMMIT"));
    assert_int_equal(count(p.sql, ";"), p.at_rows);
    /* START, 1 lock, 2+3 for the orders, 1 update, codes, rows. */
    assert_int_equal(p.at_codes, 1 + 1 + 2 + 3 + 1);
    assert_int_equal(p.at_rows, p.at_codes + 1);
    merge_plan_free(&p);
}

static struct db_batch_row row_of(const char *const *vals, int n, unsigned long *lens)
{
    for (int i = 0; i < n; i++)
        lens[i] = vals[i] != NULL ? strlen(vals[i]) : 0;
    return (struct db_batch_row){vals, lens, n};
}

static void test_outcomes_per_order(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1, 2, 1};
    struct merge_plan p;
    unsigned long lens[4];
    fixture_init(&f, s, 4);
    merge_plan_build(&p, f.ptr, 4, false);
    for (int i = 0; i < 4; i++)
        assert_int_equal(f.o[i].rc, TD_EINTERNAL);
    const char *codes[] = {"0", "1", "2", "3"};
    struct db_batch_row r = row_of(codes, 4, lens);
    assert_int_equal(merge_plan_row(&p, p.at_codes, &r), TD_OK);
    /* Created, but without its row yet: not an answer. */
    assert_int_equal(f.o[0].rc, TD_EINTERNAL);
    assert_int_equal(f.o[1].rc, TD_EDUP);
    assert_int_equal(f.o[2].rc, TD_ENOTFOUND);
    assert_int_equal(f.o[3].rc, TD_ECONFLICT);
    const char *made[] = {"77", f.no[0], "1500"};
    r = row_of(made, 3, lens);
    assert_int_equal(merge_plan_row(&p, p.at_rows, &r), TD_OK);
    assert_int_equal(f.o[0].rc, TD_OK);
    assert_int_equal(f.o[0].id, 77);
    assert_int_equal(f.o[0].amount, 1500);
    /* A row for an order its code did not create is a broken answer. */
    const char *stray[] = {"78", f.no[1], "1500"};
    r = row_of(stray, 3, lens);
    assert_int_equal(merge_plan_row(&p, p.at_rows, &r), TD_EINTERNAL);
    /* As is a row from a statement that answers none. */
    assert_int_equal(merge_plan_row(&p, 1, &r), TD_EINTERNAL);
    merge_plan_free(&p);
}

static void test_bad_codes_refused(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1};
    struct merge_plan p;
    unsigned long lens[2];
    fixture_init(&f, s, 2);
    merge_plan_build(&p, f.ptr, 2, false);
    const char *wrong_width[] = {"0"};
    struct db_batch_row r = row_of(wrong_width, 1, lens);
    assert_int_equal(merge_plan_row(&p, p.at_codes, &r), TD_EINTERNAL);
    const char *unknown[] = {"0", "9"};
    r = row_of(unknown, 2, lens);
    assert_int_equal(merge_plan_row(&p, p.at_codes, &r), TD_EINTERNAL);
    const char *null[] = {NULL, "0"};
    r = row_of(null, 2, lens);
    assert_int_equal(merge_plan_row(&p, p.at_codes, &r), TD_EINTERNAL);
    merge_plan_free(&p);
}

static void test_code_mapping(void **state)
{
    (void)state;
    assert_int_equal(merge_code_rc(MERGE_CREATED), TD_OK);
    assert_int_equal(merge_code_rc(MERGE_DUPLICATE), TD_EDUP);
    assert_int_equal(merge_code_rc(MERGE_NO_SESSION), TD_ENOTFOUND);
    assert_int_equal(merge_code_rc(MERGE_SOLD_OUT), TD_ECONFLICT);
    assert_int_equal(merge_code_rc(MERGE_NOT_INSERTED), TD_ERETRY);
    assert_int_equal(merge_code_rc(5), TD_EINTERNAL);
    assert_int_equal(merge_code_rc(-1), TD_EINTERNAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sessions_locked_once_ascending),
        cmocka_unit_test(test_token_statement_only_for_orders_with_one),
        cmocka_unit_test(test_outcomes_per_order),
        cmocka_unit_test(test_bad_codes_refused),
        cmocka_unit_test(test_code_mapping),
    };
    return cmocka_run_group_tests_name("merge_batch", tests, NULL, NULL);
}
