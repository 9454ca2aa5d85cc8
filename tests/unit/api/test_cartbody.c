/* test_cartbody.c - reading a cart's body (items, their keys, their
 * fields) and the fingerprint of its item list. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cartbody.h"
#include "err.h"
#include "idem.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses text as the body; returns cartbody_parse's verdict. */
static int parse(const char *text, struct cart_body *out, char *field)
{
    char why[200];
    json_error_t err;
    json_t *body = json_loads(text, 0, &err);
    if (body == NULL)
        fail_msg("test body is not JSON: %s", text);
    int rc = cartbody_parse(body, 1000, 6, out, field, why, sizeof why);
    json_decref(body);
    return rc;
}

static void test_good_cart(void **state)
{
    struct cart_body b;
    char field[CARTBODY_FIELD_MAX];
    (void)state;
    assert_int_equal(parse("{\"items\":[{\"key\":\"seat-a\",\"session_id\":7,\"quantity\":2},"
                           "{\"quantity\":1,\"session_id\":8,\"key\":\"b:1_x.y\"}]}",
                           &b, field),
                     TD_OK);
    assert_int_equal(b.n, 2);
    assert_string_equal(b.items[0].key, "seat-a");
    assert_int_equal(b.items[0].session_id, 7);
    assert_int_equal(b.items[0].quantity, 2);
    assert_string_equal(b.items[1].key, "b:1_x.y");
    assert_int_equal(b.items[1].session_id, 8);
    assert_int_equal(b.items[1].quantity, 1);
}

/* Twenty items pass, twenty-one do not. */
static void test_item_count(void **state)
{
    struct cart_body b;
    char field[CARTBODY_FIELD_MAX], text[4096];
    (void)state;
    for (int n = 19; n <= 21; n++) {
        size_t len = (size_t)snprintf(text, sizeof text, "{\"items\":[");
        for (int i = 0; i < n; i++)
            len += (size_t)snprintf(text + len, sizeof text - len,
                                    "%s{\"key\":\"k%d\",\"session_id\":1,\"quantity\":1}",
                                    i ? "," : "", i);
        snprintf(text + len, sizeof text - len, "]}");
        int rc = parse(text, &b, field);
        if (n <= 20) {
            assert_int_equal(rc, TD_OK);
            assert_int_equal(b.n, (size_t)n);
        } else {
            assert_int_equal(rc, TD_EINVAL);
            assert_string_equal(field, "items");
            assert_int_equal(b.n, 0);
        }
    }
}

