/* req.h - one HTTP request as handlers see it, without the HTTP library.
 *
 * http.c owns every struct req and everything it points to; handlers borrow
 * them for the duration of the call. Not thread-safe: one request, one
 * thread. */
#ifndef TICKETD_REQ_H
#define TICKETD_REQ_H

#include "auth.h"
#include "router.h"

#include <stdbool.h>
#include <stddef.h>

struct app;

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
    void *transport; /* http.c's connection, for req_header and req_query */
    /* What a route's quick step hands to its blocking step (api.h); freed
     * with ctx_free when the request ends. */
    void *ctx;
    void (*ctx_free)(void *ctx);
};

/* Returns the borrowed value of a request header (case-insensitive), or
 * NULL. Valid until the handler returns. */
const char *req_header(const struct req *r, const char *name);
/* Returns the borrowed value of a query argument, or NULL. */
const char *req_query(const struct req *r, const char *name);

#endif
