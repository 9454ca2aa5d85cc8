/* redis_fold.c - a script's fold (redis.h, REDIS_FOLD_HEAD), which carries
 * several calls of the script in one: the queue of a loop turn's calls,
 * taken out by script, and the arguments of one call of the fold. A loop
 * sends the calls of one script that its turn gathered that way
 * (redis_async.c). Apart so that the layout of KEYS and ARGV that the
 * fold's Lua reads is built in one place, and both can be tested alone. */
#include "redis.h"
#include "redis_conn.h"

#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Appends a number's text to *at (room made by the caller) as argument i. */
static void put_number(const char **argv, size_t *lens, int i, char **at, long long v)
{
    int len = sprintf(*at, "%lld", v);
    argv[i] = *at;
    lens[i] = (size_t)len;
    *at += len + 1;
}

int redis_fold_argv(struct redis_cmd *const *cmds, int n, const char ***argv_out, size_t **lens_out,
                    char **text_out)
{
    const struct redis_script *fold = cmds[0]->script->fold;
    bool by_source = strcmp(cmds[0]->argv[0], "EVAL") == 0;
    int nkeys = 0, nargs = 0;
    for (int i = 0; i < n; i++) {
        nkeys += cmds[i]->nkeys;
        nargs += cmds[i]->argc - 3 - cmds[i]->nkeys;
    }
    int argc = 3 + nkeys + 1 + 2 * n + nargs;
    const char **argv = xmalloc((size_t)argc * sizeof *argv);
    size_t *lens = xmalloc((size_t)argc * sizeof *lens);
    char *text = xmalloc((size_t)(2 + 2 * n) * 24), *at = text;
    argv[0] = cmds[0]->argv[0];
    lens[0] = strlen(argv[0]);
    argv[1] = by_source ? fold->source : fold->sha;
    lens[1] = strlen(argv[1]);
    put_number(argv, lens, 2, &at, nkeys);
    int k = 3, a = 3 + nkeys + 1 + 2 * n;
    put_number(argv, lens, 3 + nkeys, &at, n);
    for (int i = 0; i < n; i++) {
        const struct redis_cmd *c = cmds[i];
        int own_args = c->argc - 3 - c->nkeys;
        put_number(argv, lens, 3 + nkeys + 1 + 2 * i, &at, c->nkeys);
        put_number(argv, lens, 3 + nkeys + 2 + 2 * i, &at, own_args);
        for (int j = 0; j < c->nkeys; j++, k++) {
            argv[k] = c->argv[3 + j];
            lens[k] = c->lens[3 + j];
        }
        for (int j = 0; j < own_args; j++, a++) {
            argv[a] = c->argv[3 + c->nkeys + j];
            lens[a] = c->lens[3 + c->nkeys + j];
        }
    }
    *argv_out = argv;
    *lens_out = lens;
    *text_out = text;
    return argc;
}

void redis_fold_push(struct redis_fold_queue *q, struct redis_cmd *c)
{
    c->next = NULL;
    if (q->tail != NULL)
        q->tail->next = c;
    else
        q->head = c;
    q->tail = c;
}

int redis_fold_take(struct redis_fold_queue *q, struct redis_cmd **group, int max)
{
    const struct redis_cmd *first = q->head;
    int n = 0;
    if (first == NULL)
        return 0;
    const struct redis_script *script = first->script;
    const char *verb = first->argv[0];
    q->tail = NULL;
    for (struct redis_cmd **at = &q->head; *at != NULL;) {
        struct redis_cmd *c = *at;
        if (n < max && c->script == script && strcmp(c->argv[0], verb) == 0) {
            group[n++] = c;
            *at = c->next;
        } else {
            q->tail = c;
            at = &c->next;
        }
    }
    return n;
}
