/* main.c - ticketd's commands: serve, worker, token, dead-letters, version,
 * help. Help and unknown commands are answered before any setting is read.
 * Boot order is config, log, ports (store, cache), then the HTTP server;
 * shutdown runs it backwards after draining. */
#include "app.h"
#include "auth.h"
#include "cache.h"
#include "config.h"
#include "deadletters.h"
#include "defenses.h"
#include "err.h"
#include "events.h"
#include "http.h"
#include "idem.h"
#include "liveness.h"
#include "log.h"
#include "respcache.h"
#include "store.h"
#include "store_naive.h"
#include "sweep.h"
#include "util.h"

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
            "version, help)\n",
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

static int boot(struct app *app, struct config *cfg)
{
    char err[256];
    enum log_level level;
    log_parse_level(cfg->log_level, &level);
    log_set_level(level);
    app->cfg = cfg;
    if (defenses_parse(cfg->defenses, &app->defenses, err, sizeof err) != TD_OK) {
        log_error("TICKETD_DEFENSES=%s: %s", cfg->defenses, err);
        return TD_EINVAL;
    }
    if (defenses_check_env(app->defenses, cfg->env) != TD_OK)
        return TD_EINVAL;
    cache_set_defenses(app->defenses);
    store_set_defenses(app->defenses);
    config_log(cfg);
    idem_new_instance(app->instance);
    app->respcache = respcache_new((size_t)cfg->respcache_entries);
    return ports_init(cfg);
}

static int cmd_serve(struct config *cfg, bool http)
{
    int rc = EXIT_FAILURE;
    struct app app = {0};
    struct http_server *srv = NULL;
    struct events *ev = NULL;
    struct sweep *sw = NULL;
    struct liveness *live = NULL;
    sigset_t set;
    int sig;
    bool unclean = false;

    /* glibc gives every busy thread a malloc arena of its own (up to eight
     * per core); with two dozen threads that is most of the resident memory,
     * mostly empty. Two arenas serve this many threads on a few cores. */
    mallopt(M_ARENA_MAX, 2);
    block_signals(&set);
    if (boot(&app, cfg) != TD_OK)
        goto out;
    if (!http || cfg->workers) {
        ev = events_start(&app);
        if (ev == NULL)
            goto out;
        sw = sweep_start(&app);
        if (sw == NULL)
            goto out;
    }
    if (http) {
        live = liveness_start(&app);
        if (live == NULL)
            goto out;
        srv = http_start(&app);
        if (srv == NULL)
            goto out;
    }
    log_info("ticketd %s %s (pid %d)", TICKETD_VERSION, http ? "serving" : "working",
             (int)getpid());

    sigwait(&set, &sig);
    log_info("signal %d: draining", sig);
    /* Readiness turns 503 first so a load balancer stops sending, then the
     * listener closes, then requests in flight finish (each releasing its
     * own locks and markers) before anything is torn down. */
    atomic_store(&app.draining, true);
    if (srv != NULL) {
        http_quiesce(srv);
        int left = http_drain(srv, cfg->drain_timeout_s * 1000);
        if (left > 0) {
            /* Their clients get no answer: say so in the exit status. */
            log_error("%d requests still in flight after %d s; closing them", left,
                      cfg->drain_timeout_s);
            unclean = true;
        }
    }
    sweep_stop(sw);
    sw = NULL;
    events_stop(ev);
    ev = NULL;
    http_stop(srv);
    srv = NULL;
    /* Every request has been answered and has released what it held: the
     * process can say it is gone. */
    liveness_stop(live);
    live = NULL;
    rc = unclean ? EXIT_FAILURE : EXIT_SUCCESS;
    log_info("stopped");
out:
    sweep_stop(sw);
    events_stop(ev);
    http_stop(srv);
    liveness_stop(live);
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

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"user", required_argument, NULL, 'u'},
        {"admin", no_argument, NULL, 'a'},        {"ttl", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *config_path = NULL;
    int64_t user = 0, ttl = 3600;
    bool admin = false;
    int rc = EXIT_FAILURE;
    struct config cfg;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    /* Everything that needs no settings is answered before any are read, so
     * that asking for help never fails for want of a secret. */
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
    const struct command *command = find_command(cmd);
    if (command == NULL) {
        unknown_command(cmd);
        return 2;
    }
    if (strcmp(cmd, "dead-letters") == 0)
        return deadletters_main(argc - 1, argv + 1);
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
    optind = 2;
    opterr = 0; /* the messages below name the command */
    int c;
    while ((c = getopt_long(argc, argv, ":c:u:at:h", opts, NULL)) != -1) {
        if (c == 'h')
            return command_help(cmd);
        if (c == '?' || c == ':') {
            fprintf(stderr, "ticketd %s: %s option %s\n", cmd,
                    c == ':' ? "missing the value of" : "unknown", argv[optind - 1]);
            fputs(command->help, stderr);
            return 2;
        }
        if ((command->opts & option_bit(c)) == 0) {
            fprintf(stderr, "ticketd %s: takes no %s\n", cmd, option_name(c));
            fputs(command->help, stderr);
            return 2;
        }
        switch (c) {
        case 'c':
            config_path = optarg;
            break;
        case 'u':
            if (!parse_i64(optarg, 1, AUTH_MAX_USER_ID, &user)) {
                fprintf(stderr, "ticketd: --user must be an id from 1 to 2^53-1\n");
                return 2;
            }
            break;
        case 'a':
            admin = true;
            break;
        case 't':
            if (!parse_i64(optarg, 1, 10L * 365 * 86400, &ttl)) {
                fprintf(stderr, "ticketd: --ttl must be a number of seconds\n");
                return 2;
            }
            break;
        default:
            break;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ticketd %s: unexpected argument '%s'\n", cmd, argv[optind]);
        fputs(command->help, stderr);
        return 2;
    }
    if (strcmp(cmd, "token") == 0 && user == 0) {
        fprintf(stderr, "ticketd: token needs --user ID\n");
        return 2;
    }
    if (config_load(&cfg, config_path) != TD_OK) {
        config_cleanup(&cfg);
        return 2;
    }
    if (strcmp(cmd, "serve") == 0)
        rc = cmd_serve(&cfg, true);
    else if (strcmp(cmd, "worker") == 0)
        rc = cmd_serve(&cfg, false);
    else
        rc = cmd_token(&cfg, user, admin, ttl);
    config_cleanup(&cfg);
    return rc;
}
