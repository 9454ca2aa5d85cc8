/* main.c - ticketd's commands: serve, worker, token, dead-letters, lab,
 * version, help. Help and unknown commands are answered before any setting is read.
 * Boot order is config, log, ports (store, cache), then the HTTP server;
 * shutdown runs it backwards after draining. */
#include "app.h"
#include "auth.h"
#include "cache.h"
#include "cache_naive.h"
#include "config.h"
#include "consume_naive.h"
#include "consumers.h"
#include "deadletters.h"
#include "defenses.h"
#include "err.h"
#include "events.h"
#include "faults.h"
#include "http.h"
#include "idem.h"
#include "liveness.h"
#include "log.h"
#include "metrics.h"
#include "respcache.h"
#include "router.h"
#include "store.h"
#include "store_mysql.h"
#include "store_naive.h"
#include "bloom_job.h"
#include "retention.h"
#include "retention_job.h"
#include "sentinel.h"
#include "sweep.h"
#include "util.h"
#include "workers.h"

#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TICKETD_VERSION "1.0.0"

static void usage(FILE *f)
{
    fprintf(f, "usage: ticketd serve [--config FILE]\n"
               "       ticketd worker [--config FILE]\n"
               "       ticketd token --user ID [--admin] [--ttl SECONDS] [--config FILE]\n"
               "       ticketd dead-letters list [--config FILE] [--consumer NAME] [--json]\n"
               "       ticketd dead-letters replay [--config FILE] (--id N | --all) "
               "[--consumer NAME]\n"
               "       ticketd partitions [--config FILE]\n"
               "       ticketd lab [serve | lesson [NAME] | record] [OPTIONS]\n"
               "       ticketd version\n"
               "       ticketd help [COMMAND]    (or: ticketd COMMAND --help)\n"
               "\n"
               "Settings come from TICKETD_* environment variables; FILE holds the same\n"
               "KEY=VALUE lines, and the environment wins over it.\n");
}

/* One entry per command: what `ticketd CMD --help` prints, and which of the
 * shared options it takes. */
enum { OPT_CONFIG = 1, OPT_USER = 2, OPT_ADMIN = 4, OPT_TTL = 8 };

struct command {
    const char *name;
    unsigned opts;
    const char *help;
};

static const struct command commands[] = {
    {"serve", OPT_CONFIG,
     "usage: ticketd serve [--config FILE]\n"
     "\n"
     "Serves the HTTP API on TICKETD_BIND:TICKETD_PORT. With TICKETD_WORKERS=1\n"
     "(the default) it also runs the expiry sweep, the outbox relay and the event\n"
     "consumers. SIGTERM or SIGINT drains the requests in flight, then exits 0.\n"
     "\n"
     "  --config FILE  KEY=VALUE settings (the environment wins over them)\n"},
    {"worker", OPT_CONFIG,
     "usage: ticketd worker [--config FILE]\n"
     "\n"
     "Runs only the background work (expiry sweep, outbox relay, event consumers),\n"
     "no HTTP. Any number of workers and servers may share one Redis and MariaDB.\n"
     "\n"
     "  --config FILE  KEY=VALUE settings (the environment wins over them)\n"},
    {"token", OPT_CONFIG | OPT_USER | OPT_ADMIN | OPT_TTL,
     "usage: ticketd token --user ID [--admin] [--ttl SECONDS] [--config FILE]\n"
     "\n"
     "Prints a bearer token (HS256 JWT signed with TICKETD_JWT_SECRET) for a user.\n"
     "\n"
     "  --user ID      the user id, 1 to 2^53-1 (required)\n"
     "  --admin        an admin token (sessions, audit)\n"
     "  --ttl SECONDS  lifetime (default 3600)\n"
     "  --config FILE  KEY=VALUE settings (the environment wins over them)\n"},
    {"dead-letters", 0, NULL}, /* deadletters_main answers for itself */
    {"partitions", OPT_CONFIG,
     "usage: ticketd partitions [--config FILE]\n"
     "\n"
     "Runs one round of the retention job that serve and worker run every\n"
     "TICKETD_RETENTION_INTERVAL_MS: splits off the day partitions of the next\n"
     "TICKETD_RETENTION_AHEAD_DAYS days of the dedup and relay tables and drops\n"
     "those past their TICKETD_RETAIN_*_H, then prints one line per table.\n"
     "Exits 1 when a table could not be done.\n"
     "\n"
     "  --config FILE  KEY=VALUE settings (the environment wins over them)\n"},
    {"lab", 0,
     "usage: ticketd lab [serve | lesson [NAME] | record] [OPTIONS]\n"
     "\n"
     "Runs the replay lab of this checkout (lab/ticketd-lab, beside build/): serve\n"
     "shows the lessons live on http://127.0.0.1:8090/, lesson NAME runs one\n"
     "without its defence and with it. `ticketd lab serve --help` lists the options.\n"
     "It starts servers of its own; the service itself runs none of its code.\n"},
    {"version", 0,
     "usage: ticketd version\n"
     "\n"
     "Prints ticketd's version. Reads no settings.\n"},
    {"help", 0,
     "usage: ticketd help [COMMAND]\n"
     "\n"
     "Prints the commands, or what COMMAND does and takes.\n"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    }
    return NULL;
}

