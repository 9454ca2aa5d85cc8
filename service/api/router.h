/* router.h - the static route table: which route a method and path name,
 * and 404 versus 405 with the Allow list. Pure; thread-safe. */
#ifndef TICKETD_ROUTER_H
#define TICKETD_ROUTER_H

#include <stddef.h>

enum route_id {
    ROUTE_LIVEZ,
    ROUTE_HEALTHZ,
    ROUTE_READYZ,
    ROUTE_METRICS,
    ROUTE_TOKENS_CREATE,
    ROUTE_ORDERS_CREATE,
    ROUTE_ORDERS_BATCH,
    ROUTE_ORDERS_LIST,
    ROUTE_ORDER_GET,
    ROUTE_ORDER_CANCEL,
    ROUTE_ORDER_COMPLETE,
    ROUTE_PAYMENT_CALLBACK,
    ROUTE_SESSIONS_CREATE,
    ROUTE_SESSION_GET,
    ROUTE_ME,
    ROUTE_ADMIN_AUDIT,
    ROUTE_COUNT,
    /* Not routes: what router_match() answers when none fits. */
    ROUTE_NOT_FOUND = -1,
    ROUTE_METHOD_NOT_ALLOWED = -2,
};

#define ROUTER_MAX_PARAMS 2
#define ROUTER_PARAM_MAX  64

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

/* The route's pattern, e.g. "/api/v1/orders/{order_no}": the label used in
 * metrics and logs (bounded, unlike raw paths). */
const char *router_pattern(int route);

#endif
