/*
 * ticketd-load - load and replay scenarios against ticketd, with a verdict.
 *
 * Runs one named scenario against one or more ticketd instances, records
 * every answer, then asks the service (session stock, /me points, the
 * admin audit) whether any guarantee was broken, and prints a table.
 * Exit code: 0 no damage, 2 damage found (an answer the contract forbids
 * included), 1 usage or connection errors, a failed --fault command, or
 * requests that never got a definite answer.
 */
#include "load_engine.h"
#include "load_history.h"
#include "load_scenario.h"
#include "load_sign.h"
#include "load_verdict.h"
#include "optable.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Secrets found in --config; the file's values outlive main's parsing. */
static char config_jwt[512];
static char config_pay[512];

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: ticketd-load SCENARIO [options]\n"
        "Scenarios: %s\n"
        "\n"
        "Targets and bounds\n"
        "  --target URL        ticketd base URL, repeatable (round robin); default\n"
        "                      http://127.0.0.1:8080\n"
        "  --requests N        stop starting requests after N (default 200000)\n"
        "  --duration S        stop starting requests after S seconds (default 30)\n"
        "  --concurrency C     requests in flight at once (default 32)\n"
        "  --timeout MS        per request (default 10000)\n"
        "\n"
        "Client retries (a request whose answer leaves the outcome unknown)\n"
        "  --client-retries N  send a request that got no HTTP answer or a 5xx again, the\n"
        "                      same key, token and body, after its Retry-After (else 1 s),\n"
        "                      at most N times (default 10; 0: never); after no answer,\n"
        "                      to the next --target. The last answer is the one judged\n"
        "  --retry-for S       no retry later than S seconds after the first attempt (20)\n"
        "\n"
        "Scenario shape (0 or absent: the scenario's default)\n"
        "  --rounds N          retry-storm keys (50), double-click bursts (50), flash sales (1),\n"
        "                      cart-storm users (40, two carts each), refusal-storm\n"
        "                      users (200)\n"
        "  --copies N          retry-storm copies of each request (8); flash-sale copies of\n"
        "                      each buyer's order (1); cart-storm copies of\n"
        "                      each cart (4)\n"
        "  --burst N           double-click clicks per burst (2)\n"
        "  --users N           flash-sale buyers (200); mq-redelivery users (orders/3)\n"
        "  --seats N           flash-sale seats (10)\n"
        "  --orders N          gateway-retry and mq-redelivery orders (100)\n"
        "  --retries N         callback copies per txn_id (3)\n"
        "  --sessions N        new-orders sessions (100)\n"
        "  --stock N           stock of new-orders/hot-session sessions (1000000)\n"
        "  --quantity N        seats per order (1)\n"
        "  --price CENTS       price of the sessions created (1000)\n"
        "  --session ID        order on this existing session instead of creating one\n"
        "                      (its stock is then not checked)\n"
        "  --no-token          send orders without X-Order-Token (only for a server run\n"
        "                      with TICKETD_ORDER_TOKEN_REQUIRED=0)\n"
        "  --shared-token      double-click: the clicks of a burst share one order token\n"
        "                      (one form, submitted twice, each time with a new key)\n"
        "  --spread MS         retry-storm: the copies of a key leave over MS ms instead of\n"
        "                      at once (a client resending on its own timer), each\n"
        "                      copy first to the next --target\n"
        "  --late MS           retry-storm: wait MS ms before the retries after the storm\n"
        "                      (past TICKETD_IDEM_TTL_S: the records have expired)\n"
        "  --prefer-wait N     send Prefer: wait=N with every order and cart: a copy that\n"
        "                      meets its key in flight waits for the first (RFC 7240)\n"
        "  --gaps MS,MS...     double-click: each click leaves MS ms after the one before\n"
        "  --lock-ttl MS       double-click: the server's TICKETD_LOCK_TTL_MS; an order made\n"
        "                      while another click of the burst held the lock is damage\n"
        "  --midway CMD        refusal-storm: run CMD (/bin/sh -c) after its orders and\n"
        "                      before its refusals, and wait for it (e.g. flush Redis)\n"
        "  --allow CODE        also allow this problem code as an order's answer (a run\n"
        "                      with the defence that would have answered switched off);\n"
        "                      repeatable\n"
        "\n"
        "Credentials (flag, else environment, else --config file)\n"
        "  --jwt-secret S      TICKETD_JWT_SECRET, to mint user and admin JWTs\n"
        "  --pay-secret S      TICKETD_PAY_SECRET, to sign payment callbacks\n"
        "  --config FILE       KEY=VALUE file (e.g. config/ticketd.env)\n"
        "  --admin-user ID     user id of the admin JWT (1)\n"
        "  --seed N            the run's seed: its run id (in every Idempotency-Key\n"
        "                      and title) and its first user id come from it, so the\n"
        "                      same seed sends the same requests, each worker in the\n"
        "                      same order (which answers come first is the server's\n"
        "                      race); default: from the clock, printed, and in --json\n"
        "  --user-base N       first user id of the run (default: the seed, so every\n"
        "                      run has fresh users)\n"
        "  --token-ttl S       lifetime of minted JWTs (3600)\n"
        "\n"
        "Verdict\n"
        "  --settle S          wait up to S seconds for points and ticketing (20)\n"
        "  --no-audit          do not read GET /api/v1/admin/audit\n"
        "  --after-load CMD    run CMD (/bin/sh -c) once the load is over, before the\n"
        "                      checks, e.g. to redeliver stream entries; a failing CMD\n"
        "                      is a run error\n"
        "  --fault CMD         run CMD (/bin/sh -c) once, in the background, when\n"
        "                      --fault-after answers came (e.g. flush Redis, kill an\n"
        "                      instance, restart MariaDB); the verdict waits for it; when\n"
        "                      it ran (answers and time) and its exit status are\n"
        "                      reported, and a failing CMD is a run error\n"
        "  --fault-after N     run --fault once N load requests were answered (HTTP\n"
        "                      answers, retries included; default 100): tied to the\n"
        "                      load's progress, it lands mid-load on any machine\n"
        "  --fault-at MS       run --fault MS ms after the load starts instead (by the\n"
        "                      clock: on a faster machine the load may be over)\n"
        "  --fault-end CMD     run CMD once --fault ended and --fault-end-after more\n"
        "                      load answers came (release a stall, wake an instance);\n"
        "                      at the load's end at the latest; a failing CMD is a run\n"
        "                      error\n"
        "  --fault-end-after N (default 100)\n"
        "  --json FILE         also write the figures as JSON, with a time series\n"
        "  --history FILE      write every client operation as JSON lines, Jepsen's\n"
        "                      invoke, then ok / fail / info (docs/lab.md)\n"
        "  --orders-out FILE   append the order_no of every final 201 to POST /orders,\n"
        "                      one a line (to check each against the database)\n"
        "  --interval MS       time series interval (1000)\n"
        "  -v, --verbose       print every answer (twice: libcurl's trace too)\n"
        "\n"
        "Every answer the contract does not allow (e.g. a copy of a key refused while\n"
        "the key has its order, a retry of a completed key not given it) is damage.\n",
        scenario_names());
}

