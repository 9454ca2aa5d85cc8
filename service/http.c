#include "http.h"

#include "api.h"
#include "app.h"
#include "body.h"
#include "log.h"
#include "metrics.h"
#include "req.h"
#include "resp.h"
#include "util.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* A keep-alive connection that has been quiet this long while nothing is
 * in flight is idle: its client sends nothing, so closing it cuts off no
 * answer (RFC 9112 9.3.1: clients retry requests on a closed idle one). */
#define DRAIN_IDLE_GRACE_MS 500

struct http_server {
    struct MHD_Daemon *daemon;
    struct app *app;
    _Atomic int inflight;    /* requests read and not yet fully answered */
    _Atomic int connections; /* open client connections */
    _Atomic int64_t last_request_ms;
    atomic_bool stopping; /* the connections are about to be closed */
};

/* Per-request state, created on the first access-handler call and freed
 * only in the completed callback: the one hook MHD runs even when the
 * client goes away mid-request. */
struct exchange {
    struct http_server *srv;
    struct req req;
    struct resp resp;
    struct body body;
    int64_t start_ns;
    char request_id[72];
    bool too_large; /* the body outgrew the limit; keep discarding it */
    bool queued;
};

const char *req_header(const struct req *r, const char *name)
{
    return MHD_lookup_connection_value(r->transport, MHD_HEADER_KIND, name);
}

const char *req_query(const struct req *r, const char *name)
{
    return MHD_lookup_connection_value(r->transport, MHD_GET_ARGUMENT_KIND, name);
}

/* An X-Request-Id from the client is echoed only if it is short and
 * harmless in logs and headers; otherwise we make one. */
static bool request_id_ok(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_' || c == '.' || c == ':';
        if (!ok || n >= 64)
            return false;
    }
    return n > 0;
}

struct framing {
    int content_lengths;
    bool lengths_differ;
    const char *first_length;
    bool transfer_encoding;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    struct framing *f = cls;
    (void)kind;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (f->content_lengths > 0 && strcmp(f->first_length, value) != 0)
            f->lengths_differ = true;
        if (f->content_lengths == 0)
            f->first_length = value;
        f->content_lengths++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->transfer_encoding = true;
    }
    return MHD_YES;
}

static struct exchange *exchange_new(struct http_server *srv, struct MHD_Connection *c,
                                     const char *url, const char *method)
{
    struct exchange *x = xcalloc(1, sizeof *x);
    x->srv = srv;
    x->start_ns = mono_ns();
    resp_init(&x->resp);
    body_init(&x->body, (size_t)srv->app->cfg->max_body);

    const char *rid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
    if (rid != NULL && request_id_ok(rid)) {
        strcpy(x->request_id, rid);
    } else {
        unsigned char raw[12];
        rand_bytes(raw, sizeof raw);
        hex_encode(raw, sizeof raw, x->request_id);
    }
    x->req.method = method;
    x->req.path = url;
    x->req.request_id = x->request_id;
    x->req.route = ROUTE_NOT_FOUND;
    x->req.app = srv->app;
    x->req.transport = c;
    return x;
}

static void exchange_free(struct exchange *x)
{
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
        log_access(x->request_id, x->req.method, router_pattern(x->req.route), w->status,
                   secs * 1e3, w->code, w->layer);
    return ret;
}

/* Checks the request line and headers before any body byte is read.
 * Returns false with x->resp set when the request must be refused now. */
