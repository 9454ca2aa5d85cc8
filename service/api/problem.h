/* problem.h - the error codes of the HTTP contract and the one table that
 * maps each to its status, RFC 9457 type and title. Pure; thread-safe. */
#ifndef TICKETD_PROBLEM_H
#define TICKETD_PROBLEM_H

enum problem {
    PROBLEM_NOT_FOUND,
    PROBLEM_METHOD_NOT_ALLOWED,
    PROBLEM_BAD_REQUEST,
    PROBLEM_UNSUPPORTED_MEDIA_TYPE,
    PROBLEM_PAYLOAD_TOO_LARGE,
    PROBLEM_INVALID_JSON,
    PROBLEM_VALIDATION_FAILED,
    PROBLEM_UNAUTHENTICATED,
    PROBLEM_FORBIDDEN,
    PROBLEM_IDEMPOTENCY_KEY_REQUIRED,
    PROBLEM_IDEMPOTENCY_KEY_INVALID,
    PROBLEM_IDEMPOTENCY_KEY_REUSED,
    PROBLEM_REQUEST_IN_PROGRESS,
    PROBLEM_DUPLICATE_SUBMISSION,
    PROBLEM_ORDER_TOKEN_REQUIRED,
    PROBLEM_ORDER_TOKEN_INVALID,
    PROBLEM_SOLD_OUT,
    PROBLEM_SESSION_NOT_FOUND,
    PROBLEM_ORDER_NOT_FOUND,
    PROBLEM_INVALID_TRANSITION,
    PROBLEM_SIGNATURE_INVALID,
    PROBLEM_TIMESTAMP_OUT_OF_TOLERANCE,
    PROBLEM_DEPENDENCY_UNAVAILABLE,
    PROBLEM_INTERNAL,
    PROBLEM_NOT_IMPLEMENTED,
    PROBLEM_HEADERS_TOO_LARGE,
    PROBLEM_COUNT
};

struct problem_info {
    int status;
    const char *code;  /* UPPER_SNAKE, what clients switch on */
    const char *type;  /* "/problems/sold-out" */
    const char *title; /* short, stable, human-readable */
};

/* Returns the borrowed, static row of p. */
const struct problem_info *problem_info(enum problem p);

#endif
