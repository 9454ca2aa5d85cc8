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
#include <assert.h>
#include <errno.h>
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
#include <sys/socket.h>

/* A connection that holds no request, has nothing unread and has been
 * quiet this long since it was opened or last answered is idle: its
 * client sends nothing, so closing it cuts off no answer (RFC 9112 9.3.1:
 * clients retry requests on a closed idle one). The drain judges each
 * connection by it (http_conns_unsettled). */
#define DRAIN_IDLE_GRACE_MS 500

/* Each connection's memory pool in libmicrohttpd (32 KiB, its default):
 * the request head is parsed in it, the body passes through it, and the
 * answer's header block is written into what is left. With 16 KiB, a head
 * of 15.6 KiB left no room for that block: the order was committed and
 * its answer never sent ("failed to create response header"). */
#define HTTP_CONN_MEMORY (32 * 1024)

static void late_watch(struct http_loop *hl);

static struct exchange *exchange_new(struct http_loop *hl, struct MHD_Connection *c,
                                     const char *url, const char *method, const char *version)
{
    struct http_server *srv = hl->srv;
    struct exchange *x = xcalloc(1, sizeof *x);
    x->srv = srv;
    x->hl = hl;
    x->live_next = hl->live;
    if (hl->live != NULL)
        hl->live->live_prev = x;
    hl->live = x;
    late_watch(hl);
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
    if (x->live_prev != NULL)
        x->live_prev->live_next = x->live_next;
    else
        x->hl->live = x->live_next;
    if (x->live_next != NULL)
        x->live_next->live_prev = x->live_prev;
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

    double secs = (double)(mono_ns() - x->start_ns) / 1e9;
    metrics_request(x->req.route, w->status, secs);
    if (x->srv->app->cfg->access_log)
        log_access(x->request_id, x->req.method, router_label(x->req.route), w->status, secs * 1e3,
                   w->code, w->layer);
    return ret;
}

/* ---- a late answer, named ----
 *
 * Every request gets its answer, and the answer goes out as soon as it is
 * ready: that is the loop's promise. This is how a break of it shows. An
 * exchange still open LATE_ANSWER_MS after its head arrived is logged
 * once, with its request id (the client's X-Request-Id, so a client left
 * without an answer finds its line), where it is (on a fiber, waiting on a
 * suspended connection, its answer ready), whether its answer is queued in
 * libmicrohttpd, and whether libmicrohttpd has the connection suspended.
 * A request that is slow on purpose (a Prefer: wait, a held fault point)
 * is logged too: its phase says so. The check only looks; it runs no part
 * of the daemon, so it cannot hide what it is there to show. */
#define LATE_ANSWER_MS 5000

static const char *phase_name(int phase)
{
    switch (phase) {
    case PHASE_AT_FIBER:
        return "on its fiber";
    case PHASE_SUSPENDED:
        return "on its fiber, connection suspended by ticketd";
    case PHASE_DONE:
        return "answer ready";
    default:
        return "not handed to a fiber";
    }
}

/* libmicrohttpd's own word on whether c is suspended. */
static bool mhd_suspended(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_SUSPENDED);
    return ci != NULL && ci->suspended == MHD_YES;
}

static void late_check(void *arg)
{
    struct http_loop *hl = arg;
    int64_t now = mono_ns(), next_ms = -1;
    hl->late_armed = false;
    for (struct exchange *x = hl->live; x != NULL; x = x->live_next) {
        if (x->late_logged)
            continue;
        int64_t age_ms = (now - x->start_ns) / 1000000;
        if (age_ms < LATE_ANSWER_MS) {
            int64_t left = LATE_ANSWER_MS - age_ms;
            if (next_ms < 0 || left < next_ms)
                next_ms = left;
            continue;
        }
        x->late_logged = true;
        /* Still on its fiber: slow on purpose or waiting on Redis or
         * MariaDB, which their own timeouts bound. Its answer ready and not
         * out: the break this check is for. */
        bool stuck = x->phase == PHASE_DONE || x->queued;
        log_at(stuck ? LOG_WARN : LOG_INFO,
               "late answer: request %s %s %s on loop %d, %lld ms since its head: %s; "
               "answer %s; libmicrohttpd: %s",
               x->request_id, x->method, x->path, hl->index, (long long)age_ms,
               phase_name(x->phase), x->queued ? "queued" : "not queued",
               x->conn == NULL          ? "connection gone"
               : mhd_suspended(x->conn) ? "suspended"
                                        : "not suspended");
    }
    if (next_ms >= 0) {
        loop_timer_start(hl->loop, &hl->late_timer, (int)next_ms + 1, late_check, hl);
        hl->late_armed = true;
    }
}