static bool precheck(struct MHD_Connection *c, struct exchange *x)
{
    struct framing f = {0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    /* Both a length and chunked, or two different lengths, are how request
     * smuggling starts: a proxy and we could disagree on where this request
     * ends. Refuse rather than guess. */
    if (f.content_lengths > 0 && f.transfer_encoding) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL,
                     "Content-Length and Transfer-Encoding must not both be sent");
        return false;
    }
    if (f.lengths_differ) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL, "conflicting Content-Length headers");
        return false;
    }
    if (f.content_lengths > 0) {
        int64_t n;
        if (!parse_i64(f.first_length, 0, INT64_MAX, &n)) {
            resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL, "malformed Content-Length");
            return false;
        }
        /* Answer 413 before reading a byte of an announced oversized body. */
        if (n > x->srv->app->cfg->max_body) {
            resp_problem(&x->resp, PROBLEM_PAYLOAD_TOO_LARGE, NULL,
                         "the body may be at most %d bytes", x->srv->app->cfg->max_body);
            return false;
        }
    }
    return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    struct http_server *srv = cls;
    struct exchange *x = *state;
    (void)version;

    if (x == NULL) {
        x = exchange_new(srv, c, url, method);
        *state = x;
        atomic_fetch_add(&srv->inflight, 1);
        atomic_store(&srv->last_request_ms, mono_ms());
        metrics_add(M_INFLIGHT_REQUESTS, 1);
        if (!precheck(c, x))
            return send_response(c, x, true);
        /* Queue nothing yet, even without a body: a response queued on the
         * first call is sent with Connection: close, which costs every
         * keep-alive client a new connection. */
        return MHD_YES;
    }

    if (*upload_size > 0) {
        /* A chunked body has no length up front: count as it arrives, keep
         * none of it past the limit, and answer at the final call (MHD
         * refuses a response queued mid-upload). */
        if (!x->too_large && body_append(&x->body, upload_data, *upload_size) != 0) {
            x->too_large = true;
            body_cleanup(&x->body);
        }
        *upload_size = 0;
        return MHD_YES;
    }

    if (x->too_large) {
        resp_problem(&x->resp, PROBLEM_PAYLOAD_TOO_LARGE, NULL, "the body may be at most %d bytes",
                     srv->app->cfg->max_body);
        return send_response(c, x, true);
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
    api_dispatch(&x->req, &x->resp);
    return send_response(c, x, false);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode why)
{
    struct http_server *srv = cls;
    struct exchange *x = *state;
    (void)c;
    if (x == NULL)
        return;
    if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK && !x->queued)
        log_debug("request %s ended before a response (code %d)", x->request_id, (int)why);
    exchange_free(x);
    *state = NULL;
    atomic_fetch_sub(&srv->inflight, 1);
    metrics_add(M_INFLIGHT_REQUESTS, -1);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_server *srv = cls;
    (void)c;
    (void)socket_context;
    atomic_fetch_add(&srv->connections, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decoding for paths and query arguments, in place, except "%00":
 * MHD's own decoder turns it into a NUL that ends the string early, so
 * "/api/v1/admin/audit%00.css" would route as the audit (and a cache in
 * front could keep it as a stylesheet). Left encoded, it matches no route. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r != '\0'; r++) {
        int hi, lo;
        if (r[0] == '%' && (hi = hex_value(r[1])) >= 0 && (lo = hex_value(r[2])) >= 0 &&
            (hi | lo) != 0) {
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
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

struct http_server *http_start(struct app *app)
{
    const struct config *cfg = app->cfg;
    struct http_server *s = xcalloc(1, sizeof *s);
    s->app = app;

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, cfg->bind, &addr.sin_addr) != 1) {
        log_error("TICKETD_BIND=%s is not an IPv4 address", cfg->bind);
        free(s);
        return NULL;
    }

    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | MHD_USE_TURBO;
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned int)cfg->threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)cfg->conn_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->conn_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)1024, MHD_OPTION_END);
    if (s->daemon == NULL) {
        log_error("cannot listen on %s:%d", cfg->bind, cfg->port);
        free(s);
        return NULL;
    }
    log_info("listening on http://%s:%d with %d threads", cfg->bind, cfg->port, cfg->threads);
    return s;
}

void http_quiesce(struct http_server *s)
{
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
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

void http_stop(struct http_server *s)
{
    if (s == NULL)
        return;
    MHD_stop_daemon(s->daemon);
    free(s);
}
