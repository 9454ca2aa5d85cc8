/* http.c - the HTTP server: starts the loop threads and their
 * libmicrohttpd daemons, takes each request from its first call to its
 * answer (a fiber of its loop runs the part that waits for Redis or
 * MySQL), and drains and stops. What a request head must be is in
 * http_head.c, the connections' deadlines and shedding in http_conns.c. */
#include "http.h"

#include "api.h"
#include "app.h"
#include "body.h"
#include "http_internal.h"
#include "log.h"
#include "metrics.h"
#include "req.h"
#include "resp.h"
#include "fiber.h"
#include "loop.h"
#include "util.h"

#include <arpa/inet.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A keep-alive connection that has been quiet this long while nothing is
 * in flight is idle: its client sends nothing, so closing it cuts off no
 * answer (RFC 9112 9.3.1: clients retry requests on a closed idle one). */
#define DRAIN_IDLE_GRACE_MS 500

/* Each connection's memory pool in libmicrohttpd (32 KiB, its default):
 * the request head is parsed in it, the body passes through it, and the
 * answer's header block is written into what is left. With 16 KiB, a head
 * of 15.6 KiB left no room for that block: the order was committed and
 * its answer never sent ("failed to create response header"). */
#define HTTP_CONN_MEMORY (32 * 1024)

static struct exchange *exchange_new(struct http_server *srv, struct MHD_Connection *c,
                                     const char *url, const char *method, const char *version)
{
    struct exchange *x = xcalloc(1, sizeof *x);
    x->srv = srv;
    x->start_ns = mono_ns();
    resp_init(&x->resp);
    body_init(&x->body, (size_t)srv->app->cfg->max_body);

    const char *rid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (rid != NULL && http_request_id_ok(rid)) {
        strcpy(x->request_id, rid);
    } else {
        unsigned char raw[12];
        rand_bytes(raw, sizeof raw);
        hex_encode(raw, sizeof raw, x->request_id);
    }
    x->wire_version = version;
    x->method = xstrdup(method);
    x->version = xstrdup(version);
    x->path = xstrdup(url);
    x->req.method = x->method;
    x->req.version = x->version;
    x->req.path = x->path;
    x->req.request_id = x->request_id;
    x->req.route = ROUTE_NOT_FOUND;
    x->req.app = srv->app;
    x->req.src = &http_exchange_source;
    x->req.transport = x;
    x->conn = c;
    return x;
}

static void exchange_free(struct exchange *x)
{
    if (x->req.ctx_free != NULL)
        x->req.ctx_free(x->req.ctx);
    for (int i = 0; i < x->nkept; i++) {
        free(x->kept[i].name);
        free(x->kept[i].value);
    }
    free(x->method);
    free(x->version);
    free(x->path);
    resp_reset(&x->resp);
    body_cleanup(&x->body);
    free(x);
}

/* Hands x->resp to MHD. Takes the body buffer. */
static enum MHD_Result send_response(struct MHD_Connection *c, struct exchange *x, bool close)
{
    struct resp *w = &x->resp;
    char *body = w->body;
    size_t len = w->body_len;
    w->body = NULL;
    w->body_len = 0;
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback(len, body ? body : xstrdup(""), free);
    if (r == NULL)
        return MHD_NO;
    if (w->content_type != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, w->content_type);
    MHD_add_response_header(r, "X-Request-Id", x->request_id);
    for (int i = 0; i < w->nheaders; i++)
        MHD_add_response_header(r, w->headers[i].name, w->headers[i].value);
    /* After SIGTERM every answer closes its connection, so no client sends
     * another request on a connection that is about to go away. */
    if (close || atomic_load(&x->srv->app->draining))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned int)w->status, r);
    MHD_destroy_response(r);
    x->queued = true;
    x->hl->unsent++; /* until on_completed */

    double secs = (double)(mono_ns() - x->start_ns) / 1e9;
    metrics_request(x->req.route, w->status, secs);
    if (x->srv->app->cfg->access_log)
        log_access(x->request_id, x->req.method, router_label(x->req.route), w->status, secs * 1e3,
                   w->code, w->layer);
    return ret;
}

