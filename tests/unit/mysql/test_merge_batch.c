/* The pure part of merged orders: the two texts of a batch (sessions
 * locked once each in ascending order; one INSERT for the orders placed,
 * one stock update per session) and the decisions taken from the first
 * trip's answer, order by order, first come first served. */
#include "err.h"
#include "merge_batch.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define MAXO 6

struct fixture {
    struct order_draft d[MAXO];
    struct merge_order o[MAXO];
    struct merge_order *ptr[MAXO];
    char no[MAXO][21];
    char key[MAXO][16];
};

static void fixture_init(struct fixture *f, const int64_t *sessions, int n)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < n; i++) {
        snprintf(f->no[i], sizeof f->no[i], "2612020000000000000%c", (char)('0' + i));
        snprintf(f->key[i], sizeof f->key[i], "key-%d", i);
        f->d[i] = (struct order_draft){.order_no = f->no[i],
                                       .user_id = 10 + i,
                                       .session_id = sessions[i],
                                       .request_id = f->key[i],
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

static struct db_batch_row row_of(const char *const *vals, int n, unsigned long *lens)
{
    for (int i = 0; i < n; i++)
        lens[i] = vals[i] != NULL ? strlen(vals[i]) : 0;
    return (struct db_batch_row){vals, lens, n};
}

/* Feeds the first trip's row of one session: id, stock, price. */
static int session_row(struct merge_plan *p, const char *id, const char *stock, const char *price)
{
    unsigned long lens[3];
    const char *v[] = {id, stock, price};
    struct db_batch_row r = row_of(v, 3, lens);
    return merge_plan_row(p, 1, &r);
}

static int existing_row(struct merge_plan *p, const char *user, const char *key)
{
    unsigned long lens[2];
    const char *v[] = {user, key};
    struct db_batch_row r = row_of(v, 2, lens);
    return merge_plan_row(p, 2, &r);
}

static int order_row(struct merge_plan *p, const char *id, const char *no, const char *amount)
{
    unsigned long lens[3];
    const char *v[] = {id, no, amount};
    struct db_batch_row r = row_of(v, 3, lens);
    return merge_plan_row(p, 0, &r);
}

static void test_sessions_locked_once_ascending(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {9, 3, 9, 5};
    struct merge_plan p;
    fixture_init(&f, s, 4);
    merge_plan_lock(&p, f.ptr, 4);
    assert_int_equal(p.nsessions, 3);
    assert_int_equal(p.sessions[0], 3);
    assert_int_equal(p.sessions[1], 5);
    assert_int_equal(p.sessions[2], 9);
    assert_int_equal(f.o[0].slot, 2);
    assert_int_equal(f.o[1].slot, 0);
    assert_int_equal(f.o[2].slot, 2);
    assert_int_equal(f.o[3].slot, 1);
    /* One locking read for all sessions, ids ascending, then the keys. */
    assert_int_equal(count(p.sql, "FOR UPDATE"), 1);
    assert_non_null(strstr(p.sql, "ORDER BY id FOR UPDATE"));
    assert_int_equal(p.args[0].i, 3);
    assert_int_equal(p.args[1].i, 5);
    assert_int_equal(p.args[2].i, 9);
    assert_int_equal(count(p.sql, "(?, ?)"), 4);
    assert_int_equal(placeholders(p.sql), p.nargs);
    assert_int_equal(count(p.sql, ";"), 2); /* START, the sessions, the keys */
    assert_null(strstr(p.sql, "COMMIT"));
    for (int i = 0; i < 4; i++)
        assert_int_equal(f.o[i].rc, TD_EINTERNAL);
    merge_plan_free(&p);
}

static void test_outcomes_first_come(void **state)
{
    (void)state;
    struct fixture f;
    /* Session 1 has 2 seats at 500; session 2 does not exist. */
    const int64_t s[] = {1, 1, 2, 1, 1, 1};
    struct merge_plan p;
    fixture_init(&f, s, 6);
    f.d[3].quantity = 2;
    f.d[5].request_id = f.key[0]; /* a copy of order 0 */
    f.d[5].user_id = f.d[0].user_id;
    merge_plan_lock(&p, f.ptr, 6);
    assert_int_equal(session_row(&p, "1", "2", "500"), TD_OK);
    assert_int_equal(existing_row(&p, "11", "key-1"), TD_OK);
    assert_int_equal(merge_plan_write(&p, false), 2);
    assert_int_equal(f.o[1].rc, TD_EDUP);      /* its key has an order */
    assert_int_equal(f.o[2].rc, TD_ENOTFOUND); /* no such session */
    assert_int_equal(f.o[3].rc, TD_ECONFLICT); /* 2 seats wanted, 1 left */
    assert_int_equal(f.o[5].rc, TD_EDUP);      /* its copy went first */
    assert_int_equal(f.o[0].rc, TD_EINTERNAL); /* placed, not yet answered */
    assert_int_equal(f.o[4].rc, TD_EINTERNAL); /* later and smaller: it fits */
    assert_int_equal(count(p.sql, "INSERT INTO orders"), 1);
    assert_int_equal(count(p.sql, "'PENDING_PAYMENT'"), 2);
    assert_int_equal(count(p.sql, "UPDATE sessions"), 1);
    /* The decrement counts the rows inserted, not a number decided before. */
    assert_non_null(strstr(p.sql, "stock = stock - (SELECT COALESCE(SUM(quantity), 0) FROM orders "
                                  "WHERE order_no IN (?, ?))"));
    assert_null(strstr(p.sql, "order_tokens"));
    assert_int_equal(placeholders(p.sql), p.nargs);
    assert_non_null(strstr(p.sql, "; COMMIT"));
    assert_int_equal(p.taken[0], 2);
    assert_int_equal(order_row(&p, "77", f.no[0], "500"), TD_OK);
    assert_int_equal(order_row(&p, "78", f.no[4], "500"), TD_OK);
    assert_int_equal(f.o[0].rc, TD_OK);
    assert_int_equal(f.o[0].id, 77);
    assert_int_equal(f.o[0].amount, 500);
    assert_int_equal(f.o[4].id, 78);
    /* A row for an order the batch did not place is a broken answer. */
    assert_int_equal(order_row(&p, "79", f.no[3], "1000"), TD_EINTERNAL);
    merge_plan_free(&p);
}

static void test_tokens_only_for_placed_orders_with_one(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1, 1};
    struct merge_plan p;
    fixture_init(&f, s, 3);
    f.d[1].token_key = "abc";
    f.d[2].token_key = "def"; /* sold out: spends nothing */
    merge_plan_lock(&p, f.ptr, 3);
    assert_int_equal(session_row(&p, "1", "2", "100"), TD_OK);
    assert_int_equal(merge_plan_write(&p, true), 2);
    assert_int_equal(count(p.sql, "INSERT INTO order_tokens"), 1);
    assert_int_equal(count(p.sql, "WHEN ? THEN ?"), 1);
    assert_int_equal(placeholders(p.sql), p.nargs);
    /* Open: no COMMIT. */
    assert_null(strstr(p.sql, "COMMIT"));
    merge_plan_free(&p);
}

static void test_nothing_placed_is_a_commit(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {4, 4};
    struct merge_plan p;
    fixture_init(&f, s, 2);
    merge_plan_lock(&p, f.ptr, 2);
    assert_int_equal(session_row(&p, "4", "0", "100"), TD_OK);
    assert_int_equal(merge_plan_write(&p, false), 0);
    assert_string_equal(p.sql, "COMMIT");
    assert_int_equal(f.o[0].rc, TD_ECONFLICT);
    assert_int_equal(f.o[1].rc, TD_ECONFLICT);
    /* No statement of that trip answers rows. */
    assert_int_equal(order_row(&p, "1", f.no[0], "100"), TD_EINTERNAL);
    merge_plan_free(&p);
}

static void test_bad_rows_refused(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1};
    struct merge_plan p;
    unsigned long lens[1];
    fixture_init(&f, s, 2);
    merge_plan_lock(&p, f.ptr, 2);
    assert_int_equal(session_row(&p, "2", "5", "100"), TD_EINTERNAL); /* not asked for */
    assert_int_equal(session_row(&p, "1", "-1", "100"), TD_EINTERNAL);
    assert_int_equal(session_row(&p, "1", NULL, "100"), TD_EINTERNAL);
    assert_int_equal(existing_row(&p, "99", "key-0"), TD_EINTERNAL); /* no such key here */
    const char *one[] = {"1"};
    struct db_batch_row r = row_of(one, 1, lens);
    assert_int_equal(merge_plan_row(&p, 1, &r), TD_EINTERNAL);
    assert_int_equal(merge_plan_row(&p, 0, &r), TD_EINTERNAL); /* START answers none */
    assert_int_equal(session_row(&p, "1", "5", "100"), TD_OK);
    assert_int_equal(merge_plan_write(&p, false), 2);
    /* The priced amount must be the one written. */
    assert_int_equal(order_row(&p, "5", f.no[0], "999"), TD_EINTERNAL);
    assert_int_equal(order_row(&p, "5", f.no[0], "100"), TD_OK);
    assert_int_equal(order_row(&p, "6", f.no[0], "100"), TD_EINTERNAL); /* twice */
    merge_plan_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sessions_locked_once_ascending),
        cmocka_unit_test(test_outcomes_first_come),
        cmocka_unit_test(test_tokens_only_for_placed_orders_with_one),
        cmocka_unit_test(test_nothing_placed_is_a_commit),
        cmocka_unit_test(test_bad_rows_refused),
    };
    return cmocka_run_group_tests_name("merge_batch", tests, NULL, NULL);
}
