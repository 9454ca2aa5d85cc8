/* test_api_orders.c - the answer to an order placed, written in one
 * format call (api_order_render), is byte for byte what jansson writes
 * for the same order (json_dumps of api_order_json, compact): replays of
 * a key give back these bytes, and instances of two versions may answer
 * the same key. Strings that JSON would escape take jansson's path. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api_internal.h"
#include "model.h"
#include "reply.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct order an_order(void)
{
    struct order o;
    memset(&o, 0, sizeof o);
    o.id = 7;
    snprintf(o.order_no, sizeof o.order_no, "26120529889255226526");
    o.user_id = 179648094193937;
    o.session_id = 99;
    o.quantity = 2;
    o.amount_cents = 3000;
    o.status = ORDER_PENDING_PAYMENT;
    o.version = 1;
    snprintf(o.created_at, sizeof o.created_at, "2026-12-05T14:29:05.381Z");
    snprintf(o.updated_at, sizeof o.updated_at, "2026-12-05T14:29:05.381Z");
    return o;
}

/* Renders o both ways and compares the bytes. */
static void same_as_jansson(const struct order *o)
{
    int status = 0;
    size_t len = 0;
    char *mine = api_order_render(o, &status, &len);
    json_t *j = api_order_json(o);
    char *want = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    assert_int_equal(status, 201);
    assert_non_null(want);
    assert_int_equal(len, strlen(mine));
    assert_string_equal(mine, want);
    free(mine);
    free(want);
}

static void test_an_order_as_jansson_writes_it(void **state)
{
    (void)state;
    struct order o = an_order();
    same_as_jansson(&o);
    /* Every status, and the integers at their bounds. */
    for (int s = 0; s < ORDER_STATUS_COUNT; s++) {
        o.status = (enum order_status)s;
        same_as_jansson(&o);
    }
    o.user_id = INT64_MAX;
    o.session_id = 1;
    o.quantity = 0;
    o.amount_cents = INT64_MIN;
    o.version = -1;
    same_as_jansson(&o);
    o.order_no[0] = '\0'; /* empty strings */
    o.created_at[0] = '\0';
    same_as_jansson(&o);
}

static void test_strings_to_escape_take_janssons_path(void **state)
{
    (void)state;
    static const char *const odd[] = {"quote\"d",    "back\\slash", "new\nline", "tab\t",
                                      "caf\xc3\xa9", "del\x7f",     "slash/"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        struct order o = an_order();
        snprintf(o.created_at, sizeof o.created_at, "%s", odd[i]);
        same_as_jansson(&o);
        o = an_order();
        snprintf(o.updated_at, sizeof o.updated_at, "%s", odd[i]);
        same_as_jansson(&o);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_an_order_as_jansson_writes_it),
        cmocka_unit_test(test_strings_to_escape_take_janssons_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
