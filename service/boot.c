/* boot.c - what serve, worker and partitions run: the adapters chosen
 * behind the ports, the boot (config, log, ports), the background parts
 * and the HTTP server, and the drain and shutdown, which run the boot
 * backwards. Apart from main.c, which reads the command line: this is the
 * composition root's wiring, the one place that knows every layer. */
#include "boot.h"

#include "app.h"
#include "cache_naive.h"
#include "consume_naive.h"
#include "consumers.h"
#include "defences.h"
#include "err.h"
#include "faults.h"
#include "http.h"
#include "job.h"
#include "keywait_job.h"
#include "liveness.h"
#include "relay.h"
#include "log.h"
#include "respcache.h"
#include "router.h"
#include "store_naive.h"
#include "bloom_job.h"
#include "cache.h"
#include "config.h"
#include "idem.h"
#include "metrics.h"
#include "order_naive.h"
#include "order_steps.h"
#include "store.h"
#include "store_mysql.h"
#include "stream.h"
#include "retention.h"
#include "retention_job.h"
#include "sweep.h"
#include "util.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
    stream_init();
    return TD_OK;
}

static void ports_cleanup(void)
{
    cache_cleanup();
    store_cleanup();
}

/* The tables chosen, kept for the adapters, which borrow them. */
static struct cache_entries chosen_cache;
static struct store_mysql_steps chosen_store;
static struct store_events_steps chosen_events;
static struct order_steps chosen_orders;

/* The adapters behind the ports, chosen once from the defences that are
 * on: each entry is the real one, or with its defence switched off (the
 * demo, defences_check_env) the naive one that the defence exists to
 * replace, as one TLS backend stands behind one table; the domain's own
 * steps that have a naive version (order_steps.h) are chosen the same way.
 * A defence that skips a whole layer (the response cache, the token, ...)
 * is the domain's to skip: it has no entry here. */
static void choose_adapters(struct app *app)
{
    unsigned on = app->defences;
    chosen_cache = cache_redis_entries;
    if (!(on & DEFENCE_TOKEN_ATOMIC)) {
        chosen_cache.token_take = cache_naive_token_take;
        chosen_cache.key_begin = cache_naive_key_begin;
    }
    if (!(on & DEFENCE_LOCK_OWNER_CHECK)) {
        chosen_cache.key_complete = &cache_naive_complete;
        chosen_cache.key_release = &cache_naive_release;
    }
    if (!(on & DEFENCE_BLOOM_LIVENESS))
        chosen_cache.bloom_check = cache_naive_bloom_check;
    cache_naive_init();
    cache_redis_use(&chosen_cache);

    chosen_store = store_mysql_steps;
    bool look_first = !(on & DEFENCE_UNIQUE_INDEX), read_stock = !(on & DEFENCE_STOCK_CAS);
    if (look_first || read_stock)
        chosen_store.order_place = look_first && read_stock ? store_naive_place_both
                                   : look_first             ? store_naive_place_look_first
                                                            : store_naive_place_read_stock;
    if (!(on & DEFENCE_STATE_CAS)) {
        chosen_store.read_for_move = store_naive_read_plain;
        chosen_store.move = store_naive_move_blind;
    }
    store_mysql_use(&chosen_store);

    chosen_events = store_events_steps;
    if (!(on & DEFENCE_CONSUMER_DEDUP_SAME_TX))
        chosen_events.consume = store_naive_consume_apart;
    /* The ledger is the business key that outlives the dedup row. The
     * lessons of the consumer's own dedup (skipped, or keyed by the stream
     * entry) run without it, so that each shows what its own mistake costs;
     * business-key-after-expiry takes the ledger away alone. */
    unsigned ledger = DEFENCE_BUSINESS_KEY_AFTER_EXPIRY | DEFENCE_CONSUMER_DEDUP |
                      DEFENCE_CONSUMER_DEDUP_BUSINESS_KEY;
    if ((on & ledger) != ledger)
        chosen_events.points_ledger = store_naive_no_ledger;
    store_events_use(&chosen_events);

    app->dedup_key = (on & DEFENCE_CONSUMER_DEDUP_BUSINESS_KEY) ? consumers_key_by_business
                                                                : consume_naive_key_by_entry;

    chosen_orders = (struct order_steps){0}; /* NULL: the real step */
    if (!(on & DEFENCE_FORGET_FAILURES))
        chosen_orders.end_failure = order_naive_remember_failure;
    if (!(on & DEFENCE_TOKEN_ATOMIC))
        chosen_orders.token_to_record = order_naive_no_token_record;
    if (!(on & DEFENCE_UNIQUE_INDEX))
        chosen_orders.copy_found_by = LAYER_CHECK_THEN_INSERT;
    if (!(on & DEFENCE_ITEM_KEYS))
        chosen_orders.item_key = order_naive_fresh_item_key;
    app->order_steps = &chosen_orders;
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
    if (defences_parse(cfg->defences, &app->defences, err, sizeof err) != TD_OK) {
        log_error("TICKETD_DEFENSES=%s: %s", cfg->defences, err);
        return TD_EINVAL;
    }
    if (defences_check_env(app->defences, cfg->env) != TD_OK)
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
    struct jobs *background;
    struct jobs *serving;
};