/* Reads the two secrets from a KEY=VALUE file (Compose env_file format:
 * comments, blank lines, optional quotes). */
static int config_read(const char *path)
{
    char line[1024];
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        fprintf(stderr, "ticketd-load: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *eq = strchr(line, '=');
        char *val;
        size_t n;

        if (line[0] == '#' || eq == NULL)
            continue;
        *eq = '\0';
        val = eq + 1;
        n = strlen(val);
        while (n > 0 && (val[n - 1] == '\n' || val[n - 1] == '\r' || val[n - 1] == ' '))
            val[--n] = '\0';
        if (n >= 2 && (val[0] == '"' || val[0] == '\'') && val[n - 1] == val[0]) {
            val[n - 1] = '\0';
            val++;
        }
        if (strcmp(line, "TICKETD_JWT_SECRET") == 0)
            snprintf(config_jwt, sizeof(config_jwt), "%s", val);
        else if (strcmp(line, "TICKETD_PAY_SECRET") == 0)
            snprintf(config_pay, sizeof(config_pay), "%s", val);
    }
    fclose(f);
    return 0;
}

static const char *first_set(const char *flag, const char *env_name, const char *file)
{
    const char *e = getenv(env_name);

    if (flag != NULL && flag[0] != '\0')
        return flag;
    if (e != NULL && e[0] != '\0')
        return e;
    if (file != NULL && file[0] != '\0')
        return file;
    return NULL;
}