static bool is_help_flag(const char *s)
{
    return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0;
}

static void unknown_command(const char *name)
{
    fprintf(stderr,
            "ticketd: unknown command '%s' (choices: serve, worker, token, dead-letters, "
            "partitions, lab, version, help)\n",
            name);
    usage(stderr);
}

/* `ticketd help [CMD]` and `ticketd CMD --help`. */
static int command_help(const char *name)
{
    const struct command *c = find_command(name);
    if (c == NULL) {
        unknown_command(name);
        return 2;
    }
    if (c->help == NULL) {
        char arg0[] = "dead-letters", arg1[] = "--help";
        char *args[] = {arg0, arg1, NULL};
        return deadletters_main(2, args);
    }
    fputs(c->help, stdout);
    return 0;
}

/* Blocks the shutdown signals in this thread and every thread it starts
 * after, so that only sigwait() in main sees them. */
static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static int ports_init(const struct config *cfg)
{
    if (store_init(cfg) != TD_OK || cache_init(cfg) != TD_OK) {
        log_error("cannot initialise the database or Redis client libraries");
        return TD_EINTERNAL;
    }
    return TD_OK;
}

static void ports_cleanup(void)
{
    cache_cleanup();
    store_cleanup();
}

/* The adapters behind the ports, chosen once from the defences that are
 * on: each entry is the real one, or with its defence switched off (the
 * demo, defenses_check_env) the naive one that the defence exists to
 * replace, as one TLS backend stands behind one table. A defence that
 * skips a whole layer (the response cache, the token, ...) is the
 * domain's to skip: it has no entry here. */
static void choose_adapters(struct app *app)
{
    unsigned on = app->defenses;
    struct cache_entries c = cache_redis_entries;
    if (!(on & DEFENSE_TOKEN_ATOMIC)) {
        c.token_take = cache_naive_token_take;
        c.order_begin = cache_naive_order_begin;
    }
    if (!(on & DEFENSE_LOCK_OWNER_CHECK)) {
        c.order_complete = cache_naive_order_complete;
        c.order_release = cache_naive_order_release;
    }
    if (!(on & DEFENSE_BLOOM_LIVENESS))
        c.bloom_check = cache_naive_bloom_check;
    cache_naive_init();
    cache_redis_use(&c);

    struct store_mysql_steps s = store_mysql_steps;
    bool look_first = !(on & DEFENSE_UNIQUE_INDEX), read_stock = !(on & DEFENSE_STOCK_CAS);
    if (look_first || read_stock)
        s.order_place = look_first && read_stock ? store_naive_place_both
                        : look_first             ? store_naive_place_look_first
                                                 : store_naive_place_read_stock;
    if (!(on & DEFENSE_STATE_CAS)) {
        s.read_for_move = store_naive_read_plain;
        s.move = store_naive_move_blind;
    }
    store_mysql_use(&s);

    struct store_events_steps e = store_events_steps;
    if (!(on & DEFENSE_CONSUMER_DEDUP_SAME_TX))
        e.consume = store_naive_consume_apart;
    /* The ledger is the business key that outlives the dedup row. The
     * lessons of the consumer's own dedup (skipped, or keyed by the stream
     * entry) run without it, so that each shows what its own mistake costs;
     * business-key-after-expiry takes the ledger away alone. */
    unsigned ledger = DEFENSE_BUSINESS_KEY_AFTER_EXPIRY | DEFENSE_CONSUMER_DEDUP |
                      DEFENSE_CONSUMER_DEDUP_BUSINESS_KEY;
    if ((on & ledger) != ledger)
        e.points_ledger = store_naive_no_ledger;
    store_events_use(&e);

    app->dedup_key = (on & DEFENSE_CONSUMER_DEDUP_BUSINESS_KEY) ? consumers_key_by_business
                                                                : consume_naive_key_by_entry;
}

