/* test_problem.c - the error table against the HTTP contract: every code a
 * client can switch on has the status the contract gives it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "problem.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The contract's codes and statuses, copied from the API description
 * rather than derived from the table under test. */
static const struct {
    enum problem p;
    int status;
    const char *code;
} contract[] = {
    {PROBLEM_NOT_FOUND, 404, "NOT_FOUND"},
    {PROBLEM_METHOD_NOT_ALLOWED, 405, "METHOD_NOT_ALLOWED"},
    {PROBLEM_UNSUPPORTED_MEDIA_TYPE, 415, "UNSUPPORTED_MEDIA_TYPE"},
    {PROBLEM_PAYLOAD_TOO_LARGE, 413, "PAYLOAD_TOO_LARGE"},
    {PROBLEM_INVALID_JSON, 400, "INVALID_JSON"},
    {PROBLEM_VALIDATION_FAILED, 400, "VALIDATION_FAILED"},
    {PROBLEM_UNAUTHENTICATED, 401, "UNAUTHENTICATED"},
    {PROBLEM_FORBIDDEN, 403, "FORBIDDEN"},
    {PROBLEM_IDEMPOTENCY_KEY_REQUIRED, 400, "IDEMPOTENCY_KEY_REQUIRED"},
    {PROBLEM_IDEMPOTENCY_KEY_INVALID, 400, "IDEMPOTENCY_KEY_INVALID"},
    {PROBLEM_IDEMPOTENCY_KEY_NOT_FOUND, 404, "IDEMPOTENCY_KEY_NOT_FOUND"},
    {PROBLEM_IDEMPOTENCY_KEY_REUSED, 422, "IDEMPOTENCY_KEY_REUSED"},
    {PROBLEM_REQUEST_IN_PROGRESS, 409, "REQUEST_IN_PROGRESS"},
    {PROBLEM_DUPLICATE_SUBMISSION, 409, "DUPLICATE_SUBMISSION"},
    {PROBLEM_ORDER_TOKEN_REQUIRED, 400, "ORDER_TOKEN_REQUIRED"},
    {PROBLEM_ORDER_TOKEN_INVALID, 409, "ORDER_TOKEN_INVALID"},
    {PROBLEM_SOLD_OUT, 409, "SOLD_OUT"},
    {PROBLEM_SESSION_NOT_FOUND, 404, "SESSION_NOT_FOUND"},
    {PROBLEM_ORDER_NOT_FOUND, 404, "ORDER_NOT_FOUND"},
    {PROBLEM_INVALID_TRANSITION, 409, "INVALID_TRANSITION"},
    {PROBLEM_SIGNATURE_INVALID, 401, "SIGNATURE_INVALID"},
    {PROBLEM_TIMESTAMP_OUT_OF_TOLERANCE, 401, "TIMESTAMP_OUT_OF_TOLERANCE"},
    {PROBLEM_DEPENDENCY_UNAVAILABLE, 503, "DEPENDENCY_UNAVAILABLE"},
    /* Not named by the contract, but answered by ticketd. */
    {PROBLEM_BAD_REQUEST, 400, "BAD_REQUEST"},
    {PROBLEM_INTERNAL, 500, "INTERNAL_ERROR"},
    /* ticketd's own: a transfer coding it does not take (RFC 9112 6.1) */
    {PROBLEM_NOT_IMPLEMENTED, 501, "NOT_IMPLEMENTED"},
    /* ... and a request head that would leave no room for its answer */
    {PROBLEM_HEADERS_TOO_LARGE, 431, "HEADERS_TOO_LARGE"},
};

#define N_CONTRACT (sizeof contract / sizeof contract[0])

static void test_contract_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CONTRACT; i++) {
        const struct problem_info *info = problem_info_of(contract[i].p);
        assert_non_null(info);
        assert_string_equal(info->code, contract[i].code);
        if (info->status != contract[i].status)
            fail_msg("%s: status %d, want %d", contract[i].code, info->status, contract[i].status);
    }
}

/* Every enum value is in the contract list once, and no two share a code:
 * a problem added without a contract row fails here. */
static void test_every_problem_is_listed_once(void **state)
{
    (void)state;
    assert_int_equal(N_CONTRACT, PROBLEM_COUNT);
    for (int p = 0; p < PROBLEM_COUNT; p++) {
        int seen = 0;
        for (size_t i = 0; i < N_CONTRACT; i++)
            seen += contract[i].p == (enum problem)p;
        if (seen != 1)
            fail_msg("problem %d listed %d times", p, seen);
        for (int q = p + 1; q < PROBLEM_COUNT; q++)
            assert_string_not_equal(problem_info_of(p)->code, problem_info_of(q)->code);
    }
}

/* RFC 9457 type: "/problems/" and the code in lowercase kebab case, as in
 * the contract's example "/problems/sold-out". */
static void test_type_and_title(void **state)
{
    (void)state;
    for (int p = 0; p < PROBLEM_COUNT; p++) {
        const struct problem_info *info = problem_info_of(p);
        char want[128] = "/problems/";
        size_t n = strlen(want);
        for (const char *c = info->code; *c != '\0' && n + 1 < sizeof want; c++)
            want[n++] = *c == '_' ? '-' : (char)tolower((unsigned char)*c);
        want[n] = '\0';
        assert_string_equal(info->type, want);
        assert_non_null(info->title);
        assert_true(strlen(info->title) > 0);
        /* Codes are UPPER_SNAKE. */
        assert_int_equal(strspn(info->code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"), strlen(info->code));
    }
}

static void test_out_of_range_is_internal(void **state)
{
    (void)state;
    assert_ptr_equal(problem_info_of(PROBLEM_COUNT), problem_info_of(PROBLEM_INTERNAL));
    assert_ptr_equal(problem_info_of((enum problem) - 1), problem_info_of(PROBLEM_INTERNAL));
    assert_ptr_equal(problem_info_of((enum problem)1000), problem_info_of(PROBLEM_INTERNAL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contract_table),
        cmocka_unit_test(test_every_problem_is_listed_once),
        cmocka_unit_test(test_type_and_title),
        cmocka_unit_test(test_out_of_range_is_internal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
