/* The pure part of placing new orders: the one text of a batch (one round
 * trip, one argument: the orders as JSON, in arrival order) and the reading
 * of each order's outcome from the answer, including answers that do not
 * read, which must never fail orders that committed. */
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
                                       .quantity = 1 + i};
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

/* Feeds the answer's row of statement at: one value. */
static int answer(struct merge_plan *p, int at, const char *v)
{
    unsigned long len = v != NULL ? strlen(v) : 0;
    const char *vals[] = {v};
    struct db_batch_row r = {vals, &len, 1};
    return merge_plan_row(p, at, &r);
}

static void test_one_text_one_trip(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {7, 3, 7};
    struct merge_plan p;
    fixture_init(&f, s, 3);
    merge_plan_init(&p, f.ptr, 3, false);
    /* The whole transaction in one statement, its one argument the
     * orders, its outcomes the first (and only) result set. */
    assert_string_equal(p.sql, "CALL place_batch(?)");
    assert_int_equal(p.how, DB_BATCH_CALL);
    assert_int_equal(p.outcomes_at, 0);
    assert_int_equal(count(p.sql, "?"), 1);
    assert_int_equal(p.arg.type, DB_STR);
    assert_string_equal(p.json,
                        "[{\"n\":\"26120200000000000000\",\"u\":10,\"s\":7,\"r\":\"key-0\",\"q\":1,"
                        "\"c\":\"2026-12-02 00:00:00.000\"},"
                        "{\"n\":\"26120200000000000001\",\"u\":11,\"s\":3,\"r\":\"key-1\",\"q\":2,"
                        "\"c\":\"2026-12-02 00:00:00.000\"},"
                        "{\"n\":\"26120200000000000002\",\"u\":12,\"s\":7,\"r\":\"key-2\",\"q\":3,"
                        "\"c\":\"2026-12-02 00:00:00.000\"}]");
    merge_plan_free(&p);
    /* Left open for the caller's COMMIT: the transaction's statements one
     * by one, without it, the outcomes the third statement's row. */
    merge_plan_init(&p, f.ptr, 3, true);
    assert_string_equal(p.sql, "START TRANSACTION; CALL place_orders(?); SELECT @placed_orders");
    assert_int_equal(p.how, DB_BATCH_OPEN);
    assert_int_equal(p.outcomes_at, 2);
    assert_int_equal(answer(&p, 2, "1 P 5 100,2 S,3 N,"), TD_OK);
    assert_int_equal(p.bad_rows, 0);
    merge_plan_free(&p);
}

static void test_json_escapes_and_options(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1};
    struct merge_plan p;
    fixture_init(&f, s, 2);
    f.d[0].request_id = "a\"b\\c\x01ü";
    f.d[0].token_key = "abc123";
    f.d[1].filter_missed = true;
    merge_plan_init(&p, f.ptr, 2, false);
    assert_non_null(strstr(p.json, "\"r\":\"a\\\"b\\\\c\\u0001ü\""));
    assert_non_null(strstr(p.json, "\"t\":\"abc123\"}"));
    assert_int_equal(count(p.json, "\"t\":"), 1); /* only the order that spends one */
    assert_non_null(strstr(p.json, "\"m\":1}]"));
    assert_int_equal(count(p.json, "\"m\":"), 1);
    merge_plan_free(&p);
}

static void test_outcomes_each_its_own(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1, 2, 3, 1, 1};
    struct merge_plan p;
    fixture_init(&f, s, 6);
    merge_plan_init(&p, f.ptr, 6, false);
    /* Refusals come from the first pass, placements and sold-outs from
     * the second: in any order. */
    assert_int_equal(answer(&p, 0, "2 D,4 N,5 T,6 R,1 P 41 1500,3 S,"), TD_OK);
    assert_int_equal(p.bad_rows, 0);
    assert_int_equal(merge_plan_done(&p), 0);
    assert_int_equal(f.o[0].rc, TD_OK);
    assert_int_equal(f.o[0].id, 41);
    assert_int_equal(f.o[0].amount, 1500);
    assert_int_equal(f.o[1].rc, TD_EDUP);
    assert_int_equal(f.o[2].rc, TD_ECONFLICT);
    assert_int_equal(f.o[3].rc, TD_ENOTFOUND);
    assert_int_equal(f.o[4].rc, TD_ESPENT);
    assert_int_equal(f.o[5].rc, TD_ERETRY);
    merge_plan_free(&p);
}

static void test_lock_waited_in_vain(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 2, 2, 3, 4};
    struct merge_plan p;
    fixture_init(&f, s, 5);
    merge_plan_init(&p, f.ptr, 5, false);
    /* Session 2's row was held past the lock wait: its orders are not
     * kept, and say so; so was order 5's key; their neighbours are
     * placed. */
    assert_int_equal(answer(&p, 0, "5 K,1 P 7 500,2 L,3 L,4 P 8 500,"), TD_OK);
    assert_int_equal(p.bad_rows, 0);
    assert_int_equal(merge_plan_done(&p), 0);
    assert_int_equal(f.o[0].rc, TD_OK);
    assert_int_equal(f.o[1].rc, MERGE_LOCKED);
    assert_int_equal(f.o[2].rc, MERGE_LOCKED);
    assert_int_equal(f.o[3].rc, TD_OK);
    assert_int_equal(f.o[4].rc, MERGE_ALONE);
    merge_plan_free(&p);
}

