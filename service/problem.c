#include "problem.h"

/* A problem's status, code, type and title: handlers pick the problem,
 * this table says what it is on the wire (docs/openapi.yaml). */
static const struct problem_info table[PROBLEM_COUNT] = {
    [PROBLEM_NOT_FOUND] = {404, "NOT_FOUND", "/problems/not-found", "Not found"},
    [PROBLEM_METHOD_NOT_ALLOWED] = {405, "METHOD_NOT_ALLOWED", "/problems/method-not-allowed",
                                    "Method not allowed"},
    [PROBLEM_BAD_REQUEST] = {400, "BAD_REQUEST", "/problems/bad-request", "Bad request"},
    [PROBLEM_UNSUPPORTED_MEDIA_TYPE] = {415, "UNSUPPORTED_MEDIA_TYPE",
                                        "/problems/unsupported-media-type",
                                        "Unsupported media type"},
    [PROBLEM_PAYLOAD_TOO_LARGE] = {413, "PAYLOAD_TOO_LARGE", "/problems/payload-too-large",
                                   "Payload too large"},
    [PROBLEM_INVALID_JSON] = {400, "INVALID_JSON", "/problems/invalid-json", "Invalid JSON"},
    [PROBLEM_VALIDATION_FAILED] = {400, "VALIDATION_FAILED", "/problems/validation-failed",
                                   "Validation failed"},
    [PROBLEM_UNAUTHENTICATED] = {401, "UNAUTHENTICATED", "/problems/unauthenticated",
                                 "Authentication required"},
    [PROBLEM_FORBIDDEN] = {403, "FORBIDDEN", "/problems/forbidden", "Forbidden"},
    [PROBLEM_IDEMPOTENCY_KEY_REQUIRED] = {400, "IDEMPOTENCY_KEY_REQUIRED",
                                          "/problems/idempotency-key-required",
                                          "Idempotency-Key required"},
    [PROBLEM_IDEMPOTENCY_KEY_INVALID] = {400, "IDEMPOTENCY_KEY_INVALID",
                                         "/problems/idempotency-key-invalid",
                                         "Idempotency-Key invalid"},
    [PROBLEM_IDEMPOTENCY_KEY_REUSED] = {422, "IDEMPOTENCY_KEY_REUSED",
                                        "/problems/idempotency-key-reused",
                                        "Idempotency-Key reused with another payload"},
    [PROBLEM_REQUEST_IN_PROGRESS] = {409, "REQUEST_IN_PROGRESS", "/problems/request-in-progress",
                                     "Request in progress"},
    [PROBLEM_DUPLICATE_SUBMISSION] = {409, "DUPLICATE_SUBMISSION", "/problems/duplicate-submission",
                                      "Duplicate submission"},
    [PROBLEM_ORDER_TOKEN_REQUIRED] = {400, "ORDER_TOKEN_REQUIRED", "/problems/order-token-required",
                                      "Order token required"},
    [PROBLEM_ORDER_TOKEN_INVALID] = {409, "ORDER_TOKEN_INVALID", "/problems/order-token-invalid",
                                     "Order token invalid"},
    [PROBLEM_SOLD_OUT] = {409, "SOLD_OUT", "/problems/sold-out", "Sold out"},
    [PROBLEM_SESSION_NOT_FOUND] = {404, "SESSION_NOT_FOUND", "/problems/session-not-found",
                                   "Session not found"},
    [PROBLEM_ORDER_NOT_FOUND] = {404, "ORDER_NOT_FOUND", "/problems/order-not-found",
                                 "Order not found"},
    [PROBLEM_INVALID_TRANSITION] = {409, "INVALID_TRANSITION", "/problems/invalid-transition",
                                    "Invalid state transition"},
    [PROBLEM_SIGNATURE_INVALID] = {401, "SIGNATURE_INVALID", "/problems/signature-invalid",
                                   "Signature invalid"},
    [PROBLEM_TIMESTAMP_OUT_OF_TOLERANCE] = {401, "TIMESTAMP_OUT_OF_TOLERANCE",
                                            "/problems/timestamp-out-of-tolerance",
                                            "Timestamp out of tolerance"},
    [PROBLEM_DEPENDENCY_UNAVAILABLE] = {503, "DEPENDENCY_UNAVAILABLE",
                                        "/problems/dependency-unavailable",
                                        "Dependency unavailable"},
    [PROBLEM_INTERNAL] = {500, "INTERNAL_ERROR", "/problems/internal-error",
                          "Internal server error"},
    [PROBLEM_NOT_IMPLEMENTED] = {501, "NOT_IMPLEMENTED", "/problems/not-implemented",
                                 "Not implemented"},
};

const struct problem_info *problem_info(enum problem p)
{
    if ((int)p < 0 || p >= PROBLEM_COUNT)
        p = PROBLEM_INTERNAL;
    return &table[p];
}
