/* test_statemachine.c - the order's life: every (state, event) pair, so a
 * transition added or lost in the table shows up here. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "statemachine.h"

#include <stdbool.h>

/* The only allowed moves, from the contract's "Order states". */
static const struct {
    enum order_status from;
    enum order_event ev;
    enum order_status to;
} allowed[] = {
    {ORDER_PENDING_PAYMENT, EVENT_PAY, ORDER_PAID},
    {ORDER_PAID, EVENT_TICKET, ORDER_TICKETED},
    {ORDER_TICKETED, EVENT_COMPLETE, ORDER_COMPLETED},
    {ORDER_PENDING_PAYMENT, EVENT_CANCEL, ORDER_CANCELLED},
    {ORDER_PENDING_PAYMENT, EVENT_EXPIRE, ORDER_CANCELLED},
};

static void test_every_pair(void **state)
{
    (void)state;
    int moves = 0;
    for (int s = 0; s < ORDER_STATUS_COUNT; s++) {
        for (int e = 0; e < EVENT_COUNT; e++) {
            bool want = false;
            enum order_status want_to = ORDER_STATUS_COUNT;
            for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++) {
                if ((int)allowed[i].from == s && (int)allowed[i].ev == e) {
                    want = true;
                    want_to = allowed[i].to;
                }
            }
            enum order_status to = ORDER_STATUS_COUNT;
            bool got = statemachine_next((enum order_status)s, (enum order_event)e, &to);
            if (got != want)
                fail_msg("%s --%s--> %s, want %s", order_status_name(s), order_event_name(e),
                         got ? "allowed" : "refused", want ? "allowed" : "refused");
            if (got) {
                assert_int_equal(to, want_to);
                moves++;
            } else {
                /* A refused move leaves *to alone. */
                assert_int_equal(to, ORDER_STATUS_COUNT);
            }
        }
    }
    assert_int_equal(moves, sizeof allowed / sizeof allowed[0]);
}

static void test_final_states(void **state)
{
    (void)state;
    /* Nothing leaves COMPLETED or CANCELLED: a late payment cannot revive a
     * cancelled order, a second cancel cannot give the stock back twice. */
    static const enum order_status finals[] = {ORDER_COMPLETED, ORDER_CANCELLED};
    for (size_t i = 0; i < sizeof finals / sizeof finals[0]; i++) {
        for (int e = 0; e < EVENT_COUNT; e++) {
            enum order_status to;
            assert_false(statemachine_next(finals[i], (enum order_event)e, &to));
        }
    }
}

static void test_event_names(void **state)
{
    (void)state;
    /* Written to order_history.cause. */
    assert_string_equal(order_event_name(EVENT_PAY), "pay");
    assert_string_equal(order_event_name(EVENT_TICKET), "ticket");
    assert_string_equal(order_event_name(EVENT_COMPLETE), "complete");
    assert_string_equal(order_event_name(EVENT_CANCEL), "cancel");
    assert_string_equal(order_event_name(EVENT_EXPIRE), "expire");
    assert_string_equal(order_event_name(EVENT_COUNT), "unknown");
    assert_string_equal(order_event_name((enum order_event) - 1), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_pair),
        cmocka_unit_test(test_final_states),
        cmocka_unit_test(test_event_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
