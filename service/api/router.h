/* router.h - the route table (routes.def) as data: which route a method and
 * path name, 404 versus 405 with the Allow list, and each route's access,
 * body kind, where its handler runs and metrics label. Pure (it names no
 * handler, so it links alone); thread-safe. */
#ifndef TICKETD_ROUTER_H
#define TICKETD_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

enum route_id {
#define ROUTE(id, method, pattern, handler, quick, runs, access, body, label) ROUTE_##id,
#include "routes.def"
#undef ROUTE
    ROUTE_COUNT,
    /* Not routes: what router_match() answers when none fits. */
    ROUTE_NOT_FOUND = -1,
    ROUTE_METHOD_NOT_ALLOWED = -2,
};

/* Who may call a route. */
enum route_access {
    ROUTE_ACCESS_PUBLIC,
    ROUTE_ACCESS_USER,  /* a valid bearer token */
    ROUTE_ACCESS_ADMIN, /* ... of an administrator */
};

/* What a route takes as a body. */
enum route_body {
    ROUTE_BODY_NONE,     /* GET: a body is ignored */
    ROUTE_BODY_OPTIONAL, /* empty accepted; a non-empty one must be JSON */
    ROUTE_BODY_REQUIRED, /* must be JSON */
};

/* Where a route's handler runs (routes.def's runs). */
enum route_runs {
    ROUTE_RUNS_FIBER,  /* it waits for Redis or MariaDB: on a fiber of the request's loop */
    ROUTE_RUNS_INLINE, /* it touches no dependency: on the loop, at once */
};

/* One row of routes.def, without its handler (api.c has those). */
struct route_info {
    const char *method;
    const char *pattern;
    enum route_runs runs;
    enum route_access access;
    enum route_body body;
    const char *label;
};

#define ROUTER_MAX_PARAMS 2
/* Long enough for any key or id a route takes, so that a too long one
 * reaches its handler's own refusal (a key of 65 characters is 400
 * IDEMPOTENCY_KEY_INVALID, not an unknown path). */
#define ROUTER_PARAM_MAX 256

struct route_match {
    char params[ROUTER_MAX_PARAMS][ROUTER_PARAM_MAX + 1];
    int nparams;
    char allow[64]; /* set for ROUTE_METHOD_NOT_ALLOWED, e.g. "GET, HEAD" */
};

/* Matches method and path (no query string). Returns a route id, or
 * ROUTE_NOT_FOUND, or ROUTE_METHOD_NOT_ALLOWED with m->allow filled in.
 * A {param} segment matches 1..ROUTER_PARAM_MAX characters without '/'.
 * HEAD matches GET routes. m is cleared on entry. */
int router_match(const char *method, const char *path, struct route_match *m);

/* The row of a route id in 0..ROUTE_COUNT-1; NULL for anything else. */
const struct route_info *router_route(int route);

/* The route's pattern, e.g. "/api/v1/orders/{order_no}"; "(unmatched)"
 * or "(method not allowed)" for the negative ids and anything out of
 * range. */
const char *router_pattern(int route);

/* The route's label, e.g. "/api/v1/orders/{order_no}": what metrics and
 * logs name it by. "(unmatched)" or "(method not allowed)" for the
 * negative ids and anything out of range. */
const char *router_label(int route);

#endif