static void test_copy_of_unplaced_order_goes_alone(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1, 2, 2};
    struct merge_plan p;
    fixture_init(&f, s, 4);
    /* Orders 0 and 1 are copies of one key, as are 2 and 3. */
    f.d[1].user_id = f.d[0].user_id;
    f.d[1].request_id = f.d[0].request_id;
    f.d[3].user_id = f.d[2].user_id;
    f.d[3].request_id = f.d[2].request_id;
    merge_plan_init(&p, f.ptr, 4, false);
    assert_int_equal(answer(&p, 0, "2 D,4 D,1 S,3 P 9 100,"), TD_OK);
    assert_int_equal(merge_plan_done(&p), 0);
    /* The first copy sold out and its row is gone: no order to replay,
     * so its copy is placed alone, for an answer of its own. */
    assert_int_equal(f.o[0].rc, TD_ECONFLICT);
    assert_int_equal(f.o[1].rc, MERGE_ALONE);
    /* The first copy placed: the second replays it. */
    assert_int_equal(f.o[2].rc, TD_OK);
    assert_int_equal(f.o[3].rc, TD_EDUP);
    merge_plan_free(&p);
}

static void test_unreadable_answer_is_unavailable_never_internal(void **state)
{
    (void)state;
    struct fixture f;
    const int64_t s[] = {1, 1, 1};
    struct merge_plan p;
    fixture_init(&f, s, 3);
    merge_plan_init(&p, f.ptr, 3, false);
    /* A row of a statement that answers none, and a row with no value:
     * counted, never an error (the COMMIT ran on the server all the same). */
    assert_int_equal(answer(&p, 1, "1 P 5 100,"), TD_OK);
    assert_int_equal(answer(&p, 0, NULL), TD_OK);
    assert_int_equal(p.bad_rows, 2);
    /* One outcome reads, then one does not: the rest is unknown. */
    assert_int_equal(answer(&p, 0, "1 P 5 100,2 Q,3 S,"), TD_OK);
    assert_int_equal(p.bad_rows, 3);
    assert_int_equal(merge_plan_done(&p), 2);
    assert_int_equal(f.o[0].rc, TD_OK);
    assert_int_equal(f.o[1].rc, TD_EUNAVAIL);
    assert_int_equal(f.o[2].rc, TD_EUNAVAIL);
    merge_plan_free(&p);

    /* An order named twice, or one the batch does not have. */
    merge_plan_init(&p, f.ptr, 3, false);
    assert_int_equal(answer(&p, 0, "1 S,1 P 5 100,"), TD_OK);
    assert_int_equal(answer(&p, 0, "4 S,"), TD_OK);
    assert_int_equal(p.bad_rows, 2);
    assert_int_equal(merge_plan_done(&p), 2);
    assert_int_equal(f.o[0].rc, TD_ECONFLICT);
    merge_plan_free(&p);
}

static void test_outcome_parse(void **state)
{
    (void)state;
    int i;
    char code;
    int64_t id, amount;
    const char *ok = "12 P 345 6700,";
    assert_int_equal(merge_outcome_parse(ok, strlen(ok), &i, &code, &id, &amount), strlen(ok));
    assert_int_equal(i, 12);
    assert_int_equal(code, 'P');
    assert_int_equal(id, 345);
    assert_int_equal(amount, 6700);
    assert_int_equal(merge_outcome_parse("3 S,9 D,", 8, &i, &code, &id, &amount), 4);
    assert_int_equal(code, 'S');
    assert_int_equal(merge_outcome_parse("4 L,", 4, &i, &code, &id, &amount), 4);
    assert_int_equal(code, 'L');
    /* Malformed: no index, index 0 or past the limit, unknown letter, no
     * comma, a placement without its numbers or with id 0, cut short. */
    const char *bad[] = {"S,",         "0 S,",  "257 S,",     "1 Q,",      "1 S",
                         "1 P 5,",     "1 P ,", "1 P 0 100,", "1 P 5 100", "1",
                         "1 P 5 1x0,", "1  S,", "-1 S,"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        assert_int_equal(merge_outcome_parse(bad[k], strlen(bad[k]), &i, &code, &id, &amount), 0);
    /* The length bounds the reading, not the NUL. */
    assert_int_equal(merge_outcome_parse("1 S,", 3, &i, &code, &id, &amount), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_text_one_trip),
        cmocka_unit_test(test_json_escapes_and_options),
        cmocka_unit_test(test_outcomes_each_its_own),
        cmocka_unit_test(test_lock_waited_in_vain),
        cmocka_unit_test(test_copy_of_unplaced_order_goes_alone),
        cmocka_unit_test(test_unreadable_answer_is_unavailable_never_internal),
        cmocka_unit_test(test_outcome_parse),
    };
    return cmocka_run_group_tests_name("merge_batch", tests, NULL, NULL);
}
