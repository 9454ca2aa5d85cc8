#include "http.h"

#include "api.h"
#include "app.h"
#include "body.h"
#include "log.h"
#include "metrics.h"
#include "req.h"
#include "resp.h"
#include "util.h"
#include "workers.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
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

/* The largest head ticketd serves, counted as the pool holds it: its bytes,
 * plus HEAD_ENTRY_COST for each header, cookie and query argument the
 * parser keeps (a 56-byte list entry, aligned), plus the Cookie value
 * again (the parser splits a copy). A head within it leaves at least
 * 8 KiB of the pool for the answer, whatever else a client pipelined
 * behind it, against the ~1 KiB the largest answer's header block needs;
 * a larger one is refused with 431 before anything is done. Heads beyond
 * what the pool can parse at all (~30 KiB) get libmicrohttpd's own 431. */
#define HEAD_MAX        (16 * 1024)
#define HEAD_ENTRY_COST 64

/* How often the reaper looks for connections past their deadlines, and
 * for the connection count near its cap. */
#define REAP_INTERVAL_MS 100

/* One client connection, from MHD's "started" to its "closed" notice. The
 * reaper reads it under conns_mu; MHD closes the socket only after the
 * "closed" notice, which takes the same mutex, so fd is always this
 * connection's while the slot is listed. */
struct conn_slot {
    int fd;
    const char *uri; /* the request target as MHD first saw it (uri_logger) */
    size_t uri_len;
    _Atomic bool busy;             /* a request's head has arrived */
    _Atomic bool body_done;        /* ... and its body: it is being answered */
    _Atomic int64_t idle_since_ms; /* opened, or its last answer sent */
    bool reaped;                   /* shut down for a late head */
    struct conn_slot *prev, *next;
};

struct http_server {
    struct MHD_Daemon *daemon;
    struct app *app;
    _Atomic int inflight;    /* requests read and not yet fully answered */
    _Atomic int connections; /* open client connections */
    _Atomic int64_t last_request_ms;
    atomic_bool stopping; /* the connections are about to be closed */

    struct workers *workers;  /* the blocking part of requests */
    pthread_mutex_t conns_mu; /* guards the list of slots */
    struct conn_slot *conns;
    pthread_t reaper;
    atomic_bool reaper_stop;
    bool reaper_started;
};

/* Per-request state, created on the first access-handler call and freed
 * only in the completed callback: the one hook MHD runs even when the
 * client goes away mid-request. */
#define TRIMMED_MAX 8

struct exchange {
    struct http_server *srv;
    struct conn_slot *slot;     /* the connection's, for the head deadline */
    char *trimmed[TRIMMED_MAX]; /* header values without trailing blanks */
    int ntrimmed;
    struct req req;
    struct resp resp;
    struct body body;
    int64_t start_ns;
    char request_id[72];
    bool too_large; /* the body outgrew the limit; keep discarding it */
    bool queued;
    /* The blocking step on a worker (see hand_to_worker): the connection
     * is suspended meanwhile and resumed with the answer ready. */
    struct MHD_Connection *conn;
    _Atomic int phase; /* enum worker_phase */
};

/* Where a request handed to a worker is. The worker moves it to DONE;
 * whoever finds the other side already past its step does the resume. */
enum worker_phase {
    PHASE_NONE,      /* not handed to a worker */
    PHASE_AT_WORKER, /* queued or running; the connection is not suspended */
    PHASE_SUSPENDED, /* still running; the connection is suspended */
    PHASE_DONE,      /* the answer is in x->resp */
};

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* RFC 9110 5.5: whitespace around a field value is not part of it. MHD
 * strips the leading blanks; the trailing ones are cut here, into a copy
 * that lives as long as the exchange. ctx is the exchange (req_source). */
static const char *exchange_header(void *ctx, const char *name)
{
    struct exchange *x = ctx;
    const char *v = NULL;
    size_t n = 0;
    if (MHD_lookup_connection_value_n(x->conn, MHD_HEADER_KIND, name, strlen(name), &v, &n) !=
            MHD_YES ||
        v == NULL)
        return NULL;
    if (n == 0 || !blank(v[n - 1]))
        return v;
    while (n > 0 && blank(v[n - 1]))
        n--;
    if (x->ntrimmed == TRIMMED_MAX)
        return NULL; /* never: no handler reads that many headers */
    char *copy = xstrndup(v, n);
    x->trimmed[x->ntrimmed++] = copy;
    return copy;
}

