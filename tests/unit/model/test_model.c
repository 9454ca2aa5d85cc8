/* test_model.c - the names the API and the database share: order statuses
 * (stored as text in orders.status) and the error vocabulary. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "err.h"
#include "model.h"

#include <stdbool.h>
#include <string.h>

static void test_status_names_round_trip(void **state)
{
    (void)state;
    /* The contract's spelling; the schema stores the same text. */
    static const struct {
        enum order_status s;
        const char *name;
    } names[] = {
        {ORDER_PENDING_PAYMENT, "PENDING_PAYMENT"},
        {ORDER_PAID, "PAID"},
        {ORDER_TICKETED, "TICKETED"},
        {ORDER_COMPLETED, "COMPLETED"},
        {ORDER_CANCELLED, "CANCELLED"},
    };
    assert_int_equal(sizeof names / sizeof names[0], ORDER_STATUS_COUNT);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        assert_string_equal(order_status_name(names[i].s), names[i].name);
        enum order_status back = ORDER_STATUS_COUNT;
        assert_true(order_status_parse(names[i].name, &back));
        assert_int_equal(back, names[i].s);
    }
}

static void test_status_unknown(void **state)
{
    (void)state;
    assert_string_equal(order_status_name(ORDER_STATUS_COUNT), "UNKNOWN");
    assert_string_equal(order_status_name((enum order_status) - 1), "UNKNOWN");
    static const char *const bad[] = {"paid", "Paid", "PAID ", "", "CANCELED", "UNKNOWN"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        enum order_status s = ORDER_PAID;
        assert_false(order_status_parse(bad[i], &s));
        assert_int_equal(s, ORDER_PAID); /* untouched */
    }
}

static void test_order_no_valid(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"26120100000000000001", true},
        {"00000000000000000000", true},
        {"99999999999999999999", true},
        /* The database ignores trailing spaces: these would find the order. */
        {"26120100000000000001 ", false},
        {"26120100000000000001  ", false},
        {" 26120100000000000001", false},
        {"26120100000000000001\t", false},
        {"26120100000000000001\n", false},
        /* Lengths. */
        {"", false},
        {"2612010000000000000", false},
        {"261201000000000000012", false},
        /* Not digits. */
        {"2612010000000000000a", false},
        {"+2612010000000000000", false},
        {"-2612010000000000000", false},
        {"2612010000000000000.", false},
        {"26120100000000000\xef\xbc\x91", false}, /* a fullwidth digit */
        {"../../etc/passwd0000", false},
        {"2612010000%200000001", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (order_no_valid(cases[i].s) != cases[i].ok)
            fail_msg("order_no_valid(\"%s\") != %d", cases[i].s, cases[i].ok);
    }
    assert_false(order_no_valid(NULL));
}

static void test_strerror(void **state)
{
    (void)state;
    static const struct {
        int err;
        const char *name;
    } names[] = {
        {TD_OK, "ok"},
        {TD_EINVAL, "invalid"},
        {TD_ENOTFOUND, "not found"},
        {TD_ECONFLICT, "conflict"},
        {TD_EDUP, "duplicate"},
        {TD_ERETRY, "retriable"},
        {TD_EUNAVAIL, "unavailable"},
        {TD_EINTERNAL, "internal"},
        {TD_ESPENT, "spent"},
        {-100, "unknown"},
        {1, "unknown"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        assert_string_equal(td_strerror(names[i].err), names[i].name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names_round_trip),
        cmocka_unit_test(test_status_unknown),
        cmocka_unit_test(test_order_no_valid),
        cmocka_unit_test(test_strerror),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