/* The options that collect or compute their value. Each returns an
 * OPTABLE_* answer (optable.h). */

/* Appends arg to a repeatable option's list of at most max; what names
 * the list in the refusal. */
static int append(const char **list, int *count, int max, const char *arg, const char *what)
{
    if (*count == max) {
        fprintf(stderr, "ticketd-load: at most %d %s\n", max, what);
        return OPTABLE_FAILED;
    }
    list[(*count)++] = arg;
    return OPTABLE_OK;
}

static int opt_target(const char *arg, void *dst)
{
    struct load_opts *o = dst;

    return append(o->targets, &o->target_count, LOAD_TARGETS_MAX, arg, "targets");
}

static int opt_allow(const char *arg, void *dst)
{
    struct load_opts *o = dst;

    return append(o->allow, &o->allow_count, LOAD_ALLOW_MAX, arg, "--allow");
}

/* --orders-out FILE: the order_no of every final 201, appended a line each
 * (line-buffered, so several tools may append to one file). */
static int opt_orders_out(const char *arg, void *dst)
{
    struct load_opts *o = dst;

    o->orders_out = fopen(arg, "a");
    if (o->orders_out == NULL) {
        fprintf(stderr, "ticketd-load: --orders-out %s: %s\n", arg, strerror(errno));
        return OPTABLE_FAILED;
    }
    setvbuf(o->orders_out, NULL, _IOLBF, 0);
    return OPTABLE_OK;
}

/* --gaps MS,MS...: at most 8, each 0..60000. */
static int opt_gaps(const char *arg, void *dst)
{
    struct load_opts *o = dst;
    char *save = NULL, *copy = load_xstrdup(arg);
    long long v = 0;
    int rc = OPTABLE_OK;

    o->gap_count = 0;
    for (char *t = strtok_r(copy, ",", &save); t != NULL && rc == OPTABLE_OK;
         t = strtok_r(NULL, ",", &save)) {
        if (o->gap_count == 8 || optable_ll(t, 0, 60000, &v) != 0)
            rc = OPTABLE_BAD_VALUE;
        else
            o->gaps_ms[o->gap_count++] = (int)v;
    }
    free(copy);
    return rc;
}

static int opt_config(const char *arg, void *dst)
{
    (void)dst;
    return config_read(arg) == 0 ? OPTABLE_OK : OPTABLE_FAILED;
}

/* The secrets given as flags, before the environment and --config. */
struct secret_flags {
    const char *jwt, *pay;
};

