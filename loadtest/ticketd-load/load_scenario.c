/*
 * load_scenario.c - the table of named scenarios (load_scenario.h): which
 * function plays each name, their engines, and "mixed", every other
 * scenario at once. The scenarios themselves live one family a file
 * (load_scen_*.c), made of the parts in load_scen_kit.c.
 */
#include "load_scenario.h"

#include "load_scen_kit.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Set by SIGINT (scenario_interrupt): the scenarios start nothing new. */
static atomic_bool interrupted;

void scenario_interrupt(void)
{
    atomic_store(&interrupted, true);
}

bool scen_interrupted(void)
{
    return atomic_load(&interrupted);
}

typedef int (*scen_fn)(struct scen *s);

struct scen_def {
    const char *name;
    scen_fn run;
};

static int scen_mixed(struct scen *s);

static const struct scen_def scen_defs[] = {
    {"retry-storm", scen_retry_storm},     {"double-click", scen_double_click},
    {"flash-sale", scen_flash_sale},       {"gateway-retry", scen_gateway_retry},
    {"mq-redelivery", scen_mq_redelivery}, {"new-orders", scen_new_orders},
    {"hot-session", scen_hot_session},     {"cart-storm", scen_cart_storm},
    {"refusal-storm", scen_refusal_storm}, {"mixed", scen_mixed},
};

#define SCEN_DEF_COUNT (sizeof(scen_defs) / sizeof(scen_defs[0]))

bool scenario_known(const char *name)
{
    for (size_t i = 0; i < SCEN_DEF_COUNT; i++)
        if (strcmp(scen_defs[i].name, name) == 0)
            return true;
    return false;
}

const char *scenario_names(void)
{
    return "retry-storm, double-click, flash-sale, gateway-retry, mq-redelivery, new-orders, "
           "hot-session, cart-storm, refusal-storm, mixed";
}

static struct load_engine *engine_for(const struct scen_env *env, long long budget)
{
    const struct load_opts *o = env->opts;
    struct load_engine_config cfg = {
        .targets = o->targets,
        .target_count = o->target_count,
        .timeout_ms = o->timeout_ms,
        .max_requests = budget,
        .deadline = env->deadline,
        .series_t0 = env->t0,
        .series_tick_s = o->series_interval_s,
        .retries = o->client_retries,
        .retry_window_s = o->retry_window_s,
        .verbose = o->verbose,
        .orders_out = o->orders_out,
    };

    return load_engine_new(&cfg);
}

/* The engines of a run, so that SIGINT (via the flag) and the merge can
 * reach them. */
struct mixed_part {
    struct scen s;
    const struct scen_def *def;
    pthread_t thread;
    bool started;
    int rc;
};

static void *mixed_thread(void *arg)
{
    struct mixed_part *p = arg;

    p->rc = p->def->run(&p->s);
    return NULL;
}

/* A blend: every other scenario at once, each in its own thread with its
 * own engine, a share of the concurrency and of the request budget. */
static int scen_mixed(struct scen *s)
{
    static const char *const parts[] = {"retry-storm",   "double-click",  "flash-sale",
                                        "gateway-retry", "mq-redelivery", "new-orders"};
    enum { PARTS = sizeof(parts) / sizeof(parts[0]) };
    struct mixed_part p[PARTS];
    int conc = s->concurrency / PARTS > 2 ? s->concurrency / PARTS : 2;
    long long budget = s->budget > 0 ? (s->budget + PARTS - 1) / PARTS : 0;
    int rc = 0;

    memset(p, 0, sizeof(p));
    for (int i = 0; i < PARTS; i++) {
        for (size_t d = 0; d < SCEN_DEF_COUNT; d++)
            if (strcmp(scen_defs[d].name, parts[i]) == 0)
                p[i].def = &scen_defs[d];
        p[i].s = *s;
        p[i].s.index = s->index + 1 + i;
        p[i].s.next_user = 0;
        p[i].s.key_seq = 0;
        p[i].s.txn_seq = 0;
        p[i].s.concurrency = conc;
        p[i].s.budget = budget;
        p[i].s.eng = engine_for(s->env, budget);
        if (p[i].s.eng == NULL) {
            verdict_fail(s->v, "mixed: cannot start an engine");
            rc = -1;
        }
    }
    for (int i = 0; i < PARTS && rc == 0; i++) {
        p[i].started = pthread_create(&p[i].thread, NULL, mixed_thread, &p[i]) == 0;
        if (!p[i].started)
            verdict_fail(s->v, "mixed: cannot start a thread");
    }
    for (int i = 0; i < PARTS; i++) {
        if (p[i].started) {
            pthread_join(p[i].thread, NULL);
            load_engine_stats_add(s->eng, load_engine_stats(p[i].s.eng));
        }
        load_engine_free(p[i].s.eng);
    }
    return rc;
}

int scenario_run(const struct scen_env *env, struct load_stats *total)
{
    const struct scen_def *def = NULL;
    struct scen s;
    int rc;

    for (size_t i = 0; i < SCEN_DEF_COUNT; i++)
        if (strcmp(scen_defs[i].name, env->opts->scenario) == 0)
            def = &scen_defs[i];
    if (def == NULL)
        return -1;
    memset(&s, 0, sizeof(s));
    s.env = env;
    s.o = env->opts;
    s.v = env->verdict;
    s.concurrency = env->opts->concurrency;
    s.budget = env->opts->requests;
    s.eng = engine_for(env, s.budget);
    if (s.eng == NULL)
        return -1;
    rc = def->run(&s);
    load_stats_merge(total, load_engine_stats(s.eng));
    load_engine_free(s.eng);
    return rc;
}

int scenario_shell_run(const char *cmd)
{
    int status = 0;
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
