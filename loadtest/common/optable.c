/*
 * optable.c - the table-driven getopt_long parser of optable.h.
 */
#include "optable.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's answer for row i of a table (past every char). */
#define ROW_VAL(i) (256 + (i))

int optable_ll(const char *s, long long min, long long max, long long *out)
{
    char *end = NULL;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Stores arg into row o's destination. Returns an OPTABLE_* answer. */
static int store(const struct optable_opt *o, const char *arg)
{
    long long v = 0;

    switch (o->kind) {
    case OPTABLE_STR:
        *(const char **)o->dst = arg;
        return OPTABLE_OK;
    case OPTABLE_FLAG:
        *(bool *)o->dst = true;
        return OPTABLE_OK;
    case OPTABLE_COUNT:
        (*(int *)o->dst)++;
        return OPTABLE_OK;
    case OPTABLE_SET:
        *(int *)o->dst = (int)o->min;
        return OPTABLE_OK;
    case OPTABLE_CALL:
        return o->call(arg, o->dst);
    case OPTABLE_HELP:
        return OPTABLE_OK;
    default:
        break;
    }
    if (optable_ll(arg, o->min, o->max, &v) != 0)
        return OPTABLE_BAD_VALUE;
    switch (o->kind) {
    case OPTABLE_INT:
        *(int *)o->dst = (int)v;
        break;
    case OPTABLE_LONG:
        *(long *)o->dst = (long)v;
        break;
    case OPTABLE_LL:
        *(long long *)o->dst = v;
        break;
    case OPTABLE_U64:
        *(uint64_t *)o->dst = (uint64_t)v;
        break;
    case OPTABLE_SECONDS:
        *(double *)o->dst = (double)v;
        break;
    default: /* OPTABLE_MS */
        *(double *)o->dst = (double)v / 1000.0;
        break;
    }
    return OPTABLE_OK;
}

static bool takes_argument(enum optable_kind k)
{
    return k != OPTABLE_FLAG && k != OPTABLE_COUNT && k != OPTABLE_SET && k != OPTABLE_HELP;
}

/* The row getopt_long answered c for, or NULL (an unknown option). */
static const struct optable_opt *row_of(const struct optable *t, int c)
{
    if (c >= ROW_VAL(0) && c < ROW_VAL(t->count))
        return &t->opts[c - ROW_VAL(0)];
    for (int i = 0; i < t->count; i++)
        if (t->opts[i].letter != 0 && t->opts[i].letter == c)
            return &t->opts[i];
    return NULL;
}

int optable_parse(const struct optable *t, int argc, char **argv)
{
    struct option *longopts = calloc((size_t)t->count + 1, sizeof(*longopts));
    char shortopts[2 * 64 + 1];
    size_t ns = 0;
    int c, rc = 0;

    if (longopts == NULL)
        return -1;
    for (int i = 0; i < t->count; i++) {
        const struct optable_opt *o = &t->opts[i];

        longopts[i] = (struct option){
            o->name, takes_argument(o->kind) ? required_argument : no_argument, NULL, ROW_VAL(i)};
        if (o->letter != 0 && ns + 2 < sizeof(shortopts)) {
            shortopts[ns++] = o->letter;
            if (takes_argument(o->kind))
                shortopts[ns++] = ':';
        }
    }
    shortopts[ns] = '\0';
    while (rc == 0 && (c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        const struct optable_opt *o = row_of(t, c);
        int r;

        if (o == NULL) {
            t->usage(stderr);
            rc = -1;
            break;
        }
        if (o->kind == OPTABLE_HELP) {
            free(longopts);
            t->usage(stdout);
            exit(0);
        }
        if (o->given != NULL)
            *o->given = true;
        r = store(o, optarg);
        if (r == OPTABLE_BAD_VALUE)
            fprintf(stderr, "%s: bad value '%s'\n", t->prog, optarg);
        if (r != OPTABLE_OK)
            rc = -1;
    }
    free(longopts);
    return rc;
}
