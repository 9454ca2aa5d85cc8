/* test_resp.c - the response builder: RFC 9457 problem bodies, JSON and raw
 * bodies, and headers (replaced by name, bounded in number). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "resp.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *parse_body(const struct resp *w)
{
    json_error_t e;
    assert_non_null(w->body);
    assert_int_equal(strlen(w->body), w->body_len);
    json_t *o = json_loadb(w->body, w->body_len, JSON_REJECT_DUPLICATES, &e);
    if (o == NULL)
        fail_msg("body is not JSON: %s (%s)", e.text, w->body);
    assert_true(json_is_object(o));
    return o;
}

static void assert_problem_shape(const struct resp *w, enum problem p, const char *field,
                                 const char *detail)
{
    const struct problem_info *info = problem_info_of(p);
    assert_int_equal(w->status, info->status);
    assert_string_equal(w->content_type, "application/problem+json");
    assert_string_equal(w->code, info->code);
    json_t *o = parse_body(w);
    assert_string_equal(json_string_value(json_object_get(o, "type")), info->type);
    assert_string_equal(json_string_value(json_object_get(o, "title")), info->title);
    assert_true(json_is_integer(json_object_get(o, "status")));
    assert_int_equal(json_integer_value(json_object_get(o, "status")), info->status);
    assert_string_equal(json_string_value(json_object_get(o, "code")), info->code);
    assert_string_equal(json_string_value(json_object_get(o, "detail")), detail);
    if (field != NULL)
        assert_string_equal(json_string_value(json_object_get(o, "field")), field);
    else
        assert_null(json_object_get(o, "field"));
    /* Exactly these members: nothing internal leaks into the body. */
    assert_int_equal(json_object_size(o), field != NULL ? 6 : 5);
    json_decref(o);
}

static void test_problem_shape(void **state)
{
    (void)state;
    struct resp w;
    resp_init(&w);
    resp_problem(&w, PROBLEM_SOLD_OUT, NULL, "not enough seats left for %d", 3);
    assert_problem_shape(&w, PROBLEM_SOLD_OUT, NULL, "not enough seats left for 3");
    resp_reset(&w);

    resp_problem(&w, PROBLEM_VALIDATION_FAILED, "quantity", "quantity must be from %d to %d", 1, 6);
    assert_problem_shape(&w, PROBLEM_VALIDATION_FAILED, "quantity", "quantity must be from 1 to 6");
    resp_reset(&w);

    /* Every problem of the table renders the same shape. */
    for (int p = 0; p < PROBLEM_COUNT; p++) {
        resp_problem(&w, (enum problem)p, NULL, "detail %d", p);
        char want[32];
        snprintf(want, sizeof want, "detail %d", p);
        assert_problem_shape(&w, (enum problem)p, NULL, want);
        resp_reset(&w);
    }
}

static void test_problem_detail_is_escaped_or_withheld(void **state)
{
    (void)state;
    struct resp w;
    resp_init(&w);
    /* Client text with quotes and control characters stays valid JSON. */
    resp_problem(&w, PROBLEM_NOT_FOUND, NULL, "no resource at %s", "/a\"b\\c\n\x01");
    assert_problem_shape(&w, PROBLEM_NOT_FOUND, NULL, "no resource at /a\"b\\c\n\x01");
    resp_reset(&w);

    /* Bytes that are not UTF-8 cannot be a JSON string: the detail is
     * withheld, the problem still answered. */
    resp_problem(&w, PROBLEM_NOT_FOUND, NULL, "no resource at %s", "/\xff\xfe");
    assert_problem_shape(&w, PROBLEM_NOT_FOUND, NULL, "(detail not shown)");
    resp_reset(&w);

    /* A detail longer than the buffer is cut, not overflowed. */
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    resp_problem(&w, PROBLEM_BAD_REQUEST, NULL, "%s", big);
    json_t *o = parse_body(&w);
    const char *d = json_string_value(json_object_get(o, "detail"));
    assert_non_null(d);
    assert_true(strlen(d) > 0 && strlen(d) < sizeof big - 1);
    json_decref(o);
    resp_reset(&w);
}

