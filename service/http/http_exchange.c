/* http_exchange.c - one request from its first call to its answer: the
 * exchange that carries it (its copies, its body, its answer), the calls
 * libmicrohttpd makes for it (http_on_request, http_on_completed), the
 * hand-over of the part that waits for Redis or MySQL to a fiber of the
 * same loop, and the answer queued with its metrics and access log. What
 * a request head must be is http_head.c's; how the connection is
 * suspended and resumed around the fiber, http_mhd.c's. */
#include "api.h"
#include "app.h"
#include "body.h"
#include "fiber.h"
#include "http_internal.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "req.h"
#include "resp.h"
#include "util.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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
    http_late_watch(hl);
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

/* ---- the part of a request that waits, on a fiber ---- */

/* The fiber has the answer in x->resp. If the connection was suspended
 * meanwhile, it is resumed and the daemon run in this turn (nothing else
 * would wake it: http_mhd.c); if not, its handler is due to be called again
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
        http_mhd_resume(hl, x->conn);
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
    resp_header_add(&x->resp, "Retry-After", "1");
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
 * 503 at once (overloaded). */
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
    http_mhd_suspend(c);
    x->phase = PHASE_SUSPENDED;
    return MHD_YES;
}

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *c, const char *url,
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
        resp_header_add(&x->resp, "Retry-After", "1");
        return send_response(c, x, true);
    }
    x->req.body = x->body.data;
    x->req.body_len = x->body.len;
    if (api_begin(&x->req, &x->resp) == API_ANSWERED)
        return send_response(c, x, false);
    return hand_to_fiber(hl, x);
}

void http_on_completed(void *cls, struct MHD_Connection *c, void **state,
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
