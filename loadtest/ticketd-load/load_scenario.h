/*
 * load_scenario.h - the named load scenarios of ticketd-load.
 *
 * Each scenario plays one way clients and gateways repeat themselves (a
 * retry storm, a double click, a flash sale, a gateway that retries its
 * callbacks, an event stream that redelivers) or a plain benchmark load,
 * and writes what the answers should add up to into the verdict ledger.
 * Scenarios use fresh users and fresh sessions of their own, so that their
 * figures can be checked exactly whatever else the database holds.
 */
#ifndef LOADTEST_LOAD_SCENARIO_H
#define LOADTEST_LOAD_SCENARIO_H

#include "load_engine.h"
#include "load_verdict.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#define LOAD_TARGETS_MAX 16
#define LOAD_ALLOW_MAX   8

struct load_opts {
    const char *scenario;
    FILE *orders_out; /* --orders-out */
    const char *targets[LOAD_TARGETS_MAX];
    int target_count;
    long long requests; /* budget of load requests; 0: none */
    double duration_s;
    int concurrency;
    bool concurrency_set; /* given on the command line, not the default */
    long timeout_ms;

    int rounds;          /* retry-storm keys, double-click bursts, flash sales */
    int copies;          /* retry-storm copies per key */
    int burst;           /* double-click clicks per burst */
    int users;           /* flash-sale buyers; mq-redelivery users */
    int seats;           /* flash-sale seats */
    int orders;          /* gateway-retry and mq-redelivery orders */
    int retries;         /* callback copies per txn_id */
    int sessions;        /* new-orders sessions */
    long long stock;     /* stock of sessions created for open-ended loads */
    int quantity;        /* seats per order */
    long long price;     /* price_cents of sessions created */
    uint64_t session_id; /* use this session instead of creating one (benchmarks) */
    bool no_token;       /* skip POST /tokens (server runs TICKETD_ORDER_TOKEN_REQUIRED=0) */
    bool shared_token;   /* double-click: the clicks of a burst share one token */
    double spread_s;     /* retry-storm: the copies of a key leave over this time */
    double late_s;       /* retry-storm: wait this long before the retries after the storm */
    int prefer_wait_s;   /* orders and carts send Prefer: wait=N (0: no Prefer header) */
    /* double-click: the clicks of a burst leave this long after the one
     * before (ms each, up to 8); 0 entries: at once. */
    int gaps_ms[8];
    int gap_count;
    double lock_ttl_s; /* double-click: the server's TICKETD_LOCK_TTL_MS, to judge the lock */
    /* Problem codes also allowed as final order answers, for runs that
     * switched off the defence that would otherwise have answered. */
    const char *allow[LOAD_ALLOW_MAX];
    int allow_count;
    int client_retries;    /* re-sends of an uncertain request (10) */
    double retry_window_s; /* ... within this time of its first attempt (20) */

    const char *jwt_secret;
    const char *pay_secret;
    uint64_t seed; /* --seed: the run id and the default user_base come from it */
    uint64_t user_base;
    uint64_t admin_user;
    long token_ttl_s;
    double settle_s;
    bool no_audit;
    const char *after_load;    /* shell command run after the load, before the checks */
    const char *midway;        /* refusal-storm: shell command run after its orders */
    const char *fault;         /* shell command run once during the load */
    long long fault_after;     /* ... once this many load answers came (-1: by the clock) */
    double fault_at_s;         /* ... this long into the load (-1: by the answers) */
    const char *fault_end;     /* shell command that ends the fault (release a stall, wake) */
    long long fault_end_after; /* ... once this many more load answers came after --fault */
    const char *json_path;
    const char *history_path; /* --history: every client operation, a JSON line each */
    double series_interval_s; /* time series interval of the JSON report */
    int verbose;
};

/* What a scenario run shares: the options, the ledger, the run's id. */
struct scen_env {
    const struct load_opts *opts;
    struct verdict *verdict;
    char run_id[16];
    double deadline;
    double t0; /* when the load started (load_now()): second 0 of the time series */
};

/* True if name is a known scenario. */
bool scenario_known(const char *name);

/* The scenario names, for the usage text. */
const char *scenario_names(void);

/*
 * Runs env->opts->scenario to its end (bounds reached or work done) and
 * adds every engine's figures to total. Set-up failures are recorded with
 * verdict_fail(). Returns 0, or -1 if nothing could run.
 */
int scenario_run(const struct scen_env *env, struct load_stats *total);

/* Stops every running engine (SIGINT): nothing new starts. Async-signal
 * safe. */
void scenario_interrupt(void);

/* Runs cmd with /bin/sh -c and waits for it (the --after-load and
 * --midway commands): its exit status, or -1 if it could not run or was
 * killed. */
int scenario_shell_run(const char *cmd);

#endif