/* http.c hands metrics the router's ids as they are. */
_Static_assert(ROUTE_NOT_FOUND == METRICS_ROUTE_UNMATCHED, "unmatched ids differ");
_Static_assert(ROUTE_METHOD_NOT_ALLOWED == METRICS_ROUTE_NOT_ALLOWED, "405 ids differ");
_Static_assert(ROUTE_COUNT <= METRICS_ROUTES_MAX, "more routes than metrics slots");

/* The route table's labels, for the request metrics: metrics know no
 * router, so the composition root hands them over once. */
static void label_routes(void)
{
    static const char *labels[ROUTE_COUNT];
    for (int i = 0; i < ROUTE_COUNT; i++)
        labels[i] = router_label(i);
    metrics_routes(labels, ROUTE_COUNT);
}

static int boot(struct app *app, struct config *cfg)
{
    char err[256];
    enum log_level level;
    log_parse_level(cfg->log_level, &level);
    log_set_level(level);
    app->cfg = cfg;
    label_routes();
    if (defenses_parse(cfg->defenses, &app->defenses, err, sizeof err) != TD_OK) {
        log_error("TICKETD_DEFENSES=%s: %s", cfg->defenses, err);
        return TD_EINVAL;
    }
    if (defenses_check_env(app->defenses, cfg->env) != TD_OK)
        return TD_EINVAL;
    choose_adapters(app);
    config_log(cfg);
    faults_announce();
    idem_new_instance(app->instance);
    app->respcache = respcache_new((size_t)cfg->respcache_entries);
    app->bloom = bloom_size(cfg->bloom_expected_keys, cfg->bloom_fp_per_million);
    snprintf(app->bloom_shape, sizeof app->bloom_shape, "%llu:%d", (unsigned long long)app->bloom.m,
             app->bloom.k);
    return ports_init(cfg);
}

/* What `serve` (or `worker`) runs besides the main thread. */
struct running {
    struct http_server *srv;
    struct events *ev;
    struct sweep *sw;
    struct retention_job *ret;
    struct bloom_job *bloom;
    struct liveness *live;
};

/* A request worker's connections (http/workers.h): a MySQL connection
 * borrowed from the pool for each job and given back after it, and, at the
 * thread's end, whatever it still owns of MySQL and Redis. Wired here, the
 * composition root, so that the transport needs neither port. */
static void worker_thread_end(void)
{
    store_thread_release();
    cache_thread_release();
}

static const struct workers_thread_hooks worker_hooks = {
    .begin = store_thread_pooled,
    .after_job = store_thread_idle,
    .end = worker_thread_end,
};

/* Starts the background work (relay, consumers, sweep) unless this is a
 * server with TICKETD_WORKERS=0, and for a server the liveness beat and
 * the listener. false when one could not start (logged). */
static bool start_parts(struct app *app, const struct config *cfg, bool http, struct running *r)
{
    if (!http || cfg->workers) {
        if ((r->ev = events_start(app)) == NULL || (r->sw = sweep_start(app)) == NULL ||
            (r->ret = retention_job_start(app)) == NULL ||
            (r->bloom = bloom_job_start(app)) == NULL)
            return false;
    }
    if (http) {
        if ((r->live = liveness_start(app)) == NULL ||
            (r->srv = http_start(app, &worker_hooks)) == NULL)
            return false;
    }
    return true;
}

/* Stops what start_parts started, in the order that lets every request in
 * flight finish first; NULL parts are skipped. */
static void stop_parts(struct running *r)
{
    bloom_job_stop(r->bloom);
    retention_job_stop(r->ret);
    sweep_stop(r->sw);
    events_stop(r->ev);
    http_stop(r->srv);
    /* Every request has been answered and has released what it held: the
     * process can say it is gone. */
    liveness_stop(r->live);
    *r = (struct running){0};
}

/* Readiness turns 503 first so a load balancer stops sending, then the
 * listener closes, then requests in flight finish (each releasing its own
 * locks and markers) before anything is torn down. Returns false when
 * some did not finish within the drain timeout. */
static bool drain(struct app *app, const struct config *cfg, struct running *r)
{
    atomic_store(&app->draining, true);
    if (r->srv == NULL)
        return true;
    http_quiesce(r->srv);
    int left = http_drain(r->srv, cfg->drain_timeout_s * 1000);
    if (left == 0)
        return true;
    /* Their clients get no answer: say so in the exit status. */
    log_error("%d requests still in flight after %d s; closing them", left, cfg->drain_timeout_s);
    return false;
}

