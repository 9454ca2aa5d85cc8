/* test_router.c - the route table: every route by method and path, 404
 * versus 405 with its Allow list, {param} capture and its bounds. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "router.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

struct route_case {
    const char *method;
    const char *path;
    int want;           /* a route id, ROUTE_NOT_FOUND or ROUTE_METHOD_NOT_ALLOWED */
    const char *param0; /* expected params[0], or NULL when none is captured */
    const char *allow;  /* expected Allow text for 405 */
};

/* Every route of the HTTP contract, as a client would call it. */
static const struct route_case routes[] = {
    {"GET", "/livez", ROUTE_LIVEZ, NULL, NULL},
    {"GET", "/healthz", ROUTE_HEALTHZ, NULL, NULL},
    {"GET", "/readyz", ROUTE_READYZ, NULL, NULL},
    {"GET", "/metrics", ROUTE_METRICS, NULL, NULL},
    {"POST", "/api/v1/tokens", ROUTE_TOKENS_CREATE, NULL, NULL},
    {"POST", "/api/v1/orders", ROUTE_ORDERS_CREATE, NULL, NULL},
    {"POST", "/api/v1/orders/batch", ROUTE_ORDERS_BATCH, NULL, NULL},
    /* GET /orders/batch stays an order number that names no order (404). */
    {"GET", "/api/v1/orders/batch", ROUTE_ORDER_GET, "batch", NULL},
    {"POST", "/api/v1/orders/batch/cancel", ROUTE_ORDER_CANCEL, "batch", NULL},
    {"GET", "/api/v1/orders", ROUTE_ORDERS_LIST, NULL, NULL},
    {"GET", "/api/v1/orders/26120112345678901234", ROUTE_ORDER_GET, "26120112345678901234", NULL},
    {"POST", "/api/v1/orders/26120112345678901234/cancel", ROUTE_ORDER_CANCEL,
     "26120112345678901234", NULL},
    {"POST", "/api/v1/orders/abc/complete", ROUTE_ORDER_COMPLETE, "abc", NULL},
    {"POST", "/api/v1/payments/callback", ROUTE_PAYMENT_CALLBACK, NULL, NULL},
    {"POST", "/api/v1/sessions", ROUTE_SESSIONS_CREATE, NULL, NULL},
    {"GET", "/api/v1/sessions/7", ROUTE_SESSION_GET, "7", NULL},
    {"GET", "/api/v1/me", ROUTE_ME, NULL, NULL},
    {"GET", "/api/v1/admin/audit", ROUTE_ADMIN_AUDIT, NULL, NULL},
    {"GET", "/api/v1/idempotency-keys/k-1", ROUTE_IDEM_KEY_GET, "k-1", NULL},
    {"DELETE", "/api/v1/idempotency-keys/k-1", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD"},

    /* HEAD is answered by the GET route. */
    {"HEAD", "/livez", ROUTE_LIVEZ, NULL, NULL},
    {"HEAD", "/api/v1/orders", ROUTE_ORDERS_LIST, NULL, NULL},
    {"HEAD", "/api/v1/sessions/7", ROUTE_SESSION_GET, "7", NULL},

    /* Known path, wrong method: 405 with what the path does allow. */
    {"POST", "/livez", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD"},
    {"PUT", "/metrics", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD"},
    {"GET", "/api/v1/tokens", ROUTE_METHOD_NOT_ALLOWED, NULL, "POST"},
    {"HEAD", "/api/v1/tokens", ROUTE_METHOD_NOT_ALLOWED, NULL, "POST"},
    {"DELETE", "/api/v1/orders", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD, POST"},
    {"PATCH", "/api/v1/orders", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD, POST"},
    {"DELETE", "/api/v1/orders/abc", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD"},
    {"DELETE", "/api/v1/orders/batch", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD, POST"},
    {"GET", "/api/v1/orders/abc/cancel", ROUTE_METHOD_NOT_ALLOWED, NULL, "POST"},
    {"GET", "/api/v1/payments/callback", ROUTE_METHOD_NOT_ALLOWED, NULL, "POST"},
    {"DELETE", "/api/v1/sessions", ROUTE_METHOD_NOT_ALLOWED, NULL, "POST"},
    {"POST", "/api/v1/sessions/7", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD"},
    {"POST", "/api/v1/me", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD"},
    /* Methods are case-sensitive (RFC 9110 9.1). */
    {"get", "/livez", ROUTE_METHOD_NOT_ALLOWED, NULL, "GET, HEAD"},

    /* Unknown paths, including near misses and trailing slashes. */
    {"GET", "/", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/livez/", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/livezz", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/order", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/orders/", ROUTE_NOT_FOUND, NULL, NULL},
    {"POST", "/api/v1/orders/", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/orders/abc/", ROUTE_NOT_FOUND, NULL, NULL},
    {"POST", "/api/v1/orders/abc/cancel/", ROUTE_NOT_FOUND, NULL, NULL},
    {"POST", "/api/v1/orders/batch/", ROUTE_NOT_FOUND, NULL, NULL},
    {"POST", "/api/v1/orders//cancel", ROUTE_NOT_FOUND, NULL, NULL},
    {"POST", "/api/v1/orders/abc/refund", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/orders/a/b", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v2/orders", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/API/v1/orders", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "//api/v1/orders", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/sessions/", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/admin", ROUTE_NOT_FOUND, NULL, NULL},
    {"GET", "/api/v1/orders?limit=5", ROUTE_NOT_FOUND, NULL, NULL}, /* query is stripped before */
    {"DELETE", "/nowhere", ROUTE_NOT_FOUND, NULL, NULL},
};

static void test_route_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct route_case *c = &routes[i];
        struct route_match m;
        int got = router_match(c->method, c->path, &m);
        if (got != c->want)
            fail_msg("%s %s: route %d, want %d", c->method, c->path, got, c->want);
        if (c->want == ROUTE_METHOD_NOT_ALLOWED) {
            assert_string_equal(m.allow, c->allow);
        } else {
            assert_string_equal(m.allow, "");
        }
        if (c->param0 != NULL) {
            assert_int_equal(m.nparams, 1);
            assert_string_equal(m.params[0], c->param0);
        } else if (c->want >= 0) {
            assert_int_equal(m.nparams, 0);
        }
    }
}

/* Every route id of the enum appears in the table above, so a route added
 * without a test case is noticed here. */
static void test_every_route_is_covered(void **state)
{
    (void)state;
    for (int id = 0; id < ROUTE_COUNT; id++) {
        bool seen = false;
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
            seen = seen || routes[i].want == id;
        if (!seen)
            fail_msg("route %d (%s) has no case", id, router_pattern(id));
    }
}

static void test_param_bounds(void **state)
{
    (void)state;
    char path[ROUTER_PARAM_MAX + 64];
    char param[ROUTER_PARAM_MAX + 2];
    struct route_match m;

    /* Exactly ROUTER_PARAM_MAX characters are captured whole. */
    memset(param, 'a', ROUTER_PARAM_MAX);
    param[ROUTER_PARAM_MAX] = '\0';
    snprintf(path, sizeof path, "/api/v1/orders/%s/cancel", param);
    assert_int_equal(router_match("POST", path, &m), ROUTE_ORDER_CANCEL);
    assert_int_equal(m.nparams, 1);
    assert_string_equal(m.params[0], param);

    /* One more and the path names nothing (not a truncated capture). */
    memset(param, 'a', ROUTER_PARAM_MAX + 1);
    param[ROUTER_PARAM_MAX + 1] = '\0';
    snprintf(path, sizeof path, "/api/v1/orders/%s/cancel", param);
    assert_int_equal(router_match("POST", path, &m), ROUTE_NOT_FOUND);
    snprintf(path, sizeof path, "/api/v1/orders/%s", param);
    assert_int_equal(router_match("GET", path, &m), ROUTE_NOT_FOUND);
    snprintf(path, sizeof path, "/api/v1/sessions/%s", param);
    assert_int_equal(router_match("GET", path, &m), ROUTE_NOT_FOUND);

    /* A parameter is taken verbatim; validating it is the handler's job. */
    assert_int_equal(router_match("GET", "/api/v1/sessions/%2e%2e", &m), ROUTE_SESSION_GET);
    assert_string_equal(m.params[0], "%2e%2e");
}

static void test_match_is_cleared_on_entry(void **state)
{
    (void)state;
    struct route_match m;
    memset(&m, 'x', sizeof m);
    assert_int_equal(router_match("GET", "/livez", &m), ROUTE_LIVEZ);
    assert_int_equal(m.nparams, 0);
    assert_string_equal(m.allow, "");
    assert_string_equal(m.params[0], "");

    /* A 404 leaves nothing behind either, not even a partial capture. */
    memset(&m, 'x', sizeof m);
    assert_int_equal(router_match("GET", "/api/v1/orders/abc/x", &m), ROUTE_NOT_FOUND);
    assert_int_equal(m.nparams, 0);
    assert_string_equal(m.allow, "");
    assert_string_equal(m.params[0], "");
}

static void test_patterns(void **state)
{
    (void)state;
    static const struct {
        int route;
        const char *pattern;
    } want[] = {
        {ROUTE_LIVEZ, "/livez"},
        {ROUTE_ORDERS_CREATE, "/api/v1/orders"},
        {ROUTE_ORDERS_LIST, "/api/v1/orders"},
        {ROUTE_ORDER_GET, "/api/v1/orders/{order_no}"},
        {ROUTE_ORDER_CANCEL, "/api/v1/orders/{order_no}/cancel"},
        {ROUTE_SESSION_GET, "/api/v1/sessions/{id}"},
        {ROUTE_ADMIN_AUDIT, "/api/v1/admin/audit"},
        {ROUTE_NOT_FOUND, "(unmatched)"},
        {ROUTE_METHOD_NOT_ALLOWED, "(method not allowed)"},
        {ROUTE_COUNT, "(unmatched)"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_string_equal(router_pattern(want[i].route), want[i].pattern);

    /* Metrics and logs label requests by pattern: every route has one. */
    for (int id = 0; id < ROUTE_COUNT; id++) {
        const char *p = router_pattern(id);
        assert_non_null(p);
        assert_true(p[0] == '/');
    }
}

/* The columns api.c reads before a handler runs, for the routes whose
 * answer depends on them: who may call, what body, where it runs. */
static void test_route_rows(void **state)
{
    (void)state;
    static const struct {
        int route;
        enum route_access access;
        enum route_body body;
        enum route_runs runs;
    } want[] = {
        {ROUTE_LIVEZ, ROUTE_ACCESS_PUBLIC, ROUTE_BODY_NONE, ROUTE_RUNS_INLINE},
        {ROUTE_METRICS, ROUTE_ACCESS_PUBLIC, ROUTE_BODY_NONE, ROUTE_RUNS_INLINE},
        {ROUTE_READYZ, ROUTE_ACCESS_PUBLIC, ROUTE_BODY_NONE, ROUTE_RUNS_FIBER},
        {ROUTE_TOKENS_CREATE, ROUTE_ACCESS_USER, ROUTE_BODY_OPTIONAL, ROUTE_RUNS_FIBER},
        {ROUTE_ORDERS_CREATE, ROUTE_ACCESS_USER, ROUTE_BODY_REQUIRED, ROUTE_RUNS_FIBER},
        {ROUTE_ORDER_COMPLETE, ROUTE_ACCESS_ADMIN, ROUTE_BODY_OPTIONAL, ROUTE_RUNS_FIBER},
        {ROUTE_PAYMENT_CALLBACK, ROUTE_ACCESS_PUBLIC, ROUTE_BODY_REQUIRED, ROUTE_RUNS_FIBER},
        {ROUTE_SESSIONS_CREATE, ROUTE_ACCESS_ADMIN, ROUTE_BODY_REQUIRED, ROUTE_RUNS_FIBER},
        {ROUTE_ADMIN_AUDIT, ROUTE_ACCESS_ADMIN, ROUTE_BODY_NONE, ROUTE_RUNS_FIBER},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct route_info *ri = router_route(want[i].route);
        assert_non_null(ri);
        assert_int_equal(ri->access, want[i].access);
        assert_int_equal(ri->body, want[i].body);
        assert_int_equal(ri->runs, want[i].runs);
    }
    /* A GET takes no body; every label is the route's bounded name. */
    for (int id = 0; id < ROUTE_COUNT; id++) {
        const struct route_info *ri = router_route(id);
        if (strcmp(ri->method, "GET") == 0)
            assert_int_equal(ri->body, ROUTE_BODY_NONE);
        assert_string_equal(router_label(id), ri->label);
    }
    assert_null(router_route(ROUTE_COUNT));
    assert_null(router_route(ROUTE_NOT_FOUND));
    assert_string_equal(router_label(ROUTE_NOT_FOUND), "(unmatched)");
    assert_string_equal(router_label(ROUTE_METHOD_NOT_ALLOWED), "(method not allowed)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_table),  cmocka_unit_test(test_every_route_is_covered),
        cmocka_unit_test(test_param_bounds), cmocka_unit_test(test_match_is_cleared_on_entry),
        cmocka_unit_test(test_patterns),     cmocka_unit_test(test_route_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
