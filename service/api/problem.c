/* problem.c - each problem id's status, code, type and title on the wire,
 * read from problems.def (problem.h). Apart so that the contract's error
 * table has one reader. */
#include "problem.h"

/* A problem's status, code, type and title: handlers pick the problem,
 * this table says what it is on the wire. */
static const struct problem_info table[PROBLEM_COUNT] = {
#define PROBLEM(id, status, code, type, title) [PROBLEM_##id] = {status, code, type, title},
#include "problems.def"
#undef PROBLEM
};

const struct problem_info *problem_info_of(enum problem p)
{
    if ((int)p < 0 || p >= PROBLEM_COUNT)
        p = PROBLEM_INTERNAL;
    return &table[p];
}