/* Every option, its value's range and where it goes. */
static int opts_parse_table(int argc, char **argv, struct load_opts *o, struct secret_flags *sf)
{
#define N(name, kind, field, min, max)                                                             \
    {                                                                                              \
        name, 0, kind, &o->field, min, max, NULL, NULL                                             \
    }
#define CALL(name, fn)                                                                             \
    {                                                                                              \
        name, 0, OPTABLE_CALL, o, 0, 0, fn, NULL                                                   \
    }
    const long long id_max = (1LL << 53) - 1;
    const struct optable_opt opts[] = {
        /* getopt_long lists the matches of an ambiguous abbreviation
         * in table order: new options go last. */
        CALL("target", opt_target),
        N("requests", OPTABLE_LL, requests, 1, 1000000000LL),
        N("duration", OPTABLE_SECONDS, duration_s, 1, 86400),
        {"concurrency", 0, OPTABLE_INT, &o->concurrency, 1, 4096, NULL, &o->concurrency_set},
        N("timeout", OPTABLE_LONG, timeout_ms, 10, 600000),
        N("rounds", OPTABLE_INT, rounds, 1, 1000000),
        N("copies", OPTABLE_INT, copies, 1, 1024),
        N("burst", OPTABLE_INT, burst, 1, 1024),
        N("users", OPTABLE_INT, users, 1, 1000000),
        N("seats", OPTABLE_INT, seats, 1, 1000000),
        N("orders", OPTABLE_INT, orders, 1, 1000000),
        N("retries", OPTABLE_INT, retries, 1, 1024),
        N("sessions", OPTABLE_INT, sessions, 1, 100000),
        N("stock", OPTABLE_LL, stock, 1, 2000000000LL),
        N("quantity", OPTABLE_INT, quantity, 1, 1000),
        N("price", OPTABLE_LL, price, 0, 100000000LL),
        N("session", OPTABLE_U64, session_id, 1, id_max),
        N("no-token", OPTABLE_FLAG, no_token, 0, 0),
        N("shared-token", OPTABLE_FLAG, shared_token, 0, 0),
        {"jwt-secret", 0, OPTABLE_STR, &sf->jwt, 0, 0, NULL, NULL},
        {"pay-secret", 0, OPTABLE_STR, &sf->pay, 0, 0, NULL, NULL},
        CALL("config", opt_config),
        N("admin-user", OPTABLE_U64, admin_user, 1, id_max),
        N("seed", OPTABLE_U64, seed, 1, 1LL << 52),
        N("user-base", OPTABLE_U64, user_base, 1, 1LL << 52),
        N("token-ttl", OPTABLE_LONG, token_ttl_s, 1, 86400 * 365),
        N("settle", OPTABLE_SECONDS, settle_s, 0, 3600),
        N("no-audit", OPTABLE_FLAG, no_audit, 0, 0),
        N("after-load", OPTABLE_STR, after_load, 0, 0),
        N("midway", OPTABLE_STR, midway, 0, 0),
        N("json", OPTABLE_STR, json_path, 0, 0),
        N("history", OPTABLE_STR, history_path, 0, 0),
        N("interval", OPTABLE_MS, series_interval_s, 50, 60000),
        N("scenario", OPTABLE_STR, scenario, 0, 0),
        N("client-retries", OPTABLE_INT, client_retries, 0, 1000),
        N("retry-for", OPTABLE_SECONDS, retry_window_s, 0, 3600),
        N("spread", OPTABLE_MS, spread_s, 0, 600000),
        N("late", OPTABLE_MS, late_s, 0, 600000),
        N("prefer-wait", OPTABLE_INT, prefer_wait_s, 0, 3600),
        CALL("gaps", opt_gaps),
        N("lock-ttl", OPTABLE_MS, lock_ttl_s, 1, 600000),
        CALL("allow", opt_allow),
        N("fault", OPTABLE_STR, fault, 0, 0),
        N("fault-at", OPTABLE_MS, fault_at_s, 0, 86400000LL),
        N("fault-after", OPTABLE_LL, fault_after, 1, 1000000000LL),
        N("fault-end", OPTABLE_STR, fault_end, 0, 0),
        N("fault-end-after", OPTABLE_LL, fault_end_after, 1, 1000000000LL),
        CALL("orders-out", opt_orders_out),
        {"verbose", 'v', OPTABLE_COUNT, &o->verbose, 0, 0, NULL, NULL},
        {"help", 'h', OPTABLE_HELP, NULL, 0, 0, NULL, NULL},
    };
#undef N
#undef CALL
    const struct optable t = {"ticketd-load", usage, opts, (int)(sizeof(opts) / sizeof(opts[0]))};

    return optable_parse(&t, argc, argv);
}

