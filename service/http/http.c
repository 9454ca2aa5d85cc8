/* http.c - the HTTP server's start: one event loop per core, each on a
 * thread of its own with a libmicrohttpd daemon of its own on the same
 * port (SO_REUSEPORT), and its share of the limits. The rest is in the
 * files named after it: a request from its first call to its answer
 * (http_exchange.c), what its head must be (http_head.c), the daemon
 * driven by its loop (http_mhd.c), a late answer named (http_late.c), the
 * connections' deadlines and shedding (http_conns.c), and the drain and
 * the stop (http_drain.c). */
#include "http.h"

#include "app.h"
#include "fiber.h"
#include "http_internal.h"
#include "log.h"
#include "loop.h"
#include "util.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Each connection's memory pool in libmicrohttpd (32 KiB, its default):
 * the request head is parsed in it, the body passes through it, and the
 * answer's header block is written into what is left. With 16 KiB, a head
 * of 15.6 KiB left no room for that block: the order was committed and
 * its answer never sent ("failed to create response header"). */
#define HTTP_CONN_MEMORY (32 * 1024)

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    (void)cls;
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_warn("http: %s", msg);
}

/* Each loop's share of TICKETD_MAX_FIBERS, the bound on requests on fibers
 * over the whole server, rounded up. A fiber costs a stack's touched pages
 * (fiber.h), so the bound is memory's as much as the database's. */
static int fibers_per_loop(const struct config *cfg, int nloops)
{
    return (cfg->max_fibers + nloops - 1) / nloops;
}

/* Each daemon takes an equal share of TICKETD_CONN_LIMIT, rounded up: the
 * kernel spreads new connections evenly over the listeners, and each
 * loop sheds its own daemon's (http_conns.c). */
static int conn_limit_per_loop(const struct config *cfg, int nloops)
{
    return (cfg->conn_limit + nloops - 1) / nloops;
}

static struct MHD_Daemon *daemon_start(struct http_loop *hl, const struct sockaddr_in *addr)
{
    const struct config *cfg = hl->srv->app->cfg;
    /* No internal thread and no wake-up channel: the loop runs the daemon
     * (http_mhd.c). The per-address limit is counted over every daemon
     * (http_conns.c), so MHD's own, per daemon, is off. */
    unsigned int flags =
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME;
    return MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, http_on_request, hl, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_LISTENING_ADDRESS_REUSE,
        (unsigned int)1, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)hl->conn_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
        http_on_completed, hl, MHD_OPTION_NOTIFY_CONNECTION, http_on_connection, hl,
        MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, http_uri_logger, hl, MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned int)1024, MHD_OPTION_END);
}

static void *loop_main(void *p)
{
    struct http_loop *hl = p;
    const struct http_loop_hooks *hooks = &hl->srv->hooks;
    http_mhd_attach(hl);
    http_reap_start(hl);
    loop_run(hl->loop);
    http_mhd_detach(hl);
    http_late_stop(hl);
    loop_timer_stop(hl->loop, &hl->reap_timer);
    loop_timer_stop(hl->loop, &hl->stop_timer);
    /* Fibers still parked (stopped at the drain's deadline) hold this
     * loop's MySQL and Redis links: they are left to the exit. */
    if (hooks->end != NULL && hl->fibers == 0)
        hooks->end();
    fiber_pool_drain();
    return NULL;
}

static bool loop_start(struct http_loop *hl, const struct sockaddr_in *addr)
{
    const struct config *cfg = hl->srv->app->cfg;
    int nloops = hl->srv->nloops;
    hl->fibers_max = fibers_per_loop(cfg, nloops);
    hl->conn_limit = conn_limit_per_loop(cfg, nloops);
    hl->loop = loop_new(hl->index, nloops);
    if (hl->loop == NULL)
        return false;
    hl->daemon = daemon_start(hl, addr);
    if (hl->daemon == NULL) {
        log_error("cannot listen on %s:%d", cfg->bind, cfg->port);
        return false;
    }
    if (pthread_create(&hl->thread, NULL, loop_main, hl) != 0) {
        log_error("cannot start loop thread %d of %d", hl->index + 1, nloops);
        return false;
    }
    char name[16];
    snprintf(name, sizeof name, "loop-%d", hl->index);
    pthread_setname_np(hl->thread, name);
    hl->thread_started = true;
    return true;
}

struct http_server *http_start(struct app *app, const struct http_loop_hooks *hooks)
{
    const struct config *cfg = app->cfg;
    struct http_server *s = xcalloc(1, sizeof *s);
    s->app = app;
    if (hooks != NULL)
        s->hooks = *hooks;
    http_conns_init(s);

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, cfg->bind, &addr.sin_addr) != 1) {
        log_error("TICKETD_BIND=%s is not an IPv4 address", cfg->bind);
        http_stop(s);
        return NULL;
    }

    s->nloops = cfg->loops > 0 ? cfg->loops : 1; /* config_resolve made 0 the cores */
    s->loops = xcalloc((size_t)s->nloops, sizeof *s->loops);
    for (int i = 0; i < s->nloops; i++) {
        s->loops[i].srv = s;
        s->loops[i].index = i;
        s->loops[i].listen_fd = -1; /* MHD's until the drain */
        if (!loop_start(&s->loops[i], &addr)) {
            http_stop(s);
            return NULL;
        }
    }
    log_info("listening on http://%s:%d with %d event loops (TICKETD_LOOPS), each serving at "
             "most %d requests on fibers at once (TICKETD_MAX_FIBERS=%d over all)",
             cfg->bind, cfg->port, s->nloops, s->loops[0].fibers_max, cfg->max_fibers);
    return s;
}