/* A new exchange: make sure a check will look at it. */
static void late_watch(struct http_loop *hl)
{
    if (!hl->late_armed && hl->loop != NULL) {
        loop_timer_start(hl->loop, &hl->late_timer, LATE_ANSWER_MS, late_check, hl);
        hl->late_armed = true;
    }
}

/* ---- the daemon on its loop ----
 *
 * The daemon has no thread of its own: MHD_USE_EPOLL without an internal
 * polling thread keeps its sockets in an epoll set of its own, whose fd
 * sits in the loop's set. The loop runs it (MHD_run, which serves what is
 * ready without blocking) on three occasions, and these are all it needs:
 *
 * - its epoll fd is readable: a socket has news (a request, room to write);
 * - MHD_get_timeout's wait is over (mhd_arm_timer after every run). It is
 *   0 while libmicrohttpd's own ready list holds a connection with work
 *   left, such as an answer queued in this run and written by the next,
 *   or a request whose handler is to be called again. That list, not the
 *   kernel's set, is where such a connection lives: with MHD_USE_TURBO a
 *   new connection enters the kernel's set only once a read or write finds
 *   its socket dry, and a resumed one is put on the list, not back in the
 *   set;
 * - a connection was resumed (answer_ready). libmicrohttpd 0.9.75 has no
 *   wake-up channel in this mode: MHD_start_daemon drops MHD_USE_ITC,
 *   which MHD_ALLOW_SUSPEND_RESUME asks for, when there is no internal
 *   polling thread ("useless if we are using 'external' select", daemon.c).
 *   So MHD_resume_connection only marks the connection, and nothing wakes
 *   the loop: whoever resumes runs the daemon in the same turn
 *   (mhd_run_soon). That run moves the connection back to the ready list
 *   and calls its handler, which queues the answer; the timeout of 0 then
 *   brings the run that writes it.
 *
 * A late answer would show in the log (late_check above) with its phase
 * and MHD's suspended flag; none did in the runs docs/speed.md records. */

static void mhd_drive(void *arg);
static void mhd_run_soon(struct http_loop *hl);

