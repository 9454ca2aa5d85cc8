/* main.c - ticketd's commands: serve, worker, token, dead-letters. Boot order is config,
 * log, ports (store, cache), then the HTTP server; shutdown runs it
 * backwards after draining. */
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
               "\n"
               "Settings come from TICKETD_* environment variables; FILE holds the same\n"
               "KEY=VALUE lines, and the environment wins over it.\n");
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
    const char *cmd = argv[1];
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("ticketd %s\n", TICKETD_VERSION);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "dead-letters") == 0)
        return deadletters_main(argc - 1, argv + 1);
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "c:u:at:h", opts, NULL)) != -1) {
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
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    if (config_load(&cfg, config_path) != TD_OK) {
        config_cleanup(&cfg);
        return 2;
    }
    if (strcmp(cmd, "serve") == 0) {
        rc = cmd_serve(&cfg, true);
    } else if (strcmp(cmd, "worker") == 0) {
        rc = cmd_serve(&cfg, false);
    } else if (strcmp(cmd, "token") == 0) {
        if (user == 0) {
            fprintf(stderr, "ticketd: token needs --user ID\n");
            rc = 2;
        } else {
            rc = cmd_token(&cfg, user, admin, ttl);
        }
    } else {
        usage(stderr);
        rc = 2;
    }
    config_cleanup(&cfg);
    return rc;
}
