/* req.h - one HTTP request as handlers see it, without the HTTP library.
 *
 * The transport (http.c, or a test) owns every struct req and everything it
 * points to; handlers borrow them for the duration of the call. Headers and
 * query arguments are read through the transport's own functions
 * (struct req_source), so the API calls nothing of the transport's by name
 * and the transport is the only one of the two that knows the other. Not
 * thread-safe: it belongs to its request, on that request's loop. */
#ifndef TICKETD_REQ_H
#define TICKETD_REQ_H

#include "auth.h"
#include "router.h"

#include <stdbool.h>
#include <stddef.h>

struct app;

/* How the transport looks up what it parsed. Both return a borrowed value
 * valid until the request ends, or NULL when absent; header names are
 * case-insensitive. ctx is struct req's transport. */
struct req_source {
    const char *(*header)(void *ctx, const char *name);
    const char *(*query)(void *ctx, const char *name);
};

struct req {
    const char *method;
    const char *version; /* "HTTP/1.1" */
    const char *path;    /* without the query string */
    const char *request_id;
    const char *body; /* NUL-terminated; NULL when there is none */
    size_t body_len;
    int route; /* set by api_dispatch */
    struct route_match match;
    struct identity who; /* set by api_dispatch for authenticated routes */
    struct app *app;
    const struct req_source *src; /* the transport's look-ups */
    void *transport;              /* their ctx */
    /* What a route's quick step hands to its blocking step (api.h); freed
     * with ctx_free when the request ends. */
    void *ctx;
    void (*ctx_free)(void *ctx);
};

/* Returns the borrowed value of a request header (case-insensitive), or
 * NULL. Valid until the handler returns. */
static inline const char *req_header(const struct req *r, const char *name)
{
    return r->src->header(r->transport, name);
}

/* Returns the borrowed value of a query argument, or NULL. */
static inline const char *req_query(const struct req *r, const char *name)
{
    return r->src->query(r->transport, name);
}

#endif