/* ---- the daemon on its loop ----
 *
 * The daemon has no thread of its own: MHD_USE_EPOLL without an internal
 * polling thread keeps its sockets in an epoll set of its own, whose fd
 * sits in the loop's set. When it is readable, or when MHD_get_timeout's
 * wait is over, the loop calls MHD_run, which serves whatever is ready
 * without blocking. In this mode MHD has no wake-up channel (no ITC): a
 * connection resumed with MHD_resume_connection is only looked at in the
 * next MHD_run. So whoever resumes one asks for that run in the same turn
 * (mhd_run_soon); waiting for the next event would leave the answer unsent
 * until some other client happens to send something. */

static void mhd_drive(void *arg);
static void mhd_run_soon(struct http_loop *hl);

/* While an answer is queued and its request not completed, the daemon is
 * run at least this often, whatever its own timeout says: a safety net
 * for an answer that would otherwise wait for some other event (seen:
 * one answer in a quiet test, queued and never sent). mhd_drive logs a
 * run of the net's that completed answers; one written a run later is not
 * counted. */
#define UNSENT_POLL_MS 20

static void mhd_net_fired(void *arg)
{
    struct http_loop *hl = arg;
    hl->net_run = true;
    mhd_drive(hl);
}

static void mhd_arm_timer(struct http_loop *hl)
{
    MHD_UNSIGNED_LONG_LONG ms;
    bool due = MHD_get_timeout(hl->daemon, &ms) == MHD_YES;
    void (*fn)(void *) = mhd_drive;
    if (hl->unsent > 0 && (!due || ms > UNSENT_POLL_MS)) {
        ms = UNSENT_POLL_MS;
        due = true;
        fn = mhd_net_fired;
    }
    if (due)
        loop_timer_start(hl->loop, &hl->mhd_timer, ms > INT_MAX ? INT_MAX : (int)ms, fn, hl);
    else
        loop_timer_stop(hl->loop, &hl->mhd_timer);
}

/* A daemon at its connection limit takes its listening socket out of its
 * epoll set at the start of its next run, and puts it back only at the
 * start of a run after connections closed. With no thread of its own,
 * nothing runs it then: the last connections close, nothing is left to
 * wake the loop, and new clients wait in the backlog unaccepted (seen: a
 * flood of slow clients shed at the cap, then /metrics unanswered for
 * 10 s). So once it was full, the first run that leaves it below the limit
 * asks for one more, which takes the socket back and accepts. */
static void mhd_drive(void *arg)
{
    struct http_loop *hl = arg;
    /* A run takes the connections resumed before it back into its epoll
     * set, but may serve them only in the run after: with no thread of its
     * own and its wait not counting them, that run may never come, and the
     * answer waits for some other client's event (an order answered in the
     * access log never reached its client: itest_faults, about one run in
     * five). So a run that took resumed connections asks for one more. */
    bool resumed = hl->resumed, net = hl->net_run;
    int unsent = hl->unsent;
    hl->resumed = hl->net_run = false;
    MHD_run(hl->daemon);
    if (net && hl->unsent < unsent)
        log_info("http: %d answers went out only on the safety run", unsent - hl->unsent);
    if (resumed)
        mhd_run_soon(hl);
    int open = atomic_load(&hl->connections);
    if (open >= hl->conn_limit) {
        hl->was_full = true;
    } else if (hl->was_full) {
        hl->was_full = false;
        mhd_run_soon(hl);
    }
    mhd_arm_timer(hl);
}

static void mhd_ready(void *arg, unsigned ready)
{
    (void)ready;
    mhd_drive(arg);
}

static void mhd_run_soon(struct http_loop *hl)
{
    loop_soon(hl->loop, &hl->mhd_again, mhd_drive, hl);
}

/* ---- the part of a request that waits, on a fiber ---- */

/* The fiber has the answer in x->resp: the connection is resumed (if it
 * was suspended meanwhile) and MHD run again in this turn to send it. x
 * may be freed by that run: it is not touched after. */
static void answer_ready(struct http_loop *hl, struct exchange *x)
{
    int was = x->phase;
    x->phase = PHASE_DONE;
    if (x->abandoned)
        exchange_free(x); /* nobody to answer: the connection is gone */
    else if (was == PHASE_SUSPENDED) {
        MHD_resume_connection(x->conn);
        hl->resumed = true;
    }
    mhd_run_soon(hl);
    hl->fibers--;
    if (hl->stop_when_idle && hl->fibers == 0)
        loop_stop(hl->loop);
}

