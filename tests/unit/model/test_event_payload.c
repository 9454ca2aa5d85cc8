/* test_event_payload.c - the outbox payloads: what the payment callback
 * writes is what the consumers read back, and a payload no delivery could
 * apply is refused with the dead letter's reason. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "event_payload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ORDER_NO "26120100000000000001"

static struct order order(void)
{
    struct order o = {.id = 7, .user_id = 42, .session_id = 3, .quantity = 2, .amount_cents = 2000};
    snprintf(o.order_no, sizeof o.order_no, "%s", ORDER_NO);
    return o;
}

static void test_paid_round_trip(void **state)
{
    (void)state;
    struct order o = order();
    struct paid_event pe;
    const char *why = "not touched";
    char *s = event_paid_write(&o, "txn-1", "2026-12-01T08:00:00Z");
    assert_true(event_paid_parse(ORDER_NO, s, strlen(s), &pe, &why));
    assert_null(why);
    assert_string_equal(pe.order_no, ORDER_NO);
    assert_int_equal(pe.user_id, 42);
    assert_int_equal(pe.amount_cents, 2000);
    /* The fields an operator and the audit read, in the contract's names. */
    assert_non_null(strstr(s, "\"event_type\":\"order.paid\""));
    assert_non_null(strstr(s, "\"txn_id\":\"txn-1\""));
    assert_non_null(strstr(s, "\"occurred_at\":\"2026-12-01T08:00:00Z\""));
    free(s);
}

static void test_refund(void **state)
{
    (void)state;
    struct order o = order();
    /* What goes back is what the gateway took, not the order's price. */
    char *s = event_refund_write(&o, "txn-2", 1999, "LATE_PAYMENT", "2026-12-01T08:00:00Z");
    assert_non_null(strstr(s, "\"event_type\":\"payment.refund_required\""));
    assert_non_null(strstr(s, "\"amount_cents\":1999"));
    assert_non_null(strstr(s, "\"reason\":\"LATE_PAYMENT\""));
    assert_non_null(strstr(s, "\"order_no\":\"" ORDER_NO "\""));
    free(s);
}

static void test_paid_refused(void **state)
{
    (void)state;
    static const struct {
        const char *biz_key;
        const char *payload;
        const char *why;
    } cases[] = {
        {ORDER_NO, NULL, "entry without payload or biz_key"},
        {NULL, "{}", "entry without payload or biz_key"},
        {ORDER_NO, "[1]", "payload is not a JSON object"},
        {ORDER_NO, "{\"order_no\":\"" ORDER_NO "\",\"order_no\":\"x\"}",
         "payload is not a JSON object"},
        {ORDER_NO, "{\"user_id\":1,\"amount_cents\":1}", "order_no missing or not the biz_key"},
        {"26120100000000000002", "{\"order_no\":\"" ORDER_NO "\",\"user_id\":1,\"amount_cents\":1}",
         "order_no missing or not the biz_key"},
        {ORDER_NO, "{\"order_no\":\"" ORDER_NO "\",\"user_id\":0,\"amount_cents\":1}",
         "user_id or amount_cents missing or out of range"},
        {ORDER_NO, "{\"order_no\":\"" ORDER_NO "\",\"user_id\":1,\"amount_cents\":-1}",
         "user_id or amount_cents missing or out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct paid_event pe;
        const char *why = NULL;
        const char *p = cases[i].payload;
        if (event_paid_parse(cases[i].biz_key, p, p != NULL ? strlen(p) : 0, &pe, &why))
            fail_msg("case %zu accepted", i);
        assert_string_equal(why, cases[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paid_round_trip),
        cmocka_unit_test(test_refund),
        cmocka_unit_test(test_paid_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
