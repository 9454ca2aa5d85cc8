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
#include "defences.h"
#include "err.h"
#include "metrics.h"
#include "payments.h"
#include "statemachine.h"
#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORDER_NO "26120100000000000001"

static struct config cfg;
static struct app app;

static int setup(void **state)
{
    (void)state;
    config_defaults(&cfg);
    cfg.tx_retries = 2;
    app = (struct app){.cfg = &cfg, .defences = DEFENCES_ALL};
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
    assert_string_equal(res.order_no, ORDER_NO);
    /* One transaction: the order locked, the txn_id looked for, the row,
     * the pay transition and its order.paid event, committed together. */
    assert_string_equal(fake_calls, "payment_begin payment_lock payment_find payment_insert "
                                    "payment_move payment_event payment_commit");
    assert_string_equal(fake_payments.order_no, ORDER_NO);
    assert_int_equal(fake_payments.cb_amount_cents, 2000);
    assert_int_equal(fake_payments.inserted_outcome, PAY_APPLIED);
    assert_int_equal(fake_payments.inserted_after, ORDER_PAID);
    assert_int_equal(fake_payments.move_event, EVENT_PAY);
    assert_string_equal(fake_payments.event_type, "order.paid");
    assert_string_equal(fake_payments.event_biz_key, ORDER_NO);
    assert_non_null(strstr(fake_payments.event_payload, "\"txn_id\":\"txn-1\""));
    assert_non_null(strstr(fake_payments.event_payload, "\"amount_cents\":2000"));
    assert_int_equal(metrics_get(M_PAYMENTS_APPLIED) - applied, 1);
}