/* A request's fiber: the domain's code, written top to bottom; where it
 * waits for Redis or MySQL, the fiber parks and the loop serves others. */
static void run_request(void *arg)
{
    struct exchange *x = arg;
    struct http_loop *hl = x->hl;
    api_finish(&x->req, &x->resp);
    if (hl->srv->hooks.after_request != NULL)
        hl->srv->hooks.after_request();
    answer_ready(hl, x);
}

/* Every fiber of the loop taken: say so rather than wait. */
static void overloaded(struct exchange *x)
{
    resp_problem(&x->resp, PROBLEM_DEPENDENCY_UNAVAILABLE, NULL,
                 "the server is overloaded; retry the request");
    resp_header(&x->resp, "Retry-After", "1");
}

/* The first call for a request: its head is complete. */
static enum MHD_Result exchange_begin(struct http_loop *hl, struct MHD_Connection *c,
                                      const char *url, const char *method, const char *version,
                                      void **state)
{
    struct http_server *srv = hl->srv;
    struct exchange *x = exchange_new(srv, c, url, method, version);
    x->hl = hl;
    *state = x;
    x->slot = http_slot_of(c);
    if (x->slot != NULL)
        atomic_store(&x->slot->busy, true);
    atomic_fetch_add(&srv->inflight, 1);
    atomic_store(&srv->last_request_ms, mono_ms());
    metrics_add(M_INFLIGHT_REQUESTS, 1);
    bool ok = http_precheck(c, x);
    x->wire_version = NULL;
    if (!ok)
        return send_response(c, x, true);
    /* Queue nothing yet, even without a body: a response queued on the
     * first call is sent with Connection: close, which costs every
     * keep-alive client a new connection. */
    return MHD_YES;
}

/* The rest of a request waits for Redis or MySQL; a fiber of this loop
 * runs it (run_request) while the connection is suspended. The fiber
 * starts in this turn, once MHD_run has returned (never inside MHD), and
 * as many run at once as park.
 *
 * The connection is not suspended in this call, the one in which the
 * request became complete, but in the next. libmicrohttpd 0.9.75 does not
 * update what it waits for on a connection suspended inside a call: it
 * would still be "read" (as while the request arrived), so on resume it
 * reads the socket first, and a client that half-closed after its request
 * (shutdown(SHUT_WR): netcat, scripts, some proxies) shows an end of
 * stream there, on which the connection is closed with the answer unsent
 * and, for an order, its effect committed. Returning without a response
 * makes it "block" (a request that awaits its answer reads nothing more);
 * suspended from the next call, it is resumed in that state and answered.
 *
 * At most fibers_max requests of a loop are on fibers at once; beyond,
 * 503 at once, as a full worker queue answered before. */
static enum MHD_Result hand_to_fiber(struct http_loop *hl, struct exchange *x)
{
    if (hl->fibers >= hl->fibers_max || fiber_spawn(hl->loop, run_request, x) == NULL) {
        overloaded(x);
        x->phase = PHASE_DONE;
        return MHD_YES;
    }
    x->phase = PHASE_AT_FIBER;
    hl->fibers++;
    return MHD_YES;
}

/* Called again while the fiber has the request: suspend the connection
 * until the answer is ready. */
static enum MHD_Result await_fiber(struct MHD_Connection *c, struct exchange *x)
{
    MHD_suspend_connection(c);
    x->phase = PHASE_SUSPENDED;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    struct http_loop *hl = cls;
    struct http_server *srv = hl->srv;
    struct exchange *x = *state;

    if (x == NULL)
        return exchange_begin(hl, c, url, method, version, state);

    if (*upload_size > 0) {
        /* The announced length was checked (http_precheck), and chunked bodies
         * are refused; the count is kept anyway, so that no byte past the
         * limit is ever kept, and the answer waits for the final call (MHD
         * refuses a response queued mid-upload). */
        if (!x->too_large && body_append(&x->body, upload_data, *upload_size) != 0) {
            x->too_large = true;
            body_cleanup(&x->body);
        }
        *upload_size = 0;
        return MHD_YES;
    }