static void mhd_arm_timer(struct http_loop *hl)
{
    MHD_UNSIGNED_LONG_LONG ms;
    if (MHD_get_timeout(hl->daemon, &ms) == MHD_YES)
        loop_timer_start(hl->loop, &hl->mhd_timer, ms > INT_MAX ? INT_MAX : (int)ms, mhd_drive, hl);
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
    MHD_run(hl->daemon);
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

/* The fiber has the answer in x->resp. If the connection was suspended
 * meanwhile, it is resumed and the daemon run in this turn (nothing else
 * would wake it, see above); if not, its handler is due to be called again
 * anyway (MHD keeps it on its ready list, and the timer of the run that
 * handed it over is 0), and that call queues the answer. x may be freed by
 * the run: it is not touched after. */
static void answer_ready(struct http_loop *hl, struct exchange *x)
{
    int was = x->phase;
    x->phase = PHASE_DONE;
    if (x->abandoned) {
        exchange_free(x); /* nobody to answer: the connection is gone */
    } else if (was == PHASE_SUSPENDED) {
        /* Resuming a connection that is not suspended is undefined in
         * libmicrohttpd; the phase and MHD must agree. */
        assert(mhd_suspended(x->conn));
        MHD_resume_connection(x->conn);
        mhd_run_soon(hl);
    }
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
    struct conn_slot *slot = http_slot_of(c);
    /* A connection that was cut (http_conns.c) is closed with nothing
     * done: this head was still in the kernel's buffer, and its answer
     * could not be written. */
    if (slot != NULL && slot->cut)
        return MHD_NO;
    struct exchange *x = exchange_new(hl, c, url, method, version);
    *state = x;
    x->slot = slot;
    if (slot != NULL)
        slot->busy = true;
    atomic_fetch_add(&srv->inflight, 1);
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
     * deadline or shedding may cut it off; one that was cut while its body
     * arrived is closed with nothing done (see exchange_begin). Both are
     * decided on this loop's thread, where the shedding runs too. */
    if (x->slot != NULL && x->phase == PHASE_NONE && !x->queued) {
        if (x->slot->cut)
            return MHD_NO;
        x->slot->body_done = true;
    }
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
    if (x->slot != NULL) {
        /* The connection waits for its next request head from now on. */
        x->slot->idle_since_ms = mono_ms();
        x->slot->body_done = false;
        x->slot->busy = false;
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
    http_reap_start(hl);
    loop_run(hl->loop);
    loop_io_stop(hl->loop, &hl->mhd_io);
    loop_timer_stop(hl->loop, &hl->mhd_timer);
    loop_timer_stop(hl->loop, &hl->late_timer);
    hl->late_armed = false;
    loop_timer_stop(hl->loop, &hl->reap_timer);
    loop_timer_stop(hl->loop, &hl->stop_timer);
    /* Fibers still parked (stopped at the drain's deadline) hold this
     * thread's MySQL and Redis links: they are left to the exit. */
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

struct http_server *http_start(struct app *app, const struct http_thread_hooks *hooks)
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

/* ---- the drain ----
 *
 * Each loop's daemon has a listening socket of its own (SO_REUSEPORT),
 * with its own accept queue, and Linux resets every connection still in
 * that queue when the socket is closed: clients whose handshake the kernel
 * completed, and who sent their request, while the process was too busy
 * (or stopped) to accept them. So the drain takes each socket back from
 * its daemon (MHD_quiesce_daemon: MHD accepts no more), accepts on the
 * loop's thread whatever waits in the queue and hands it to the daemon
 * (MHD_add_connection), and closes the socket only when accept() finds
 * the queue empty. Every request on those connections is served like any
 * other, its answer saying Connection: close. A client that connects
 * after the close is refused (ECONNREFUSED): it sent nothing. One whose
 * handshake completes in the instant between that last accept() and the
 * close() is still reset; the kernel has no way to close a listener
 * atomically with its queue. */

static void close_listener(struct http_loop *hl)
{
    if (hl->listen_fd < 0)
        return;
    loop_io_stop(hl->loop, &hl->listen_io);
    close(hl->listen_fd);
    hl->listen_fd = -1;
    atomic_store(&hl->listener_closed, true);
}

/* On hl's thread: accepts what waits in the queue, as long as the daemon
 * is below its limit; at the limit, the socket is left alone until a
 * connection closes (http_on_connection watches it again). */
static void accept_queued(struct http_loop *hl)
{
    bool added = false;
    while (hl->listen_fd >= 0) {
        if (atomic_load(&hl->connections) >= hl->conn_limit) {
            loop_io_change(hl->loop, &hl->listen_io, 0);
            break;
        }
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(hl->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                close_listener(hl); /* the queue is empty: nobody is reset */
                break;
            }
            /* Out of descriptors or buffers: the queue keeps the rest
             * until a connection closes and gives one back. */
            log_warn("http: loop %d cannot accept a queued connection while draining: %s",
                     hl->index, strerror(errno));
            loop_io_change(hl->loop, &hl->listen_io, 0);
            break;
        }
        /* On failure MHD closes fd itself (and says why, on_mhd_log). */
        if (MHD_add_connection(hl->daemon, fd, (struct sockaddr *)&ss, len) == MHD_YES)
            added = true;
    }
    /* The daemon serves a connection added to it in its next run. */
    if (added)
        mhd_run_soon(hl);
}

static void listener_ready(void *arg, unsigned ready)
{
    (void)ready;
    accept_queued(arg);
}

/* On the loop's thread: MHD_run may be under way nowhere else. */
static void quiesce_daemon(struct http_loop *hl)
{
    MHD_socket fd = MHD_quiesce_daemon(hl->daemon);
    if (fd == MHD_INVALID_SOCKET) {
        atomic_store(&hl->listener_closed, true);
        return;
    }
    hl->listen_fd = fd;
    loop_io_start(hl->loop, &hl->listen_io, fd, LOOP_READ, listener_ready, hl);
    accept_queued(hl);
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

static bool listeners_closed(struct http_server *s)
{
    for (int i = 0; i < s->nloops; i++) {
        if (s->loops[i].thread_started && !atomic_load(&s->loops[i].listener_closed))
            return false;
    }
    return true;
}

/* On the loop's thread: how many of its connections the drain must still
 * wait for (http_conns_unsettled). */
static void count_unsettled(struct http_loop *hl)
{
    atomic_store(&hl->unsettled, http_conns_unsettled(hl, DRAIN_IDLE_GRACE_MS));
}

/* Every connection has closed, or those left are idle: no request in
 * hand, nothing unread, and quiet for DRAIN_IDLE_GRACE_MS since it was
 * opened or last answered. Each loop looks at its own. */
static bool connections_settled(struct http_server *s)
{
    if (atomic_load(&s->connections) == 0)
        return true;
    if (atomic_load(&s->inflight) != 0)
        return false;
    for_each_loop(s, count_unsettled);
    for (int i = 0; i < s->nloops; i++) {
        if (atomic_load(&s->loops[i].unsettled) != 0)
            return false;
    }
    return true;
}

static bool nothing_in_flight(struct http_server *s)
{
    return atomic_load(&s->inflight) == 0;
}

int http_drain(struct http_server *s, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    s->drain_deadline_ms = deadline;
    /* The queued connections are accepted first, then the listeners
     * closed (http_quiesce began it; a daemon at its limit goes on as its
     * connections close). */
    if (!wait_until(s, listeners_closed, deadline)) {
        log_error("http: the accept queues were not empty after %d ms; closing the listeners "
                  "resets what waits in them",
                  timeout_ms);
        for_each_loop(s, close_listener);
    }
    /* Every answer now says Connection: close, so each busy connection
     * ends after its next answer. A request counts as in flight from its
     * head until its answer's last byte is sent (the completed callback),
     * so waiting for the count answers every request that was read,
     * completely. */
    wait_until(s, connections_settled, deadline);
    /* What is left is idle. A request arriving on it from now on is
     * refused with 503 before it changes anything (on_request). */
    atomic_store(&s->stopping, true);
    wait_until(s, nothing_in_flight, deadline);
    return atomic_load(&s->inflight);
}

/* On the loop's thread, at the drain's deadline: the fibers still running
 * wait for Redis or MySQL past it. The loop ends without them; their
 * clients get no answer, which the exit status says (boot.c). */
static void stop_at_deadline(void *arg)
{
    struct http_loop *hl = arg;
    log_error("http: loop %d stops with %d requests still at Redis or MySQL past the drain "
              "deadline",
              hl->index, hl->fibers);
    loop_stop(hl->loop);
}

/* On the loop's thread: the loop ends once its last request fiber has
 * (each resumes its connection with the answer first), or at the drain's
 * deadline, whichever comes first. */
static void stop_when_idle(void *arg)
{
    struct http_loop *hl = arg;
    hl->stop_when_idle = true;
    close_listener(hl);
    if (hl->fibers == 0) {
        loop_stop(hl->loop);
        return;
    }
    int64_t deadline = hl->srv->drain_deadline_ms;
    if (deadline == 0)
        deadline = mono_ms() + (int64_t)hl->srv->app->cfg->drain_timeout_s * 1000;
    int64_t left = deadline - mono_ms();
    loop_timer_start(hl->loop, &hl->stop_timer, left > 0 ? (int)left : 0, stop_at_deadline, hl);
}

int http_stop(struct http_server *s)
{
    if (s == NULL)
        return 0;
    for (int i = 0; i < s->nloops; i++) {
        if (s->loops[i].thread_started)
            loop_post(s->loops[i].loop, stop_when_idle, &s->loops[i]);
    }
    int abandoned = 0;
    for (int i = 0; i < s->nloops; i++) {
        struct http_loop *hl = &s->loops[i];
        if (hl->thread_started)
            pthread_join(hl->thread, NULL);
        abandoned += hl->fibers;
    }
    /* A loop that ended at the deadline with fibers still parked: they
     * hold its exchanges, its connections and its MySQL and Redis links,
     * and nothing will run them again. All is left to the exit. */
    if (abandoned > 0)
        return abandoned;
    /* The loops have ended: their daemons are stopped from here, which
     * closes what connections are left (their completed callbacks run on
     * this thread). */
    for (int i = 0; i < s->nloops; i++) {
        struct http_loop *hl = &s->loops[i];
        if (hl->daemon != NULL)
            MHD_stop_daemon(hl->daemon);
        loop_free(hl->loop);
    }
    free(s->loops);
    http_conns_cleanup(s);
    free(s);
    return 0;
}