static void test_callback_outcome_metrics(void **state)
{
    (void)state;
    /* Outcomes that do not apply: the order stays, a refund is owed when
     * money came that must go back (its key is the txn_id). */
    static const struct {
        enum order_status status;
        int64_t paid;
        bool success;
        enum pay_outcome want;
        enum metric m;
        const char *event; /* "": none */
    } cases[] = {
        {ORDER_PENDING_PAYMENT, 2000, false, PAY_FAILED, M_PAYMENTS_FAILED, ""},
        {ORDER_PENDING_PAYMENT, 1, true, PAY_MISMATCH, M_PAYMENTS_MISMATCH, ""},
        {ORDER_PAID, 2000, true, PAY_DUPLICATE, M_PAYMENTS_DUPLICATE, "payment.refund_required"},
        {ORDER_CANCELLED, 2000, true, PAY_LATE, M_PAYMENTS_LATE, "payment.refund_required"},
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
        assert_int_equal(res.order_status, cases[i].status);
        assert_int_equal(metrics_get(cases[i].m) - before, 1);
        assert_int_equal(fake_payments.inserted_outcome, cases[i].want);
        assert_int_equal(fake_payments.moves, 0);
        assert_string_equal(fake_payments.event_type, cases[i].event);
        if (cases[i].event[0] != '\0') {
            assert_string_equal(fake_payments.event_biz_key, "txn-1");
            assert_non_null(strstr(fake_payments.event_payload, pay_outcome_name(cases[i].want)));
        }
        assert_int_equal(fake_payments.commits, 1);
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
    /* Found under the order's lock: nothing written, the lock let go. */
    assert_string_equal(fake_calls, "payment_begin payment_lock payment_find payment_rollback");
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
    /* DEMO: the defence off, the gateway's retry of the payment that paid
     * the order is decided again from the order alone: a second payment,
     * refunded, its row (which exists) not written again. */
    app.defences = DEFENCES_ALL & ~DEFENCE_CALLBACK_DEDUP;
    fake_payments.replayed = true;
    fake_payments.outcome = PAY_APPLIED;
    fake_payments.status = ORDER_PAID;
    struct payment_callback cb = callback();
    struct payment_result res;
    assert_int_equal(payments_callback(&app, &cb, &res), TD_OK);
    assert_false(res.replayed);
    assert_int_equal(res.outcome, PAY_DUPLICATE);
    assert_int_equal(fake_payments.inserts, 0);
    assert_string_equal(fake_payments.event_type, "payment.refund_required");
    assert_int_equal(fake_payments.commits, 1);

    /* The refund it owes is queued already: the outbox's key is not an
     * error then, only with the defence on (the rows would disagree). */
    fakes_reset();
    fake_payments.event_rc = TD_EDUP;
    assert_int_equal(payments_callback(&app, &cb, &res), TD_OK);
    app.defences = DEFENCES_ALL;
    fake_payments_reset();
    fake_payments.status = ORDER_PAID;
    fake_payments.event_rc = TD_EDUP;
    assert_int_equal(payments_callback(&app, &cb, &res), TD_EINTERNAL);
    assert_int_equal(fake_payments.commits, 0);
}

static void test_callback_race_lost(void **state)
{
    (void)state;
    /* The same txn_id committed by another transaction between our look
     * and our insert: the unique key decides, the winner's row is read
     * after the rollback, and this same callback is its replay. */
    fake_payments.insert_rc = TD_EDUP;
    fake_payments.race_recorded = true;
    fake_payments.outcome = PAY_APPLIED;
    struct payment_callback cb = callback();
    struct payment_result res;
    int64_t applied = metrics_get(M_PAYMENTS_APPLIED);
    assert_int_equal(payments_callback(&app, &cb, &res), TD_OK);
    assert_true(res.replayed);
    assert_int_equal(res.outcome, PAY_APPLIED);
    assert_string_equal(fake_calls, "payment_begin payment_lock payment_find payment_insert "
                                    "payment_rollback payment_find");
    assert_int_equal(metrics_get(M_PAYMENTS_APPLIED) - applied, 0);

    /* The winner's row not to be found (yet): look again from the start. */
    fakes_reset();
    fake_payments_reset();
    fake_payments.insert_rc = TD_EDUP;
    assert_int_equal(payments_callback(&app, &cb, &res), TD_ERETRY);
    assert_int_equal(fake_payments.calls, 3);
    assert_int_equal(fake_payments.commits, 0);
}

static enum paysig_result verify_xpay(const char *ts, const char *sig, const char *body, size_t len)
{
    struct payment_proof p = {.pay_timestamp = ts, .pay_signature = sig};
    return payments_verify(&app, &p, body, len);
}

static enum paysig_result verify_webhook(const char *id, const char *ts, const char *sigs,
                                         const char *body)
{
    struct payment_proof p = {.webhook_id = id, .webhook_timestamp = ts, .webhook_signature = sigs};
    return payments_verify(&app, &p, body, strlen(body));
}

static void test_verify(void **state)
{
    (void)state;
    char ts[24], sig[PAYSIG_HEX_LEN + 1];
    const char body[] = "{\"txn_id\":\"t\"}";
    /* No secret: nothing is accepted, however it is signed. */
    snprintf(ts, sizeof ts, "%lld", (long long)wall_s());
    paysig_sign("", ts, body, strlen(body), sig);
    assert_int_equal(verify_xpay(ts, sig, body, strlen(body)), PAYSIG_BAD);

    free(cfg.pay_secret);
    cfg.pay_secret = strdup("s3cret");
    cfg.pay_tolerance_s = 300;
    paysig_sign("s3cret", ts, body, strlen(body), sig);
    assert_int_equal(verify_xpay(ts, sig, body, strlen(body)), PAYSIG_OK);
    assert_int_equal(verify_xpay(ts, sig, body, strlen(body) - 1), PAYSIG_BAD);
    assert_int_equal(verify_xpay(NULL, sig, body, strlen(body)), PAYSIG_BAD);
    snprintf(ts, sizeof ts, "%lld", (long long)wall_s() - 301);
    paysig_sign("s3cret", ts, body, strlen(body), sig);
    assert_int_equal(verify_xpay(ts, sig, body, strlen(body)), PAYSIG_STALE);
}

/* A rotation: the new secret (whsec_, base64 of its key) and the old one
 * (plain), each accepted in both schemes; a third is not. The scheme is
 * Standard Webhooks exactly when webhook-signature is sent. */
static void test_verify_rotation_and_schemes(void **state)
{
    (void)state;
    char ts[24], hex[PAYSIG_HEX_LEN + 1], v1[PAYSIG_WEBHOOK_LEN + 1];
    const char body[] = "{\"txn_id\":\"t\"}";
    static const unsigned char new_key[] = "new-key-bytes!!";
    free(cfg.pay_secret);
    /* base64("new-key-bytes!!") */
    cfg.pay_secret = strdup("whsec_bmV3LWtleS1ieXRlcyEh, old-secret");
    cfg.pay_tolerance_s = 300;
    snprintf(ts, sizeof ts, "%lld", (long long)wall_s());

    paysig_sign_webhook(new_key, sizeof new_key - 1, "d-1", ts, body, strlen(body), v1);
    assert_int_equal(verify_webhook("d-1", ts, v1, body), PAYSIG_OK);
    paysig_sign_webhook((const unsigned char *)"old-secret", 10, "d-1", ts, body, strlen(body), v1);
    assert_int_equal(verify_webhook("d-1", ts, v1, body), PAYSIG_OK);
    paysig_sign_webhook((const unsigned char *)"third", 5, "d-1", ts, body, strlen(body), v1);
    assert_int_equal(verify_webhook("d-1", ts, v1, body), PAYSIG_BAD);
    /* The id is signed: another id, the same signature, is refused. */
    paysig_sign_webhook(new_key, sizeof new_key - 1, "d-1", ts, body, strlen(body), v1);
    assert_int_equal(verify_webhook("d-2", ts, v1, body), PAYSIG_BAD);

    /* X-Pay-* keys with the secret as written, whsec_ and all. */
    paysig_sign("whsec_bmV3LWtleS1ieXRlcyEh", ts, body, strlen(body), hex);
    assert_int_equal(verify_xpay(ts, hex, body, strlen(body)), PAYSIG_OK);
    paysig_sign("old-secret", ts, body, strlen(body), hex);
    assert_int_equal(verify_xpay(ts, hex, body, strlen(body)), PAYSIG_OK);
    paysig_sign("third", ts, body, strlen(body), hex);
    assert_int_equal(verify_xpay(ts, hex, body, strlen(body)), PAYSIG_BAD);

    /* webhook-signature decides the scheme: with it, a valid X-Pay pair
     * beside it does not help. */
    paysig_sign("old-secret", ts, body, strlen(body), hex);
    struct payment_proof both = {.pay_timestamp = ts,
                                 .pay_signature = hex,
                                 .webhook_id = "d-1",
                                 .webhook_timestamp = ts,
                                 .webhook_signature = "v1,AAAA"};
    assert_true(payments_proof_is_webhook(&both));
    assert_int_equal(payments_verify(&app, &both, body, strlen(body)), PAYSIG_BAD);

    /* A setting that cannot be read accepts nothing. */
    free(cfg.pay_secret);
    cfg.pay_secret = strdup("a,b,c");
    paysig_sign("a", ts, body, strlen(body), hex);
    assert_int_equal(verify_xpay(ts, hex, body, strlen(body)), PAYSIG_BAD);
}

/* ---- Standard Webhooks deliveries --------------------------------------- */

#define FP_OTHER "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"

static void delivery(struct payment_delivery *dl)
{
    payments_delivery_init(dl, "msg-1", "{\"b\":1}", 7);
}

static void test_delivery_new(void **state)
{
    (void)state;
    struct payment_callback cb = callback();
    struct payment_delivery dl;
    struct payment_result res;
    delivery(&dl);
    assert_int_equal(strlen(dl.fingerprint), 64);
    assert_int_equal(payments_callback_delivery(&app, &cb, &dl, &res), TD_OK);
    assert_int_equal(res.outcome, PAY_APPLIED);
    assert_false(res.replayed);
    /* The id is claimed first, in the payment's own transaction. */
    assert_string_equal(fake_calls, "delivery_find payment_begin delivery_claim payment_lock "
                                    "payment_find payment_insert payment_move payment_event "
                                    "payment_commit");
    assert_string_equal(fake_payments.delivery_id, "msg-1");
}

static void test_delivery_retried(void **state)
{
    (void)state;
    /* The same id and body were recorded: no second claim, the txn_id's
     * row answers, replayed. */
    struct payment_callback cb = callback();
    struct payment_delivery dl;
    struct payment_result res;
    delivery(&dl);
    fake_payments.delivery_find_rc = TD_OK;
    snprintf(fake_payments.delivery_fp, sizeof fake_payments.delivery_fp, "%s", dl.fingerprint);
    fake_payments.replayed = true;
    fake_payments.outcome = PAY_APPLIED;
    fake_payments.status = ORDER_PAID;
    assert_int_equal(payments_callback_delivery(&app, &cb, &dl, &res), TD_OK);
    assert_true(res.replayed);
    assert_int_equal(res.outcome, PAY_APPLIED);
    assert_int_equal(fake_payments.delivery_claims, 0);
    assert_string_equal(fake_calls,
                        "delivery_find payment_begin payment_lock payment_find payment_rollback");
}

static void test_delivery_id_reused(void **state)
{
    (void)state;
    struct payment_callback cb = callback();
    struct payment_delivery dl;
    struct payment_result res;
    delivery(&dl);
    /* Recorded before with another body: refused before any transaction. */
    int64_t reused = metrics_get(M_PAYMENTS_WEBHOOK_ID_REUSED);
    fake_payments.delivery_find_rc = TD_OK;
    snprintf(fake_payments.delivery_fp, sizeof fake_payments.delivery_fp, "%s", FP_OTHER);
    assert_int_equal(payments_callback_delivery(&app, &cb, &dl, &res), TD_ECONFLICT);
    assert_string_equal(fake_calls, "delivery_find");
    assert_int_equal(metrics_get(M_PAYMENTS_WEBHOOK_ID_REUSED) - reused, 1);
    /* Committed by a racing copy with another body: refused, rolled back. */
    fakes_reset();
    fake_payments_reset();
    fake_payments.delivery_claim_rc = TD_EDUP;
    snprintf(fake_payments.delivery_fp, sizeof fake_payments.delivery_fp, "%s", FP_OTHER);
    assert_int_equal(payments_callback_delivery(&app, &cb, &dl, &res), TD_ECONFLICT);
    assert_string_equal(fake_calls, "delivery_find payment_begin delivery_claim payment_rollback");
    assert_int_equal(fake_payments.commits, 0);
    /* ... or with this body: this very delivery, answered by its txn_id. */
    fakes_reset();
    fake_payments_reset();
    fake_payments.delivery_claim_rc = TD_EDUP;
    snprintf(fake_payments.delivery_fp, sizeof fake_payments.delivery_fp, "%s", dl.fingerprint);
    fake_payments.replayed = true;
    fake_payments.outcome = PAY_APPLIED;
    assert_int_equal(payments_callback_delivery(&app, &cb, &dl, &res), TD_OK);
    assert_true(res.replayed);
    assert_int_equal(fake_payments.commits, 0);
}

static void test_delivery_of_a_recorded_payment(void **state)
{
    (void)state;
    /* A new id for a txn_id recorded before (by X-Pay, or another id): a
     * replay, and the id is committed with it. */
    struct payment_callback cb = callback();
    struct payment_delivery dl;
    struct payment_result res;
    delivery(&dl);
    fake_payments.replayed = true;
    fake_payments.outcome = PAY_APPLIED;
    fake_payments.status = ORDER_PAID;
    assert_int_equal(payments_callback_delivery(&app, &cb, &dl, &res), TD_OK);
    assert_true(res.replayed);
    assert_string_equal(fake_calls, "delivery_find payment_begin delivery_claim payment_lock "
                                    "payment_find payment_commit");
    assert_int_equal(fake_payments.inserts, 0);
    /* Not for an unknown order: a refused delivery records nothing. */
    fakes_reset();
    fake_payments_reset();
    fake_payments.rc[0] = TD_ENOTFOUND;
    fake_payments.nrc = 1;
    assert_int_equal(payments_callback_delivery(&app, &cb, &dl, &res), TD_ENOTFOUND);
    assert_int_equal(fake_payments.commits, 0);
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
    /* A step failing: the whole transaction is rolled back and nothing is
     * counted. rcs: what locking the order answers, transaction by
     * transaction; then the later steps' answers. */
    static const struct {
        int rcs[4];
        int nrc;
        int insert_rc, move_rc, event_rc, commit_rc;
        int want;
        int calls;
    } cases[] = {
        /* Deadlocks are retried, up to tx_retries (2) more times. */
        {{TD_ERETRY, TD_OK}, 2, TD_OK, TD_OK, TD_OK, TD_OK, TD_OK, 2},
        {{TD_ERETRY, TD_ERETRY, TD_OK}, 3, TD_OK, TD_OK, TD_OK, TD_OK, TD_OK, 3},
        {{TD_ERETRY}, 1, TD_OK, TD_OK, TD_OK, TD_OK, TD_ERETRY, 3},
        /* Anything else is answered at once: nothing was recorded. */
        {{TD_EUNAVAIL}, 1, TD_OK, TD_OK, TD_OK, TD_OK, TD_EUNAVAIL, 1},
        {{TD_ENOTFOUND}, 1, TD_OK, TD_OK, TD_OK, TD_OK, TD_ENOTFOUND, 1},
        {{TD_EINTERNAL}, 1, TD_OK, TD_OK, TD_OK, TD_OK, TD_EINTERNAL, 1},
        {{TD_ERETRY, TD_EUNAVAIL}, 2, TD_OK, TD_OK, TD_OK, TD_OK, TD_EUNAVAIL, 2},
        /* After the lock. A lost compare-and-set is looked at again. */
        {{TD_OK}, 1, TD_EINTERNAL, TD_OK, TD_OK, TD_OK, TD_EINTERNAL, 1},
        {{TD_OK}, 1, TD_OK, TD_ECONFLICT, TD_OK, TD_OK, TD_ERETRY, 3},
        {{TD_OK}, 1, TD_OK, TD_EUNAVAIL, TD_OK, TD_OK, TD_EUNAVAIL, 1},
        {{TD_OK}, 1, TD_OK, TD_OK, TD_EUNAVAIL, TD_OK, TD_EUNAVAIL, 1},
        {{TD_OK}, 1, TD_OK, TD_OK, TD_OK, TD_EUNAVAIL, TD_EUNAVAIL, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fakes_reset();
        fake_payments_reset();
        memcpy(fake_payments.rc, cases[i].rcs, sizeof cases[i].rcs);
        fake_payments.nrc = cases[i].nrc;
        fake_payments.insert_rc = cases[i].insert_rc;
        fake_payments.move_rc = cases[i].move_rc;
        fake_payments.event_rc = cases[i].event_rc;
        fake_payments.commit_rc = cases[i].commit_rc;
        struct payment_callback cb = callback();
        struct payment_result res;
        int64_t applied = metrics_get(M_PAYMENTS_APPLIED);
        int rc = payments_callback(&app, &cb, &res);
        if (rc != cases[i].want || fake_payments.calls != cases[i].calls)
            fail_msg("case %zu: rc %d after %d calls, want %d after %d", i, rc, fake_payments.calls,
                     cases[i].want, cases[i].calls);
        /* Only a committed outcome is counted. */
        assert_int_equal(fake_payments.commits, rc == TD_OK ? 1 : 0);
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
        T(test_callback_race_lost),
        T(test_verify),
        T(test_verify_rotation_and_schemes),
        T(test_delivery_new),
        T(test_delivery_retried),
        T(test_delivery_id_reused),
        T(test_delivery_of_a_recorded_payment),
        T(test_callback_implausible_order),
        T(test_callback_store_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
