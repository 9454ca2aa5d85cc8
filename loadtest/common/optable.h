/*
 * optable.h - one command-line parser for the tools of loadtest/, driven
 * by a table of options.
 *
 * Each row names a long option (and maybe a one-letter one), the kind of
 * value it takes, where the value goes and, for numbers, the range it must
 * lie in. optable_parse() runs getopt_long over argv by that table: a value
 * out of range or not a number is "PROG: bad value 'ARG'" on stderr; an
 * unknown option is getopt's message and the usage on stderr; --help (or
 * -h) prints the usage on stdout and exits 0. Options may repeat: the last
 * one wins, except for OPTABLE_COUNT and OPTABLE_CALL.
 */
#ifndef LOADTEST_OPTABLE_H
#define LOADTEST_OPTABLE_H

#include <stdbool.h>
#include <stdio.h>

enum optable_kind {
    OPTABLE_STR,     /* const char *: the argument itself */
    OPTABLE_INT,     /* int in [min, max] */
    OPTABLE_LONG,    /* long in [min, max] */
    OPTABLE_LL,      /* long long in [min, max] */
    OPTABLE_U64,     /* uint64_t in [min, max] */
    OPTABLE_SECONDS, /* double seconds, given in whole seconds in [min, max] */
    OPTABLE_MS,      /* double seconds, given in milliseconds in [min, max] */
    OPTABLE_FLAG,    /* bool set true; no argument */
    OPTABLE_COUNT,   /* int, one more each time; no argument */
    OPTABLE_SET,     /* int set to min; no argument (--hot: one session) */
    OPTABLE_CALL,    /* call(arg, dst) decides */
    OPTABLE_HELP,    /* prints the usage on stdout and exits 0 */
};

/* What an OPTABLE_CALL function returns. */
enum { OPTABLE_OK = 0, OPTABLE_BAD_VALUE = -1, OPTABLE_FAILED = -2 /* it said why */ };

struct optable_opt {
    const char *name; /* the long option, without "--" */
    char letter;      /* the one-letter option, or 0 */
    enum optable_kind kind;
    void *dst;
    long long min, max;
    int (*call)(const char *arg, void *dst);
    bool *given; /* when not NULL: set true once the option is given */
};

struct optable {
    const char *prog; /* the tool's name, first word of its messages */
    void (*usage)(FILE *out);
    const struct optable_opt *opts;
    int count;
};

/* Parses the options of argv by t. Returns 0, with optind at the first
 * argument that is no option, or -1 after saying why on stderr. */
int optable_parse(const struct optable *t, int argc, char **argv);

/* strtoll of all of s, in [min, max]: 0, or -1 leaving *out alone. */
int optable_ll(const char *s, long long min, long long max, long long *out);

#endif