    /* The request is whole: from now on it is being answered, and no
     * deadline or shedding may cut it off. */
    if (x->slot != NULL)
        atomic_store(&x->slot->body_done, true);
    if (x->too_large) {
        resp_problem(&x->resp, PROBLEM_PAYLOAD_TOO_LARGE, NULL, "the body may be at most %d bytes",
                     srv->app->cfg->max_body);
        return send_response(c, x, true);
    }
    /* A request a fiber has is answered with what the fiber says, even
     * while stopping: its effect may be committed. */
    switch (x->phase) {
    case PHASE_DONE:
        return send_response(c, x, false);
    case PHASE_AT_FIBER:
        return await_fiber(c, x);
    case PHASE_SUSPENDED:
        return MHD_YES; /* never: a suspended connection is called for nothing */
    default:
        break;
    }
    if (atomic_load(&srv->stopping)) {
        /* The last moment of a shutdown: this request would be cut off
         * with its connection, so it is refused before it changes anything,
         * and the refusal says so. */
        resp_problem(&x->resp, PROBLEM_DEPENDENCY_UNAVAILABLE, NULL,
                     "the server is shutting down; retry the request");
        resp_header(&x->resp, "Retry-After", "1");
        return send_response(c, x, true);
    }
    x->req.body = x->body.data;
    x->req.body_len = x->body.len;
    if (api_begin(&x->req, &x->resp) == API_ANSWERED)
        return send_response(c, x, false);
    return hand_to_fiber(hl, x);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode why)
{
    struct http_loop *hl = cls;
    struct http_server *srv = hl->srv;
    struct exchange *x = *state;
    (void)c;
    if (x == NULL)
        return;
    if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK && !x->queued)
        log_debug("request %s ended before a response (code %d)", x->request_id, (int)why);
    if (x->queued)
        hl->unsent--;
    if (x->slot != NULL) {
        /* The connection waits for its next request head from now on. */
        atomic_store(&x->slot->idle_since_ms, mono_ms());
        atomic_store(&x->slot->body_done, false);
        atomic_store(&x->slot->busy, false);
    }
    *state = NULL;
    if (x->phase == PHASE_AT_FIBER || x->phase == PHASE_SUSPENDED) {
        /* The client went away before the connection was suspended (a
         * suspended one is not watched): the fiber still has the request
         * and frees it when it ends (answer_ready). The values it reads
         * are copies (http_head.c), and what it has not read yet reads as
         * absent. */
        x->abandoned = true;
        x->conn = NULL;
        x->slot = NULL;
    } else {
        exchange_free(x);
    }
    atomic_fetch_sub(&srv->inflight, 1);
    metrics_add(M_INFLIGHT_REQUESTS, -1);
}

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
 * kernel spreads new connections evenly over the listeners, and the
 * reaper sheds per daemon (http_conns.c). */
static int conn_limit_per_loop(const struct config *cfg, int nloops)
{
    return (cfg->conn_limit + nloops - 1) / nloops;
}

static struct MHD_Daemon *daemon_start(struct http_loop *hl, const struct sockaddr_in *addr)
{
    const struct config *cfg = hl->srv->app->cfg;
    /* No internal thread and no wake-up channel: the loop runs the daemon
     * (mhd_drive). The per-address limit is counted over every daemon
     * (http_conns.c), so MHD's own, per daemon, is off. */
    unsigned int flags =
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME;
    return MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, hl, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_LISTENING_ADDRESS_REUSE,
        (unsigned int)1, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)hl->conn_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, hl, MHD_OPTION_NOTIFY_CONNECTION, http_on_connection, hl,
        MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, http_uri_logger, hl, MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned int)1024, MHD_OPTION_END);
}