static int cmd_serve(struct config *cfg, bool http)
{
    int rc = EXIT_FAILURE;
    struct app app = {0};
    struct running r = {0};
    sigset_t set;
    int sig;

    /* glibc gives every busy thread a malloc arena of its own (up to eight
     * per core); with two dozen threads that is most of the resident memory,
     * mostly empty. Two arenas serve this many threads on a few cores. */
    mallopt(M_ARENA_MAX, 2);
    block_signals(&set);
    if (boot(&app, cfg) == TD_OK && start_parts(&app, cfg, http, &r)) {
        log_info("ticketd %s %s (pid %d)", TICKETD_VERSION, http ? "serving" : "working",
                 (int)getpid());
        sigwait(&set, &sig);
        log_info("signal %d: draining", sig);
        bool clean = drain(&app, cfg, &r);
        stop_parts(&r);
        rc = clean ? EXIT_SUCCESS : EXIT_FAILURE;
        log_info("stopped");
    }
    stop_parts(&r);
    store_thread_release();
    cache_thread_release();
    ports_cleanup();
    respcache_free(app.respcache);
    return rc;
}

/* `ticketd partitions`: one round of the retention job, in the foreground. */
static int cmd_partitions(struct config *cfg)
{
    struct app app = {0};
    struct retention_report r[RETAINED_TABLES];
    int rc = EXIT_FAILURE;
    if (boot(&app, cfg) == TD_OK) {
        rc = retention_round(cfg, retention_now(cfg, wall_s()), r) == TD_OK ? EXIT_SUCCESS
                                                                            : EXIT_FAILURE;
        retention_print(stdout, r);
    }
    store_thread_release();
    cache_thread_release();
    ports_cleanup();
    respcache_free(app.respcache);
    return rc;
}

static int cmd_token(struct config *cfg, int64_t user, bool admin, int64_t ttl)
{
    char *tok = auth_issue(cfg->jwt_secret, user, admin, wall_s(), ttl);
    if (tok == NULL) {
        fprintf(stderr, "ticketd: cannot sign a token\n");
        return EXIT_FAILURE;
    }
    printf("%s\n", tok);
    free(tok);
    return EXIT_SUCCESS;
}

static const char *option_name(int c)
{
    switch (c) {
    case 'u':
        return "--user";
    case 'a':
        return "--admin";
    case 't':
        return "--ttl";
    default:
        return "--config";
    }
}

static unsigned option_bit(int c)
{
    switch (c) {
    case 'u':
        return OPT_USER;
    case 'a':
        return OPT_ADMIN;
    case 't':
        return OPT_TTL;
    default:
        return OPT_CONFIG;
    }
}

/* `ticketd lab ...`: the lab is a program of its own, lab/ticketd-lab of
 * the checkout this binary was built in (build/<flavour>/ticketd), so that
 * no demo code is linked into the service. It gets the remaining words. */
static int lab_exec(int argc, char **argv)
{
    char exe[4096], path[4200];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (n <= 0) {
        fprintf(stderr, "ticketd lab: cannot find this binary's path\n");
        return 1;
    }
    exe[n] = '\0';
    /* build/<flavour>/ticketd -> the checkout is two folders up */
    for (int up = 0; up < 3; up++) {
        slash = strrchr(exe, '/');
        if (slash == NULL) {
            fprintf(stderr, "ticketd lab: %s is not inside a checkout\n", exe);
            return 1;
        }
        *slash = '\0';
    }
    snprintf(path, sizeof(path), "%s/lab/ticketd-lab", exe);
    char **args = calloc((size_t)argc, sizeof(*args));
    if (args == NULL)
        return 1;
    args[0] = path;
    for (int i = 2; i < argc; i++)
        args[i - 1] = argv[i];
    execv(path, args);
    fprintf(stderr, "ticketd lab: cannot run %s: %s (the lab runs from a checkout: make lab)\n",
            path, strerror(errno));
    free(args);
    return 1;
}

/* The commands that need no settings: help, version, dead-letters (which
 * reads its own), and unknown names. Returns the exit status, or -1 when
 * argv[1] is a command that goes on; *command is then set. */
