/* test_payments.c - the payment callback's rules (which outcome a callback
 * has on an order in each state), the txn_id check, and payments_callback()
 * against a fake of its database port. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "fakes.h"

#include "app.h"
#include "config.h"
#include "defenses.h"
#include "err.h"
#include "metrics.h"
#include "payments.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define ORDER_NO "26120100000000000001"

static struct config cfg;
static struct app app;

static int setup(void **state)
{
    (void)state;
    config_defaults(&cfg);
    cfg.tx_retries = 2;
    app = (struct app){.cfg = &cfg, .defenses = DEFENSES_ALL};
    fakes_reset();
    fake_payments_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    config_cleanup(&cfg);
    return 0;
}

static void test_outcome_names(void **state)
{
    (void)state;
    /* The contract's words, also stored in payments.outcome. */
    static const struct {
        enum pay_outcome oc;
        const char *name;
    } names[] = {
        {PAY_APPLIED, "APPLIED"},
        {PAY_FAILED, "PAYMENT_FAILED"},
        {PAY_DUPLICATE, "DUPLICATE_PAYMENT"},
        {PAY_LATE, "LATE_PAYMENT"},
        {PAY_MISMATCH, "AMOUNT_MISMATCH"},
    };
    assert_int_equal(sizeof names / sizeof names[0], PAY_OUTCOME_COUNT);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        assert_string_equal(pay_outcome_name(names[i].oc), names[i].name);
        enum pay_outcome back = PAY_OUTCOME_COUNT;
        assert_true(pay_outcome_parse(names[i].name, &back));
        assert_int_equal(back, names[i].oc);
    }
    assert_string_equal(pay_outcome_name(PAY_OUTCOME_COUNT), "UNKNOWN");
    enum pay_outcome oc = PAY_LATE;
    assert_false(pay_outcome_parse("applied", &oc));
    assert_false(pay_outcome_parse("FAILED", &oc));
    assert_false(pay_outcome_parse("", &oc));
    assert_int_equal(oc, PAY_LATE);
}