static void *loop_main(void *p)
{
    struct http_loop *hl = p;
    const struct http_thread_hooks *hooks = &hl->srv->hooks;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(hl->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    loop_io_start(hl->loop, &hl->mhd_io, di->epoll_fd, LOOP_READ, mhd_ready, hl);
    mhd_arm_timer(hl);
    loop_run(hl->loop);
    loop_io_stop(hl->loop, &hl->mhd_io);
    loop_timer_stop(hl->loop, &hl->mhd_timer);
    if (hooks->end != NULL)
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

struct http_server *http_start(struct app *app, const struct http_thread_hooks *hooks)
{
    const struct config *cfg = app->cfg;
    struct http_server *s = xcalloc(1, sizeof *s);
    s->app = app;
    if (hooks != NULL)
        s->hooks = *hooks;
    pthread_mutex_init(&s->conns_mu, NULL);
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
        if (!loop_start(&s->loops[i], &addr)) {
            http_stop(s);
            return NULL;
        }
    }
    if (pthread_create(&s->reaper, NULL, http_reaper_main, s) != 0) {
        log_error("cannot start the connection reaper");
        http_stop(s);
        return NULL;
    }
    s->reaper_started = true;
    log_info("listening on http://%s:%d with %d loop threads (TICKETD_LOOPS), each serving at "
             "most %d requests on fibers at once (TICKETD_MAX_FIBERS=%d over all)",
             cfg->bind, cfg->port, s->nloops, s->loops[0].fibers_max, cfg->max_fibers);
    return s;
}

/* Runs fn(hl) on each loop's thread and returns once every one has. */
struct on_each {
    struct http_loop *hl;
    void (*fn)(struct http_loop *hl);
    sem_t done;
};

static void on_each_run(void *arg)
{
    struct on_each *e = arg;
    e->fn(e->hl);
    sem_post(&e->done);
}

static void for_each_loop(struct http_server *s, void (*fn)(struct http_loop *hl))
{
    for (int i = 0; i < s->nloops; i++) {
        struct http_loop *hl = &s->loops[i];
        if (!hl->thread_started)
            continue;
        struct on_each e = {.hl = hl, .fn = fn};
        sem_init(&e.done, 0, 0);
        loop_post(hl->loop, on_each_run, &e);
        while (sem_wait(&e.done) != 0)
            ; /* EINTR */
        sem_destroy(&e.done);
    }
}

/* On the loop's thread: MHD_run may be under way nowhere else. */
static void quiesce_daemon(struct http_loop *hl)
{
    MHD_socket fd = MHD_quiesce_daemon(hl->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void http_quiesce(struct http_server *s)
{
    for_each_loop(s, quiesce_daemon);
}

/* Waits until done(s) or the deadline; returns done(s). */
static bool wait_until(struct http_server *s, bool (*done)(struct http_server *), int64_t deadline)
{
    while (!done(s) && mono_ms() < deadline)
        sleep_ms(10);
    return done(s);
}

/* Every connection has closed, or those left are idle: no request in
 * flight and none started for a while. */
static bool connections_settled(struct http_server *s)
{
    if (atomic_load(&s->connections) == 0)
        return true;
    return atomic_load(&s->inflight) == 0 &&
           mono_ms() - atomic_load(&s->last_request_ms) >= DRAIN_IDLE_GRACE_MS;
}

static bool nothing_in_flight(struct http_server *s)
{
    return atomic_load(&s->inflight) == 0;
}

int http_drain(struct http_server *s, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    /* The listener is closed and every answer now says Connection: close,
     * so each busy connection ends after its next answer. A request counts
     * as in flight from its head until its answer's last byte is sent
     * (the completed callback), so waiting for the count answers every
     * request that was read, completely. */
    wait_until(s, connections_settled, deadline);
    /* What is left is idle. A request arriving on it from now on is
     * refused with 503 before it changes anything (on_request). */
    atomic_store(&s->stopping, true);
    wait_until(s, nothing_in_flight, deadline);
    return atomic_load(&s->inflight);
}

/* On the loop's thread: the loop ends once its last request fiber has
 * (each resumes its connection with the answer first). */
static void stop_when_idle(void *arg)
{
    struct http_loop *hl = arg;
    hl->stop_when_idle = true;
    if (hl->fibers == 0)
        loop_stop(hl->loop);
}

void http_stop(struct http_server *s)
{
    if (s == NULL)
        return;
    if (s->reaper_started) {
        atomic_store(&s->reaper_stop, true);
        pthread_join(s->reaper, NULL);
    }
    for (int i = 0; i < s->nloops; i++) {
        if (s->loops[i].thread_started)
            loop_post(s->loops[i].loop, stop_when_idle, &s->loops[i]);
    }
    /* The loops have ended: their daemons are stopped from here, which
     * closes what connections are left (their completed callbacks run on
     * this thread). */
    for (int i = 0; i < s->nloops; i++) {
        struct http_loop *hl = &s->loops[i];
        if (hl->thread_started)
            pthread_join(hl->thread, NULL);
        if (hl->daemon != NULL)
            MHD_stop_daemon(hl->daemon);
        loop_free(hl->loop);
    }
    free(s->loops);
    http_conns_cleanup(s);
    pthread_mutex_destroy(&s->conns_mu);
    free(s);
}