static int answer_early(int argc, char **argv, const struct command **command)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (is_help_flag(cmd) || strcmp(cmd, "help") == 0) {
        if (strcmp(cmd, "help") == 0 && argc == 3)
            return command_help(argv[2]);
        if (argc > 2) {
            usage(stderr);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0)
        cmd = "version";
    *command = find_command(cmd);
    if (*command == NULL) {
        unknown_command(cmd);
        return 2;
    }
    if (strcmp(cmd, "dead-letters") == 0)
        return deadletters_main(argc - 1, argv + 1);
    if (strcmp(cmd, "lab") == 0)
        return lab_exec(argc, argv);
    if (strcmp(cmd, "version") == 0) {
        if (argc == 3 && is_help_flag(argv[2]))
            return command_help(cmd);
        if (argc > 2) {
            fprintf(stderr, "ticketd: version takes no arguments\n");
            return 2;
        }
        printf("ticketd %s\n", TICKETD_VERSION);
        return 0;
    }
    return -1;
}

/* The options of serve, worker and token. */
struct cli {
    const char *config_path;
    int64_t user, ttl;
    bool admin;
};

/* Reads one option c (its value in optarg) into cli. Returns -1, or the
 * exit status after saying what is wrong. */
static int take_option(const struct command *command, int c, struct cli *cli)
{
    if ((command->opts & option_bit(c)) == 0) {
        fprintf(stderr, "ticketd %s: takes no %s\n", command->name, option_name(c));
        fputs(command->help, stderr);
        return 2;
    }
    switch (c) {
    case 'c':
        cli->config_path = optarg;
        break;
    case 'u':
        if (!parse_i64(optarg, 1, AUTH_MAX_USER_ID, &cli->user)) {
            fprintf(stderr, "ticketd: --user must be an id from 1 to 2^53-1\n");
            return 2;
        }
        break;
    case 'a':
        cli->admin = true;
        break;
    case 't':
        if (!parse_i64(optarg, 1, 10L * 365 * 86400, &cli->ttl)) {
            fprintf(stderr, "ticketd: --ttl must be a number of seconds\n");
            return 2;
        }
        break;
    }
    return -1;
}

/* Parses the options after the command. Returns -1, or the exit status
 * (help given, or an error said). */
static int parse_options(const struct command *command, int argc, char **argv, struct cli *cli)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"user", required_argument, NULL, 'u'},
        {"admin", no_argument, NULL, 'a'},        {"ttl", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    int c;
    optind = 2;
    opterr = 0; /* the messages below name the command */
    while ((c = getopt_long(argc, argv, ":c:u:at:h", opts, NULL)) != -1) {
        if (c == 'h')
            return command_help(command->name);
        if (c == '?' || c == ':') {
            fprintf(stderr, "ticketd %s: %s option %s\n", command->name,
                    c == ':' ? "missing the value of" : "unknown", argv[optind - 1]);
            fputs(command->help, stderr);
            return 2;
        }
        int rc = take_option(command, c, cli);
        if (rc >= 0)
            return rc;
    }
    if (optind != argc) {
        fprintf(stderr, "ticketd %s: unexpected argument '%s'\n", command->name, argv[optind]);
        fputs(command->help, stderr);
        return 2;
    }
    if (strcmp(command->name, "token") == 0 && cli->user == 0) {
        fprintf(stderr, "ticketd: token needs --user ID\n");
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    const struct command *command = NULL;
    struct cli cli = {.ttl = 3600};
    struct config cfg;
    int rc;

    /* Everything that needs no settings is answered before any are read, so
     * that asking for help never fails for want of a secret. */
    if ((rc = answer_early(argc, argv, &command)) >= 0)
        return rc;
    if ((rc = parse_options(command, argc, argv, &cli)) >= 0)
        return rc;
    if (config_load(&cfg, cli.config_path) != TD_OK) {
        config_cleanup(&cfg);
        return 2;
    }
    /* The Redis adapter's own settings, checked here rather than in
     * config.c, which sits below the adapters (service/layers.mk). */
    char why[512];
    if (!sentinel_settings_valid(cfg.redis_sentinels, cfg.redis_master, why, sizeof why)) {
        fprintf(stderr, "ticketd: %s\n", why);
        config_cleanup(&cfg);
        return 2;
    }
    if (strcmp(command->name, "serve") == 0)
        rc = cmd_serve(&cfg, true);
    else if (strcmp(command->name, "worker") == 0)
        rc = cmd_serve(&cfg, false);
    else if (strcmp(command->name, "partitions") == 0)
        rc = cmd_partitions(&cfg);
    else
        rc = cmd_token(&cfg, cli.user, cli.admin, cli.ttl);
    config_cleanup(&cfg);
    return rc;
}