/* The background work (job.h), started in this order. */
static const struct job *const background_jobs[] = {
    &relay_job, &consumers_job, &sweep_job, &retention_job, &bloom_job,
};

/* What only a server runs, beside its listener. */
static const struct job *const serving_jobs[] = {&liveness_job, &keywait_job};

/* A job's thread gives back, at its end, what it owns of MySQL and Redis:
 * the runner calls these for the connections the job says it uses. */
static const struct job_hooks job_hooks = {
    .store_release = store_thread_release,
    .cache_release = cache_thread_release,
};

/* A loop's connections (http.h): the MySQL connection a request's fiber
 * borrowed from the loop's pool, given back after the request, and, at the
 * loop thread's end, whatever it still owns of MySQL and Redis. Wired here, the
 * composition root, so that the transport needs neither port. */
static void loop_thread_end(void)
{
    store_thread_release();
    cache_thread_release();
}

static const struct http_loop_hooks loop_hooks = {
    .after_request = store_fiber_idle,
    .end = loop_thread_end,
};

#define N_JOBS(table) (sizeof(table) / sizeof(table)[0])

/* Starts the background work unless this is a server with
 * TICKETD_WORKERS=0, and for a server the liveness beat and the listener.
 * false when one could not start (logged). */
static bool start_parts(struct app *app, const struct config *cfg, bool http, struct running *r)
{
    if (!http || cfg->workers) {
        r->background = jobs_start(app, background_jobs, N_JOBS(background_jobs), &job_hooks);
        if (r->background == NULL)
            return false;
    }
    if (http) {
        if ((r->serving = jobs_start(app, serving_jobs, N_JOBS(serving_jobs), &job_hooks)) ==
                NULL ||
            (r->srv = http_start(app, &loop_hooks)) == NULL)
            return false;
    }
    return true;
}

/* Stops what start_parts started, in the order that lets every request in
 * flight finish first; NULL parts are skipped. Returns the number of
 * requests the HTTP server abandoned at the drain's deadline (http_stop):
 * then the rest is left running, and the caller exits at once. */
static int stop_parts(struct running *r)
{
    jobs_stop(r->background);
    int abandoned = http_stop(r->srv);
    if (abandoned > 0)
        return abandoned;
    /* Every request has been answered and has released what it held: the
     * process can say it is gone. */
    jobs_stop(r->serving);
    *r = (struct running){0};
    return 0;
}

/* Readiness turns 503 first so a load balancer stops sending; then each
 * loop accepts the connections already waiting in its accept queue and
 * closes its listener once the queue is empty (closing it earlier would
 * reset them); then requests in flight finish (each releasing its own
 * locks and markers) before anything is torn down. All of it within
 * TICKETD_DRAIN_TIMEOUT_S, fibers included (http_stop). Returns false
 * when some did not finish within it. */
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

int cmd_serve(struct config *cfg, bool http)
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
    log_spill_start();
    if (boot(&app, cfg) == TD_OK && start_parts(&app, cfg, http, &r)) {
        log_info("ticketd %s %s (pid %d)", TICKETD_VERSION, http ? "serving" : "working",
                 (int)getpid());
        sigwait(&set, &sig);
        log_info("signal %d: draining", sig);
        bool clean = drain(&app, cfg, &r);
        int abandoned = stop_parts(&r);
        if (abandoned > 0) {
            /* Their fibers are parked at Redis or MySQL and hold what the
             * cleanup below would free; their keys' markers and locks, and
             * this instance's liveness key, are left to expire, as after a
             * crash (defences.md). */
            log_error("%d requests abandoned at the drain deadline of %d s; exiting", abandoned,
                      cfg->drain_timeout_s);
            log_spill_stop();
            _exit(EXIT_FAILURE);
        }
        rc = clean ? EXIT_SUCCESS : EXIT_FAILURE;
        log_info("stopped");
    } else {
        stop_parts(&r); /* what started before a part failed to */
    }
    store_thread_release();
    cache_thread_release();
    ports_cleanup();
    respcache_free(app.respcache);
    log_spill_stop();
    return rc;
}

/* `ticketd partitions`: one round of the retention job, in the foreground. */
int cmd_partitions(struct config *cfg, int wait_ms)
{
    struct app app = {0};
    struct retention_report r[RETAINED_TABLES];
    int rc = EXIT_FAILURE;
    if (boot(&app, cfg) == TD_OK) {
        /* Run by hand, it waits for a round another instance is doing
         * (by default for as long as that round's lease can last), then
         * does its own. */
        if (wait_ms < 0)
            wait_ms = RETENTION_LEASE_MS;
        rc = retention_round(cfg, retention_now(cfg, wall_s()), wait_ms, r) == TD_OK ? EXIT_SUCCESS
                                                                                     : EXIT_FAILURE;
        retention_print(stdout, r);
        if (rc == EXIT_SUCCESS && r[0].deferred_to[0] != '\0')
            rc = EXIT_FAILURE; /* the holder never gave the lease back */
    }
    store_thread_release();
    cache_thread_release();
    ports_cleanup();
    respcache_free(app.respcache);
    return rc;
}