static const char *exchange_query(void *ctx, const char *name)
{
    struct exchange *x = ctx;
    return MHD_lookup_connection_value(x->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* What the API reads of a request, through struct req. */
static const struct req_source exchange_source = {exchange_header, exchange_query};

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

/* Headers that say one thing once. A second copy is ambiguous (which one
 * did the proxy in front of us look at?), so it is refused, not guessed. */
static const char *const singletons[] = {
    "Idempotency-Key", "X-Order-Token", "Authorization", "X-Pay-Timestamp",
    "X-Pay-Signature", "X-Request-Id",  "Content-Type",  "Host",
};
#define N_SINGLETONS (sizeof singletons / sizeof singletons[0])

/* What the header block says about framing and hygiene, and the first
 * thing wrong with it (a static text, or NULL). */
struct head_check {
    const char *bad;
    int content_lengths;
    bool lengths_differ;
    const char *first_length;
    bool transfer_encoding;
    bool unknown_coding; /* a Transfer-Encoding other than chunked */
    bool padded_coding;  /* "chunked" with blanks after it */
    int seen[N_SINGLETONS];
    const char *prev_end; /* where the previous value's text ended */
};

/* RFC 9110 5.6.2: a field name is a token. A name with a blank before the
 * colon is not one: MHD would keep "Content-Length " as an ordinary
 * header, and the body would be read as a second request (smuggling). */
static bool token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* RFC 9110 5.5: no NUL, CR, LF or other control in a value (HTAB is a
 * blank, bytes from 0x80 are obs-text). MHD cuts a value at a NUL, so
 * "Idempotency-Key: k\0tail" would read as key k: the length MHD parsed
 * tells them apart. */
static bool value_ok(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    return true;
}

/* "chunked", with n_blanks trailing blanks (libmicrohttpd strips the
 * leading ones). */
static bool is_chunked(const char *v, size_t n, size_t *n_blanks)
{
    size_t end = n;
    while (end > 0 && blank(v[end - 1]))
        end--;
    *n_blanks = n - end;
    return end == 7 && strncasecmp(v, "chunked", 7) == 0;
}

/* MHD parses the header block in place: each line's CR LF (or LF) becomes
 * NUL bytes, and names and values point into that buffer, in wire order.
 * So between the end of one value and the next name there are only the
 * one or two NULs that were the line break; anything else is the rest of
 * a value that a NUL cut short ("Idempotency-Key: k\0tail"). MHD reports
 * the cut length, so this is the only place the tail can be seen. Two
 * pointers that are not close together are not one buffer: no verdict. */
static bool hidden_bytes(const char *end, const char *next)
{
    if (end == NULL || next <= end || next - end > 64)
        return false;
    for (const char *p = end; p < next; p++) {
        if (*p != '\0')
            return true;
    }
    return false;
}

static enum MHD_Result inspect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size)
{
    struct head_check *h = cls;
    (void)kind;
    if (value == NULL)
        value = "";
    if (hidden_bytes(h->prev_end, key)) {
        h->bad = "a header value holds a NUL, CR, LF or another control character";
        return MHD_NO;
    }
    h->prev_end = value + value_size;
    bool name_ok = key_size > 0 && strlen(key) == key_size;
    for (size_t i = 0; name_ok && i < key_size; i++)
        name_ok = token_char((unsigned char)key[i]);
    if (!name_ok) {
        h->bad = "a header name is not a token (whitespace before the colon?)";
        return MHD_NO;
    }
    if (!value_ok(value, value_size)) {
        h->bad = "a header value holds a NUL, CR, LF or another control character";
        return MHD_NO;
    }
    for (size_t i = 0; i < N_SINGLETONS; i++) {
        if (strcasecmp(key, singletons[i]) == 0 && ++h->seen[i] > 1) {
            h->bad = "a header that may appear once appears twice";
            return MHD_NO;
        }
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (h->content_lengths > 0 && strcmp(h->first_length, value) != 0)
            h->lengths_differ = true;
        if (h->content_lengths == 0)
            h->first_length = value;
        h->content_lengths++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        size_t pad = 0;
        h->transfer_encoding = true;
        if (!is_chunked(value, value_size, &pad))
            h->unknown_coding = true;
        else if (pad > 0)
            h->padded_coding = true;
    }
    return MHD_YES;
}

static struct exchange *exchange_new(struct http_server *srv, struct MHD_Connection *c,
                                     const char *url, const char *method, const char *version)
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
    x->req.version = version;
    x->req.path = url;
    x->req.request_id = x->request_id;
    x->req.route = ROUTE_NOT_FOUND;
    x->req.app = srv->app;
    x->req.src = &exchange_source;
    x->req.transport = x;
    x->conn = c;
    return x;
}