static void test_decide_table(void **state)
{
    (void)state;
    static const struct {
        enum order_status status;
        bool success;
        int64_t paid; /* the order costs 2000 */
        enum pay_outcome want;
    } cases[] = {
        {ORDER_PENDING_PAYMENT, true, 2000, PAY_APPLIED},
        {ORDER_PENDING_PAYMENT, true, 1999, PAY_MISMATCH},
        {ORDER_PENDING_PAYMENT, true, 2001, PAY_MISMATCH},
        {ORDER_PENDING_PAYMENT, true, 0, PAY_MISMATCH},
        {ORDER_PENDING_PAYMENT, false, 2000, PAY_FAILED},
        {ORDER_PENDING_PAYMENT, false, 5, PAY_FAILED},
        /* Paid already by another txn_id: the money came twice. */
        {ORDER_PAID, true, 2000, PAY_DUPLICATE},
        {ORDER_PAID, true, 1, PAY_DUPLICATE},
        {ORDER_TICKETED, true, 2000, PAY_DUPLICATE},
        {ORDER_COMPLETED, true, 2000, PAY_DUPLICATE},
        {ORDER_PAID, false, 2000, PAY_FAILED},
        /* Cancelled (by the user or the sweep) before the money arrived. */
        {ORDER_CANCELLED, true, 2000, PAY_LATE},
        {ORDER_CANCELLED, true, 3, PAY_LATE},
        {ORDER_CANCELLED, false, 2000, PAY_FAILED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct payment_callback cb = {"t1", ORDER_NO, cases[i].paid, cases[i].success};
        enum pay_outcome got = payments_decide(cases[i].status, 2000, &cb);
        if (got != cases[i].want)
            fail_msg("%s, %s %lld: %s, want %s", order_status_name(cases[i].status),
                     cases[i].success ? "SUCCESS" : "FAILED", (long long)cases[i].paid,
                     pay_outcome_name(got), pay_outcome_name(cases[i].want));
    }
}

static void test_txn_id(void **state)
{
    (void)state;
    char s64[TXN_ID_MAX + 1], s65[TXN_ID_MAX + 2];
    memset(s64, 'a', TXN_ID_MAX);
    s64[TXN_ID_MAX] = '\0';
    memset(s65, 'a', TXN_ID_MAX + 1);
    s65[TXN_ID_MAX + 1] = '\0';

    /* The Idempotency-Key's grammar: A-Z a-z 0-9 . _ : - */
    static const char *const good[] = {"t", "txn_2026-12-01:0001", "A.b_C:d-9", "0"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (!payments_txn_id_valid(good[i]))
            fail_msg("refused txn_id '%s'", good[i]);
    }
    assert_true(payments_txn_id_valid(s64));

    static const char *const bad[] = {
        "",     " ",    "t 1",  " t1",        "t1 ", /* utf8mb4_bin ignores trailing spaces: "t1 "
                                                        would be "t1" */
        "t1  ", "t\t1", "t\n1", "t\x01",      "t\x7f",    "a/b",
        "a+b",  "a=b",  "a%20", "t1\xc2\xa0", "\xc3\xa9", "t\xef\xbc\x91", /* fullwidth digit one */
        "a'b",  "a\"b", "a\\b", "a,b",        "a;b",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (payments_txn_id_valid(bad[i]))
            fail_msg("accepted txn_id '%s'", bad[i]);
    }
    assert_false(payments_txn_id_valid(s65));
}

static struct payment_callback callback(void)
{
    return (struct payment_callback){"txn-1", ORDER_NO, 2000, true};
}

static void test_callback_applies(void **state)
{
    (void)state;
    struct payment_callback cb = callback();
    struct payment_result res;
    int64_t applied = metrics_get(M_PAYMENTS_APPLIED);
    assert_int_equal(payments_callback(&app, &cb, &res), TD_OK);
    assert_int_equal(res.outcome, PAY_APPLIED);
    assert_int_equal(res.order_status, ORDER_PAID);
    assert_false(res.replayed);
    assert_string_equal(res.txn_id, "txn-1");
    /* One transaction, with the defence on and the domain's own rules. */
    assert_string_equal(fake_calls, "payment_record");
    assert_true(fake_payments.dedup);
    assert_true(fake_payments.decide_given);
    assert_string_equal(fake_payments.order_no, ORDER_NO);
    assert_int_equal(fake_payments.cb_amount_cents, 2000);
    assert_int_equal(metrics_get(M_PAYMENTS_APPLIED) - applied, 1);
}

static void test_callback_outcome_metrics(void **state)
{
    (void)state;
    static const struct {
        enum order_status status;
        int64_t paid;
        bool success;
        enum pay_outcome want;
        enum metric m;
    } cases[] = {
        {ORDER_PENDING_PAYMENT, 2000, false, PAY_FAILED, M_PAYMENTS_FAILED},
        {ORDER_PENDING_PAYMENT, 1, true, PAY_MISMATCH, M_PAYMENTS_MISMATCH},
        {ORDER_PAID, 2000, true, PAY_DUPLICATE, M_PAYMENTS_DUPLICATE},
        {ORDER_CANCELLED, 2000, true, PAY_LATE, M_PAYMENTS_LATE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fakes_reset();
        fake_payments_reset();
        fake_payments.status = cases[i].status;
        struct payment_callback cb = callback();
        cb.amount_cents = cases[i].paid;
        cb.success = cases[i].success;
        struct payment_result res;
        int64_t before = metrics_get(cases[i].m);
        assert_int_equal(payments_callback(&app, &cb, &res), TD_OK);
        assert_int_equal(res.outcome, cases[i].want);
        assert_int_equal(metrics_get(cases[i].m) - before, 1);
    }
}

static void test_callback_replayed(void **state)
{
    (void)state;
    /* The same txn_id again: its first outcome, counted as a replay only. */
    fake_payments.replayed = true;
    fake_payments.outcome = PAY_APPLIED;
    fake_payments.status = ORDER_PAID;
    struct payment_callback cb = callback();
    struct payment_result res;
    int64_t replayed = metrics_get(M_PAYMENTS_REPLAYED);
    int64_t applied = metrics_get(M_PAYMENTS_APPLIED);
    int64_t duplicate = metrics_get(M_PAYMENTS_DUPLICATE);
    assert_int_equal(payments_callback(&app, &cb, &res), TD_OK);
    assert_true(res.replayed);
    assert_int_equal(res.outcome, PAY_APPLIED);
    assert_int_equal(metrics_get(M_PAYMENTS_REPLAYED) - replayed, 1);
    assert_int_equal(metrics_get(M_PAYMENTS_APPLIED) - applied, 0);
    assert_int_equal(metrics_get(M_PAYMENTS_DUPLICATE) - duplicate, 0);
}

static void test_callback_txn_reused(void **state)
{
    (void)state;
    /* The txn_id is recorded; the callback differs from the recorded one
     * in one respect: a gateway fault, refused, counted, nothing replayed. */
    static const struct {
        const char *order_no; /* "" : the same */
        int64_t amount;       /* -1: the same */
        bool failed;
    } cases[] = {
        {"26120100000000000002", -1, false}, {"", 1999, false}, {"", 0, false}, {"", -1, true},
        {"26120100000000000002", 5, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake_payments_reset();
        fake_payments.replayed = true;
        fake_payments.outcome = PAY_APPLIED;
        fake_payments.status = ORDER_PAID;
        snprintf(fake_payments.seen_order_no, sizeof fake_payments.seen_order_no, "%s",
                 cases[i].order_no);
        fake_payments.seen_amount_cents = cases[i].amount;
        fake_payments.seen_failed = cases[i].failed;
        struct payment_callback cb = callback();
        struct payment_result res;
        int64_t reused = metrics_get(M_PAYMENTS_TXN_REUSED);
        int64_t replayed = metrics_get(M_PAYMENTS_REPLAYED);
        int rc = payments_callback(&app, &cb, &res);
        if (rc != TD_EDUP)
            fail_msg("case %zu: rc %d, want TD_EDUP", i, rc);
        assert_false(res.replayed);
        assert_int_equal(metrics_get(M_PAYMENTS_TXN_REUSED) - reused, 1);
        assert_int_equal(metrics_get(M_PAYMENTS_REPLAYED) - replayed, 0);
    }
}

static void test_same_callback(void **state)
{
    (void)state;
    struct payment_callback cb = callback();
    struct payment_seen seen = {.amount_cents = 2000, .success = true};
    snprintf(seen.txn_id, sizeof seen.txn_id, "txn-1");
    snprintf(seen.order_no, sizeof seen.order_no, ORDER_NO);
    assert_true(payments_same_callback(&seen, &cb));
    struct payment_seen s = seen;
    s.amount_cents = 2001;
    assert_false(payments_same_callback(&s, &cb));
    s = seen;
    s.success = false;
    assert_false(payments_same_callback(&s, &cb));
    s = seen;
    snprintf(s.order_no, sizeof s.order_no, "26120100000000000002");
    assert_false(payments_same_callback(&s, &cb));
    s = seen;
    snprintf(s.txn_id, sizeof s.txn_id, "txn-2");
    assert_false(payments_same_callback(&s, &cb));
}

static void test_callback_dedup_off(void **state)
{
    (void)state;
    app.defenses = DEFENSES_ALL & ~DEFENSE_CALLBACK_DEDUP;
    struct payment_callback cb = callback();
    struct payment_result res;
    assert_int_equal(payments_callback(&app, &cb, &res), TD_OK);
    assert_false(fake_payments.dedup);
}

static void test_callback_implausible_order(void **state)
{
    (void)state;
    /* Not an order number of ours: 404 without a transaction. */
    static const char *const nos[] = {"",
                                      "2612010000000000000",
                                      "261201000000000000012",
                                      "2612010000000000000a",
                                      "../../etc/passwd",
                                      " 6120100000000000001"};
    for (size_t i = 0; i < sizeof nos / sizeof nos[0]; i++) {
        struct payment_callback cb = callback();
        cb.order_no = nos[i];
        struct payment_result res;
        if (payments_callback(&app, &cb, &res) != TD_ENOTFOUND)
            fail_msg("order_no '%s' not refused", nos[i]);
    }
    assert_string_equal(fake_calls, "");
}

static void test_callback_store_errors(void **state)
{
    (void)state;
    static const struct {
        int rcs[4];
        int nrc;
        int want;
        int calls;
    } cases[] = {
        /* Deadlocks are retried, up to tx_retries (2) more times. */
        {{TD_ERETRY, TD_OK}, 2, TD_OK, 2},
        {{TD_ERETRY, TD_ERETRY, TD_OK}, 3, TD_OK, 3},
        {{TD_ERETRY}, 1, TD_ERETRY, 3},
        /* Anything else is answered at once: nothing was recorded. */
        {{TD_EUNAVAIL}, 1, TD_EUNAVAIL, 1},
        {{TD_ENOTFOUND}, 1, TD_ENOTFOUND, 1},
        {{TD_EINTERNAL}, 1, TD_EINTERNAL, 1},
        {{TD_ERETRY, TD_EUNAVAIL}, 2, TD_EUNAVAIL, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fakes_reset();
        fake_payments_reset();
        memcpy(fake_payments.rc, cases[i].rcs, sizeof cases[i].rcs);
        fake_payments.nrc = cases[i].nrc;
        struct payment_callback cb = callback();
        struct payment_result res;
        int64_t applied = metrics_get(M_PAYMENTS_APPLIED);
        int rc = payments_callback(&app, &cb, &res);
        if (rc != cases[i].want || fake_payments.calls != cases[i].calls)
            fail_msg("case %zu: rc %d after %d calls, want %d after %d", i, rc, fake_payments.calls,
                     cases[i].want, cases[i].calls);
        /* Only a recorded outcome is counted. */
        assert_int_equal(metrics_get(M_PAYMENTS_APPLIED) - applied, rc == TD_OK ? 1 : 0);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_outcome_names),
        T(test_decide_table),
        T(test_txn_id),
        T(test_callback_applies),
        T(test_callback_outcome_metrics),
        T(test_callback_replayed),
        T(test_callback_txn_reused),
        T(test_same_callback),
        T(test_callback_dedup_off),
        T(test_callback_implausible_order),
        T(test_callback_store_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