static void test_headers_survive_problem(void **state)
{
    (void)state;
    struct resp w;
    resp_init(&w);
    /* Set before the body, as handlers do for Retry-After and the layer. */
    resp_header_add(&w, "Retry-After", "1");
    resp_problem(&w, PROBLEM_DEPENDENCY_UNAVAILABLE, NULL, "down");
    resp_header_add(&w, "Idempotency-Layer", "token");
    assert_string_equal(resp_get_header(&w, "Retry-After"), "1");
    assert_string_equal(resp_get_header(&w, "Idempotency-Layer"), "token");
    assert_int_equal(w.nheaders, 2);
    resp_reset(&w);
}

static void test_header_replace(void **state)
{
    (void)state;
    struct resp w;
    resp_init(&w);
    resp_header_add(&w, "Location", "/a");
    resp_header_add(&w, "X-One", "1");
    resp_header_add(&w, "location", "/b"); /* names are case-insensitive */
    assert_int_equal(w.nheaders, 2);
    assert_string_equal(resp_get_header(&w, "LOCATION"), "/b");
    assert_string_equal(resp_get_header(&w, "x-one"), "1");
    assert_null(resp_get_header(&w, "X-Two"));

    /* The value is copied, not borrowed. */
    char v[] = "abc";
    resp_header_add(&w, "X-Copy", v);
    v[0] = 'Z';
    assert_string_equal(resp_get_header(&w, "X-Copy"), "abc");
    resp_reset(&w);
    assert_int_equal(w.nheaders, 0);
    assert_null(resp_get_header(&w, "Location"));
}

static void test_header_bound(void **state)
{
    (void)state;
    struct resp w;
    char name[16];
    resp_init(&w);
    for (int i = 0; i < RESP_MAX_HEADERS + 3; i++) {
        snprintf(name, sizeof name, "X-H%d", i);
        resp_header_add(&w, name, "v");
    }
    /* Past the bound new names are dropped (and logged)... */
    assert_int_equal(w.nheaders, RESP_MAX_HEADERS);
    assert_null(resp_get_header(&w, "X-H8"));
    /* ...but an existing one can still be replaced. */
    resp_header_add(&w, "X-H0", "new");
    assert_string_equal(resp_get_header(&w, "X-H0"), "new");
    resp_reset(&w);
}

static void test_json_and_raw_bodies(void **state)
{
    (void)state;
    struct resp w;
    resp_init(&w);
    assert_int_equal(w.status, 500); /* until a handler answers */
    assert_null(w.body);

    resp_json(&w, 201, json_pack("{s:s,s:i}", "token", "abc", "expires_in", 600));
    assert_int_equal(w.status, 201);
    assert_string_equal(w.content_type, "application/json");
    assert_string_equal(w.body, "{\"token\":\"abc\",\"expires_in\":600}");
    assert_null(w.code);

    /* A second body replaces the first (ASan sees the first one freed). */
    static const char raw[] = "ticketd_up 1\n";
    resp_raw(&w, 200, "text/plain", raw, sizeof raw - 1);
    assert_int_equal(w.status, 200);
    assert_string_equal(w.content_type, "text/plain");
    assert_int_equal(w.body_len, sizeof raw - 1);
    assert_string_equal(w.body, raw);
    assert_true(w.body != raw);

    /* Only len bytes are taken. */
    resp_raw(&w, 200, "text/plain", "abcdef", 3);
    assert_int_equal(w.body_len, 3);
    assert_string_equal(w.body, "abc");

    resp_reset(&w);
    assert_int_equal(w.status, 500);
    assert_null(w.body);
    assert_int_equal(w.body_len, 0);
    /* Reset twice is harmless. */
    resp_reset(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_problem_shape),
        cmocka_unit_test(test_problem_detail_is_escaped_or_withheld),
        cmocka_unit_test(test_headers_survive_problem),
        cmocka_unit_test(test_header_replace),
        cmocka_unit_test(test_header_bound),
        cmocka_unit_test(test_json_and_raw_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