static void exchange_free(struct exchange *x)
{
    if (x->req.ctx_free != NULL)
        x->req.ctx_free(x->req.ctx);
    for (int i = 0; i < x->ntrimmed; i++)
        free(x->trimmed[i]);
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

static struct conn_slot *slot_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

/* Called by MHD with the request target as it was on the request line,
 * before the query is split off and the path decoded: its length then is
 * where the target really ends, unless a NUL cut it short. */
static void *uri_logger(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    struct conn_slot *slot = slot_of(c);
    if (slot != NULL) {
        slot->uri = uri;
        slot->uri_len = strlen(uri);
    }
    return NULL;
}

/* "GET /livez\0/x HTTP/1.1" would route as /livez: on the request line the
 * version follows the target and one space, so a target that ends sooner
 * was cut by a NUL. */
static bool target_whole(const struct conn_slot *slot, const char *version)
{
    if (slot == NULL || slot->uri == NULL || version == NULL)
        return true;
    return slot->uri + slot->uri_len + 1 == version;
}

static enum MHD_Result count_entry(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size)
{
    size_t *cost = cls;
    (void)key_size;
    *cost += HEAD_ENTRY_COST;
    if (kind == MHD_HEADER_KIND && value != NULL && strcasecmp(key, "Cookie") == 0)
        *cost += value_size + 1;
    return MHD_YES;
}

/* What the head takes of the connection's pool (see HEAD_MAX). */
static size_t head_cost(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t cost = ci != NULL ? ci->header_size : 0;
    MHD_get_connection_values_n(c, MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND,
                                count_entry, &cost);
    return cost;
}

/* Checks the request line and headers before any body byte is read.
 * Returns false with x->resp set when the request must be refused now
 * (the connection is then closed: where the framing is in doubt, nothing
 * after this request on the connection can be trusted). */
static bool precheck(struct MHD_Connection *c, struct exchange *x)
{
    struct head_check h = {0};
    if (head_cost(c) > HEAD_MAX) {
        resp_problem(&x->resp, PROBLEM_HEADERS_TOO_LARGE, NULL,
                     "the request head may be at most %d bytes (each header counts %d more)",
                     HEAD_MAX, HEAD_ENTRY_COST);
        return false;
    }
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, inspect_header, &h);
    /* After the last value come its line break and the empty line: NULs. */
    if (h.bad == NULL && h.prev_end != NULL && h.prev_end[1] != '\0')
        h.bad = "a header value holds a NUL, CR, LF or another control character";
    if (h.bad == NULL && !target_whole(x->slot, x->req.version))
        h.bad = "the request target holds a NUL";
    if (h.bad != NULL) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL, "%s", h.bad);
        return false;
    }
    /* Both a length and chunked, or two different lengths, are how request
     * smuggling starts: a proxy and we could disagree on where this request
     * ends. Refuse rather than guess. */
    if (h.content_lengths > 0 && h.transfer_encoding) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL,
                     "Content-Length and Transfer-Encoding must not both be sent");
        return false;
    }
    /* "chunked " is chunked to RFC 9110 (blanks around a value are not
     * part of it) but not to libmicrohttpd 0.9.75, which compares the
     * value whole and would read the body as the next request: the two
     * disagree on where this request ends, so it is refused. */
    if (h.padded_coding) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL,
                     "Transfer-Encoding: chunked must not be followed by blanks");
        return false;
    }
    /* RFC 9112 6.1: a transfer coding we do not know leaves the body's end
     * unknown: 501, and the connection closes. Chunked bodies are refused
     * too: libmicrohttpd decodes them before ticketd sees a byte, and a
     * chunk line longer than the connection's memory (a 100 KiB chunk
     * extension) ends in its own 500 page, with no way for ticketd to
     * answer. Clients and proxies send Content-Length instead. */
    if (h.unknown_coding || h.transfer_encoding) {
        resp_problem(&x->resp, PROBLEM_NOT_IMPLEMENTED, NULL,
                     "chunked and other transfer codings are not supported: send Content-Length");
        return false;
    }
    if (h.lengths_differ) {
        resp_problem(&x->resp, PROBLEM_BAD_REQUEST, NULL, "conflicting Content-Length headers");
        return false;
    }
    if (h.content_lengths > 0) {
        int64_t n;
        if (!parse_i64(h.first_length, 0, INT64_MAX, &n)) {
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

/* Every worker busy and the queue full: say so rather than wait. */
static void overloaded(struct exchange *x)
{
    resp_problem(&x->resp, PROBLEM_DEPENDENCY_UNAVAILABLE, NULL,
                 "the server is overloaded; retry the request");
    resp_header(&x->resp, "Retry-After", "1");
}

/* On a worker thread: the blocking step, then the answer back to the
 * HTTP thread. The exchange is not touched by that thread meanwhile: it
 * only looks at the phase, and the connection, once suspended, is called
 * for nothing until it is resumed. */
static void run_blocking(void *arg, bool cancelled)
{
    struct exchange *x = arg;
    struct MHD_Connection *c = x->conn; /* x may be freed once DONE is seen */
    if (cancelled)
        overloaded(x);
    else
        api_finish(&x->req, &x->resp);
    if (atomic_exchange(&x->phase, PHASE_DONE) == PHASE_SUSPENDED)
        MHD_resume_connection(c);
}

/* The first call for a request: its head is complete. */
static enum MHD_Result exchange_begin(struct http_server *srv, struct MHD_Connection *c,
                                      const char *url, const char *method, const char *version,
                                      void **state)
{
    struct exchange *x = exchange_new(srv, c, url, method, version);
    *state = x;
    x->slot = slot_of(c);
    if (x->slot != NULL)
        atomic_store(&x->slot->busy, true);
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

/* The rest of a request blocks on Redis or MySQL. Held here, it would hold
 * up every other connection this thread serves; so a worker runs it
 * (run_blocking) while the connection is suspended.
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
 * suspended from the next call, it is resumed in that state and answered. */
static enum MHD_Result hand_to_worker(struct http_server *srv, struct exchange *x)
{
    atomic_store(&x->phase, PHASE_AT_WORKER);
    if (!workers_submit(srv->workers, run_blocking, x)) {
        overloaded(x);
        atomic_store(&x->phase, PHASE_DONE);
    }
    return MHD_YES;
}

/* Called again while a worker has the request: suspend the connection
 * until the answer is ready, unless it already is. */
static enum MHD_Result await_worker(struct MHD_Connection *c, struct exchange *x)
{
    int expected = PHASE_AT_WORKER;
    MHD_suspend_connection(c);
    if (!atomic_compare_exchange_strong(&x->phase, &expected, PHASE_SUSPENDED))
        MHD_resume_connection(c); /* DONE meanwhile: the worker did not resume */
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **state)
{
    struct http_server *srv = cls;
    struct exchange *x = *state;

    if (x == NULL)
        return exchange_begin(srv, c, url, method, version, state);

    if (*upload_size > 0) {
        /* The announced length was checked (precheck), and chunked bodies
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
    /* A request a worker has is answered with what the worker says, even
     * while stopping: its effect may be committed. */
    switch (atomic_load(&x->phase)) {
    case PHASE_DONE:
        return send_response(c, x, false);
    case PHASE_AT_WORKER:
        return await_worker(c, x);
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
    return hand_to_worker(srv, x);
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
    if (x->slot != NULL) {
        /* The connection waits for its next request head from now on. */
        atomic_store(&x->slot->idle_since_ms, mono_ms());
        atomic_store(&x->slot->body_done, false);
        atomic_store(&x->slot->busy, false);
    }
    exchange_free(x);
    *state = NULL;
    atomic_fetch_sub(&srv->inflight, 1);
    metrics_add(M_INFLIGHT_REQUESTS, -1);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_server *srv = cls;
    struct conn_slot *slot = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        slot = xcalloc(1, sizeof *slot);
        slot->fd = ci != NULL ? ci->connect_fd : -1;
        atomic_store(&slot->idle_since_ms, mono_ms());
        pthread_mutex_lock(&srv->conns_mu);
        slot->next = srv->conns;
        if (srv->conns != NULL)
            srv->conns->prev = slot;
        srv->conns = slot;
        pthread_mutex_unlock(&srv->conns_mu);
        *socket_context = slot;
        atomic_fetch_add(&srv->connections, 1);
        return;
    }
    if (slot != NULL) {
        pthread_mutex_lock(&srv->conns_mu);
        if (slot->prev != NULL)
            slot->prev->next = slot->next;
        else
            srv->conns = slot->next;
        if (slot->next != NULL)
            slot->next->prev = slot->prev;
        pthread_mutex_unlock(&srv->conns_mu);
        free(slot);
        *socket_context = NULL;
    }
    atomic_fetch_sub(&srv->connections, 1);
}

/* Slowloris: a client that opens connections and sends its request a
 * byte at a time keeps each alive forever, since MHD's timeout is an idle
 * timeout. Here a connection must complete a request head within
 * TICKETD_HEADER_TIMEOUT_S, and the whole request, head and body, within
 * TICKETD_REQUEST_TIMEOUT_S, of being opened or of its last answer;
 * otherwise its socket is shut down, and MHD closes it. A request that is
 * whole is never cut off: it is being answered. */
enum reap_reason { KEEP, LATE_HEAD, LATE_REQUEST };

static enum reap_reason reap_reason(struct conn_slot *c, int64_t now, const struct config *cfg)
{
    int64_t age = now - atomic_load(&c->idle_since_ms);
    if (!atomic_load(&c->busy))
        return age >= (int64_t)cfg->header_timeout_s * 1000 ? LATE_HEAD : KEEP;
    if (!atomic_load(&c->body_done))
        return age >= (int64_t)cfg->request_timeout_s * 1000 ? LATE_REQUEST : KEEP;
    return KEEP;
}

/* A connection that may be shed: it has no whole request in hand. */
static bool sheddable(struct conn_slot *c)
{
    return !c->reaped && c->fd >= 0 && !atomic_load(&c->body_done);
}

static int by_idle_since(const void *a, const void *b)
{
    int64_t x = atomic_load(&(*(struct conn_slot *const *)a)->idle_since_ms);
    int64_t y = atomic_load(&(*(struct conn_slot *const *)b)->idle_since_ms);
    return (x > y) - (x < y);
}

/* At the connection cap, libmicrohttpd stops accepting, and every new
 * client, however quick, waits behind whoever holds the slots: slow heads
 * and bodies from many addresses that reopen as they are closed can keep
 * the cap reached for good. So once the open connections come within
 * 1/16 of TICKETD_CONN_LIMIT, those without a whole request in hand are
 * shut down, the longest without one first (idle keep-alive connections,
 * then the slowest requests), until a quarter of the slots is free. A new
 * client's connection is the newest: it is served before its turn comes.
 * Called with conns_mu held; returns how many were shed. */
static int shed_at_cap(struct http_server *srv, int open)
{
    int cap = srv->app->cfg->conn_limit;
    int high = cap - (cap / 16 > 0 ? cap / 16 : 1), low = cap - (cap / 4 > 0 ? cap / 4 : 1);
    if (open < high)
        return 0;
    struct conn_slot **v = xcalloc((size_t)open + 1, sizeof *v);
    int n = 0;
    for (struct conn_slot *c = srv->conns; c != NULL && n <= open; c = c->next) {
        if (sheddable(c))
            v[n++] = c;
    }
    qsort(v, (size_t)n, sizeof *v, by_idle_since);
    int shed = 0;
    for (; shed < n && open - shed > low; shed++) {
        shutdown(v[shed]->fd, SHUT_RDWR);
        v[shed]->reaped = true;
    }
    free(v);
    return shed;
}

/* One pass of the reaper; the counts go to late[LATE_HEAD],
 * late[LATE_REQUEST] and *shed. */
static void reap_once(struct http_server *srv, int late[3], int *shed)
{
    int64_t now = mono_ms();
    int open = 0;
    pthread_mutex_lock(&srv->conns_mu);
    for (struct conn_slot *c = srv->conns; c != NULL; c = c->next) {
        if (c->reaped || c->fd < 0)
            continue;
        enum reap_reason why = reap_reason(c, now, srv->app->cfg);
        if (why == KEEP) {
            open++;
            continue;
        }
        shutdown(c->fd, SHUT_RDWR);
        c->reaped = true;
        late[why]++;
    }
    *shed = shed_at_cap(srv, open);
    pthread_mutex_unlock(&srv->conns_mu);
}

static void *reaper_main(void *p)
{
    struct http_server *srv = p;
    const struct config *cfg = srv->app->cfg;
    while (!atomic_load(&srv->reaper_stop)) {
        sleep_ms(REAP_INTERVAL_MS);
        int late[3] = {0}, shed = 0;
        reap_once(srv, late, &shed);
        if (late[LATE_HEAD] > 0) {
            metrics_add(M_HTTP_HEAD_TIMEOUTS, late[LATE_HEAD]);
            log_info("http: closed %d connections that sent no whole request head in %d s",
                     late[LATE_HEAD], cfg->header_timeout_s);
        }
        if (late[LATE_REQUEST] > 0) {
            metrics_add(M_HTTP_REQUEST_TIMEOUTS, late[LATE_REQUEST]);
            log_info("http: closed %d connections that sent no whole request in %d s",
                     late[LATE_REQUEST], cfg->request_timeout_s);
        }
        if (shed > 0) {
            metrics_add(M_HTTP_CONNECTIONS_SHED, shed);
            log_info("http: near the cap of %d connections, closed the %d longest without a "
                     "whole request",
                     cfg->conn_limit, shed);
        }
    }
    return NULL;
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

/* Percent-decoding for paths and query arguments, in place, except "%00"
 * and "%2F". MHD's own decoder turns %00 into a NUL that ends the string
 * early, so "/api/v1/admin/audit%00.css" would route as the audit (and a
 * cache in front could keep it as a stylesheet); a decoded %2F would make
 * "/api/v1/admin%2Faudit" route as the audit while a proxy's path rules
 * saw one segment. Left encoded, they match no route. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls;
    (void)c;
    char *w = s;
    for (const char *r = s; *r != '\0'; r++) {
        int hi, lo;
        if (r[0] == '%' && (hi = hex_value(r[1])) >= 0 && (lo = hex_value(r[2])) >= 0 &&
            (hi | lo) != 0 && hi * 16 + lo != '/') {
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

struct http_server *http_start(struct app *app, const struct workers_thread_hooks *hooks)
{
    const struct config *cfg = app->cfg;
    struct http_server *s = xcalloc(1, sizeof *s);
    s->app = app;
    pthread_mutex_init(&s->conns_mu, NULL);
    s->workers = workers_start(cfg->threads, cfg->queue_max, hooks);
    if (s->workers == NULL) {
        pthread_mutex_destroy(&s->conns_mu);
        free(s);
        return NULL;
    }

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
                         MHD_USE_ERROR_LOG | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME;
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
        on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, &addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned int)cfg->io_threads, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)cfg->conn_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)cfg->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)cfg->conn_per_ip,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        s, MHD_OPTION_STRICT_FOR_CLIENT, (int)1, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, uri_logger, NULL, MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned int)1024, MHD_OPTION_END);
    if (s->daemon == NULL) {
        log_error("cannot listen on %s:%d", cfg->bind, cfg->port);
        workers_stop(s->workers);
        pthread_mutex_destroy(&s->conns_mu);
        free(s);
        return NULL;
    }
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        log_error("cannot start the connection reaper");
        http_stop(s);
        return NULL;
    }
    s->reaper_started = true;
    log_info("listening on http://%s:%d with %d HTTP threads and %d workers", cfg->bind, cfg->port,
             cfg->io_threads, cfg->threads);
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
    if (s->reaper_started) {
        atomic_store(&s->reaper_stop, true);
        pthread_join(s->reaper, NULL);
    }
    /* Workers first: each suspended connection is resumed (with its answer,
     * or "unavailable" for a job that never started) before MHD stops. */
    workers_stop(s->workers);
    MHD_stop_daemon(s->daemon);
    pthread_mutex_destroy(&s->conns_mu);
    free(s);
}