static int opts_parse(int argc, char **argv, struct load_opts *o)
{
    struct secret_flags sf = {NULL, NULL};

    o->requests = 200000;
    o->duration_s = 30;
    o->concurrency = 32;
    o->timeout_ms = 10000;
    o->quantity = 1;
    o->price = 1000;
    o->admin_user = 1;
    o->token_ttl_s = 3600;
    o->settle_s = 20;
    o->series_interval_s = 1.0;
    o->client_retries = 10;
    o->retry_window_s = 20;
    o->fault_at_s = -1;
    o->fault_after = -1;
    o->fault_end_after = 100;

    if (opts_parse_table(argc, argv, o, &sf) != 0)
        return -1;
    if (o->fault_at_s >= 0 && o->fault_after >= 0) {
        fprintf(stderr, "ticketd-load: --fault-at and --fault-after: give one of them\n");
        return -1;
    }
    if (o->fault_at_s < 0 && o->fault_after < 0)
        o->fault_after = 100;
    if (o->scenario == NULL && optind < argc)
        o->scenario = argv[optind++];
    if (optind != argc) {
        fprintf(stderr, "ticketd-load: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->scenario == NULL || !scenario_known(o->scenario)) {
        fprintf(stderr, "ticketd-load: name a scenario: %s\n", scenario_names());
        return -1;
    }
    if (o->target_count == 0)
        o->targets[o->target_count++] = "http://127.0.0.1:8080";
    for (int i = 0; i < o->target_count; i++) {
        size_t n = strlen(o->targets[i]);

        /* Paths are appended as "/api/...": drop one trailing slash. */
        if (n > 1 && o->targets[i][n - 1] == '/') {
            char *t = load_xstrdup(o->targets[i]);

            t[n - 1] = '\0';
            o->targets[i] = t;
        }
    }
    o->jwt_secret = first_set(sf.jwt, "TICKETD_JWT_SECRET", config_jwt);
    o->pay_secret = first_set(sf.pay, "TICKETD_PAY_SECRET", config_pay);
    if (o->jwt_secret == NULL) {
        fprintf(stderr, "ticketd-load: no JWT secret: use --jwt-secret, TICKETD_JWT_SECRET or "
                        "--config FILE\n");
        return -1;
    }
    if (o->pay_secret == NULL)
        o->pay_secret = "";
    if (o->pay_secret[0] == '\0' &&
        (strcmp(o->scenario, "gateway-retry") == 0 || strcmp(o->scenario, "mq-redelivery") == 0 ||
         strcmp(o->scenario, "mixed") == 0)) {
        fprintf(stderr,
                "ticketd-load: %s signs callbacks: use --pay-secret, TICKETD_PAY_SECRET "
                "or --config FILE\n",
                o->scenario);
        return -1;
    }
    if (o->seed == 0) {
        struct timeval tv;

        /* 10^5 fresh seeds per second of wall time: runs a few seconds
         * apart never share a user, and ids stay far below 2^53. */
        gettimeofday(&tv, NULL);
        o->seed = (uint64_t)tv.tv_sec * 100000ULL + (uint64_t)(tv.tv_usec / 10);
    }
    if (o->user_base == 0)
        o->user_base = o->seed;
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    scenario_interrupt();
    load_engine_interrupt();
}

/* Every target must answer /livez before any load starts. */
static int preflight(struct load_engine *e, const struct load_opts *o)
{
    int rc = 0;

    for (int i = 0; i < o->target_count; i++) {
        struct load_req *r = load_req_new(LOAD_CONTROL, "GET", "/livez");

        r->target = i;
        load_engine_call(e, r);
        if (r->status != 200) {
            fprintf(stderr, "ticketd-load: %s/livez: %s\n", o->targets[i],
                    r->status == 0 ? r->error : "not 200");
            rc = -1;
        }
        load_req_free(r);
    }
    return rc;
}

/* The --fault command: a thread waits until its moment, runs it and
 * records when it ran and how it ended, while the load goes on. */
struct fault_run {
    const char *cmd;
    const char *end_cmd; /* --fault-end, or NULL */
    long long end_after;
    int end_status; /* its exit status; -1: could not run or killed */
    double t0;      /* the load's start, load_now() */
    struct verdict_fault rec;
    atomic_bool load_over; /* set when the load ended: stop waiting */
    pthread_t thread;
    bool started;
};

/* Waits until the fault's moment: after_answers load answers (the load's
 * progress, whatever the machine's speed), or at_s into the load (the
 * clock), or the end of the load, whichever comes first. */
static void fault_wait(struct fault_run *f)
{
    const struct timespec tick = {0, 1000000}; /* 1 ms: a few answers at most */

    while (!atomic_load(&f->load_over)) {
        if (f->rec.after_answers >= 0 && load_answers() >= (uint64_t)f->rec.after_answers)
            return;
        if (f->rec.after_answers < 0 && load_now() - f->t0 >= f->rec.at_s)
            return;
        nanosleep(&tick, NULL);
    }
}

/* Runs cmd with /bin/sh -c and waits: its exit status, or -1 if it could
 * not run or was killed. */
static int fault_shell(const char *cmd)
{
    int status = 0;
    pid_t pid = fork();

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

/* --fault-end: once end_after more answers came after the fault began (or
 * the load ended), the command that ends the fault. */
static void fault_end_run(struct fault_run *f)
{
    const struct timespec tick = {0, 1000000};
    uint64_t want = (uint64_t)f->rec.answers_before + (uint64_t)f->end_after;

    while (!atomic_load(&f->load_over) && load_answers() < want)
        nanosleep(&tick, NULL);
    fprintf(stderr, "ticketd-load: fault end at %.2f s, after %llu answers: %s\n",
            load_now() - f->t0, (unsigned long long)load_answers(), f->end_cmd);
    f->end_status = fault_shell(f->end_cmd);
    fprintf(stderr, "ticketd-load: fault end exited %d at %.2f s\n", f->end_status,
            load_now() - f->t0);
}

static void *fault_thread(void *arg)
{
    struct fault_run *f = arg;

    fault_wait(f);
    f->rec.started_s = load_now() - f->t0;
    f->rec.answers_before = (long long)load_answers();
    fprintf(stderr, "ticketd-load: fault at %.2f s, after %lld answers: %s\n", f->rec.started_s,
            f->rec.answers_before, f->cmd);
    f->rec.exit_status = fault_shell(f->cmd);
    f->rec.ended_s = load_now() - f->t0;
    fprintf(stderr, "ticketd-load: fault exited %d at %.2f s\n", f->rec.exit_status,
            f->rec.ended_s);
    if (f->end_cmd != NULL)
        fault_end_run(f);
    return NULL;
}

static double unix_now(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The run id, 8 hex digits in every Idempotency-Key and title the run
 * sends: from the seed (splitmix64's mixing), so that the same seed sends
 * the same keys, and seeds a step apart give unrelated ids. */
static void run_id_make(char *out, size_t len, uint64_t seed)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    snprintf(out, len, "%08x", (unsigned)(z & 0xffffffffU));
}

int main(int argc, char **argv)
{
    struct load_opts opts;
    struct scen_env env;
    struct load_engine *control = NULL;
    struct load_stats *total = NULL;
    struct verdict *v = NULL;
    struct sigaction sa;
    struct verdict_run_info info;
    struct fault_run fault;
    int rc = 1;

    memset(&opts, 0, sizeof(opts));
    memset(&info, 0, sizeof(info));
    memset(&fault, 0, sizeof(fault));
    if (opts_parse(argc, argv, &opts) != 0)
        return 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fprintf(stderr, "ticketd-load: curl_global_init failed\n");
        return 1;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    {
        struct load_engine_config cfg = {
            .targets = opts.targets,
            .target_count = opts.target_count,
            .timeout_ms = opts.timeout_ms,
            .retries = opts.client_retries,
            .retry_window_s = opts.retry_window_s,
            .verbose = opts.verbose,
        };

        control = load_engine_new(&cfg);
    }
    total = load_stats_new();
    v = verdict_new();
    if (control == NULL) {
        fprintf(stderr, "ticketd-load: cannot initialise libcurl\n");
        goto out;
    }
    if (preflight(control, &opts) != 0)
        goto out;

    memset(&env, 0, sizeof(env));
    env.opts = &opts;
    env.verdict = v;
    run_id_make(env.run_id, sizeof(env.run_id), opts.seed);
    env.t0 = load_now();
    info.started_unix = unix_now();
    if (opts.history_path != NULL && load_history_open(opts.history_path, env.t0) != 0) {
        fprintf(stderr, "ticketd-load: --history %s: %s\n", opts.history_path, strerror(errno));
        goto out;
    }
    if (opts.history_path != NULL)
        load_engine_observe(&load_history_observer);
    env.deadline = env.t0 + opts.duration_s;
    fprintf(
        stderr,
        "ticketd-load: run %s, seed %llu, %s, users from %llu, at most %lld requests / %.0f s\n",
        env.run_id, (unsigned long long)opts.seed, opts.scenario,
        (unsigned long long)opts.user_base, opts.requests, opts.duration_s);
    if (opts.fault != NULL) {
        fflush(NULL);
        fault.cmd = opts.fault;
        fault.end_cmd = opts.fault_end;
        fault.end_after = opts.fault_end_after;
        fault.t0 = env.t0;
        fault.rec.command = opts.fault;
        fault.rec.at_s = opts.fault_at_s;
        fault.rec.after_answers = opts.fault_after;
        fault.rec.started_s = -1;
        fault.rec.exit_status = -1;
        fault.started = pthread_create(&fault.thread, NULL, fault_thread, &fault) == 0;
        if (!fault.started)
            verdict_fail(v, "--fault: cannot start a thread");
    }
    if (scenario_run(&env, total) != 0 && !verdict_failed(v))
        verdict_fail(v, "the scenario could not run");
    if (load_history_close() != 0)
        verdict_fail(v, "--history %s: a write failed", opts.history_path);
    if (opts.fault != NULL) {
        uint64_t answers_at_end = load_answers();

        fault.rec.load_end_s = load_now() - env.t0;
        atomic_store(&fault.load_over, true);
        if (fault.started)
            pthread_join(fault.thread, NULL);
        /* Answers the load received after the fault began (none when it
         * began after the load). */
        fault.rec.answers_after =
            fault.rec.started_s >= 0 && fault.rec.started_s < fault.rec.load_end_s
                ? (long long)answers_at_end - fault.rec.answers_before
                : 0;
        if (fault.rec.answers_after < 0)
            fault.rec.answers_after = 0;
        if (fault.rec.exit_status != 0)
            verdict_fail(v, "--fault command exited %d: %s", fault.rec.exit_status, opts.fault);
        else if (opts.fault_end != NULL && fault.end_status != 0)
            verdict_fail(v, "--fault-end command exited %d: %s", fault.end_status, opts.fault_end);
        else if (fault.rec.started_s >= fault.rec.load_end_s)
            verdict_note(v, "the fault came %.2f s after the load had ended: it hit nothing",
                         fault.rec.started_s - fault.rec.load_end_s);
        else if (!verdict_fault_during_load(&fault.rec))
            verdict_note(v,
                         "the fault came with %lld answers before it and %lld after: it hit "
                         "no load in progress",
                         fault.rec.answers_before, fault.rec.answers_after);
        info.fault = &fault.rec;
    }
    if (opts.after_load != NULL) {
        int hook = scenario_shell_run(opts.after_load);

        fprintf(stderr, "ticketd-load: --after-load exited %d\n", hook);
        if (hook != 0)
            verdict_fail(v, "--after-load command exited %d: %s", hook, opts.after_load);
        else
            verdict_note(v, "after the load: %s", opts.after_load);
    }

    verdict_check(v, control, opts.jwt_secret, opts.admin_user, opts.settle_s, !opts.no_audit);
    load_stats_merge(total, load_engine_stats(control));

    info.scenario = opts.scenario;
    info.seed = (unsigned long long)opts.seed;
    info.targets = opts.targets;
    info.target_count = opts.target_count;
    info.concurrency = opts.concurrency;
    info.max_requests = opts.requests;
    info.duration_s = opts.duration_s;
    if (verdict_print(v, total, &info, stdout, opts.json_path) != 0)
        goto out;
    rc = verdict_exit_code(v, total);
out:
    verdict_free(v);
    load_stats_free(total);
    load_engine_free(control);
    curl_global_cleanup();
    return rc;
}