static void test_refusals_name_their_field(void **state)
{
    static const char k65[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0";
    char long_key[256];
    snprintf(long_key, sizeof long_key,
             "{\"items\":[{\"key\":\"%s\",\"session_id\":1,\"quantity\":1}]}", k65);
    const struct {
        const char *body;
        const char *field;
    } cases[] = {
        {"{}", "items"},
        {"{\"items\":[]}", "items"},
        {"{\"items\":{}}", "items"},
        {"{\"items\":\"a\"}", "items"},
        {"{\"items\":[1]}", "items[0]"},
        {"{\"items\":[{\"session_id\":1,\"quantity\":1}]}", "items[0].key"},
        {"{\"items\":[{\"key\":\"\",\"session_id\":1,\"quantity\":1}]}", "items[0].key"},
        {"{\"items\":[{\"key\":7,\"session_id\":1,\"quantity\":1}]}", "items[0].key"},
        {"{\"items\":[{\"key\":\"a b\",\"session_id\":1,\"quantity\":1}]}", "items[0].key"},
        /* The header's quoted form is not an item key: quotes are refused. */
        {"{\"items\":[{\"key\":\"\\\"a\\\"\",\"session_id\":1,\"quantity\":1}]}", "items[0].key"},
        {long_key, "items[0].key"},
        {"{\"items\":[{\"key\":\"a\",\"session_id\":1,\"quantity\":1},"
         "{\"key\":\"b\",\"session_id\":0,\"quantity\":1}]}",
         "items[1].session_id"},
        {"{\"items\":[{\"key\":\"a\",\"session_id\":1001,\"quantity\":1}]}", "items[0].session_id"},
        {"{\"items\":[{\"key\":\"a\",\"session_id\":\"1\",\"quantity\":1}]}",
         "items[0].session_id"},
        {"{\"items\":[{\"key\":\"a\",\"session_id\":1,\"quantity\":7}]}", "items[0].quantity"},
        {"{\"items\":[{\"key\":\"a\",\"session_id\":1,\"quantity\":1.0}]}", "items[0].quantity"},
        {"{\"items\":[{\"key\":\"a\",\"session_id\":1}]}", "items[0].quantity"},
        /* Keys are unique within a cart, whatever the rest of the item. */
        {"{\"items\":[{\"key\":\"a\",\"session_id\":1,\"quantity\":1},"
         "{\"key\":\"b\",\"session_id\":1,\"quantity\":1},"
         "{\"key\":\"a\",\"session_id\":2,\"quantity\":3}]}",
         "items[2].key"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cart_body b;
        char field[CARTBODY_FIELD_MAX];
        if (parse(cases[i].body, &b, field) != TD_EINVAL)
            fail_msg("accepted %s", cases[i].body);
        if (strcmp(field, cases[i].field) != 0)
            fail_msg("%s: field %s, want %s", cases[i].body, field, cases[i].field);
        assert_int_equal(b.n, 0);
    }
}

static void fp_of(const struct idem_item *items, size_t n, char *out)
{
    idem_fingerprint_batch(items, n, out);
    assert_int_equal(strlen(out), IDEM_FP_LEN);
}

/* The same list gives the same fingerprint; any change to a key, a field,
 * the order or the length of the list gives another. */
static void test_fingerprint(void **state)
{
    struct idem_item base[3] = {{"a", 1, 1}, {"b", 2, 2}, {"c", 3, 3}};
    char want[IDEM_FP_LEN + 1], got[IDEM_FP_LEN + 1], single[IDEM_FP_LEN + 1];
    (void)state;
    fp_of(base, 3, want);
    struct idem_item same[3] = {{"a", 1, 1}, {"b", 2, 2}, {"c", 3, 3}};
    fp_of(same, 3, got);
    assert_string_equal(got, want);

    struct idem_item variants[][3] = {
        {{"a", 1, 1}, {"b", 2, 2}, {"d", 3, 3}},
        {{"a", 1, 1}, {"b", 2, 2}, {"c", 4, 3}},
        {{"a", 1, 1}, {"b", 2, 2}, {"c", 3, 4}},
        {{"b", 2, 2}, {"a", 1, 1}, {"c", 3, 3}},
        /* A key and a number cannot run into each other. */
        {{"a1", 1, 1}, {"b", 2, 2}, {"c", 3, 3}},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        fp_of(variants[i], 3, got);
        if (strcmp(got, want) == 0)
            fail_msg("variant %zu has the base list's fingerprint", i);
    }
    fp_of(base, 2, got);
    assert_string_not_equal(got, want);
    /* A cart of one is not the single order of the same fields. */
    fp_of(base, 1, got);
    idem_fingerprint_order(1, 1, single);
    assert_string_not_equal(got, single);
}

static void test_key_valid(void **state)
{
    (void)state;
    assert_true(idem_key_valid("a"));
    assert_true(idem_key_valid("A-z_0.9:x"));
    assert_true(idem_key_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    assert_false(idem_key_valid(""));
    assert_false(idem_key_valid("\"a\""));
    assert_false(idem_key_valid("a/b"));
    assert_false(idem_key_valid(" a"));
    assert_false(
        idem_key_valid("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_cart),
        cmocka_unit_test(test_item_count),
        cmocka_unit_test(test_refusals_name_their_field),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_key_valid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
