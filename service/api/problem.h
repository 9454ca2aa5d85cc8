/* problem.h - the error codes of the HTTP contract and what each is on the
 * wire: status, RFC 9457 type and title, from the one table (problems.def).
 * Pure; thread-safe. */
#ifndef TICKETD_PROBLEM_H
#define TICKETD_PROBLEM_H

enum problem {
#define PROBLEM(id, status, code, type, title) PROBLEM_##id,
#include "problems.def"
#undef PROBLEM
    PROBLEM_COUNT
};

struct problem_info {
    int status;
    const char *code;  /* UPPER_SNAKE, what clients switch on */
    const char *type;  /* "/problems/sold-out" */
    const char *title; /* short, stable, human-readable */
};

/* Returns the borrowed, static row of p. */
const struct problem_info *problem_info_of(enum problem p);

#endif
